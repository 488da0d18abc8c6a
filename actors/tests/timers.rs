//! Timers: sleep, receive timeouts and delayed sends, from actors and from plain threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use threadlet::channel::{self, RecvTimeoutError};
use threadlet::{Mailbox, Runtime, RuntimeExt};

mod common;
use common::{under_each_scheduler, within_watchdog};

#[test]
fn a_hundred_thousand_sleepers_wake_no_earlier_than_their_deadlines() {
    for (_, rt) in under_each_scheduler(2) {
        sleepers(rt);
    }
}

fn sleepers(rt: Runtime) {
    let early = Arc::new(AtomicUsize::new(0));
    let early2 = early.clone();
    let woke = rt.block_on(move || {
        let handles: Vec<_> = (0..100_000u64)
            .map(|i| {
                let early = early2.clone();
                threadlet::spawn(move || {
                    let d = Duration::from_millis(1 + i % 50);
                    let t = Instant::now();
                    threadlet::sleep(d);
                    if t.elapsed() < d {
                        early.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).count()
    });
    assert_eq!(woke, 100_000);
    assert_eq!(early.load(Ordering::Relaxed), 0, "a timer fired early");
}

#[test]
fn sleeping_actors_hold_no_worker() {
    // One worker: while one actor sleeps (for an hour), others run; were the sleeper holding the
    // worker, the quick actor would never finish and the watchdog would fail the test.
    within_watchdog("sleeper and quick actor", || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        rt.block_on(|| {
            let sleeper = threadlet::spawn(|| threadlet::sleep(Duration::from_secs(3600)));
            let quick = threadlet::spawn(|| 1 + 1);
            assert_eq!(quick.join().unwrap(), 2);
            assert!(sleeper.abort(), "the sleeper ended before its hour was up");
            assert!(sleeper.join().unwrap_err().is_killed());
        });
    });
}

#[test]
fn mailbox_recv_timeout_in_an_actor() {
    for (_, rt) in under_each_scheduler(2) {
        mailbox_recv_timeout(rt);
    }
}

fn mailbox_recv_timeout(rt: Runtime) {
    rt.block_on(|| {
        // The message is sent only once the first wait has timed out: a fixed sleep before the
        // send could outlast it on a crowded machine.
        let (timed_out_tx, timed_out) = channel::unbounded::<()>();
        let (addr, h) = threadlet::spawn_actor(move |mb: Mailbox<u32>| {
            let t = Instant::now();
            let first = mb.recv_timeout(Duration::from_millis(30));
            assert!(t.elapsed() >= Duration::from_millis(30));
            timed_out_tx.send(()).unwrap();
            let second = mb.recv_timeout(Duration::from_secs(30));
            let third = mb.recv_deadline(Instant::now() + Duration::from_secs(30));
            (first, second, third)
        });
        // An error here: the actor ended (it panicked) without timing out first.
        let _ = timed_out.recv();
        addr.send(1).unwrap();
        drop(addr);
        assert_eq!(
            h.join().unwrap(),
            (
                Err(RecvTimeoutError::Timeout),
                Ok(1),
                Err(RecvTimeoutError::Disconnected)
            )
        );
    });
}

#[test]
fn channel_recv_timeout_from_actors_and_threads() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (tx, rx) = channel::bounded::<u32>(0);
    // From a plain thread: times out, then gets a value an actor sends later.
    let t = Instant::now();
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(20)),
        Err(RecvTimeoutError::Timeout)
    );
    assert!(t.elapsed() >= Duration::from_millis(20));
    let tx2 = tx.clone();
    let sender = rt.spawn(move || {
        threadlet::sleep(Duration::from_millis(10));
        tx2.send(5).unwrap();
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(5));
    sender.join().unwrap();
    // From an actor: a rendezvous receive that times out leaves no stale waiter behind, so a
    // later send still pairs with a later receive.
    let rx2 = rx.clone();
    let (timed_out_tx, timed_out) = channel::unbounded();
    let h = rt.spawn(move || {
        let a = rx2.recv_timeout(Duration::from_millis(10));
        timed_out_tx.send(()).unwrap();
        let b = rx2.recv_timeout(Duration::from_secs(30));
        (a, b)
    });
    timed_out.recv().unwrap();
    tx.send(9).unwrap();
    assert_eq!(h.join().unwrap(), (Err(RecvTimeoutError::Timeout), Ok(9)));
}

#[test]
fn send_after_delivers_no_earlier_than_the_delay() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<Instant>| {
        let sent = mb.recv().unwrap();
        (sent, Instant::now())
    });
    let a2 = addr.clone();
    rt.block_on(move || a2.send_after(Duration::from_millis(40), Instant::now()));
    let (sent, got) = h.join().unwrap();
    assert!(got - sent >= Duration::from_millis(40));
    // From a plain thread too (a helper thread does the waiting).
    let (addr2, h2) = rt.spawn_actor(|mb: Mailbox<u8>| mb.recv());
    let t = Instant::now();
    addr2.send_after(Duration::from_millis(20), 3);
    assert_eq!(h2.join().unwrap(), Some(3));
    assert!(t.elapsed() >= Duration::from_millis(20));
    drop(addr);
}

