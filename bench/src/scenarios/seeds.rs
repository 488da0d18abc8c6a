//! seeds: every seed experiment (docs/benchmarks.md, "The seeds, reproduced") at its seed size, with the seed's own figure
//! beside ours. The seeds ran Python (Stackless tasklets, CPython threads) on the hardware of
//! their day, so the comparison says how far the idea carries, not who wins a fair race.
//!
//! | seed | experiment | ours |
//! |---|---|---|
//! | 000 | hackysack 10 players x 1000 kicks: tasklets 19.7 ms, OS threads 183 ms | work-stealing; os-threads |
//! | 000 | hackysack 100,000 players x 1000 kicks: tasklets 1.07 s, mostly setup | work-stealing |
//! | 000 | the same on OS threads: they failed at about 1,100 threads | os-threads at 10,000 players (a stated smaller size: 100,000 threads would exhaust the thread ids that every process on the machine shares), or where thread creation fails |
//! | 003 | count(100M) twice: sequential 17.4 s, two GIL threads 53.2 s, two tasklets preempted every 100 ticks 25.3 s (1000 ticks: 17.7 s) | sequential; gil, 2 workers; work-stealing, 1 worker, ticks 100 and 1000; work-stealing and os-threads in parallel (no seed figure) |
//! | 003 | 500 tasklets computing factorial(1024): 0.5 s; 500 threads 0.77 s | work-stealing; os-threads |
//! | 003 | factorial(512) and factorial(1024) under stackless.run(100): switched 13 and 26 times | 1 worker, ticks 100, one tick per multiplication |
//! | 001 | NSPR HTTP server, a 6 KB file to 10 keep-alive clients for 10 s (one CPU; zeusbench multiplexing the clients with select): user-level threads 1,024 req/s, pthreads 811 req/s | work-stealing (actor per connection); os-threads (thread per connection); tokio (task per connection, no seed figure): on 1 CPU with the clients multiplexed on one thread (the seed's shape), then on every CPU with a thread per client |
//!
//! `--quick` runs each at a stated fraction of its size (for smoke tests). `--runtime` is not
//! used: each experiment names its runtimes.

use std::time::Instant;

use clap::Args;
use serde_json::{Value, json};

use crate::measure::{Record, Sample, Spec, measure_then};
use crate::output::{Out, secs};
use crate::runtimes::{self, ActorKind, Rt, RtConfig};
use crate::{Common, Opts};

use super::{count, factorial, hackysack, http};

/// seeds' options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// Run every experiment at 1/100 of its seed size (hackysack: 1,000 players instead of
    /// 100,000, 1,100 OS threads instead of 10,000; count: 1M instead of 100M), for a quick
    /// check. Without it every experiment runs at its seed size, except hackysack on OS threads:
    /// 10,000 players, not 100,000, since that many threads would use up the thread ids that
    /// every process on the machine shares.
    #[arg(long)]
    pub quick: bool,
}

