//! The runtime: its builder, its shared state, and the routing of spawns and wakes into run
//! queues.
//!
//! # The data path
//!
//! ```text
//!  spawn ─▶ Shared::spawn_cell ─▶ worker's fresh queue or deque (in an actor), a worker's
//!                                  placed actors (placed), or injector
//!                                   │
//!                                   ▼
//!                     worker loop (worker.rs) pops or steals it,
//!                     gives it a stack and a coroutine, resumes it
//!                                   │
//!                actor blocks in a mailbox, channel or join (park)
//!                                   │
//!        a sender makes the condition true and wakes it (ActorCell::wake)
//!                                   │
//!                                   ▼
//!           Shared::schedule_woken: next slot (same worker), home inbox
//!           (pinned, other thread), or injector (migratable, outside)
//! ```
//!
//! `Shared` is what all workers share: the injector, the idle set, the stack slab, every
//! worker's [`Remote`] half, and the shutdown flag.

use std::ffi::c_int;
use std::fmt;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_deque::{Injector, Steal};
use crossbeam_utils::sync::{Parker, WaitGroup};
use parking_lot::{Mutex, RwLock};

use crate::actor::{ActorCell, ActorNames, ActorRef, Registry, Runnable, SpawnOptions};
use crate::baseline::Policy;
use crate::blocking::BlockingPool;
use crate::context;
use crate::deadlock::DeadlockConfig;
use crate::idle::Idle;
use crate::join::{self, JoinHandle};
use crate::monitor::{self, LongRun, LongRunHook, MonitorSignal, default_long_run_hook};
use crate::stack::{
    DEFAULT_STACK_SIZE, MAX_STACK_SIZE, MIN_STACK_SIZE, OwnedStack, PAGE_SIZE, StackSlab,
};
use crate::stats::RuntimeStats;
use crate::timer::Timers;
use crate::worker::{self, Remote, StealableQueues};

/// Which scheduler runs the actors. The two baselines exist to be measured against; see
/// `baseline.rs`.
///
/// ```
/// use threadlet_runtime::{Runtime, Scheduler};
///
/// assert_eq!(Scheduler::default(), Scheduler::WorkStealing);
/// for scheduler in [Scheduler::WorkStealing, Scheduler::GlobalQueue, Scheduler::Gil] {
///     let rt = Runtime::builder().workers(2).scheduler(scheduler).build().unwrap();
///     assert_eq!(rt.scheduler(), scheduler);
///     // Same programs, same results; only the speed differs.
///     let four = rt.block_on(|| threadlet_runtime::spawn(|| 2 + 2).join().unwrap());
///     assert_eq!(four, 4);
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Scheduler {
    /// Per-worker run queues with work stealing (the default).
    #[default]
    WorkStealing,
    /// Baseline: every run queue behind one global lock; no per-worker queues, no stealing.
    GlobalQueue,
    /// Baseline: work stealing, but a worker holds one global lock while it runs any actor,
    /// released at every switch, like CPython's GIL.
    Gil,
}

/// Why a runtime could not be built.
///
/// ```
/// use threadlet_runtime::{BuildError, MIN_STACK_SIZE, Runtime};
///
/// let err = Runtime::builder().workers(0).build().unwrap_err();
/// assert!(matches!(err, BuildError::ZeroWorkers));
/// assert_eq!(err.to_string(), "a runtime needs at least one worker");
///
/// let err = Runtime::builder().stack_size(8 * 1024).build().unwrap_err();
/// assert!(matches!(
///     err,
///     BuildError::StackTooSmall { requested: 8192, minimum } if minimum == MIN_STACK_SIZE
/// ));
///
/// let err = Runtime::builder().stack_size(20_000).build().unwrap_err();
/// assert!(matches!(
///     err,
///     BuildError::StackNotPageAligned { requested: 20_000, page_size: 4096 }
/// ));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `workers(0)`: a runtime needs at least one worker.
    ZeroWorkers,
    /// More workers than [`MAX_WORKERS`].
    TooManyWorkers {
        /// What was asked for.
        requested: usize,
        /// The largest accepted count.
        maximum: usize,
    },
    /// The stack size is above [`MAX_STACK_SIZE`].
    StackTooLarge {
        /// What was asked for.
        requested: usize,
        /// The largest accepted size.
        maximum: usize,
    },
    /// The stack size is below the minimum the runtime can run an actor in.
    StackTooSmall {
        /// What was asked for.
        requested: usize,
        /// The smallest accepted size.
        minimum: usize,
    },
    /// The stack size is not a multiple of the page size.
    StackNotPageAligned {
        /// What was asked for.
        requested: usize,
        /// The page size it must be a multiple of.
        page_size: usize,
    },
    /// `blocking_threads(0)`: the blocking pool needs at least one thread.
    ZeroBlockingThreads,
    /// The operating system refused a thread, or the machine is not supported (pages other
    /// than 4 KiB).
    Io(io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroWorkers => f.write_str("a runtime needs at least one worker"),
            BuildError::ZeroBlockingThreads => {
                f.write_str("the blocking pool needs at least one thread")
            }
            BuildError::TooManyWorkers { requested, maximum } => write!(
                f,
                "{requested} workers asked for; a runtime has at most {maximum} (one per core \
                 is the useful number)"
            ),
            BuildError::StackTooLarge { requested, maximum } => write!(
                f,
                "stack size {requested} bytes is above the maximum of {maximum} bytes"
            ),
            BuildError::StackTooSmall { requested, minimum } => write!(
                f,
                "stack size {requested} bytes is below the minimum of {minimum} bytes"
            ),
            BuildError::StackNotPageAligned {
                requested,
                page_size,
            } => write!(
                f,
                "stack size {requested} bytes is not a multiple of the page size ({page_size})"
            ),
            BuildError::Io(e) => write!(f, "could not start the runtime: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Checks a stack size against the runtime's rules.
pub(crate) fn check_stack_size(bytes: usize) -> Result<(), BuildError> {
    if bytes < MIN_STACK_SIZE {
        return Err(BuildError::StackTooSmall {
            requested: bytes,
            minimum: MIN_STACK_SIZE,
        });
    }
    if bytes > MAX_STACK_SIZE {
        return Err(BuildError::StackTooLarge {
            requested: bytes,
            maximum: MAX_STACK_SIZE,
        });
    }
    if !bytes.is_multiple_of(PAGE_SIZE) {
        return Err(BuildError::StackNotPageAligned {
            requested: bytes,
            page_size: PAGE_SIZE,
        });
    }
    Ok(())
}

/// The most workers a runtime may have. Workers are OS threads, one per core being the useful
/// number; this bound only turns a mistaken count (a byte count, `usize::MAX`) into a clear
/// [`BuildError`] instead of an abort while allocating per-worker state.
///
/// ```
/// use threadlet_runtime::{BuildError, MAX_WORKERS, Runtime};
///
/// let err = Runtime::builder().workers(MAX_WORKERS + 1).build().unwrap_err();
/// assert!(matches!(err, BuildError::TooManyWorkers { maximum: MAX_WORKERS, .. }));
/// ```
pub const MAX_WORKERS: usize = 4096;

/// Configures and starts a [`Runtime`].
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(2).stack_size(128 * 1024).build()?;
/// assert_eq!(rt.block_on(|| 6 * 7), 42);
/// # Ok::<(), threadlet_runtime::BuildError>(())
/// ```
#[derive(Clone)]
pub struct Builder {
    workers: Option<usize>,
    stack_size: usize,
    scheduler: Scheduler,
    time_slice: Option<Duration>,
    preempt_ticks: Option<u32>,
    long_run_hook: LongRunHook,
    blocking_threads: usize,
    blocking_keep_alive: Duration,
    deadlock: DeadlockConfig,
    dump_signal: Option<c_int>,
    spare_workers: Option<usize>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            workers: None,
            stack_size: DEFAULT_STACK_SIZE,
            scheduler: Scheduler::WorkStealing,
            time_slice: Some(DEFAULT_TIME_SLICE),
            preempt_ticks: None,
            long_run_hook: default_long_run_hook(),
            blocking_threads: crate::blocking::DEFAULT_BLOCKING_THREADS,
            blocking_keep_alive: crate::blocking::DEFAULT_BLOCKING_KEEP_ALIVE,
            deadlock: DeadlockConfig::default(),
            dump_signal: None,
            spare_workers: None,
        }
    }
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("stack_size", &self.stack_size)
            .field("scheduler", &self.scheduler)
            .field("time_slice", &self.time_slice)
            .field("preempt_ticks", &self.preempt_ticks)
            .field("blocking_threads", &self.blocking_threads)
            .field("blocking_keep_alive", &self.blocking_keep_alive)
            .field("panic_on_deadlock", &self.deadlock.panic_block_on)
            .field("dump_signal", &self.dump_signal)
            .field("spare_workers", &self.spare_workers)
            .finish_non_exhaustive()
    }
}