#[test]
fn sleep_on_a_plain_thread_blocks_it() {
    let t = Instant::now();
    threadlet::sleep(Duration::from_millis(15));
    assert!(t.elapsed() >= Duration::from_millis(15));
}

/// Counts its drops.
struct DropCount(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_cancelled_send_after_drops_its_message_at_once_and_never_delivers_it() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    // Reports every message it gets.
    let (got_tx, got_rx) = std::sync::mpsc::channel();
    let (addr, _h) = rt.spawn_actor(move |mb: threadlet::Mailbox<DropCount>| {
        for msg in &mb {
            let _ = got_tx.send(msg);
        }
    });
    // A deadline far enough off that a loaded machine cannot pass it before the cancel (at
    // 30 ms, one run in 150 under load did), near enough to wait past below.
    let delay = Duration::from_secs(2);
    let armed = std::time::Instant::now();
    let timer = addr.send_after(delay, DropCount(drops.clone()));
    assert!(timer.cancel());
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "dropped by the cancel, not at the deadline"
    );
    assert!(!timer.cancel(), "nothing left to cancel");
    // One that fires: once it has arrived, cancelling reports false.
    let fired = addr.send_after(Duration::from_millis(1), DropCount(drops.clone()));
    let first = got_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("delivered");
    assert!(!fired.cancel());
    drop(first);
    // The cancelled one never arrives, even once its deadline has passed.
    std::thread::sleep(
        (armed + delay + Duration::from_millis(50))
            .saturating_duration_since(std::time::Instant::now()),
    );
    assert!(
        got_rx.try_recv().is_err(),
        "a cancelled message was delivered"
    );
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

#[test]
fn send_interval_ticks_until_cancelled_or_the_actor_ends() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    // Forwards every tick to the test thread.
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let (addr, _h) = rt.spawn_actor(move |mb: threadlet::Mailbox<u32>| {
        for tick in &mb {
            let _ = seen_tx.send(tick);
        }
    });
    // Counts the messages the interval makes (it makes one per tick, after checking the flag).
    let made = Arc::new(AtomicUsize::new(0));
    let counter = made.clone();
    let interval = addr.send_interval(Duration::from_millis(2), move || {
        counter.fetch_add(1, Ordering::SeqCst);
        1
    });
    for _ in 0..3 {
        seen_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the interval ticks");
    }
    assert!(interval.cancel());
    assert!(!interval.cancel());
    let at_cancel = made.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(100));
    // A tick already past its check of the flag may still make one; no other tick can.
    let after = made.load(Ordering::SeqCst) - at_cancel;
    assert!(after <= 1, "{after} ticks after the cancel");

    // An interval to an actor that ends stops by itself (its sends fail): nothing hangs, and
    // the runtime drops cleanly.
    let (short, h) = rt.spawn_actor(|mb: threadlet::Mailbox<u8>| mb.recv());
    let _ticks = short.send_interval(Duration::from_millis(1), || 7);
    assert_eq!(h.join().unwrap(), Some(7));
    std::thread::sleep(Duration::from_millis(10));
    drop(rt);
}

#[test]
#[should_panic(expected = "period must not be zero")]
fn send_interval_refuses_a_zero_period() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, _h) = rt.spawn_actor(|mb: threadlet::Mailbox<()>| mb.recv());
    addr.send_interval(Duration::ZERO, || ());
}

