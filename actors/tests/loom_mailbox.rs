//! Loom models of the mailbox send/receive wake protocol (`mailbox.rs`), run against the
//! shipped `Mailbox` and `Addr`:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p threadlet --test loom_mailbox --release
//! ```
//!
//! The receiver is a plain loom thread: outside an actor `Waiter::current()` is the thread and
//! `park()` is `thread::park`, both loom's under `cfg(loom)`. A lost wakeup leaves the receiver
//! parked for good with every other thread finished, which loom reports as a deadlock.
#![cfg(loom)]

mod loom_support;

// std's `Arc`, not loom's: a loom `Arc` dropped while a failing execution unwinds aborts the
// test binary, hiding which model failed and how.
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use loom::sync::atomic::AtomicUsize;
use loom::thread;
use loom_support::model;
use threadlet::channel::TryRecvError;

/// Two senders send one message each and drop their addresses while the receiver calls `recv`
/// three times: both messages arrive exactly once, then `None` once every `Addr` is gone.
#[test]
fn two_senders_then_disconnect() {
    model(|| {
        let (addr, mb) = threadlet::__mailbox_for_tests::<u32>();
        // Dropping a mailbox locks it, which panics again (and aborts the test binary) while a
        // failing execution unwinds; so it is only dropped on success, below.
        let mb = ManuallyDrop::new(mb);
        let senders: Vec<_> = [1, 2]
            .into_iter()
            .map(|msg| {
                let addr = addr.clone();
                thread::spawn(move || {
                    addr.send(msg).unwrap();
                    drop(addr);
                })
            })
            .collect();
        drop(addr);

        let mut got = [mb.recv().unwrap(), mb.recv().unwrap()];
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
        assert_eq!(mb.recv(), None);

        for s in senders {
            s.join().unwrap();
        }
        assert_eq!(mb.try_recv(), Err(TryRecvError::Disconnected));
        drop(ManuallyDrop::into_inner(mb));
    });
}

/// A message that counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A send racing the mailbox's drop (the actor ending): the message is either accepted and
/// dropped with the mailbox, or handed back to the sender, so it is dropped exactly once, and
/// by the time the mailbox is gone, while an address still lives. Every send after the end
/// fails and hands its message back.
#[test]
fn send_racing_the_end_conserves_the_message() {
    model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (addr, mb) = threadlet::__mailbox_for_tests::<Counted>();
        let sender = {
            let drops = drops.clone();
            thread::spawn(move || {
                if addr.send(Counted(drops)).is_err() {
                    // Handed back (and dropped here): the actor had ended.
                    assert!(addr.is_closed());
                }
                addr
            })
        };
        drop(mb);
        let addr = sender.join().unwrap();
        assert_eq!(drops.load(SeqCst), 1, "message not dropped exactly once");
        assert!(addr.is_closed());
        let late = Arc::new(AtomicUsize::new(0));
        let back = addr.send(Counted(late.clone())).unwrap_err().into_inner();
        assert_eq!(late.load(SeqCst), 0);
        drop(back);
        drop(addr);
        assert_eq!(late.load(SeqCst), 1);
        assert_eq!(drops.load(SeqCst), 1);
    });
}

/// A send racing the owner's `close`: the message is either accepted before the close, and then
/// the owner's drain after it receives the message, or refused and handed back to the sender.
/// The drain never waits for the live address, and nothing is received twice.
#[test]
fn send_racing_close_is_drained_or_handed_back() {
    model(|| {
        let (addr, mb) = threadlet::__mailbox_for_tests::<u32>();
        let mb = ManuallyDrop::new(mb);
        let sender = thread::spawn(move || {
            let accepted = match addr.send(1) {
                Ok(()) => true,
                Err(back) => {
                    assert_eq!(back.into_inner(), 1);
                    false
                }
            };
            (accepted, addr)
        });
        mb.close();
        // The sender's address may still be alive: the closed mailbox ends the drain anyway.
        let drained = mb.recv();
        let (accepted, addr) = sender.join().unwrap();
        assert_eq!(drained, accepted.then_some(1), "accepted: {accepted}");
        assert_eq!(mb.recv(), None);
        assert!(addr.is_closed());
        drop(addr);
        drop(ManuallyDrop::into_inner(mb));
    });
}

/// One sender sends two messages while the receiver waits for both: the first send may wake
/// the receiver, which then waits again while the second is under way. Both arrive, in order,
/// and the receiver never sleeps through the second.
#[test]
fn receiver_waits_again_between_two_sends() {
    model(|| {
        let (addr, mb) = threadlet::__mailbox_for_tests::<u32>();
        let mb = ManuallyDrop::new(mb);
        let sender = thread::spawn(move || {
            addr.send(1).unwrap();
            addr.send(2).unwrap();
            addr
        });
        assert_eq!((mb.recv(), mb.recv()), (Some(1), Some(2)));
        let addr = sender.join().unwrap();
        assert_eq!(mb.len(), 0);
        drop(addr);
        assert_eq!(mb.recv(), None);
        drop(ManuallyDrop::into_inner(mb));
    });
}

/// A sender waits for room in a mailbox of capacity 1 while the owner takes messages: the
/// owner's take moves the waiting message in and wakes its sender, so both arrive in order and
/// the sender never sleeps through the place freed for it.
#[test]
fn sender_waiting_for_room_is_let_in_by_the_take() {
    model(|| {
        let (addr, mb) = threadlet::__bounded_mailbox_for_tests::<u32>(1);
        let mb = ManuallyDrop::new(mb);
        let sender = thread::spawn(move || {
            addr.send(1).unwrap();
            addr.send(2).unwrap(); // waits for room unless the owner took 1 already
            addr
        });
        assert_eq!((mb.recv(), mb.recv()), (Some(1), Some(2)));
        let addr = sender.join().unwrap();
        drop(addr);
        assert_eq!(mb.recv(), None);
        drop(ManuallyDrop::into_inner(mb));
    });
}

/// A sender waiting for room races the owner's `close`: its message is either moved in before
/// the close (and drained after it) or handed back; never both, never lost.
#[test]
fn sender_waiting_for_room_racing_close_is_drained_or_handed_back() {
    model(|| {
        let (addr, mb) = threadlet::__bounded_mailbox_for_tests::<u32>(1);
        let mb = ManuallyDrop::new(mb);
        addr.send(1).unwrap();
        let sender = thread::spawn(move || {
            let accepted = match addr.send(2) {
                Ok(()) => true,
                Err(back) => {
                    assert_eq!(back.into_inner(), 2);
                    false
                }
            };
            (accepted, addr)
        });
        let first = mb.try_recv().ok(); // may let the waiting sender in
        mb.close();
        let mut drained: Vec<u32> = first.into_iter().collect();
        while let Some(m) = mb.recv() {
            drained.push(m);
        }
        let (accepted, addr) = sender.join().unwrap();
        let want: &[u32] = if accepted { &[1, 2] } else { &[1] };
        assert_eq!(drained, want, "accepted: {accepted}");
        drop(addr);
        drop(ManuallyDrop::into_inner(mb));
    });
}
