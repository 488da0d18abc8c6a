//! The runtimes a scenario can run on, how each is built, and the spawn helpers that honour
//! `--migrate`.

use std::fmt;
use std::io;

use clap::ValueEnum;
use serde_json::{Map, Value, json};
use threadlet::{ActorBuilder, Addr, JoinHandle, Mailbox, Runtime, RuntimeStats, Scheduler};

/// A `--runtime` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Rt {
    /// threadlet with per-worker queues and work stealing (`Scheduler::WorkStealing`).
    WorkStealing,
    /// threadlet with every run queue behind one lock (`Scheduler::GlobalQueue`).
    GlobalQueue,
    /// threadlet where a worker holds one global lock while it runs an actor (`Scheduler::Gil`).
    Gil,
    /// One OS thread per actor, `std::sync::mpsc` channels.
    OsThreads,
    /// tokio tasks and tokio channels on a multi-thread runtime with the same worker count.
    Tokio,
    /// Everything on the main thread, one after the other (count, factorial).
    Sequential,
}

impl Rt {
    /// The name as `--runtime` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Rt::WorkStealing => "work-stealing",
            Rt::GlobalQueue => "global-queue",
            Rt::Gil => "gil",
            Rt::OsThreads => "os-threads",
            Rt::Tokio => "tokio",
            Rt::Sequential => "sequential",
        }
    }

    /// The threadlet scheduler, for the three threadlet runtimes.
    pub fn scheduler(self) -> Option<Scheduler> {
        match self {
            Rt::WorkStealing => Some(Scheduler::WorkStealing),
            Rt::GlobalQueue => Some(Scheduler::GlobalQueue),
            Rt::Gil => Some(Scheduler::Gil),
            _ => None,
        }
    }

    /// Whether `--workers` means something for this runtime (threadlet and tokio); OS threads
    /// and the sequential version run once whatever the list says.
    pub fn has_workers(self) -> bool {
        self.scheduler().is_some() || self == Rt::Tokio
    }
}

impl fmt::Display for Rt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The settings of a threadlet runtime beyond its scheduler and workers.
#[derive(Clone, Copy, Debug, Default)]
pub struct RtConfig {
    /// `Builder::preempt_ticks` (0: off).
    pub ticks: u32,
    /// Turn time-slice preemption off (`Builder::time_slice(Duration::ZERO)`).
    pub no_time_slice: bool,
}

/// Builds a threadlet runtime. Called outside the timed region. A runtime that cannot be built
/// is an error in the environment, not a result: the process stops with a message.
pub fn threadlet(scheduler: Scheduler, workers: usize, cfg: RtConfig) -> Runtime {
    let mut b = Runtime::builder().workers(workers).scheduler(scheduler);
    if cfg.ticks > 0 {
        b = b.preempt_ticks(cfg.ticks);
    }
    if cfg.no_time_slice {
        b = b.time_slice(std::time::Duration::ZERO);
    }
    b.build().unwrap_or_else(|e| {
        eprintln!("threadlet-bench: could not build a threadlet runtime: {e}");
        std::process::exit(2)
    })
}

/// Builds a tokio multi-thread runtime with `workers` worker threads (outside the timed
/// region).
pub fn tokio(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("threadlet-bench: could not build a tokio runtime: {e}");
            std::process::exit(2)
        })
}

/// The counters of a threadlet runtime that say how the scheduler behaved, as JSON.
pub fn stats_json(stats: &RuntimeStats) -> Value {
    let t = stats.total();
    let mut m = Map::new();
    m.insert("actors_run".into(), json!(t.actors_run));
    let per_worker: Vec<u64> = stats.workers.iter().map(|w| w.actors_run).collect();
    m.insert("actors_run_per_worker".into(), json!(per_worker));
    m.insert("placed".into(), json!(t.placed));
    m.insert("steals".into(), json!(t.steals));
    m.insert("stolen".into(), json!(t.stolen));
    m.insert("parks".into(), json!(t.parks));
    m.insert("lingers".into(), json!(t.lingers));
    m.insert("wakeups".into(), json!(t.wakeups));
    m.insert("remote_wakes".into(), json!(t.remote_wakes));
    m.insert("preemptions".into(), json!(t.preemptions));
    m.insert("stacks_carved".into(), json!(stats.stacks_carved));
    Value::Object(m)
}