/// A delayed message and an interval's ticks reach a capacity-0 mailbox while its owner waits
/// for a message (a mailbox with no room takes only what its owner waits for).
#[test]
fn delayed_messages_and_ticks_reach_a_capacity_zero_mailbox_whose_owner_waits() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (addr, h) = threadlet::ActorBuilder::new()
        .mailbox_capacity(0)
        .spawn_actor_on(&rt, |mb: Mailbox<&'static str>| {
            let (mut once, mut ticks) = (0, 0);
            while once == 0 || ticks == 0 {
                match mb.recv_timeout(Duration::from_secs(10))? {
                    "once" => once += 1,
                    _ => ticks += 1,
                }
            }
            Ok::<_, RecvTimeoutError>(())
        })
        .unwrap();
    addr.send_after(Duration::from_millis(5), "once");
    let ticks = addr.send_interval(Duration::from_millis(2), || "tick");
    let got = within_watchdog("timers at a rendezvous", move || h.join().unwrap());
    ticks.cancel();
    assert_eq!(got, Ok(()));
}

/// Also while the owner waits only in selects: a delayed message is taken by a select's watch
/// (a `try_send` is not: see `bounded.rs`), and would otherwise be retried for good.
#[test]
fn a_delayed_message_reaches_a_capacity_zero_mailbox_whose_owner_waits_in_a_select() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, h) = threadlet::ActorBuilder::new()
        .mailbox_capacity(0)
        .spawn_actor_on(&rt, |mb: Mailbox<&'static str>| {
            let (_keep, never) = threadlet::channel::unbounded::<()>();
            threadlet::select! {
                recv(mb) -> m => m,
                recv(never) -> _ => None,
            }
        })
        .unwrap();
    addr.send_after(Duration::from_millis(5), "once");
    let got = within_watchdog("a delayed message at a select", move || h.join().unwrap());
    assert_eq!(got, Some("once"));
}

/// An interval set up by an actor re-arms itself from its runtime's timer thread. Its later
/// ticks went to the process-wide timer heap, which the runtime's shutdown does not clear: the
/// interval outlived its runtime, and made one more message after the drop.
#[test]
fn an_interval_ends_with_its_runtime() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let made = Arc::new(AtomicUsize::new(0));
    let m = made.clone();
    let (addr, _h) = rt.spawn_actor(|mb: Mailbox<u32>| while mb.recv().is_some() {});
    // Set up by an actor: on its runtime's timers (a plain thread's go to the process-wide
    // timer thread, as documented).
    let _ticks = rt.block_on(move || {
        addr.send_interval(Duration::from_millis(20), move || {
            m.fetch_add(1, Ordering::SeqCst);
            0
        })
    });
    within_watchdog("three ticks", {
        let made = made.clone();
        move || {
            while made.load(Ordering::SeqCst) < 3 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    drop(rt);
    let at_drop = made.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(200)); // ten periods
    assert_eq!(made.load(Ordering::SeqCst), at_drop);
}

/// A delayed message lives on the receiver's runtime: one scheduled by an actor of runtime A
/// for an actor of runtime B arrives although A shuts down before the deadline (it was on A's
/// timers, which A's shutdown dropped, message and all, while B's actor waited for it).
#[test]
fn a_delayed_message_outlives_the_senders_runtime() {
    let receiving = Runtime::builder().workers(1).build().unwrap();
    // A bound that only a lost message reaches: it fails instead of hanging.
    let (addr, h) =
        receiving.spawn_actor(|mb: Mailbox<u32>| mb.recv_timeout(Duration::from_secs(30)).ok());
    let sending = Runtime::builder().workers(1).build().unwrap();
    let to = addr.clone();
    let _timer = sending.block_on(move || to.send_after(Duration::from_millis(50), 7));
    drop(sending);
    assert_eq!(h.join().unwrap(), Some(7), "the delayed message was lost");
}

/// The same for a supervised child between incarnations (here: before its first), whose
/// mailbox has no actor attached, so no runtime of its own to keep the message on: the message
/// must not go down with the sender's runtime either. (It did: it fell back to the sender's
/// timers.)
#[test]
fn a_delayed_message_to_an_unattached_supervised_child_outlives_the_senders_runtime() {
    use threadlet::supervisor::{Child, Strategy, Supervisor};
    let (got_tx, got_rx) = std::sync::mpsc::channel();
    let (child, addr) = Child::process("late", move |mb: Mailbox<u32>| {
        if let Ok(n) = mb.recv_timeout(Duration::from_secs(30)) {
            let _ = got_tx.send(n);
        }
    });
    let sending = Runtime::builder().workers(1).build().unwrap();
    let to = addr.clone();
    let _timer = sending.block_on(move || to.send_after(Duration::from_millis(50), 7));
    drop(sending);
    let receiving = Runtime::builder().workers(1).build().unwrap();
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(child);
    let (_sup_addr, _sup) = sup.start(&receiving.handle()).unwrap();
    // A bound that only a lost message reaches: it fails instead of hanging.
    assert_eq!(
        got_rx.recv_timeout(Duration::from_secs(30)).ok(),
        Some(7),
        "the delayed message was lost"
    );
}

/// The child's part of the test below: a plain thread's thread-local whose destructor sends a
/// delayed message, at thread exit, after the thread's other thread-locals may be gone.
fn a_send_after_in_a_thread_exit() -> (Option<u32>, Option<u32>) {
    struct SendOnExit(std::cell::RefCell<Option<threadlet::Addr<u32>>>);
    impl Drop for SendOnExit {
        fn drop(&mut self) {
            if let Some(addr) = self.0.borrow_mut().take() {
                addr.send_after(Duration::from_millis(1), 2);
            }
        }
    }
    thread_local! {
        static ON_EXIT: SendOnExit = const { SendOnExit(std::cell::RefCell::new(None)) };
    }
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| (mb.recv(), mb.recv()));
    std::thread::spawn(move || {
        // This thread-local first: its destructor runs after those made later.
        ON_EXIT.with(|g| *g.0.borrow_mut() = Some(addr.clone()));
        addr.send_after(Duration::from_millis(1), 1);
    })
    .join()
    .unwrap();
    within_watchdog("both delayed messages", move || h.join().unwrap())
}

