//! spawn: spawn `actors` empty actors from one actor (or, with `--from outside`, from the
//! bench's own thread, outside the runtime), then join them all.
//!
//! `total_s` covers the spawns and the joins (the handle vector is allocated before the clock
//! starts); `per_op_ns` is wall time per actor (spawn + run + exit + join). `rss_bytes` is the
//! peak resident memory during the run. The os-threads version starts an OS thread per actor
//! from the main thread (whatever `--from` says) and reports the first thread that cannot be
//! created; tokio spawns empty tasks from a task, or from the bench's thread.

use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;

use super::Figure;
use crate::Opts;
use crate::measure::{Sample, Spec, check, measure, rss};
use crate::output::Out;
use crate::plot::{Field, quantity};
use crate::runtimes::{self, ActorKind, Rt, RtConfig, SpawnFrom};
use threadlet::RuntimeExt;

/// spawn's options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// Empty actors to spawn and join.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub actors: u64,
    /// Which kind of threadlet actor: an empty process actor, or a handler actor that stops in
    /// its `started` hook (start, one activation, stop).
    #[arg(long, value_enum, default_value_t = ActorKind::Process)]
    pub actor: ActorKind,
    /// Where the actors are spawned and joined from.
    #[arg(long, value_enum, default_value_t = SpawnFrom::Inside)]
    pub from: SpawnFrom,
}

/// A handler actor that stops as soon as it starts.
struct Empty;

impl threadlet::Actor for Empty {
    type Msg = ();
    fn started(&mut self, ctx: &mut threadlet::Context<Self>) {
        ctx.stop();
    }
    fn handle(&mut self, _: (), _ctx: &mut threadlet::Context<Self>) {}
}

/// Whether spawn has a version for `rt`.
pub fn supports(rt: Rt) -> bool {
    rt != Rt::Sequential
}

/// Every runtime and worker count of `opts`.
pub fn main(out: &mut Out, opts: &Opts, p: &Params) -> Result<(), String> {
    let supported = |rt: Rt| supports(rt) && p.actor.runs_on(rt);
    let figure = figure(p);
    super::for_each(out, opts, "spawn", supported, figure, |out, rt, w| {
        let mut params = vec![("actors", json!(p.actors)), ("from", json!(p.from.name()))];
        if rt.scheduler().is_some() {
            params.push(("actor", json!(p.actor.name())));
        }
        let spec = Spec {
            scenario: "spawn",
            runtime: rt,
            workers: w,
            migrate: opts.migrate,
            params,
        };
        measure(out, spec, opts.repeat, || {
            run(rt, w, opts.migrate, p.actors as usize, p.actor, p.from)
        })
    })
}

/// The plot against workers: time per actor.
fn figure(p: &Params) -> Figure {
    Figure {
        title: format!(
            "spawn: {}{}, then join them",
            quantity(p.actors, &format!("empty {} actor", p.actor.name())),
            match p.from {
                SpawnFrom::Inside => "",
                SpawnFrom::Outside => " from outside",
            }
        ),
        y: Field::per_op_ns("ns per actor (spawn to join)"),
    }
}

/// Spawns `n` actors with `spawn`, then joins each with `join` (which says whether it joined):
/// the time taken, and how many joined. The handle vector is allocated before the clock starts.
fn spawn_and_join<H>(
    n: usize,
    spawn: impl Fn() -> H,
    join: impl Fn(H) -> bool,
) -> (Duration, usize) {
    let mut handles = Vec::with_capacity(n);
    let start = Instant::now();
    for _ in 0..n {
        handles.push(spawn());
    }
    let joined = handles.into_iter().map(join).filter(|&ok| ok).count();
    (start.elapsed(), joined)
}

/// Whether a threadlet actor joined with its value.
fn joined<R>(h: threadlet::JoinHandle<R>) -> bool {
    h.join().is_ok()
}

/// One run on `rt`, with actors of the given kind (threadlet runtimes), spawned from `from`.
pub fn run(
    rt: Rt,
    workers: Option<usize>,
    migrate: bool,
    n: usize,
    kind: ActorKind,
    from: SpawnFrom,
) -> Result<Sample, String> {
    let mut stats = None;
    let window;
    let (took, joined): (Duration, usize) = match rt {
        Rt::WorkStealing | Rt::GlobalQueue | Rt::Gil => {
            let sched = rt.scheduler().expect("a threadlet runtime");
            let runtime = runtimes::threadlet(sched, super::workers(workers), RtConfig::default());
            window = rss::Window::start();
            let r = match (from, kind) {
                (SpawnFrom::Inside, ActorKind::Process) => runtime.block_on(move || {
                    spawn_and_join(n, || runtimes::spawn(migrate, || ()), joined)
                }),
                (SpawnFrom::Inside, ActorKind::Handler) => runtime
                    .block_on(move || spawn_and_join(n, || threadlet::start(Empty).1, joined)),
                (SpawnFrom::Outside, ActorKind::Process) => {
                    spawn_and_join(n, || runtimes::spawn_on(&runtime, migrate, || ()), joined)
                }
                (SpawnFrom::Outside, ActorKind::Handler) => {
                    spawn_and_join(n, || runtime.start(Empty).1, joined)
                }
            };
            stats = Some(runtimes::stats_json(&runtime.stats()));
            r
        }
        Rt::OsThreads => {
            window = rss::Window::start();
            let mut handles = Vec::with_capacity(n);
            let start = Instant::now();
            for i in 0..n {
                match runtimes::os_thread("empty", i, n, || ()) {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        for h in handles {
                            let _ = h.join();
                        }
                        return Err(e);
                    }
                }
            }
            let joined = handles
                .into_iter()
                .map(|h| h.join())
                .filter(Result::is_ok)
                .count();
            (start.elapsed(), joined)
        }
        Rt::Tokio => {
            let runtime = runtimes::tokio(super::workers(workers));
            window = rss::Window::start();
            match from {
                SpawnFrom::Inside => runtime
                    .block_on(runtime.spawn(async move {
                        let mut handles = Vec::with_capacity(n);
                        let start = Instant::now();
                        for _ in 0..n {
                            handles.push(tokio::spawn(async {}));
                        }
                        let mut joined = 0;
                        for h in handles {
                            joined += usize::from(h.await.is_ok());
                        }
                        (start.elapsed(), joined)
                    }))
                    .expect("the tokio spawn driver does not panic"),
                SpawnFrom::Outside => spawn_and_join(
                    n,
                    || runtime.spawn(async {}),
                    |h| runtime.block_on(h).is_ok(),
                ),
            }
        }
        Rt::Sequential => unreachable!("spawn has no sequential version"),
    };
    check(joined == n, || format!("{joined} of {n} actors joined"));
    let s = window.finish(Sample::new(took).per_op(n as u64, took));
    Ok(match stats {
        Some(st) => s.with("stats", st),
        None => s,
    })
}
