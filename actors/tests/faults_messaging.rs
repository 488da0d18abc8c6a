//! Regression tests for faults in channels and mailboxes: operations cancelled by shutdown
//! while parked, wakes and drops that run code while a channel is locked, a mailbox shared by
//! two receivers, closing a mailbox, and timeouts too long to represent.
//!
//! These tests check behaviour only. Where a test sleeps, it is to let a scenario reach the
//! state in which a wrong implementation shows itself; a correct one passes however the threads
//! are timed, and each assertion holds whichever way the scheduling went.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Weak, mpsc};
use std::thread;
use std::time::Duration;

use threadlet::channel::{self, RecvTimeoutError, SendError, TryRecvError};
use threadlet::{ActorBuilder, Mailbox, Runtime, RuntimeExt};

/// One or two workers and no time slices, so that an actor runs until it parks: a test knows
/// that an actor which has signalled it is about to block is parked by the time the worker runs
/// anything else.
fn runtime(workers: usize) -> Runtime {
    Runtime::builder()
        .workers(workers)
        .time_slice(Duration::ZERO)
        .build()
        .unwrap()
}

/// A runtime whose shared state owns a clone of `token` (in its long-run hook), so that the
/// token's `Weak` shows whether the runtime has been freed.
fn runtime_owning(token: &Arc<()>) -> Runtime {
    let token = token.clone();
    Runtime::builder()
        .workers(1)
        .time_slice(Duration::ZERO)
        .on_long_run(move |_| {
            let _ = &token;
        })
        .build()
        .unwrap()
}

/// Counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Runs `scenario` on its own thread and fails the test if it has not finished in 20 s (a
/// deadlock), instead of hanging the test binary.
fn finishes<R: Send + 'static>(what: &str, scenario: impl FnOnce() -> R + Send + 'static) -> R {
    let (done, is_done) = mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(scenario());
    });
    match is_done.recv_timeout(Duration::from_secs(20)) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: deadlocked (no end in 20 s)"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: the scenario panicked"),
    }
}

/// Spawns an actor on `rt` that runs `f` until it blocks, and returns once it has started: with
/// no time slices and one worker, the worker runs nothing else until the actor parks.
fn spawn_started<R: Send + 'static>(
    rt: &Runtime,
    f: impl FnOnce() -> R + Send + 'static,
) -> threadlet::JoinHandle<R> {
    let (started, is_started) = mpsc::channel();
    let h = rt.spawn(move || {
        started.send(()).unwrap();
        f()
    });
    is_started.recv().unwrap();
    h
}

/// Spawns an actor that keeps the only worker busy until `release` is set, and returns once it
/// runs: every actor spawned or woken meanwhile waits in a queue.
fn hog(rt: &Runtime, release: &Arc<AtomicBool>) {
    let release = release.clone();
    drop(spawn_started(rt, move || {
        while !release.load(SeqCst) {
            std::hint::spin_loop();
        }
    }));
}

// ---------------------------------------------------------------------------------------------
// F5: operations parked when shutdown unwinds their actor
// ---------------------------------------------------------------------------------------------

/// A receiver unwound while parked leaves no slot behind: a later send is not handed to the
/// dead receiver but buffered, and a live receiver gets it.
#[test]
fn send_after_an_unwound_receiver_reaches_a_live_one() {
    let (tx, rx) = channel::unbounded::<u32>();
    let rt = runtime(1);
    let rx2 = rx.clone();
    let h = spawn_started(&rt, move || rx2.recv());
    drop(rt); // unwinds the actor from inside its `recv`
    assert!(h.join().unwrap_err().is_cancelled());
    assert_eq!(tx.send(7), Ok(()));
    assert_eq!(rx.len(), 1);
    assert_eq!(rx.try_recv(), Ok(7));
}

