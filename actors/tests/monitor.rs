//! Monitors and exit reasons: one `Down` per monitor with the right reason for every way an
//! actor can end, at once for an actor that has already ended; usable in `select!`.

mod common;

use std::time::Duration;

use common::within_watchdog;
use threadlet::{
    Actor, ActorBuilder, Context, Down, ExitReason, Mailbox, Monitor, Runtime, RuntimeExt, channel,
};

#[test]
fn each_exit_kind_gives_its_reason() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let normal = rt.spawn(|| 1);
    let panicked = rt.spawn(|| -> u8 { panic!("bad input") });
    let killed = rt.spawn(|| threadlet::sleep(Duration::from_secs(3600)));
    let cancelled = rt.spawn(|| threadlet::sleep(Duration::from_secs(3600)));
    let monitors: Vec<Monitor> = [&normal, &panicked]
        .iter()
        .map(|h| Monitor::of(*h))
        .collect();
    let m_killed = Monitor::of(&killed);
    let m_cancelled = Monitor::of(&cancelled);
    killed.abort();
    let got = within_watchdog("monitors", move || {
        let reasons: Vec<ExitReason> = monitors.iter().map(|m| m.recv().reason).collect();
        (reasons, m_killed.recv().reason)
    });
    assert_eq!(
        got.0,
        [ExitReason::Normal, ExitReason::Panicked("bad input".into())]
    );
    assert_eq!(got.1, ExitReason::Killed);
    assert_eq!(m_cancelled.try_recv(), None);
    drop(rt);
    assert_eq!(m_cancelled.recv().reason, ExitReason::Cancelled);
    // Joins still work: monitors never take the result.
    assert_eq!(normal.join().unwrap(), 1);
    assert!(panicked.join().unwrap_err().is_panic());
}

#[test]
fn a_monitor_of_an_ended_actor_fires_at_once_and_many_monitors_each_get_one_down() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (addr, h) = ActorBuilder::new()
        .name("mapper")
        .spawn_actor_on(&rt, |mb: Mailbox<u32>| mb.recv())
        .unwrap();
    let early: Vec<Monitor> = (0..10).map(|_| addr.monitor()).collect();
    addr.send(5).unwrap();
    assert_eq!(h.join().unwrap(), Some(5));
    let want = Down {
        id: addr.actor_id().unwrap(),
        name: Some("mapper".into()),
        reason: ExitReason::Normal,
    };
    for m in &early {
        assert_eq!(m.recv(), want);
        assert_eq!(m.try_recv(), Some(want.clone()), "the same Down, kept");
    }
    let late = addr.monitor();
    assert_eq!(late.try_recv(), Some(want));
}

/// A monitor made through an address after a detached actor has ended (its join packet, and
/// with it the result, gone) still gets the actor's reason and name: the mailbox keeps the end.
/// Nothing watches before the end, so each kind of end is kept the way an unwatched actor's is.
#[test]
fn a_late_monitor_of_a_detached_actor_gets_its_reason() {
    #[derive(Clone, Copy, Debug)]
    enum End {
        Return,
        Panic,
        Kill,
    }
    let rt = Runtime::builder().workers(2).build().unwrap();
    for name in [None, Some("named")] {
        for end in [End::Return, End::Panic, End::Kill] {
            let mut b = ActorBuilder::new();
            if let Some(n) = name {
                b = b.name(n);
            }
            let (addr, h) = b
                .spawn_actor_on(&rt, |mb: Mailbox<u8>| {
                    if mb.recv() == Some(0) {
                        panic!("zero");
                    }
                })
                .unwrap();
            // Tells when the end is recorded, without watching through the mailbox (and
            // without keeping the result: it holds no join packet).
            let ended = h.abort_handle();
            drop(h);
            match end {
                End::Return => addr.send(1).unwrap(),
                End::Panic => addr.send(0).unwrap(),
                End::Kill => assert!(addr.kill()),
            }
            within_watchdog("the end", move || {
                while !ended.is_finished() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            let want = Down {
                id: addr.actor_id().unwrap(),
                name: name.map(Into::into),
                reason: match end {
                    End::Return => ExitReason::Normal,
                    End::Panic => ExitReason::Panicked("zero".into()),
                    End::Kill => ExitReason::Killed,
                },
            };
            assert_eq!(addr.monitor().try_recv(), Some(want), "{name:?} {end:?}");
            assert!(!addr.kill(), "an ended actor is not killed again");
        }
    }
    // Cancelled by shutdown.
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u8>| mb.recv());
    drop(h);
    drop(rt);
    let down = addr.monitor().try_recv().expect("ended with its runtime");
    assert_eq!(down.reason, ExitReason::Cancelled);
}

struct Selfish {
    monitors: channel::Sender<Monitor>,
    stop_on: u32,
}

impl Actor for Selfish {
    type Msg = u32;
    fn started(&mut self, ctx: &mut Context<Self>) {
        // Possibly before the spawner has linked the mailbox to the actor: handed over later.
        self.monitors.send(ctx.addr().monitor()).unwrap();
    }
    fn handle(&mut self, n: u32, ctx: &mut Context<Self>) {
        if n == self.stop_on {
            ctx.stop();
        }
        if n == 99 {
            panic!("ninety-nine");
        }
    }
}

#[test]
fn handler_actors_report_normal_stops_and_panics() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    for (stop_on, last, want) in [
        (1, 1, ExitReason::Normal),
        (0, 99, ExitReason::Panicked("ninety-nine".into())),
    ] {
        let (tx, rx) = channel::unbounded();
        let (addr, h) = rt.start(Selfish {
            monitors: tx,
            stop_on,
        });
        let own = rx.recv().unwrap();
        let outside = addr.monitor();
        addr.send(last).unwrap();
        let _ = h.join();
        assert_eq!(own.recv().reason, want);
        assert_eq!(outside.recv().reason, want);
    }
}

