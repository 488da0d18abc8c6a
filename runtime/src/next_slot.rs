//! A worker's next slot: the one actor that runs next on it, the one its running actor woke
//! last (a message chain stays on one core, as Go's `runnext` and tokio's LIFO slot keep it).
//!
//! The worker fills and empties the slot ([`NextSlot`], in its `Core`); other threads may
//! empty it too ([`NextStealer`], in its `Remote`), taking the occupant if it is free to move
//! (a handler actor between activations, a migratable actor): a spare covering the worker
//! (`spare.rs`), and an idle worker once the worker's running actor has held it past its time
//! slice without a safe point (`WorkerLoop::steal_overdue_next`; the monitor wakes one). That is what a stuck worker's
//! next slot needs: an actor that sends a request and then blocks its thread for the reply
//! (a plain blocking call, outside `threadlet::blocking`) has just woken the replier into this
//! slot, and a slot only its stuck worker could empty would keep the reply from ever coming.
//! Actors pinned to the worker stay for it, as everywhere else.
//!
//! # Invariants
//!
//! 1. The slot holds one word: null, or an entry turned into a pointer (`SlotEntry::into_raw`)
//!    with `FREE` in its low bit if a thief may take it. The slot owns the entry while it is
//!    there: exactly one thread takes it out, and turns it back into the entry.
//! 2. Only the owner puts entries in; thieves only ever take one out (the word goes from an
//!    entry to null, never the other way).
//! 3. A thief takes only an entry marked `FREE`.
//!
//! # Why no entry is lost or taken twice
//!
//! - *Owner, push.* By 2, a slot the owner reads as null stays null until the owner fills it,
//!   and by 3 one it reads as holding a pinned entry keeps it: a plain store suffices (the
//!   common case of a message chain: the slot was emptied by the run that follows), and the
//!   pinned entry it read is the one it displaced. A slot holding a free entry may be emptied
//!   by a thief at any time, so the owner swaps the new entry in and learns from the swap
//!   what it displaced: the old entry, or null if a thief took it first. Either way each
//!   entry has one taker.
//! - *Owner, take.* A pinned entry (by 3, still there): a plain store of null. A free one: a
//!   swap to null, which gets the entry, or null if a thief took it first.
//! - *Thief.* A compare-and-swap from the word it read to null. It succeeds only if the slot
//!   holds that word at that moment; the word's `FREE` bit was set for the entry it names, by
//!   the push that stored it (the same word may have been stored more than once, by pushes of
//!   entries at the same address: the compare-and-swap takes the one in the slot now, which is
//!   free, so it is the taker of the entry that is there).
//!
//! Cost to the owner: a chain of wakes of free actors (handler actors) pays one
//! read-modify-write a run (the take), and a fan-out (a push over a free entry) one more; a
//! chain of pinned actors (process actors) none. Go pays a compare-and-swap for each.
//!
//! `tests/loom_next_slot.rs` runs this type with an owner and a thief.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::sync::AtomicPtr;

/// The low bit of a slot's word: a thief may take the entry.
const FREE: usize = 1;

/// What a next slot holds: an owned pointer of alignment 2 or more (its low bit is the slot's
/// mark), and whether a thief may take it.
///
/// # Safety
///
/// [`into_raw`](SlotEntry::into_raw) returns a pointer whose low bit is 0 (the slot keeps its
/// mark there and clears it before [`from_raw`](SlotEntry::from_raw)), and `from_raw` of such
/// a pointer gives back the entry it was made from.
pub unsafe trait SlotEntry: Sized {
    /// The entry as a pointer, owning what the entry owned; its low bit is 0.
    fn into_raw(self) -> *mut ();
    /// The entry back from its pointer.
    ///
    /// # Safety
    ///
    /// `ptr` came from [`into_raw`](SlotEntry::into_raw) of this type, and is turned back
    /// only once.
    unsafe fn from_raw(ptr: *mut ()) -> Self;
    /// Whether a thief may take the entry (for an actor: it is pinned to no worker).
    fn may_move(&self) -> bool;
}

/// The slot that both ends share.
struct Slot<T: SlotEntry> {
    word: AtomicPtr<()>,
    _owns: PhantomData<T>,
}

// SAFETY: the slot moves entries between threads (the owner's and a thief's), and each entry
// is reached by one thread at a time (invariant 1): `T: Send` is all that needs.
unsafe impl<T: SlotEntry + Send> Send for Slot<T> {}
// SAFETY: shared between the owner and thieves, the slot only hands whole entries over
// through atomic operations on its word, never a reference into one.
unsafe impl<T: SlotEntry + Send> Sync for Slot<T> {}

impl<T: SlotEntry> Slot<T> {
    /// Turns a word taken out of the slot back into its entry.
    ///
    /// # Safety
    ///
    /// `word` is non-null and was taken out of this slot by the caller (invariant 1).
    unsafe fn entry(word: *mut ()) -> T {
        let ptr = word.map_addr(|a| a & !FREE);
        // SAFETY: the caller's promise: the word is an entry's pointer, marked, that the slot
        // owned and that only the caller took out, so it is turned back once; with the mark
        // cleared it is the pointer `into_raw` made (its low bit was 0: `SlotEntry`'s promise).
        unsafe { T::from_raw(ptr) }
    }
}