/// The default time slice: an actor that runs this long without blocking is asked to yield at
/// its next safe point. Go uses the same 10 ms.
///
/// ```
/// use std::time::Duration;
/// use threadlet_runtime::{DEFAULT_TIME_SLICE, Runtime};
///
/// assert_eq!(DEFAULT_TIME_SLICE, Duration::from_millis(10));
/// // Spelling the default out changes nothing.
/// let rt = Runtime::builder().workers(1).time_slice(DEFAULT_TIME_SLICE).build().unwrap();
/// assert_eq!(rt.block_on(|| 7), 7);
/// ```
pub const DEFAULT_TIME_SLICE: Duration = Duration::from_millis(10);

impl Builder {
    /// Number of worker threads (default: one per CPU, `num_cpus::get()`).
    ///
    /// ```
    /// use threadlet_runtime::{BuildError, Runtime};
    ///
    /// let rt = Runtime::builder().workers(3).build().unwrap();
    /// assert_eq!(rt.workers(), 3);
    /// assert!(matches!(Runtime::builder().workers(0).build(), Err(BuildError::ZeroWorkers)));
    /// ```
    pub fn workers(mut self, n: usize) -> Builder {
        self.workers = Some(n);
        self
    }

    /// Usable stack bytes per actor (default 64 KiB, only touched pages cost memory). Must be a
    /// multiple of 4096 and at least 16 KiB.
    ///
    /// ```
    /// use threadlet_runtime::{BuildError, Runtime};
    ///
    /// let rt = Runtime::builder().workers(1).stack_size(256 * 1024).build().unwrap();
    /// assert_eq!(rt.stack_size(), 256 * 1024);
    /// let too_small = Runtime::builder().stack_size(4096).build();
    /// assert!(matches!(too_small, Err(BuildError::StackTooSmall { .. })));
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = bytes;
        self
    }

    /// Which scheduler runs the actors (default: work stealing).
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, Scheduler};
    ///
    /// let rt = Runtime::builder().workers(2).scheduler(Scheduler::GlobalQueue).build().unwrap();
    /// assert_eq!(rt.scheduler(), Scheduler::GlobalQueue);
    /// assert_eq!(rt.block_on(|| 1 + 1), 2);
    /// ```
    pub fn scheduler(mut self, scheduler: Scheduler) -> Builder {
        self.scheduler = scheduler;
        self
    }

    /// The time slice after which the monitor asks a running actor to yield at its next safe
    /// point (default 10 ms; see `docs/preemption.md`). A zero duration turns time slices off.
    ///
    /// Any other duration is kept as given, not clamped: one too long to ever elapse (up to
    /// `Duration::MAX`) never preempts and is never reported as a long run, which in effect
    /// turns time slices off; the monitor's arithmetic saturates rather than overflows. The
    /// monitor samples running workers every quarter slice, but at most every millisecond and
    /// at least every second, so a long slice is enforced at most a second late.
    ///
    /// ```
    /// use std::time::Duration;
    /// use threadlet_runtime::{Runtime, checkpoint, preemptions};
    ///
    /// let rt = Runtime::builder().workers(1).time_slice(Duration::from_millis(2)).build().unwrap();
    /// let preempted = rt.block_on(|| {
    ///     // A CPU-bound loop with a safe point: the monitor preempts it after about 2 ms.
    ///     while preemptions() == 0 {
    ///         checkpoint();
    ///     }
    ///     preemptions()
    /// });
    /// assert!(preempted >= 1);
    /// ```
    pub fn time_slice(mut self, slice: Duration) -> Builder {
        self.time_slice = (!slice.is_zero()).then_some(slice);
        self
    }

    /// Deterministic preemption, like Stackless's `run(n)`: every safe point costs one tick, and
    /// an actor that spends `n` ticks in one run yields. Combines with time slices; `0` turns
    /// ticks off (the default).
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder()
    ///     .workers(1)
    ///     .preempt_ticks(100)
    ///     .time_slice(std::time::Duration::ZERO) // ticks only: the count is exact
    ///     .build()
    ///     .unwrap();
    /// let switches = rt.block_on(|| {
    ///     for _ in 0..1000 {
    ///         threadlet_runtime::checkpoint();
    ///     }
    ///     threadlet_runtime::preemptions()
    /// });
    /// assert_eq!(switches, 10);
    /// ```
    pub fn preempt_ticks(mut self, n: u32) -> Builder {
        self.preempt_ticks = (n > 0).then_some(n);
        self
    }

    /// What to do when an actor runs ten time slices without reaching a safe point (default:
    /// print one line on stderr naming the actor by id and name, its worker, how long it has
    /// run and the time slice). Called on the monitor thread; it must not block. A panic in it
    /// is reported on stderr and contained: the monitor carries on.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// use threadlet_runtime::{LONG_RUN_SLICES, LongRun, Runtime};
    ///
    /// let report: Arc<Mutex<Option<LongRun>>> = Arc::default();
    /// let r = report.clone();
    /// let rt = Runtime::builder()
    ///     .workers(1)
    ///     .time_slice(Duration::from_millis(1))
    ///     .on_long_run(move |lr| *r.lock().unwrap() = Some(lr.clone()))
    ///     .build()
    ///     .unwrap();
    /// let r = report.clone();
    /// let h = rt.spawn(move || {
    ///     // Spins with no safe point (a bug the hook is there to find) until reported.
    ///     while r.lock().unwrap().is_none() {
    ///         std::hint::spin_loop();
    ///     }
    /// });
    /// let id = h.id();
    /// h.join().unwrap();
    /// let lr = report.lock().unwrap().clone().unwrap();
    /// assert_eq!(lr.actor, id);
    /// assert!(lr.to_string().starts_with(&format!("actor {id} has held worker 0 for ")));
    /// assert_eq!(lr.time_slice, Duration::from_millis(1));
    /// assert!(lr.running_for >= lr.time_slice * LONG_RUN_SLICES);
    /// ```
    pub fn on_long_run(mut self, hook: impl Fn(&LongRun) + Send + Sync + 'static) -> Builder {
        self.long_run_hook = Arc::new(hook);
        self
    }

    /// The most OS threads the blocking pool runs at once (default
    /// [`DEFAULT_BLOCKING_THREADS`](crate::DEFAULT_BLOCKING_THREADS)); calls beyond it queue.
    /// Threads are made on demand and retire when idle (see
    /// [`blocking_keep_alive`](Builder::blocking_keep_alive)).
    ///
    /// ```
    /// use threadlet_runtime::{BuildError, Runtime};
    ///
    /// let rt = Runtime::builder().workers(1).blocking_threads(4).build().unwrap();
    /// assert_eq!(rt.block_on(|| threadlet_runtime::blocking(|| 6 * 7)), 42);
    /// let none = Runtime::builder().blocking_threads(0).build();
    /// assert!(matches!(none, Err(BuildError::ZeroBlockingThreads)));
    /// ```
    pub fn blocking_threads(mut self, n: usize) -> Builder {
        self.blocking_threads = n;
        self
    }

    /// How long an idle blocking thread waits for another call before it exits (default
    /// [`DEFAULT_BLOCKING_KEEP_ALIVE`](crate::DEFAULT_BLOCKING_KEEP_ALIVE)).
    pub fn blocking_keep_alive(mut self, keep_alive: Duration) -> Builder {
        self.blocking_keep_alive = keep_alive;
        self
    }

    /// What to do when every actor of the runtime waits on another and nothing outside can
    /// wake them (see [`Deadlock`](crate::Deadlock) and `docs/diagnostics.md`): the hook is
    /// called once per deadlock, on the monitor thread, and must not block. The default prints
    /// the report on stderr and lets the runtime run on (a plain thread may still end it, by
    /// a kill or a shutdown). A panic in the hook is contained.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use threadlet_runtime::{Deadlock, Runtime};
    ///
    /// let (tx, rx) = mpsc::channel::<Deadlock>();
    /// let rt = Runtime::builder()
    ///     .workers(2)
    ///     .on_deadlock(move |d| {
    ///         let _ = tx.send(d.clone());
    ///     })
    ///     .build()
    ///     .unwrap();
    /// // An actor that joins itself can never end.
    /// let (give, take) = mpsc::channel();
    /// let h = rt.spawn(move || {
    ///     let me: threadlet_runtime::JoinHandle<()> = take.recv().unwrap();
    ///     let _ = me.join();
    /// });
    /// let id = h.id();
    /// give.send(h).unwrap();
    /// let report = rx.recv().unwrap();
    /// assert_eq!(report.cycle, [id]);
    /// assert!(report.to_string().contains("waits-for cycle"));
    /// ```
    pub fn on_deadlock(
        mut self,
        hook: impl Fn(&crate::Deadlock) + Send + Sync + 'static,
    ) -> Builder {
        self.deadlock.hook = Arc::new(hook);
        self
    }

    /// On a deadlock, after the hook, make every [`block_on`](Runtime::block_on) in flight
    /// panic with the report (its root actor is killed), as Go ends the program with "all
    /// goroutines are asleep". Off by default.
    ///
    /// ```
    /// use threadlet_runtime::Runtime;
    ///
    /// let rt = Runtime::builder().workers(1).on_deadlock(|_| {}).panic_on_deadlock().build().unwrap();
    /// let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
    ///     // Waits for a message that nobody can send (it has no mailbox at all).
    ///     rt.block_on(|| while threadlet_runtime::park_on(threadlet_runtime::Wait::Message).is_ok() {})
    /// }));
    /// let message = caught.unwrap_err().downcast::<String>().unwrap();
    /// assert!(message.contains("deadlock"));
    /// ```
    pub fn panic_on_deadlock(mut self) -> Builder {
        self.deadlock.panic_block_on = true;
        self
    }

    /// The most spare worker threads the runtime brings in at once (default: one per worker;
    /// 0 turns handoff off). When an actor holds its worker for two time slices without a safe
    /// point (a blocking system call or a long C call made outside
    /// [`blocking`](fn@crate::blocking)), the monitor brings a spare in to run the actors that may
    /// run anywhere (handler actors between messages, actors not started yet) until that worker
    /// is back; the actors pinned to the stuck worker wait for it. Spares are started on first
    /// need and sleep when not needed. Only the work-stealing scheduler has spares, and only
    /// with time slices on (the monitor notices a stuck worker by its slice).
    ///
    /// ```
    /// use threadlet_runtime::Runtime;
    ///
    /// let rt = Runtime::builder().workers(1).spare_workers(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// // Holds the only worker for 300 ms without a safe point...
    /// let stuck = rt.spawn(|| std::thread::sleep(std::time::Duration::from_millis(300)));
    /// std::thread::sleep(std::time::Duration::from_millis(50));
    /// // ...yet an actor spawned meanwhile runs, on the spare.
    /// rt.spawn(move || tx.send(threadlet_runtime::worker_index()).unwrap());
    /// assert_eq!(rx.recv().unwrap(), Some(1)); // index 1: the first spare
    /// stuck.join().unwrap();
    /// ```
    pub fn spare_workers(mut self, n: usize) -> Builder {
        self.spare_workers = Some(n);
        self
    }

    /// Print the runtime's [`dump`](Runtime::dump) on stderr whenever the process receives
    /// `signal` (say `libc::SIGUSR1`; through `signal-hook`, which refuses signals that cannot
    /// be handled, such as `SIGKILL` or `SIGSEGV`). Off by default; setting the environment
    /// variable `THREADLET_DUMP_SIGNAL` (a number, or `USR1`, `USR2`, `QUIT`) turns it on for
    /// every runtime a program builds (a signal there that cannot be had is reported on stderr,
    /// and the runtime built without the dump). A thread named `threadlet-dump` waits for the
    /// signal. Once every runtime that dumped on a signal is dropped, a signal whose action
    /// was the default one does that again (`SIGUSR1` ends the process): a program that
    /// installs its own `signal-hook` handler for that signal later should not use it for the
    /// dump, as the default action then runs after its handler.
    ///
    /// ```no_run
    /// let rt = threadlet_runtime::Runtime::builder().dump_on_signal(libc::SIGUSR1).build().unwrap();
    /// // `kill -USR1 <pid>` now prints every actor and what it waits on.
    /// # drop(rt);
    /// ```
    pub fn dump_on_signal(mut self, signal: c_int) -> Builder {
        self.dump_signal = Some(signal);
        self
    }

    /// Starts the workers.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(2).build()?;
    /// assert_eq!(rt.workers(), 2);
    /// assert_eq!(rt.block_on(|| "running"), "running");
    /// # Ok::<(), threadlet_runtime::BuildError>(())
    /// ```
    pub fn build(self) -> Result<Runtime, BuildError> {
        let workers = self.workers.unwrap_or_else(num_cpus::get);
        if workers == 0 {
            return Err(BuildError::ZeroWorkers);
        }
        if self.blocking_threads == 0 {
            return Err(BuildError::ZeroBlockingThreads);
        }
        // Panics in actors name the actor (`fault.rs`, "Naming the actor that panicked").
        crate::fault::install_panic_hook();
        if workers > MAX_WORKERS {
            return Err(BuildError::TooManyWorkers {
                requested: workers,
                maximum: MAX_WORKERS,
            });
        }
        check_stack_size(self.stack_size)?;
        // SAFETY: `sysconf` only reads a system constant.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page != PAGE_SIZE as libc::c_long {
            return Err(BuildError::Io(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "threadlet needs 4 KiB pages for its stack guards; this machine has {page}"
                ),
            )));
        }
        crate::guard::install_overflow_reporter();

        // Spares (`spare.rs`) only under work stealing, and never more than the workers' cap.
        let spares = match self.scheduler {
            Scheduler::WorkStealing => self.spare_workers.unwrap_or(workers).min(MAX_WORKERS),
            _ => 0,
        };
        let mut deques = Vec::with_capacity(workers + spares);
        let mut parkers = Vec::with_capacity(workers + spares);
        let mut remotes = Vec::with_capacity(workers + spares);
        for _ in 0..workers + spares {
            let (queues, next_stealer) = StealableQueues::new();
            let parker = Parker::new();
            remotes.push(Remote::new(
                &queues,
                next_stealer,
                parker.unparker().clone(),
                self.preempt_ticks.is_some(),
            ));
            deques.push(queues);
            parkers.push(parker);
        }
        let monitor = Arc::new(MonitorSignal::default());
        let shared = Arc::new(Shared {
            remotes: remotes.into_boxed_slice(),
            injector: Injector::new(),
            idle: Idle::new(workers),
            shutdown: AtomicBool::new(false),
            slab: StackSlab::new(self.stack_size),
            migratable_live: Mutex::new(Vec::new()),
            policy: Policy::new(self.scheduler, workers),
            config: Config {
                time_slice: self.time_slice,
                preempt_ticks: self.preempt_ticks,
                long_run_hook: self.long_run_hook,
            },
            timers: Timers::default(),
            monitor: monitor.clone(),
            names: ActorNames::default(),
            sweep: Mutex::new(()),
            spawn_gate: RwLock::new(true),
            live: crate::live::LiveTable::new(),
            blocking: Arc::new(BlockingPool::new(
                self.blocking_threads,
                self.blocking_keep_alive,
                monitor,
            )),
            io: crate::io::DriverSlot::default(),
            mailbox_totals: Default::default(),
            deadlock: crate::deadlock::DeadlockWatch::new(self.deadlock),
            spares: crate::spare::Spares::new(workers, spares),
            outside: worker::OutsidePlacement::default(),
            epoch: Instant::now(),
        });
        let dump_signal = match self.dump_signal {
            Some(signal) => Some(
                crate::dump::DumpSignal::register(signal, Arc::downgrade(&shared))
                    .map_err(BuildError::Io)?,
            ),
            None => crate::dump::DumpSignal::from_env(Arc::downgrade(&shared)),
        };
        let weak = Arc::downgrade(&shared);
        let monitor = thread::Builder::new()
            .name("threadlet-monitor".into())
            .spawn(move || monitor::run(weak))
            .map_err(BuildError::Io)?;
        let mut threads = Vec::with_capacity(workers);
        // The two shutdown meeting points (step 4 in `worker.rs`): each worker holds one
        // share of each; a worker that failed to start drops its shares with its closure.
        let meet = (WaitGroup::new(), WaitGroup::new());
        let mut failed = None;
        // The spares' parts, with their shares of the meetings, wait for their first use.
        let spare_deques = deques.split_off(workers);
        let spare_parkers = parkers.split_off(workers);
        shared.spares.install(
            spare_deques
                .into_iter()
                .zip(spare_parkers)
                .map(|(queues, parker)| crate::spare::SpareParts {
                    queues,
                    parker,
                    meet: (meet.0.clone(), meet.1.clone()),
                })
                .collect(),
        );
        for (index, (queues, parker)) in deques.into_iter().zip(parkers).enumerate() {
            let s = shared.clone();
            let meet = (meet.0.clone(), meet.1.clone());
            let spawned = thread::Builder::new()
                .name(format!("threadlet-worker-{index}"))
                .spawn(move || worker::run(s, index, queues, parker, meet, worker::Role::Worker));
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        drop(meet);
        let rt = Runtime {
            shared,
            threads,
            monitor: Some(monitor),
            dump_signal,
        };
        match failed {
            // Dropping `rt` stops the workers already started.
            Some(e) => Err(BuildError::Io(e)),
            None => Ok(rt),
        }
    }
}

