//! `select!` and `Select`: fairness, conservation under cancelled selects, every kind of source,
//! timeouts, plain threads, handler actors, and shutdown while parked in a select.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{within, within_watchdog};
use threadlet::channel::{self, RecvError, SendError};
use threadlet::select::Select;
use threadlet::{Actor, Context, JoinError, Mailbox, Runtime, RuntimeExt};

#[test]
fn two_always_ready_branches_are_both_chosen_fairly() {
    const ROUNDS: usize = 10_000;
    let (tx_a, rx_a) = channel::unbounded::<()>();
    let (tx_b, rx_b) = channel::unbounded::<()>();
    // Both stay ready: every round puts back what it took.
    tx_a.send(()).unwrap();
    tx_b.send(()).unwrap();
    let (mut a, mut b) = (0, 0);
    for _ in 0..ROUNDS {
        threadlet::select! {
            recv(rx_a) -> m => { m.unwrap(); a += 1; tx_a.send(()).unwrap(); },
            recv(rx_b) -> m => { m.unwrap(); b += 1; tx_b.send(()).unwrap(); },
        }
    }
    assert_eq!(a + b, ROUNDS);
    assert!(
        a * 10 >= ROUNDS * 4,
        "branch a chosen {a} of {ROUNDS} times"
    );
    assert!(
        b * 10 >= ROUNDS * 4,
        "branch b chosen {b} of {ROUNDS} times"
    );
    // Nothing was taken by a branch that did not fire: each channel still holds its one value.
    assert_eq!((rx_a.len(), rx_b.len()), (1, 1));
}

#[test]
fn a_mailbox_and_a_channel_are_chosen_fairly_inside_an_actor() {
    const ROUNDS: usize = 10_000;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (tx, rx) = channel::unbounded::<u8>();
    tx.send(2).unwrap();
    let (_addr, h) = rt.spawn_actor(move |mb: Mailbox<u8>| {
        let me = mb.addr();
        // Its own first message, sent before the first look: a send from outside could come
        // after many rounds in which only the channel was ready (it did, once, on a loaded
        // machine).
        me.send(1).unwrap();
        let (mut from_mb, mut from_rx) = (0, 0);
        for _ in 0..ROUNDS {
            threadlet::select! {
                recv(mb) -> m => { from_mb += 1; me.send(m.unwrap()).unwrap(); },
                recv(rx) -> m => { from_rx += 1; tx.send(m.unwrap()).unwrap(); },
            }
        }
        (from_mb, from_rx)
    });
    let (from_mb, from_rx) = within_watchdog("fair select in an actor", move || h.join().unwrap());
    // Each source holds one message at every look: both are always ready.
    assert!(from_mb * 10 >= ROUNDS * 4, "mailbox chosen {from_mb} times");
    assert!(from_rx * 10 >= ROUNDS * 4, "channel chosen {from_rx} times");
}

/// 1M messages from three sources (a mailbox, a bounded and an unbounded channel), received
/// by an actor whose selects are again and again cancelled by a timeout or won by another
/// branch; every message must arrive exactly once. (The senders stay alive until the consumer
/// is done: a closed source is always ready, so selecting on it again would spin.)
#[test]
fn no_message_is_lost_when_selects_are_cancelled_by_other_branches_or_timeouts() {
    const PER_SOURCE: u64 = 333_334;
    // A million messages take about 20 s of the watchdog's 30 under AddressSanitizer on 2
    // cores, and up to 75 s in debug beside CPU hogs: a limit of its own, still finite for a
    // hang.
    within(Duration::from_secs(240), "select conservation", || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (tx_b, rx_b) = channel::bounded::<u64>(8);
        let (tx_u, rx_u) = channel::unbounded::<u64>();
        let timeouts = Arc::new(AtomicU64::new(0));
        let t = timeouts.clone();
        let (addr, consumer) = rt.spawn_actor(move |mb: Mailbox<u64>| {
            let mut sums = [0u64; 3];
            let mut counts = [0u64; 3];
            while counts.iter().sum::<u64>() < 3 * PER_SOURCE {
                let (i, v) = threadlet::select! {
                    recv(mb) -> m => (0, m.expect("the test keeps an address")),
                    recv(rx_b) -> m => (1, m.expect("the test keeps a sender")),
                    recv(rx_u) -> m => (2, m.expect("the test keeps a sender")),
                    default(Duration::from_micros(50)) => {
                        t.fetch_add(1, Ordering::Relaxed);
                        continue;
                    },
                };
                sums[i] += v;
                counts[i] += 1;
            }
            (sums, counts)
        });
        let keep = (addr.clone(), tx_b.clone(), tx_u.clone());
        let a = rt.spawn(move || {
            for i in 0..PER_SOURCE {
                addr.send(i).unwrap();
                if i % 2048 == 0 {
                    threadlet::sleep(Duration::from_millis(1)); // let timeouts happen
                }
            }
        });
        let b = rt.spawn(move || {
            for i in 0..PER_SOURCE {
                tx_b.send(i).unwrap();
                if i % 2048 == 0 {
                    threadlet::sleep(Duration::from_millis(1));
                }
            }
        });
        // A plain thread for the third source.
        let c = std::thread::spawn(move || {
            for i in 0..PER_SOURCE {
                tx_u.send(i).unwrap();
                if i % 2048 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        });
        a.join().unwrap();
        b.join().unwrap();
        c.join().unwrap();
        let (sums, counts) = consumer.join().unwrap();
        drop(keep);
        let want = PER_SOURCE * (PER_SOURCE - 1) / 2;
        assert_eq!(counts, [PER_SOURCE; 3]);
        assert_eq!(sums, [want; 3]);
        eprintln!(
            "3 x {PER_SOURCE} messages, {} selects timed out",
            timeouts.load(Ordering::Relaxed)
        );
    });
}