const TLS_CHILD: &str = "THREADLET_TEST_SEND_AFTER_AT_THREAD_EXIT";

/// A `send_after` made by a thread-local's destructor at thread exit is delivered. It runs in a
/// child process: the runtime's own thread-local, read by `send_after`, may be destroyed by
/// then, and reading it with `with` panicked inside a thread-local destructor, which aborts.
#[test]
fn a_send_after_from_a_thread_locals_destructor_is_delivered() {
    if std::env::var_os(TLS_CHILD).is_some() {
        assert_eq!(a_send_after_in_a_thread_exit(), (Some(1), Some(2)));
        return;
    }
    let name = "a_send_after_from_a_thread_locals_destructor_is_delivered";
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(TLS_CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

/// A cancelled delayed message or interval lets go of its address: an actor whose other
/// addresses are gone ends once its mailbox is empty, as if the timer had never been armed
/// (the timer kept a counted address until its deadline, an hour here, so `join` hung).
#[test]
fn a_cancelled_timer_does_not_keep_its_actor_alive() {
    struct Counter(u32);
    impl threadlet::Actor for Counter {
        type Msg = u32;
        fn handle(&mut self, n: u32, _: &mut threadlet::Context<Self>) {
            self.0 += n;
        }
    }
    let rt = Runtime::builder().workers(1).build().unwrap();
    let hour = Duration::from_secs(3600);

    let (addr, h) = rt.start(Counter(0));
    addr.send(1).unwrap();
    let timer = addr.send_after(hour, 100);
    assert!(timer.cancel());
    drop(addr);
    assert_eq!(
        within_watchdog("handler, send_after", move || h.join().unwrap().0),
        1
    );

    let (addr, h) = rt.start(Counter(0));
    addr.send(1).unwrap();
    let timer = addr.send_interval(hour, || 100);
    assert!(timer.cancel());
    drop(addr);
    assert_eq!(
        within_watchdog("handler, send_interval", move || h.join().unwrap().0),
        1
    );

    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.iter().sum::<u32>());
    addr.send(1).unwrap();
    let (after, every) = (addr.send_after(hour, 100), addr.send_interval(hour, || 100));
    assert!(after.cancel() && every.cancel());
    drop(addr);
    assert_eq!(
        within_watchdog("process, both", move || h.join().unwrap()),
        1
    );
}

/// An interval cancelled by its own message maker (user code that runs in the tick) stops and
/// lets go of its address, without deadlocking on its own state. Nothing is sent once the
/// cancel has returned, not even the message of the tick that cancels.
#[test]
fn an_interval_cancelled_from_its_own_tick_stops() {
    use std::sync::atomic::AtomicBool;
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.iter().count());
    let me: Arc<std::sync::OnceLock<threadlet::TimerHandle>> = Arc::default();
    let cancelled = Arc::new(AtomicBool::new(false));
    let ticks = Arc::new(AtomicUsize::new(0));
    let (m, c, t) = (me.clone(), cancelled.clone(), ticks.clone());
    let timer = addr.send_interval(Duration::from_millis(1), move || {
        // From the third tick on, once the handle is there (whenever the test thread gets to
        // set it), cancel, once.
        let n = t.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= 3
            && !c.load(Ordering::SeqCst)
            && let Some(handle) = m.get()
        {
            assert!(handle.cancel());
            c.store(true, Ordering::SeqCst);
        }
        7
    });
    me.set(timer).unwrap();
    drop(addr);
    // Once cancelled, the interval's address goes, and with it the mailbox's last one.
    let got = within_watchdog("the interval's end", move || h.join().unwrap());
    assert!(cancelled.load(Ordering::SeqCst));
    assert!(got >= 2, "{got} ticks");
    assert_eq!(got + 1, ticks.load(Ordering::SeqCst));
}