/// Which kind of threadlet actor a message scenario uses (`--actor`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ActorKind {
    /// Process actors: a loop over the mailbox on a stack of its own (`spawn_actor`).
    #[default]
    Process,
    /// Handler actors: `handle` per message, no stack between messages (`threadlet::start`).
    Handler,
}

impl ActorKind {
    /// The name the CLI and the JSON records use.
    pub fn name(self) -> &'static str {
        match self {
            ActorKind::Process => "process",
            ActorKind::Handler => "handler",
        }
    }

    /// Whether `rt` has this kind: handler actors are threadlet's own.
    pub fn runs_on(self, rt: Rt) -> bool {
        self == ActorKind::Process || rt.scheduler().is_some()
    }
}

/// Where a scenario spawns its actors from (`--from`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum SpawnFrom {
    /// An actor (`block_on`) spawns them.
    #[default]
    Inside,
    /// The bench's own thread spawns them, outside the runtime, as a `main` would.
    Outside,
}

impl SpawnFrom {
    /// The name the CLI and the JSON records use.
    pub fn name(self) -> &'static str {
        match self {
            SpawnFrom::Inside => "inside",
            SpawnFrom::Outside => "outside",
        }
    }
}

/// The per-actor options of a scenario actor: migratable under `--migrate`, default otherwise.
///
/// Only scenario actors whose stacks were checked are spawned with these options: the bench's
/// own scenario bodies, and `threadlet_examples::hackysack`'s players (an `Arc` of the circle, an
/// `Arc<AtomicU64>`, a mailbox and a xorshift state).
pub fn options(migrate: bool) -> ActorBuilder {
    if migrate {
        // SAFETY: every actor of the bench scenarios keeps only mailboxes, addresses, channel
        // ends, join handles, `Arc`s of atomics and `OnceLock`s, integers and a xorshift state
        // on its stack across its suspension points (mailbox and channel operations, joins,
        // checkpoints). None holds a thread-local borrow, a `ThreadRng`, a lock guard, an `Rc`
        // or any other thread-affine value, so resuming it on another worker is sound.
        unsafe { ActorBuilder::new().migratable() }
    } else {
        ActorBuilder::new()
    }
}

/// Spawns a scenario actor with a mailbox from inside an actor.
pub fn actor<M, F, R>(migrate: bool, f: F) -> (Addr<M>, JoinHandle<R>)
where
    M: Send + 'static,
    F: FnOnce(Mailbox<M>) -> R + Send + 'static,
    R: Send + 'static,
{
    options(migrate)
        .spawn_actor(f)
        .expect("default actor options are valid")
}

/// Spawns a scenario actor with no mailbox from inside an actor.
pub fn spawn<F, R>(migrate: bool, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    options(migrate)
        .spawn(f)
        .expect("default actor options are valid")
}

/// Spawns a scenario actor on `rt` from outside it.
pub fn spawn_on<F, R>(rt: &Runtime, migrate: bool, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    options(migrate)
        .spawn_on(rt, f)
        .expect("default actor options are valid")
}

/// Starts an OS thread for one actor of the os-threads versions; the error says which one
/// could not be created, for the one-line report.
pub fn os_thread<F, R>(
    what: &str,
    index: usize,
    of: usize,
    f: F,
) -> Result<std::thread::JoinHandle<R>, String>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    std::thread::Builder::new()
        .spawn(f)
        .map_err(|e: io::Error| {
            format!(
                "could not create OS thread {} of {of} ({what}): {e}",
                index + 1
            )
        })
}
