//! The single-lock baselines, run by the same workers on the same actors, so that benchmarks
//! can show what work stealing buys.
//!
//! * [`Scheduler::GlobalQueue`](crate::Scheduler::GlobalQueue): every run queue lives behind one
//!   global lock ([`GlobalQueue`]); there are no per-worker queues, no next slot and no
//!   stealing. Every spawn, wake, yield and pick takes that lock. Started process actors stay
//!   pinned to their worker (the soundness rule of `actor.rs` holds under every scheduler), so
//!   the structure behind the lock has one FIFO of runnable pinned actors per worker beside the
//!   FIFO of actors any worker may run; a worker picks from its own FIFO first, then from the
//!   shared one.
//! * [`Scheduler::Gil`](crate::Scheduler::Gil): the work-stealing scheduler, plus one global
//!   interpreter lock that a worker holds for as long as it runs an actor, released at every
//!   switch, as CPython does between threads. Parallelism is gone; queues and wakes are as fast
//!   as work stealing makes them. The lock is `parking_lot`'s, which hands over fairly every
//!   half millisecond or so, much like CPython's switch interval.
//!
//! Both are what a reasonable engineer would build for such a design, not straw men: the locks
//! are uncontended when one worker is busy, and the idle protocol, timers and preemption are
//! the same as for work stealing.

use std::collections::VecDeque;

use parking_lot::Mutex;

use crate::actor::ActorRef;

/// All run queues of the `GlobalQueue` scheduler, behind one lock.
pub(crate) struct GlobalQueue {
    queues: Mutex<Queues>,
}

struct Queues {
    /// Actors any worker may run: not started yet, or migratable.
    any: VecDeque<ActorRef>,
    /// Runnable started actors, by home worker.
    pinned: Box<[VecDeque<ActorRef>]>,
}

impl GlobalQueue {
    pub(crate) fn new(workers: usize) -> GlobalQueue {
        GlobalQueue {
            queues: Mutex::new(Queues {
                any: VecDeque::new(),
                pinned: (0..workers).map(|_| VecDeque::new()).collect(),
            }),
        }
    }

    /// Queues an actor any worker may run.
    pub(crate) fn push_any(&self, actor: ActorRef) {
        self.queues.lock().any.push_back(actor);
    }

    /// Queues a started actor for its home worker.
    pub(crate) fn push_pinned(&self, home: usize, actor: ActorRef) {
        self.queues.lock().pinned[home].push_back(actor);
    }

    /// The next actor for worker `index`: its own pinned actors first, then shared work.
    pub(crate) fn pop(&self, index: usize) -> Option<ActorRef> {
        let mut q = self.queues.lock();
        q.pinned[index].pop_front().or_else(|| q.any.pop_front())
    }

    /// Whether shared work is waiting (for the idle protocol's re-check).
    pub(crate) fn has_shared_work(&self) -> bool {
        !self.queues.lock().any.is_empty()
    }

    /// Empties every queue (runtime drop, after the workers are gone).
    pub(crate) fn drain(&self) -> Vec<ActorRef> {
        let mut q = self.queues.lock();
        let mut all: Vec<ActorRef> = q.any.drain(..).collect();
        for p in q.pinned.iter_mut() {
            all.extend(p.drain(..));
        }
        all
    }
}
