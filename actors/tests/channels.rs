//! Channel semantics: rendezvous hand-off, bounded capacity, unbounded sends, disconnection and
//! many-to-many delivery, from actors, from plain threads, and across the two.
//!
//! These tests check behaviour only. Where a test sleeps or yields, it is to give a wrong
//! implementation the chance to show itself; a correct one passes however long that takes.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{until, within_watchdog};
use threadlet::channel::{
    self, Receiver, RecvError, SendError, Sender, TryRecvError, TrySendError,
};
use threadlet::{Runtime, RuntimeExt, Scheduler};

/// One runtime per scheduler: the channel semantics must not depend on which one runs the
/// actors.
fn runtimes(workers: usize) -> impl Iterator<Item = Runtime> {
    runtimes_with(workers, None)
}

/// [`runtimes`] without time slices: an actor runs until it parks, so a test knows that an
/// actor which has signalled it is about to block is parked by the time its worker runs
/// anything else (with slices, a crowded machine can preempt it in between; and no slices
/// means no spare workers either).
fn runtimes_unsliced(workers: usize) -> impl Iterator<Item = Runtime> {
    runtimes_with(workers, Some(Duration::ZERO))
}

/// One runtime per scheduler, with this time slice (`None`: the default).
fn runtimes_with(workers: usize, slice: Option<Duration>) -> impl Iterator<Item = Runtime> {
    [
        Scheduler::WorkStealing,
        Scheduler::GlobalQueue,
        Scheduler::Gil,
    ]
    .into_iter()
    .map(move |s| {
        let builder = Runtime::builder().workers(workers).scheduler(s);
        match slice {
            Some(slice) => builder.time_slice(slice),
            None => builder,
        }
        .build()
        .unwrap()
    })
}

/// A value that counts its drops, to check that nothing is leaked or dropped twice.
struct Counted(u64, Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, SeqCst);
    }
}

// ---------------------------------------------------------------------------------------------
// Rendezvous: `bounded(0)`
// ---------------------------------------------------------------------------------------------

const HANDOFFS: usize = 200;

/// The receiver checks, before each `recv`, that no more sends have returned than values it has
/// taken: a rendezvous send only returns once a receiver took its value.
fn rendezvous_actor_to_actor(workers: usize) {
    for rt in runtimes(workers) {
        rt.block_on(|| {
            let (tx, rx) = channel::bounded::<usize>(0);
            let completed = Arc::new(AtomicUsize::new(0));
            let c = completed.clone();
            let sender = threadlet::spawn(move || {
                for i in 0..HANDOFFS {
                    tx.send(i).unwrap();
                    c.fetch_add(1, SeqCst);
                }
            });
            for i in 0..HANDOFFS {
                // Let the sender run ahead if it (wrongly) could.
                for _ in 0..3 {
                    threadlet::yield_now();
                }
                let done = completed.load(SeqCst);
                assert!(
                    done <= i,
                    "{done} sends returned but only {i} values were taken"
                );
                assert_eq!(rx.recv(), Ok(i));
            }
            sender.join().unwrap();
            assert_eq!(completed.load(SeqCst), HANDOFFS);
        });
    }
}

#[test]
fn rendezvous_hand_off_between_actors_one_worker() {
    rendezvous_actor_to_actor(1);
}

#[test]
fn rendezvous_hand_off_between_actors_two_workers() {
    rendezvous_actor_to_actor(2);
}

/// A log of events: "sent i" (logged after `send` returned) never comes before the receiver
/// started its `i`-th `recv`.
fn rendezvous_event_order(workers: usize) {
    for rt in runtimes(workers) {
        let log = rt.block_on(|| {
            let log = Arc::new(Mutex::new(Vec::<String>::new()));
            let (tx, rx) = channel::bounded::<u32>(0);
            let l = log.clone();
            let sender = threadlet::spawn(move || {
                for i in 0..2 {
                    l.lock().unwrap().push(format!("send {i}"));
                    tx.send(i).unwrap();
                    l.lock().unwrap().push(format!("sent {i}"));
                }
            });
            for _ in 0..2 {
                log.lock().unwrap().push("recv".into());
                let v = rx.recv().unwrap();
                log.lock().unwrap().push(format!("got {v}"));
            }
            sender.join().unwrap();
            Arc::try_unwrap(log).unwrap().into_inner().unwrap()
        });
        // Whatever the interleaving, "sent i" never comes before the receiver asked for value i.
        let pos = |s: &str| log.iter().position(|e| e == s).unwrap();
        for i in 0..2 {
            let nth_recv = log
                .iter()
                .enumerate()
                .filter(|(_, e)| *e == "recv")
                .nth(i)
                .unwrap()
                .0;
            assert!(nth_recv < pos(&format!("sent {i}")), "log: {log:?}");
            assert!(
                pos(&format!("send {i}")) < pos(&format!("got {i}")),
                "log: {log:?}"
            );
        }
    }
}

