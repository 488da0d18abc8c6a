//! The synchronisation primitives the lock-free protocols are written against.
//!
//! Normal builds use `std` atomics and `parking_lot`; under `RUSTFLAGS="--cfg loom"` the same
//! code runs against `loom`'s model-checked versions, so the models in `tests/loom_*.rs` test the
//! shipped protocol code, not a copy of it. Only the protocol modules (`wake`, `idle`,
//! `context`'s parking)
//! and the mailbox and channel state in the `threadlet` crate go through this shim.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, fence};

#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, fence};

/// A mutex whose `lock` returns the guard directly, as `parking_lot`'s does.
#[derive(Debug, Default)]
pub struct Mutex<T> {
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
    #[cfg(not(loom))]
    inner: parking_lot::Mutex<T>,
}

/// The guard of [`Mutex`].
#[cfg(loom)]
pub type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;
/// The guard of [`Mutex`].
#[cfg(not(loom))]
pub type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    pub fn new(value: T) -> Mutex<T> {
        Mutex {
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(value),
            #[cfg(not(loom))]
            inner: parking_lot::Mutex::new(value),
        }
    }

    /// Locks, blocking the thread (never an actor: critical sections here are short and never
    /// suspend).
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(loom)]
        return self.inner.lock().unwrap();
        #[cfg(not(loom))]
        return self.inner.lock();
    }
}

/// Thread parking for plain (non-actor) threads.
pub mod thread {
    #[cfg(loom)]
    pub use loom::thread::{Thread, current, park};
    #[cfg(not(loom))]
    pub use std::thread::{Thread, current, park, park_timeout};

    /// loom has no timed park; a model never times out, so a plain park is the same.
    #[cfg(loom)]
    pub fn park_timeout(_: std::time::Duration) {
        loom::thread::park();
    }
}
