//! Bounded mailboxes: `ActorBuilder::mailbox_capacity`, `Addr::try_send`, `Addr::send_timeout`,
//! and a send that waits for room. The queue never holds more than its capacity, and every
//! message is delivered or handed back.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{within, within_watchdog};
use threadlet::channel::{SendError, SendTimeoutError, TrySendError};
use threadlet::{Actor, ActorBuilder, Context, Mailbox, Runtime};

/// A handler actor that keeps what it is sent, in order.
struct Keep(Vec<u32>);

impl Actor for Keep {
    type Msg = u32;
    fn handle(&mut self, n: u32, _: &mut Context<Self>) {
        self.0.push(n);
    }
}

/// Four senders (three actors and a plain thread) flood a mailbox of capacity 8 whose actor
/// reads slowly: the queue never holds more than 8, seen from inside and from outside, and
/// every message arrives once.
#[test]
fn a_bounded_mailbox_never_holds_more_than_its_capacity_under_four_flooding_senders() {
    const CAP: usize = 8;
    const PER_SENDER: u64 = 50_000;
    // 200,000 blocking hand-offs: about 1 s alone, up to 29 s (of the usual 30) beside CPU
    // hogs on 2 cores, where each wake waits for the kernel to run the woken thread. A limit
    // of its own, which still catches a hang.
    within(Duration::from_secs(120), "bounded flood", || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (addr, consumer) = ActorBuilder::new()
            .mailbox_capacity(CAP)
            .spawn_actor_on(&rt, |mb: Mailbox<(usize, u64)>| {
                let mut most = 0;
                let mut sums = [0u64; 4];
                let mut count = 0u64;
                while let Some((from, v)) = mb.recv() {
                    most = most.max(mb.len());
                    sums[from] += v;
                    count += 1;
                    if count.is_multiple_of(10_000) {
                        threadlet::sleep(Duration::from_millis(2)); // let the senders pile up
                    }
                }
                (most, sums, count)
            })
            .unwrap();
        let peak_outside = Arc::new(AtomicUsize::new(0));
        let mut senders = Vec::new();
        for from in 0..3 {
            let addr = addr.clone();
            let peak = peak_outside.clone();
            senders.push(rt.spawn(move || {
                for v in 0..PER_SENDER {
                    addr.send((from, v)).unwrap();
                    peak.fetch_max(addr.len(), Ordering::Relaxed);
                }
            }));
        }
        let plain = {
            let addr = addr.clone();
            let peak = peak_outside.clone();
            std::thread::spawn(move || {
                for v in 0..PER_SENDER {
                    addr.send((3, v)).unwrap();
                    peak.fetch_max(addr.len(), Ordering::Relaxed);
                }
            })
        };
        drop(addr);
        for s in senders {
            s.join().unwrap();
        }
        plain.join().unwrap();
        let (most, sums, count) = consumer.join().unwrap();
        assert_eq!(count, 4 * PER_SENDER);
        assert_eq!(sums, [PER_SENDER * (PER_SENDER - 1) / 2; 4]);
        assert!(most <= CAP, "the actor saw {most} queued");
        let peak = peak_outside.load(Ordering::Relaxed);
        assert!(peak <= CAP, "senders saw {peak} queued");
    });
}

#[test]
fn try_send_and_send_timeout_hand_the_message_back_when_there_is_no_room() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (go_tx, go_rx) = threadlet::channel::bounded::<()>(1);
    let (addr, h) = ActorBuilder::new()
        .mailbox_capacity(2)
        .spawn_actor_on(&rt, move |mb: Mailbox<u32>| {
            go_rx.recv().unwrap(); // read nothing until told
            mb.iter().collect::<Vec<_>>()
        })
        .unwrap();
    assert_eq!(addr.capacity(), Some(2));
    addr.try_send(1).unwrap();
    addr.send(2).unwrap();
    assert_eq!(addr.try_send(3), Err(TrySendError::Full(3)));
    assert_eq!(
        addr.send_timeout(4, Duration::from_millis(10)),
        Err(SendTimeoutError::Timeout(4))
    );
    assert_eq!(addr.len(), 2);
    go_tx.send(()).unwrap();
    // Room comes as the actor reads: this waits, then goes through.
    addr.send_timeout(5, Duration::from_secs(30)).unwrap();
    drop(addr);
    // What timed out or was refused was never delivered later.
    assert_eq!(h.join().unwrap(), [1, 2, 5]);
}