/// What every worker and every actor of one runtime share.
pub(crate) struct Shared {
    pub(crate) remotes: Box<[Remote]>,
    pub(crate) injector: Injector<Runnable>,
    pub(crate) idle: Idle,
    shutdown: AtomicBool,
    pub(crate) slab: StackSlab,
    /// Started migratable actors, for shutdown (pinned ones are in their worker's registry).
    migratable_live: Mutex<Vec<ActorRef>>,
    /// The scheduler, with its baseline's state (`baseline.rs`).
    pub(crate) policy: Policy,
    pub(crate) config: Config,
    pub(crate) timers: Timers,
    pub(crate) monitor: Arc<MonitorSignal>,
    /// Live named actors, for reports that know only an id.
    pub(crate) names: ActorNames,
    /// Spare workers for stuck ones (`spare.rs`); their remotes follow the workers'.
    pub(crate) spares: crate::spare::Spares,
    /// Where spawns from outside the runtime place process actors (`worker/placement.rs`,
    /// step 7).
    pub(crate) outside: worker::OutsidePlacement,
    /// The zero of the graces' clock (`grace_now`).
    epoch: Instant,
    /// Serialises the sweeps of the queues at shutdown (see `after_push`).
    sweep: Mutex<()>,
    /// Whether spawns through a [`Handle`](crate::Handle) are still accepted (see `handle.rs`).
    pub(crate) spawn_gate: RwLock<bool>,
    /// Live actors by id (`live.rs`).
    pub(crate) live: crate::live::LiveTable,
    /// OS threads for `blocking` calls (`blocking.rs`).
    pub(crate) blocking: Arc<BlockingPool>,
    /// The I/O poller, started by the first socket that waits (`io.rs`).
    pub(crate) io: crate::io::DriverSlot,
    /// What ended actors' mailboxes received (`stats.rs`).
    pub(crate) mailbox_totals: crate::stats::MailboxTotals,
    /// The deadlock check's state and hook (`deadlock.rs`).
    pub(crate) deadlock: crate::deadlock::DeadlockWatch,
}

