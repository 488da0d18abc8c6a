//! A worker: one OS thread that runs actors until the runtime shuts down.
//!
//! # State, split by who may touch it
//!
//! * [`Core`]: owned by the worker thread alone (the owner ends of its next slot, stealable
//!   deque, fresh queue and free FIFO, its local queue of turns, its stack pool, its registry
//!   of started actors). Actor code running on the worker reaches it through the thread's
//!   context, so every field is a `Cell`/`RefCell` or an owner end that takes `&self` (the
//!   next slot's, `next_slot.rs`; the deques'), and no borrow is held across a resume.
//! * [`Remote`]: what other threads may touch (the stealer ends of the deque, the fresh queue,
//!   the free FIFO and the next slot, the queue of actors placed here, the inbox for wakes of
//!   pinned actors, the unparker, the preempt flag, the counters). Lives in `Shared`.
//!
//! # Run queues of one worker
//!
//! | queue | holds | who pushes | who pops |
//! |---|---|---|---|
//! | `next` slot | the actor just woken by the running one (`next_slot.rs`) | this worker | this worker; if the actor is free to move, a covering spare, and an idle worker once the running actor has overrun its slice |
//! | `local` FIFO | the turns of what waits here, in order: pinned actors that are runnable (woken here, displaced from `next`, yielded), and a mark for each free actor in `free_fifo` | this worker | this worker |
//! | `inbox` | pinned actors woken by other threads | anyone | this worker |
//! | `placed_actors` | process actors not started yet, placed here by spawns elsewhere (from other workers, or from outside the runtime) | anyone | this worker (after `fresh`), thieves that the balance rule lets, a covering spare |
//! | `free_fifo` | free runnable actors (handler actors between activations, migratable actors) waiting for their turn: a handler actor whose batch ran out, free actors displaced from `next` by a long chain or a preemption | this worker | this worker, thieves, a covering spare |
//! | `deque` (LIFO) | handler and migratable actors not started yet, free actors displaced from `next` by another wake, batches taken from the injector | this worker | this worker, thieves, a covering spare |
//! | `fresh` (LIFO) | process actors not started yet (they pin where they start), spawned here or stolen by this worker | this worker | this worker, thieves that the balance rule lets (`placement.rs`), a covering spare |
//! | `injector` (shared) | spawns from outside that placement does not place, migratable wakes from outside | anyone | every worker |
//!
//! # Finding work
//!
//! Each turn: the `next` slot first (at most `MAX_NEXT_RUNS` times in a row); then, every
//! `GLOBAL_POLL_INTERVAL` turns and after a preemption, the injector, the deque, `fresh` and
//! `placed_actors` (so a busy local queue cannot starve actors that have not started), and after a
//! preemption with nothing else waiting here, one actor that can move from the other workers'
//! deques and free FIFOs; otherwise the inbox (moved to the back of `local`), `local` (a pinned
//! actor, or for a mark the front of `free_fifo`), `deque`, `fresh`, `placed_actors`, a batch from
//! the injector. A chain cut by the cap with nothing queued runs again at once
//! (`turn_after_chain`). With none, the worker runs the sleep protocol (`Idle::search` in
//! `idle.rs`, through this worker's `Searcher` impl): it steals half of a random victim's deque
//! (or else a fair share of its unstarted process actors, fresh or placed, if the balance rule
//! of `placement.rs` lets it, or else half of its free FIFO), for up to `idle::SEARCH_ROUNDS`
//! rounds, then parks. A worker that a wake got out of its last park soon watches for the next
//! wake for a while before it blocks again (`worker/linger.rs`): the wakes of pinned actors
//! from other workers then cost no trip through the kernel.
//!
//! # Placement
//!
//! Where a spawned process actor starts, which is where it will ever run, is decided by
//! placement (`worker/placement.rs`, whose module docs number the steps): a spawn from a busy
//! worker may hand the actor to a parked, lighter one, and idle workers steal unstarted process
//! actors only under the balance rule that keeps.
//!
//! # Shutdown
//!
//! 1. `Runtime::drop` sets `shutdown`, asks every worker's running actor to yield at its next
//!    safe point (a preemption request: the monitor exits now and would not ask any more), and
//!    unparks every worker (handing the whole shutdown to a thread of its own if it runs on one
//!    of the runtime's threads or on a worker of another runtime, whose actor then waits for
//!    it suspended). From then on wakes and pushes of started actors are dropped, not queued
//!    (see `Shared::after_push`). An actor that never reaches a safe point keeps its worker,
//!    and the drop waits for it.
//! 2. A worker sees the flag at the top of its loop (after the running actor suspended: actors
//!    are never interrupted mid-run) and sets `cancelling`, so that any park inside an actor now
//!    fails at once instead of suspending.
//! 3. It drops every queued actor that has not started (its closure's destructors run, under
//!    `fault::contain`, outside any actor, where blocking fails as cancelled; its join
//!    handle reports `Cancelled`) and force-unwinds, on this thread, every started pinned actor
//!    in its registry, so destructors on their stacks run and stacks return to the pool.
//!    Unwinding can wake or spawn actors; the worker repeats 3 until its queues and registry
//!    are empty.
//! 4. Migratable started actors live in a shared registry and may be running on any worker, so
//!    they wait for a barrier that every worker reaches only after it has stopped running
//!    actors. Then the workers take them out of the registry one by one and unwind them, and
//!    meet at a second barrier, so that no worker thread exits while migratable code runs.
//! 5. Each worker repeats 3 for what step 4 queued, and exits.
//! 6. `Runtime::drop` joins the workers, then drops what other threads pushed into inboxes,
//!    queues of placed actors and the injector after their owner had finished.
//!
//! # Polling for I/O
//!
//! The runtime's I/O poll (`io.rs`) has no thread of its own: workers poll it, as Go's
//! scheduler polls its netpoller.
//!
//! 1. A worker about to sleep (step 4 of the sleep protocol in `idle.rs`) takes the right to
//!    poll if no other thread holds it (`poll_instead_of_park`); else it parks on its `Parker`
//!    as usual, leaving word (`Driver::lock_poll_or_want`; the hand-over protocol and why it
//!    loses no hand-over are in `poll_right.rs`) so that a holder that lets go
//!    without waiting in the poll (step 5) wakes a parked worker to take over: with every
//!    worker parked, one of them is always in the poll, once the watch of a worker that
//!    lingers (`worker/linger.rs`) is over, within 50 µs.
//! 2. With the right, it raises its `polling` flag, then a `SeqCst` fence, then takes any
//!    pending `Parker` token, then looks at everything that could be waiting for it: its own
//!    queues and next slot, its inbox, the stealable queues, whether a producer took it off
//!    the sleeper list, shutdown. If anything is there it polls without waiting; else it
//!    waits in the poll (up to the sleep's timeout). The actors whose sockets are ready are
//!    woken from here, into this worker's next slot and queues or their home workers' inboxes.
//! 3. Every wake of a worker goes through `Remote::unpark`: the `Parker`'s unpark, a `SeqCst`
//!    fence, then, if the worker's `polling` flag is up, the poll's waker. Either the waker sees
//!    the flag and interrupts the poll, or its fence comes first and the polling worker's look
//!    in step 2 sees what the waker pushed before unparking (the two fences order the flag's
//!    store against the push). So a worker waiting in the poll misses no wake.
//! 4. Lowering the flag and releasing the right, the worker goes back to searching; the actors
//!    the poll woke are in its queues (`find` takes the next slot too, before and after its
//!    look at the other queues, whose poll of step 5 may fill the slot). If a worker wanted the
//!    poll meanwhile, it wakes a parked worker (`notify_parked`), which takes the poll over:
//!    while this one runs what it found, another waits in the poll. (When the poll is first
//!    made, every worker is woken once, so that workers parked before it existed come back to
//!    sleep in it.)
//! 5. Readiness must not wait for an idle worker: a busy worker polls without waiting every
//!    [`GLOBAL_POLL_INTERVAL`] turns (under every scheduler), and the monitor polls without waiting at every sample
//!    while any worker runs an actor (a worker busy with one long-running actor turns seldom).
//!
//! # Kill
//!
//! `JoinHandle::abort` ends one actor early, by the same means shutdown uses, on the worker
//! that holds the actor's body:
//!
//! 1. The killer raises the `KILLED` bit of the actor's `life` byte (release), and asks every
//!    worker to preempt its running actor: the target, if it runs now, yields at its next safe
//!    point. (A worker that lowers such a request when it starts a time slice raises it again
//!    if the actor it is about to run is killed; see `run_actor`.)
//! 2. It wakes the actor. A parked actor is scheduled (to its home worker, if pinned); a
//!    running one is left `NOTIFIED`. Either way some worker gets the body again: at the pop,
//!    or when the actor next suspends. A running actor's `park` reads the flag before it would
//!    take the notification, and yields instead (taking it would swallow the kill's wake and
//!    let the actor wait on, for an hour if it sleeps one); so does its next safe point, which
//!    the preemption request of 1 makes yield.
//! 3. Every time a worker is about to resume an actor (`run_actor`: before starting or
//!    activating it, before resuming it after a park that a wake cut short, after a yield,
//!    after an activation), it reads the flag (acquire); under the GIL baseline, once it holds
//!    the lock, so that a kill that comes while it waits for the lock is seen. Raised, it ends
//!    the actor instead (`kill`), with `cancelling` and `killing` set: an unstarted actor's
//!    closure, or an idle handler actor's program (state and mailbox), is dropped; a started
//!    coroutine is force-unwound right here, which is its home worker for a pinned actor, so
//!    destructors run on the thread the stack belongs to.
//!    A join completer dropped meanwhile reports `Killed`. Then the usual end: stack back to
//!    the pool, registries left, `end`.
//!
//! A kill after the actor's end finds `DONE` and reports `false`. A kill cannot interrupt code
//! that never reaches a safe point; it lands at the next one.
//!
//! A worker thread never dies: the user code it runs is contained (`fault.rs`), and a panic in
//! its own frames, a runtime bug, aborts the process (`fault::AbortOnUnwind`) rather than strand the
//! actors pinned to it.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::num::NonZeroU64;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use corosensei::{Coroutine, CoroutineResult};
use crossbeam_deque::{Injector, Steal, Stealer, Worker as Deque};
use crossbeam_utils::sync::{Parker, Unparker, WaitGroup};

use crate::actor::{
    ACTIVATION_PREEMPTED, ActorCoroutine, ActorFrame, ActorId, ActorRef, ActorStack, ActorYielder,
    Body, Finished, Out, Registry, Runnable, Suspend,
};
use crate::baseline::Policy;
use crate::context::{self, WorkerContext};
use crate::fault::AbortOnUnwind;
use crate::grace::FreshMark;
use crate::handler::Step;
use crate::idle::{Recheck, Searcher};
use crate::io::Driver;
use crate::next_slot::{NextSlot, NextStealer, next_slot};
use crate::program::Lent;
use crate::runtime::Shared;
use crate::safepoint::SafePoint;
use crate::spare::{SPARE_POLL_MAX, SPARE_POLL_MIN};
use crate::stack::StackPool;
use crate::stats::WorkerStats;
use crate::wake::AfterPark;