#[test]
fn rendezvous_event_order_one_worker() {
    rendezvous_event_order(1);
}

#[test]
fn rendezvous_event_order_two_workers() {
    rendezvous_event_order(2);
}

/// Plain threads, no runtime at all: the same handles block the OS thread.
#[test]
fn rendezvous_between_plain_threads_without_a_runtime() {
    let (tx, rx) = channel::bounded::<usize>(0);
    let entered = Arc::new(AtomicBool::new(false));
    let returned = Arc::new(AtomicBool::new(false));
    let (e, r) = (entered.clone(), returned.clone());
    let sender = thread::spawn(move || {
        e.store(true, SeqCst);
        tx.send(7).unwrap();
        r.store(true, SeqCst);
        for i in 0..HANDOFFS {
            tx.send(i).unwrap();
        }
    });
    while !entered.load(SeqCst) {
        thread::yield_now();
    }
    thread::sleep(Duration::from_millis(30));
    assert!(
        !returned.load(SeqCst),
        "a rendezvous send returned with no receiver"
    );
    assert_eq!(rx.recv(), Ok(7));
    let got: Vec<usize> = rx.iter().collect();
    assert_eq!(got, (0..HANDOFFS).collect::<Vec<_>>());
    sender.join().unwrap();
    assert!(returned.load(SeqCst));
    // The sender is gone: the channel is closed and empty.
    assert_eq!(rx.recv(), Err(RecvError));
}

/// Plain threads next to a running runtime, with the receiver checking hand-off order.
#[test]
fn rendezvous_between_plain_threads_with_a_runtime_running() {
    for rt in runtimes(2) {
        let (tx, rx) = channel::bounded::<usize>(0);
        let completed = Arc::new(AtomicUsize::new(0));
        let c = completed.clone();
        let sender = thread::spawn(move || {
            for i in 0..HANDOFFS {
                tx.send(i).unwrap();
                c.fetch_add(1, SeqCst);
            }
        });
        // Meanwhile the runtime runs actors as usual.
        let busy = rt.spawn(|| {
            let hs: Vec<_> = (0..100u64).map(|i| threadlet::spawn(move || i)).collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        });
        for i in 0..HANDOFFS {
            if i % 50 == 0 {
                thread::sleep(Duration::from_millis(2));
            }
            thread::yield_now();
            let done = completed.load(SeqCst);
            assert!(
                done <= i,
                "{done} sends returned but only {i} values were taken"
            );
            assert_eq!(rx.recv(), Ok(i));
        }
        sender.join().unwrap();
        assert_eq!(busy.join().unwrap(), 99 * 100 / 2);
    }
}

/// An actor sends, a plain thread receives.
fn rendezvous_actor_to_thread(workers: usize) {
    for rt in runtimes(workers) {
        let (tx, rx) = channel::bounded::<usize>(0);
        let completed = Arc::new(AtomicUsize::new(0));
        let entered = Arc::new(AtomicBool::new(false));
        let (c, e) = (completed.clone(), entered.clone());
        let sender = rt.spawn(move || {
            e.store(true, SeqCst);
            for i in 0..HANDOFFS {
                tx.send(i).unwrap();
                c.fetch_add(1, SeqCst);
            }
        });
        while !entered.load(SeqCst) {
            thread::yield_now();
        }
        // The actor is (or soon will be) parked in its first send; it must not get past it.
        thread::sleep(Duration::from_millis(20));
        assert_eq!(
            completed.load(SeqCst),
            0,
            "a rendezvous send returned early"
        );
        for i in 0..HANDOFFS {
            thread::yield_now();
            let done = completed.load(SeqCst);
            assert!(
                done <= i,
                "{done} sends returned but only {i} values were taken"
            );
            assert_eq!(rx.recv(), Ok(i));
        }
        sender.join().unwrap();
        assert_eq!(rx.recv(), Err(RecvError));
    }
}

#[test]
fn rendezvous_actor_sends_plain_thread_receives_one_worker() {
    rendezvous_actor_to_thread(1);
}

#[test]
fn rendezvous_actor_sends_plain_thread_receives_two_workers() {
    rendezvous_actor_to_thread(2);
}