/// Two runtimes, and an actor of the first that handed its `Mailbox` on (returned, for an
/// actor of the second to receive on) and sleeps: its address, made here, and every timer set
/// through it now, wait on the first runtime's timers.
fn a_mailbox_handed_to_another_runtime() -> (Runtime, Runtime, threadlet::Addr<u32>, Mailbox<u32>) {
    let first = Runtime::builder().workers(1).build().unwrap();
    let second = Runtime::builder().workers(1).build().unwrap();
    let (hand_over, handed) = std::sync::mpsc::channel::<Mailbox<u32>>();
    let (addr, _sleeper) = first.spawn_actor(move |mb: Mailbox<u32>| {
        hand_over.send(mb).unwrap();
        threadlet::sleep(Duration::from_secs(3600));
    });
    (first, second, addr, handed.recv().unwrap())
}

/// An actor of `rt` that receives `n` messages on `mb` (`None` for one that does not come
/// within 5 s), and returns them with the mailbox: dropped, it would close, and an interval's
/// next tick would end the interval.
fn receive_on(
    rt: &Runtime,
    mb: Mailbox<u32>,
    n: usize,
) -> threadlet::JoinHandle<(Vec<Option<u32>>, Mailbox<u32>)> {
    rt.spawn(move || {
        let got = (0..n)
            .map(|_| mb.recv_timeout(Duration::from_secs(5)).ok())
            .collect();
        (got, mb)
    })
}

/// A delayed message waits on the timers of the runtime whose actor is attached to the mailbox
/// when it is sent. If that actor has handed its `Mailbox` to an actor of another runtime, and
/// its own runtime shuts down before the deadline, the message was dropped with that runtime's
/// timers while the new receiver waited for it (and `cancel` still found it pending): accepted,
/// and neither delivered nor handed back. It must reach the receiver.
#[test]
fn a_delayed_message_outlives_the_runtime_it_waited_on_when_its_mailbox_lives_elsewhere() {
    let (first, second, addr, mb) = a_mailbox_handed_to_another_runtime();
    let reader = second.spawn(move || mb.recv_timeout(Duration::from_secs(20)));
    let timer = addr.send_after(Duration::from_millis(200), 42);
    drop(addr);
    drop(first); // before the deadline
    let got = within_watchdog("the delayed message", move || reader.join().unwrap());
    assert_eq!(got.ok(), Some(42));
    assert!(!timer.cancel(), "delivered, so nothing left to cancel");
}

/// The same for an interval: its ticks went down with the runtime whose timers fired them,
/// while the mailbox lived on with an actor of another runtime (and `cancel` still reported
/// the interval running).
#[test]
fn an_interval_outlives_the_runtime_it_ticked_on_when_its_mailbox_lives_elsewhere() {
    let (first, second, addr, mb) = a_mailbox_handed_to_another_runtime();
    let reader = receive_on(&second, mb, 3);
    // Armed on the first runtime's timers: its actor is the one attached.
    let ticks = addr.send_interval(Duration::from_millis(100), || 5);
    drop(addr);
    drop(first); // before the first tick
    let (got, _mb) = within_watchdog("three ticks", move || reader.join().unwrap());
    assert_eq!(got, vec![Some(5); 3], "ticks were lost");
    assert!(
        ticks.cancel(),
        "still ticking, into the second runtime's actor"
    );
}

