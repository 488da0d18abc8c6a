//! Loom model of the hand-over of the right to poll I/O (`poll_right.rs`): the shipped
//! `PollRight`, driven by two modelled workers.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p threadlet-runtime --test loom_poll_right --release
//! ```
//!
//! Each worker must poll once, and does what `WorkerLoop::poll_instead_of_park` does when it
//! has nothing to run: take the right or else want it (`take_or_want`); with the right, poll
//! without waiting (there is work: the other worker's turn at the poll is what is modelled),
//! release it, and if a worker wanted it meanwhile (`take_wanted`), wake the other worker,
//! as `Shared::notify_parked` wakes a parked one; without the right, park on its parker and
//! try again when woken. Nothing else wakes a parked worker, so a hand-over lost (the right
//! released unnoticed while the other worker went to park) leaves that worker parked for good,
//! which loom reports as a deadlock. Removing either `SeqCst` fence of `PollRight`, or the
//! second try of `take_or_want`, makes the first model report one.
#![cfg(loom)]

mod loom_support;

// std's `Arc`, not loom's: a loom `Arc` dropped while a failing execution unwinds aborts the
// test binary, hiding which model failed and how.
use std::sync::Arc;

use std::sync::atomic::Ordering::Relaxed;

use loom::sync::atomic::AtomicUsize;
use loom::thread;
use loom_support::Parker;
use threadlet_runtime::__private::PollRight;

struct Shared {
    right: PollRight<()>,
    /// Polls made. A loom atomic, bumped while the right is held: the poll itself is where
    /// other threads run meanwhile (loom switches threads only at its own operations).
    polls: AtomicUsize,
    parkers: [Parker; 2],
}

impl Shared {
    fn new() -> Arc<Shared> {
        Arc::new(Shared {
            right: PollRight::new(()),
            polls: AtomicUsize::new(0),
            parkers: Default::default(),
        })
    }

    /// A poll without waiting, then the release and hand-over of the right (step 2).
    fn poll_and_let_go(&self, right: impl Sized, wake: usize) {
        self.polls.fetch_add(1, Relaxed);
        drop(right);
        if self.right.take_wanted() {
            self.parkers[wake].unpark();
        }
    }
}

/// Worker `me`: polls once, by the hand-over protocol.
fn worker(shared: &Shared, me: usize) {
    loop {
        match shared.right.take_or_want() {
            Some(right) => return shared.poll_and_let_go(right, 1 - me),
            None => shared.parkers[me].park(),
        }
    }
}

#[test]
fn the_right_to_poll_is_never_left_unwatched() {
    loom::model(|| {
        let shared = Shared::new();
        let other = {
            let shared = shared.clone();
            thread::spawn(move || worker(&shared, 1))
        };
        worker(&shared, 0);
        other.join().unwrap();
        assert_eq!(shared.polls.load(Relaxed), 2);
    });
}

/// A third thread that looks without waiting (the monitor, or a busy worker: `try_take`, then
/// the same `take_wanted`) may take the right from under a wanter: the wanter must still be
/// woken when the right is let go.
#[test]
fn a_look_without_waiting_hands_the_right_over_too() {
    loom::model(|| {
        let shared = Shared::new();
        let looker = {
            let shared = shared.clone();
            thread::spawn(move || {
                if let Some(right) = shared.right.try_take() {
                    shared.poll_and_let_go(right, 0);
                }
            })
        };
        worker(&shared, 0);
        looker.join().unwrap();
        assert!(shared.polls.load(Relaxed) >= 1);
    });
}