mod carrier;
pub(crate) mod linger;
mod placement;

use carrier::{Carrier, activation_suspended, drop_unwound_program};
use linger::{Linger, WakeFlag};
use placement::PLACE_MARGIN;
pub(crate) use placement::{OutsidePlacement, place, place_from_outside};

/// Every this many turns a worker looks at the injector, its deque and its fresh queue before
/// its local queue, so that a worker busy with pinned actors still starts new ones. (The inbox
/// is drained every turn; the next slot is capped by `MAX_NEXT_RUNS`.) 61 is Go's choice: a
/// prime, so it does not fall into step with periodic workloads.
const GLOBAL_POLL_INTERVAL: u32 = 61;

/// Consecutive runs out of the next slot before the worker looks at its queues again. Without a
/// cap, two actors waking each other would keep everything queued behind them waiting (until
/// their shared time slice ends, or forever with time slices off). Tokio caps its LIFO slot at
/// 3 for the same reason; a small number keeps the cache-hot hand-off for short exchanges.
const MAX_NEXT_RUNS: u32 = 3;

/// Whether a steal may take from a victim's fresh queue (unstarted process actors, which pin to
/// whoever starts them).
#[derive(Clone, Copy)]
enum Fresh {
    /// Under the balance rule of `placement.rs`, step 5: an idle worker's search.
    Balanced,
    /// Freely: a covering spare, or a worker whose grace has run out (step 6).
    Open,
}

/// Runs a crossbeam steal until it settles: the actor it took, or `None` for an empty queue.
/// (`Retry` means a race with another thief or the owner, not emptiness.)
fn settle(mut steal: impl FnMut() -> Steal<Runnable>) -> Option<Runnable> {
    std::iter::repeat_with(&mut steal)
        .find(|s| !s.is_retry())
        .and_then(Steal::success)
}

/// Steals one actor from `from`, unless it looks empty (see [`steal_batch_from`]).
fn steal_one(from: &Stealer<Runnable>) -> Option<Runnable> {
    if from.is_empty() {
        return None;
    }
    settle(|| from.steal())
}

/// [`steal_batch`] from another worker's queue, unless it looks empty: about half of it
/// (crossbeam's `steal_batch_and_pop`), or with a `limit`, at most that many of that half. A
/// crossbeam steal pins
/// the memory-reclamation epoch before it looks (a thread-local count and a full fence), and
/// an idle worker's search looks at every other worker's queues dozens of times before it
/// parks, mostly finding them empty; `is_empty` is two loads and a fence, with no pin. A deque
/// that fills just after the look is found by the next round, or by the re-check before
/// parking (`idle.rs`, step 3), as one that fills just after a steal found it empty would be.
fn steal_batch_from(
    into: &Deque<Runnable>,
    from: &Stealer<Runnable>,
    limit: Option<usize>,
) -> Option<(Runnable, usize)> {
    if from.is_empty() {
        return None;
    }
    match limit {
        None => steal_batch(into, |d| from.steal_batch_and_pop(d)),
        Some(n) => steal_batch(into, |d| from.steal_batch_with_limit_and_pop(d, n)),
    }
}

/// Steals a batch into `into` with `steal` (a crossbeam `steal_batch_and_pop`, about half of
/// another worker's `Stealer` or of an `Injector`, or a bounded share of one), returning one
/// actor to run and how many more went into `into`.
fn steal_batch(
    into: &Deque<Runnable>,
    steal: impl Fn(&Deque<Runnable>) -> Steal<Runnable>,
) -> Option<(Runnable, usize)> {
    let before = into.len();
    let a = settle(|| steal(into))?;
    Some((a, into.len().saturating_sub(before)))
}

/// The state letter of a thread's `stat` line (`R` running or runnable, `S` sleeping, `D` in
/// uninterruptible sleep, ...): the first field after the command name, which is in
/// parentheses and may itself hold spaces and parentheses.
fn thread_state(stat: &str) -> Option<char> {
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.trim_start().chars().next()
}

/// `Remote::cpu_clock` before the thread has set it.
const NO_CLOCK: i32 = i32::MIN;

/// What other threads may touch of one worker.
pub(crate) struct Remote {
    pub(crate) stealer: Stealer<Runnable>,
    /// The stealer end of `Core::fresh`.
    pub(crate) fresh_stealer: Stealer<Runnable>,
    /// The grace of this worker's unstarted process actors, `Core::fresh` and
    /// `placed_actors` (`placement.rs`, step 6; `grace.rs`): marked by idle workers held back
    /// from them, cleared by whoever pushes into them while both are empty.
    pub(crate) fresh_mark: FreshMark,
    /// The stealer end of `Core::free_fifo`.
    pub(crate) free_stealer: Stealer<Runnable>,
    /// The thieves' end of `Core::next`: a covering spare, or an idle worker once this one has
    /// overrun its slice, takes a free actor out of it (`next_slot.rs`).
    pub(crate) next_stealer: NextStealer<Runnable>,
    /// Pinned actors of this worker woken from other threads (started, so only this worker
    /// may run them).
    pub(crate) inbox: Injector<Runnable>,
    /// Process actors placed here by spawns elsewhere and not started yet (`placement.rs`, step
    /// 3): this worker takes them after its fresh queue, and thieves under the same rule as
    /// that queue, whose grace (`fresh_mark`) covers them too.
    pub(crate) placed_actors: Injector<Runnable>,
    /// Raised (release) after every push into `inbox`, lowered by the owner before it drains:
    /// one relaxed load on the owner's hot path instead of the injector's two index loads.
    inbox_hint: AtomicBool,
    pub(crate) unparker: Unparker,
    /// Raised by every wake of this worker, for a lingering sleep to see (`linger.rs`).
    woken: WakeFlag,
    /// What a safe point reads when the process-wide gate is open (`safepoint.rs`).
    pub(crate) safe_point: SafePoint,
    /// The current time slice's number, or 0 while idle (see `monitor.rs`).
    pub(crate) slice: AtomicU64,
    /// The id of the actor running now (for the monitor's long-run report).
    pub(crate) running_actor: AtomicU64,
    /// Started actors pinned here (the length of `Core::live`), published by the owner after
    /// every change of its registry: part of this worker's load (`placement.rs`).
    pinned: AtomicUsize,
    /// Actors that spawns on other workers placed here and that have not started or ended yet:
    /// the other part of its load. Raised by the placing spawner, lowered by whoever holds
    /// the actor when it starts or ends unstarted (`ActorCell::unplace`).
    placed: AtomicUsize,
    /// Raised while the worker is parked (from just before it sleeps until it wakes; from its
    /// start, since it starts parked): placement hands actors only to parked workers.
    parked: AtomicBool,
    /// Raised while this worker, idle, waits in the runtime's I/O poll instead of on its
    /// `Parker` ("Polling for I/O" below): an unpark must then also wake the poll.
    polling: AtomicBool,
    /// The poller this worker polls, set the first time it does.
    poll_driver: OnceLock<Arc<Driver>>,
    /// The CPU-time clock of the worker's thread (`pthread_getcpuclockid`), set when it starts;
    /// `NO_CLOCK` before. The monitor reads it to tell a blocked thread from a busy one
    /// (`spare.rs`, step 1).
    cpu_clock: AtomicI32,
    /// The kernel's id of the worker's thread, set when it starts; 0 before. The monitor reads
    /// the thread's state by it, to tell a thread waiting for a CPU from a blocked one
    /// (`monitor.rs`, step 4).
    tid: AtomicI32,
    pub(crate) stats: WorkerStats,
}

impl Remote {
    /// Actors in this worker's stealable queues now (for the dump and the metrics).
    pub(crate) fn stealable_len(&self) -> usize {
        self.stealer.len()
            + self.fresh_stealer.len()
            + self.placed_actors.len()
            + self.free_stealer.len()
    }

    /// Whether this worker holds unstarted process actors that other workers may take under
    /// the balance rule: its fresh queue, and actors placed here. `SeqCst` emptiness checks
    /// (crossbeam's), as the sleep protocol's re-check needs (`idle.rs`).
    pub(crate) fn has_unstarted(&self) -> bool {
        !self.fresh_stealer.is_empty() || !self.placed_actors.is_empty()
    }

    /// Called just before a push of unstarted process actors here, by whoever pushes: new work
    /// in queues that held none starts a grace of its own (`grace.rs`, step 4; the clear comes
    /// first, and the push publishes it).
    fn before_unstarted_push(&self) {
        self.fresh_mark.before_push(|| !self.has_unstarted());
    }

    pub(crate) fn new(
        queues: &StealableQueues,
        next_stealer: NextStealer<Runnable>,
        unparker: Unparker,
        ticks: bool,
    ) -> Remote {
        Remote {
            stealer: queues.deque.stealer(),
            fresh_stealer: queues.fresh.stealer(),
            fresh_mark: FreshMark::new(),
            free_stealer: queues.free_fifo.stealer(),
            next_stealer,
            inbox: Injector::new(),
            placed_actors: Injector::new(),
            inbox_hint: AtomicBool::new(false),
            unparker,
            woken: WakeFlag::default(),
            safe_point: SafePoint::new(ticks),
            slice: AtomicU64::new(0),
            running_actor: AtomicU64::new(0),
            pinned: AtomicUsize::new(0),
            placed: AtomicUsize::new(0),
            parked: AtomicBool::new(true),
            polling: AtomicBool::new(false),
            poll_driver: OnceLock::new(),
            cpu_clock: AtomicI32::new(NO_CLOCK),
            tid: AtomicI32::new(0),
            stats: WorkerStats::default(),
        }
    }

    /// Wakes this worker if it sleeps, whether on its `Parker` or in the I/O poll ("Polling
    /// for I/O", step 3). Every wake of a worker goes through here.
    pub(crate) fn unpark(&self) {
        // `linger.rs`, step 1: the flag before the token.
        self.woken.raise();
        self.unparker.unpark();
        // SeqCst: pairs with the fence in `WorkerLoop::poll_instead_of_park`: either this load
        // sees `polling` raised, or that worker's look at its work comes after this fence and
        // sees what the caller pushed before calling.
        fence(Ordering::SeqCst);
        if self.polling.load(Ordering::Relaxed)
            && let Some(d) = self.poll_driver.get()
        {
            d.wake();
        }
    }

    /// The actor this worker runs now, if it runs one (for reports: stale once read).
    pub(crate) fn running(&self) -> Option<ActorId> {
        // Relaxed, both: samples for a report (see `monitor.rs`, `running_on`).
        if self.slice.load(Ordering::Relaxed) == 0 {
            return None;
        }
        NonZeroU64::new(self.running_actor.load(Ordering::Relaxed)).map(ActorId)
    }