/// The same, for an interval and for a delayed message, when the runtime is dropped by a
/// thread that is unwinding (its owner panicked): the guards took any unwind for the failed
/// arming of the test below, and dropped the tick or the message (the interval still said it
/// was running).
#[test]
fn timers_outlive_a_runtime_dropped_by_a_panicking_thread() {
    let (first, second, addr, mb) = a_mailbox_handed_to_another_runtime();
    let reader = receive_on(&second, mb, 4);
    let ticks = addr.send_interval(Duration::from_millis(300), || 5);
    let delayed = addr.send_after(Duration::from_millis(100), 9);
    drop(addr);
    let owner = std::thread::spawn(move || {
        let _first = first;
        panic!("the owner of the first runtime panics (on purpose)");
    });
    assert!(owner.join().is_err());
    let (mut got, _mb) = within_watchdog("a delayed message and three ticks", move || {
        reader.join().unwrap()
    });
    got.sort();
    assert_eq!(got, [Some(5), Some(5), Some(5), Some(9)], "lost");
    assert!(!delayed.cancel(), "delivered");
    assert!(ticks.cancel(), "still ticking");
}

/// A message of these tests that says when it is dropped.
struct Dropped(std::sync::mpsc::Sender<()>);

impl Drop for Dropped {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

/// An interval whose actor has ended has stopped: `cancel` reports that nothing was pending
/// (it reported `true`, as if the interval had still been running).
#[test]
fn cancelling_an_interval_whose_actor_ended_reports_nothing_pending() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, h) = rt.spawn_actor(|_: Mailbox<Dropped>| ());
    h.join().unwrap(); // its mailbox is closed
    let (tx, dropped) = std::sync::mpsc::channel();
    let ticks = addr.send_interval(Duration::from_millis(5), move || Dropped(tx.clone()));
    // The first tick's message, refused by the closed mailbox, is dropped once the tick has
    // ended the interval.
    dropped
        .recv_timeout(common::WATCHDOG)
        .expect("the first tick");
    assert!(
        !ticks.cancel(),
        "the interval had stopped for want of a receiver"
    );
    assert!(
        dropped.recv_timeout(Duration::from_millis(50)).is_err(),
        "no tick after the first"
    );
}

/// The same for an interval that a panic in `make_msg` stopped, as its docs say it does.
#[test]
fn cancelling_an_interval_stopped_by_a_panic_reports_nothing_pending() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, _h) = rt.spawn_actor(|mb: Mailbox<u32>| while mb.recv().is_some() {});
    let (tx, reported) = std::sync::mpsc::channel();
    // The panic's payload is dropped once the timer's containment has reported it, after the
    // tick has unwound.
    let ticks = addr.send_interval(Duration::from_millis(5), move || -> u32 {
        std::panic::panic_any(Dropped(tx.clone()))
    });
    reported
        .recv_timeout(common::WATCHDOG)
        .expect("the first tick panics");
    assert!(!ticks.cancel(), "the panic had stopped the interval");
    assert!(
        reported.recv_timeout(Duration::from_millis(50)).is_err(),
        "no tick after the panic"
    );
}

const NO_TIMER_THREAD_CHILD: &str = "THREADLET_TEST_NO_TIMER_THREAD_CHILD";

