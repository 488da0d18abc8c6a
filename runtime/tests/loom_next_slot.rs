//! Loom models of a worker's next slot (`next_slot.rs`), run against the shipped `NextSlot`
//! and `NextStealer`:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p threadlet-runtime --test loom_next_slot --release
//! ```
//!
//! An owner pushes and takes entries while a thief (a covering spare) tries to steal. Every
//! entry must come out exactly once (taken by the owner, displaced by a push, stolen, or left
//! in the slot and taken at the end), and the thief must take only entries free to move. Each
//! entry carries a value its maker wrote before the push (a loom cell), read by whoever takes
//! it out: loom reports a read that the push does not happen before.
//!
//! What makes the models fail: the owner's take of a free entry as a load and a store (an
//! entry taken twice); its push over a free entry as a plain store (one taken twice); the
//! thief taking pinned entries; the push's `Release` or the steal's `Acquire` weakened to
//! `Relaxed` (a read of the value that races its write).
#![cfg(loom)]

use std::sync::Mutex;

use loom::cell::UnsafeCell;
use loom::thread;
use threadlet_runtime::__private::{NextSlot, SlotEntry, next_slot};

/// What an entry points to: its id, whether it may move, and a value written before each push.
struct Item {
    id: u32,
    free: bool,
    value: UnsafeCell<u32>,
}

/// An entry: a boxed `Item`.
struct Entry(Box<Item>);

impl Entry {
    /// A new entry, its value written.
    fn new(id: u32, free: bool) -> Entry {
        let e = Entry(Box::new(Item {
            id,
            free,
            value: UnsafeCell::new(0),
        }));
        e.write();
        e
    }

    /// Writes the value, as a waker writes an actor's state before it queues it.
    fn write(&self) {
        let id = self.0.id;
        // SAFETY: this thread holds the entry: nobody else reaches the cell now.
        self.0.value.with_mut(|v| unsafe { *v = id * 10 });
    }
}

// SAFETY: `Box::into_raw` of an `Item` (aligned to 4), so the low bit is 0, and `from_raw`
// makes the same box again.
unsafe impl SlotEntry for Entry {
    fn into_raw(self) -> *mut () {
        Box::into_raw(self.0).cast()
    }

    unsafe fn from_raw(ptr: *mut ()) -> Entry {
        // SAFETY: the caller's promise: `ptr` came from `into_raw`, once.
        Entry(unsafe { Box::from_raw(ptr.cast()) })
    }

    fn may_move(&self) -> bool {
        self.0.free
    }
}

/// Runs `f` under loom with at most `preemption_bound` preemptions per execution, unless
/// `LOOM_MAX_PREEMPTIONS` sets another bound.
fn model(preemption_bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(preemption_bound);
    builder.check(f);
}

/// The entries taken out so far, by either side, kept until the model's end (so that one
/// taken twice is not freed while its second taker reads it).
#[derive(Default)]
struct Taken(Mutex<Vec<Entry>>);

impl Taken {
    /// Records an entry taken out, after reading its value (which must be the one written
    /// before its push).
    fn record(&self, e: Entry) {
        // SAFETY: the taker holds the entry; the read races the write only if the push did not
        // happen before the take, which loom reports.
        let value = e.0.value.with(|v| unsafe { *v });
        assert_eq!(value, e.0.id * 10, "entry {} read a stale value", e.0.id);
        self.0.lock().unwrap().push(e);
    }

    fn record_all(&self, entries: impl IntoIterator<Item = Entry>) {
        for e in entries {
            self.record(e);
        }
    }