#[test]
fn capacity_zero_is_a_rendezvous() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (go_tx, go_rx) = threadlet::channel::bounded::<()>(1);
    let (addr, h) = ActorBuilder::new()
        .mailbox_capacity(0)
        .spawn_actor_on(&rt, move |mb: Mailbox<usize>| {
            go_rx.recv().unwrap();
            let mut got = Vec::new();
            while let Some(n) = mb.recv() {
                threadlet::sleep(Duration::from_millis(1));
                got.push(n);
            }
            got
        })
        .unwrap();
    // No queue at all: while the actor is not receiving, a send that cannot wait is refused,
    // and a send waits with its message until the actor takes it.
    assert_eq!(addr.try_send(9), Err(TrySendError::Full(9)));
    go_tx.send(()).unwrap();
    for n in 0..20 {
        addr.send(n).unwrap();
        assert!(addr.is_empty()); // taken, not queued
    }
    drop(addr);
    assert_eq!(h.join().unwrap(), (0..20).collect::<Vec<_>>());
}

#[test]
fn closing_hands_waiting_senders_their_messages_back_and_the_owner_drains_the_rest() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (close_tx, close_rx) = threadlet::channel::bounded::<()>(1);
    let (addr, owner) = ActorBuilder::new()
        .mailbox_capacity(1)
        .spawn_actor_on(&rt, move |mb: Mailbox<u32>| {
            close_rx.recv().unwrap();
            mb.close();
            mb.iter().collect::<Vec<_>>() // drains what was accepted, then ends
        })
        .unwrap();
    addr.send(1).unwrap(); // accepted: fills the mailbox
    let waiting: Vec<_> = (2..5)
        .map(|n| {
            let addr = addr.clone();
            rt.spawn(move || addr.send(n))
        })
        .collect();
    while rt.stats().workers.iter().map(|w| w.actors_run).sum::<u64>() < 4 {
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(20)); // the three senders wait for room
    close_tx.send(()).unwrap();
    let mut back: Vec<u32> = waiting
        .into_iter()
        .map(|h| h.join().unwrap().unwrap_err().into_inner())
        .collect();
    back.sort_unstable();
    assert_eq!(back, [2, 3, 4]);
    assert_eq!(owner.join().unwrap(), [1]);
    assert_eq!(addr.send(5), Err(SendError(5)));
}

/// A message that counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn shutdown_unwinds_a_sender_waiting_for_room_and_drops_its_message_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, owner) = ActorBuilder::new()
        .mailbox_capacity(1)
        .spawn_actor_on(&rt, |mb: Mailbox<Counted>| {
            // Never reads: sleeps until shutdown unwinds it.
            threadlet::sleep(Duration::from_secs(3600));
            drop(mb);
        })
        .unwrap();
    addr.send(Counted(drops.clone())).unwrap();
    let d = drops.clone();
    let a = addr.clone();
    let sender = rt.spawn(move || a.send(Counted(d)).is_ok());
    std::thread::sleep(Duration::from_millis(20));
    drop(rt); // must not hang
    assert!(sender.join().is_err_and(|e| e.is_cancelled()));
    assert!(owner.join().is_err_and(|e| e.is_cancelled()));
    // The accepted message dropped with the mailbox, the waiting one with its sender.
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    drop(addr);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

struct Slow {
    seen: u64,
    most: usize,
}

impl Actor for Slow {
    type Msg = u64;

    fn handle(&mut self, n: u64, ctx: &mut Context<Self>) {
        self.seen += n;
        self.most = self.most.max(ctx.addr().len());
        if n.is_multiple_of(1000) {
            threadlet::yield_now();
        }
    }
}

#[test]
fn handler_actors_get_bounded_mailboxes_too() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (addr, h) = ActorBuilder::new()
        .mailbox_capacity(16)
        .start_on(&rt, Slow { seen: 0, most: 0 })
        .unwrap();
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let addr = addr.clone();
            rt.spawn(move || {
                for n in 0..20_000u64 {
                    addr.send(n).unwrap();
                }
            })
        })
        .collect();
    drop(addr);
    for s in senders {
        s.join().unwrap();
    }
    let slow = within_watchdog("bounded handler", move || h.join().unwrap());
    assert_eq!(slow.seen, 4 * (20_000 * 19_999 / 2));
    assert!(slow.most <= 16, "{} queued", slow.most);
}