#[test]
fn default_runs_at_once_or_after_the_timeout() {
    let (tx, rx) = channel::unbounded::<u8>();
    let got = threadlet::select! {
        recv(rx) -> m => m.ok(),
        default => None,
    };
    assert_eq!(got, None);
    tx.send(3).unwrap();
    let got = threadlet::select! {
        recv(rx) -> m => m.ok(),
        default => None,
    };
    assert_eq!(got, Some(3));

    let rt = Runtime::builder().workers(1).build().unwrap();
    let waited = rt.block_on(move || {
        let start = Instant::now();
        let timed_out = threadlet::select! {
            recv(rx) -> _ => false,
            default(Duration::from_millis(30)) => true,
        };
        assert!(timed_out);
        start.elapsed()
    });
    assert!(waited >= Duration::from_millis(30), "{waited:?}");
    drop(tx);
}

#[test]
fn join_handles_and_oneshots_are_sources() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    rt.block_on(|| {
        let slow = threadlet::spawn(|| {
            threadlet::sleep(Duration::from_secs(30));
            "slow"
        });
        let quick = threadlet::spawn(|| {
            threadlet::sleep(Duration::from_millis(5));
            "quick"
        });
        let (reply_tx, reply_rx) = channel::oneshot::<u32>();
        let first = threadlet::select! {
            recv(slow) -> r => r.unwrap(),
            recv(quick) -> r => r.unwrap(),
        };
        assert_eq!(first, "quick");
        assert!(quick.is_finished());
        threadlet::spawn(move || reply_tx.send(9).unwrap());
        let got = threadlet::select! {
            recv(slow) -> _ => unreachable!("still sleeping"),
            recv(reply_rx) -> r => r,
        };
        assert_eq!(got, Ok(9));

        let panics = threadlet::spawn(|| -> u8 { panic!("expected by the test") });
        let r = threadlet::select! { recv(panics) -> r => r };
        assert!(r.as_ref().is_err_and(JoinError::is_panic));
    });
}

#[test]
#[should_panic(expected = "already took")]
fn joining_a_handle_whose_result_a_select_took_panics_clearly() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let h = rt.spawn(|| 1);
    let r = threadlet::select! { recv(h) -> r => r };
    assert_eq!(r.unwrap(), 1);
    let _ = h.join();
}

#[test]
fn send_branches_fire_when_there_is_room_and_report_disconnection() {
    let (tx, rx) = channel::bounded::<u32>(1);
    tx.send(0).unwrap(); // full
    let (other_tx, other_rx) = channel::unbounded::<u32>();
    other_tx.send(5).unwrap();
    // The send cannot go; the receive fires, and the unsent value is dropped, never sent.
    let fired = threadlet::select! {
        send(tx, 1) -> _ => "send",
        recv(other_rx) -> _ => "recv",
    };
    assert_eq!(fired, "recv");
    assert_eq!(rx.try_recv(), Ok(0));
    assert!(rx.try_recv().is_err());
    // Room now: the send fires.
    let r = threadlet::select! {
        send(tx, 2) -> r => r,
        default => panic!("there is room"),
    };
    assert_eq!(r, Ok(()));
    assert_eq!(rx.try_recv(), Ok(2));
    drop(rx);
    let r = threadlet::select! { send(tx, 3) -> r => r };
    assert_eq!(r, Err(SendError(3)));
}