/// A plain thread sends, an actor receives.
fn rendezvous_thread_to_actor(workers: usize) {
    for rt in runtimes(workers) {
        let (tx, rx) = channel::bounded::<usize>(0);
        let completed = Arc::new(AtomicUsize::new(0));
        let c = completed.clone();
        let sender = thread::spawn(move || {
            for i in 0..HANDOFFS {
                tx.send(i).unwrap();
                c.fetch_add(1, SeqCst);
            }
        });
        let receiver = rt.spawn(move || {
            for i in 0..HANDOFFS {
                if i % 50 == 0 {
                    // Blocks this worker's OS thread a moment: time for a wrong sender to run on.
                    thread::sleep(Duration::from_millis(2));
                }
                threadlet::yield_now();
                let done = completed.load(SeqCst);
                assert!(
                    done <= i,
                    "{done} sends returned but only {i} values were taken"
                );
                assert_eq!(rx.recv(), Ok(i));
            }
            rx.recv()
        });
        sender.join().unwrap();
        assert_eq!(receiver.join().unwrap(), Err(RecvError));
    }
}

#[test]
fn rendezvous_plain_thread_sends_actor_receives_one_worker() {
    rendezvous_thread_to_actor(1);
}

#[test]
fn rendezvous_plain_thread_sends_actor_receives_two_workers() {
    rendezvous_thread_to_actor(2);
}

/// `try_send` on a rendezvous channel succeeds only when a receiver is waiting.
#[test]
fn rendezvous_try_send_needs_a_waiting_receiver() {
    for rt in runtimes_unsliced(1) {
        rt.block_on(|| {
            let (tx, rx) = channel::bounded::<u32>(0);
            assert_eq!(tx.capacity(), Some(0));
            assert!(matches!(tx.try_send(1), Err(TrySendError::Full(1))));
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));

            let (ready_tx, ready_rx) = channel::unbounded::<()>();
            let receiver = threadlet::spawn(move || {
                ready_tx.send(()).unwrap();
                rx.recv()
            });
            // One worker: once we hear from the receiver it has parked in `recv`.
            ready_rx.recv().unwrap();
            tx.try_send(2).unwrap();
            assert_eq!(receiver.join().unwrap(), Ok(2));
            // The receiver is gone now.
            assert!(matches!(tx.try_send(3), Err(TrySendError::Disconnected(3))));
        });
    }
}

// ---------------------------------------------------------------------------------------------
// bounded(n)
// ---------------------------------------------------------------------------------------------

fn bounded_full_and_empty(workers: usize) {
    for rt in runtimes(workers) {
        rt.block_on(|| {
            const CAP: usize = 3;
            let (tx, rx) = channel::bounded::<usize>(CAP);
            assert_eq!(tx.capacity(), Some(CAP));
            assert!(rx.is_empty());
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
            for i in 0..CAP {
                tx.try_send(i).unwrap();
            }
            assert_eq!(tx.len(), CAP);
            assert_eq!(rx.len(), CAP);
            match tx.try_send(99) {
                Err(TrySendError::Full(v)) => assert_eq!(v, 99),
                other => panic!("expected Full, got {other:?}"),
            }

            // A send on the full channel waits until a receiver takes one.
            let (ready_tx, ready_rx) = channel::unbounded::<()>();
            let done = Arc::new(AtomicBool::new(false));
            let d = done.clone();
            let tx2 = tx.clone();
            let blocked = threadlet::spawn(move || {
                ready_tx.send(()).unwrap();
                tx2.send(CAP).unwrap();
                d.store(true, SeqCst);
            });
            ready_rx.recv().unwrap();
            for _ in 0..10 {
                threadlet::yield_now();
            }
            assert!(!done.load(SeqCst), "a send on a full channel returned");
            assert_eq!(tx.len(), CAP);

            assert_eq!(rx.recv(), Ok(0));
            blocked.join().unwrap();
            assert!(done.load(SeqCst));
            // The waiting value moved in behind the others: FIFO, still at capacity.
            assert_eq!(tx.len(), CAP);
            for i in 1..=CAP {
                assert_eq!(rx.recv(), Ok(i));
            }
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
            assert!(tx.is_empty());
        });
    }
}

#[test]
fn bounded_full_and_empty_one_worker() {
    bounded_full_and_empty(1);
}

#[test]
fn bounded_full_and_empty_two_workers() {
    bounded_full_and_empty(2);
}

/// A plain thread blocked on a full channel resumes when an actor takes a value.
#[test]
fn bounded_blocked_plain_thread_sender_resumes() {
    for rt in runtimes(2) {
        let (tx, rx) = channel::bounded::<u32>(1);
        tx.send(0).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let sender = thread::spawn(move || {
            tx.send(1).unwrap();
            d.store(true, SeqCst);
            tx.send(2).unwrap();
        });
        thread::sleep(Duration::from_millis(20));
        assert!(!done.load(SeqCst), "a send on a full channel returned");
        let got = rt
            .spawn(move || rx.iter().collect::<Vec<_>>())
            .join()
            .unwrap();
        assert_eq!(got, vec![0, 1, 2]);
        sender.join().unwrap();
    }
}