#[test]
fn a_select_on_a_bounded_mailbox_lets_waiting_senders_in() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (addr, h) = ActorBuilder::new()
        .mailbox_capacity(1)
        .spawn_actor_on(&rt, |mb: Mailbox<u32>| {
            let (_keep, never) = threadlet::channel::unbounded::<u32>();
            let mut sum = 0;
            loop {
                threadlet::select! {
                    recv(mb) -> m => match m {
                        Some(n) => sum += n,
                        None => return sum,
                    },
                    recv(never) -> _ => unreachable!(),
                }
            }
        })
        .unwrap();
    let senders: Vec<_> = (0..3)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                for n in 0..1000 {
                    addr.send(n).unwrap();
                }
            })
        })
        .collect();
    drop(addr);
    for s in senders {
        s.join().unwrap();
    }
    assert_eq!(
        within_watchdog("select on bounded", move || h.join().unwrap()),
        3 * 999 * 1000 / 2
    );
}

/// A send that cannot wait meets a receiver that waits, as on an unbuffered Go channel:
/// `try_send` to a capacity-0 mailbox succeeds while its owner waits for a message (a process
/// actor in `recv`, a handler actor between messages), and the owner gets the message.
#[test]
fn try_send_is_taken_by_an_owner_waiting_on_a_capacity_zero_mailbox() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (process, p) = ActorBuilder::new()
        .mailbox_capacity(0)
        .spawn_actor_on(&rt, |mb: Mailbox<u32>| mb.iter().collect::<Vec<_>>())
        .unwrap();
    let (handler, hh) = ActorBuilder::new()
        .mailbox_capacity(0)
        .start_on(&rt, Keep(Vec::new()))
        .unwrap();
    let got = within_watchdog("try_send at a rendezvous", move || {
        for n in 0..10 {
            // Refused only while the owner is not (yet, or again) waiting.
            while let Err(TrySendError::Full(_)) = process.try_send(n) {
                std::thread::yield_now();
            }
            while let Err(TrySendError::Full(_)) = handler.try_send(n) {
                std::thread::yield_now();
            }
        }
        drop((process, handler));
        (p.join().unwrap(), hh.join().unwrap().0)
    });
    assert_eq!(got, ((0..10).collect(), (0..10).collect()));
}

/// But not by an owner that waits in a select: the select has not chosen the mailbox, and
/// may fire another branch, which would leave a message accepted by `try_send` in the queue,
/// never received, while its sender took it for received. So `try_send` is refused there and
/// the message handed back; a `send`, which waits in line, meets the select.
#[test]
fn try_send_is_refused_by_an_owner_waiting_in_a_select_on_a_capacity_zero_mailbox() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (stop, stopped) = threadlet::channel::bounded::<()>(1);
    let (addr, h) = ActorBuilder::new()
        .mailbox_capacity(0)
        .spawn_actor_on(&rt, move |mb: Mailbox<u32>| {
            let mut got = Vec::new();
            loop {
                threadlet::select! {
                    recv(mb) -> m => got.extend(m),
                    recv(stopped) -> _ => return got,
                }
            }
        })
        .unwrap();
    let got = within_watchdog("try_send at a select", move || {
        for n in 0..20 {
            // Until the actor waits in its select (it may still be starting, or back from
            // taking the last message).
            while rt.dump().actor(h.id()).and_then(|a| a.waiting_on())
                != Some(threadlet::Wait::Select { branches: 2 })
            {
                std::thread::yield_now();
            }
            assert_eq!(addr.try_send(n), Err(TrySendError::Full(n)));
            addr.send(n).unwrap();
        }
        stop.send(()).unwrap();
        h.join().unwrap()
    });
    assert_eq!(got, (0..20).collect::<Vec<_>>());
}

/// A `send_timeout` with no time to wait is a `try_send`: it meets an owner waiting in a
/// receive on a capacity-0 mailbox (before, it always timed out there).
#[test]
fn a_send_timeout_of_zero_meets_an_owner_waiting_on_a_capacity_zero_mailbox() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, h) = ActorBuilder::new()
        .mailbox_capacity(0)
        .spawn_actor_on(&rt, |mb: Mailbox<u32>| mb.iter().collect::<Vec<_>>())
        .unwrap();
    let got = within_watchdog("send_timeout(0) at a rendezvous", move || {
        for n in 0..10 {
            // Refused only while the owner is not (yet, or again) waiting.
            while let Err(SendTimeoutError::Timeout(_)) = addr.send_timeout(n, Duration::ZERO) {
                std::thread::yield_now();
            }
        }
        drop(addr);
        h.join().unwrap()
    });
    assert_eq!(got, (0..10).collect::<Vec<_>>());
}