#[test]
fn a_blocked_send_branch_wakes_when_a_receiver_makes_room() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (tx, rx) = channel::bounded::<u32>(1);
    let (_never_tx, never_rx) = channel::unbounded::<u32>();
    let h = rt.spawn(move || {
        let mut sent = 0;
        for i in 0..1000 {
            threadlet::select! {
                send(tx, i) -> r => { r.unwrap(); sent += 1; },
                recv(never_rx) -> _ => unreachable!(),
            }
        }
        sent
    });
    let got: Vec<u32> = (0..1000).map(|_| rx.recv().unwrap()).collect();
    assert_eq!(got, (0..1000).collect::<Vec<_>>());
    assert_eq!(h.join().unwrap(), 1000);
}

#[test]
fn a_select_with_a_rendezvous_branch_meets_a_plain_receive_and_send() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (tx, rx) = channel::bounded::<u32>(0);
    let (tx2, rx2) = channel::bounded::<u32>(0);
    let (_keep, never) = channel::unbounded::<u32>();
    let sender = rt.spawn(move || {
        for i in 0..200 {
            threadlet::select! {
                send(tx, i) -> r => r.unwrap(),
                recv(never) -> _ => unreachable!(),
            }
        }
    });
    let receiver = rt.spawn(move || {
        let mut sum = 0;
        for _ in 0..200 {
            threadlet::select! {
                recv(rx2) -> v => sum += v.unwrap(),
                default(Duration::from_secs(30)) => panic!("no sender came"),
            }
        }
        sum
    });
    for _ in 0..200 {
        tx2.send(rx.recv().unwrap()).unwrap();
    }
    sender.join().unwrap();
    assert_eq!(receiver.join().unwrap(), (0..200).sum::<u32>());
}

#[test]
fn closed_sources_fire_with_their_closed_result() {
    let (tx, rx) = channel::unbounded::<u8>();
    drop(tx);
    let r = threadlet::select! { recv(rx) -> r => r };
    assert_eq!(r, Err(RecvError));

    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u8>| {
        let first = threadlet::select! { recv(mb) -> m => m };
        mb.close();
        let second = threadlet::select! { recv(mb) -> m => m };
        (first, second)
    });
    addr.send(4).unwrap();
    assert_eq!(h.join().unwrap(), (Some(4), None));
}

#[test]
fn bodies_can_break_continue_and_drop_their_source() {
    let (tx, rx) = channel::unbounded::<u32>();
    for i in 0..5 {
        tx.send(i).unwrap();
    }
    let mut seen = Vec::new();
    loop {
        threadlet::select! {
            recv(rx) -> v => {
                let v = v.unwrap();
                if v % 2 == 0 {
                    continue;
                }
                seen.push(v);
                if v == 3 {
                    break;
                }
            },
        }
    }
    assert_eq!(seen, [1, 3]);
    let last = threadlet::select! {
        recv(rx) -> v => { drop(rx); v },
    };
    assert_eq!(last, Ok(4));
    assert!(tx.send(9).is_err());
}

#[test]
fn selects_work_on_plain_threads_and_wake_from_actors() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (tx_a, rx_a) = channel::unbounded::<&str>();
    let (tx_b, rx_b) = channel::unbounded::<&str>();
    rt.spawn(move || {
        threadlet::sleep(Duration::from_millis(5));
        tx_b.send("b").unwrap();
    });
    let got = within_watchdog("select on a plain thread", move || {
        threadlet::select! {
            recv(rx_a) -> v => v,
            recv(rx_b) -> v => v,
        }
    });
    assert_eq!(got, Ok("b"));
    drop(tx_a);
}