/// A seed's figure: what it says, and its time in seconds where it has one.
type Seed = (&'static str, Option<f64>);

/// One row of the closing summary.
struct Row {
    experiment: String,
    ours: String,
    seed: String,
}

/// How many games, counts, factorial runs, HTTP shapes and HTTP servers the command measures
/// (the lists' types say so, so that the progress total follows them).
const GAMES: usize = 6;
const COUNTS: usize = 6;
const FACTS: usize = 3;
const HTTP_SHAPES: usize = 2;
const SERVERS: usize = 3;

/// Runs every seed experiment.
pub fn main(out: &mut Out, common: &Common, p: &Params) -> Result<(), String> {
    if !common.runtime.is_empty() {
        out.line("note: seeds ignores --runtime: each experiment names its runtimes");
    }
    let ncpu = num_cpus::get().max(1);
    let opts = Opts::resolve(common, &[Rt::WorkStealing], vec![ncpu]);
    let w = opts.workers[0];
    let (repeat, migrate) = (opts.repeat, opts.migrate);
    let q = p.quick;
    if q {
        out.line("note: --quick: every experiment at 1/100 of its seed size");
    } else {
        out.line(
            "note: hackysack on OS threads runs 10,000 players, not the seed's 100,000: that many \
             threads would use up the thread ids every process on this machine shares",
        );
    }
    // Measurements: each list below has its length in its type; one of forced switches.
    out.sweep(Some(GAMES + COUNTS + FACTS + 1 + HTTP_SHAPES * SERVERS));
    let mut rows = Vec::new();

    // 000: hackysack.
    let small = (10, 1000);
    let big = if q { 1000 } else { 100_000 };
    // OS threads at the seed's 100,000 would exhaust the machine's thread ids (pid_max is
    // often 32,768, shared by every process), disturbing everything else that runs there.
    let threads_big = if q { 1100 } else { 10_000 };
    let games: [(usize, Rt, ActorKind, &str, Option<f64>); GAMES] = [
        (
            small.0,
            Rt::WorkStealing,
            ActorKind::Process,
            "Stackless tasklets: 19.7 ms",
            Some(0.0197),
        ),
        (
            small.0,
            Rt::WorkStealing,
            ActorKind::Handler,
            "Stackless tasklets: 19.7 ms",
            Some(0.0197),
        ),
        (
            small.0,
            Rt::OsThreads,
            ActorKind::Process,
            "Python OS threads: 183 ms",
            Some(0.183),
        ),
        (
            big,
            Rt::WorkStealing,
            ActorKind::Process,
            "Stackless tasklets, 100,000 players: 1.07 s, mostly setup",
            Some(1.07),
        ),
        (
            big,
            Rt::WorkStealing,
            ActorKind::Handler,
            "Stackless tasklets, 100,000 players: 1.07 s, mostly setup",
            Some(1.07),
        ),
        (
            threads_big,
            Rt::OsThreads,
            ActorKind::Process,
            "Python OS threads: failed at about 1,100 threads",
            None,
        ),
    ];
    for (players, rt, kind, seed, seed_s) in games {
        let wk = rt.has_workers().then_some(w);
        let name = match kind {
            ActorKind::Handler => {
                format!(
                    "hackysack {players} players x {} kicks, handler actors",
                    small.1
                )
            }
            ActorKind::Process => format!("hackysack {players} players x {} kicks", small.1),
        };
        let mut spec = hackysack::spec(rt, wk, migrate, players as u64, small.1);
        if rt.scheduler().is_some() {
            spec.params.push(("actor", json!(kind.name())));
        }
        experiment(out, &mut rows, &name, seed, seed_s, spec, repeat, || {
            hackysack::run_kind(rt, wk, migrate, players, small.1, kind)
        });
    }

    // 003: count(100M) twice.
    let n = if q { 1_000_000 } else { 100_000_000 };
    // (runtime, workers, ticks, the seed's figure)
    let counts: [(Rt, Option<usize>, u32, Seed); COUNTS] = [
        (
            Rt::Sequential,
            None,
            0,
            ("CPython, sequential: 17.4 s", Some(17.4)),
        ),
        (
            Rt::Gil,
            Some(2),
            0,
            ("CPython, two threads under the GIL: 53.2 s", Some(53.2)),
        ),
        (
            Rt::WorkStealing,
            Some(1),
            100,
            (
                "Stackless, two tasklets preempted every 100 ticks: 25.3 s",
                Some(25.3),
            ),
        ),
        (
            Rt::WorkStealing,
            Some(1),
            1000,
            ("Stackless, every 1000 ticks: 17.7 s", Some(17.7)),
        ),
        (
            Rt::WorkStealing,
            Some(2),
            0,
            (
                "(no seed figure: CPython cannot run them in parallel)",
                None,
            ),
        ),
        (
            Rt::OsThreads,
            None,
            0,
            (
                "(no seed figure: CPython cannot run them in parallel)",
                None,
            ),
        ),
    ];
    for (rt, wk, ticks, (seed, seed_s)) in counts {
        let params = count::Params {
            n,
            actors: 2,
            ticks,
        };
        let mut name = format!("count({n}) twice");
        if ticks > 0 {
            name += &format!(", preempted every {ticks} ticks");
        }
        experiment(
            out,
            &mut rows,
            &name,
            seed,
            seed_s,
            count::spec(rt, wk, migrate, &params),
            repeat,
            || count::run(rt, wk, migrate, &params),
        );
    }

    // 003: 500 actors computing factorial(1024), once, the tasklets preempted every 100 ticks
    // as under the seed's `stackless.run(100)`. (The seed's products are Python's big integers;
    // ours wrap in a `u64`, a multiplication a nanosecond: the run is mostly the spawning and
    // joining of 500 actors or threads.)
    let facts: [(Rt, &str, Option<f64>, u32); FACTS] = [
        (
            Rt::WorkStealing,
            "Stackless, 500 tasklets, run(100): 0.5 s",
            Some(0.5),
            100,
        ),
        (Rt::OsThreads, "Python, 500 threads: 0.77 s", Some(0.77), 0),
        (Rt::Sequential, "(no seed figure)", None, 0),
    ];
    for (rt, seed, seed_s, ticks) in facts {
        let wk = rt.has_workers().then_some(w);
        let params = factorial::Params {
            actors: 500,
            n: 1024,
            times: 1,
            ticks,
        };
        let mut name = "500 actors computing factorial(1024)".to_string();
        if ticks > 0 {
            name += &format!(", preempted every {ticks} ticks");
        }
        experiment(
            out,
            &mut rows,
            &name,
            seed,
            seed_s,
            factorial::spec(rt, wk, migrate, &params),
            repeat,
            || factorial::run(rt, wk, migrate, &params),
        );
    }

    // 003: forced switches under stackless.run(100).
    let spec = Spec {
        scenario: "factorial",
        runtime: Rt::WorkStealing,
        workers: Some(1),
        migrate,
        params: vec![
            ("n", json!([512, 1024])),
            ("ticks", json!(100)),
            ("actors", json!(2)),
        ],
    };
    let switches = experiment(
        out,
        &mut rows,
        "factorial(512), factorial(1024): forced switches at 100 ticks",
        "Stackless run(100): 13 and 26 switches (counting bytecodes)",
        None,
        spec,
        repeat,
        || {
            let cfg = RtConfig {
                ticks: 100,
                no_time_slice: true,
            };
            let rt = runtimes::threadlet(threadlet::Scheduler::WorkStealing, 1, cfg);
            let start = Instant::now();
            let a = runtimes::spawn_on(&rt, migrate, || {
                threadlet_examples::cpu::factorial(512);
                threadlet::preemptions()
            });
            let b = runtimes::spawn_on(&rt, migrate, || {
                threadlet_examples::cpu::factorial(1024);
                threadlet::preemptions()
            });
            let switches = [a.join().expect("no panic"), b.join().expect("no panic")];
            Ok(Sample::new(start.elapsed()).with("preemptions", json!(switches)))
        },
    );
    if let (Some(rec), Some(row)) = (switches, rows.last_mut()) {
        row.ours = format!(
            "{} switches",
            rec.get("preemptions")
                .map(Value::to_string)
                .unwrap_or_default()
        );
    }

    // 001: the NSPR HTTP server, 10 keep-alive clients for 10 s (0.1 s with --quick): first
    // in the seed's shape (one CPU, one worker, the clients multiplexed on one thread, as
    // zeusbench's were with select), then on every CPU with a thread per client.
    let seconds = if q { 0.1 } else { 10.0 };
    let shapes: [_; HTTP_SHAPES] = [
        (
            "HTTP, 6 KB body, 10 keep-alive clients, 1 CPU, multiplexed clients",
            http::Params {
                clients: 10,
                seconds,
                load: http::LoadShape::Multiplexed,
                cpus: Some(1),
            },
            1,
        ),
        (
            "HTTP, 6 KB body, 10 keep-alive clients, every CPU, a thread per client",
            http::Params {
                clients: 10,
                seconds,
                load: http::LoadShape::Threads,
                cpus: None,
            },
            w,
        ),
    ];
    let servers: [(Rt, &str); SERVERS] = [
        (Rt::WorkStealing, "NSPR user-level threads: 1,024 req/s"),
        (Rt::OsThreads, "NSPR pthreads: 811 req/s"),
        (Rt::Tokio, "(no seed figure)"),
    ];
    for (name, params, workers) in &shapes {
        for (rt, seed) in servers {
            let wk = rt.has_workers().then_some(*workers);
            let rec = experiment(
                out,
                &mut rows,
                name,
                seed,
                None,
                http::spec(rt, wk, params),
                repeat,
                || http::run(rt, wk, params),
            );
            if let (Some(rec), Some(row)) = (rec, rows.last_mut()) {
                let rps = rec.get("req_per_s").and_then(Value::as_f64).unwrap_or(0.0);
                row.ours = format!("{rps:.0} req/s ({})", row.ours);
            }
        }
    }

    if !out.is_json() {
        println!();
        let width = rows.iter().map(|r| r.experiment.len()).max().unwrap_or(0);
        let ours_width = rows.iter().map(|r| r.ours.len()).max().unwrap_or(0);
        println!("{:<width$}  {:<ours_width$}  seed", "experiment", "ours");
        for r in rows {
            println!(
                "{:<width$}  {:<ours_width$}  {}",
                r.experiment, r.ours, r.seed
            );
        }
    }
    Ok(())
}

/// Measures one experiment, adding the seed's figure to its record and a row to the summary.
#[allow(clippy::too_many_arguments)]
fn experiment(
    out: &mut Out,
    rows: &mut Vec<Row>,
    name: &str,
    seed: &str,
    seed_s: Option<f64>,
    spec: Spec<'_>,
    repeat: usize,
    run: impl FnMut() -> Result<Sample, String>,
) -> Option<Record> {
    let who = match spec.workers {
        Some(1) if spec.runtime != Rt::Sequential => format!("{}, 1 worker", spec.runtime),
        Some(w) if spec.runtime != Rt::Sequential => format!("{}, {w} workers", spec.runtime),
        _ => spec.runtime.to_string(),
    };
    let rec = measure_then(out, spec, repeat, run, |rec| {
        rec.insert("experiment".into(), json!(name));
        rec.insert("seed".into(), json!(seed));
        if let Some(s) = seed_s {
            rec.insert("seed_total_s".into(), json!(s));
        }
    });
    let ours = match &rec {
        Some(r) => {
            let t = r.get("total_s").and_then(Value::as_f64).unwrap_or(0.0);
            format!("{} ({who})", secs(t))
        }
        None => format!("failed ({who}), see above"),
    };
    rows.push(Row {
        experiment: name.to_string(),
        ours,
        seed: seed.to_string(),
    });
    rec
}