/// A rendezvous sender unwound while parked never completed its send: its value is dropped with
/// it, not taken later by a receiver.
#[test]
fn value_of_an_unwound_sender_is_not_delivered_later() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = channel::bounded::<Counted>(0);
    let rt = runtime(1);
    let value = Counted(drops.clone());
    let h = spawn_started(&rt, move || tx.send(value).is_ok());
    drop(rt);
    assert!(h.join().unwrap_err().is_cancelled());
    assert_eq!(
        drops.load(SeqCst),
        1,
        "the value is dropped with its sender"
    );
    // The only sender is gone with the actor, and its value with it.
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Disconnected)));
}

/// An unwound receiver's slot does not keep its actor, and through it the whole runtime,
/// allocated for as long as the channel lives; the actor's closure is dropped too.
#[test]
fn unwound_receiver_does_not_keep_the_runtime_alive() {
    let token = Arc::new(());
    let runtime_alive: Weak<()> = Arc::downgrade(&token);
    let rt = runtime_owning(&token);
    drop(token);
    let (tx, rx) = channel::unbounded::<u32>();
    let closure_drops = Arc::new(AtomicUsize::new(0));
    let captured = Counted(closure_drops.clone());
    let h = spawn_started(&rt, move || {
        let _captured = &captured;
        rx.recv()
    });
    drop(rt);
    assert!(h.join().unwrap_err().is_cancelled());
    assert_eq!(
        closure_drops.load(SeqCst),
        1,
        "the actor's closure is dropped"
    );
    assert!(
        runtime_alive.upgrade().is_none(),
        "a waiter left in the channel keeps the runtime allocated"
    );
    // The receiver went with the actor: the channel is closed, and holds nobody.
    assert_eq!(tx.send(1), Err(SendError(1)));
}

/// A value handed to a parked receiver that shutdown unwinds before it runs again (its `send`
/// returned `Ok`) is not lost: either the receiver got to return it, or it is back in the
/// channel for another receiver.
#[test]
fn value_handed_to_an_unwound_receiver_is_kept() {
    let (tx, rx) = channel::unbounded::<u32>();
    let rt = runtime(1);
    let rx2 = rx.clone();
    let receiver = spawn_started(&rt, move || rx2.recv());
    let release = Arc::new(AtomicBool::new(false));
    hog(&rt, &release); // the receiver, once woken, waits behind it
    assert_eq!(tx.send(1), Ok(())); // hands 1 to the parked receiver and wakes it
    let dropper = thread::spawn(move || drop(rt));
    thread::sleep(Duration::from_millis(50)); // lets shutdown begin before the hog ends
    release.store(true, SeqCst);
    dropper.join().unwrap();
    let by_actor = matches!(receiver.join(), Ok(Ok(1)));
    let by_channel = rx.try_recv() == Ok(1);
    assert!(
        by_actor ^ by_channel,
        "delivered by the actor: {by_actor}, left in the channel: {by_channel}"
    );
}

/// The mailbox counterpart: an actor unwound in `recv` on a mailbox that outlives it (kept
/// outside its stack) does not leave itself published as the mailbox's waiter.
#[test]
fn unwound_mailbox_receiver_leaves_no_waiter() {
    let token = Arc::new(());
    let runtime_alive = Arc::downgrade(&token);
    let rt = runtime_owning(&token);
    drop(token);
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| {
        // Kept alive by the main thread below, so it outlives the actor's stack.
        let kept = Arc::new(std::sync::Mutex::new(mb));
        let own = kept.clone();
        (kept, move || {
            own.lock().unwrap_or_else(|e| e.into_inner()).recv()
        })
    });
    let (kept, recv) = h.join().unwrap();
    let h = spawn_started(&rt, recv);
    drop(rt);
    assert!(h.join().unwrap_err().is_cancelled());
    assert!(
        runtime_alive.upgrade().is_none(),
        "a waiter left in the mailbox keeps the runtime allocated"
    );
    assert_eq!(addr.send(3), Ok(()));
    let mb = kept.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(mb.try_recv(), Ok(3));
}

// ---------------------------------------------------------------------------------------------
// F6: one receiver per mailbox
// ---------------------------------------------------------------------------------------------