/// Capacity is respected with a fast sender and a slow receiver: the buffer never holds more
/// than `cap` values.
#[test]
fn bounded_buffer_never_exceeds_capacity() {
    for rt in runtimes(2) {
        rt.block_on(|| {
            const CAP: usize = 4;
            let (tx, rx) = channel::bounded::<usize>(CAP);
            let probe = tx.clone();
            let sender = threadlet::spawn(move || {
                for i in 0..2_000 {
                    tx.send(i).unwrap();
                }
            });
            let mut next = 0;
            while let Ok(v) = rx.recv() {
                assert_eq!(v, next);
                next += 1;
                assert!(probe.len() <= CAP, "buffer holds {} > {CAP}", probe.len());
                if next % 7 == 0 {
                    threadlet::yield_now();
                }
                if next == 2_000 {
                    break;
                }
            }
            sender.join().unwrap();
            assert_eq!(next, 2_000);
        });
    }
}

// ---------------------------------------------------------------------------------------------
// unbounded
// ---------------------------------------------------------------------------------------------

/// On one worker, a send that waited would deadlock: nobody receives until the sends are done.
#[test]
fn unbounded_never_blocks_an_actor() {
    for rt in runtimes(1) {
        rt.block_on(|| {
            const N: usize = 50_000;
            let (tx, rx) = channel::unbounded::<usize>();
            assert_eq!(tx.capacity(), None);
            for i in 0..N {
                if i % 2 == 0 {
                    tx.send(i).unwrap();
                } else {
                    tx.try_send(i).unwrap();
                }
            }
            assert_eq!(rx.len(), N);
            // Also from another actor while we do not receive.
            let tx2 = tx.clone();
            threadlet::spawn(move || {
                for i in N..2 * N {
                    tx2.send(i).unwrap();
                }
            })
            .join()
            .unwrap();
            drop(tx);
            let got: Vec<usize> = rx.iter().collect();
            assert_eq!(got, (0..2 * N).collect::<Vec<_>>());
        });
    }
}

#[test]
fn unbounded_never_blocks_a_plain_thread() {
    let (tx, rx) = channel::unbounded::<usize>();
    for i in 0..50_000 {
        tx.send(i).unwrap();
    }
    drop(tx);
    assert_eq!(rx.iter().count(), 50_000);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
}

// ---------------------------------------------------------------------------------------------
// Disconnection
// ---------------------------------------------------------------------------------------------

fn recv_fails_after_senders_gone(cap: Option<usize>) {
    let (tx, rx) = match cap {
        Some(c) => channel::bounded::<u32>(c),
        None => channel::unbounded::<u32>(),
    };
    let tx2 = tx.clone();
    tx.send(1).unwrap();
    tx2.send(2).unwrap();
    drop(tx);
    assert_eq!(rx.recv(), Ok(1));
    drop(tx2);
    // The last sender is gone, but the buffer is drained first.
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(rx.recv(), Err(RecvError));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(rx.iter().count(), 0);
}

#[test]
fn recv_fails_after_all_senders_dropped_and_buffer_drained() {
    for rt in runtimes(1) {
        // Inside an actor and on a plain thread.
        rt.block_on(|| {
            recv_fails_after_senders_gone(Some(2));
            recv_fails_after_senders_gone(Some(8));
            recv_fails_after_senders_gone(None);
        });
        recv_fails_after_senders_gone(Some(2));
        recv_fails_after_senders_gone(None);
    }
}

/// Receivers parked on an empty channel (actors and a plain thread) all wake with `RecvError`
/// when the last sender goes.
fn parked_receivers_wake_on_disconnect(workers: usize, cap: usize) {
    for rt in runtimes(workers) {
        let (tx, rx) = channel::bounded::<u32>(cap);
        let parked = Arc::new(AtomicUsize::new(0));
        let actors: Vec<_> = (0..8)
            .map(|_| {
                let (rx, p) = (rx.clone(), parked.clone());
                rt.spawn(move || {
                    p.fetch_add(1, SeqCst);
                    rx.recv()
                })
            })
            .collect();
        let (rx2, p) = (rx.clone(), parked.clone());
        let plain = thread::spawn(move || {
            p.fetch_add(1, SeqCst);
            rx2.recv()
        });
        drop(rx);
        while parked.load(SeqCst) < 9 {
            thread::yield_now();
        }
        thread::sleep(Duration::from_millis(10));
        let tx2 = tx.clone();
        drop(tx);
        // One sender left: still nothing to receive. Then it goes.
        thread::sleep(Duration::from_millis(5));
        assert!(actors.iter().all(|h| !h.is_finished()));
        drop(tx2);
        for h in actors {
            assert_eq!(h.join().unwrap(), Err(RecvError));
        }
        assert_eq!(plain.join().unwrap(), Err(RecvError));
    }
}