/// A `send_after` to a mailbox with no actor attached waits on the process-wide timer thread,
/// started by the first such call; if the thread cannot be made, the call panics, and the
/// caller may catch it. The delivery's guard, dropped by that unwind, armed the delivery again,
/// which failed again inside the unwind, over and over, until the process aborted. Run in a
/// child process, which caps its address space so that no thread can be made.
#[test]
#[cfg_attr(
    feature = "asan",
    ignore = "under the cap, AddressSanitizer's own mappings (a thread's signal stack, its \
              allocator's next region) fail and abort the child, about 1 run in 6"
)]
fn a_send_after_that_cannot_start_the_timer_thread_panics_without_aborting() {
    if std::env::var_os(NO_TIMER_THREAD_CHILD).is_none() {
        return common::passes_in_child(
            "a_send_after_that_cannot_start_the_timer_thread_panics_without_aborting",
            // The child forgets its runtime (below), which LeakSanitizer would report at
            // exit under the AddressSanitizer build; the leak is the test's, on purpose.
            &[
                (NO_TIMER_THREAD_CHILD, "1"),
                ("ASAN_OPTIONS", "detect_leaks=0"),
            ],
        );
    }
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, ended) = rt.spawn_actor(|mb: Mailbox<u32>| mb);
    let mb = ended.join().unwrap(); // no actor attached any more: the process-wide heap
    let mapped_kib = common::proc_status_kib("VmSize");
    let cap = libc::rlimit {
        rlim_cur: (mapped_kib + 256) * 1024,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: `cap` is a valid rlimit for setrlimit to read.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &cap) }, 0);
    let armed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        addr.send_after(Duration::from_secs(1), 7)
    }));
    assert!(
        armed.is_err(),
        "no thread can be made, so the timer thread cannot start"
    );
    drop(mb);
    // Its workers' stacks are mapped under the cap; it is not dropped in a process that ends.
    std::mem::forget(rt);
}

/// A handler actor that keeps nothing: the channel senders sent to it are dropped with it.
struct Holder;

impl threadlet::Actor for Holder {
    type Msg = channel::Sender<()>;
    fn handle(&mut self, _: channel::Sender<()>, _: &mut threadlet::Context<Self>) {}
}

/// Delayed messages armed while their runtime shuts down, by plain threads (through a
/// `Handle`) and by deliveries dropped unrun by the shutdown's clear, which arm themselves
/// again. The clear ran once and the heap still took entries after it: nothing fired or
/// dropped those while a `Handle` kept the runtime's memory (here, for good), so a receiver
/// waiting on the delayed sender never heard it go (about 1% of such messages). Each message
/// here is a channel's only sender, which nobody ever uses: every receiver must see it dropped.
#[test]
fn a_delayed_message_armed_during_shutdown_is_dropped_not_kept() {
    let stranded = within_watchdog("shutdowns with delayed messages in flight", || {
        let mut stranded = 0;
        for round in 0..150u64 {
            let rt = Runtime::builder().workers(1).build().unwrap();
            let kept = rt.handle(); // as an application may keep one
            let senders: Vec<_> = (0..2)
                .map(|_| {
                    let handle = rt.handle();
                    std::thread::spawn(move || {
                        (0..200)
                            .map(|_| {
                                let (addr, _ended) = handle.start(Holder);
                                let (tx, rx) = channel::bounded::<()>(1);
                                let _ = addr.send_after(Duration::from_millis(1), tx);
                                rx
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_micros(100 + (round % 20) * 20));
            drop(rt);
            for rx in senders.into_iter().flat_map(|t| t.join().unwrap()) {
                if let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(Duration::from_secs(2)) {
                    stranded += 1;
                }
            }
            drop(kept);
        }
        stranded
    });
    assert_eq!(
        stranded, 0,
        "delayed messages kept by a shut-down runtime's timers"
    );
}

/// A cancel that returned `true` stopped the interval: no tick arrives after it. A tick whose
/// `make_msg` ran while the cancel came sent its message anyway, after the cancel had
/// returned (about half of these rounds, each time).
#[test]
fn an_interval_sends_nothing_once_its_cancel_has_returned() {
    within_watchdog("no tick after cancel", || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let mut late = 0;
        for round in 0..50u64 {
            let (go, wait_for_go) = std::sync::mpsc::channel::<()>();
            // Leaves its messages queued until told: the queue only grows meanwhile.
            let (addr, h) = rt.spawn_actor(move |mb: Mailbox<u32>| {
                wait_for_go.recv().unwrap();
                while mb.try_recv().is_ok() {}
            });
            let ticks = addr.send_interval(Duration::from_micros(200), || {
                std::thread::sleep(Duration::from_micros(300)); // a message slow to make
                0
            });
            std::thread::sleep(Duration::from_micros(100 + (round * 37) % 900));
            let stopped = ticks.cancel();
            let at_cancel = addr.len();
            std::thread::sleep(Duration::from_millis(3));
            if stopped && addr.len() > at_cancel {
                late += 1;
            }
            go.send(()).unwrap();
            drop(addr);
            h.join().unwrap();
        }
        assert_eq!(
            late, 0,
            "{late} of 50 intervals ticked after their cancel returned"
        );
    });
}
