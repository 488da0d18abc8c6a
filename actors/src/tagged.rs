//! An `Arc` with one flag kept in its pointer's lowest bit, so that a handle which must
//! remember one bit about itself stays one word: an [`Addr`](crate::Addr) records whether it
//! was made on a plain thread (the deadlock check counts those, `mailbox.rs`), and
//! applications hold many addresses (one per actor they talk to).
//!
//! Invariants, kept by every constructor here:
//! 1. `tagged`'s address, with bit 0 cleared, is a pointer that `Arc::into_raw` returned for an
//!    `Arc<T>` whose strong count this value owns (one count, given back by `Drop`).
//! 2. `T`'s alignment is at least 2 (a compile-time check in `new`), so that pointer's bit 0
//!    is always 0 and holds the flag without losing anything.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::Arc;

pub(crate) struct TaggedArc<T> {
    tagged: NonNull<T>,
    /// Owns an `Arc<T>`: drop check and variance as for one.
    owns: PhantomData<Arc<T>>,
}

// SAFETY: a `TaggedArc<T>` is an `Arc<T>` plus a bit (invariant 1), so it may cross and be
// shared between threads exactly when an `Arc<T>` may: `T: Send + Sync`.
unsafe impl<T: Send + Sync> Send for TaggedArc<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Send + Sync> Sync for TaggedArc<T> {}

impl<T> TaggedArc<T> {
    pub(crate) fn new(arc: Arc<T>, flag: bool) -> TaggedArc<T> {
        const { assert!(std::mem::align_of::<T>() >= 2, "bit 0 must be free") };
        let raw = Arc::into_raw(arc).cast_mut();
        let tagged = NonNull::new(raw.map_addr(|a| a | usize::from(flag)))
            .expect("Arc::into_raw is never null");
        TaggedArc {
            tagged,
            owns: PhantomData,
        }
    }

    /// The flag given to `new` or `clone_with`.
    pub(crate) fn flag(&self) -> bool {
        self.tagged.as_ptr().addr() & 1 == 1
    }

    /// The pointer `Arc::into_raw` gave (invariant 1).
    pub(crate) fn as_ptr(&self) -> *const T {
        self.tagged.as_ptr().map_addr(|a| a & !1).cast_const()
    }

    /// Calls `f` with the `Arc` this value owns, lent for the call.
    fn with_arc<R>(&self, f: impl FnOnce(&Arc<T>) -> R) -> R {
        // SAFETY: by invariant 1 the pointer came from `Arc::into_raw` and this value owns one
        // strong count, which `ManuallyDrop` keeps: the `Arc` rebuilt here is only lent to `f`
        // and never dropped, so the count stays ours.
        let arc = ManuallyDrop::new(unsafe { Arc::from_raw(self.as_ptr()) });
        f(&arc)
    }

    /// Another `Arc` to the same value (one more strong count).
    pub(crate) fn arc(&self) -> Arc<T> {
        self.with_arc(Arc::clone)
    }

    /// Another handle to the same value, with its own flag.
    pub(crate) fn clone_with(&self, flag: bool) -> TaggedArc<T> {
        TaggedArc::new(self.arc(), flag)
    }

    pub(crate) fn ptr_eq(&self, other: &TaggedArc<T>) -> bool {
        std::ptr::eq(self.as_ptr(), other.as_ptr())
    }
}

impl<T> Deref for TaggedArc<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the strong count this value owns (invariant 1) keeps `T` alive and shared
        // (never mutably borrowed: an `Arc` hands out only shared references) for as long as
        // `self` is borrowed.
        unsafe { &*self.as_ptr() }
    }
}

impl<T> Drop for TaggedArc<T> {
    fn drop(&mut self) {
        // SAFETY: invariant 1: gives back the one strong count this value owns, once.
        drop(unsafe { Arc::from_raw(self.as_ptr()) });
    }
}

#[cfg(test)]
mod tests {
    use super::TaggedArc;
    use std::sync::Arc;

    #[test]
    fn keeps_the_flag_and_the_count() {
        let arc = Arc::new(7u64);
        let a = TaggedArc::new(arc.clone(), true);
        let b = a.clone_with(false);
        assert!(a.flag() && !b.flag());
        assert!(a.ptr_eq(&b) && std::ptr::eq(a.as_ptr(), Arc::as_ptr(&arc)));
        assert_eq!((*a, *b), (7, 7));
        assert_eq!(Arc::strong_count(&arc), 3);
        let weak = Arc::downgrade(&b.arc());
        drop((a, b));
        assert_eq!(Arc::strong_count(&arc), 1);
        drop(arc);
        assert!(weak.upgrade().is_none());
        assert_eq!(std::mem::size_of::<Option<TaggedArc<u64>>>(), 8);
    }
}
