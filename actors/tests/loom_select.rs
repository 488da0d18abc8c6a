//! Loom models of the select protocol (`select.rs`: look, watch, look again, park), run against
//! the shipped `select!`, `Mailbox` and channels:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p threadlet --test loom_select --release
//! ```
//!
//! The selecting side is a plain loom thread (`Waiter::current()` is the thread, `park()` is
//! loom's `thread::park`). A lost wakeup leaves it parked for good with every other thread
//! finished, which loom reports as a deadlock. Under loom a select's look always starts at its
//! first branch, so that executions replay.
//!
//! Not modelled: two selects receiving from one channel. Loom 0.7 drops an `unpark` that
//! lands while its target is blocked on a loom `Mutex` (it makes the thread runnable instead
//! of leaving the token for its next `park`; tokio-rs/loom#249), and a woken select does take
//! the channel's lock before it parks again, so loom reports a deadlock that std's token (and
//! the runtime's `NOTIFIED` state) rules out. `tests/select.rs` covers that case with six
//! selecting consumers of one channel instead.
#![cfg(loom)]

mod loom_support;

use std::mem::ManuallyDrop;

use loom::thread;
use loom_support::model;
use threadlet::channel;

/// A select over a mailbox and a channel, each fed by its own thread: two selects get both
/// messages, one from each source, whatever the interleaving of the sends with the watching.
#[test]
fn select_over_a_mailbox_and_a_channel_misses_no_send() {
    model(|| {
        let (addr, mb) = threadlet::__mailbox_for_tests::<u32>();
        let mb = ManuallyDrop::new(mb);
        let (tx, rx) = channel::unbounded::<u32>();
        let a = thread::spawn(move || {
            addr.send(1).unwrap();
            addr
        });
        let b = thread::spawn(move || {
            tx.send(2).unwrap();
            tx
        });
        let mut got = Vec::new();
        for _ in 0..2 {
            threadlet::select! {
                recv(*mb) -> m => got.push(m.unwrap()),
                recv(rx) -> v => got.push(v.unwrap() * 10),
            }
        }
        got.sort_unstable();
        assert_eq!(got, [1, 20]);
        let addr = a.join().unwrap();
        drop(b.join().unwrap());
        drop(addr);
        drop(ManuallyDrop::into_inner(mb));
    });
}

/// A select waiting to send on a full channel while a receiver frees the place: the send goes
/// through once there is room, and the receiver gets both values in order.
#[test]
fn send_branch_wakes_when_room_is_made() {
    model(|| {
        let (tx, rx) = channel::bounded::<u32>(1);
        tx.send(1).unwrap();
        let (_never_tx, never_rx) = channel::unbounded::<u32>();
        let receiver = thread::spawn(move || (rx.recv().unwrap(), rx.recv().unwrap()));
        threadlet::select! {
            send(tx, 2) -> r => r.unwrap(),
            recv(never_rx) -> _ => unreachable!(),
        }
        assert_eq!(receiver.join().unwrap(), (1, 2));
    });
}