#[test]
fn parked_receivers_wake_on_disconnect_rendezvous_one_worker() {
    parked_receivers_wake_on_disconnect(1, 0);
}

#[test]
fn parked_receivers_wake_on_disconnect_bounded_two_workers() {
    parked_receivers_wake_on_disconnect(2, 4);
}

#[test]
fn send_fails_with_value_back_after_all_receivers_dropped() {
    let drops = Arc::new(AtomicUsize::new(0));
    for cap in [Some(0), Some(1), Some(4), None] {
        let (tx, rx) = match cap {
            Some(c) => channel::bounded::<Counted>(c),
            None => channel::unbounded::<Counted>(),
        };
        let rx2 = rx.clone();
        drop(rx);
        // One receiver is left: a buffered channel still accepts.
        if cap != Some(0) {
            tx.send(Counted(1, drops.clone())).unwrap();
        }
        let before = drops.load(SeqCst);
        drop(rx2);
        // The buffered value was dropped with the last receiver.
        let expect_dropped = usize::from(cap != Some(0));
        assert_eq!(drops.load(SeqCst), before + expect_dropped);

        let SendError(back) = tx.send(Counted(2, drops.clone())).unwrap_err();
        assert_eq!(back.0, 2);
        let err = tx.send(Counted(3, drops.clone())).unwrap_err();
        assert_eq!(err.into_inner().0, 3);
        match tx.try_send(Counted(4, drops.clone())) {
            Err(TrySendError::Disconnected(v)) => assert_eq!(v.0, 4),
            other => panic!("expected Disconnected, got {:?}", other.map(|_| ())),
        }
    }
}

/// A sender *parked* in `send` when the last receiver drops gets its value back.
fn blocked_sender_gets_value_back_actor(workers: usize, cap: usize) {
    for rt in runtimes(workers) {
        rt.block_on(move || {
            let (tx, rx) = channel::bounded::<String>(cap);
            for i in 0..cap {
                tx.send(format!("buffered {i}")).unwrap();
            }
            let (ready_tx, ready_rx) = channel::unbounded::<()>();
            let senders: Vec<_> = (0..3)
                .map(|i| {
                    let (tx, ready_tx) = (tx.clone(), ready_tx.clone());
                    threadlet::spawn(move || {
                        ready_tx.send(()).unwrap();
                        tx.send(format!("blocked {i}"))
                    })
                })
                .collect();
            drop(tx);
            for _ in 0..3 {
                ready_rx.recv().unwrap();
            }
            // On one worker each sender has parked by now; on two, yield to give them time.
            for _ in 0..20 {
                threadlet::yield_now();
            }
            assert!(senders.iter().all(|h| !h.is_finished()));
            drop(rx);
            for (i, h) in senders.into_iter().enumerate() {
                let err = h.join().unwrap().unwrap_err();
                assert_eq!(err.into_inner(), format!("blocked {i}"));
            }
        });
    }
}

#[test]
fn blocked_actor_sender_gets_value_back_rendezvous_one_worker() {
    blocked_sender_gets_value_back_actor(1, 0);
}

#[test]
fn blocked_actor_sender_gets_value_back_rendezvous_two_workers() {
    blocked_sender_gets_value_back_actor(2, 0);
}

#[test]
fn blocked_actor_sender_gets_value_back_bounded_one_worker() {
    blocked_sender_gets_value_back_actor(1, 2);
}

#[test]
fn blocked_actor_sender_gets_value_back_bounded_two_workers() {
    blocked_sender_gets_value_back_actor(2, 2);
}

