//! count: Beazley's GIL experiment. Each of `actors` actors counts `n`
//! down to zero with a safe point (`threadlet::checkpoint`) per step
//! (`threadlet_examples::cpu::count`); `sequential` does the same counts one after the other on
//! the main thread.
//!
//! `total_s` runs from the first spawn until every actor is joined (the runtime is built
//! before); `per_op_ns` is wall time per count step (`total / (n * actors)`); `preemptions` is
//! how often the actors were preempted, summed. The os-threads and tokio versions run the same
//! function, whose safe point does nothing outside a threadlet actor (one thread-local read);
//! tokio tasks are never preempted.

use std::time::Instant;

use clap::Args;
use serde_json::json;

use super::Figure;
use crate::Opts;
use crate::measure::{Sample, Spec, measure};
use crate::output::Out;
use crate::plot::{Field, quantity, thousands};
use crate::runtimes::{self, Rt, RtConfig};

/// count's options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// What each actor counts down from.
    #[arg(long, default_value_t = 100_000_000)]
    pub n: u64,
    /// Actors counting at the same time.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    pub actors: u64,
    /// threadlet only: deterministic preemption every this many safe points, like
    /// `stackless.run(ticks)` (0: off; time slices of 10 ms stay on).
    #[arg(long, default_value_t = 0)]
    pub ticks: u32,
}

/// `threadlet_examples::cpu::count`, called through an opaque function pointer so that every
/// runtime runs the same machine code (inlined into different callers, the same loop was seen
/// to compile to code of different speed).
fn count(n: u64) {
    std::hint::black_box(threadlet_examples::cpu::count as fn(u64))(n)
}

/// Every runtime has a count.
pub fn supports(_: Rt) -> bool {
    true
}

/// The record's identifying fields.
pub fn spec(rt: Rt, workers: Option<usize>, migrate: bool, p: &Params) -> Spec<'static> {
    let mut params = vec![("n", json!(p.n)), ("actors", json!(p.actors))];
    if rt.scheduler().is_some() {
        params.push(("ticks", json!(p.ticks)));
    }
    Spec {
        scenario: "count",
        runtime: rt,
        workers: if rt == Rt::Sequential {
            Some(1)
        } else {
            workers
        },
        migrate,
        params,
    }
}

/// Every runtime and worker count of `opts`.
pub fn main(out: &mut Out, opts: &Opts, p: &Params) -> Result<(), String> {
    let figure = figure(p);
    super::for_each(out, opts, "count", supports, figure, |out, rt, w| {
        measure(out, spec(rt, w, opts.migrate, p), opts.repeat, || {
            run(rt, w, opts.migrate, p)
        })
    })
}

/// The plot against workers: the time to count.
fn figure(p: &Params) -> Figure {
    let ticks = super::ticks_caption(p.ticks);
    Figure {
        title: format!(
            "count: {}, each counting down from {}{ticks}",
            quantity(p.actors, "actor"),
            thousands(p.n)
        ),
        y: Field::total_ms("wall time (ms)"),
    }
}

/// One run on `rt`.
pub fn run(rt: Rt, workers: Option<usize>, migrate: bool, p: &Params) -> Result<Sample, String> {
    let (n, actors) = (p.n, p.actors as usize);
    let steps = n * actors as u64;
    match rt {
        Rt::Sequential => {
            let start = Instant::now();
            for _ in 0..actors {
                count(n);
            }
            let t = start.elapsed();
            Ok(Sample::new(t).per_op(steps, t))
        }
        Rt::WorkStealing | Rt::GlobalQueue | Rt::Gil => {
            let cfg = RtConfig {
                ticks: p.ticks,
                no_time_slice: false,
            };
            let sched = rt.scheduler().expect("a threadlet runtime");
            let runtime = runtimes::threadlet(sched, super::workers(workers), cfg);
            let start = Instant::now();
            let handles: Vec<_> = (0..actors)
                .map(|_| {
                    runtimes::spawn_on(&runtime, migrate, move || {
                        count(n);
                        threadlet::preemptions()
                    })
                })
                .collect();
            let preemptions: u64 = handles
                .into_iter()
                .map(|h| h.join().expect("count does not panic"))
                .sum();
            let t = start.elapsed();
            Ok(Sample::new(t)
                .per_op(steps, t)
                .with("preemptions", preemptions)
                .with("stats", runtimes::stats_json(&runtime.stats())))
        }
        Rt::OsThreads => {
            let start = Instant::now();
            let mut handles = Vec::with_capacity(actors);
            for i in 0..actors {
                match runtimes::os_thread("count", i, actors, move || count(n)) {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        handles
                            .into_iter()
                            .for_each(|h| h.join().expect("count does not panic"));
                        return Err(e);
                    }
                }
            }
            handles
                .into_iter()
                .for_each(|h| h.join().expect("count does not panic"));
            let t = start.elapsed();
            Ok(Sample::new(t).per_op(steps, t))
        }
        Rt::Tokio => {
            let runtime = runtimes::tokio(super::workers(workers));
            let start = Instant::now();
            let handles: Vec<_> = (0..actors)
                .map(|_| runtime.spawn(async move { count(n) }))
                .collect();
            runtime.block_on(async {
                for h in handles {
                    h.await.expect("count does not panic");
                }
            });
            let t = start.elapsed();
            Ok(Sample::new(t).per_op(steps, t))
        }
    }
}