/// Settings fixed when the runtime is built.
pub(crate) struct Config {
    pub(crate) time_slice: Option<Duration>,
    pub(crate) preempt_ticks: Option<u32>,
    pub(crate) long_run_hook: LongRunHook,
}

impl Shared {
    /// The time on the clock of the fresh queues' graces (`grace.rs`): nanoseconds since the
    /// runtime was built, plus one, so that it never reads zero (an unmarked queue).
    pub(crate) fn grace_now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos())
            .unwrap_or(u64::MAX)
            .saturating_add(1)
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Step 1 of the shutdown protocol (`worker.rs`): raise the flag, wake every runtime thread.
    fn begin_shutdown(&self) {
        // SeqCst: pairs with the fence in `after_push` (a push either precedes this store or
        // sees the flag).
        self.shutdown.store(true, Ordering::SeqCst);
        // Step 5 of `spare.rs`: a spare never started must not be waited for.
        self.spares.drop_unstarted();
        for r in self.remotes.iter() {
            // An actor running now yields at its next safe point, so its worker reaches step 2
            // even with time slices off, or once the monitor (which exits now) stops asking.
            r.request_preempt();
            r.unpark();
        }
        self.monitor.kick();
    }

    /// Puts a new actor where workers find it: the spawning worker's fresh queue or deque,
    /// where a thief can take it before it starts, or another worker's queue of placed actors
    /// (`Remote::placed_actors`) if placement picks one (`worker/placement.rs`, step 3); from
    /// outside the runtime, a parked worker's placed actors for a process actor (placement,
    /// step 7), else the injector. Under the global-queue baseline, the shared FIFO.
    pub(crate) fn spawn_cell(self: &Arc<Self>, actor: Runnable) {
        match &self.policy {
            Policy::GlobalQueue(gq) => {
                context::with_worker(|ctx| link_to_worker(ctx, self));
                gq.push_any(actor);
                self.notify_parked();
            }
            Policy::WorkStealing | Policy::Gil(_) => self.spawn_stealable(actor),
        }
    }

    /// `spawn_cell` under work stealing.
    fn spawn_stealable(self: &Arc<Self>, actor: Runnable) {
        // The actor moves into the closure and comes back only if spawned from outside.
        let outside = context::with_worker(|ctx| match ctx {
            Some(ctx) if std::ptr::eq(&*ctx.shared, &**self) => {
                let stats = &self.remotes[ctx.index].stats;
                stats.bump(&stats.spawns);
                match worker::place(ctx, &actor) {
                    Some(other) => {
                        stats.bump(&stats.placed);
                        self.place_on(other, actor);
                    }
                    None => {
                        ctx.core.push_spawned(actor, &self.remotes[ctx.index]);
                        self.notify_parked();
                    }
                }
                None
            }
            _ => {
                link_to_worker(ctx, self);
                Some(actor)
            }
        });
        if let Some(actor) = outside {
            match worker::place_from_outside(self, &actor) {
                Some(o) => self.place_on(o, actor),
                None => self.push_injector(actor),
            }
        }
    }

    /// Placement, step 3 (`worker/placement.rs`): hands an unstarted process actor to worker `o`,
    /// which it unparks; and, as after any push of stealable work, wakes a searcher (`idle.rs`):
    /// thieves may take it too.
    fn place_on(&self, o: usize, actor: Runnable) {
        self.remotes[o].take_placed(o, actor);
        self.notify_parked();
    }

    /// `schedule_woken` for an entry made from the waker's own reference
    /// (`ActorCell::wake_by_value`), which may be the last one to the actor and, through it, to
    /// its runtime: once the entry is in a queue, a worker may run the actor to its end and
    /// drop it before this call returns. On a worker of the actor's runtime, the worker's
    /// context holds the runtime for the whole call; anywhere else, the call takes a reference
    /// of its own for its length.
    pub(crate) fn schedule_woken_owned(actor: Runnable) {
        context::with_worker(|ctx| match ctx {
            Some(ctx) if std::ptr::eq(&*ctx.shared, &*actor.actor().shared) => {
                ctx.shared.schedule_woken_from(Some(ctx), actor);
            }
            _ => {
                let shared = actor.actor().shared.clone();
                shared.schedule_woken_from(ctx, actor);
            }
        });
    }

    /// Routes a woken actor (the winner of `IDLE -> SCHEDULED`) to a run queue. See the module
    /// docs of `actor.rs` for why pinned actors only go to their home worker.
    pub(crate) fn schedule_woken(&self, actor: Runnable) {
        context::with_worker(|ctx| self.schedule_woken_from(ctx, actor));
    }

    /// `schedule_woken` on the thread whose worker context, if it is a worker, is `ctx`.
    fn schedule_woken_from(&self, ctx: Option<&context::WorkerContext>, actor: Runnable) {
        if self.is_shutdown() {
            // It will never run again: its registry unwinds it (`worker.rs`, "Shutdown").
            return;
        }
        match &self.policy {
            Policy::GlobalQueue(gq) => {
                link_to_worker(ctx, &actor.actor().shared);
                let home = actor.home();
                gq.push(actor);
                match home {
                    Some(h) => self.remotes[h].unpark(),
                    None => self.notify_parked(),
                }
                self.after_push();
            }
            Policy::WorkStealing | Policy::Gil(_) => self.schedule_woken_stealable(ctx, actor),
        }
    }

    /// `schedule_woken` under work stealing: the next slot of the waker's worker if it may run
    /// the actor, else the actor's home's inbox, or the injector.
    fn schedule_woken_stealable(&self, ctx: Option<&context::WorkerContext>, actor: Runnable) {
        let home = actor.home();
        match ctx {
            Some(ctx)
                if std::ptr::eq(&*ctx.shared, self) && home.is_none_or(|h| h == ctx.index) =>
            {
                if ctx.core.push_next(actor) {
                    self.notify_parked();
                }
            }
            _ => {
                link_to_worker(ctx, &actor.actor().shared);
                match home {
                    Some(h) => {
                        self.remotes[h].push_inbox(actor);
                        self.after_push();
                    }
                    None => self.push_injector(actor),
                }
            }
        }
    }

    /// Pushes stealable work into the injector and wakes a worker for it.
    pub(crate) fn push_injector(&self, actor: Runnable) {
        if self.is_shutdown() && actor.has_started() {
            // A started actor never runs again once shutdown began; its registry unwinds it.
            return;
        }
        self.injector.push(actor);
        // Its `SeqCst` fence (`Idle::worker_to_wake`) is the one `after_push` needs.
        self.notify_parked();
        self.sweep_if_shut_down();
    }

    /// Closes the one race of a push with shutdown. A thread that read `shutdown == false` and
    /// then pushed a started actor may have pushed after `Runtime::drop` swept the queues for
    /// the last time; the entry would then be stranded, and with it the `Arc<Shared>` that the
    /// actor holds (a reference cycle through the queue). So every push re-reads the flag:
    ///
    /// 1. `Runtime::drop` stores `shutdown` (SeqCst) before its workers stop and before its
    ///    final sweep of the queues.
    /// 2. A pusher pushes, then fences (SeqCst), then loads `shutdown`. If it reads `false`,
    ///    its push precedes step 1's store in the total order, so the final sweep sees it. If
    ///    it reads `true`, it sweeps the queues itself.
    ///
    /// The pusher's sweep drops only entries of *started* actors (their registry unwinds them;
    /// the entry is just a reference). It never runs user code: an unstarted actor found there
    /// is put back for a worker or the final sweep to drop, on a thread where that is allowed.
    /// The sweep and the final sweep hold the same lock (`Shared::sweep`), so a put-back lands
    /// before the final sweep, never after it. Nothing else puts an unstarted actor into a
    /// queue once the workers are joined: spawning from outside takes a `&Runtime`, which
    /// `Runtime::drop` owns, and spawns from actors happen on workers, all of them joined.
    fn after_push(&self) {
        fence(Ordering::SeqCst);
        self.sweep_if_shut_down();
    }

    /// The second half of [`after_push`](Shared::after_push), for a caller that has fenced.
    fn sweep_if_shut_down(&self) {
        if self.is_shutdown() {
            self.release_started_entries();
        }
    }

    /// See [`after_push`](Shared::after_push).
    fn release_started_entries(&self) {
        let _sweep = self.sweep.lock();
        let mut queued = self.take_shared_queued();
        // The entries of started actors are released here; the unstarted go back.
        queued.retain(|a| !a.has_started());
        for a in queued {
            self.requeue_unstarted(a);
        }
    }

    /// Takes every entry out of the queues that other threads push into: the injector and the
    /// workers' inboxes and queues of placed actors, or the global queue's. Caller holds the
    /// sweep lock (see `after_push`).
    fn take_shared_queued(&self) -> Vec<Runnable> {
        let mut taken = Vec::new();
        match &self.policy {
            Policy::GlobalQueue(gq) => taken.extend(gq.drain()),
            Policy::WorkStealing | Policy::Gil(_) => {
                let queues = std::iter::once(&self.injector).chain(
                    self.remotes
                        .iter()
                        .flat_map(|r| [&r.inbox, &r.placed_actors]),
                );
                for q in queues {
                    loop {
                        match q.steal() {
                            Steal::Success(a) => taken.push(a),
                            Steal::Retry => continue,
                            Steal::Empty => break,
                        }
                    }
                }
            }
        }
        taken
    }

    /// Puts an unstarted actor that a sweep took back where any worker, or the final sweep,
    /// finds it.
    fn requeue_unstarted(&self, actor: Runnable) {
        match &self.policy {
            Policy::GlobalQueue(gq) => gq.push_any(actor),
            Policy::WorkStealing | Policy::Gil(_) => self.injector.push(actor),
        }
    }

    /// Polls I/O without waiting, if no other thread polls now (`worker.rs`, "Polling for
    /// I/O", step 5); hands the right over to a parked worker if one wanted it meanwhile.
    pub(crate) fn poll_io_now(&self) {
        if let Some(driver) = self.io.started()
            && driver.try_poll(Some(Duration::ZERO))
            && driver.take_wanted()
        {
            self.notify_parked();
        }
    }

    /// Wakes a parked worker to search, if none is searching (see `idle.rs`).
    pub(crate) fn notify_parked(&self) {
        if let Some(index) = self.idle.worker_to_wake() {
            let remote = &self.remotes[index];
            remote.stats.wakeups.fetch_add(1, Ordering::Relaxed);
            remote.unpark();
        }
    }

    /// Whether any queue that thieves can reach holds work; a worker's fresh queue counts only
    /// where `may_take_fresh` says the asking worker may take from it (`worker/placement.rs`,
    /// step 5).
    pub(crate) fn any_stealable_work(
        &self,
        mut may_take_fresh: impl FnMut(&Remote) -> bool,
    ) -> bool {
        match &self.policy {
            Policy::GlobalQueue(gq) => gq.has_shared_work(),
            Policy::WorkStealing | Policy::Gil(_) => {
                !self.injector.is_empty()
                    || self.remotes.iter().any(|r| {
                        !r.stealer.is_empty()
                            || !r.free_stealer.is_empty()
                            || (r.has_unstarted() && may_take_fresh(r))
                    })
            }
        }
    }

    pub(crate) fn register_migratable(&self, actor: ActorRef) {
        Registry::STARTED.insert(&mut self.migratable_live.lock(), actor);
    }

    pub(crate) fn unregister_migratable(&self, actor: &ActorRef) {
        Registry::STARTED.remove(&mut self.migratable_live.lock(), actor);
    }

    /// The workers' remotes (the spares' follow them).
    pub(crate) fn worker_remotes(&self) -> &[Remote] {
        &self.remotes[..self.spares.first]
    }

    /// The spare workers' remotes (`spare.rs`).
    pub(crate) fn spare_remotes(&self) -> &[Remote] {
        &self.remotes[self.spares.first..]
    }

    /// Takes one started migratable actor out of the registry (shutdown).
    pub(crate) fn take_migratable(&self) -> Option<ActorRef> {
        self.migratable_live.lock().pop()
    }

    /// Drops every actor left in the injector and in the workers' inboxes and queues of placed
    /// actors (or in the global queue): unstarted ones with their closures; started ones were
    /// already unwound by their workers.
    fn drain_injector(&self) {
        // Taken under the sweep lock (see `after_push`), dropped after it: the closures'
        // destructors may wake actors, and a wake may sweep.
        let left = {
            let _sweep = self.sweep.lock();
            self.take_shared_queued()
        };
        left.into_iter().for_each(Runnable::release_at_shutdown);
    }
}