    /// CPU time the worker's thread has used so far, if it can be read.
    pub(crate) fn thread_cpu_time(&self) -> Option<Duration> {
        // Relaxed: a number written once by the thread itself before it runs anything.
        let clock = self.cpu_clock.load(Ordering::Relaxed);
        if clock == NO_CLOCK {
            return None;
        }
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `clock_gettime` writes one `timespec` through a valid pointer; a clock whose
        // thread has exited makes it fail (EINVAL), which is reported as `None`.
        let r = unsafe { libc::clock_gettime(clock, &mut ts) };
        (r == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }

    /// Whether the worker's thread is running or waiting for a CPU (state `R` in
    /// `/proc/self/task/<tid>/stat`), not sleeping in the kernel; `None` if that cannot be read.
    pub(crate) fn is_runnable(&self) -> Option<bool> {
        // Relaxed: a number written once by the thread itself before it runs anything.
        let tid = self.tid.load(Ordering::Relaxed);
        if tid == 0 {
            return None;
        }
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
        Some(thread_state(&stat)? == 'R')
    }

    /// Whether the worker sleeps (for reports).
    pub(crate) fn is_parked(&self) -> bool {
        // Relaxed: a sample for a report.
        self.parked.load(Ordering::Relaxed)
    }

    /// Asks the actor running on this worker to yield at its next safe point.
    pub(crate) fn request_preempt(&self) {
        self.safe_point.request_preempt();
    }

    /// Whether the inbox may hold actors, leaving the hint as it is.
    fn has_inbox_hint(&self) -> bool {
        self.inbox_hint.load(Ordering::Relaxed)
    }

    /// Whether the inbox may hold actors; lowers the hint. A push that lands after the hint is
    /// lowered raises it again (and unparks the owner), so none is missed for long: the owner
    /// looks again at its next turn.
    fn take_inbox_hint(&self) -> bool {
        self.has_inbox_hint() && self.inbox_hint.swap(false, Ordering::Acquire)
    }

    /// Hands a woken pinned actor to this worker from another thread, and wakes it.
    pub(crate) fn push_inbox(&self, actor: Runnable) {
        self.stats.remote_wakes.fetch_add(1, Ordering::Relaxed);
        self.inbox.push(actor);
        // Release: pairs with the acquire swap in `take_inbox_hint`.
        self.inbox_hint.store(true, Ordering::Release);
        self.unpark();
    }

    /// This worker's load, as placement sees it: actors pinned here plus actors placed here
    /// that have not started yet. (Each reader adds the length of the worker's fresh queue.)
    pub(crate) fn load(&self) -> usize {
        // Relaxed, both: figures for a heuristic, which publish nothing; a stale value only
        // makes one placement less apt.
        self.pinned.load(Ordering::Relaxed) + self.placed.load(Ordering::Relaxed)
    }

    /// Step 3 of placement: takes in an unstarted actor that a spawn elsewhere placed here,
    /// and unparks this worker to start it. It counts in this worker's load until it starts or
    /// ends (`ActorCell::unplace`). Called through `Shared::place_on`, which then wakes a
    /// searcher, as after any push of stealable work (`idle.rs`): thieves may take it too.
    pub(crate) fn take_placed(&self, index: usize, actor: Runnable) {
        // Relaxed, both: `placed_on` is published to whoever takes the actor by the queue's
        // push and steal, as the body is; `placed` is a figure (see `load`).
        actor.placed_on().store(index as u32, Ordering::Relaxed);
        self.placed.fetch_add(1, Ordering::Relaxed);
        self.before_unstarted_push();
        self.placed_actors.push(actor);
        self.unpark();
    }

    /// One actor placed here started, or ended unstarted (`ActorCell::unplace`).
    pub(crate) fn unplace_one(&self) {
        // Relaxed: a figure (see `load`).
        self.placed.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The owner ends of a worker's three stealable queues and its next slot (their stealer ends go
/// to its `Remote`).
pub(crate) struct StealableQueues {
    /// The actor that runs next (`next_slot.rs`); other threads may take a free one.
    pub(crate) next: NextSlot<Runnable>,
    /// LIFO for its owner: actors not started yet that do not pin where they start (handler
    /// and migratable actors), free actors displaced from the next slot, batches taken from
    /// the injector.
    pub(crate) deque: Deque<Runnable>,
    /// LIFO for its owner: process actors not started yet, which pin where they start (see
    /// `placement.rs`: thieves take them only to even out pinned load).
    pub(crate) fresh: Deque<Runnable>,
    /// FIFO: free actors waiting for their turn here (see the module docs' table).
    pub(crate) free_fifo: Deque<Runnable>,
}

impl StealableQueues {
    /// The queues, and the thieves' end of the next slot (for `Remote::new`).
    pub(crate) fn new() -> (StealableQueues, NextStealer<Runnable>) {
        let (next, next_stealer) = next_slot();
        let queues = StealableQueues {
            next,
            deque: Deque::new_lifo(),
            fresh: Deque::new_lifo(),
            free_fifo: Deque::new_fifo(),
        };
        (queues, next_stealer)
    }
}

/// One turn in a worker's local queue. Free actors wait in the stealable free FIFO, and their
/// turns in the local queue, so that pinned and free actors run in the order they became
/// runnable here, while thieves can still take the free ones (leaving marks behind, which are
/// skipped).
enum Turn {
    Pinned(Runnable),
    Free,
}

/// What only the worker thread touches; see the module docs.
pub(crate) struct Core {
    next: NextSlot<Runnable>,
    /// The turns of the actors that wait here, in order: a pinned actor itself, or a mark
    /// for a free actor in `free_fifo` (see `Turn`).
    local: RefCell<VecDeque<Turn>>,
    deque: Deque<Runnable>,
    fresh: Deque<Runnable>,
    free_fifo: Deque<Runnable>,
    pool: RefCell<StackPool>,
    /// Started pinned actors, for shutdown. Each knows its slot (`registry_slot`).
    live: RefCell<Vec<ActorRef>>,
    /// Idle carriers for handler actors' activations (`handler.rs`).
    carriers: RefCell<Vec<Carrier>>,
    /// The carriers of handler actors' activations that suspended, by actor, between their
    /// runs (`program.rs`, step 2): each such actor is pinned here and in the registry above.
    /// Only this worker's loop touches it, never code inside an actor.
    suspended: RefCell<HashMap<ActorId, Carrier>>,
    tick: Cell<u32>,
    rng: Cell<u64>,
    /// Number of the current time slice (published in `Remote::slice` while running).
    slice_id: Cell<u64>,
    /// The last run ended in a preemption: look at the injector, the deque and the fresh queue
    /// before the local queue, so a preempted actor cannot starve actors that have not started
    /// yet.
    preempted: Cell<bool>,
    /// Held back from another worker's unstarted process actors since `Searcher::holds_back`
    /// last asked (`placement.rs`, step 6): a hint that spares the search that found work a look
    /// at every worker when it has held back from none.
    held_back: Cell<bool>,
    /// Placement (`placement.rs`, step 2): turns the other worker a spawn may be placed on
    /// over all of them, so that a burst places one actor on each parked worker in turn.
    place_turn: Cell<usize>,
    /// Whether its next sleep lingers before it blocks (`linger.rs`).
    linger: Linger,
}

impl Core {
    pub(crate) fn new(queues: StealableQueues, seed: u64) -> Core {
        Core {
            next: queues.next,
            local: RefCell::new(VecDeque::new()),
            deque: queues.deque,
            fresh: queues.fresh,
            free_fifo: queues.free_fifo,
            pool: RefCell::new(StackPool::new()),
            live: RefCell::new(Vec::new()),
            carriers: RefCell::new(Vec::new()),
            suspended: RefCell::new(HashMap::new()),
            tick: Cell::new(0),
            rng: Cell::new(seed | 1),
            slice_id: Cell::new(0),
            preempted: Cell::new(false),
            held_back: Cell::new(false),
            place_turn: Cell::new(0),
            linger: Linger::default(),
        }
    }

    /// A woken actor runs next on this worker. The one it displaces goes to the local queue if
    /// it is pinned here, or else (a handler actor between activations, a migratable actor) to
    /// the stealable deque, where an idle worker may take it: then returns `true`, and the caller
    /// must wake a parked worker for it.
    pub(crate) fn push_next(&self, actor: Runnable) -> bool {
        match self.next.push(actor) {
            Some(old) => self.push_runnable(old),
            None => false,
        }
    }

    /// A runnable actor displaced from the next slot by another wake (a fan-out: more work
    /// than this worker can run next): to the back of the local queue if it is pinned here,
    /// else to the stealable deque (then `true`: the caller wakes a parked worker to take it).
    fn push_runnable(&self, actor: Runnable) -> bool {
        if actor.home().is_none() {
            self.deque.push(actor);
            true
        } else {
            self.push_pinned(actor);
            false
        }
    }

    /// A pinned actor to the back of the local queue.
    fn push_pinned(&self, actor: Runnable) {
        self.local.borrow_mut().push_back(Turn::Pinned(actor));
    }

    /// A runnable actor that waits for its turn here: to the back of the local queue if it is
    /// pinned here, else to the back of the free FIFO, where thieves and a spare covering this
    /// worker (`spare.rs`) may take it, with a mark for its turn at the back of the local
    /// queue.
    #[inline]
    fn push_turn(&self, actor: Runnable) {
        if actor.home().is_none() {
            self.free_fifo.push(actor);
            self.local.borrow_mut().push_back(Turn::Free);
        } else {
            self.push_pinned(actor);
        }
    }

    /// The next actor whose turn it is: the local queue's first pinned actor or, for a mark,
    /// the free FIFO's first actor (a mark whose actor a thief took is skipped); with the local
    /// queue empty, the free FIFO's first (one stolen into it past its marks).
    fn pop_turn(&self) -> Option<Runnable> {
        loop {
            // The borrow ends with the statement: `pop` runs no actor code.
            let turn = self.local.borrow_mut().pop_front();
            match turn {
                Some(Turn::Pinned(a)) => return Some(a),
                Some(Turn::Free) => {
                    if let Some(a) = self.free_fifo.pop() {
                        return Some(a);
                    }
                }
                None => return self.free_fifo.pop(),
            }
        }
    }

    /// The owner's end of its two LIFO queues, the deque's newest, else the fresh queue's;
    /// else the oldest actor placed here (`remote` is this worker's).
    fn pop_lifo(&self, remote: &Remote) -> Option<Runnable> {
        // The emptiness check first: an injector's steal from an empty queue issues a fence,
        // and most turns find none placed here.
        let placed = &remote.placed_actors;
        self.deque.pop().or_else(|| self.fresh.pop()).or_else(|| {
            if placed.is_empty() {
                None
            } else {
                settle(|| placed.steal())
            }
        })
    }

    /// A new actor, stealable until it starts: a process actor that will pin where it starts
    /// to the fresh queue, any other to the deque.
    pub(crate) fn push_spawned(&self, actor: Runnable, remote: &Remote) {
        if actor.pins_at_start() {
            remote.before_unstarted_push();
            self.fresh.push(actor);
        } else {
            self.deque.push(actor);
        }
    }

    fn rand(&self) -> u64 {
        // xorshift64: victims only need to be spread, not unpredictable.
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.set(x);
        x
    }
}

/// Which loop a worker thread runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A worker: the run loop with the sleep protocol.
    Worker,
    /// A spare worker (`spare.rs`): covers stuck workers while the monitor asks it to.
    Spare,
}

/// The body of a worker thread, or of a spare's.
pub(crate) fn run(
    shared: Arc<Shared>,
    index: usize,
    queues: StealableQueues,
    parker: Parker,
    meet: (WaitGroup, WaitGroup),
    role: Role,
) {
    let ctx = WorkerContext {
        core: Core::new(queues, 0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1)),
        shared,
        index,
        current: Cell::new(std::ptr::null()),
        frame: Cell::new(std::ptr::null()),
        unwinding: Cell::new(None),
        cancelling: Cell::new(false),
        killing: Cell::new(false),
        no_stack: Cell::new(None),
        exit_hooks: Cell::new(0),
    };
    let _entered = context::enter(&ctx);
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `pthread_getcpuclockid` writes one clock id for the calling thread into `clock`,
    // a valid place for it. (The monitor may read the id after this thread has exited, as
    // shutdown joins the workers before it: `thread_cpu_time` then gets an error, not a time.)
    if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0 {
        // Relaxed: read by the monitor long after; a late read only delays a handoff.
        ctx.shared.remotes[index]
            .cpu_clock
            .store(clock, Ordering::Relaxed);
    }
    // SAFETY: `gettid` has no preconditions; it returns the calling thread's id.
    let tid = unsafe { libc::gettid() };
    // Relaxed: as for the clock.
    ctx.shared.remotes[index].tid.store(tid, Ordering::Relaxed);
    // A worker thread never dies: the user code it runs is contained (`fault.rs`), so a panic
    // in its own frames is a bug in the runtime, and going on would strand every actor pinned
    // to it. Declared after `ctx`, so dropped before it: the abort comes before `Core`'s
    // destructor could drop the registry of pinned actors on a dying thread.
    let what = match role {
        Role::Worker => "worker",
        Role::Spare => "spare worker",
    };
    let _abort = AbortOnUnwind::new(
        format!("{what} {index}"),
        "the actors pinned to it could only be unwound on another thread",
    );
    let worker = WorkerLoop { ctx: &ctx, parker };
    match role {
        Role::Worker => worker.run(),
        Role::Spare => worker.run_spare(),
    }
    worker.shutdown(meet);
}

struct WorkerLoop<'a> {
    ctx: &'a WorkerContext,
    parker: Parker,
}

