//! The synchronisation primitives the lock-free protocols are written against.
//!
//! Normal builds use `std` atomics and `parking_lot`; under `RUSTFLAGS="--cfg loom"` the same
//! code runs against `loom`'s model-checked versions, so the models in `tests/loom_*.rs` test the
//! shipped protocol code, not a copy of it. Only the protocol modules (`wake`, `idle`, `grace`,
//! `poll_right`, `next_slot`, `worker/linger`, `context`'s parking)
//! and the mailbox and channel state in the `threadlet` crate go through this shim.
//!
//! ```
//! use threadlet_runtime::sync::{AtomicUsize, Mutex};
//! use std::sync::atomic::Ordering;
//!
//! let hits = AtomicUsize::new(0);
//! let log = Mutex::new(Vec::new());
//! hits.fetch_add(1, Ordering::Relaxed);
//! log.lock().push("hit");
//! assert_eq!((hits.load(Ordering::Relaxed), log.lock().len()), (1, 1));
//! ```

#[cfg(loom)]
pub use loom::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, fence,
};

#[cfg(not(loom))]
pub use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, fence,
};

/// A mutex whose `lock` returns the guard directly, as `parking_lot`'s does.
///
/// ```
/// use std::sync::Arc;
/// use threadlet_runtime::sync::Mutex;
///
/// let rt = threadlet_runtime::Runtime::builder().workers(2).build().unwrap();
/// let count = Arc::new(Mutex::new(0));
/// let handles: Vec<_> = (0..4)
///     .map(|_| {
///         let count = count.clone();
///         rt.spawn(move || *count.lock() += 1) // never held across a suspension
///     })
///     .collect();
/// for h in handles {
///     h.join().unwrap();
/// }
/// assert_eq!(*count.lock(), 4);
/// ```
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
///
/// ```
/// use threadlet_runtime::sync::{Mutex, MutexGuard};
///
/// let m = Mutex::new(String::from("a"));
/// let mut g: MutexGuard<'_, String> = m.lock();
/// g.push('b');
/// drop(g); // unlocks
/// assert_eq!(*m.lock(), "ab");
/// ```
#[cfg(not(loom))]
pub type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    ///
    /// ```
    /// let m = threadlet_runtime::sync::Mutex::new(5);
    /// assert_eq!(*m.lock(), 5);
    /// ```
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
    ///
    /// ```
    /// let m = threadlet_runtime::sync::Mutex::new(vec![1]);
    /// m.lock().push(2); // the guard drops, and the lock is released, at the end of the statement
    /// assert_eq!(*m.lock(), [1, 2]);
    /// ```
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(loom)]
        return self.inner.lock().unwrap();
        #[cfg(not(loom))]
        return self.inner.lock();
    }

    /// Locks if no other thread holds the lock, without waiting.
    ///
    /// ```
    /// let m = threadlet_runtime::sync::Mutex::new(1);
    /// let held = m.lock();
    /// assert!(m.try_lock().is_none());
    /// drop(held);
    /// assert_eq!(m.try_lock().map(|g| *g), Some(1));
    /// ```
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        #[cfg(loom)]
        return self.inner.try_lock().ok();
        #[cfg(not(loom))]
        return self.inner.try_lock();
    }
}

/// Thread parking for plain (non-actor) threads.
///
/// ```
/// use threadlet_runtime::sync::thread;
///
/// let me = thread::current();
/// let helper = std::thread::spawn(move || me.unpark());
/// thread::park(); // until unparked (an earlier unpark is kept), or spuriously
/// helper.join().unwrap();
/// ```
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