#[test]
fn monitors_work_in_select_beside_a_mailbox() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    // The child fails once the supervisor has logged the message (not after a fixed sleep,
    // which a crowded machine can stretch past the message's arrival).
    let (logged, go) = threadlet::channel::unbounded::<()>();
    let child = rt.spawn(move || {
        let _ = go.recv();
        panic!("child failed");
    });
    let watch = Monitor::of(&child);
    let (addr, supervisor) = rt.spawn_actor(move |mb: Mailbox<&'static str>| {
        let mut log = Vec::new();
        loop {
            threadlet::select! {
                recv(mb) -> m => {
                    log.push(m.unwrap_or("closed"));
                    let _ = logged.send(());
                },
                recv(watch) -> down => {
                    log.push(if down.reason.is_normal() { "normal" } else { "abnormal" });
                    return log;
                },
            }
        }
    });
    addr.send("hello").unwrap();
    let log = within_watchdog("select on a monitor", move || supervisor.join().unwrap());
    assert_eq!(log, ["hello", "abnormal"]);
    assert!(child.join().is_err());
}

/// A monitor made on a supervised child's address before its first incarnation watches a
/// mailbox that no actor has yet. If the child goes unstarted, no actor ever ends there: the
/// monitor reports `NoProc` (its receive panicked inside the library before), the same `Down`
/// each time.
#[test]
fn a_monitor_of_an_address_that_never_had_an_actor_reports_noproc() {
    let (child, addr) = threadlet::supervisor::Child::process("never", |mb: Mailbox<u8>| {
        mb.recv();
    });
    let monitor = addr.monitor();
    assert!(monitor.try_recv().is_none()); // the mailbox is still there
    drop(child);
    drop(addr);
    let down = monitor.recv();
    assert_eq!(down.reason, ExitReason::NoProc);
    assert_eq!(monitor.try_recv(), Some(down));
}