/// A `send_timeout` with time to wait meets an owner waiting in a receive on a capacity-0
/// mailbox at once, as one with none does: before, only a timeout already over took that
/// path, and a timeout of a few microseconds waited in line for the owner (here an idle
/// handler actor) to be woken and take the message, and often timed out first (a longer
/// timeout, a worse result).
#[test]
fn a_short_send_timeout_meets_an_owner_waiting_on_a_capacity_zero_mailbox() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, h) = ActorBuilder::new()
        .mailbox_capacity(0)
        .start_on(&rt, Keep(Vec::new()))
        .unwrap();
    let id = h.id();
    let got = within_watchdog("send_timeout(20 us) at a rendezvous", move || {
        for n in 0..200 {
            // Until the owner waits for a message (starting, or back from the last one).
            while rt.dump().actor(id).and_then(|a| a.waiting_on()) != Some(threadlet::Wait::Message)
            {
                std::thread::yield_now();
            }
            let sent = addr.send_timeout(n, Duration::from_micros(20));
            assert_eq!(sent, Ok(()), "message {n}, its owner waiting");
        }
        drop(addr);
        h.join().unwrap().0
    });
    assert_eq!(got, (0..200).collect::<Vec<_>>());
}

/// A handler actor takes its next message only once `handle` returns, so a send from inside
/// `handle` (or `started`) to its own full mailbox could never find room: it hands the message
/// back at once (`send`, and `send_timeout` without waiting out its timeout) instead of hanging
/// the actor: here, with capacity 1, once its first self-send is in.
#[test]
fn a_handler_sending_to_its_own_full_mailbox_gets_the_message_back_instead_of_hanging() {
    within_watchdog("a handler's send to its own full mailbox", || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        struct Selfish {
            ready: Option<std::sync::mpsc::Sender<()>>,
            queued: Vec<u32>,
            handed_back: Vec<u32>,
            timed_out: Vec<u32>,
            got: Vec<u32>,
        }
        impl Actor for Selfish {
            type Msg = u32;
            fn started(&mut self, ctx: &mut Context<Self>) {
                let me = ctx.addr();
                if me.send(10).is_ok() {
                    self.queued.push(10);
                }
                if let Err(SendError(m)) = me.send(11) {
                    self.handed_back.push(m);
                }
                self.ready.take().unwrap().send(()).unwrap();
            }
            fn handle(&mut self, n: u32, ctx: &mut Context<Self>) {
                self.got.push(n);
                if n == 0 {
                    let me = ctx.addr();
                    // The queue is empty while 0 is handled: room for one.
                    if me.send(1).is_ok() {
                        self.queued.push(1);
                    }
                    if let Err(SendError(m)) = me.send(2) {
                        self.handed_back.push(m);
                    }
                    // With a timeout, and with one too long for an `Instant` (no deadline).
                    for (m, timeout) in [(3, Duration::from_secs(3600)), (4, Duration::MAX)] {
                        match me.send_timeout(m, timeout) {
                            Err(SendTimeoutError::Timeout(m)) => self.timed_out.push(m),
                            other => panic!("{other:?}"),
                        }
                    }
                    ctx.stop();
                }
            }
        }
        let (ready, is_ready) = std::sync::mpsc::channel();
        let selfish = Selfish {
            ready: Some(ready),
            queued: Vec::new(),
            handed_back: Vec::new(),
            timed_out: Vec::new(),
            got: Vec::new(),
        };
        let (addr, h) = ActorBuilder::new()
            .mailbox_capacity(1)
            .start_on(&rt, selfish)
            .unwrap();
        is_ready.recv().unwrap();
        // Sent from outside, this one waits for the room `started`'s first self-send took.
        addr.send(0).unwrap();
        drop(addr);
        let s = h.join().unwrap();
        assert_eq!(s.queued, [10, 1]);
        assert_eq!(s.handed_back, [11, 2]);
        assert_eq!(s.timed_out, [3, 4]);
        // Stopped after 0: the queued 1 is dropped with the mailbox.
        assert_eq!(s.got, [10, 0]);
    });
}
