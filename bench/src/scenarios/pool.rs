//! pool: a pool of actors that wait for jobs first and compute later: how well running work is
//! balanced across workers. `actors` pool actors start (and wait); after a pause, the driver
//! hands out `jobs` jobs of `work` steps each (a multiply-add chain with a safe point every
//! 1,024 steps), and waits for every result.
//!
//! With process actors the pool waits on one rendezvous channel; they are spawned by the driver
//! (an actor, or with `--from outside` the bench's own thread, as a `main` would) and stay
//! where they start (pinned). Without placement at spawn (`docs/scheduler.md`,
//! "Placement") all of them started on the driver's worker, before a parked worker woken to
//! steal got there, and the jobs were computed on one worker however many there were. With
//! handler actors each job goes to one actor's mailbox; a handler
//! actor owns no stack while it waits, so the workers it runs on are chosen per job: the driver's
//! worker takes the first, the others are queued where idle workers steal them.
//!
//! `total_s` runs from the first job handed out to the last result; `per_op_ns` is per job.
//! The record carries the runtime's stats (`actors_run_per_worker` shows where work ran,
//! `placed` how many spawns were placed on another worker).

use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use threadlet::channel;
use threadlet::{Actor, Context, RuntimeExt};

use super::Figure;
use crate::Opts;
use crate::measure::{Sample, Spec, check, measure};
use crate::output::Out;
use crate::plot::{Field, quantity};
use crate::runtimes::{self, ActorKind, Rt, RtConfig, SpawnFrom};

/// pool's options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// Actors in the pool.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    pub actors: u64,
    /// Jobs handed out.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    pub jobs: u64,
    /// Steps of work per job.
    #[arg(long, default_value_t = 20_000_000)]
    pub work: u64,
    /// Which kind of threadlet actor makes up the pool.
    #[arg(long, value_enum, default_value_t = ActorKind::Process)]
    pub actor: ActorKind,
    /// Where the pool is spawned from and driven: an actor, or the bench's own thread
    /// (outside the runtime, as a `main` would).
    #[arg(long, value_enum, default_value_t = SpawnFrom::Inside)]
    pub from: SpawnFrom,
}

/// The pool is threadlet's: its point is where threadlet runs running work.
pub fn supports(rt: Rt) -> bool {
    rt.scheduler().is_some()
}

/// Every runtime and worker count of `opts`.
pub fn main(out: &mut Out, opts: &Opts, p: &Params) -> Result<(), String> {
    let figure = figure(p);
    super::for_each(out, opts, "pool", supports, figure, |out, rt, w| {
        let spec = Spec {
            scenario: "pool",
            runtime: rt,
            workers: w,
            migrate: opts.migrate,
            params: vec![
                ("actors", json!(p.actors)),
                ("jobs", json!(p.jobs)),
                ("work", json!(p.work)),
                ("actor", json!(p.actor.name())),
                ("from", json!(p.from.name())),
            ],
        };
        measure(out, spec, opts.repeat, || run(rt, w, opts.migrate, p))
    })
}

/// The plot against workers: the time until the last result.
fn figure(p: &Params) -> Figure {
    Figure {
        title: format!(
            "pool: {}, {} of {}{}",
            quantity(p.actors, &format!("{} actor", p.actor.name())),
            quantity(p.jobs, "job"),
            quantity(p.work, "step"),
            match p.from {
                SpawnFrom::Inside => "",
                SpawnFrom::Outside => ", spawned from outside",
            }
        ),
        y: Field::total_ms("first job to last result (ms)"),
    }
}

/// One job: a chain of `steps` multiply-adds, with a safe point every 1,024.
fn work(job: u64, steps: u64) -> u64 {
    let mut x = job;
    for i in 0..steps {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        if i % 1024 == 0 {
            threadlet::checkpoint();
        }
    }
    x
}

/// A pool member as a handler actor: computes each job it is sent, and sends the result back.
struct Member {
    steps: u64,
    results: channel::Sender<u64>,
}