#[test]
fn many_selecting_consumers_of_one_channel_take_every_value_once() {
    const VALUES: u64 = 20_000;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (tx, rx) = channel::bounded::<u64>(4);
    let consumers: Vec<_> = (0..6)
        .map(|_| {
            let rx = rx.clone();
            rt.spawn(move || {
                let (_keep, idle) = channel::unbounded::<u64>();
                let mut sum = 0;
                loop {
                    threadlet::select! {
                        recv(rx) -> v => match v {
                            Ok(v) => sum += v,
                            Err(_) => return sum,
                        },
                        recv(idle) -> _ => unreachable!(),
                    }
                }
            })
        })
        .collect();
    drop(rx);
    let producer = std::thread::spawn(move || {
        for i in 0..VALUES {
            tx.send(i).unwrap();
        }
    });
    producer.join().unwrap();
    let total: u64 = within_watchdog("selecting consumers", move || {
        consumers.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(total, VALUES * (VALUES - 1) / 2);
}

struct Relay {
    out: channel::Sender<u32>,
    extra: channel::Receiver<u32>,
}

impl Actor for Relay {
    type Msg = u32;

    fn handle(&mut self, msg: u32, ctx: &mut Context<Self>) {
        // Inside `handle`, a select suspends the handler actor until a source is ready.
        let add = threadlet::select! {
            recv(self.extra) -> v => v.unwrap_or(0),
            default(Duration::from_secs(30)) => panic!("no extra value came"),
        };
        self.out.send(msg + add).unwrap();
        if msg == 0 {
            ctx.stop();
        }
    }
}

#[test]
fn handler_actors_select_inside_handle() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (out_tx, out_rx) = channel::unbounded();
    let (extra_tx, extra_rx) = channel::unbounded();
    let (addr, h) = rt.start(Relay {
        out: out_tx,
        extra: extra_rx,
    });
    for m in [3, 2, 1, 0] {
        addr.send(m).unwrap();
    }
    for i in 0..4 {
        std::thread::sleep(Duration::from_millis(2));
        extra_tx.send(10 * i).unwrap();
    }
    h.join().unwrap();
    let got: Vec<u32> = out_rx.try_iter_for_tests();
    assert_eq!(got, [3, 12, 21, 30]);
}

trait DrainForTests<T> {
    fn try_iter_for_tests(&self) -> Vec<T>;
}

impl<T> DrainForTests<T> for channel::Receiver<T> {
    fn try_iter_for_tests(&self) -> Vec<T> {
        std::iter::from_fn(|| self.try_recv().ok()).collect()
    }
}

#[test]
fn the_select_builder_waits_on_a_dynamic_set_and_can_be_reused() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..16).map(|_| channel::unbounded::<u64>()).unzip();
    for (i, tx) in txs.into_iter().enumerate() {
        rt.spawn(move || {
            for k in 0..100 {
                tx.send(i as u64 * 1000 + k).unwrap();
            }
        });
    }
    let (total, count) = within_watchdog("select builder", move || {
        rt.block_on(move || {
            let mut sel = Select::new();
            for (i, rx) in rxs.iter().enumerate() {
                sel.recv(rx, move |r| r.ok().map(|v| (i, v)));
            }
            let (mut total, mut count) = (0, 0);
            while count < 1600 {
                // A source whose sender is gone stays ready with `None`.
                if let Some((i, v)) = sel.wait() {
                    assert_eq!(v / 1000, i as u64);
                    total += v;
                    count += 1;
                }
            }
            assert!(sel.try_wait().is_none_or(|got| got.is_none()));
            (total, count)
        })
    });
    let want: u64 = (0..16u64)
        .map(|i| (0..100).map(|k| i * 1000 + k).sum::<u64>())
        .sum();
    assert_eq!((total, count), (want, 1600));
}

#[test]
#[should_panic(expected = "wait forever")]
fn waiting_on_an_empty_select_builder_panics_instead_of_hanging() {
    Select::<()>::new().wait();
}

#[test]
fn shutdown_unwinds_an_actor_parked_in_a_select() {
    let (tx, rx) = channel::unbounded::<u8>();
    let (addr_tx, addr_rx) = channel::bounded(1);
    let rt = Runtime::builder().workers(1).build().unwrap();
    let h = rt.spawn(move || {
        let (_keep, mb_rx) = channel::unbounded::<u8>();
        threadlet::select! {
            recv(rx) -> _ => {},
            recv(mb_rx) -> _ => {},
        }
        addr_tx.send(()).unwrap();
    });
    std::thread::sleep(Duration::from_millis(20));
    drop(rt); // must not hang: the parked select is unwound
    assert!(h.join().is_err_and(|e| e.is_cancelled()));
    // The unwound actor dropped its receiver on the way.
    assert!(tx.send(1).is_err());
    assert!(addr_rx.try_recv().is_err());
}

/// A join handle shared by two threads that select on it at once: one result, so one select
/// at a time. The second now fails with a clear panic; it displaced the first's waiter, and
/// the first waited for good.
#[test]
fn a_second_select_on_one_join_handle_fails_instead_of_stranding_the_first() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (go_tx, go) = channel::bounded::<()>(1);
    let h = Arc::new(rt.spawn(move || go.recv().is_ok()));
    let (done_tx, done) = std::sync::mpsc::channel();
    let selectors: Vec<_> = (0..2)
        .map(|_| {
            let (h, done_tx) = (h.clone(), done_tx.clone());
            std::thread::spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    threadlet::select! { recv(*h) -> r => r.unwrap() }
                }));
                done_tx.send(r.is_ok()).unwrap();
            })
        })
        .collect();
    // One of them waits; the other, if it came second, has failed by now.
    std::thread::sleep(Duration::from_millis(100));
    go_tx.send(()).unwrap();
    let mut got: Vec<bool> = (0..2)
        .map(|_| {
            done.recv_timeout(Duration::from_secs(20))
                .expect("a select hung")
        })
        .collect();
    got.sort();
    // One took the result; the other panicked (came second, or found it taken).
    assert_eq!(got, [false, true]);
    for s in selectors {
        s.join().unwrap();
    }
}