/// A running set of workers. Dropping it shuts them down (see `worker.rs`, "Shutdown").
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(2).build().unwrap();
/// // From outside: spawn and join from any thread, or run one actor to completion.
/// let h = rt.spawn(|| 20);
/// let total = rt.block_on(move || {
///     // From inside an actor: spawn on the same runtime.
///     let inner = threadlet_runtime::spawn(|| 22);
///     inner.join().unwrap()
/// });
/// assert_eq!(h.join().unwrap() + total, 42);
/// drop(rt); // stops the workers
/// ```
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<thread::JoinHandle<()>>,
    monitor: Option<thread::JoinHandle<()>>,
    /// The `threadlet-dump` thread's signal registration (`Builder::dump_on_signal`).
    dump_signal: Option<crate::dump::DumpSignal>,
}

impl Runtime {
    /// A runtime with default settings: one worker per CPU, 64 KiB stacks.
    ///
    /// ```
    /// use threadlet_runtime::{DEFAULT_STACK_SIZE, Runtime, Scheduler};
    ///
    /// let rt = Runtime::new()?;
    /// assert!(rt.workers() >= 1);
    /// assert_eq!(rt.stack_size(), DEFAULT_STACK_SIZE);
    /// assert_eq!(rt.scheduler(), Scheduler::WorkStealing);
    /// # Ok::<(), threadlet_runtime::BuildError>(())
    /// ```
    pub fn new() -> Result<Runtime, BuildError> {
        Builder::default().build()
    }