impl Actor for Member {
    type Msg = u64;
    fn handle(&mut self, job: u64, _ctx: &mut Context<Self>) {
        let _ = self.results.send(work(job, self.steps));
    }
}

/// How long the pool gets to start and wait before the first job: the shape of a pool that
/// starts with the program and gets work later.
const SETTLE: Duration = Duration::from_millis(20);

/// A pool member as a process actor: its loop over the jobs, returning the sum of its results.
type MemberLoop = Box<dyn FnOnce() -> u64 + Send>;

/// Spawns the pool with `spawn` (process actors) or `start` (handler actors), lets it settle,
/// hands out the jobs and waits for every result: the time from the first job to the last
/// result, and the sum of the results. Runs in an actor or on a plain thread alike.
fn drive(
    kind: ActorKind,
    (actors, jobs, steps): (u64, u64, u64),
    spawn: impl Fn(MemberLoop) -> threadlet::JoinHandle<u64>,
    start: impl Fn(Member) -> (threadlet::Addr<u64>, threadlet::JoinHandle<Member>),
) -> (Duration, u64) {
    match kind {
        ActorKind::Process => {
            let (tx, rx) = channel::bounded::<u64>(0);
            let members: Vec<_> = (0..actors)
                .map(|_| {
                    let rx = rx.clone();
                    spawn(Box::new(move || {
                        rx.iter()
                            .map(|job| work(job, steps))
                            .fold(0u64, u64::wrapping_add)
                    }))
                })
                .collect();
            drop(rx);
            threadlet::sleep(SETTLE);
            let start = Instant::now();
            for job in 0..jobs {
                tx.send(job).expect("the pool waits");
            }
            drop(tx);
            let sum = members
                .into_iter()
                .map(|h| h.join().expect("a pool member does not panic"))
                .fold(0u64, u64::wrapping_add);
            (start.elapsed(), sum)
        }
        ActorKind::Handler => {
            let (results, got) = channel::unbounded::<u64>();
            let members: Vec<_> = (0..actors)
                .map(|_| {
                    start(Member {
                        steps,
                        results: results.clone(),
                    })
                })
                .collect();
            drop(results);
            threadlet::sleep(SETTLE);
            let start = Instant::now();
            for job in 0..jobs {
                let (addr, _) = &members[(job % actors) as usize];
                addr.send(job).expect("the pool waits");
            }
            let sum = (0..jobs)
                .map(|_| got.recv().expect("every job comes back"))
                .fold(0u64, u64::wrapping_add);
            let took = start.elapsed();
            for (addr, h) in members {
                drop(addr);
                h.join().expect("a pool member does not panic");
            }
            (took, sum)
        }
    }
}

/// One run on `rt`.
pub fn run(rt: Rt, workers: Option<usize>, migrate: bool, p: &Params) -> Result<Sample, String> {
    let sched = rt.scheduler().expect("a threadlet runtime");
    let runtime = runtimes::threadlet(sched, super::workers(workers), RtConfig::default());
    let (actors, jobs, steps, kind) = (p.actors, p.jobs, p.work, p.actor);
    let (took, sum) = match p.from {
        SpawnFrom::Inside => runtime.block_on(move || {
            drive(
                kind,
                (actors, jobs, steps),
                |f| runtimes::spawn(migrate, f),
                threadlet::start,
            )
        }),
        SpawnFrom::Outside => drive(
            kind,
            (actors, jobs, steps),
            |f| runtimes::spawn_on(&runtime, migrate, f),
            |m| runtime.start(m),
        ),
    };
    // The same jobs on this thread (outside any runtime, its safe points do nothing).
    let want = (0..jobs)
        .map(|job| work(job, steps))
        .fold(0u64, u64::wrapping_add);
    check(sum == want, || {
        format!("the pool's results add up to {sum}, not {want}")
    });
    Ok(Sample::new(took)
        .per_op(jobs, took)
        .with("stats", runtimes::stats_json(&runtime.stats())))
}
