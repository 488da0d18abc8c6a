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
//! in the slot and taken at the end), and the thief must take only entries free to move.
//! Making the owner's take a load and a store makes the first two models take an entry twice;
//! making its push a plain store into a full slot makes the first and the last lose one.
#![cfg(loom)]

use std::sync::Mutex;

use loom::thread;
use threadlet_runtime::__private::{NextSlot, SlotEntry, next_slot};

/// The entries: each a reference to one of these (an id, and whether it may move), so that an
/// entry taken twice shows as its id twice, not as a double free.
static ITEMS: [(u32, bool); 4] = [(1, true), (2, true), (3, false), (4, false)];

/// An entry: one of `ITEMS`.
#[derive(Debug)]
struct Entry(&'static (u32, bool));

impl Entry {
    fn new(id: u32) -> Entry {
        Entry(&ITEMS[id as usize - 1])
    }

    fn id(&self) -> u32 {
        self.0.0
    }
}

// SAFETY: a reference to a `(u32, bool)` is aligned to 4, so its low bit is 0, and `from_raw`
// makes the same reference again.
unsafe impl SlotEntry for Entry {
    fn into_raw(self) -> *mut () {
        std::ptr::from_ref(self.0).cast_mut().cast()
    }

    unsafe fn from_raw(ptr: *mut ()) -> Entry {
        // SAFETY: the caller's promise: `ptr` came from `into_raw`, a reference to `ITEMS`.
        Entry(unsafe { &*ptr.cast_const().cast::<(u32, bool)>() })
    }

    fn may_move(&self) -> bool {
        self.0.1
    }
}

/// Runs `f` under loom with at most `preemption_bound` preemptions per execution, unless
/// `LOOM_MAX_PREEMPTIONS` sets another bound.
fn model(preemption_bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(preemption_bound);
    builder.check(f);
}

/// Everything that came out of the slot, by whom.
#[derive(Default)]
struct Out {
    owner: Vec<u32>,
    thief: Vec<u32>,
}

/// Runs `owner` on this thread against a thief that tries `steals` times, then empties the
/// slot; returns what each got.
fn with_thief(steals: usize, owner: impl FnOnce(&NextSlot<Entry>, &mut Vec<u32>)) -> Out {
    let (slot, stealer) = next_slot::<Entry>();
    let stolen = std::sync::Arc::new(Mutex::new(Vec::new()));
    let thief = {
        let stolen = stolen.clone();
        thread::spawn(move || {
            for _ in 0..steals {
                if let Some(e) = stealer.steal() {
                    assert!(e.may_move(), "the thief took a pinned entry");
                    stolen.lock().unwrap().push(e.id());
                }
            }
        })
    };
    let mut mine = Vec::new();
    owner(&slot, &mut mine);
    thief.join().unwrap();
    mine.extend(slot.take().map(|e| e.id()));
    let thief = std::mem::take(&mut *stolen.lock().unwrap());
    Out { owner: mine, thief }
}

/// Each of `ids` came out exactly once, by either side.
fn exactly_once(out: &Out, ids: &[u32]) {
    let mut all: Vec<u32> = out.owner.iter().chain(&out.thief).copied().collect();
    all.sort_unstable();
    assert_eq!(all, ids, "owner {:?}, thief {:?}", out.owner, out.thief);
}

/// A fan-out (a push into a full slot displaces the entry there) and a take, against a thief:
/// the owner's swap and the thief's compare-and-swap race for the same entry.
#[test]
fn push_push_take_against_a_thief() {
    model(3, || {
        let out = with_thief(2, |slot, mine| {
            assert!(slot.push(Entry::new(1)).is_none());
            mine.extend(slot.push(Entry::new(2)).map(|e| e.id()));
            mine.extend(slot.take().map(|e| e.id()));
        });
        exactly_once(&out, &[1, 2]);
    });
}

/// A chain: push, take, push again (the second push may find the slot emptied by the take or
/// by the thief), take.
#[test]
fn a_chain_of_pushes_and_takes_against_a_thief() {
    model(3, || {
        let out = with_thief(2, |slot, mine| {
            for id in [1, 2] {
                mine.extend(slot.push(Entry::new(id)).map(|e| e.id()));
                mine.extend(slot.take().map(|e| e.id()));
            }
        });
        exactly_once(&out, &[1, 2]);
    });
}

/// A pinned entry is never stolen, even when a free one came before it at the same place.
#[test]
fn a_pinned_entry_stays_for_its_owner() {
    model(3, || {
        let out = with_thief(2, |slot, mine| {
            assert!(slot.push(Entry::new(3)).is_none());
            mine.extend(slot.push(Entry::new(2)).map(|e| e.id()));
            mine.extend(slot.push(Entry::new(4)).map(|e| e.id()));
        });
        exactly_once(&out, &[2, 3, 4]);
    });
}