impl<T: SlotEntry> Drop for Slot<T> {
    fn drop(&mut self) {
        // Relaxed: dropping the last handle, no thread touches the slot any more.
        let word = self.word.swap(std::ptr::null_mut(), Ordering::Relaxed);
        if !word.is_null() {
            // SAFETY: non-null, and taken out by this swap.
            drop(unsafe { Slot::<T>::entry(word) });
        }
    }
}

/// A new next slot, empty: the owner's end and the thieves' end.
pub fn next_slot<T: SlotEntry>() -> (NextSlot<T>, NextStealer<T>) {
    let slot = Arc::new(Slot {
        word: AtomicPtr::new(std::ptr::null_mut()),
        _owns: PhantomData,
    });
    (
        NextSlot {
            slot: slot.clone(),
            _one_thread: PhantomData,
        },
        NextStealer { slot },
    )
}

/// The owner's end: the only one that puts entries in (invariant 2). Not `Sync`, so that only
/// the thread that holds it pushes.
pub struct NextSlot<T: SlotEntry> {
    slot: Arc<Slot<T>>,
    _one_thread: PhantomData<std::cell::Cell<()>>,
}

impl<T: SlotEntry> NextSlot<T> {
    /// Puts `entry` in; returns the entry it displaced, if a thief did not take it first.
    #[inline]
    pub fn push(&self, entry: T) -> Option<T> {
        let marked = if entry.may_move() { FREE } else { 0 };
        let ptr = entry.into_raw();
        debug_assert_eq!(ptr.addr() & FREE, 0, "`SlotEntry::into_raw`'s promise");
        let word = ptr.map_addr(|a| a | marked);
        let slot = &self.slot.word;
        // Relaxed: the owner reads its own last store, or a thief's null after it.
        let old = slot.load(Ordering::Relaxed);
        let old = if old.addr() & FREE == 0 {
            // Empty, or a pinned entry: either stays as it is until this thread changes it
            // (invariants 2 and 3). Release: pairs with a thief's acquire load and
            // compare-and-swap, which take the entry over.
            slot.store(word, Ordering::Release);
            old
        } else {
            // A free entry, which a thief may take at any time: the swap tells whether it did
            // (null). AcqRel: release as above; acquire for the displaced entry, whose last
            // writer was this thread anyway.
            slot.swap(word, Ordering::AcqRel)
        };
        // SAFETY: non-null, and taken out by this thread: by the swap, or by the store over a
        // pinned entry, which no thief takes.
        (!old.is_null()).then(|| unsafe { Slot::<T>::entry(old) })
    }

    /// Takes the entry out, if there is one.
    #[inline]
    pub fn take(&self) -> Option<T> {
        let slot = &self.slot.word;
        // Relaxed: as in `push`.
        let word = slot.load(Ordering::Relaxed);
        let word = if word.addr() & FREE == 0 {
            if word.is_null() {
                return None;
            }
            // A pinned entry stays until this thread takes it (invariant 3): no
            // read-modify-write, as for a process actor's chain of wakes.
            slot.store(std::ptr::null_mut(), Ordering::Relaxed);
            word
        } else {
            // A free one may be taken by a thief meanwhile: the swap gets it, or null. Acquire:
            // the entry's last writer was this thread, or a thief took it.
            slot.swap(std::ptr::null_mut(), Ordering::Acquire)
        };
        // SAFETY: non-null, and taken out by this thread (the swap, or the store over a pinned
        // entry, which no thief takes).
        (!word.is_null()).then(|| unsafe { Slot::<T>::entry(word) })
    }

    /// Whether the slot holds an entry (a thief may empty it at any time).
    pub fn is_occupied(&self) -> bool {
        // Relaxed: a look, as in `push`.
        !self.slot.word.load(Ordering::Relaxed).is_null()
    }
}

/// A thief's end: takes the entry out if it may move (invariant 3).
pub struct NextStealer<T: SlotEntry> {
    slot: Arc<Slot<T>>,
}

impl<T: SlotEntry> NextStealer<T> {
    /// Whether the slot holds an entry that may move (a hint: the owner may take it at once).
    pub fn has_free(&self) -> bool {
        // Relaxed: a look; `steal` is what takes.
        self.slot.word.load(Ordering::Relaxed).addr() & FREE != 0
    }

    /// Takes the entry out if it is there and may move.
    pub fn steal(&self) -> Option<T> {
        let slot = &self.slot.word;
        // Acquire: pairs with the owner's release store or swap that put the entry in.
        let word = slot.load(Ordering::Acquire);
        if word.is_null() || word.addr() & FREE == 0 {
            return None;
        }
        // Acquire on success: pairs with the release of the store or swap that put this word
        // in (see "Why no entry is lost or taken twice" for a word stored more than once).
        slot.compare_exchange(
            word,
            std::ptr::null_mut(),
            Ordering::Acquire,
            Ordering::Relaxed,
        )
        .ok()
        // SAFETY: non-null (checked), and taken out by this compare-and-swap.
        .map(|word| unsafe { Slot::<T>::entry(word) })
    }
}
