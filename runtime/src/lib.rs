//! The engine behind [threadlet](https://docs.rs/threadlet): an M:N work-stealing scheduler
//! that runs stackful actors (coroutines on `corosensei`) on a few worker threads.
//!
//! Applications use the `threadlet` crate, which re-exports what they need from here and adds
//! mailboxes and channels. This crate owns:
//!
//! | module | what it owns |
//! |---|---|
//! | `runtime` | [`Builder`], [`Runtime`], the shared state, routing of spawns and wakes |
//! | `worker` | one worker thread: its run queues, its loop, polling for I/O when idle, shutdown |
//! | `worker::placement` | where a spawned process actor starts; the balance rule of thieves |
//! | `worker::carrier` | the coroutines on pooled stacks that run handler actors' activations |
//! | `poll_right` | the right to poll I/O and its hand-over between workers |
//! | `io` | the I/O poller (`mio`, polled by the workers and the monitor), one socket's readiness |
//! | `net` | TCP and UDP sockets in `std::net`'s shape that suspend the calling actor |
//! | `blocking` | the pool of OS threads for calls that would block a worker |
//! | `baseline` | the single-lock baselines: `GlobalQueue` and `Gil` |
//! | `idle` | the sleep protocol: searching and parked workers, whom to wake |
//! | `grace` | how long idle workers leave another worker's unstarted process actors alone |
//! | `spare` | spare workers that cover a worker stuck outside a safe point (handoff) |
//! | `next_slot` | a worker's next slot, which only it fills and other threads may empty (below) |
//! | `actor` | one actor: id, options, body, the pinning rule |
//! | `handle` | [`Handle`]: spawning from any thread, and the spawn gate at shutdown |
//! | `home` | the worker an actor is pinned to; the hand-off that pins and frees handler actors |
//! | `handler` | handler actors as the runtime runs them: activations on borrowed stacks |
//! | `program` | a handler actor's program in its cell, and its lending to a carrier |
//! | `wake` | the wake state word that schedules a parked actor exactly once |
//! | `context` | the calling thread's view: [`park`], [`yield_now`], [`Waiter`] |
//! | `safepoint` | [`checkpoint`]: the process-wide gate and each worker's preempt flag and ticks |
//! | `fault` | running user code where a panic must not escape (`contain`) |
//! | `join` | [`JoinHandle`], [`JoinError`] and [`JoinErrorKind`] |
//! | `exit_hooks` | the exit hooks waiting for one actor's end (an `ExitWatch`'s, a mailbox's) |
//! | `live` | the table of live actors by id: `kill`, `monitor`, the dump and the metrics |
//! | `stack` | guarded stacks: the slab and its reservations, per-worker pools, custom sizes |
//! | `guard` | the stack overflow reporter |
//! | `monitor` | the monitor thread: preemption, spare handoff, long runs, timers, deadlock check |
//! | `timer` | the heap of timers behind `sleep` and timeouts |
//! | `stats` | per-worker counters |
//! | `wait` | what a suspended actor waits on: one word per actor |
//! | `dump` | [`Dump`]: every live actor and worker, gathered without stopping them |
//! | `dump/signal` | the dump on a signal, and the signal's own action after the last runtime |
//! | `deadlock` | the monitor's deadlock check and its report, [`Deadlock`] |
//! | `trace` | `tracing` spans and events, behind the optional `tracing` feature |
//! | `sync` | the std/loom switch used by the protocol code |
//!
//! A free actor (a handler actor between activations, a migratable actor) in a worker's next
//! slot may be taken by a spare covering that worker, or by an idle worker once the running
//! actor has overrun its time slice.
//!
//! `docs/architecture.md` in the repository walks through the design.
//!
//! ```
//! use threadlet_runtime::Runtime;
//!
//! let rt = Runtime::builder().workers(2).build().unwrap();
//! let squares = rt.block_on(|| {
//!     // Each actor runs on its own small stack; `join` suspends the caller, not its worker.
//!     let hs: Vec<_> = (1..=3u64).map(|i| threadlet_runtime::spawn(move || i * i)).collect();
//!     hs.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
//! });
//! assert_eq!(squares, [1, 4, 9]);
//! ```

#![warn(missing_docs)]