    /// A builder to configure a runtime.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// assert_eq!(rt.workers(), 1);
    /// ```
    pub fn builder() -> Builder {
        Builder::default()
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Number of worker threads.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(2).build().unwrap();
    /// assert_eq!(rt.workers(), 2);
    /// assert_eq!(rt.stats().workers.len(), 2);
    /// ```
    pub fn workers(&self) -> usize {
        self.shared.spares.first
    }

    /// The scheduler running the actors.
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, Scheduler};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// assert_eq!(rt.scheduler(), Scheduler::WorkStealing);
    /// let gil = Runtime::builder().workers(1).scheduler(Scheduler::Gil).build().unwrap();
    /// assert_eq!(gil.scheduler(), Scheduler::Gil);
    /// ```
    pub fn scheduler(&self) -> Scheduler {
        self.shared.policy.scheduler()
    }

    /// The stack size actors get by default.
    ///
    /// ```
    /// use threadlet_runtime::{DEFAULT_STACK_SIZE, Runtime};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// assert_eq!(rt.stack_size(), DEFAULT_STACK_SIZE);
    /// let rt = Runtime::builder().workers(1).stack_size(32 * 1024).build().unwrap();
    /// assert_eq!(rt.stack_size(), 32 * 1024);
    /// ```
    pub fn stack_size(&self) -> usize {
        self.shared.slab.stack_size()
    }

    /// Spawns an actor from any thread.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| "hello");
    /// assert_eq!(h.join().unwrap(), "hello");
    /// ```
    pub fn spawn<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        spawn_on(&self.shared, SpawnOptions::default(), f)
            .unwrap_or_else(|e| panic!("threadlet: cannot spawn: {e}"))
    }

    /// Spawns an actor with options; fails if an option is invalid or no stack can be had.
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, SpawnOptions};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let opts = SpawnOptions::new().name("named");
    /// let h = rt.spawn_with(opts, threadlet_runtime::current_name).unwrap();
    /// assert_eq!(h.join().unwrap().as_deref(), Some("named"));
    /// // An invalid option is an error, not a panic.
    /// assert!(rt.spawn_with(SpawnOptions::new().stack_size(1), || ()).is_err());
    /// ```
    pub fn spawn_with<F, R>(&self, opts: SpawnOptions, f: F) -> io::Result<JoinHandle<R>>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        check_options(&opts)?;
        spawn_on(&self.shared, opts, f)
    }

    /// Runs `f` as an actor and blocks the calling thread until it returns its value.
    ///
    /// A panic in `f` resumes on the caller, as if `f` had run here.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(2).build().unwrap();
    /// let sum = rt.block_on(|| {
    ///     let hs: Vec<_> = (0..10u64).map(|i| threadlet_runtime::spawn(move || i * i)).collect();
    ///     hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    /// });
    /// assert_eq!(sum, 285);
    /// ```
    pub fn block_on<F, R>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let root = self.spawn(f);
        let id = root.id();
        self.shared.deadlock.enter_block_on(&self.shared, id);
        let joined = root.join();
        let deadlock = self.shared.deadlock.leave_block_on(id);
        match joined {
            Ok(v) => v,
            Err(e) => match e.try_into_panic() {
                Ok(p) => std::panic::resume_unwind(p),
                Err(e) => match deadlock {
                    // `Builder::panic_on_deadlock` killed the root.
                    Some(d) if e.is_killed() => panic!("block_on: {e}: {d}"),
                    _ => panic!("block_on: {e}"),
                },
            },
        }
    }

    /// A snapshot of every worker's counters.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(2).build().unwrap();
    /// let handles: Vec<_> = (0..4).map(|i| rt.spawn(move || i)).collect();
    /// for h in handles {
    ///     h.join().unwrap();
    /// }
    /// let stats = rt.stats();
    /// assert_eq!(stats.workers.len(), 2);
    /// assert!(stats.total().actors_run >= 4); // each actor ran at least once
    /// assert!(stats.stacks_carved >= 1);
    /// ```
    pub fn stats(&self) -> RuntimeStats {
        RuntimeStats {
            workers: snapshots(self.shared.worker_remotes()),
            spares: snapshots(self.shared.spare_remotes()),
            stacks_carved: self.shared.slab.carved(),
            madvise_guards: self.shared.slab.guard_kind() == crate::stack::GuardKind::Madvise,
            searching: self.shared.idle.num_searching(),
            parked: self.shared.idle.num_parked(),
        }
    }

    /// Every live actor and every worker, with what each is doing: see [`Dump`](crate::Dump)
    /// for an example, and `docs/diagnostics.md` for how to read one. Gathered without stopping
    /// anything (no lock is held across all actors), so it is a sample, not a snapshot.
    pub fn dump(&self) -> crate::Dump {
        crate::dump::dump(&self.shared)
    }

    /// Counters and figures of the whole runtime: see [`Metrics`](crate::Metrics).
    pub fn metrics(&self) -> crate::Metrics {
        crate::stats::metrics(&self.shared)
    }

    /// The counters of the live actor `id` (see [`stats`](fn@crate::stats)).
    pub fn actor_stats(&self, id: crate::ActorId) -> Option<crate::ActorStats> {
        crate::dump::actor_stats(&self.shared, id)
    }

    /// A [`Handle`](crate::Handle) to spawn onto this runtime from anywhere; cloneable, and it
    /// never keeps the runtime running.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let handle = rt.handle();
    /// let worker = std::thread::spawn(move || handle.spawn(|| 6 * 7).join().unwrap());
    /// assert_eq!(worker.join().unwrap(), 42);
    /// ```
    pub fn handle(&self) -> crate::Handle {
        crate::handle::Handle::new(self.shared.clone())
    }

    /// Stops the workers, unwinding every actor still suspended so its destructors run. The
    /// same happens on drop; this spells it out.
    ///
    /// Returns once they are stopped: an actor is stopped at its next suspension or safe point,
    /// so one that runs a loop with no safe point (or sits in a blocking system call) holds the
    /// shutdown, and this call, until it reaches one; the long-run report names such an actor
    /// ([`Builder::on_long_run`]). The exceptions are threads that must not wait: one of
    /// this runtime's (an actor of it goes on until it next suspends, and is then cancelled
    /// like the others), or a worker of another runtime where no actor may suspend (a
    /// destructor in an unwind); there the shutdown goes on in the background. An actor of
    /// another runtime waits for it suspended, its worker free for its other actors.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::mpsc;
    /// use threadlet_runtime::{Runtime, park};
    ///
    /// struct SetOnDrop(Arc<AtomicBool>);
    /// impl Drop for SetOnDrop {
    ///     fn drop(&mut self) {
    ///         self.0.store(true, Ordering::SeqCst);
    ///     }
    /// }
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let dropped = Arc::new(AtomicBool::new(false));
    /// let guard = SetOnDrop(dropped.clone());
    /// let (started, is_started) = mpsc::channel();
    /// let h = rt.spawn(move || {
    ///     let _guard = guard;
    ///     started.send(()).unwrap();
    ///     while park().is_ok() {} // suspended for good
    /// });
    /// is_started.recv().unwrap();
    /// rt.shutdown();
    /// assert!(dropped.load(Ordering::SeqCst)); // the suspended stack was unwound
    /// assert!(h.join().unwrap_err().is_cancelled());
    /// ```
    pub fn shutdown(self) {
        drop(self);
    }

    /// [`shutdown`](Runtime::shutdown), waiting for it at most `timeout` (tokio's
    /// `Runtime::shutdown_timeout`): `true` if every actor was stopped and the runtime's
    /// workers, spares and monitor ended in time. A closure still running in
    /// [`blocking`](crate::blocking()) is not waited for, as `shutdown` does not wait for one (it
    /// may block for good: a read of stdin): it finishes on its pool thread, its result
    /// dropped, and tokio's wait for such calls has no counterpart here. Otherwise the shutdown
    /// goes on in the background, on a thread of
    /// its own, and this returns `false`: an actor that reaches no safe point (a loop without
    /// one, a blocking call made outside `threadlet::blocking`) is cancelled when it next
    /// reaches one, and its worker ends after it. Called by an actor of another runtime, it
    /// waits suspended, as `shutdown` does; called on one of this runtime's own threads (an
    /// actor of it), it cannot wait for the shutdown that waits for it, and returns `false`
    /// at once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use threadlet_runtime::Runtime;
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// // A loop with no safe point: the shutdown waits for it, but this call does not.
    /// let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    /// let spins = stop.clone();
    /// let (started, is_started) = std::sync::mpsc::channel();
    /// rt.spawn(move || {
    ///     started.send(()).unwrap();
    ///     while !spins.load(std::sync::atomic::Ordering::Relaxed) {
    ///         std::hint::spin_loop();
    ///     }
    /// });
    /// is_started.recv().unwrap();
    /// assert!(!rt.shutdown_timeout(Duration::from_millis(50)));
    /// stop.store(true, std::sync::atomic::Ordering::Relaxed); // it ends; so does the shutdown
    ///
    /// let idle = Runtime::builder().workers(1).build().unwrap();
    /// assert!(idle.shutdown_timeout(Duration::from_secs(10)));
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) -> bool {
        // A timeout too long to count is no timeout (`None`).
        self.close(Instant::now().checked_add(timeout))
    }

    /// Starts the shutdown and returns at once, leaving it to go on in the background (tokio's
    /// `Runtime::shutdown_background`): `shutdown_timeout` with no time to wait.
    pub fn shutdown_background(self) {
        let _ = self.shutdown_timeout(Duration::ZERO);
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.workers())
            .field("stack_size", &self.stack_size())
            .finish()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.close(None);
    }
}

