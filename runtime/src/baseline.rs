//! The single-lock baselines, run by the same workers on the same actors, so that benchmarks
//! can show what work stealing buys.
//!
//! * [`Scheduler::GlobalQueue`]: every run queue lives behind one
//!   global lock ([`GlobalQueue`]); there are no per-worker queues, no next slot and no
//!   stealing. Every spawn, wake, yield and pick takes that lock. Started process actors stay
//!   pinned to their worker (the soundness rule of `actor.rs` holds under every scheduler), so
//!   the structure behind the lock has one FIFO of runnable pinned actors per worker beside the
//!   FIFO of actors any worker may run; a worker picks whichever came first of the fronts of
//!   its own FIFO and the shared one.
//! * [`Scheduler::Gil`]: the work-stealing scheduler, plus one global
//!   interpreter lock that a worker holds for as long as it runs an actor, released at every
//!   switch, as CPython does between threads. Parallelism is gone; queues and wakes are as fast
//!   as work stealing makes them. The lock is `parking_lot`'s, which hands over fairly every
//!   half millisecond or so, much like CPython's switch interval.
//!
//! Both are what a reasonable engineer would build for such a design, not straw men: the locks
//! are uncontended when one worker is busy, and the idle protocol, timers and preemption are
//! the same as for work stealing.
//!
//! # Where the schedulers differ
//!
//! A runtime holds its scheduler as one [`Policy`] (`Shared::policy`), with the state its
//! baseline adds. The work-stealing code has no other test of the scheduler: each point where
//! the schedulers differ matches the policy once, exhaustively, so a new policy cannot be
//! forgotten at one of them:
//!
//! 1. spawn (`Shared::spawn_cell`): the shared FIFO under `GlobalQueue`;
//! 2. wake (`Shared::schedule_woken_from`): the home's FIFO or the shared one under `GlobalQueue`;
//! 3. yield (`WorkerLoop::push_yielded`, `push_yielded_handler`): likewise;
//! 4. pick (`WorkerLoop::next_local`): [`GlobalQueue::pop`] under `GlobalQueue`;
//! 5. the idle re-check (`Shared::any_stealable_work`): [`GlobalQueue::has_shared_work`];
//! 6. shutdown's sweeps of the shared queues (`Shared::take_shared_queued`, `requeue_unstarted`);
//! 7. run (`WorkerLoop::run_actor`), and the actor code that kills and shutdown run (the
//!    unwinds and drops of `kill`, `unwind_stack`, `drop_queued` and the sweep of idle
//!    handler actors): [`Policy::run_guard`], the GIL under `Gil`, taken before the worker
//!    publishes the actor it runs (a worker waiting for the lock runs nothing);
//! 8. the steal from an overdue next slot (`WorkerLoop::steal_overdue_next`, and the monitor's
//!    wake for it): [`Policy::takes_overdue_next`], work stealing only (under `Gil` the actor
//!    would wait for the lock on the idle worker as it waits for it where it is; `GlobalQueue`
//!    has no next slot);
//! 9. the dump's queue lengths (`dump::dump`): [`GlobalQueue::lens`] under `GlobalQueue`.
//!
//! Placement at spawn (`worker/placement.rs`) is part of the work-stealing path, so `Gil` has it
//! and `GlobalQueue` does not.

use std::collections::VecDeque;

use parking_lot::{Mutex, MutexGuard};

use crate::actor::Runnable;
use crate::runtime::Scheduler;

/// The scheduler a runtime runs, with the state its baseline adds; see the module docs for
/// where it is matched.
pub(crate) enum Policy {
    /// Per-worker queues and work stealing (`Scheduler::WorkStealing`).
    WorkStealing,
    /// Every run queue behind one lock (`Scheduler::GlobalQueue`).
    GlobalQueue(GlobalQueue),
    /// Work stealing, and the global interpreter lock that a worker holds while it runs an
    /// actor (`Scheduler::Gil`).
    Gil(Mutex<()>),
}

impl Policy {
    pub(crate) fn new(scheduler: Scheduler, workers: usize) -> Policy {
        match scheduler {
            Scheduler::WorkStealing => Policy::WorkStealing,
            Scheduler::GlobalQueue => Policy::GlobalQueue(GlobalQueue::new(workers)),
            Scheduler::Gil => Policy::Gil(Mutex::new(())),
        }
    }

    pub(crate) fn scheduler(&self) -> Scheduler {
        match self {
            Policy::WorkStealing => Scheduler::WorkStealing,
            Policy::GlobalQueue(_) => Scheduler::GlobalQueue,
            Policy::Gil(_) => Scheduler::Gil,
        }
    }

    /// Under the global-queue baseline, whose queues replace the workers' and the injector: the
    /// actors in its shared FIFO and in each worker's pinned FIFO, for the dump and the
    /// metrics (none under the other schedulers).
    pub(crate) fn global_queue_lens(&self) -> (usize, Vec<usize>) {
        match self {
            Policy::GlobalQueue(gq) => gq.lens(),
            Policy::WorkStealing | Policy::Gil(_) => (0, Vec::new()),
        }
    }