mod actor;
mod baseline;
mod blocking;
mod context;
mod deadlock;
mod dump;
mod exit_hooks;
mod fault;
mod grace;
mod guard;
mod handle;
mod handler;
mod home;
mod idle;
mod io;
mod join;
mod live;
mod monitor;
pub mod net;
mod next_slot;
mod poll_right;
mod program;
mod runtime;
mod safepoint;
mod spare;
mod stack;
mod stats;
pub mod sync;
mod timer;
mod trace;
mod wait;
mod wake;
mod worker;

pub use actor::{ActorId, SpawnOptions};
pub use blocking::{DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_BLOCKING_THREADS, blocking};
pub use context::{
    Cancelled, Waiter, call_at, current, current_name, park, park_on, park_on_until, park_until,
    preemptions, sleep, sleep_until, worker_index, yield_now,
};
pub use deadlock::Deadlock;
pub use dump::{
    ActorDump, ActorKind, ActorState, ActorStats, Dump, MailboxStats, WorkerDump, WorkerState,
    stats,
};
pub use handle::Handle;
pub use handler::{
    ACTIVATION_IN_PLACE, Activation, Completion, Step, activation_killed, activation_may_park,
    activation_preempted, catch_actor_panic, start_handler,
};
pub use join::{AbortHandle, Down, ExitReason, ExitWatch, JoinError, JoinErrorKind, JoinHandle};
pub use live::{exit_watch, kill};
pub use monitor::{LONG_RUN_SLICES, LongRun};
pub use runtime::{
    BuildError, Builder, DEFAULT_TIME_SLICE, MAX_WORKERS, Runtime, Scheduler, spawn, spawn_with,
};
pub use safepoint::checkpoint;
pub use stack::{DEFAULT_STACK_SIZE, MAX_STACK_SIZE, MIN_STACK_SIZE};
pub use stats::{Metrics, RuntimeStats, WorkerMetrics, WorkerSnapshot};
pub use wait::Wait;

#[doc(hidden)]
pub mod __private {
    //! Exposed for the loom models and tests, and for the `threadlet` crate's `select!` and
    //! mailboxes; not part of the API.
    pub use crate::actor::{ActorCell, unassigned_actor_id};
    pub use crate::context::{ArmedTimer, call_at_for};
    pub use crate::exit_hooks::{ExitHook, ExitHooks, Listener};
    pub use crate::fault::panic_message;
    pub use crate::grace::{FRESH_GRACE, FreshMark};
    pub use crate::home::Home;
    pub use crate::idle::{Idle, Recheck, Searcher};
    pub use crate::join::{
        ExitSink, actor_of, call_exit_hook, exit_hooks_waiting, join_cancelled, join_take_now,
        join_unwatch, join_watch, kill_actor, never_started, set_exit_sink, set_own_exit_sink,
    };
    pub use crate::next_slot::{NextSlot, NextStealer, SlotEntry, next_slot};
    pub use crate::poll_right::PollRight;
    pub use crate::wake::{AfterPark, WakeAction, WakeState};
    pub use crate::worker::linger::{Linger, WakeFlag};

    /// A plain thread took hold of an end of the channel this waiter waits on: the
    /// deadlock check must count the wait as one the outside may end (`wait.rs`,
    /// `WaitWord::mark_outside`).
    pub fn mark_wait_outside(waiter: &crate::Waiter) {
        if let crate::Waiter::Actor(cell) = waiter {
            cell.wait.mark_outside();
        }
    }

    /// A mailbox's actor ended: its figures join the runtime's totals (`Runtime::metrics`).
    pub fn mailbox_ended(actor: &ActorCell, received: u64, high_water: usize) {
        crate::stats::MailboxTotals::add(&actor.shared, received, high_water);
    }

    /// The calling actor's id if it is a handler actor (`None` for a process actor or a
    /// plain thread): an `ask` to its own mailbox could never be answered.
    pub fn current_handler() -> Option<crate::ActorId> {
        crate::context::with_current(|cur| cur.and_then(|(_, a)| a.is_handler().then_some(a.id)))
    }

    /// Links the calling actor's runtime to `actor`'s for the deadlock check: the caller is
    /// about to wait for `actor`'s end through an exit hook (a monitor or a link made through
    /// an address).
    pub fn link_caller_to_runtime_of(actor: &ActorCell) {
        crate::deadlock::link_caller_to(&actor.shared);
    }

    /// Whether the runtime of the calling actor has begun to shut down (`false` outside any
    /// runtime). Lets tests hold a worker until shutdown has begun, deterministically.
    pub fn shutting_down() -> bool {
        crate::context::current_shared().is_some_and(|s| s.is_shutdown())
    }
}