impl Runtime {
    /// The shutdown (steps 1 and 6 in `worker.rs`), waiting for it at most until `deadline`
    /// where one is given; `true` if it completed meanwhile. `Drop` runs it with no deadline,
    /// `shutdown_timeout` with one; a second call (the drop after `shutdown_timeout`) finds the
    /// threads gone and does nothing.
    fn close(&mut self, deadline: Option<Instant>) -> bool {
        // Ends the `threadlet-dump` thread's wait, and gives the signal back (`dump/signal.rs`).
        drop(self.dump_signal.take());
        let threads = std::mem::take(&mut self.threads);
        let monitor = self.monitor.take();
        if threads.is_empty() && monitor.is_none() {
            return true; // closed already
        }
        let me = thread::current().id();
        let on_own_thread = threads
            .iter()
            .chain(&monitor)
            .any(|t| t.thread().id() == me)
            || self.shared.spares.runs_on(me);
        // A worker (or spare) of another runtime: an actor there, or its worker's own loop.
        let on_a_worker = context::with_worker(|ctx| ctx.is_some());
        if !on_own_thread && !on_a_worker && deadline.is_none() {
            shut_down(&self.shared, threads, monitor);
            return true;
        }
        // The shutdown goes to a thread of its own: the caller waits for it only until its
        // deadline, or the last handle was dropped on a thread that must not join the
        // workers: one of this runtime's (an actor of it, or a timer callback on its
        // monitor: joining would join this very thread), or a worker of another runtime,
        // which would be held for the whole shutdown with no safe point, its other actors
        // waiting, and for good if the shutdown needs that worker in turn (an actor unwound
        // here drops the last handle of the other runtime: two runtimes that hold each
        // other's last handle).
        //
        // An actor of another runtime that may wait waits for the shutdown as a plain thread
        // would, suspended, so that its worker runs its other actors: the shutdown thread
        // tells it when it is done. (If its own runtime shuts down meanwhile, the wait ends
        // early; the shutdown goes on.) An actor of this runtime goes on until it next
        // suspends, and from then on it is cancelled like every other; where no actor may wait
        // (an unwind, a worker's loop), the shutdown goes on in the background.
        let may_wait = !on_own_thread && (!on_a_worker || context::actor_may_suspend());
        let done = Arc::new(ShutdownDone {
            done: AtomicBool::new(false),
            waiter: may_wait.then(crate::Waiter::current),
        });
        let shared = self.shared.clone();
        let handed_off = thread::Builder::new()
            .name("threadlet-shutdown".into())
            .spawn({
                let (shared, done) = (shared.clone(), done.clone());
                move || {
                    shut_down(&shared, threads, monitor);
                    done.tell();
                }
            });
        match handed_off {
            Ok(_) if may_wait => done.wait(deadline),
            Ok(_) => false,
            // No thread to be had: start the shutdown and let the threads finish detached.
            Err(_) => {
                shared.begin_shutdown();
                false
            }
        }
    }
}

/// What the caller of a shutdown handed to a thread of its own waits on (`Runtime::close`):
/// the shutdown thread sets `done` and wakes `waiter`, the caller if it waits (a plain thread,
/// parked, or an actor of another runtime, suspended meanwhile so that its worker runs on).
struct ShutdownDone {
    done: AtomicBool,
    waiter: Option<crate::Waiter>,
}

impl ShutdownDone {
    /// The shutdown thread: the shutdown is complete.
    fn tell(&self) {
        // Release: pairs with the acquire load in `wait`.
        self.done.store(true, Ordering::Release);
        if let Some(w) = &self.waiter {
            w.wake();
        }
    }

    /// The caller (its `waiter`): waits until the shutdown is complete or `deadline` passes;
    /// whether it completed. Each wake looks again; a wake that comes between a look and the
    /// park leaves the actor notified (a thread, its park token), and the park returns at once.
    fn wait(&self, deadline: Option<Instant>) -> bool {
        while !self.done.load(Ordering::Acquire) {
            let parked = match deadline {
                // A shutdown that completed as the deadline passed says so.
                Some(d) if Instant::now() >= d => return self.done.load(Ordering::Acquire),
                Some(d) => context::park_on_until(crate::Wait::Blocking, d),
                None => context::park_on(crate::Wait::Blocking),
            };
            if parked.is_err() {
                return false; // cancelled (its own runtime's shutdown, a kill)
            }
        }
        true
    }
}