/// A monitor is `Sync`: two users of one (here an actor waiting in `recv` and a thread
/// polling) both get the actor's real end. The waiting one was handed the `Down`; the poller,
/// finding the channel closed, took the end for lost and kept `Cancelled`, which the waiting
/// one then read back too.
#[test]
fn two_users_of_one_monitor_both_get_the_real_end() {
    use std::sync::Arc;
    let rt = Runtime::builder().workers(1).build().unwrap();
    // One worker and no spare: the waiting actor runs only once the hog below is done.
    let busy = Runtime::builder()
        .workers(1)
        .spare_workers(0)
        .build()
        .unwrap();
    let (go_tx, go) = channel::bounded::<()>(1);
    let watched = rt.spawn(move || {
        let _ = go.recv();
    });
    let monitor = Arc::new(Monitor::of(&watched));
    let m = monitor.clone();
    let waiting = busy.spawn(move || m.recv().reason);
    std::thread::sleep(Duration::from_millis(50)); // it waits in `recv`
    let hog = busy.spawn(|| std::thread::sleep(Duration::from_millis(300)));
    std::thread::sleep(Duration::from_millis(50)); // the hog holds the worker
    go_tx.send(()).unwrap(); // the watched actor ends normally
    let polled = within_watchdog("a poll of the monitor", move || {
        loop {
            if let Some(d) = monitor.try_recv() {
                break d.reason;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    watched.join().unwrap();
    hog.join().unwrap();
    let waited = within_watchdog("the waiting actor", move || waiting.join().unwrap());
    assert_eq!((polled, waited), (ExitReason::Normal, ExitReason::Normal));
}

/// A monitor made through an address hears why the actor ended when every address is gone
/// before the end: the usual end of a mailbox actor (its receive loop ends when the last
/// address goes), a panic after that, a kill after that. The mailbox, which keeps such a
/// monitor's hook, went with the actor's `Mailbox` before the end was told, and every one of
/// these monitors heard `Cancelled`.
#[test]
fn an_address_monitor_hears_the_real_end_after_the_last_address_went() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.iter().count());
    let normal = addr.monitor();
    drop(addr);
    assert_eq!(h.join().unwrap(), 0);

    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| {
        for _ in &mb {}
        panic!("after the last address");
    });
    let panicked = addr.monitor();
    drop(addr);
    assert!(h.join().unwrap_err().is_panic());

    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| {
        drop(mb);
        threadlet::sleep(Duration::from_secs(3600));
    });
    let killed = addr.monitor();
    drop(addr);
    std::thread::sleep(Duration::from_millis(50)); // it dropped its mailbox and sleeps
    assert!(h.abort());

    let reasons = within_watchdog("three monitors", move || {
        [normal, panicked, killed].map(|m| m.recv().reason)
    });
    assert_eq!(
        reasons,
        [
            ExitReason::Normal,
            ExitReason::Panicked("after the last address".into()),
            ExitReason::Killed
        ]
    );
}

/// A wait on a monitor that gives up because its caller may not wait (a destructor run by a
/// kill's unwind) is that caller's answer only: the monitor, shared, still hears the real end.
#[test]
fn a_wait_given_up_in_an_unwind_does_not_decide_a_shared_monitor() {
    use std::sync::Arc;

    /// How a destructor asks the monitor.
    #[derive(Clone, Copy, Debug)]
    enum Ask {
        Recv,
        RecvTimeout,
        Select,
    }
    /// Asks the monitor from its destructor, and reports what it was given.
    struct AskWhenDropped(Arc<Monitor>, Ask, channel::Sender<ExitReason>);
    impl Drop for AskWhenDropped {
        fn drop(&mut self) {
            let down = match self.1 {
                Ask::Recv => self.0.recv(),
                Ask::RecvTimeout => self.0.recv_timeout(Duration::from_secs(3600)).unwrap(),
                Ask::Select => {
                    let (_tx, rx) = channel::unbounded::<()>();
                    threadlet::select! {
                        recv(*self.0) -> down => down,
                        recv(rx) -> _ => unreachable!("nothing is sent"),
                    }
                }
            };
            let _ = self.2.send(down.reason);
        }
    }

    let rt = Runtime::builder().workers(2).build().unwrap();
    for ask in [Ask::Recv, Ask::RecvTimeout, Ask::Select] {
        let (watched, watched_h) = rt.spawn_actor(|mb: Mailbox<()>| mb.recv());
        let monitor = Arc::new(watched.monitor());
        let (gave_tx, gave) = channel::unbounded();
        let (running_tx, running) = channel::bounded(1);
        let asker = AskWhenDropped(monitor.clone(), ask, gave_tx);
        let killed = rt.spawn(move || {
            let _asker = asker;
            running_tx.send(()).unwrap();
            threadlet::sleep(Duration::from_secs(3600));
        });
        running.recv().unwrap();
        assert!(killed.abort());
        assert!(killed.join().unwrap_err().is_killed());
        // The destructor could not wait: it gave up, with no end heard.
        assert_eq!(gave.recv().unwrap(), ExitReason::Cancelled, "{ask:?}");
        watched.send(()).unwrap();
        watched_h.join().unwrap();
        let heard = within_watchdog("the shared monitor", move || monitor.recv());
        assert_eq!(heard.reason, ExitReason::Normal, "{ask:?}");
    }
}