impl WorkerLoop<'_> {
    fn shared(&self) -> &Shared {
        &self.ctx.shared
    }

    fn core(&self) -> &Core {
        &self.ctx.core
    }

    fn remote(&self) -> &Remote {
        &self.ctx.shared.remotes[self.ctx.index]
    }

    fn run(&self) {
        // A new worker starts parked: a start spent searching would make each of n workers scan
        // every other's queue, quadratic in n, for work that cannot exist yet. The first spawn
        // wakes one through the idle protocol.
        if let Some(actor) = self.search(true) {
            self.run_actor(actor, false);
        }
        let mut next_runs = 0;
        while !self.shared().is_shutdown() {
            let found = match self.core().next.take() {
                Some(actor) if next_runs < MAX_NEXT_RUNS => {
                    next_runs += 1;
                    self.run_actor(actor, true);
                    continue;
                }
                // A long chain of wakes through the next slot: let the queues have a turn.
                Some(actor) => self.turn_after_chain(actor),
                None => self.next_local(),
            };
            next_runs = 0;
            if let Some(actor) = found {
                self.run_actor(actor, false);
                continue;
            }
            self.remote().slice.store(0, Ordering::Relaxed);
            if let Some(actor) = self.search(false) {
                self.run_actor(actor, false);
            }
        }
    }

    /// What runs after the next slot's occupant has run `MAX_NEXT_RUNS` times in a row: it
    /// waits for its turn behind what is queued here (`push_turn`, then `next_local`). When
    /// nothing is queued (its local queue, its free FIFO and its inbox are empty), no look at
    /// the injector is due and the last run was not preempted, its turn is now, and it runs
    /// again without the trip through the queues (for a free actor, the free FIFO's
    /// read-modify-write): the order queuing would give, as a new time slice. (The next slot
    /// is never filled under the global-queue baseline, so only the other two get here.)
    fn turn_after_chain(&self, actor: Runnable) -> Option<Runnable> {
        let core = self.core();
        let tick = core.tick.get().wrapping_add(1);
        if !tick.is_multiple_of(GLOBAL_POLL_INTERVAL)
            && !core.preempted.get()
            && !self.remote().has_inbox_hint()
            && core.local.borrow().is_empty()
            && core.free_fifo.is_empty()
        {
            core.tick.set(tick);
            return Some(actor);
        }
        core.push_turn(actor);
        self.next_local()
    }

    /// A spare's loop, steps 2 to 4 of the protocol in `spare.rs`.
    fn run_spare(&self) {
        let spares = &self.shared().spares;
        let me = self.ctx.index;
        let mut poll = SPARE_POLL_MIN;
        let mut next_runs = 0;
        while !self.shared().is_shutdown() {
            let covered = spares.covered(self.shared(), me);
            let core = self.core();
            // The next slot first, as in `run`, within the same cap and in the same time slice:
            // two actors waking each other here would otherwise keep everything else on this
            // spare waiting, each run a new slice that no preemption ends.
            let chained = match core.next.take() {
                Some(actor) if next_runs < MAX_NEXT_RUNS => {
                    next_runs += 1;
                    Some(actor)
                }
                Some(actor) => {
                    core.push_turn(actor); // its turn, behind the others
                    None
                }
                None => None,
            };
            let from_next = chained.is_some();
            if !from_next {
                next_runs = 0;
            }
            // Covering: anything it can take (the injector too). Not covering: only what is in
            // its own queues, so that it never takes from the injector what it would put back.
            let work = chained.or_else(|| {
                if covered.is_some() {
                    self.next_local()
                } else {
                    self.drain_inbox();
                    core.pop_turn().or_else(|| core.pop_lifo(self.remote()))
                }
            });
            if let Some(actor) = work {
                if covered.is_some() || actor.home() == Some(me) {
                    self.run_actor(actor, from_next);
                } else {
                    // Step 3: no longer covering; what others may run goes back to them.
                    self.shared().push_injector(actor);
                }
                poll = SPARE_POLL_MIN;
                continue;
            }
            self.remote().slice.store(0, Ordering::Relaxed);
            if let Some(w) = covered
                && let Some(actor) = self.steal_covered(w)
            {
                self.run_actor(actor, false);
                poll = SPARE_POLL_MIN;
                continue;
            }
            if core.next.is_occupied() {
                // The poll in `next_local` woke an actor into this spare's own next slot: no
                // unpark comes for it (this thread is awake), so it runs before any park.
                continue;
            }
            let remote = self.remote();
            remote.stats.bump(&remote.stats.parks);
            // Relaxed, both: a hint for the dump (placement never picks a spare).
            remote.parked.store(true, Ordering::Relaxed);
            if covered.is_some() {
                self.parker.park_timeout(poll);
                poll = (poll * 2).min(SPARE_POLL_MAX);
            } else {
                if self.core().live.borrow().is_empty() {
                    // Step 4, dormant: nothing pinned here, so no carrier or stack is in use.
                    self.give_back_stacks();
                }
                // A claim made after this look unparks it (the parker keeps that token).
                if !spares.is_claimed(me) {
                    self.parker.park();
                }
            }
            remote.parked.store(false, Ordering::Relaxed);
        }
    }

    /// A covering spare's stealing (step 2 of `spare.rs`): from the covered worker's deque,
    /// fresh queue (without the balance rule of `placement.rs`) and free FIFO, then its next slot
    /// if a free actor is in it, then the injector; never from a healthy worker, whose actors
    /// would be pinned to the spare for good if they started there.
    fn steal_covered(&self, w: usize) -> Option<Runnable> {
        self.steal_from(w, Fresh::Open)
            .or_else(|| self.steal_next_of(w))
            .or_else(|| self.pop_injector())
    }

    /// The free actor in `victim`'s next slot, if one is there: for a covering spare, the one
    /// the stuck actor woke last, often the one it waits for (`next_slot.rs`).
    fn steal_next_of(&self, victim: usize) -> Option<Runnable> {
        let a = self.shared().remotes[victim].next_stealer.steal()?;
        self.count_steal(1);
        Some(a)
    }

    /// Hands this worker's warm stacks back to the slab (a spare going dormant, and shutdown).
    /// Its few carriers stay: they are unwound only at shutdown.
    fn give_back_stacks(&self) {
        self.core()
            .pool
            .borrow_mut()
            .drain_into(&self.shared().slab);
    }

    /// Work this worker can take without stealing, other than its next slot (which `run`
    /// checks first), in the order of the module docs.
    fn next_local(&self) -> Option<Runnable> {
        match &self.shared().policy {
            Policy::GlobalQueue(gq) => {
                let core = self.core();
                let tick = core.tick.get().wrapping_add(1);
                core.tick.set(tick);
                if tick.is_multiple_of(GLOBAL_POLL_INTERVAL) {
                    self.poll_io_now();
                }
                gq.pop(self.ctx.index)
            }
            Policy::WorkStealing | Policy::Gil(_) => self.next_local_stealable(),
        }
    }

    /// `next_local` under work stealing.
    fn next_local_stealable(&self) -> Option<Runnable> {
        let core = self.core();
        let tick = core.tick.get().wrapping_add(1);
        core.tick.set(tick);
        if tick.is_multiple_of(GLOBAL_POLL_INTERVAL) {
            self.poll_io_now();
        }
        let preempted = core.preempted.take();
        if (tick.is_multiple_of(GLOBAL_POLL_INTERVAL) || preempted)
            && let Some(a) = self.pop_injector().or_else(|| core.pop_lifo(self.remote()))
        {
            return Some(a);
        }
        // A preemption with nothing waiting here but the preempted actor: take one runnable
        // actor from another worker's queues, so that CPU-bound actors spread by their number
        // and not only when a worker runs dry. (Go puts a preempted goroutine on its global
        // queue for the same reason.)
        if preempted
            && core.local.borrow().len() <= 1
            && let Some(a) = self.steal_one_after_preemption()
        {
            return Some(a);
        }
        self.drain_inbox();
        core.pop_turn()
            .or_else(|| core.pop_lifo(self.remote()))
            .or_else(|| self.pop_injector())
    }

    /// Moves every pinned actor woken from another thread to the back of the local queue.
    fn drain_inbox(&self) {
        if !self.remote().take_inbox_hint() {
            return;
        }
        let inbox = &self.remote().inbox;
        let mut local = self.core().local.borrow_mut();
        while let Some(a) = settle(|| inbox.steal()) {
            // Only started actors come here (`schedule_woken`); unstarted placed ones go to
            // `placed_actors`. (`has_started`: acquire, pairs with `mark_started`.)
            debug_assert!(a.has_started(), "an unstarted actor in an inbox");
            local.push_back(Turn::Pinned(a));
        }
    }

    /// At a preemption: moves the actors woken from other threads while the preempted one ran
    /// to the *front* of the local queue, in wake order. They were waiting on a message, not on
    /// the CPU, so they go ahead of actors queued only because they were preempted earlier: an
    /// echo actor sharing a worker with CPU hogs then waits for the rest of one slice, not for
    /// one slice per hog. A woken actor that hogs the CPU in turn is preempted and goes to the
    /// back, so this cannot starve the hogs.
    fn drain_inbox_to_front(&self) {
        let before = self.core().local.borrow().len();
        self.drain_inbox();
        let mut local = self.core().local.borrow_mut();
        let woken = local.len() - before;
        local.rotate_right(woken);
    }

    fn pop_injector(&self) -> Option<Runnable> {
        settle(|| {
            self.shared()
                .injector
                .steal_batch_and_pop(&self.core().deque)
        })
    }

    /// Steals about half of a random victim's deque, trying every victim once; failing that,
    /// takes a free actor from the next slot of a victim that overran its slice
    /// (`steal_overdue_next`).
    fn steal(&self) -> Option<Runnable> {
        let remotes = &self.shared().remotes;
        let n = remotes.len();
        if n < 2 {
            return None;
        }
        let start = self.core().rand() as usize % n;
        let victims = || {
            (0..n)
                .map(move |i| (start + i) % n)
                .filter(|&victim| victim != self.ctx.index)
        };
        victims()
            .find_map(|victim| self.steal_from(victim, Fresh::Balanced))
            .or_else(|| victims().find_map(|victim| self.steal_overdue_next(victim)))
    }

    /// The free actor in `victim`'s next slot, if its running actor has held it past its time
    /// slice without reaching a safe point (the monitor's preemption request is still up): it
    /// would wait for that actor, and this worker is idle. Only then, and only after every
    /// queue (as Go steals `runnext` in its last pass): a chain of wakes through the next slot
    /// is what keeps a conversation on one core, and a thief that took from it at any time
    /// would split it. Work stealing only (`Policy::takes_overdue_next`).
    fn steal_overdue_next(&self, victim: usize) -> Option<Runnable> {
        let shared = self.shared();
        if !shared.policy.takes_overdue_next()
            || !shared.remotes[victim].safe_point.preempt_requested()
        {
            return None;
        }
        self.steal_next_of(victim)
    }

    /// After a preemption (`next_local_stealable`): one runnable actor from another worker's
    /// deque or free FIFO, the first found from a random victim on. One, not a batch: the
    /// preempted actor waits behind what this takes. Not from fresh queues (actors spawned by
    /// actors, which placement balances); an unstarted actor that came through the injector
    /// may come, as it may to any thief. A spare takes nothing here: it takes only from the
    /// worker it covers (`spare.rs`).
    fn steal_one_after_preemption(&self) -> Option<Runnable> {
        let remotes = &self.shared().remotes;
        let n = remotes.len();
        if n < 2 || self.ctx.index >= self.shared().spares.first {
            return None;
        }
        let start = self.core().rand() as usize % n;
        let a = (0..n)
            .map(|i| (start + i) % n)
            .filter(|&victim| victim != self.ctx.index)
            .find_map(|victim| {
                let theirs = &remotes[victim];
                steal_one(&theirs.stealer).or_else(|| steal_one(&theirs.free_stealer))
            })?;
        self.count_steal(1);
        Some(a)
    }

    /// One steal of `taken` actors, for the stats and the trace.
    fn count_steal(&self, taken: u64) {
        let stats = &self.remote().stats;
        stats.bump(&stats.steals);
        stats.add(&stats.stolen, taken);
        crate::trace::stole(self.ctx.index, taken);
    }

    /// Steals from one of `victim`'s stealable queues into this worker's own, returning one
    /// actor to run: about half of its deque, else a fair share of its unstarted process actors
    /// (its fresh queue, else those placed there; as `fresh` says), else about half of its free
    /// FIFO.
    fn steal_from(&self, victim: usize, fresh: Fresh) -> Option<Runnable> {
        let (theirs, mine) = (&self.shared().remotes[victim], self.core());
        let (a, queued) = steal_batch_from(&mine.deque, &theirs.stealer, None)
            .or_else(|| {
                let open = theirs.has_unstarted()
                    && match fresh {
                        Fresh::Open => true,
                        Fresh::Balanced => self.may_take_fresh(theirs),
                    };
                open.then(|| self.steal_unstarted(theirs)).flatten()
            })
            .or_else(|| {
                let (a, stolen) = steal_batch_from(&mine.free_fifo, &theirs.free_stealer, None)?;
                // Their turns, after what waits here already.
                mine.local
                    .borrow_mut()
                    .extend((0..stolen).map(|_| Turn::Free));
                Some((a, stolen))
            })?;
        self.count_steal(1 + queued as u64);
        Some(a)
    }

    /// A fair share of `theirs`' unstarted process actors (`placement::unstarted_share`) into this
    /// worker's fresh queue, one of them to run: from their fresh queue, else from those placed
    /// there. (Their pinned actors do not count: only what a thief may take is shared.)
    fn steal_unstarted(&self, theirs: &Remote) -> Option<(Runnable, usize)> {
        let mine = self.core();
        // Into this worker's own fresh queue: a push.
        self.remote().before_unstarted_push();
        let workers = self.shared().spares.first;
        // Relaxed: a figure for a heuristic, as in `Remote::load`.
        let unstarted = theirs.placed.load(Ordering::Relaxed) + theirs.fresh_stealer.len();
        let share = placement::unstarted_share(unstarted, workers);
        // Their fresh queue, else their placed actors.
        if let got @ Some(_) = steal_batch_from(&mine.fresh, &theirs.fresh_stealer, Some(share)) {
            return got;
        }
        let placed = &theirs.placed_actors;
        steal_batch(&mine.fresh, |d| {
            placed.steal_batch_with_limit_and_pop(d, share)
        })
    }

    /// Placement, step 5 (`placement.rs`): whether this worker, idle, may take unstarted process
    /// actors from `victim` (its fresh queue, or those placed there), which the caller saw
    /// holding some. Starting one pins it here for good, so a worker that already holds
    /// pinned (or placed) actors takes them only from a worker whose load, counting its fresh
    /// queue, is at least `PLACE_MARGIN` above its own: the balance a spawn's placement keeps,
    /// kept by thieves too. A worker that holds nothing takes them freely, and so does one
    /// held back from work whose grace is over (step 6; held back, it marks the work if nobody
    /// has). Relaxed loads, as for placement: a stale figure lets one steal through, or holds
    /// one back for the grace.
    fn may_take_fresh(&self, victim: &Remote) -> bool {
        self.fresh_grace_left(victim).is_zero()
    }

    /// `may_take_fresh`, as what is left of `victim`'s grace: zero if this worker may take.
    fn fresh_grace_left(&self, victim: &Remote) -> Duration {
        if self.balance_allows(victim) {
            return Duration::ZERO;
        }
        self.core().held_back.set(true);
        // The clock is read after the caller's look at the queues (`grace.rs`, "Why the grace
        // is not cut short").
        victim.fresh_mark.hold_back(self.shared().grace_now())
    }

    /// The other workers whose unstarted process actors the load rule of step 5 holds this
    /// worker back from now: they hold some, and are not `PLACE_MARGIN` more loaded than it.
    fn held_back_from(&self) -> impl Iterator<Item = &Remote> {
        let mine = self.remote();
        self.shared().remotes.iter().filter(move |r| {
            !std::ptr::eq(*r, mine) && r.has_unstarted() && !self.balance_allows(r)
        })
    }

    /// The load rule of step 5, without the grace.
    fn balance_allows(&self, victim: &Remote) -> bool {
        let mine = self.remote().load();
        mine == 0 || mine + PLACE_MARGIN <= victim.load() + victim.fresh_stealer.len()
    }

    /// Whether any queue this worker may take from holds work: the sleep protocol's re-check
    /// (`idle.rs`, step 3) and the poll's look, both with the same rule as its stealing, so
    /// that a worker held back from a fresh queue sleeps (until its grace ends) instead of
    /// spinning on it. Also the grace left of each fresh queue it was held back from here:
    /// the re-check's decision bounds the sleep even if the loads change before `grace_left`
    /// looks again (`grace.rs`, step 2).
    fn any_takeable_work(&self) -> Recheck {
        let mine = self.remote();
        let mut recheck = Recheck::default();
        recheck.work = self.shared().any_stealable_work(|victim| {
            if std::ptr::eq(victim, mine) {
                return true;
            }
            let left = self.fresh_grace_left(victim);
            if !left.is_zero() {
                recheck.held_back_for(left);
            }
            left.is_zero()
        });
        recheck
    }

    /// No local work: the sleep protocol (`idle.rs`) searches, then parks; with `park_first`,
    /// parks before searching. Returns work if found, `None` at shutdown.
    fn search(&self, park_first: bool) -> Option<Runnable> {
        self.shared().idle.search(self.ctx.index, self, park_first)
    }
    /// Runs one actor until it parks, yields, is preempted or finishes. A run out of the next
    /// slot continues the current time slice; any other starts a new one (see `monitor.rs`).
    fn run_actor(&self, mut entry: Runnable, from_next: bool) {
        entry.state.start_running();
        // The entry is the right to run the actor until it parks or ends (the entry is then
        // dropped) or yields (it is queued again).
        // A raw pointer, not a reference: while a handler actor's activation runs or is
        // suspended, its body is lent to the carrier (`program.rs`), and this function makes
        // short-lived references to it only outside those times.
        let (actor, body) = entry.body_ptr(self.core());
        // Under the GIL baseline, hold the global lock for the whole run (see `baseline.rs`),
        // and take it before anything says that this worker runs the actor: a worker that
        // waits for the lock runs nothing, and neither the monitor (time slices, long runs,
        // CPU time) nor the dump may take it for running the actor it waits with. Taken
        // before the kill flag is read, too: a kill that comes while this worker waits for the
        // lock must still stop the run (an actor killed before it started ran its closure, and
        // a killed handler actor handled one more message). Starting or activating the actor
        // needs the lock anyway when it fails: it drops the closure or program, user code.
        // A worker that waits for the lock publishes idle meanwhile: its previous slice and
        // actor stayed published, and the monitor took the wait for a run of that actor
        // (preempted it, charged it CPU time, and after ten slices reported it as holding the
        // worker without a safe point). Leaving idle below starts a new slice.
        let gil = self
            .shared()
            .policy
            .run_guard_waiting(|| self.remote().slice.store(0, Ordering::Relaxed));
        if actor.is_killed() {
            // Step 3 of "Kill", before it starts or runs again (under the GIL baseline's lock,
            // as any run: destructors are actor code).
            self.kill(actor, body);
            return;
        }
        // What the coroutine is resumed with: the program, lent where it lies (`program.rs`),
        // for a carrier starting an activation.
        let mut input = None;
        // Whether a handler actor's activation runs on the carrier lent to it, the top one of
        // this worker's idle carriers, where it stays until the activation suspends: one that
        // runs to its end never moves it (`handler.rs`, steps 1 to 3).
        let mut lent = false;
        // Whether it is an activation that has suspended: its carrier is in `suspended`
        // between runs, and lent again, on top of the idle ones, for each resume.
        let mut suspended = false;
        let ready = if activation_suspended(actor) {
            // Its body is lent to its carrier: not even looked at here.
            debug_assert_eq!(actor.home(), Some(self.ctx.index), "run by its home worker");
            suspended = true;
            true
        } else {
            // SAFETY: no activation of this actor runs or is suspended (a handler actor's
            // would have pinned it), and this entry gives this worker the body
            // (`Runnable::body`); `owned` is last used before the `Lent` below is made, and
            // before the resume.
            let owned = unsafe { &mut *body };
            match &*owned {
                Body::Unstarted(..) => self.start(actor, owned),
                Body::Idle(_) => {
                    lent = self.activate(actor, owned);
                    if lent {
                        // SAFETY: step 1 of the lending protocol (`program.rs`); this function
                        // keeps step 2: from here until the activation's outcome it makes no
                        // reference to the body, and one that suspends pins the actor.
                        input = Some(unsafe { Lent::new(body) });
                    }
                    lent
                }
                Body::Running(_) => true,
                Body::Done => {
                    // A finished actor is never scheduled: its wakes are no-ops.
                    debug_assert!(false, "scheduled an actor with no coroutine");
                    false
                }
            }
        };
        if !ready {
            return;
        }
        let remote = self.remote();
        let core = self.core();
        remote.stats.bump(&remote.stats.actors_run);
        actor.count_run();
        let was_idle = remote.slice.load(Ordering::Relaxed) == 0;
        if !from_next || was_idle {
            let slice = core.slice_id.get() + 1;
            core.slice_id.set(slice);
            if remote.safe_point.clear_preempt()
                && (self.shared().is_shutdown() || actor.is_killed())
            {
                // The clear lowered a request that may be shutdown's (step 1 of "Shutdown") or
                // a kill's (step 1 of "Kill"): raise it again, or an actor spinning through
                // safe points would keep this worker (and the drop) forever, or never die. The
                // clear's acquire swap pairs with the request's release swap, so a request it
                // lowered is seen here with its flag. A clear that lowered nothing costs no
                // extra load: a request it missed is still up.
                remote.request_preempt();
            }
            if was_idle {
                // Leaving idle: the monitor may be asleep with no deadline (see `monitor.rs`).
                remote.slice.store(slice, Ordering::SeqCst);
                self.shared().monitor.worker_active();
            } else {
                remote.slice.store(slice, Ordering::Relaxed);
            }
        }
        remote
            .running_actor
            .store(actor.id.as_u64(), Ordering::Relaxed);
        if let Some(ticks) = self.shared().config.preempt_ticks {
            remote.safe_point.refill(ticks);
        }
        // The actor's `tracing` span while it runs (`trace.rs`; nothing without the feature).
        let _span = crate::trace::run(actor);
        loop {
            // The carriers stay borrowed across every resume, whether or not a lent one runs:
            // only this loop touches them, never code that runs inside an actor. (Borrowing
            // them only for a lent activation compiled to more instructions on both paths.)
            let mut carriers = self.core().carriers.borrow_mut();
            if suspended && !lent {
                // A suspended activation's carrier is lent again for this resume.
                carriers.push(self.take_suspended(actor));
                lent = true;
            }
            let coroutine = if lent {
                &mut carriers.last_mut().expect("lent above").coroutine
            } else {
                // SAFETY: a process actor (a handler actor's activation runs on a lent carrier,
                // above): nothing but this worker touches its body, and the coroutine in it
                // runs only inside this resume.
                match unsafe { &mut *body } {
                    Body::Running(coroutine) => coroutine,
                    _ => unreachable!("the actor was started or activated above"),
                }
            };
            // `current` names the actor only while its coroutine runs: whatever the worker
            // does between resumes (queueing, waking, dropping) runs outside any actor.
            self.ctx.current.set(Arc::as_ptr(actor));
            let resumed = coroutine.resume(input.take());
            self.ctx.current.set(std::ptr::null());
            crate::trace::resumed(); // nothing without the `tracing` feature
            // The coroutine's frame goes with it (`ActorFrame`): nothing runs on it now.
            self.ctx.frame.set(std::ptr::null());
            drop(carriers);
            if let CoroutineResult::Yield(Out::Suspend(_)) = resumed {
                // A handler actor's activation that suspends keeps its carrier: from now until
                // it returns, it is pinned here like a process actor (`handler.rs`, step 2).
                if std::mem::take(&mut lent) {
                    self.suspend_activation(actor, !std::mem::replace(&mut suspended, true));
                }
            }
            match resumed {
                CoroutineResult::Yield(Out::Suspend(Suspend::Park)) => {
                    match actor.state.after_park() {
                        AfterPark::Parked => break,
                        // Step 3 of "Kill": the wake that cut the park short may be a kill's.
                        AfterPark::Resume if actor.is_killed() => {
                            self.kill(actor, body);
                            break;
                        }
                        AfterPark::Resume => continue,
                    }
                }
                CoroutineResult::Yield(Out::Suspend(reason)) => {
                    if reason == Suspend::Preempted {
                        remote.stats.bump(&remote.stats.preemptions);
                        actor.count_preemption();
                        if actor.is_handler() {
                            // Its batch ends after the message at hand (`handler.rs`).
                            actor.raise_activation_flag(ACTIVATION_PREEMPTED);
                        }
                        crate::trace::preempted(actor);
                        core.preempted.set(true);
                        // The chain of wakes this actor was part of loses the slice too.
                        if let Some(woken) = core.next.take() {
                            core.push_turn(woken);
                        }
                    }
                    actor.state.yielded();
                    if actor.is_killed() {
                        // Step 3 of "Kill": a killed actor yields at its next safe point.
                        self.kill(actor, body);
                        break;
                    }
                    // Whoever was woken from another thread while this actor ran goes ahead
                    // of it (and, at a preemption, ahead of earlier preempted actors).
                    if reason == Suspend::Preempted {
                        self.drain_inbox_to_front();
                    } else {
                        self.drain_inbox();
                    }
                    self.push_yielded(entry);
                    break;
                }
                CoroutineResult::Return(Finished::Process) => {
                    // SAFETY: a process actor that returned: its body is this worker's.
                    self.finish(actor, unsafe { &mut *body });
                    break;
                }
                // A handler actor's activation ended with its actor stopped (`handler.rs`);
                // the carrier took the program out and dropped it (`program.rs`, step 3).
                CoroutineResult::Yield(Out::Stopped) => {
                    self.end_activation(actor, suspended);
                    actor.end();
                    break;
                }
                // A handler actor's activation returned (`handler.rs`, step 3).
                CoroutineResult::Yield(Out::Activated(step)) => {
                    let preempted = actor.activation_flags.replace(0) & ACTIVATION_PREEMPTED != 0;
                    self.end_activation(actor, suspended);
                    if actor.is_killed() {
                        // Step 3 of "Kill": between messages again, so its program drops.
                        self.kill(actor, body);
                        break;
                    }
                    match step {
                        Step::Park => match actor.park_between_messages() {
                            AfterPark::Parked => break,
                            // A message came meanwhile: run again, after the others queued
                            // here (as for `Yield`: no unbounded run of activations).
                            AfterPark::Resume => {
                                actor.state.yielded();
                                self.push_yielded_handler(entry);
                                break;
                            }
                        },
                        Step::Yield => {
                            actor.state.yielded();
                            self.push_yielded_handler(entry);
                            if preempted {
                                // A batch cut short by a time slice (`handler.rs`, step 3):
                                // CPU-bound work with messages left, which an idle worker
                                // should take rather than wait behind this one's others.
                                self.shared().notify_parked();
                            }
                            break;
                        }
                        Step::Stop => unreachable!("a stopped activation yields `Out::Stopped`"),
                    }
                }
            }
        }
        drop(gil);
    }

    /// Ends a killed actor whose body this worker holds (step 3 of "Kill" in the module docs).
    /// Out of line: `run_actor`'s hot loop only tests the flag.
    ///
    /// `body` is the cell's pointer to the body, which the worker holds: a raw pointer,
    /// because a suspended activation's carrier may still refer to it (`program.rs`), so no
    /// reference to it is made until that carrier is unwound.
    #[cold]
    #[inline(never)]
    fn kill(&self, actor: &ActorRef, body: *mut Body) {
        let was_cancelling = self.ctx.cancelling.replace(true);
        self.ctx.killing.set(true);
        if activation_suspended(actor) {
            let mut carrier = self.take_suspended(actor);
            let unwound = self.force_unwind(actor, &mut carrier.coroutine);
            if unwound.is_ok() {
                self.recycle(carrier.coroutine.into_stack());
            } else {
                std::mem::forget(carrier);
            }
            self.retire(actor);
            // SAFETY: the carrier is unwound (or leaked, never to run again), so nothing refers
            // to the body any more (`program.rs`, step 3), and this worker holds the actor.
            drop_unwound_program(actor, unsafe { &mut *body });
            self.ctx.killing.set(false);
            self.ctx.cancelling.set(was_cancelling);
            return;
        }
        // SAFETY: no activation of this actor is suspended (a handler actor's would have
        // pinned it) or running (this worker is between resumes), so the body is this
        // worker's alone.
        let body = unsafe { &mut *body };
        match body {
            Body::Unstarted(..) | Body::Idle(..) => {
                // Drops the closure or the idle handler actor's program, contained.
                actor.discard_unstarted(body);
            }
            Body::Running(coroutine) => {
                let unwound = self.force_unwind(actor, coroutine);
                if unwound.is_ok() {
                    self.finish(actor, body);
                } else {
                    // Its stack is in an unknown state: leak it rather than reuse it, and end
                    // the actor as `finish` would.
                    if let Body::Running(c) = std::mem::replace(body, Body::Done) {
                        std::mem::forget(c);
                    }
                    self.retire(actor);
                }
            }
            Body::Done => {}
        }
        self.ctx.killing.set(false);
        self.ctx.cancelling.set(was_cancelling);
    }

    /// A yielded actor goes to the back of this worker's turns: a pinned one to the local
    /// queue, a migratable one to the free FIFO (with its mark in the local queue), where idle
    /// workers may steal it. Not the injector: right after a preemption the worker looks there
    /// first (`next_local_stealable`), and would take the actor straight back, starving every
    /// actor pinned here.
    fn push_yielded(&self, actor: Runnable) {
        match &self.shared().policy {
            Policy::GlobalQueue(gq) => {
                if self.shared().is_shutdown() {
                    // Dropped, not queued, as `push_injector` does (step 1 of "Shutdown"): its
                    // registry unwinds it. Queued, a free actor could be taken by a worker
                    // that had not seen the flag yet, and resumed: `blocking` yields a caller
                    // that found the pool closed on the promise that it never resumes.
                    return;
                }
                let free = actor.home().is_none();
                gq.push(actor);
                if free {
                    // Any worker may run it: an idle one should, rather than wait here.
                    self.shared().notify_parked();
                }
            }
            Policy::WorkStealing | Policy::Gil(_) if actor.is_migratable() => {
                if self.shared().is_shutdown() {
                    // Dropped, not queued, as above: a thief that had not seen the flag yet
                    // could take it from the free FIFO and resume it.
                    return;
                }
                self.core().push_turn(actor);
                // Any worker may run it: an idle one should, rather than wait here.
                self.shared().notify_parked();
            }
            Policy::WorkStealing | Policy::Gil(_) => self.core().push_pinned(actor),
        }
    }

    /// A handler actor whose batch ended with messages left goes to the back of this worker's
    /// free FIFO (not the deque: LIFO for its owner, it would pick the same actor again and
    /// starve the others), where idle workers may steal it, or, under the global-queue
    /// baseline, to its shared queue.
    fn push_yielded_handler(&self, actor: Runnable) {
        match &self.shared().policy {
            // Unpinned when its activation ended: any worker may run it, an idle one rather
            // than wait here.
            Policy::GlobalQueue(gq) => {
                gq.push_any(actor);
                self.shared().notify_parked();
            }
            Policy::WorkStealing | Policy::Gil(_) => self.core().push_turn(actor),
        }
    }

    /// Force-unwinds `actor`'s coroutine (a process actor's, or the carrier of its suspended
    /// activation) on this worker, as `actor`: destructors run on its stack. A panic other than
    /// corosensei's forced unwind can come out of it (an actor that caught the unwind and
    /// panicked anew); it is returned, not let take the worker down. (A destructor that panics
    /// *during* the unwind aborts the process, as in any Rust code.)
    ///
    /// No frame is current while it unwinds (`ActorFrame`): the bounds of its stack stand in
    /// for the overflow reporter (`WorkerContext::unwinding`, `guard.rs`).
    fn force_unwind(
        &self,
        actor: &ActorRef,
        coroutine: &mut ActorCoroutine,
    ) -> std::thread::Result<()> {
        self.ctx.current.set(Arc::as_ptr(actor));
        self.ctx.unwinding.set(Some(coroutine.trap_handler()));
        let unwound = catch_unwind(AssertUnwindSafe(|| coroutine.force_unwind()));
        self.ctx.unwinding.set(None);
        self.ctx.current.set(std::ptr::null());
        self.ctx.frame.set(std::ptr::null());
        // Panics caught by destructors on the way (nothing without the `tracing` feature).
        crate::trace::resumed();
        unwound
    }

    /// Gives a new actor its stack and coroutine, and pins it. `false` if it could not start
    /// (the kernel refused a stack); its join handle then reports why.
    fn start(&self, actor: &ActorRef, body: &mut Body) -> bool {
        let Body::Unstarted(f, owned) = std::mem::replace(body, Body::Done) else {
            unreachable!("start() on a started actor");
        };
        let shared = self.shared();
        let stack = match owned {
            Some(s) => Ok(ActorStack::Owned(s)),
            None => self
                .core()
                .pool
                .borrow_mut()
                .take(&shared.slab)
                .map(ActorStack::Pooled),
        };
        let stack = match stack {
            Ok(s) => s,
            Err(e) => {
                actor.end();
                // No actor runs now: the monitor must not charge this to the previous one.
                self.remote().slice.store(0, Ordering::Relaxed);
                f.start(Some(e));
                return false;
            }
        };
        let guard = stack.guard_span();
        let coroutine = Coroutine::with_stack(stack, move |y: &ActorYielder, _: Option<_>| {
            let frame = ActorFrame { yielder: y, guard };
            context::enter_frame(&frame);
            f.start(None);
            Finished::Process
        });
        *body = Body::Running(coroutine);
        actor.mark_started();
        // Placed here (or, in a race with shutdown's sweep, elsewhere): from now on it counts
        // as pinned instead.
        actor.unplace();
        if actor.is_migratable() {
            shared.register_migratable(actor.clone());
        } else {
            actor.home.pin(self.ctx.index);
            self.register_local(actor);
        }
        true
    }

    /// The coroutine returned: recycle its stack, leave the registry, make wakes no-ops.
    fn finish(&self, actor: &ActorRef, body: &mut Body) {
        let Body::Running(coroutine) = std::mem::replace(body, Body::Done) else {
            unreachable!("finish() on an actor with no coroutine");
        };
        self.recycle(coroutine.into_stack());
        self.retire(actor);
    }

    /// A started actor whose coroutine is gone leaves its registries and ends.
    fn retire(&self, actor: &ActorRef) {
        if actor.is_migratable() {
            self.shared().unregister_migratable(actor);
        } else if actor.home().is_some() {
            // A pinned process actor, or an activation that had suspended (`suspend_activation`).
            self.unregister_local(actor);
        }
        actor.end();
    }

    fn recycle(&self, stack: ActorStack) {
        match stack {
            ActorStack::Pooled(s) => self.core().pool.borrow_mut().put(s, &self.shared().slab),
            ActorStack::Owned(s) => drop(s),
        }
    }

    /// Adds a started actor to this worker's registry of pinned actors.
    fn register_local(&self, actor: &ActorRef) {
        let mut live = self.core().live.borrow_mut();
        Registry::STARTED.insert(&mut live, actor.clone());
        self.publish_pinned(live.len());
    }

    fn unregister_local(&self, actor: &ActorRef) {
        let mut live = self.core().live.borrow_mut();
        Registry::STARTED.remove(&mut live, actor);
        self.publish_pinned(live.len());
    }

    /// Publishes the number of actors pinned here, for placement (`Remote::load`).
    fn publish_pinned(&self, n: usize) {
        // Relaxed: a figure for a heuristic (see `Remote::load`); only this worker writes it.
        self.remote().pinned.store(n, Ordering::Relaxed);
    }

    /// Steps 2 to 5 of the shutdown protocol (module docs).
    fn shutdown(&self, (stopped, unwound): (WaitGroup, WaitGroup)) {
        self.ctx.cancelling.set(true);
        // Step 3: this worker's queues and its pinned actors.
        self.drain_and_unwind_pinned();
        // Step 4: once no worker runs actors any more, the migratable ones. The second wait
        // keeps every worker thread alive while migratable code runs (it may have cached a
        // thread-local address of any of them, see `safepoint::checkpoint_slow`).
        stopped.wait();
        while let Some(a) = self.shared().take_migratable() {
            self.unwind(&a);
        }
        // Idle handler actors, which may sit in no queue (`handler.rs`, "Shutdown"): drop their
        // programs, a shard of the live table at a time. One suspended in an activation was
        // unwound in step 3 (it is `Done` now).
        while let Some(handlers) = self.shared().live.sweep_handlers() {
            for a in handlers {
                // SAFETY: no worker runs actors or pops queues between the two meeting points
                // (steps 3 and 5); the migratable actors unwound meanwhile are process actors;
                // and the sweep gave this actor's shard, the one it is listed in, to this
                // worker alone. So nobody else touches its body.
                let body = unsafe { &mut *a.body.get() };
                // Under the GIL baseline, with the global lock, as any actor code.
                let _gil = self.shared().policy.run_guard();
                a.discard_unstarted(body);
            }
        }
        unwound.wait();
        // Step 5: whatever that unwinding queued here.
        self.drain_and_unwind_pinned();
        // Every suspended activation was in the registry, and was unwound with it. (Should one
        // be left, its carrier is leaked: unwinding it now could run code on a stack that
        // refers to a program already dropped.)
        let stranded = std::mem::take(&mut *self.core().suspended.borrow_mut());
        debug_assert!(
            stranded.is_empty(),
            "a suspended activation outside the registry"
        );
        if !stranded.is_empty() {
            std::mem::forget(stranded);
        }
        let carriers = std::mem::take(&mut *self.core().carriers.borrow_mut());
        for c in carriers {
            self.retire_carrier(c);
        }
        self.give_back_stacks();
    }

    /// Drops this worker's queued unstarted actors and unwinds its pinned ones, until unwinding
    /// queues nothing more.
    fn drain_and_unwind_pinned(&self) {
        loop {
            let mut did_work = false;
            while let Some(a) = self.core().next.take().or_else(|| self.next_local()) {
                did_work = true;
                self.drop_queued(a);
            }
            let live = std::mem::take(&mut *self.core().live.borrow_mut());
            self.publish_pinned(0);
            for a in live {
                did_work = true;
                self.unwind(&a);
            }
            if !did_work {
                break;
            }
        }
    }

    /// A queued actor at shutdown: an unstarted one is dropped with its closure; a started one
    /// is unwound through its registry, so its queue entry is simply released.
    fn drop_queued(&self, mut entry: Runnable) {
        if activation_suspended(&entry) {
            // Unwound through the registry; its body is lent to its carrier until then
            // (`program.rs`).
            return;
        }
        let (actor, body) = entry.body(self.core());
        // Under the GIL baseline, with the global lock: destructors are actor code.
        let _gil = self.shared().policy.run_guard();
        actor.discard_unstarted(body);
    }

    /// Force-unwinds a started actor's stack on this thread, running its destructors.
    fn unwind(&self, actor: &ActorRef) {
        // In a registry, so started and not ended yet: this is its one `end`. Its name goes
        // only after the unwind: its destructors run as that actor.
        actor.end_keeping_name();
        self.unwind_stack(actor);
        actor.forget_name();
    }

    /// The stack unwinding of `unwind`.
    fn unwind_stack(&self, actor: &ActorRef) {
        // A suspended activation's carrier refers to its body: no reference to the body is made
        // until the carrier is unwound (`program.rs`).
        let handler = activation_suspended(actor);
        let mut coroutine = if handler {
            self.take_suspended(actor).coroutine
        } else {
            // SAFETY: nobody else can be running or unwinding this actor. A pinned actor is in
            // its home worker's registry only (this worker's), and only its home worker runs
            // it; this worker runs no actor any more. A migratable actor is unwound only after
            // every worker has passed the first shutdown barrier, so no worker runs any actor,
            // and it is taken out of the shared registry by exactly one worker.
            let body = unsafe { &mut *actor.body.get() };
            if !matches!(body, Body::Running(_)) {
                // Nothing on a stack to unwind (it ended already); whatever the body holds
                // stays for its owner.
                return;
            }
            let Body::Running(coroutine) = std::mem::replace(body, Body::Done) else {
                unreachable!("matched above")
            };
            coroutine
        };
        // Under the GIL baseline, with the global lock: the destructors it runs are actor code,
        // which that baseline runs one at a time (as `kill` does).
        let gil = self.shared().policy.run_guard();
        let unwound = self.force_unwind(actor, &mut coroutine);
        if handler {
            // SAFETY: as for a process actor's body above; and the carrier is unwound (or
            // leaked, never to run again), so nothing refers to the body any more.
            let body = unsafe { &mut *actor.body.get() };
            // Its program stayed in place while the carrier's stack could refer to it; dropped
            // now, outside any actor, as an idle one's is at shutdown.
            drop_unwound_program(actor, body);
        }
        drop(gil);
        if unwound.is_ok() {
            self.recycle(coroutine.into_stack());
        } else {
            // The coroutine is in an unknown state; leak it rather than reuse its stack.
            std::mem::forget(coroutine);
        }
    }
}

