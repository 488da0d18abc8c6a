//! The wake state word of one actor: who may schedule it, and when.
//!
//! Every actor carries one `WakeState`. It decides, with one atomic operation on the hot path,
//! whether a wakeup must put the actor into a run queue, and makes sure that happens exactly
//! once however many threads wake it at the same time.
//!
//! ```text
//!            spawn                 worker pops it              coroutine suspends (park)
//!   ─────▶ SCHEDULED ───────────────────▶ RUNNING ─────────────────────────────▶ IDLE
//!              ▲                          │   ▲ │                                 │
//!              │      wake (CAS, winner   │   │ │ wake while running              │
//!              │       pushes to a queue) │   │ ▼                                 │
//!              └──────────────────────────┼── NOTIFIED ◀─┐                        │
//!              ▲                          │   (park returns at once,              │
//!              │   yield / preempt        │    consuming the notification)        │
//!              └──────────────────────────┘                                       │
//!              └──────────────────────────────────────────────────────────────────┘
//!                                 wake: IDLE ─CAS─▶ SCHEDULED, push to a run queue
//! ```
//!
//! # Protocol (why no wakeup is lost, and none is doubled)
//!
//! A blocking operation (mailbox receive, channel send or receive, join) runs these steps:
//!
//! 1. the actor records itself as the waiter of the condition it needs (under the object's lock
//!    or state word);
//! 2. it checks the condition once more, and returns if it holds;
//! 3. it calls `park`: if the state is `NOTIFIED`, the notification is consumed and `park`
//!    returns at once; otherwise the coroutine suspends with `Park`;
//! 4. the worker, now off the actor's stack, moves the state `RUNNING -> IDLE` with a CAS.
//!    If the CAS fails the state is `NOTIFIED`: a wake arrived between 2 and 4, so the worker
//!    sets `RUNNING` and resumes the actor at once.
//!
//! A waker first makes the condition true, then calls `wake`:
//!
//! * `IDLE -> SCHEDULED` by CAS: only one waker can win it, and the winner pushes the actor
//!   into exactly one run queue. The actor is off its stack (step 4 happened), so whoever pops
//!   it may resume it.
//! * `RUNNING -> NOTIFIED`: the actor is between 1 and 4; step 3 or 4 sees the notification.
//! * `SCHEDULED`, `NOTIFIED`, `DONE`: nothing to do; the actor will run, or never will again.
//!
//! Every wake either finds the actor running (and leaves `NOTIFIED`, which step 3 or 4 reads
//! because both read the state after step 1 published the waiter) or finds it `IDLE` (and
//! schedules it). The `IDLE -> SCHEDULED` CAS has one winner, so the actor enters one queue once.
//!
//! A yield or preemption stores `SCHEDULED` and drops a pending `NOTIFIED`. That is sound
//! because a notification only matters between steps 2 and 4, and no safe point lies there; the
//! yielded actor runs again and re-checks whatever it waits for before it next parks. (One
//! caller runs user code between them: a handler actor's batch publishes its waiter with the
//! last message and runs `handle` before it parks; it checks again whenever `handle` suspended
//! or spent a wake: `handler::activation_may_park`.)

use crate::sync::AtomicU8;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};

const IDLE: u8 = 0;
const SCHEDULED: u8 = 1;
const RUNNING: u8 = 2;
const NOTIFIED: u8 = 3;
const DONE: u8 = 4;

/// The state word; see the module docs.
#[derive(Debug)]
pub struct WakeState(AtomicU8);

/// What a wake asks of the caller.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum WakeAction {
    /// The caller won `IDLE -> SCHEDULED` and must push the actor into a run queue.
    Schedule,
    /// Nothing to do.
    None,
}

/// What the worker does after the coroutine suspended to park.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum AfterPark {
    /// The actor is `IDLE`; a future wake schedules it. The worker must not touch it again.
    Parked,
    /// A wake came in between; the actor is `RUNNING` again and must be resumed now.
    Resume,
}

impl WakeState {
    /// A new actor, about to be pushed into a run queue by its spawner.
    pub fn new_scheduled() -> WakeState {
        WakeState(AtomicU8::new(SCHEDULED))
    }

    /// Wakes the actor; see the module docs for the transitions.
    #[inline]
    pub fn wake(&self) -> WakeAction {
        let mut s = self.0.load(Acquire);
        loop {
            let next = match s {
                IDLE => SCHEDULED,
                RUNNING => NOTIFIED,
                _ => return WakeAction::None,
            };
            match self.0.compare_exchange_weak(s, next, AcqRel, Acquire) {
                Ok(_) if s == IDLE => return WakeAction::Schedule,
                Ok(_) => return WakeAction::None,
                Err(actual) => s = actual,
            }
        }
    }

    /// A worker popped the actor from a run queue and is about to resume it.
    #[inline]
    pub fn start_running(&self) {
        self.0.store(RUNNING, Release);
    }

    /// Step 3's fast path: consumes a pending notification, if any.
    #[inline]
    pub fn take_notification(&self) -> bool {
        self.0.load(Acquire) == NOTIFIED
            && self
                .0
                .compare_exchange(NOTIFIED, RUNNING, AcqRel, Acquire)
                .is_ok()
    }

    /// Step 4: the coroutine has suspended to park.
    #[inline]
    pub fn after_park(&self) -> AfterPark {
        match self.0.compare_exchange(RUNNING, IDLE, AcqRel, Acquire) {
            Ok(_) => AfterPark::Parked,
            Err(actual) => {
                debug_assert_eq!(actual, NOTIFIED);
                self.0.store(RUNNING, Release);
                AfterPark::Resume
            }
        }
    }

    /// The actor yielded or was preempted and goes back into a run queue.
    #[inline]
    pub fn yielded(&self) {
        self.0.store(SCHEDULED, Release);
    }

    /// The actor has finished (or was cancelled): wakes become no-ops forever.
    pub fn complete(&self) {
        self.0.store(DONE, Release);
    }

    /// Whether the actor has finished.
    pub fn is_done(&self) -> bool {
        self.0.load(Acquire) == DONE
    }

    /// Where the actor stands, for reports (`dump.rs`); stale as soon as it is read.
    pub(crate) fn phase(&self) -> Phase {
        // Relaxed: a sample for a report; nothing is read through it.
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            IDLE => Phase::Idle,
            SCHEDULED => Phase::Scheduled,
            DONE => Phase::Done,
            _ => Phase::Running,
        }
    }
}

/// The states of the word as reports see them (`NOTIFIED` counts as running).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Idle,
    Scheduled,
    Running,
    Done,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn wake_schedules_an_idle_actor_exactly_once() {
        let s = WakeState::new_scheduled();
        s.start_running();
        assert_eq!(s.after_park(), AfterPark::Parked);
        assert_eq!(s.wake(), WakeAction::Schedule);
        assert_eq!(s.wake(), WakeAction::None);
    }

    #[test]
    fn wake_while_running_makes_park_return() {
        let s = WakeState::new_scheduled();
        s.start_running();
        assert_eq!(s.wake(), WakeAction::None);
        assert!(s.take_notification());
        assert!(!s.take_notification());
        assert_eq!(s.wake(), WakeAction::None);
        assert_eq!(s.after_park(), AfterPark::Resume);
        assert_eq!(s.after_park(), AfterPark::Parked);
    }

    #[test]
    fn done_actors_ignore_wakes() {
        let s = WakeState::new_scheduled();
        s.complete();
        assert_eq!(s.wake(), WakeAction::None);
        assert!(s.is_done());
    }
}