/// Tells, at run time, whether `T` is `Sync`: the inherent method wins when its bound holds.
struct SyncProbe<T>(PhantomData<T>);

trait NotSync {
    fn is_sync(&self) -> bool {
        false
    }
}

impl<T> NotSync for SyncProbe<T> {}

impl<T: Sync> SyncProbe<T> {
    fn is_sync(&self) -> bool {
        true
    }
}

/// A mailbox has one receiver: it can move to another thread, but not be shared by two, which
/// would leave one of them parked for good (the mailbox records one waiter).
#[test]
fn mailbox_is_send_but_not_sync() {
    fn assert_send<T: Send>() {}
    assert_send::<Mailbox<u32>>();
    assert!(!SyncProbe::<Mailbox<u32>>(PhantomData).is_sync());
    assert!(SyncProbe::<threadlet::Addr<u32>>(PhantomData).is_sync());
}

// ---------------------------------------------------------------------------------------------
// F8: no wake and no value drop under the channel lock
// ---------------------------------------------------------------------------------------------

/// The deadlock this section is named after: during shutdown, a wake from a plain thread used
/// to drain the runtime's injector on that thread, dropping the closures of actors that never
/// started, while the channel that woke still held its lock. Here such a closure owns a
/// `Sender` of the very channel whose `send` does the wake. Two fixes close it, and this test
/// fails only if both regress: a push at shutdown never drops a closure (`Shared::after_push`
/// in the runtime), and a channel wakes only after unlocking. The next test covers the
/// channel's half alone.
/// A cancelled sender's value is dropped after the channel's lock is released: its destructor
/// may use the same channel. (Dropped under the lock, it would deadlock: the lock is not
/// reentrant.)
#[test]
fn a_cancelled_senders_value_is_dropped_unlocked() {
    /// With a sender inside, its drop sends on that channel (a value with none, which the
    /// channel refuses and hands back, ends the chain).
    struct SendsOnDrop(Option<channel::Sender<SendsOnDrop>>, Arc<AtomicUsize>);
    impl Drop for SendsOnDrop {
        fn drop(&mut self) {
            if let Some(tx) = self.0.take() {
                // Locks the channel; the result does not matter (full, or disconnected).
                let _ = tx.try_send(SendsOnDrop(None, self.1.clone()));
            }
            self.1.fetch_add(1, SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    finishes("drop of a cancelled sender's value", move || {
        let (tx, rx) = channel::bounded::<SendsOnDrop>(0);
        let rt = runtime(1);
        let value = SendsOnDrop(Some(tx.clone()), d);
        // Parks in a rendezvous send nobody takes; shutdown unwinds it from inside `send`.
        let h = spawn_started(&rt, move || tx.send(value).is_ok());
        drop(rt);
        assert!(h.join().unwrap_err().is_cancelled());
        drop(rx);
    });
    assert!(drops.load(SeqCst) >= 1, "the value was dropped");
}

#[test]
fn wake_during_send_runs_unlocked() {
    let delivered = finishes("send waking a receiver during shutdown", || {
        let rt = runtime(1);
        let (tx, rx) = channel::unbounded::<u32>();
        let rx2 = rx.clone();
        let (started, is_started) = mpsc::channel();
        // SAFETY: while suspended (in `recv`) the actor holds only a `Receiver` and an mpsc
        // `Sender` already used: nothing tied to its worker thread.
        let receiver = unsafe { ActorBuilder::new().migratable() }
            .spawn_on(&rt, move || {
                started.send(()).unwrap();
                rx2.recv()
            })
            .unwrap();
        is_started.recv().unwrap();
        let release = Arc::new(AtomicBool::new(false));
        hog(&rt, &release);
        // Never starts (the only worker is busy): its closure is dropped by whoever drains
        // the injector, dropping its `Sender`.
        let tx2 = tx.clone();
        let _unstarted = rt.spawn(move || drop(tx2));
        let dropper = thread::spawn(move || drop(rt));
        thread::sleep(Duration::from_millis(50)); // lets shutdown begin
        let sent = tx.send(1); // wakes the migratable receiver from this plain thread
        release.store(true, SeqCst);
        dropper.join().unwrap();
        assert_eq!(sent, Ok(()));
        let by_actor = matches!(receiver.join(), Ok(Ok(1)));
        let by_channel = rx.try_recv() == Ok(1);
        by_actor ^ by_channel
    });
    assert!(delivered, "the value sent is delivered exactly once");
}

// ---------------------------------------------------------------------------------------------
// B4: close, then drain
// ---------------------------------------------------------------------------------------------

/// Two actors send as fast as they can until the mailbox refuses; the owner reads about 100
/// messages, closes, and drains. Every send that returned `Ok` is received, in each of 1,000
/// rounds.
#[test]
fn close_then_drain_receives_every_accepted_message() {
    let rt = runtime(2);
    for round in 0..1000 {
        let (addr, owner) = rt.spawn_actor(|mb: Mailbox<u32>| {
            let mut got = 0usize;
            while got < 100 && mb.recv().is_some() {
                got += 1;
            }
            mb.close();
            // Addresses are alive (the senders', the test's), yet the drain ends.
            while mb.recv().is_some() {
                got += 1;
            }
            assert_eq!(mb.try_recv(), Err(TryRecvError::Disconnected));
            assert_eq!(
                mb.recv_timeout(Duration::from_secs(60)),
                Err(RecvTimeoutError::Disconnected)
            );
            got
        });
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let addr = addr.clone();
                rt.spawn(move || {
                    let mut accepted = 0usize;
                    for i in 0..5_000u32 {
                        if addr.send(i).is_err() {
                            break;
                        }
                        accepted += 1;
                        if i % 8 == 0 {
                            threadlet::yield_now();
                        }
                    }
                    accepted
                })
            })
            .collect();
        let received = owner.join().unwrap();
        let accepted: usize = senders.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(
            accepted, received,
            "round {round}: accepted but not received"
        );
        assert!(addr.is_closed());
        assert_eq!(addr.send(1), Err(SendError(1)));
    }
}

// ---------------------------------------------------------------------------------------------
// F10: timeouts too long to represent
// ---------------------------------------------------------------------------------------------

/// `Duration::MAX` means "no deadline", in a mailbox and in a channel, in an actor and on a
/// plain thread.
#[test]
fn recv_timeout_max_waits_for_the_message() {
    let rt = runtime(2);
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.recv_timeout(Duration::MAX));
    addr.send(5).unwrap();
    assert_eq!(h.join().unwrap(), Ok(5));

    let (tx, rx) = channel::unbounded::<u32>();
    let h = rt.spawn(move || rx.recv_timeout(Duration::MAX));
    tx.send(6).unwrap();
    assert_eq!(h.join().unwrap(), Ok(6));

    let (tx, rx) = channel::bounded::<u32>(0);
    let sender = rt.spawn(move || tx.send(7));
    assert_eq!(rx.recv_timeout(Duration::MAX), Ok(7)); // this plain thread blocks
    assert_eq!(sender.join().unwrap(), Ok(()));
}

/// A delay too long to represent never comes: the message is dropped at once (not panicking,
/// not delivered), from an actor and from a plain thread.
#[test]
fn send_after_max_drops_the_message() {
    let rt = runtime(1);
    let drops = Arc::new(AtomicUsize::new(0));
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<Option<Counted>>| {
        let first = mb.recv().unwrap();
        first.is_none()
    });
    addr.send_after(Duration::MAX, Some(Counted(drops.clone())));
    assert_eq!(drops.load(SeqCst), 1);
    let a = addr.clone();
    let d = drops.clone();
    rt.spawn(move || a.send_after(Duration::MAX, Some(Counted(d))))
        .join()
        .unwrap();
    assert_eq!(drops.load(SeqCst), 2);
    addr.send(None).unwrap();
    assert!(
        h.join().unwrap(),
        "the first message received is the one sent now"
    );
}