    /// The ids taken, sorted. An entry taken twice fails the model; its second copy is
    /// forgotten, not dropped (the first one frees it).
    fn ids(&self) -> Vec<u32> {
        let mut entries = std::mem::take(&mut *self.0.lock().unwrap());
        entries.sort_unstable_by_key(|e| e.0.id);
        let ids: Vec<u32> = entries.iter().map(|e| e.0.id).collect();
        let mut kept: Vec<Entry> = Vec::new();
        for e in entries {
            if kept.last().is_some_and(|k| k.0.id == e.0.id) {
                let id = e.0.id;
                std::mem::forget(e);
                std::mem::forget(kept);
                panic!("entry {id} taken twice: {ids:?}");
            }
            kept.push(e);
        }
        ids
    }
}

/// Runs `owner` on this thread against a thief that tries `steals` times, then empties the
/// slot; checks that each of `ids` came out exactly once, and that the thief took only free
/// entries.
fn with_thief(steals: usize, ids: &[u32], owner: impl FnOnce(&NextSlot<Entry>, &Taken)) {
    let (slot, stealer) = next_slot::<Entry>();
    let taken = std::sync::Arc::new(Taken::default());
    let thief = {
        let taken = taken.clone();
        thread::spawn(move || {
            for _ in 0..steals {
                if let Some(e) = stealer.steal() {
                    assert!(e.may_move(), "the thief took pinned entry {}", e.0.id);
                    taken.record(e);
                }
            }
        })
    };
    owner(&slot, &taken);
    thief.join().unwrap();
    taken.record_all(slot.take());
    assert_eq!(taken.ids(), ids);
}

/// A fan-out (a push into a full slot displaces the entry there) and a take, against a thief:
/// the owner's swap and the thief's compare-and-swap race for the same entry.
#[test]
fn push_push_take_against_a_thief() {
    model(3, || {
        with_thief(2, &[1, 2], |slot, taken| {
            assert!(slot.push(Entry::new(1, true)).is_none());
            taken.record_all(slot.push(Entry::new(2, true)));
            taken.record_all(slot.take());
        });
    });
}

/// A chain: push, take, push again (the second push may find the slot emptied by the take or
/// by the thief), take.
#[test]
fn a_chain_of_pushes_and_takes_against_a_thief() {
    model(3, || {
        with_thief(2, &[1, 2], |slot, taken| {
            for id in [1, 2] {
                taken.record_all(slot.push(Entry::new(id, true)));
                taken.record_all(slot.take());
            }
        });
    });
}

/// Pinned entries are never stolen, and the owner takes them (plain stores) while the thief
/// races it for the free ones around them.
#[test]
fn pinned_entries_stay_for_their_owner() {
    model(3, || {
        with_thief(2, &[1, 2, 3], |slot, taken| {
            assert!(slot.push(Entry::new(1, false)).is_none());
            taken.record_all(slot.push(Entry::new(2, true)));
            taken.record_all(slot.take());
            taken.record_all(slot.push(Entry::new(3, false)));
            taken.record_all(slot.take());
        });
    });
}

/// The same entry (the same word) pushed again after the owner took it back, as an actor that
/// runs from the next slot and is woken into it again: each push is taken out once.
#[test]
fn the_same_word_pushed_twice() {
    model(3, || {
        let (slot, stealer) = next_slot::<Entry>();
        let thief = thread::spawn(move || {
            let mut stolen = Vec::new();
            for _ in 0..2 {
                stolen.extend(stealer.steal().map(|e| e.0.id));
            }
            stolen
        });
        let mut mine = 0;
        let mut entry = Some(Entry::new(1, true));
        for _ in 0..2 {
            let Some(e) = entry.take() else { break };
            e.write();
            assert!(slot.push(e).is_none());
            entry = slot.take();
            mine += usize::from(entry.is_some());
        }
        let stolen = thief.join().unwrap();
        let left = slot.take();
        // The entry is in exactly one place: kept by the owner, stolen (once), or left.
        let places = usize::from(entry.is_some()) + stolen.len() + usize::from(left.is_some());
        assert_eq!(
            places, 1,
            "owner took it {mine} times, the thief {stolen:?}"
        );
    });
}