/// A plain thread parked in `send` when an actor drops the last receiver gets its value back.
#[test]
fn blocked_plain_thread_sender_gets_value_back() {
    for rt in runtimes(2) {
        for cap in [0, 1] {
            let (tx, rx) = channel::bounded::<Vec<u8>>(cap);
            for _ in 0..cap {
                tx.send(vec![0]).unwrap();
            }
            let entered = Arc::new(AtomicBool::new(false));
            let e = entered.clone();
            let sender = thread::spawn(move || {
                e.store(true, SeqCst);
                tx.send(vec![1, 2, 3])
            });
            while !entered.load(SeqCst) {
                thread::yield_now();
            }
            thread::sleep(Duration::from_millis(20));
            assert!(!sender.is_finished());
            // An actor holds the last receiver and drops it.
            rt.spawn(move || drop(rx)).join().unwrap();
            let err = sender.join().unwrap().unwrap_err();
            assert_eq!(err.into_inner(), vec![1, 2, 3]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// MPMC
// ---------------------------------------------------------------------------------------------

const PER_SENDER: u64 = 5_000;

/// Values are `sender << 32 | seq`.
fn check_exactly_once(received: Vec<Vec<u64>>, senders: u64) {
    let mut seen = vec![false; (senders * PER_SENDER) as usize];
    for got in &received {
        // One receiver sees each sender's values in the order they were sent.
        let mut last = vec![None::<u64>; senders as usize];
        for &v in got {
            let (s, seq) = (v >> 32, v & 0xFFFF_FFFF);
            assert!(s < senders && seq < PER_SENDER, "bogus value {v:#x}");
            if let Some(prev) = last[s as usize] {
                assert!(seq > prev, "sender {s}: {seq} after {prev}");
            }
            last[s as usize] = Some(seq);
            let idx = (s * PER_SENDER + seq) as usize;
            assert!(!seen[idx], "value {v:#x} received twice");
            seen[idx] = true;
        }
    }
    let missing = seen.iter().filter(|s| !**s).count();
    assert_eq!(missing, 0, "{missing} values never received");
}

fn make(cap: Option<usize>) -> (Sender<u64>, Receiver<u64>) {
    match cap {
        Some(c) => channel::bounded(c),
        None => channel::unbounded(),
    }
}

fn mpmc_actors(workers: usize, cap: Option<usize>) {
    const SENDERS: u64 = 4;
    const RECEIVERS: usize = 4;
    for rt in runtimes(workers) {
        let received = rt.block_on(move || {
            let (tx, rx) = make(cap);
            let receivers: Vec<_> = (0..RECEIVERS)
                .map(|_| {
                    let rx = rx.clone();
                    threadlet::spawn(move || rx.iter().collect::<Vec<u64>>())
                })
                .collect();
            drop(rx);
            let senders: Vec<_> = (0..SENDERS)
                .map(|s| {
                    let tx = tx.clone();
                    threadlet::spawn(move || {
                        for seq in 0..PER_SENDER {
                            tx.send(s << 32 | seq).unwrap();
                            if seq % 97 == 0 {
                                threadlet::yield_now();
                            }
                        }
                    })
                })
                .collect();
            drop(tx);
            for s in senders {
                s.join().unwrap();
            }
            receivers
                .into_iter()
                .map(|r| r.join().unwrap())
                .collect::<Vec<_>>()
        });
        check_exactly_once(received, SENDERS);
    }
}

#[test]
fn mpmc_rendezvous_one_worker() {
    mpmc_actors(1, Some(0));
}

#[test]
fn mpmc_rendezvous_two_workers() {
    mpmc_actors(2, Some(0));
}

#[test]
fn mpmc_bounded_one_worker() {
    mpmc_actors(1, Some(1));
}

#[test]
fn mpmc_bounded_two_workers() {
    mpmc_actors(2, Some(16));
}

#[test]
fn mpmc_unbounded_two_workers() {
    mpmc_actors(2, None);
}

/// Senders and receivers of both kinds on one channel: two actors and two plain threads each.
fn mpmc_mixed(workers: usize, cap: Option<usize>) {
    const SENDERS: u64 = 4;
    for rt in runtimes(workers) {
        let (tx, rx) = make(cap);
        let send_body = |s: u64, tx: Sender<u64>| {
            move || {
                for seq in 0..PER_SENDER {
                    tx.send(s << 32 | seq).unwrap();
                }
            }
        };
        let recv_body = |rx: Receiver<u64>| move || rx.iter().collect::<Vec<u64>>();

        let actor_rx: Vec<_> = (0..2).map(|_| rt.spawn(recv_body(rx.clone()))).collect();
        let thread_rx: Vec<_> = (0..2)
            .map(|_| thread::spawn(recv_body(rx.clone())))
            .collect();
        drop(rx);
        let actor_tx: Vec<_> = (0..2).map(|s| rt.spawn(send_body(s, tx.clone()))).collect();
        let thread_tx: Vec<_> = (2..4)
            .map(|s| thread::spawn(send_body(s, tx.clone())))
            .collect();
        drop(tx);
        for h in actor_tx {
            h.join().unwrap();
        }
        for h in thread_tx {
            h.join().unwrap();
        }
        let mut received: Vec<Vec<u64>> = actor_rx.into_iter().map(|h| h.join().unwrap()).collect();
        received.extend(thread_rx.into_iter().map(|h| h.join().unwrap()));
        check_exactly_once(received, SENDERS);
    }
}

#[test]
fn mpmc_mixed_actors_and_threads_rendezvous_one_worker() {
    mpmc_mixed(1, Some(0));
}

#[test]
fn mpmc_mixed_actors_and_threads_rendezvous_two_workers() {
    mpmc_mixed(2, Some(0));
}

#[test]
fn mpmc_mixed_actors_and_threads_bounded_two_workers() {
    mpmc_mixed(2, Some(3));
}

/// Values that cross a channel are neither leaked nor dropped twice, including those left in the
/// buffer when everything is dropped.
#[test]
fn values_are_dropped_exactly_once() {
    for rt in runtimes(2) {
        let drops = Arc::new(AtomicUsize::new(0));
        let d = drops.clone();
        rt.block_on(move || {
            let (tx, rx) = channel::bounded::<Counted>(8);
            let sender = threadlet::spawn(move || {
                for i in 0..1_000 {
                    tx.send(Counted(i, d.clone())).unwrap();
                }
                // Leave some behind in the buffer.
            });
            let mut sum = 0;
            for _ in 0..992 {
                sum += rx.recv().unwrap().0;
            }
            sender.join().unwrap();
            assert_eq!(rx.len(), 8);
            assert_eq!(sum, (0..992).sum::<u64>());
        });
        assert_eq!(drops.load(SeqCst), 1_000);
    }
}

/// Make sure `RuntimeExt` is what spawns actors from outside in these tests.
#[test]
fn spawn_actor_from_outside_feeds_a_channel() {
    for rt in runtimes(2) {
        let (tx, rx) = channel::bounded::<u32>(0);
        let (addr, h) = rt.spawn_actor(move |mb: threadlet::Mailbox<u32>| {
            for v in &mb {
                tx.send(v * 2).unwrap();
            }
        });
        for i in 0..10 {
            addr.send(i).unwrap();
            assert_eq!(rx.recv(), Ok(i * 2));
        }
        drop(addr);
        h.join().unwrap();
        assert_eq!(rx.recv(), Err(RecvError));
    }
}

/// `close` from either end: a sender parked on a full channel gets its value back at once,
/// a parked receiver wakes with `Disconnected` once the buffer is empty, and what was accepted
/// before is still received.
#[test]
fn close_hands_back_parked_sends_and_ends_parked_receives() {
    let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    // A sender parked on a full bounded channel, closed by the receiver.
    let (tx, rx) = channel::bounded::<u32>(1);
    tx.send(1).unwrap();
    let parked = rt.spawn(move || tx.send(2));
    std::thread::sleep(std::time::Duration::from_millis(20)); // let it park
    rx.close();
    assert_eq!(parked.join().unwrap(), Err(channel::SendError(2)));
    assert_eq!((rx.recv(), rx.recv()), (Ok(1), Err(channel::RecvError)));
    assert!(rx.is_closed());

    // Receivers parked on an empty channel, closed by a sender.
    let (tx, rx) = channel::unbounded::<u32>();
    let receivers: Vec<_> = (0..3)
        .map(|_| {
            let rx = rx.clone();
            rt.spawn(move || rx.recv())
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(20));
    tx.close();
    tx.close(); // idempotent
    for r in receivers {
        assert_eq!(r.join().unwrap(), Err(channel::RecvError));
    }
    assert!(tx.is_disconnected());

    // Rendezvous: a parked sender's value comes back.
    let (tx, rx) = channel::bounded::<&str>(0);
    let parked = rt.spawn(move || tx.send("never taken"));
    std::thread::sleep(std::time::Duration::from_millis(20));
    rx.close();
    assert_eq!(
        parked.join().unwrap(),
        Err(channel::SendError("never taken"))
    );
}

/// Many senders racing a close: every value is either received or handed back, once.
#[test]
fn close_racing_sends_conserves_every_value() {
    const SENDERS: u64 = 4;
    const EACH: u64 = 5_000;
    let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    let (tx, rx) = channel::bounded::<u64>(8);
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            let tx = tx.clone();
            rt.spawn(move || {
                let mut back = 0u64;
                for i in 0..EACH {
                    if let Err(channel::SendError(v)) = tx.send(s * EACH + i) {
                        back += v;
                    }
                }
                back
            })
        })
        .collect();
    drop(tx);
    let receiver = rt.spawn(move || {
        let mut got = 0u64;
        let mut n = 0u64;
        while let Ok(v) = rx.recv() {
            got += v;
            n += 1;
            if n == 1_000 {
                rx.close(); // the rest of what was accepted is still drained
            }
        }
        got
    });
    let back: u64 = senders.into_iter().map(|h| h.join().unwrap()).sum();
    let got = receiver.join().unwrap();
    let all = SENDERS * EACH;
    assert_eq!(
        got + back,
        all * (all - 1) / 2,
        "every value received or handed back"
    );
}

/// A value handed to a parked receiver that is killed before it runs again comes back to the
/// channel (for the next receiver); until it has, the channel does not say it is drained,
/// though its last sender is gone or it was closed. It used to: a `recv` returned `RecvError`
/// and the value reappeared after it, for a consumer that had stopped there to drop
/// unreceived. Every capacity, both ways of disconnecting, every scheduler.
#[test]
fn a_value_handed_to_a_killed_receiver_comes_back_before_the_channel_says_it_is_drained() {
    for scheduler in [
        Scheduler::WorkStealing,
        Scheduler::GlobalQueue,
        Scheduler::Gil,
    ] {
        for cap in [Some(0), Some(1), None] {
            for close in [false, true] {
                let what = format!("{scheduler:?}, capacity {cap:?}, close {close}");
                let w = what.clone();
                let got =
                    within_watchdog(&w, move || handed_value_after_a_kill(scheduler, cap, close));
                assert_eq!(got, (Ok(7), Err(RecvError)), "{what}");
            }
        }
    }
}

/// One round of the test above: what the other receiver gets, then what it gets next.
fn handed_value_after_a_kill(
    scheduler: Scheduler,
    cap: Option<usize>,
    close: bool,
) -> (Result<u32, RecvError>, Result<u32, RecvError>) {
    // One worker, no time slices: the holder below keeps it until released.
    let rt = Runtime::builder()
        .workers(1)
        .time_slice(Duration::ZERO)
        .scheduler(scheduler)
        .build()
        .unwrap();
    let (tx, rx) = match cap {
        Some(n) => channel::bounded::<u32>(n),
        None => channel::unbounded(),
    };
    let theirs = rx.clone();
    let victim = rt.spawn(move || theirs.recv());
    until("the victim parks in recv", || {
        matches!(
            rt.dump().actor(victim.id()).and_then(|a| a.waiting_on()),
            Some(threadlet::Wait::ChannelRecv { .. })
        )
    });
    // Holds the only worker (no safe point), so that the victim does not run again.
    let (release, holding) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (r, h) = (release.clone(), holding.clone());
    let holder = rt.spawn(move || {
        h.store(true, SeqCst);
        while !r.load(SeqCst) {
            std::hint::spin_loop();
        }
    });
    until("the holder runs", || holding.load(SeqCst));
    tx.send(7).unwrap(); // handed to the parked victim
    assert!(victim.abort());
    if close {
        rx.close();
    } else {
        drop(tx);
    }
    // The victim's value is in hand: a receive now waits for it (here, on another thread)
    // rather than report the channel drained.
    let consumer = thread::spawn(move || (rx.recv(), rx.recv()));
    thread::sleep(Duration::from_millis(20));
    release.store(true, SeqCst);
    holder.join().unwrap();
    assert!(victim.join().unwrap_err().is_killed());
    consumer.join().unwrap()
}

/// `Sender::send_timeout` on bounded and rendezvous channels with receivers that take values
/// slowly: every value is either received once (its send said `Ok`, however late a receiver
/// took it) or handed back by a timeout, never both, under every scheduler; senders are
/// actors and plain threads.
#[test]
fn send_timeout_either_delivers_or_hands_back() {
    for rt in runtimes_with(2, None) {
        within_watchdog("send_timeout", move || {
            for cap in [0, 1, 2] {
                let scheduler = rt.scheduler();
                let (tx, rx) = channel::bounded::<u64>(cap);
                let receivers: Vec<_> = (0..2)
                    .map(|_| {
                        let rx = rx.clone();
                        rt.spawn(move || {
                            let mut got = Vec::new();
                            while let Ok(v) = rx.recv() {
                                got.push(v);
                                if v % 7 == 0 {
                                    threadlet::sleep(Duration::from_micros(300));
                                }
                            }
                            got
                        })
                    })
                    .collect();
                drop(rx);
                let send_all = |tx: channel::Sender<u64>, base: u64| {
                    let mut sent = Vec::new();
                    for i in 0..300 {
                        let v = base + i;
                        let timeout = Duration::from_micros(50 * (i % 5));
                        match tx.send_timeout(v, timeout) {
                            Ok(()) => sent.push(v),
                            Err(channel::SendTimeoutError::Timeout(back)) => assert_eq!(back, v),
                            Err(e) => panic!("disconnected while receivers live: {e:?}"),
                        }
                    }
                    sent
                };
                let from_actor = {
                    let tx = tx.clone();
                    rt.spawn(move || send_all(tx, 0))
                };
                let from_thread = {
                    let tx = tx.clone();
                    std::thread::spawn(move || send_all(tx, 1_000))
                };
                drop(tx);
                let mut sent = from_actor.join().unwrap();
                sent.extend(from_thread.join().unwrap());
                let mut got: Vec<u64> = receivers
                    .into_iter()
                    .flat_map(|r| r.join().unwrap())
                    .collect();
                sent.sort_unstable();
                got.sort_unstable();
                assert_eq!(got, sent, "{scheduler:?}, capacity {cap}");
            }
        });
    }
}