/// The worker loop's side of the sleep protocol (`idle.rs`).
impl WorkerLoop<'_> {
    /// "Polling for I/O", steps 1 to 4: sleeps in the runtime's I/O poll if no other thread
    /// polls; returns `false` (the caller parks as usual) if there is no poller yet or another
    /// thread holds it.
    fn poll_instead_of_park(&self, timeout: Option<Duration>) -> bool {
        let Some(driver) = self.shared().io.started() else {
            return false;
        };
        let Some(mut poll) = driver.lock_poll_or_want() else {
            return false;
        };
        let remote = self.remote();
        let _ = remote.poll_driver.set(driver.clone());
        remote.polling.store(true, Ordering::Relaxed);
        // SeqCst: pairs with the fence in `Remote::unpark` (step 3).
        fence(Ordering::SeqCst);
        // A wake that came before step 1 left a token that a park would have taken; here its
        // work is what the look below sees. Take the token, so that it does not cut the next
        // park short for nothing.
        self.parker.park_timeout(Duration::ZERO);
        let wait = if self.has_work_or_wake() {
            Some(Duration::ZERO)
        } else {
            timeout
        };
        driver.poll_locked(&mut poll, wait);
        remote.polling.store(false, Ordering::Relaxed);
        drop(poll);
        // A worker that wanted the poll meanwhile sleeps on its parker: wake one to take the
        // poll over, so that readiness never waits for this worker's next turn (step 4).
        if driver.take_wanted() {
            self.shared().notify_parked();
        }
        true
    }

    /// Whether anything could be waiting for this worker now: work in its own queues, its
    /// inbox or any stealable queue, a producer's wake (it is no longer on the sleeper list),
    /// or shutdown.
    fn has_work_or_wake(&self) -> bool {
        let shared = self.shared();
        let core = self.core();
        let has_next = core.next.is_occupied();
        let mine = match &shared.policy {
            Policy::GlobalQueue(gq) => gq.has_work_for(self.ctx.index),
            Policy::WorkStealing | Policy::Gil(_) => false,
        };
        shared.is_shutdown()
            || has_next
            || mine
            || !core.local.borrow().is_empty()
            || !core.free_fifo.is_empty()
            || !core.deque.is_empty()
            || !core.fresh.is_empty()
            || !self.remote().inbox.is_empty()
            || !shared.idle.is_sleeping(self.ctx.index)
            // And this worker's own `placed_actors`: `any_takeable_work` counts its own queues.
            || self.any_takeable_work().work
    }

    /// A busy worker's look at the I/O poll (step 5), every [`GLOBAL_POLL_INTERVAL`] turns:
    /// ready sockets wake their actors without waiting for a worker to be idle.
    fn poll_io_now(&self) {
        self.shared().poll_io_now();
    }
}

