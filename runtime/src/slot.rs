//! [`WaiterSlot`]: one atomic word that holds the [`Waiter`] of a blocked receiver.
//!
//! Lock-free objects with a single receiver (a mailbox) record who waits here. Ownership of the
//! waiter moves with atomic swaps only: the receiver *registers* by swapping its waiter in, a
//! waker *takes* it by swapping the slot empty, so exactly one of them holds it at any time and
//! nobody reads a waiter that another thread may be writing.
//!
//! # Encoding
//!
//! The word is 0 when empty. An actor waiter is its `Arc<ActorCell>` turned into a raw pointer
//! (aligned to at least 8, so bit 0 is clear); a thread waiter is a boxed `Thread` with bit 0
//! set. The slot owns the reference count (or box) the word stands for.
//!
//! # Use in a wake protocol
//!
//! Registration and taking are `SeqCst`. A receiver registers, then re-reads the state its
//! wakers change (with a `SeqCst` load); a waker changes that state (with a `SeqCst`
//! read-modify-write), then takes. In the single total order of `SeqCst` operations either the
//! waker's take comes after the registration, and it finds the waiter, or the receiver's
//! re-read comes after the waker's change, and it sees the change: one of the two always sees
//! the other (the store-buffering pattern that `SeqCst` forbids to fail both ways).

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use crate::actor::ActorCell;
use crate::context::Waiter;
use crate::sync::AtomicUsize;
use crate::sync::thread::Thread;

/// Bit 0 of the word: the waiter is a boxed thread, not an actor.
const THREAD_TAG: usize = 1;

// An actor pointer must leave bit 0 free for the tag.
const _: () = assert!(std::mem::align_of::<ActorCell>() > THREAD_TAG);
const _: () = assert!(std::mem::align_of::<Thread>() > THREAD_TAG);

/// A slot for at most one [`Waiter`]; see the module docs.
///
/// ```
/// use threadlet_runtime::{Waiter, WaiterSlot};
///
/// let slot = WaiterSlot::new();
/// assert!(slot.take().is_none());
/// assert!(slot.register(Waiter::current()).is_none());
/// assert!(slot.is_registered());
/// let me = slot.take().unwrap();
/// assert!(me.same_as(&Waiter::current()));
/// assert!(!slot.is_registered());
/// ```
#[derive(Debug, Default)]
pub struct WaiterSlot {
    word: AtomicUsize,
}

impl WaiterSlot {
    /// An empty slot.
    pub fn new() -> WaiterSlot {
        WaiterSlot {
            word: AtomicUsize::new(0),
        }
    }

    /// Puts `waiter` in the slot, returning the waiter it replaces (a stale registration),
    /// which the caller drops.
    #[inline]
    pub fn register(&self, waiter: Waiter) -> Option<Waiter> {
        // SeqCst: pairs with the waker's `take` after its state change (module docs).
        let old = self.word.swap(encode(waiter), SeqCst);
        // SAFETY: the swap moved `old` out of the slot, so this thread owns what it stands for.
        unsafe { decode(old) }
    }

    /// Takes the waiter out of the slot, if any; the caller then owns it (and usually wakes it).
    #[inline]
    pub fn take(&self) -> Option<Waiter> {
        // SeqCst: the load is the waker's half of the pattern in the module docs; an empty slot
        // (the common case when nobody waits) costs no write.
        if self.word.load(SeqCst) == 0 {
            return None;
        }
        let old = self.word.swap(0, SeqCst);
        // SAFETY: the swap moved `old` out of the slot, so this thread owns what it stands for.
        unsafe { decode(old) }
    }

    /// Takes the waiter, if any, and wakes it.
    #[inline]
    pub fn wake(&self) {
        if let Some(w) = self.take() {
            w.wake();
        }
    }

    /// Whether a waiter is registered now.
    pub fn is_registered(&self) -> bool {
        self.word.load(SeqCst) != 0
    }
}

impl Drop for WaiterSlot {
    fn drop(&mut self) {
        drop(self.take());
    }
}

fn encode(waiter: Waiter) -> usize {
    match waiter {
        Waiter::Actor(a) => Arc::into_raw(a) as usize,
        Waiter::Thread(t) => Box::into_raw(Box::new(t)) as usize | THREAD_TAG,
    }
}

/// # Safety
///
/// `word` is 0 or came from `encode`, and the caller owns it: it was moved out of the slot, so
/// it is decoded once.
unsafe fn decode(word: usize) -> Option<Waiter> {
    if word == 0 {
        None
    } else if word & THREAD_TAG != 0 {
        // SAFETY: the tag says `encode` boxed a `Thread` here; the caller owns the box.
        Some(Waiter::Thread(*unsafe {
            Box::from_raw((word & !THREAD_TAG) as *mut Thread)
        }))
    } else {
        // SAFETY: `encode` made this word with `Arc::into_raw`; the caller owns that count.
        Some(Waiter::Actor(unsafe {
            Arc::from_raw(word as *const ActorCell)
        }))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn register_replaces_and_returns_the_stale_waiter() {
        let slot = WaiterSlot::new();
        assert!(slot.register(Waiter::current()).is_none());
        let stale = slot
            .register(Waiter::current())
            .expect("the first registration");
        assert!(stale.same_as(&Waiter::current()));
        assert!(slot.is_registered());
        drop(slot); // drops the registered waiter
    }

    #[test]
    fn wake_takes_and_unparks_a_thread() {
        let slot = Arc::new(WaiterSlot::new());
        let waker = {
            let slot = slot.clone();
            std::thread::spawn(move || {
                while !slot.is_registered() {
                    std::thread::yield_now();
                }
                slot.wake();
            })
        };
        assert!(slot.register(Waiter::current()).is_none());
        while slot.is_registered() {
            std::thread::park();
        }
        waker.join().unwrap();
        assert!(slot.take().is_none());
    }

    #[test]
    fn actor_waiters_keep_their_actor_alive_until_taken() {
        let rt = crate::Runtime::builder().workers(1).build().unwrap();
        let slot = Arc::new(WaiterSlot::new());
        let s = slot.clone();
        rt.spawn(move || assert!(s.register(Waiter::current()).is_none()))
            .join()
            .unwrap();
        // The actor has ended; the slot still owns a reference to it.
        let w = slot.take().expect("registered by the actor");
        assert!(matches!(w, Waiter::Actor(_)));
        w.wake(); // an ended actor ignores wakes
    }
}
