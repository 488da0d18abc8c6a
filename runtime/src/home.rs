//! [`Home`]: the worker an actor is pinned to, and the hand-off that moves a handler actor
//! between "pinned" and "free".
//!
//! A started process actor is pinned to the worker that started it for life (`actor.rs`). A
//! handler actor is pinned only while an activation of it is suspended inside `handle`, on a
//! worker's carrier stack (`handler.rs`); between activations it is free to run anywhere. Its
//! `Home` changes while wakers may read it, so the changes follow one protocol.
//!
//! # The hand-off protocol
//!
//! The worker running the actor (the only thread that changes its `Home`):
//!
//! 1. an activation suspends inside `handle` (it parks, yields, or is preempted): the worker
//!    pins the actor to itself ([`Home::pin`], release);
//! 2. an activation returns (the actor is free again): the worker unpins it ([`Home::unpin`],
//!    release);
//! 3. only then does it hand the actor to the wake protocol: `after_park` (a read-modify-write
//!    of the wake state word, `IDLE` if no wake came) or `yielded` (a release store,
//!    `SCHEDULED`, and the worker queues it itself).
//!
//! A waker that wins `IDLE -> SCHEDULED` (an acquire read-modify-write that reads the value
//! step 3 wrote, or a later one) then reads the `Home` ([`Home::get`], acquire) and queues the
//! actor at its home worker, or anywhere if it is free.
//!
//! Why the waker reads the right `Home`: the pin or unpin is sequenced before step 3's release,
//! and the waker's winning CAS reads from it, so the pin or unpin happens before the waker's
//! read, which therefore sees it (or a later change, which needs a later run, which needs the
//! actor to be scheduled again, which this waker has not done yet). So a suspended activation is
//! only ever queued at the worker that holds its carrier stack, and a free actor is never held
//! to a worker it has left. `tests/loom_handoff.rs` checks this with loom, against this type
//! and the shipped wake state word.

use std::sync::atomic::Ordering::{Acquire, Release};

use crate::sync::AtomicU32;

/// No worker: the actor runs anywhere. (A worker index is below `MAX_WORKERS`; 32 bits keep
/// `ActorCell` small.)
const FREE: u32 = u32::MAX;

/// See the module docs.
///
/// ```
/// use threadlet_runtime::__private::Home;
///
/// let home = Home::new();
/// assert_eq!(home.get(), None);
/// home.pin(3);
/// assert_eq!(home.get(), Some(3));
/// home.unpin();
/// assert_eq!(home.get(), None);
/// ```
#[derive(Debug)]
pub struct Home(AtomicU32);

impl Default for Home {
    fn default() -> Home {
        Home::new()
    }
}

impl Home {
    /// Free: not pinned to any worker.
    pub fn new() -> Home {
        Home(AtomicU32::new(FREE))
    }

    /// Step 1 (and a process actor's start): pins the actor to `worker`.
    #[inline]
    pub fn pin(&self, worker: usize) {
        debug_assert!(worker < FREE as usize);
        // The wake state word's release and acquire order this store before a waker's `get`
        // (module docs); `loom_handoff.rs` passes with relaxed accesses here. Release and
        // acquire cost nothing on x86 and keep `get` right on its own, should a reader ever
        // come without the state word.
        self.0.store(worker as u32, Release);
    }

    /// Step 2: the actor is free again.
    #[inline]
    pub fn unpin(&self) {
        // Release: as in `pin`.
        self.0.store(FREE, Release);
    }

    /// The worker the actor is pinned to, if any.
    #[inline]
    pub fn get(&self) -> Option<usize> {
        // Acquire: pairs with the release in `pin` and `unpin` (see `pin`).
        match self.0.load(Acquire) {
            FREE => None,
            w => Some(w as usize),
        }
    }
}
