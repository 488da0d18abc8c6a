//! Loom model of a channel's values in hand (`channel.rs`, "Values in hand"), run against the
//! shipped channel:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p threadlet --test loom_channel --release
//! ```
//!
//! The receivers are plain loom threads (`Waiter::current()` is the thread, `park()` is loom's
//! `thread::park`). A receiver left waiting for a value in hand that nobody tells it about
//! stays parked for good with every other thread finished, which loom reports as a deadlock.
//! (The kill of a receiver holding a value, step 5, needs an unwind out of `park`, which a loom
//! thread cannot be given: `tests/channels.rs` covers it on a runtime.)
#![cfg(loom)]

mod loom_support;

use loom::thread;
use loom_support::model;
use threadlet::channel::{self, RecvError};

/// Two receivers, one value, then the last sender goes (steps 1 to 4): one receiver gets the
/// value, the other `RecvError`, whichever parked first and however the taking of the value
/// interleaves with the disconnect; neither waits for good.
#[test]
fn the_receiver_that_waited_for_a_value_in_hand_hears_the_disconnect() {
    for close in [false, true] {
        model(move || {
            let (tx, rx) = channel::unbounded::<u32>();
            let theirs = rx.clone();
            let other = thread::spawn(move || theirs.recv());
            let sender = thread::spawn(move || {
                tx.send(7).unwrap();
                tx
            });
            let tx = sender.join().unwrap();
            if close {
                tx.close();
            }
            drop(tx);
            let mine = rx.recv();
            let theirs = other.join().unwrap();
            let got = if mine.is_ok() {
                (mine, theirs)
            } else {
                (theirs, mine)
            };
            assert_eq!(got, (Ok(7), Err(RecvError)));
        });
    }
}

/// The same with both receivers possibly waiting before the value is sent and the last sender
/// goes (the disconnect's side of step 4: a receiver already waits while the value is in
/// hand).
#[test]
fn receivers_waiting_at_the_disconnect_hear_it_once_the_value_is_taken() {
    model(|| {
        let (tx, rx) = channel::unbounded::<u32>();
        let theirs = rx.clone();
        let other = thread::spawn(move || theirs.recv());
        let sender = thread::spawn(move || {
            tx.send(7).unwrap();
            drop(tx);
        });
        let mine = rx.recv();
        let theirs = other.join().unwrap();
        sender.join().unwrap();
        let got = if mine.is_ok() {
            (mine, theirs)
        } else {
            (theirs, mine)
        };
        assert_eq!(got, (Ok(7), Err(RecvError)));
    });
}