impl Searcher for WorkerLoop<'_> {
    type Work = Runnable;

    fn find(&self) -> Option<Runnable> {
        // The next slot too: an I/O poll in `sleep` wakes actors into it. And once more after
        // `next_local`: its look at the poll every `GLOBAL_POLL_INTERVAL` turns ("Polling for
        // I/O", step 5) wakes this worker's pinned actors into the slot without unparking it
        // (it is awake). A `find` that left one there let the worker park with it, and, with
        // another thread holding the poll, sleep on its parker until an unrelated wake: a lost
        // wakeup. Only this worker fills its own slot and local queue, so once `find` has
        // returned `None` nothing lands there before the park, and the sleep protocol's
        // re-check of the other queues (`idle.rs`) is enough again.
        let next = &self.core().next;
        next.take()
            .or_else(|| self.next_local())
            .or_else(|| next.take())
    }

    fn steal(&self) -> Option<Runnable> {
        WorkerLoop::steal(self)
    }

    fn is_shutdown(&self) -> bool {
        self.shared().is_shutdown()
    }

    fn recheck(&self) -> Recheck {
        self.any_takeable_work()
    }

    fn notify_parked(&self) {
        self.shared().notify_parked();
    }

    /// A core with nothing to do gives ended actors' stack pages back to the kernel, and parks
    /// no longer than until the next batch is due.
    fn before_park(&self) -> Option<Duration> {
        self.shared().slab.trim(Instant::now())
    }

    fn sleep(&self, timeout: Option<Duration>) {
        let remote = self.remote();
        let linger = &self.core().linger;
        remote.stats.bump(&remote.stats.parks);
        // Relaxed, both: a hint for placement, which publishes nothing; the push of a
        // placed actor wakes this worker whatever the flag says.
        remote.parked.store(true, Ordering::Relaxed);
        // A worker woken soon after its last sleep first watches for the next wake
        // (`linger.rs`, step 2), then blocks for what is left of the limit (step 3).
        let began = Instant::now();
        if linger.watch(&remote.woken, began, timeout, || {
            self.parker.park_timeout(Duration::ZERO)
        }) {
            remote.stats.bump(&remote.stats.lingers);
        } else {
            let left = timeout.map(|d| d.saturating_sub(began.elapsed()));
            if !self.poll_instead_of_park(left) {
                match left {
                    Some(d) => self.parker.park_timeout(d),
                    None => self.parker.park(),
                }
            }
            linger.after_block(&remote.woken, began.elapsed());
        }
        remote.parked.store(false, Ordering::Relaxed);
    }

    /// Placement, step 6 (`placement.rs`; `grace.rs`, step 3). Looks at the fresh queues only
    /// if this worker has been held back since it was last asked.
    fn holds_back(&self) -> bool {
        self.core().held_back.replace(false) && self.held_back_from().next().is_some()
    }

    /// Placement, step 6 (`placement.rs`; `grace.rs`, steps 1 and 2). The clock is read after
    /// each look at a worker's queues.
    fn grace_left(&self) -> Option<Duration> {
        self.held_back_from()
            .map(|r| {
                self.core().held_back.set(true);
                r.fresh_mark.hold_back(self.shared().grace_now())
            })
            .min()
    }

    /// Placement, step 6 (`placement.rs`; `grace.rs`, step 2): unstarted process actors whose
    /// grace is over, taken as a covering spare takes them, without the balance rule. A worker that holds no
    /// pinned actors is never held back, and looks nowhere; the others read a mark (relaxed,
    /// mostly unmarked) before they look at a queue, then read it again after.
    fn take_held_back(&self) -> Option<Runnable> {
        if self.remote().load() == 0 {
            return None;
        }
        let shared = self.shared();
        (0..shared.remotes.len())
            .filter(|&victim| victim != self.ctx.index)
            .filter(|&victim| {
                let r = &shared.remotes[victim];
                r.fresh_mark.is_marked()
                    && r.has_unstarted()
                    && r.fresh_mark.is_over(|| shared.grace_now())
            })
            .find_map(|victim| self.steal_from(victim, Fresh::Open))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::Runtime;

    /// A thread's `stat` line: its state is the first field after the command name, which may
    /// hold spaces and parentheses.
    #[test]
    fn the_thread_state_is_read_from_stat() {
        assert_eq!(thread_state("4242 (threadlet-w0) R 1 2 3"), Some('R'));
        assert_eq!(thread_state("4242 (a (b) c) S 1 2 3"), Some('S'));
        assert_eq!(thread_state("4242 (no state)"), None);
        assert_eq!(thread_state(""), None);
        // This very thread's, as the monitor reads a worker's: it is running.
        if let Ok(own) = std::fs::read_to_string("/proc/thread-self/stat") {
            assert_eq!(thread_state(&own), Some('R'), "{own:?}");
        }
    }

    /// Each worker's (pinned, placed) figures.
    fn loads(shared: &Shared) -> Vec<(usize, usize)> {
        let figures = shared.remotes[..shared.spares.first].iter();
        figures
            .map(|r| {
                (
                    r.pinned.load(Ordering::Relaxed),
                    r.placed.load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    /// The placement figures count every actor exactly once: they are back to zero once the
    /// actors have finished, and after a shutdown that unwound started actors and dropped
    /// placed ones that never started.
    #[test]
    fn placement_figures_return_to_zero() {
        const ACTORS: usize = 16;
        let mut placed = 0;
        for round in 0..20 {
            let rt = Runtime::builder().workers(2).build().unwrap();
            let shared = rt.shared().clone();
            let started = Arc::new(AtomicUsize::new(0));
            let s = started.clone();
            rt.block_on(move || {
                let hs: Vec<_> = (0..ACTORS)
                    .map(|_| {
                        let s = s.clone();
                        crate::spawn(move || {
                            s.fetch_add(1, Ordering::SeqCst);
                            // Parked for good in odd rounds (until shutdown cancels the park).
                            while round % 2 == 1 && crate::park().is_ok() {}
                        })
                    })
                    .collect();
                if round % 2 == 0 {
                    hs.into_iter().for_each(|h| h.join().unwrap());
                }
            });
            placed += rt.stats().total().placed;
            if round % 2 == 0 {
                // Every actor has returned; the last may not have left its registry yet.
                let deadline = Instant::now() + Duration::from_secs(10);
                while loads(&shared) != [(0, 0), (0, 0)] {
                    assert!(
                        Instant::now() < deadline,
                        "figures stuck at {:?}",
                        loads(&shared)
                    );
                    std::thread::yield_now();
                }
            } else if round % 4 == 3 {
                // Let some of them start: the others are dropped unstarted.
                while started.load(Ordering::SeqCst) < ACTORS / 2 {
                    std::thread::yield_now();
                }
            }
            drop(rt);
            assert_eq!(loads(&shared), [(0, 0), (0, 0)], "round {round}");
        }
        assert!(placed > 0, "no spawn was placed in 20 rounds");
    }
}
