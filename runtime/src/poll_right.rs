//! The right to poll a runtime's I/O (`io.rs`): one thread at a time holds it, and it is
//! handed over so that an idle worker never sleeps on its parker while nobody waits in the
//! poll. Owns the right (a try-only lock around what the polling thread keeps) and the
//! `wanted` flag of the hand-over.
//!
//! # The hand-over protocol
//!
//! 1. A worker about to sleep tries to take the right (`take_or_want`). If another thread
//!    holds it, the worker raises `wanted`, issues a `SeqCst` fence, and tries once more;
//!    failing again, it parks on its parker as usual (`worker.rs`, "Polling for I/O", step 1).
//! 2. A holder that lets the right go without having waited in the poll (a worker that found
//!    work, a busy worker's or the monitor's look without waiting: steps 4 and 5 there)
//!    releases it, issues a `SeqCst` fence, then reads `wanted` (`take_wanted`): if raised, it
//!    lowers it and wakes a parked worker, which comes back to step 1 and takes the right.
//!
//! # Why no hand-over is lost
//!
//! The two fences are ordered in the single `SeqCst` order. If the holder's fence comes first,
//! its release happened before the wanter's second try, which then finds the right free (or
//! taken by a third thread, which is then a holder that will do step 2 after the wanter raised
//! `wanted`). If the wanter's fence comes first, its store to `wanted` is visible to the
//! holder's read after its fence, and the holder wakes a parked worker. Either the wanter holds
//! the right or a parked worker is woken to take it. A wake may be spurious (another thread
//! took the right meanwhile): the woken worker just finds it taken and sleeps again, leaving
//! `wanted` raised for that holder.
//!
//! `tests/loom_poll_right.rs` runs this type with two workers that each must poll once;
//! dropping either fence, or the second try, makes it fail.

use std::sync::atomic::Ordering;

use crate::sync::{AtomicBool, Mutex, MutexGuard, fence};

/// The right to poll, guarding `T` (what the polling thread keeps between polls).
pub struct PollRight<T> {
    holder: Mutex<T>,
    /// Raised by a worker that found the right taken and is going to park (step 1).
    wanted: AtomicBool,
}

impl<T> PollRight<T> {
    /// The right, free, guarding `value`.
    pub fn new(value: T) -> PollRight<T> {
        PollRight {
            holder: Mutex::new(value),
            wanted: AtomicBool::new(false),
        }
    }

    /// The right, if no other thread holds it (for a look without waiting: step 2's holders).
    pub fn try_take(&self) -> Option<MutexGuard<'_, T>> {
        self.holder.try_lock()
    }

    /// Step 1: the right, or else `None` with `wanted` raised, so that the thread holding it
    /// wakes a parked worker when it lets go without waiting.
    pub fn take_or_want(&self) -> Option<MutexGuard<'_, T>> {
        if let Some(g) = self.try_take() {
            return Some(g);
        }
        self.wanted.store(true, Ordering::Relaxed);
        // SeqCst: pairs with the fence in `take_wanted` (see "Why no hand-over is lost").
        fence(Ordering::SeqCst);
        self.try_take()
    }

    /// Step 2, after releasing the right without waiting in the poll: whether a worker wanted
    /// it meanwhile (then the caller wakes a parked worker to take it over). Lowers the flag.
    pub fn take_wanted(&self) -> bool {
        // SeqCst: pairs with the fence in `take_or_want`.
        fence(Ordering::SeqCst);
        self.wanted.load(Ordering::Relaxed) && self.wanted.swap(false, Ordering::Relaxed)
    }
}