/// Shutdown as `Runtime::drop` runs it (steps 1 and 6 in `worker.rs`), on a thread that is not
/// one of the runtime's.
fn shut_down(
    shared: &Arc<Shared>,
    threads: Vec<thread::JoinHandle<()>>,
    monitor: Option<thread::JoinHandle<()>>,
) {
    shared.begin_shutdown();
    // No blocking call is waited for past this point (`blocking.rs`, "Shutdown").
    shared.blocking.close();
    for t in threads.into_iter().chain(monitor) {
        join_polling(shared, t);
    }
    // The monitor, which starts spares, has exited: no spare starts after this.
    for t in shared.spares.take_threads() {
        join_polling(shared, t);
    }
    // Every worker has given its stacks back, and none will be taken again (no worker is
    // left): where something else keeps the shared state (a `Handle`), their pages go back to
    // the kernel now, not when the last of those goes, which may be never. (Alone, the slab
    // is unmapped right after: a trim would only add system calls, one a stack under
    // `mprotect` guards.)
    if Arc::strong_count(shared) > 1 {
        shared.slab.trim_all();
    }
    // Step 1's requests that no actor took (an idle worker, an actor that parked first) would
    // hold the process-wide safe-point gate open until this runtime's memory is freed.
    for r in shared.remotes.iter() {
        r.safe_point.clear_preempt();
    }
    // Every actor has ended: stop the poller; a socket still open elsewhere (moved to a plain
    // thread) fails its next wait on this runtime's poller with an error.
    shared.io.shut_down();
    // Handles may still spawn from other threads: close them out before the last drain, so
    // that no spawn lands in a queue nobody will drain again (`handle.rs`).
    *shared.spawn_gate.write() = false;
    shared.drain_injector();
    // A handler actor started through a handle after the workers swept the live table for
    // handler actors (step 4) was dropped with the queues just now; the table's reference to it
    // would keep the runtime allocated (the actor holds `Shared`).
    shared.live.release_handlers();
    // Last, once every actor and its mailbox is gone: a delayed message dropped unrun here
    // finds its mailbox closed and goes with it, rather than being armed again (`threadlet`'s
    // `Delivery`). A timer armed from now on (a plain thread's `send_after` to an actor it
    // still names) goes to the process-wide heap (`timer.rs`, step 6).
    shared.timers.close();
}

/// How long `join_polling` waits in the poller at a time: the shutdown of a runtime with
/// sockets waits at most this long for a thread beyond its end.
const SHUTDOWN_POLL: Duration = Duration::from_millis(1);

/// Joins one of the runtime's threads during its shutdown. Meanwhile, if the runtime has a
/// poller, keeps polling it: an actor of another runtime may wait on a socket registered here
/// (`io.rs`, "A socket that moves"), which nothing else polls now, and which is handed over
/// to that runtime's poller only once every thread has been joined (`io.shut_down`).
fn join_polling(shared: &Shared, t: thread::JoinHandle<()>) {
    if let Some(driver) = shared.io.started() {
        while !t.is_finished() {
            if !driver.try_poll(Some(SHUTDOWN_POLL)) {
                // A worker still holds the poll (it wakes for the shutdown).
                thread::sleep(SHUTDOWN_POLL);
            }
        }
    }
    // A runtime thread never unwinds: user code it runs is contained, and a panic of its own
    // aborts the process (see `worker::run`), so joining cannot fail.
    let _ = t.join();
}

/// The counters of these workers.
fn snapshots(remotes: &[Remote]) -> Vec<crate::WorkerSnapshot> {
    remotes.iter().map(|r| r.stats.snapshot()).collect()
}

/// Validates per-actor options.
pub(crate) fn check_options(opts: &SpawnOptions) -> io::Result<()> {
    if let Some(size) = opts.stack_size {
        check_stack_size(size).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    }
    Ok(())
}

/// Maps the new actor's stack now if it has a custom size; one of the runtime's size is taken
/// from a worker's pool when the actor first runs, against a reservation where guards are
/// capped (see `StackSlab::reserve`).
///
/// Under `mprotect` guards a custom-size stack costs the same two kernel mappings as a pooled
/// one, so it takes a reservation too, and counts against the cap on the slots carved
/// (`StackSlab::map_owned`): the cap on mappings then holds for every actor, and an actor past
/// it fails to spawn with the error that names `vm.max_map_count`, rather than the process
/// running out of mappings elsewhere (a `std::thread::spawn`, an allocation).
pub(crate) fn prepare_stack(
    shared: &Shared,
    opts: &SpawnOptions,
) -> io::Result<(Option<OwnedStack>, bool)> {
    let reserved = shared.slab.reserve()?;
    let custom = match opts.stack_size {
        Some(size) if size != shared.slab.stack_size() => shared.slab.map_owned(size).map(Some),
        _ => Ok(None),
    };
    match custom {
        Ok(stack) => Ok((stack, reserved)),
        Err(e) => {
            if reserved {
                shared.slab.unreserve();
            }
            Err(e)
        }
    }
}

/// Links `shared` with the runtime of the worker `ctx` (if this thread is a worker of another
/// runtime), which woke or spawned an actor of `shared`'s: `deadlock.rs`, "Linked runtimes".
/// Under work stealing it is called only off the paths that stay within one runtime (a wake
/// into the waker's own next slot, a spawn onto the spawner's own queue); within one runtime
/// it is one comparison. The global-queue baseline calls it at every wake and spawn (a spawn
/// there pays a thread-local read for it). Across runtimes it takes each runtime's lock of its
/// links, every time: a cross-runtime wake already pays an injector push and an unpark.
fn link_to_worker(ctx: Option<&context::WorkerContext>, shared: &Arc<Shared>) {
    if let Some(ctx) = ctx {
        crate::deadlock::link(&ctx.shared, shared);
    }
}

pub(crate) fn spawn_on<F, R>(
    shared: &Arc<Shared>,
    opts: SpawnOptions,
    f: F,
) -> io::Result<JoinHandle<R>>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let (stack, reserved) = prepare_stack(shared, &opts)?;
    Ok(spawn_prepared(shared, opts, f, stack, reserved))
}

/// `spawn_on` once the stack is settled.
pub(crate) fn spawn_prepared<F, R>(
    shared: &Arc<Shared>,
    opts: SpawnOptions,
    f: F,
    stack: Option<OwnedStack>,
    reserved: bool,
) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let id = crate::actor::ActorId::next();
    let (start, mut handle) = join::entry(id, opts.name.as_deref().map(Arc::from), f);
    let exit = handle.exit_source();
    let entry = ActorCell::new_process(shared.clone(), id, opts, start, exit, stack, reserved);
    handle.set_actor(entry.actor());
    shared.live.insert(entry.actor());
    shared.spawn_cell(entry);
    handle
}

/// Spawns an actor on the current runtime (from inside an actor). Spawning is a preemption
/// safe point.
///
/// # Panics
///
/// When called outside any runtime (use [`Runtime::spawn`] there), or when no stack can be had
/// for the actor ([`spawn_with`] returns that error instead).
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let h = threadlet_runtime::spawn(|| 1 + 1);
///     assert_eq!(h.join().unwrap(), 2);
/// });
/// ```
pub fn spawn<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let shared = context::current_runtime_for("spawn").unwrap_or_else(|e| panic!("{e}"));
    crate::checkpoint();
    spawn_on(&shared, SpawnOptions::default(), f)
        .unwrap_or_else(|e| panic!("threadlet: cannot spawn: {e}"))
}

/// Spawns an actor with options on the current runtime; fails if an option is invalid or when
/// called outside any runtime.
///
/// ```
/// use threadlet_runtime::{Runtime, SpawnOptions};
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// rt.block_on(|| {
///     let opts = SpawnOptions::new().name("child").stack_size(128 * 1024);
///     let h = threadlet_runtime::spawn_with(opts, threadlet_runtime::current_name).unwrap();
///     assert_eq!(h.join().unwrap().as_deref(), Some("child"));
/// });
/// // Outside any runtime there is nowhere to spawn.
/// assert!(threadlet_runtime::spawn_with(SpawnOptions::new(), || ()).is_err());
/// ```
pub fn spawn_with<F, R>(opts: SpawnOptions, f: F) -> io::Result<JoinHandle<R>>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    check_options(&opts)?;
    crate::checkpoint();
    let shared = context::current_runtime_for("spawn")?;
    spawn_on(&shared, opts, f)
}