    /// Point 7: what a worker holds while it runs an actor, from the first resume to the
    /// suspension or return: the GIL under `Gil`, nothing otherwise.
    pub(crate) fn run_guard(&self) -> Option<MutexGuard<'_, ()>> {
        match self {
            Policy::Gil(gil) => Some(gil.lock()),
            Policy::WorkStealing | Policy::GlobalQueue(_) => None,
        }
    }

    /// `run_guard` for a run: calls `waiting` first if the lock is held by another worker, so
    /// that the worker can say it runs nothing while it waits (`WorkerLoop::run_actor`).
    pub(crate) fn run_guard_waiting(&self, waiting: impl FnOnce()) -> Option<MutexGuard<'_, ()>> {
        match self {
            Policy::Gil(gil) => Some(gil.try_lock().unwrap_or_else(|| {
                waiting();
                gil.lock()
            })),
            Policy::WorkStealing | Policy::GlobalQueue(_) => None,
        }
    }

    /// Point 8: whether an idle worker takes a free actor out of the next slot of a worker
    /// that overran its time slice.
    pub(crate) fn takes_overdue_next(&self) -> bool {
        match self {
            Policy::WorkStealing => true,
            Policy::GlobalQueue(_) | Policy::Gil(_) => false,
        }
    }
}

/// All run queues of the `GlobalQueue` scheduler, behind one lock.
pub(crate) struct GlobalQueue {
    queues: Mutex<Queues>,
}

/// The queues, each entry with its place in the order of arrival (`seq`): a worker takes the
/// one that came first of its own pinned FIFO's front and the shared FIFO's, so that neither
/// starves the other (taking its own first, a worker that kept requeueing a yielding or
/// preempted pinned actor never reached shared work: a spawned actor that the yielder waited
/// for never ran).
struct Queues {
    /// Actors any worker may run: not started yet, or migratable.
    any: VecDeque<(u64, Runnable)>,
    /// Runnable started actors, by home worker.
    pinned: Box<[VecDeque<(u64, Runnable)>]>,
    /// The next place in the order of arrival.
    seq: u64,
}

impl Queues {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }
}

impl GlobalQueue {
    /// For the dump: the actors in the shared FIFO, and in each worker's pinned FIFO.
    pub(crate) fn lens(&self) -> (usize, Vec<usize>) {
        let q = self.queues.lock();
        (q.any.len(), q.pinned.iter().map(VecDeque::len).collect())
    }

    pub(crate) fn new(workers: usize) -> GlobalQueue {
        GlobalQueue {
            queues: Mutex::new(Queues {
                any: VecDeque::new(),
                pinned: (0..workers).map(|_| VecDeque::new()).collect(),
                seq: 0,
            }),
        }
    }

    /// Queues an actor any worker may run.
    pub(crate) fn push_any(&self, actor: Runnable) {
        let mut q = self.queues.lock();
        let seq = q.next_seq();
        q.any.push_back((seq, actor));
    }

    /// Queues a started actor for its home worker.
    pub(crate) fn push_pinned(&self, home: usize, actor: Runnable) {
        let mut q = self.queues.lock();
        let seq = q.next_seq();
        q.pinned[home].push_back((seq, actor));
    }

    /// Queues a runnable actor: for its home worker if it is pinned, else for any worker.
    pub(crate) fn push(&self, actor: Runnable) {
        match actor.home() {
            Some(h) => self.push_pinned(h, actor),
            None => self.push_any(actor),
        }
    }

    /// The next actor for worker `index`: whichever came first of its own pinned actors and
    /// shared work (see `Queues`).
    pub(crate) fn pop(&self, index: usize) -> Option<Runnable> {
        let mut q = self.queues.lock();
        let q = &mut *q;
        let mine = q.pinned[index].front().map(|&(seq, _)| seq);
        let shared = q.any.front().map(|&(seq, _)| seq);
        let from = match (mine, shared) {
            (Some(m), Some(s)) if s < m => &mut q.any,
            (Some(_), _) => &mut q.pinned[index],
            (None, _) => &mut q.any,
        };
        from.pop_front().map(|(_, actor)| actor)
    }

    /// Whether work waits for worker `index`: its pinned actors or shared work.
    pub(crate) fn has_work_for(&self, index: usize) -> bool {
        let q = self.queues.lock();
        !q.pinned[index].is_empty() || !q.any.is_empty()
    }

    /// Whether shared work is waiting (for the idle protocol's re-check).
    pub(crate) fn has_shared_work(&self) -> bool {
        !self.queues.lock().any.is_empty()
    }

    /// Empties every queue (runtime drop, after the workers are gone).
    pub(crate) fn drain(&self) -> Vec<Runnable> {
        let mut q = self.queues.lock();
        let mut all: Vec<Runnable> = q.any.drain(..).map(|(_, a)| a).collect();
        for p in q.pinned.iter_mut() {
            all.extend(p.drain(..).map(|(_, a)| a));
        }
        all
    }
}
