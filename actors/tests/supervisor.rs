//! Supervisors: strategies restart exactly the right children in order, policies and
//! intensity, no queued message lost across restarts, ordered stop, nesting.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{until, within_watchdog};
use parking_lot::Mutex;
use threadlet::supervisor::{Child, Restart, Strategy, Supervisor, SupervisorMsg};
use threadlet::{Actor, Context, JoinError, Mailbox, Runtime, RuntimeExt};

type Log = Arc<Mutex<Vec<String>>>;

/// A child that logs its starts and ends, and panics on `0`.
fn logging_child(name: &'static str, log: &Log) -> (Child, threadlet::Addr<u32>) {
    let log = log.clone();
    Child::process(name, move |mb: Mailbox<u32>| {
        log.lock().push(format!("start {name}"));
        for n in &mb {
            if n == 0 {
                log.lock().push(format!("fail {name}"));
                panic!("{name} told to fail");
            }
        }
        log.lock().push(format!("stop {name}"));
    })
}

/// Waits until `count` entries of the log are `entry`.
fn wait_for(log: &Log, entry: &str, count: usize) {
    wait_for_log(log, entry, |log| {
        log.iter().filter(|e| *e == entry).count() >= count
    });
}

/// Waits until the log satisfies `done`; fails with the log, naming `what`, after 20 s.
fn wait_for_log(log: &Log, what: &str, done: impl Fn(&[String]) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !done(&log.lock()) {
        assert!(
            std::time::Instant::now() < deadline,
            "no {what:?} in {:?}",
            log.lock()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn is_start(entry: &str) -> bool {
    entry.starts_with("start ")
}

/// Waits until incarnation `n` of a child (counted by `starts`, at each start) has started
/// and is attached to the child's address (a restart leaves it unattached a moment).
fn until_attached<M: Send + 'static>(starts: &Arc<AtomicU64>, n: u64, addr: &threadlet::Addr<M>) {
    let (starts, addr) = (starts.clone(), addr.clone());
    within_watchdog("the next incarnation", move || {
        while starts.load(Ordering::SeqCst) < n || addr.actor_id().is_none() {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// A process child that counts its starts: `body` gets its mailbox and the number of starts
/// before this one (0 for the first).
fn counted_child<M, R>(
    name: &str,
    body: impl Fn(Mailbox<M>, u64) -> R + Send + Sync + 'static,
) -> (Child, threadlet::Addr<M>, Arc<AtomicU64>)
where
    M: Send + 'static,
    R: Send + 'static,
{
    let starts = Arc::new(AtomicU64::new(0));
    let s = starts.clone();
    let (child, addr) = Child::process(name, move |mb: Mailbox<M>| {
        body(mb, s.fetch_add(1, Ordering::SeqCst))
    });
    (child, addr, starts)
}

/// Stops a supervisor, which must end cleanly.
fn stop(sup_addr: &threadlet::Addr<SupervisorMsg>, h: threadlet::JoinHandle<()>) {
    sup_addr.send(SupervisorMsg::Stop).unwrap();
    within_watchdog("stop", move || h.join().unwrap());
}

/// The two kinds of child that the strategy tests run.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Process,
    Handler,
}

/// A handler child that logs as [`logging_child`] does: "start" in `started`, which the
/// supervisor waits for before it starts the next child, so its starts are logged in order.
fn logging_handler_child(name: &'static str, log: &Log) -> (Child, threadlet::Addr<u32>) {
    struct Logging {
        name: &'static str,
        log: Log,
    }
    impl Actor for Logging {
        type Msg = u32;
        fn started(&mut self, _: &mut Context<Self>) {
            self.log.lock().push(format!("start {}", self.name));
        }
        fn handle(&mut self, n: u32, _: &mut Context<Self>) {
            if n == 0 {
                self.log.lock().push(format!("fail {}", self.name));
                panic!("{} told to fail", self.name);
            }
        }
        fn stopped(&mut self) {
            self.log.lock().push(format!("stop {}", self.name));
        }
    }
    let log = log.clone();
    Child::handler(name, move || Logging {
        name,
        log: log.clone(),
    })
}

/// Starts a, b and c under `strategy`, fails b once, waits for the restarts (as many starts as
/// `want` has), stops the supervisor and returns what the children logged.
fn run_strategy(strategy: Strategy, kind: Kind, want: &[&str]) -> Vec<String> {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let log: Log = Arc::default();
    let child = match kind {
        Kind::Process => logging_child,
        Kind::Handler => logging_handler_child,
    };
    let (a, _) = child("a", &log);
    let (b, b_addr) = child("b", &log);
    let (c, _) = child("c", &log);
    let mut sup = Supervisor::new(strategy);
    sup.add(a).add(b).add(c);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    for name in ["a", "b", "c"] {
        wait_for(&log, &format!("start {name}"), 1);
    }
    b_addr.send(0).unwrap();
    let wanted = want.iter().filter(|e| is_start(e)).count();
    wait_for_log(&log, "every start", |log| {
        log.iter().filter(|e| is_start(e)).count() >= wanted
    });
    sup_addr.send(SupervisorMsg::Stop).unwrap();
    within_watchdog("supervisor stop", move || h.join().unwrap());
    log.lock().clone()
}

/// Checks a strategy's log. A handler child's "start" is logged in `started`, before the
/// next child starts, so its log is exact. A process child's order is promised only for the
/// moment it begins to run (it has no `init`); its "start" line comes just after, so two
/// children started one after the other may log in either order on two workers. So for
/// process children each run of consecutive "start" lines is compared as a set, and the
/// rest exactly.
fn assert_strategy_log(kind: Kind, log: &[String], want: &[&str]) {
    let runs_sorted = |log: &mut Vec<String>| {
        for run in log.chunk_by_mut(|a, b| is_start(a) && is_start(b)) {
            run.sort();
        }
    };
    let mut got = log.to_vec();
    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    if let Kind::Process = kind {
        runs_sorted(&mut got);
        runs_sorted(&mut want);
    }
    assert_eq!(got, want, "{kind:?} children");
}

#[test]
fn one_for_one_restarts_only_the_failed_child() {
    for kind in [Kind::Handler, Kind::Process] {
        #[rustfmt::skip]
        let want = ["start a", "start b", "start c", "fail b", "start b", "stop c", "stop b", "stop a"];
        let log = run_strategy(Strategy::OneForOne, kind, &want);
        assert_strategy_log(kind, &log, &want);
    }
}

#[test]
fn one_for_all_restarts_every_child_in_order() {
    for kind in [Kind::Handler, Kind::Process] {
        // a and c are killed (no "stop" line), then all three start again in order.
        #[rustfmt::skip]
        let want = [
            "start a", "start b", "start c", "fail b", "start a", "start b", "start c",
            "stop c", "stop b", "stop a",
        ];
        let log = run_strategy(Strategy::OneForAll, kind, &want);
        assert_strategy_log(kind, &log, &want);
    }
}

#[test]
fn rest_for_one_restarts_the_failed_child_and_those_after_it() {
    for kind in [Kind::Handler, Kind::Process] {
        #[rustfmt::skip]
        let want = [
            "start a", "start b", "start c", "fail b", "start b", "start c",
            "stop c", "stop b", "stop a",
        ];
        let log = run_strategy(Strategy::RestForOne, kind, &want);
        assert_strategy_log(kind, &log, &want);
    }
}

#[test]
fn no_queued_message_is_lost_across_restarts() {
    const MESSAGES: u64 = 100_000;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let received = Arc::new(AtomicU64::new(0));
    let sum = Arc::new(AtomicU64::new(0));
    let (r, s) = (received.clone(), sum.clone());
    let (child, addr) = Child::process("flaky", move |mb: Mailbox<u64>| {
        for n in &mb {
            if n % 1000 == 999 {
                panic!("every 1,000th message fails");
            }
            r.fetch_add(1, Ordering::Relaxed);
            s.fetch_add(n, Ordering::Relaxed);
        }
    });
    let mut sup = Supervisor::new(Strategy::OneForOne).intensity(1_000, Duration::from_secs(60));
    sup.add(child);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let sender = std::thread::spawn(move || {
        for n in 0..MESSAGES {
            addr.send(n).unwrap(); // the address stays valid across the restarts
        }
    });
    sender.join().unwrap();
    let failing = MESSAGES / 1000;
    let want_sum: u64 = (0..MESSAGES).filter(|n| n % 1000 != 999).sum();
    within_watchdog("flaky child", move || {
        while received.load(Ordering::Relaxed) < MESSAGES - failing {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(received.load(Ordering::Relaxed), MESSAGES - failing);
        assert_eq!(sum.load(Ordering::Relaxed), want_sum);
        sup_addr.send(SupervisorMsg::Stop).unwrap();
        h.join().unwrap();
    });
}

/// A child that counts the messages it handles and panics on `PANIC`, under a supervisor
/// that allows many restarts.
fn counting_child(
    workers: usize,
) -> (
    Runtime,
    Arc<AtomicU64>,
    threadlet::Addr<u32>,
    threadlet::Addr<SupervisorMsg>,
    threadlet::JoinHandle<()>,
) {
    const PANIC: u32 = 0;
    let rt = Runtime::builder().workers(workers).build().unwrap();
    let handled = Arc::new(AtomicU64::new(0));
    let h = handled.clone();
    let (child, addr) = Child::process("counter", move |mb: Mailbox<u32>| {
        for n in &mb {
            if n == PANIC {
                panic!("told to fail");
            }
            h.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mut sup = Supervisor::new(Strategy::OneForOne).intensity(1_000, Duration::from_secs(60));
    sup.add(child);
    let (sup_addr, sup_h) = sup.start(&rt.handle()).unwrap();
    (rt, handled, addr, sup_addr, sup_h)
}

/// `Stop` drains what each child's mailbox accepted, also for a child that had ended and was
/// waiting for its restart when the stop came, and for one that panics on a message while it
/// drains: messages queued behind are handled by another incarnation, as during the
/// supervisor's life. (Its select took `Stop` before the child's `Down` about half the time,
/// and the queue of ten was then dropped unread; a panic while draining dropped the rest.)
#[test]
fn a_stop_drains_the_queue_of_a_child_waiting_for_its_restart() {
    for round in 0..40 {
        let workers = 1 + round % 2;
        // The child has ended (a panic) and is due to restart when the ten messages and the
        // stop arrive.
        let (rt, handled, addr, sup_addr, sup_h) = counting_child(workers);
        while addr.actor_id().is_none() {
            std::thread::yield_now();
        }
        let down = addr.monitor();
        addr.send(0).unwrap();
        within_watchdog("the child's end", move || down.recv());
        for n in 1..=10 {
            addr.send(n).unwrap();
        }
        sup_addr.send(SupervisorMsg::Stop).unwrap();
        within_watchdog("the stop", move || sup_h.join().unwrap());
        assert_eq!(handled.load(Ordering::SeqCst), 10, "round {round}");
        drop(rt);

        // The child panics on the fifth of ten messages, as likely while it drains for the
        // stop as before: the five behind it are handled either way.
        let (rt, handled, addr, sup_addr, sup_h) = counting_child(workers);
        for n in [1, 2, 3, 4, 0, 5, 6, 7, 8, 9] {
            addr.send(n).unwrap();
        }
        sup_addr.send(SupervisorMsg::Stop).unwrap();
        within_watchdog("the stop", move || sup_h.join().unwrap());
        assert_eq!(handled.load(Ordering::SeqCst), 9, "round {round}");
        drop(rt);
    }
}

/// A stop's drain restart keeps the mailbox closed: once a send is refused, none is accepted
/// again (a loan reopened it, so a sender refused at the close was accepted again by the
/// incarnation started to drain it, and a steady sender kept the stop from ending); and every
/// send accepted is handled but the ones the child panics on.
#[test]
fn a_stop_keeps_the_mailbox_closed_while_a_restart_drains_it() {
    use std::sync::atomic::AtomicBool;
    for round in 0..20 {
        let (rt, handled, addr, sup_addr, sup_h) = counting_child(1 + round % 2);
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        // Every 50th message makes the child panic, before the stop and while it drains.
        let sender = std::thread::spawn(move || {
            let (mut accepted, mut refused_then_accepted, mut refused) = (0u64, false, false);
            for i in 0..2_000u32 {
                if d.load(Ordering::SeqCst) {
                    break;
                }
                let n = u32::from(i % 50 != 49);
                match addr.send(n) {
                    Ok(()) if refused => refused_then_accepted = true,
                    Ok(()) => accepted += u64::from(n),
                    Err(_) => refused = true,
                }
                std::thread::sleep(Duration::from_micros(20));
            }
            (accepted, refused_then_accepted)
        });
        std::thread::sleep(Duration::from_millis(5));
        sup_addr.send(SupervisorMsg::Stop).unwrap();
        within_watchdog("the stop", move || sup_h.join().unwrap());
        done.store(true, Ordering::SeqCst);
        let (accepted, refused_then_accepted) = sender.join().unwrap();
        assert!(
            !refused_then_accepted,
            "round {round}: a refused sender was accepted again"
        );
        assert_eq!(handled.load(Ordering::SeqCst), accepted, "round {round}");
        drop(rt);
    }
}

/// An incarnation that ends normally on a stop, leaving messages it did not read, is not
/// started again to read them (its leftovers are dropped, as an actor's that ends without
/// reading its mailbox), and the stop ends normally: restarting it ran into the intensity and
/// failed a graceful stop.
#[test]
fn a_child_that_ends_normally_on_a_stop_is_not_started_again() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (child, addr, starts) = counted_child("quitter", move |mb: Mailbox<u32>, _| {
        // Reads nothing; ends once its mailbox is closed.
        while !mb.is_closed() {
            threadlet::sleep(Duration::from_millis(1));
        }
    });
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(child);
    let (sup_addr, sup_h) = sup.start(&rt.handle()).unwrap();
    for n in 1..=50 {
        addr.send(n).unwrap();
    }
    sup_addr.send(SupervisorMsg::Stop).unwrap();
    let r = within_watchdog("the stop", move || sup_h.join());
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(starts.load(Ordering::SeqCst), 1);
}

/// Sends the supervisor `Stop`, waits until the stop has closed the child's mailbox (`addr`),
/// then opens the child's gate (`open`: its first incarnation waits on it, so that it drains
/// for the stop, not before) and joins the supervisor.
fn stop_then_open(
    sup_addr: &threadlet::Addr<SupervisorMsg>,
    sup_h: threadlet::JoinHandle<()>,
    addr: threadlet::Addr<u32>,
    open: &std::sync::atomic::AtomicBool,
) -> Result<(), JoinError> {
    sup_addr.send(SupervisorMsg::Stop).unwrap();
    within_watchdog("the stop closing the mailbox", move || {
        while !addr.is_closed() {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    open.store(true, Ordering::SeqCst);
    within_watchdog("the stop", move || sup_h.join())
}

/// A child that panics on every message it drains for a stop is started again for the rest
/// only as far as the intensity allows: past it the supervisor fails (its queue dropped), and
/// its other children are stopped all the same. (The stop ended normally before, dropping the
/// queue at the first panic.)
#[test]
fn a_stop_that_goes_past_the_intensity_while_draining_fails() {
    use std::sync::atomic::AtomicBool;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let open = Arc::new(AtomicBool::new(false));
    let o = open.clone();
    let (crasher, addr) = Child::process("crasher", move |mb: Mailbox<u32>| {
        // The first incarnation waits until the stop has closed its mailbox.
        while !o.load(Ordering::SeqCst) {
            threadlet::sleep(Duration::from_millis(1));
        }
        if mb.recv().is_some() {
            panic!("fails on every message");
        }
    });
    let (sibling, sibling_addr) = Child::process("sibling", |mb: Mailbox<u32>| for _ in &mb {});
    let mut sup = Supervisor::new(Strategy::OneForOne).intensity(2, Duration::from_secs(60));
    sup.add(sibling).add(crasher);
    let (sup_addr, sup_h) = sup.start(&rt.handle()).unwrap();
    for n in 1..=5 {
        addr.send(n).unwrap();
    }
    let r = stop_then_open(&sup_addr, sup_h, addr, &open);
    assert!(r.as_ref().is_err_and(JoinError::is_panic), "{r:?}");
    assert_eq!(sibling_addr.send(1).map_err(|e| e.into_inner()), Err(1));
}

/// A child restarted to drain its queue for a stop that ends again without taking a message
/// (here, it fails as it starts) is not restarted for ever: the stop gives up on its queue, and
/// the supervisor fails, rather than drop the queue unseen.
#[test]
fn a_stop_gives_up_on_a_child_that_drains_nothing() {
    use std::sync::atomic::AtomicBool;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (open, started) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (o, st) = (open.clone(), started.clone());
    let (child, addr) = Child::process("starter", move |mb: Mailbox<u32>| {
        if st.swap(true, Ordering::SeqCst) {
            panic!("fails as it starts, every time after the first");
        }
        while !o.load(Ordering::SeqCst) {
            threadlet::sleep(Duration::from_millis(1));
        }
        if mb.recv().is_some() {
            panic!("fails on its first message");
        }
    });
    let mut sup = Supervisor::new(Strategy::OneForOne).intensity(100, Duration::from_secs(60));
    sup.add(child);
    let (sup_addr, sup_h) = sup.start(&rt.handle()).unwrap();
    for n in 1..=3 {
        addr.send(n).unwrap();
    }
    let r = stop_then_open(&sup_addr, sup_h, addr, &open);
    assert!(r.as_ref().is_err_and(JoinError::is_panic), "{r:?}");
}

#[test]
fn past_its_intensity_a_supervisor_gives_up_and_fails() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (child, _addr, starts) = counted_child("crasher", move |_mb: Mailbox<()>, _| {
        panic!("always fails");
    });
    let mut sup = Supervisor::new(Strategy::OneForOne).intensity(3, Duration::from_secs(60));
    sup.add(child);
    let (_sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let r = within_watchdog("intensity", move || h.join());
    assert!(r.as_ref().is_err_and(JoinError::is_panic));
    assert_eq!(starts.load(Ordering::SeqCst), 4); // the first start and three restarts
}

#[test]
fn transient_and_temporary_children_are_restarted_only_as_their_policy_says() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let log: Log = Arc::default();
    let (t, t_addr) = logging_child("transient", &log);
    let (tmp, tmp_addr) = logging_child("temporary", &log);
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(t.restart(Restart::Transient))
        .add(tmp.restart(Restart::Temporary));
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    wait_for(&log, "start temporary", 1);
    tmp_addr.send(0).unwrap(); // fails: never restarted
    t_addr.send(0).unwrap(); // fails: restarted
    wait_for(&log, "start transient", 2);
    std::thread::sleep(Duration::from_millis(20));
    sup_addr.send(SupervisorMsg::Stop).unwrap();
    within_watchdog("policies", move || h.join().unwrap());
    let log = log.lock().clone();
    assert_eq!(log.iter().filter(|e| *e == "start temporary").count(), 1);
    assert_eq!(log.iter().filter(|e| *e == "start transient").count(), 2);
}

/// A child that its policy does not restart is finished: a send to its address fails and
/// hands the message back (it used to be accepted into a queue nobody would read), and a
/// restart of the whole group does not start it again.
#[test]
fn a_child_its_policy_does_not_restart_refuses_sends_and_stays_down() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let log: Log = Arc::default();
    let (tmp, tmp_addr) = logging_child("temporary", &log);
    // Ends normally on `1`.
    let t_log = log.clone();
    let (t, t_addr) = Child::process("transient", move |mb: Mailbox<u32>| {
        t_log.lock().push("start transient".to_owned());
        while mb.recv() != Some(1) {}
        t_log.lock().push("stop transient".to_owned());
    });
    let (p, p_addr) = logging_child("permanent", &log);
    let mut sup = Supervisor::new(Strategy::OneForAll);
    sup.add(tmp.restart(Restart::Temporary))
        .add(t.restart(Restart::Transient))
        .add(p);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    wait_for(&log, "start permanent", 1);
    tmp_addr.send(0).unwrap(); // fails: not restarted
    wait_for(&log, "fail temporary", 1);
    let refused = |addr: &threadlet::Addr<u32>| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            match addr.send(7) {
                Err(e) => return e.into_inner(),
                Ok(()) => assert!(std::time::Instant::now() < deadline, "still accepted"),
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    assert_eq!(refused(&tmp_addr), 7);
    assert!(tmp_addr.is_closed());
    // A transient child that ends normally is finished too.
    t_addr.send(1).unwrap();
    wait_for(&log, "stop transient", 1);
    assert_eq!(refused(&t_addr), 7);
    // The permanent child fails: the group restarts, without the finished two.
    p_addr.send(0).unwrap();
    wait_for(&log, "start permanent", 2);
    std::thread::sleep(Duration::from_millis(20));
    sup_addr.send(SupervisorMsg::Stop).unwrap();
    within_watchdog("finished children", move || h.join().unwrap());
    let log = log.lock().clone();
    assert_eq!(
        log.iter().filter(|e| *e == "start temporary").count(),
        1,
        "{log:?}"
    );
    assert_eq!(
        log.iter().filter(|e| *e == "start transient").count(),
        1,
        "{log:?}"
    );
}

#[test]
fn a_child_that_ignores_the_stop_is_killed_after_its_shutdown_timeout() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (stubborn, _a) = Child::process("stubborn", |_mb: Mailbox<()>| {
        threadlet::sleep(Duration::from_secs(3600)); // never reads its mailbox
    });
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(stubborn.shutdown(Duration::from_millis(20)));
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    std::thread::sleep(Duration::from_millis(10));
    sup_addr.send(SupervisorMsg::Stop).unwrap();
    within_watchdog("stop timeout", move || h.join().unwrap());
}

struct Doubler;

impl Actor for Doubler {
    type Msg = (u64, threadlet::Reply<u64>);
    fn handle(&mut self, (n, reply): Self::Msg, _ctx: &mut Context<Self>) {
        assert!(n != 0, "zero is bad input");
        reply.send(n * 2);
    }
}

#[test]
fn nested_supervisors_and_handler_children() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let inner_addr = Arc::new(Mutex::new(None));
    let slot = inner_addr.clone();
    let (inner, _inner_sup) = Child::supervisor("inner", move || {
        let (doubler, addr) = Child::handler("doubler", || Doubler);
        *slot.lock() = Some(addr);
        let mut sup = Supervisor::new(Strategy::OneForOne);
        sup.add(doubler);
        sup
    });
    let mut outer = Supervisor::new(Strategy::OneForOne);
    outer.add(inner);
    let (outer_addr, h) = outer.start(&rt.handle()).unwrap();
    let doubler = loop {
        if let Some(a) = inner_addr.lock().clone() {
            break a;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(doubler.ask(|r| (21, r)), Ok(42));
    assert!(doubler.ask(|r| (0, r)).is_err()); // the handler panics, and is restarted
    assert_eq!(doubler.ask(|r| (5, r)), Ok(10));
    outer_addr.send(SupervisorMsg::Stop).unwrap();
    within_watchdog("nested stop", move || h.join().unwrap());
}

struct Logged {
    name: &'static str,
    log: Log,
}

impl Actor for Logged {
    type Msg = ();
    fn started(&mut self, _ctx: &mut Context<Self>) {
        self.log.lock().push(format!("started {}", self.name));
    }
    fn handle(&mut self, _: (), _ctx: &mut Context<Self>) {}
}

#[test]
fn handler_children_start_in_order_each_after_the_one_before_has_started() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let log: Log = Arc::default();
    let mut sup = Supervisor::new(Strategy::OneForOne);
    for name in ["a", "b", "c", "d"] {
        let log = log.clone();
        let (child, _addr) = Child::handler(name, move || Logged {
            name,
            log: log.clone(),
        });
        sup.add(child);
    }
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    wait_for(&log, "started d", 1);
    assert_eq!(
        *log.lock(),
        ["started a", "started b", "started c", "started d"]
    );
    sup_addr.send(SupervisorMsg::Stop).unwrap();
    within_watchdog("handler children stop", move || h.join().unwrap());
}

/// An incarnation's `Mailbox` may be dropped after the next incarnation has started (a handler
/// actor's program is dropped after its end is reported; a process child may hand its mailbox
/// away). That late drop must leave the next incarnation's record as the mailbox's waiter, or
/// the next message never wakes it: the hang this test once caught in the nested-supervisor
/// stop.
#[test]
fn a_late_drop_of_an_old_incarnations_mailbox_does_not_take_the_new_ones_wake_up() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (old_tx, old_rx) = std::sync::mpsc::channel::<Mailbox<u32>>();
    let (got_tx, got_rx) = std::sync::mpsc::channel::<&'static str>();
    let (old_tx, got_tx) = (Mutex::new(old_tx), Mutex::new(got_tx));
    let incarnations = AtomicU64::new(0);
    let (child, addr) = Child::process("late", move |mb: Mailbox<u32>| {
        if incarnations.fetch_add(1, Ordering::Relaxed) == 0 {
            // Ends normally with its mailbox still alive elsewhere: restarted (permanent).
            old_tx.lock().send(mb).unwrap();
            return;
        }
        got_tx.lock().send("second incarnation runs").unwrap();
        while let Some(n) = mb.recv() {
            assert_eq!(n, 7);
            got_tx.lock().send("woken with the message").unwrap();
        }
    });
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(child);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let old = old_rx.recv().unwrap();
    assert_eq!(got_rx.recv().unwrap(), "second incarnation runs");
    // Give the second incarnation time to park in `recv` (the case that lost the wake-up);
    // the test checks behaviour either way.
    std::thread::sleep(Duration::from_millis(20));
    drop(old);
    addr.send(7).unwrap();
    let got = within_watchdog("wake after a late drop", move || got_rx.recv().unwrap());
    assert_eq!(got, "woken with the message");
    stop(&sup_addr, h);
}

#[test]
fn a_supervised_address_names_the_latest_incarnation() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (ids_tx, ids_rx) = std::sync::mpsc::channel();
    let ids_tx = Mutex::new(ids_tx);
    let (child, addr) = Child::process("renamed", move |mb: Mailbox<u32>| {
        ids_tx.lock().send(threadlet::current().unwrap()).unwrap();
        if mb.recv() == Some(0) {
            panic!("restart me");
        }
    });
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(child);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let first = ids_rx.recv().unwrap();
    assert_eq!(addr.actor_id(), Some(first));
    addr.send(0).unwrap();
    let second = ids_rx.recv().unwrap();
    assert_ne!(first, second);
    // The supervisor attaches the address to the new incarnation right after spawning it.
    within_watchdog("address follows the restart", move || {
        while addr.actor_id() != Some(second) {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    stop(&sup_addr, h);
}

/// A supervisor dies with its children: a nested supervisor killed by its parent's group
/// restart, or aborted, takes its children down with it (they were left running, and the
/// restarted supervisor started a second set beside them).
#[test]
fn children_end_with_a_supervisor_that_is_killed() {
    use std::sync::atomic::AtomicUsize;

    /// Counts the grandchildren alive: one more while a `Live` is held.
    struct Live(Arc<AtomicUsize>);
    impl Drop for Live {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    /// Waits until (starts, alive) is `want`; returns what it is then.
    fn reach(started: &AtomicUsize, live: &AtomicUsize, want: (usize, usize)) -> (usize, usize) {
        let now = || (started.load(Ordering::SeqCst), live.load(Ordering::SeqCst));
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while now() != want && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        now()
    }

    let rt = Runtime::builder().workers(2).build().unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let live = Arc::new(AtomicUsize::new(0));
    let log: Log = Arc::default();
    let (s, l) = (started.clone(), live.clone());
    let (nested, _) = Child::supervisor("nested", move || {
        let (s, l) = (s.clone(), l.clone());
        // Never reads its mailbox: only a kill ends it.
        let (grandchild, _) = Child::process("grandchild", move |_mb: Mailbox<()>| {
            l.fetch_add(1, Ordering::SeqCst);
            s.fetch_add(1, Ordering::SeqCst);
            let _live = Live(l.clone());
            threadlet::sleep(Duration::from_secs(3600));
        });
        let mut sup = Supervisor::new(Strategy::OneForOne);
        sup.add(grandchild.shutdown(Duration::from_millis(50)));
        sup
    });
    let (sibling, sibling_addr) = logging_child("sibling", &log);
    let mut top = Supervisor::new(Strategy::OneForAll);
    top.add(nested).add(sibling);
    let (top_addr, h) = top.start(&rt.handle()).unwrap();
    wait_for(&log, "start sibling", 1);
    assert_eq!(reach(&started, &live, (1, 1)), (1, 1));
    sibling_addr.send(0).unwrap(); // the group restarts: the nested supervisor is killed
    assert_eq!(
        reach(&started, &live, (2, 1)),
        (2, 1),
        "(grandchildren started, alive): the first outlived its supervisor"
    );
    top_addr.send(SupervisorMsg::Stop).unwrap();
    within_watchdog("stop", move || h.join().unwrap());
    assert_eq!(reach(&started, &live, (2, 0)), (2, 0));
}

/// OTP: a `Temporary` child is never restarted, not even when a sibling's failure restarts
/// the whole group; it is finished, and its address refuses sends.
#[test]
fn a_temporary_child_taken_down_by_a_group_restart_is_not_started_again() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let log: Log = Arc::default();
    let (tmp, tmp_addr) = logging_child("temporary", &log);
    let (p, p_addr) = logging_child("permanent", &log);
    let mut sup = Supervisor::new(Strategy::OneForAll);
    sup.add(tmp.restart(Restart::Temporary)).add(p);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    wait_for(&log, "start permanent", 1);
    p_addr.send(0).unwrap();
    wait_for(&log, "start permanent", 2);
    assert_eq!(tmp_addr.send(5).map_err(|e| e.into_inner()), Err(5));
    stop(&sup_addr, h);
    let log = log.lock().clone();
    assert_eq!(
        log.iter().filter(|e| *e == "start temporary").count(),
        1,
        "{log:?}"
    );
}

/// A link and a trap belong to the incarnation that made them. One that linked itself and
/// ended normally must not take its successor down when the partner fails, and one that
/// trapped exits must not shield a successor that did not.
#[test]
fn links_and_traps_do_not_outlive_the_incarnation_that_made_them() {
    use threadlet::RuntimeExt;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let failing = || {
        rt.spawn_actor(|mb: Mailbox<u8>| {
            if mb.recv() == Some(0) {
                panic!("partner fails");
            }
        })
    };
    let (first_partner, _fp) = failing();
    let (second_partner, _sp) = failing();
    let (fp, sp) = (first_partner.clone(), second_partner.clone());
    let (child, addr, starts) = counted_child("child", move |mb: Mailbox<u8>, start| {
        match start {
            // Links to the first partner, and ends normally.
            0 => {
                mb.addr().link(&fp);
                return;
            }
            // Traps exits when told to, and ends normally.
            1 => {
                while mb.recv() != Some(1) {}
                drop(mb.trap_exits());
                return;
            }
            // Links to the second partner, not trapping.
            2 => mb.addr().link(&sp),
            _ => {}
        }
        while mb.recv().is_some() {}
    });
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(child);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let attached = |n: u64| {
        until_attached(&starts, n, &addr);
        addr.monitor()
    };
    let second = attached(2);
    first_partner.send(0).unwrap(); // its link was the first incarnation's
    assert_eq!(second.recv_timeout(Duration::from_millis(300)), None);
    addr.send(1).unwrap(); // the second traps, and ends
    assert!(second.recv().reason.is_normal());
    let third = attached(3);
    second_partner.send(0).unwrap(); // linked, not trapping: taken down with it
    let down = within_watchdog("the linked failure", move || third.recv());
    assert_eq!(down.reason, threadlet::ExitReason::Killed);
    stop(&sup_addr, h);
}

/// A restarted incarnation may run before its spawner attaches it to the mailbox. Until then
/// the mailbox kept the last incarnation's end: a monitor the new one made of itself fired at
/// once with the old end (as did a name's registration, and a link). Many quick restarts, each
/// incarnation checking its own monitor at once; it must never have fired.
#[test]
fn a_restarted_incarnation_never_sees_its_predecessors_end_as_its_own() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    const RESTARTS: u64 = 3_000;
    let starts = Arc::new(AtomicU64::new(0));
    let seen_dead = Arc::new(AtomicU64::new(0));
    let (s, d) = (starts.clone(), seen_dead.clone());
    let (child, _addr) = Child::process("quick", move |mb: Mailbox<()>| {
        if mb.addr().monitor().try_recv().is_some() {
            d.fetch_add(1, Ordering::SeqCst);
        }
        if s.fetch_add(1, Ordering::SeqCst) >= RESTARTS {
            while mb.recv().is_some() {}
        }
    });
    let mut sup =
        Supervisor::new(Strategy::OneForOne).intensity(usize::MAX, Duration::from_secs(1));
    sup.add(child);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    within_watchdog("quick restarts", move || {
        while starts.load(Ordering::SeqCst) <= RESTARTS {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    stop(&sup_addr, h);
    assert_eq!(seen_dead.load(Ordering::SeqCst), 0);
}

/// "Close, then drain" in a restarted child: the next incarnation gets its mailbox open again.
/// It found it closed, ended at once, and was restarted until the supervisor gave up.
#[test]
fn a_child_that_closed_its_mailbox_is_restarted_with_it_open() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (got_tx, got_rx) = std::sync::mpsc::channel();
    let got_tx = Mutex::new(got_tx);
    let (child, addr, starts) = counted_child("closer", move |mb: Mailbox<u32>, start| {
        if start == 0 {
            mb.close();
            for _ in &mb {} // drains, then ends normally: restarted
            return;
        }
        if let Some(n) = mb.recv() {
            let _ = got_tx.lock().send(n);
        }
        while mb.recv().is_some() {}
    });
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(child);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let sent = within_watchdog("a send to the second incarnation", move || {
        while starts.load(Ordering::SeqCst) < 2 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Refused only while the first one's close stands.
        while addr.send(7).is_err() {
            std::thread::sleep(Duration::from_millis(1));
        }
        got_rx.recv_timeout(Duration::from_secs(20))
    });
    assert_eq!(sent, Ok(7));
    stop(&sup_addr, h);
}

/// An incarnation that hands its mailbox on (here to a helper actor) and ends: the next one
/// must be the mailbox's one receiver. The old one kept receiving beside it (two receivers,
/// each overwriting the other's waiter, so that one could miss its wake-up for good); it now
/// receives nothing, as from a closed mailbox.
#[test]
fn a_mailbox_handed_on_by_an_ended_incarnation_receives_nothing_more() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let starts = Arc::new(AtomicU64::new(0));
    let log: Log = Arc::default();
    let (s, l) = (starts.clone(), log.clone());
    let (child, addr) = Child::process("handing-on", move |mb: Mailbox<u32>| {
        if s.fetch_add(1, Ordering::SeqCst) == 0 {
            let l = l.clone();
            let (receiving_tx, receiving) = threadlet::channel::bounded::<()>(1);
            threadlet::spawn(move || {
                receiving_tx.send(()).unwrap();
                while let Some(n) = mb.recv() {
                    l.lock().push(format!("old {n}"));
                }
                l.lock().push("old ended".to_owned());
            });
            receiving.recv().unwrap();
            threadlet::sleep(Duration::from_millis(20)); // the helper waits in `recv`
            return; // ends normally: restarted
        }
        while let Some(n) = mb.recv() {
            l.lock().push(format!("new {n}"));
        }
    });
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(child);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    until_attached(&starts, 2, &addr);
    for n in 0..20 {
        addr.send(n).unwrap();
    }
    wait_for(&log, "new 19", 1);
    wait_for(&log, "old ended", 1);
    stop(&sup_addr, h);
    let log = log.lock().clone();
    assert!(
        !log.iter()
            .any(|e| e.starts_with("old ") && e != "old ended"),
        "{log:?}"
    );
    assert_eq!(
        log.iter().filter(|e| e.starts_with("new ")).count(),
        20,
        "{log:?}"
    );
}

/// A finished child's mailbox closes for good, and whatever waits on it hears of it: here a
/// helper the child handed its mailbox to, parked in `recv`, which slept on after the close.
#[test]
fn a_receiver_parked_on_a_finished_childs_mailbox_sees_it_closed() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (ended_tx, ended) = std::sync::mpsc::channel();
    let ended_tx = Mutex::new(ended_tx);
    let (child, _addr) = Child::process("hands-on", move |mb: Mailbox<u32>| {
        let ended_tx = ended_tx.lock().clone();
        let (receiving_tx, receiving) = threadlet::channel::bounded::<()>(1);
        threadlet::spawn(move || {
            receiving_tx.send(()).unwrap();
            let got = mb.recv();
            let _ = ended_tx.send(got);
        });
        receiving.recv().unwrap();
        threadlet::sleep(Duration::from_millis(20)); // the helper waits in `recv`
        // Ends normally: a temporary child is finished, its mailbox closed.
    });
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(child.restart(Restart::Temporary));
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let got = ended.recv_timeout(Duration::from_secs(20));
    stop(&sup_addr, h);
    assert_eq!(got, Ok(None));
}

/// A supervisor killed while it waits for a child to start (an ordered start: a handler
/// child's `started` still running) takes that child down too: it has no record of it yet
/// to kill it by, and the child ran on, ownerless.
#[test]
fn a_child_still_starting_ends_with_a_supervisor_that_is_killed() {
    use std::sync::atomic::AtomicBool;

    /// Its `started` waits on a channel nobody sends on.
    struct Slow(Option<threadlet::channel::Receiver<()>>, Arc<AtomicBool>);
    impl Actor for Slow {
        type Msg = ();
        fn started(&mut self, _: &mut Context<Self>) {
            self.1.store(true, Ordering::SeqCst);
            if let Some(rx) = self.0.take() {
                let _ = rx.recv();
            }
        }
        fn handle(&mut self, _: (), _: &mut Context<Self>) {}
    }

    let rt = Runtime::builder().workers(2).build().unwrap();
    let (gate_tx, gate_rx) = threadlet::channel::bounded::<()>(1);
    let gate_rx = Mutex::new(Some(gate_rx));
    let starting = Arc::new(AtomicBool::new(false));
    let s = starting.clone();
    let (child, addr) = Child::handler("slow", move || Slow(gate_rx.lock().take(), s.clone()));
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(child);
    let (_sup_addr, h) = sup.start(&rt.handle()).unwrap();
    within_watchdog("the child's start", {
        let (starting, addr) = (starting.clone(), addr.clone());
        move || {
            while !starting.load(Ordering::SeqCst) || addr.actor_id().is_none() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let child = addr.monitor();
    h.abort(); // the supervisor, waiting for `started` to return
    let down = child.recv_timeout(Duration::from_secs(20));
    assert_eq!(down.map(|d| d.reason), Some(threadlet::ExitReason::Killed));
    drop(gate_tx);
}

/// Holds its supervisor in the ordered start until the gate opens: its `started` waits there.
struct HeldAtStart(threadlet::channel::Receiver<()>);

impl Actor for HeldAtStart {
    type Msg = ();
    fn started(&mut self, _ctx: &mut Context<Self>) {
        let _ = self.0.recv();
    }
    fn handle(&mut self, _: (), _: &mut Context<Self>) {}
}

/// A child that will not be restarted (a `Temporary` one's end, a `Transient` one's normal
/// end) has its mailbox closed as it ends, before its monitors hear of it: a send made after
/// the `Down` hands its message back, even while the supervisor has not yet looked at the end.
/// (The supervisor is held busy starting a later child; before, the mailbox stayed open until
/// the supervisor closed it for good, and a send in between was accepted, then dropped.)
#[test]
fn a_child_that_will_not_restart_refuses_sends_from_its_end() {
    within_watchdog("sends after a finished child's end", || {
        for policy in [Restart::Temporary, Restart::Transient] {
            let rt = Runtime::builder().workers(2).build().unwrap();
            let (once, once_addr) = Child::process("once", |mb: Mailbox<u32>| mb.recv());
            let (gate, gate_rx) = threadlet::channel::unbounded::<()>();
            let (held, _) = Child::handler("held", move || HeldAtStart(gate_rx.clone()));
            let mut sup = Supervisor::new(Strategy::OneForOne);
            sup.add(once.restart(policy));
            sup.add(held);
            let (sup_addr, sup_h) = sup.start(&rt.handle()).unwrap();
            while once_addr.actor_id().is_none() {
                std::thread::sleep(Duration::from_millis(1));
            }
            let down = once_addr.monitor();
            once_addr.send(1).unwrap();
            assert!(down.recv().reason.is_normal());
            assert!(once_addr.is_closed(), "{policy:?}: open after its end");
            assert_eq!(
                once_addr.send(2).map_err(|e| e.into_inner()),
                Err(2),
                "{policy:?}: a send after the end was accepted"
            );
            gate.send(()).unwrap();
            sup_addr.send(SupervisorMsg::Stop).unwrap();
            sup_h.join().unwrap();
        }
    });
}

/// A monitor made through a child's address before any incarnation attached hears `NoProc`
/// once the child is dropped unstarted (its supervisor gone before starting it, or never
/// made): the mailbox is closed for good, and no end would ever come while the address keeps
/// it (the monitor waited forever).
#[test]
fn a_monitor_of_a_child_that_never_started_hears_noproc() {
    within_watchdog("a monitor of a child never started", || {
        let (child, addr) = Child::process("never", |mb: Mailbox<u8>| mb.recv());
        let monitor = addr.monitor();
        drop(child);
        assert_eq!(addr.send(1).map_err(|e| e.into_inner()), Err(1));
        assert_eq!(monitor.recv().reason, threadlet::ExitReason::NoProc);
        // And one made after the close hears it at once.
        assert_eq!(addr.monitor().recv().reason, threadlet::ExitReason::NoProc);
    });
}

/// A `Transient` child that ended normally stays finished when a sibling's failure restarts
/// the group: its mailbox, closed at its end, is not opened again for an incarnation it was
/// told it would not get. (The supervisor may hear the sibling's end first, and it judged the
/// child by its kill in the group restart: it restarted it, reopening the mailbox that had
/// refused a send.) Which end the supervisor takes first varies: several rounds.
#[test]
fn a_group_restart_leaves_a_finished_transient_child_finished() {
    within_watchdog("a group restart and a finished child", || {
        for _ in 0..10 {
            let rt = Runtime::builder().workers(2).build().unwrap();
            let (failing, failing_addr) = Child::process("failing", |mb: Mailbox<u32>| {
                if mb.recv() == Some(0) {
                    panic!("told to fail");
                }
            });
            let (once, once_addr) = Child::process("once", |mb: Mailbox<u32>| mb.recv());
            let (gate, gate_rx) = threadlet::channel::unbounded::<()>();
            let (held, held_addr) = Child::handler("held", move || HeldAtStart(gate_rx.clone()));
            let mut sup =
                Supervisor::new(Strategy::OneForAll).intensity(100, Duration::from_secs(60));
            sup.add(failing);
            sup.add(once.restart(Restart::Transient));
            sup.add(held);
            let (sup_addr, sup_h) = sup.start(&rt.handle()).unwrap();
            for a in [&failing_addr, &once_addr] {
                while a.actor_id().is_none() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            let (failed, ended) = (failing_addr.monitor(), once_addr.monitor());
            failing_addr.send(0).unwrap();
            once_addr.send(1).unwrap();
            assert!(!failed.recv().reason.is_normal());
            assert!(ended.recv().reason.is_normal());
            assert_eq!(once_addr.send(2).map_err(|e| e.into_inner()), Err(2));
            // The supervisor, out of the held child's start, takes both ends and restarts the
            // group: the held child's next incarnation is the mark that it has.
            let first_held = held_addr.actor_id();
            drop(gate);
            while held_addr.actor_id() == first_held {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(
                once_addr.is_closed(),
                "the finished child's mailbox was opened again"
            );
            sup_addr.send(SupervisorMsg::Stop).unwrap();
            sup_h.join().unwrap();
        }
    });
}

/// A child whose `trap_exits_as` closure holds an address of its own mailbox is restarted: the
/// restart lets go of the last incarnation's trap after unlocking the mailbox (dropping the
/// closure, and the address in it, under the mailbox's lock deadlocked the supervisor's worker
/// on that same lock, and the next incarnation never started).
#[test]
fn a_child_trapping_exits_as_messages_with_its_own_address_is_restarted() {
    // Leaked, with the handles below: had the supervisor's worker stuck in the lock, dropping
    // them would wait for it, and the test hang instead of failing.
    let rt: &'static Runtime = Box::leak(Box::new(Runtime::builder().workers(2).build().unwrap()));
    let (started, starts) = std::sync::mpsc::channel::<()>();
    let started = std::sync::Mutex::new(started);
    let (child, addr) = Child::process("trapper", move |mb: Mailbox<u32>| {
        let me = mb.addr();
        mb.trap_exits_as(move |_| {
            let _held = &me;
            1
        });
        started.lock().unwrap().send(()).unwrap();
        if mb.recv() == Some(0) {
            panic!("restart me");
        }
    });
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(child);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    within_watchdog(
        "a restart of a child that trapped exits as messages",
        move || {
            starts.recv().unwrap();
            addr.send(0).unwrap();
            starts.recv().unwrap(); // the next incarnation started
            sup_addr.send(SupervisorMsg::Stop).unwrap();
            h.join().unwrap();
        },
    );
}

/// A link through a supervised child's address names the incarnation attached when it is
/// made. Made just as that incarnation ends, and the child is started again, the link was
/// read against one incarnation and its hook kept for the next one, which it then ignored as
/// not its own: the actor that linked was never taken down. Here the child fails within a
/// moment of each start, and every actor that links to it must be killed.
#[test]
fn a_link_made_as_a_supervised_child_fails_always_takes_the_linker_down() {
    use threadlet::RuntimeExt;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (child, addr) = Child::process("flaky", |_mb: Mailbox<()>| {
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_micros(50) {
            std::hint::spin_loop();
        }
        panic!("fails soon after each start");
    });
    let mut sup =
        Supervisor::new(Strategy::OneForOne).intensity(usize::MAX, Duration::from_secs(1));
    sup.add(child);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let linkers: Vec<_> = (0..4)
        .map(|_| {
            let (handle, addr) = (rt.handle(), addr.clone());
            std::thread::spawn(move || {
                let mut spared = 0;
                for _ in 0..250 {
                    let (linker, done) = handle.spawn_actor(|mb: Mailbox<()>| mb.recv());
                    linker.link(&addr);
                    let down = threadlet::Monitor::of(&done).recv_timeout(Duration::from_secs(5));
                    if down.is_none_or(|d| d.reason != threadlet::ExitReason::Killed) {
                        spared += 1;
                        linker.kill();
                    }
                }
                spared
            })
        })
        .collect();
    let spared: u32 = linkers.into_iter().map(|t| t.join().unwrap()).sum();
    sup_addr.send(SupervisorMsg::Stop).unwrap();
    drop(within_watchdog("stop", move || h.join()));
    assert_eq!(
        spared, 0,
        "actors linked to a failing child and never killed, of 1,000"
    );
}

/// A link made through a supervised child's address before its first incarnation attaches
/// (the supervisor not started yet) is that first incarnation's, as one made later is the
/// incarnation's attached then: it must neither kill the incarnations after it nor count
/// against the restart intensity twice for one failure.
#[test]
fn a_link_made_before_the_first_incarnation_is_that_incarnations_only() {
    use threadlet::RuntimeExt;
    // The child ends normally on 1 and fails on 0; the partner fails on 0.
    let setup = |intensity: usize| {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (child, addr, starts) = counted_child("child", move |mb: Mailbox<u8>, _| {
            if mb.recv() == Some(0) {
                panic!("the child fails");
            }
        });
        let (partner, partner_done) = rt.spawn_actor(|mb: Mailbox<u8>| {
            if mb.recv() == Some(0) {
                panic!("the partner fails");
            }
        });
        partner.link(&addr); // before the supervisor starts the child
        let mut sup =
            Supervisor::new(Strategy::OneForOne).intensity(intensity, Duration::from_secs(60));
        sup.add(child);
        let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
        until_attached(&starts, 1, &addr);
        (rt, starts, addr, partner, partner_done, sup_addr, h)
    };

    // The first incarnation ends normally, and is started again; then the partner fails.
    let (_rt, starts, addr, partner, partner_done, sup_addr, h) = setup(10);
    addr.send(1).unwrap();
    until_attached(&starts, 2, &addr);
    let second = addr.monitor();
    partner.send(0).unwrap();
    assert!(partner_done.join().unwrap_err().is_panic());
    assert_eq!(
        second.recv_timeout(Duration::from_millis(300)),
        None,
        "the second incarnation was never linked"
    );
    stop(&sup_addr, h);

    // The first incarnation fails, which takes the partner down; the partner's end must not
    // take the second incarnation down too (two restarts, past an intensity of one).
    let (_rt, starts, addr, _partner, partner_done, sup_addr, h) = setup(1);
    addr.send(0).unwrap();
    assert!(partner_done.join().unwrap_err().is_killed());
    until_attached(&starts, 2, &addr);
    let second = addr.monitor();
    assert_eq!(
        second.recv_timeout(Duration::from_millis(300)),
        None,
        "the second incarnation was never linked"
    );
    stop(&sup_addr, h);
}

/// A link made before a supervised child's first start is the first incarnation's, record and
/// all: made again once that incarnation runs, from either side, it adds nothing. The first
/// start threw the child's record away and kept the hooks, so a second link was made, and a
/// trapping partner heard the one failure twice.
#[test]
fn a_link_made_before_the_first_start_is_not_made_again_after_it() {
    use threadlet::RuntimeExt;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (child, addr, starts) = counted_child("child", move |mb: Mailbox<u8>, _| {
        if mb.recv() == Some(0) {
            panic!("the child fails");
        }
    });
    let (trapping_tx, trapping) = std::sync::mpsc::channel();
    let (partner, heard) = rt.spawn_actor(move |mb: Mailbox<u8>| {
        let exits = mb.trap_exits();
        trapping_tx.send(()).unwrap();
        let _ = mb.recv(); // told once the child has failed
        std::iter::from_fn(|| exits.recv_timeout(Duration::from_millis(300)).ok()).count()
    });
    trapping.recv().unwrap();
    partner.link(&addr); // before the supervisor starts the child
    let mut sup = Supervisor::new(Strategy::OneForOne).intensity(10, Duration::from_secs(60));
    sup.add(child);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    until_attached(&starts, 1, &addr);
    addr.link(&partner); // the same link, from the child's side
    let first = addr.monitor();
    addr.send(0).unwrap();
    let failed = within_watchdog("the failure", move || first.recv());
    assert!(matches!(failed.reason, threadlet::ExitReason::Panicked(_)));
    partner.send(0).unwrap();
    let heard = within_watchdog("the partner", move || heard.join().unwrap());
    stop(&sup_addr, h);
    assert_eq!(heard, 1, "one link, one failure");
}

/// A handler child that stops as it starts (a `Permanent` child: restarted every time).
struct StopsAtStart;

impl Actor for StopsAtStart {
    type Msg = ();
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.stop();
    }
    fn handle(&mut self, _: (), _: &mut Context<Self>) {}
}

/// The runtime dropped while a supervisor restarts a child that ends at once, under every
/// scheduler, with both kinds of child. During shutdown each restart ended (or was refused) at
/// once and each end was ready without a park, so the supervisor's loop never suspended: the
/// drop waited on its worker for ever (with no intensity limit), or the supervisor failed
/// "past its intensity" on ends that were the shutdown's. It is now cancelled like any actor.
#[test]
fn a_runtime_dropped_during_a_restart_storm_cancels_the_supervisor() {
    use threadlet::Scheduler;
    for scheduler in [
        Scheduler::WorkStealing,
        Scheduler::GlobalQueue,
        Scheduler::Gil,
    ] {
        for handler in [true, false] {
            for round in 0..60 {
                let what = format!("{scheduler:?}, handler child {handler}, round {round}");
                let ended = common::within(common::WATCHDOG, &what, move || {
                    let rt = Runtime::builder()
                        .workers(1 + round % 2)
                        .scheduler(scheduler)
                        .build()
                        .unwrap();
                    let (child, _addr) = if handler {
                        Child::handler("ends", || StopsAtStart)
                    } else {
                        Child::process("ends", |_: Mailbox<()>| ())
                    };
                    let mut sup = Supervisor::new(Strategy::OneForOne)
                        .intensity(usize::MAX, Duration::from_secs(1));
                    sup.add(child);
                    let (_sup_addr, h) = sup.start(&rt.handle()).unwrap();
                    std::thread::sleep(Duration::from_millis(1));
                    drop(rt);
                    h.join()
                });
                let err = ended.expect_err("the supervisor never stops by itself");
                assert!(err.is_cancelled(), "{what}: {err}");
            }
        }
    }
}

/// A handler child that panics on every message.
struct PanicsOnEach;

impl Actor for PanicsOnEach {
    type Msg = u32;
    fn handle(&mut self, _: u32, _ctx: &mut Context<Self>) {
        panic!("a message this child cannot take");
    }
}

/// The runtime dropped while a stop drains a child that fails on every queued message (each
/// failure restarts it, as the stop's drain does): the shutdown's refusals of those restarts
/// are not the supervisor's failure, which ends `Cancelled`, as when the drop comes during a
/// restart storm (it failed with "left undrained at its stop" in about one run in ten).
#[test]
fn a_runtime_dropped_during_a_stops_drain_cancels_the_supervisor() {
    for round in 0..40 {
        let what = format!("round {round}");
        let ended = common::within(common::WATCHDOG, &what, move || {
            let rt = Runtime::builder().workers(1 + round % 2).build().unwrap();
            let (child, addr) = Child::handler("fails", || PanicsOnEach);
            let mut sup =
                Supervisor::new(Strategy::OneForOne).intensity(usize::MAX, Duration::from_secs(1));
            sup.add(child);
            let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
            for n in 0..20_000 {
                addr.send(n).unwrap();
            }
            sup_addr.send(SupervisorMsg::Stop).unwrap();
            std::thread::sleep(Duration::from_millis(2));
            drop(rt);
            h.join()
        });
        // A drain that finished first ends normally.
        if let Err(e) = ended {
            assert!(e.is_cancelled(), "{what}: {e}");
        }
    }
}

/// A handler child's factory that panics is that child's failed start (`NoStart`), decided by
/// its policy and the intensity like any failure: not the supervisor's panic, which took every
/// sibling down with it.
#[test]
fn a_handler_childs_factory_that_panics_is_a_failed_start_of_that_child() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let makes = Arc::new(AtomicU64::new(0));
    let counted = makes.clone();
    let (flaky, flaky_addr) = Child::handler("flaky", move || {
        // The second make (the first restart) panics; the third succeeds.
        if counted.fetch_add(1, Ordering::SeqCst) == 1 {
            panic!("the factory failed once");
        }
        Doubler
    });
    let (sibling, sibling_addr) = Child::handler("sibling", || Doubler);
    let mut sup = Supervisor::new(Strategy::OneForOne).intensity(10, Duration::from_secs(60));
    sup.add(flaky);
    sup.add(sibling);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    // Crashes the first incarnation: restarted, its factory panics, restarted again.
    assert!(flaky_addr.ask(|r| (0, r)).is_err());
    common::until("the third make", || makes.load(Ordering::SeqCst) >= 3);
    for addr in [flaky_addr, sibling_addr] {
        let doubled = within_watchdog("a reply", move || addr.ask(|r| (21, r)));
        assert_eq!(doubled.unwrap(), 42);
    }
    stop(&sup_addr, h);
}

/// Ordered start with a nested supervisor: the sibling after it starts once the nested
/// supervisor's own children have started (OTP: a supervisor's `init` returns once its
/// children have started), not as soon as the nested supervisor runs.
#[test]
fn a_sibling_after_a_nested_supervisor_starts_once_that_supervisors_children_have() {
    use std::sync::atomic::AtomicBool;

    struct SlowStart(Arc<AtomicBool>);
    impl Actor for SlowStart {
        type Msg = ();
        fn started(&mut self, _ctx: &mut Context<Self>) {
            threadlet::sleep(Duration::from_millis(5));
            self.0.store(true, Ordering::SeqCst);
        }
        fn handle(&mut self, _: (), _ctx: &mut Context<Self>) {}
    }
    struct Next(Arc<AtomicBool>, Arc<AtomicBool>);
    impl Actor for Next {
        type Msg = ();
        fn started(&mut self, _ctx: &mut Context<Self>) {
            self.1
                .store(self.0.load(Ordering::SeqCst), Ordering::SeqCst);
        }
        fn handle(&mut self, _: (), _ctx: &mut Context<Self>) {}
    }
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (up, saw_up) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let inner_up = up.clone();
    let (inner, _inner_addr) = Child::supervisor("inner", move || {
        let mut s = Supervisor::new(Strategy::OneForOne);
        let up = inner_up.clone();
        s.add(Child::handler("slow", move || SlowStart(up.clone())).0);
        s
    });
    let (next, _next_addr) = Child::handler("next", {
        let (up, saw_up) = (up.clone(), saw_up.clone());
        move || Next(up.clone(), saw_up.clone())
    });
    let mut sup = Supervisor::new(Strategy::RestForOne);
    sup.add(inner);
    sup.add(next);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    common::until("the nested child started", || up.load(Ordering::SeqCst));
    stop(&sup_addr, h);
    assert!(
        saw_up.load(Ordering::SeqCst),
        "the sibling started before the nested supervisor's child had"
    );
}

/// A child registered with `Child::register`: each incarnation, of either kind, is found by
/// its name while it runs, the name follows a restart, and goes with the child at the stop.
#[test]
fn a_registered_child_is_found_by_name_in_each_incarnation() {
    for kind in [Kind::Process, Kind::Handler] {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let log = Log::default();
        let (child, addr) = match kind {
            Kind::Process => logging_child("named", &log),
            Kind::Handler => logging_handler_child("named", &log),
        };
        let name = format!("registered-{kind:?}");
        let mut sup = Supervisor::new(Strategy::OneForOne);
        sup.add(child.register(name.clone()));
        let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
        wait_for(&log, "start named", 1);
        let name1 = name.clone();
        let first = within_watchdog("the first incarnation's name", move || {
            loop {
                if let Some(a) = threadlet::whereis::<u32>(&name1) {
                    break a;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        assert_eq!(first.actor_id(), addr.actor_id());
        let first_id = first.actor_id().unwrap();
        drop(first);
        addr.send(0).unwrap();
        wait_for(&log, "start named", 2);
        let name2 = name.clone();
        let second_id = within_watchdog("the name follows the restart", move || {
            loop {
                if let Some(a) = threadlet::whereis::<u32>(&name2)
                    && a.actor_id() != Some(first_id)
                {
                    break a.actor_id().unwrap();
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        assert_eq!(addr.actor_id(), Some(second_id), "{kind:?}");
        stop(&sup_addr, h);
        assert!(threadlet::whereis::<u32>(&name).is_none(), "{kind:?}");
    }
}

/// A name registered to another live actor fails the child's start (OTP's `already_started`):
/// the incarnation spawned is killed, the failure counts against the intensity, and past it
/// the supervisor gives up. The name stays the other actor's.
#[test]
fn a_child_whose_name_is_taken_fails_to_start() {
    for kind in [Kind::Process, Kind::Handler] {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let name = format!("taken-{kind:?}");
        let (holder, holder_h) = rt.spawn_actor(|mb: Mailbox<u32>| {
            let _ = mb.recv();
        });
        threadlet::register(name.clone(), &holder).unwrap();
        let log = Log::default();
        let (child, _addr) = match kind {
            Kind::Process => logging_child("clash", &log),
            Kind::Handler => logging_handler_child("clash", &log),
        };
        let mut sup = Supervisor::new(Strategy::OneForOne).intensity(1, Duration::from_secs(60));
        sup.add(child.register(name.clone()));
        let (_sup_addr, h) = sup.start(&rt.handle()).unwrap();
        let failed = within_watchdog("the supervisor gives up", move || h.join());
        assert!(failed.is_err(), "{kind:?}");
        let still = threadlet::whereis::<u32>(&name).expect("still the holder's");
        assert_eq!(still.actor_id(), Some(holder_h.id()), "{kind:?}");
        holder.send(1).unwrap();
        within_watchdog("holder", move || holder_h.join().unwrap());
    }
}

/// A child with a bounded mailbox (`ChildBuilder::mailbox_capacity`), of either kind: the
/// bound holds in every incarnation, senders waiting for room wait through restarts, and
/// every message but those whose handling panicked is received exactly once.
#[test]
fn a_bounded_childs_senders_wait_through_its_restarts() {
    const CAP: usize = 2;
    const SENDERS: u64 = 4;
    const EACH: u64 = 300;
    for kind in [Kind::Process, Kind::Handler] {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let sum = Arc::new(AtomicU64::new(0));
        let most = Arc::new(AtomicU64::new(0));
        let builder = Child::builder("bounded").mailbox_capacity(CAP);
        let (child, addr) = match kind {
            Kind::Process => {
                let (sum, most) = (sum.clone(), most.clone());
                builder.process(move |mb: Mailbox<u64>| {
                    while let Some(n) = mb.recv() {
                        most.fetch_max(mb.len() as u64, Ordering::SeqCst);
                        assert!(!n.is_multiple_of(100), "told to fail");
                        sum.fetch_add(n, Ordering::SeqCst);
                    }
                })
            }
            Kind::Handler => {
                struct Summer(Arc<AtomicU64>);
                impl Actor for Summer {
                    type Msg = u64;
                    fn handle(&mut self, n: u64, _: &mut Context<Self>) {
                        assert!(!n.is_multiple_of(100), "told to fail");
                        self.0.fetch_add(n, Ordering::SeqCst);
                    }
                }
                let sum = sum.clone();
                builder.handler(move || Summer(sum.clone()))
            }
        };
        let mut sup =
            Supervisor::new(Strategy::OneForOne).intensity(1_000, Duration::from_secs(60));
        sup.add(child);
        let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
        let senders: Vec<_> = (0..SENDERS)
            .map(|s| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    for i in 1..=EACH {
                        addr.send(s * EACH + i).unwrap();
                    }
                })
            })
            .collect();
        let sent: u64 = (1..=SENDERS * EACH).sum();
        let failed: u64 = (1..=SENDERS * EACH).filter(|n| n.is_multiple_of(100)).sum();
        within_watchdog("the senders", move || {
            for s in senders {
                s.join().unwrap();
            }
        });
        let want = sent - failed;
        until("the last messages", || sum.load(Ordering::SeqCst) >= want);
        assert_eq!(sum.load(Ordering::SeqCst), want, "{kind:?}");
        assert!(most.load(Ordering::SeqCst) <= CAP as u64, "{kind:?}");
        stop(&sup_addr, h);
    }
}

/// A stop hands the message of a sender still waiting for room in a bounded child's mailbox
/// back to it.
#[test]
fn a_stop_hands_back_the_messages_of_senders_waiting_for_room() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (child, addr) = Child::builder("stuck")
        .mailbox_capacity(1)
        .process(|mb: Mailbox<u32>| {
            let _first = mb.recv();
            // Never takes another: sleeps until killed by the stop.
            threadlet::sleep(Duration::from_secs(3600));
        });
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(child.shutdown(Duration::from_millis(50)));
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    addr.send(1).unwrap(); // taken
    addr.send(2).unwrap(); // queued: the mailbox is full
    let waiting = {
        let addr = addr.clone();
        std::thread::spawn(move || addr.send(3))
    };
    // Give the third send time to wait in line (its outcome is the same either way).
    std::thread::sleep(Duration::from_millis(20));
    stop(&sup_addr, h);
    let back = within_watchdog("the waiting sender", move || waiting.join().unwrap());
    assert_eq!(back.map_err(|e| e.0), Err(3));
}

/// Children added at run time (`SupervisorMsg::Add`), of either kind, start once asked
/// (the answer comes after a handler child's `started`), are restarted by the strategy in
/// their place in the start order, and are stopped with the others in reverse order.
#[test]
fn children_added_at_run_time_are_supervised_in_their_place() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let log = Log::default();
    let (a, a_addr) = logging_child("a", &log);
    let mut sup = Supervisor::new(Strategy::RestForOne);
    sup.add(a);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let (b, _b_addr) = logging_handler_child("b", &log);
    sup_addr.ask(|r| SupervisorMsg::Add(b, r)).unwrap().unwrap();
    // The answer came after `b`'s `started`.
    assert!(log.lock().contains(&"start b".to_string()));
    let (c, c_addr) = logging_child("c", &log);
    sup_addr.ask(|r| SupervisorMsg::Add(c, r)).unwrap().unwrap();
    wait_for(&log, "start c", 1);
    // `a` fails: RestForOne restarts it and every child after it, the added ones included.
    a_addr.send(0).unwrap();
    wait_for_log(&log, "the restarts", |log| {
        log.iter().filter(|e| is_start(e)).count() == 6
    });
    // `c` fails: only `c` (last in the order) is restarted.
    c_addr.send(0).unwrap();
    wait_for(&log, "start c", 3);
    stop(&sup_addr, h);
    let log = log.lock().clone();
    let starts: Vec<&str> = log
        .iter()
        .filter(|e| is_start(e))
        .map(|e| &e[6..])
        .collect();
    assert_eq!(starts, ["a", "b", "c", "a", "b", "c", "c"], "{log:?}");
    let stops: Vec<&str> = log
        .iter()
        .filter(|e| e.starts_with("stop "))
        .map(|e| &e[5..])
        .collect();
    // The stop goes in reverse start order (`b`, a handler child, also logs its group kill).
    assert_eq!(stops.last().copied(), Some("a"), "{log:?}");
    assert_eq!(&stops[stops.len() - 3..], ["c", "b", "a"], "{log:?}");
}

/// A child added to a supervisor that has ended goes unstarted: the request is refused, and
/// the child's mailbox is closed, handing sends back. A temporary child added for one job
/// ends for good and is not restarted.
#[test]
fn a_child_added_to_an_ended_supervisor_is_refused_and_closed() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (sup_addr, h) = Supervisor::new(Strategy::OneForOne)
        .start(&rt.handle())
        .unwrap();
    let jobs = Arc::new(AtomicU64::new(0));
    for _ in 0..50 {
        let jobs = jobs.clone();
        let (job, addr) = Child::process("job", move |mb: Mailbox<u64>| {
            if let Some(n) = mb.recv() {
                jobs.fetch_add(n, Ordering::SeqCst);
            }
        });
        sup_addr
            .ask(|r| SupervisorMsg::Add(job.restart(Restart::Temporary), r))
            .unwrap()
            .unwrap();
        addr.send(1).unwrap();
        // Finished after its one job: its mailbox closes for good as it ends.
        until("the job's end", || addr.send(0).is_err());
    }
    assert_eq!(jobs.load(Ordering::SeqCst), 50);
    stop(&sup_addr, h);
    let (late, late_addr) = Child::process("late", |mb: Mailbox<u64>| mb.recv());
    assert_eq!(
        sup_addr.ask(|r| SupervisorMsg::Add(late, r)).map(|_| ()),
        Err(threadlet::AskError::Closed)
    );
    assert_eq!(late_addr.send(7).map_err(|e| e.0), Err(7));
}

/// A registered child of a nested supervisor that a group restart kills: the killed supervisor
/// does not wait for its children, so the old grandchild may still be unwinding (here, a
/// destructor that takes a while) when the new one registers the name. The old one's mailbox
/// is closed for good by then, and it holds the name no more: the new grandchild takes it, and
/// the tree does not give up.
#[test]
fn a_registered_grandchild_is_registered_again_while_its_predecessor_unwinds() {
    /// Unwinding takes a while: `0` ms of work with safe points.
    struct SlowToUnwind(u64);
    impl Drop for SlowToUnwind {
        fn drop(&mut self) {
            let until = std::time::Instant::now() + Duration::from_millis(self.0);
            while std::time::Instant::now() < until {
                threadlet::checkpoint();
            }
        }
    }
    const NAME: &str = "registered-grandchild";
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (busy_tx, busy) = std::sync::mpsc::channel::<()>();
    let busy_tx = Arc::new(Mutex::new(busy_tx));
    let (inner, _) = Child::supervisor("inner", move || {
        let busy_tx = busy_tx.clone();
        let (grandchild, _) = Child::process("grandchild", move |mb: Mailbox<u64>| {
            let Some(ms) = mb.recv() else { return };
            busy_tx.lock().send(()).unwrap();
            let _slow = SlowToUnwind(ms);
            loop {
                threadlet::checkpoint();
            }
        });
        let mut sup = Supervisor::new(Strategy::OneForOne);
        sup.add(grandchild.register(NAME));
        sup
    });
    let (trigger, trigger_addr) = Child::process("trigger", |mb: Mailbox<u32>| {
        if mb.recv().is_some() {
            panic!("trigger told to fail");
        }
    });
    let mut sup = Supervisor::new(Strategy::OneForAll);
    sup.add(trigger).add(inner);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let first = within_watchdog("the first grandchild", || {
        loop {
            if let Some(a) = threadlet::whereis::<u64>(NAME) {
                break a;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let first_id = first.actor_id().unwrap();
    first.send(200).unwrap();
    drop(first);
    busy.recv().unwrap();
    trigger_addr.send(1).unwrap();
    let h = within_watchdog("the next grandchild's name", move || {
        loop {
            if let Some(a) = threadlet::whereis::<u64>(NAME)
                && a.actor_id() != Some(first_id)
            {
                break h;
            }
            assert!(!h.is_finished(), "the supervisor gave up: {:?}", h.join());
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    stop(&sup_addr, h);
}

/// A child added at run time that cannot start (its registered name taken, its factory
/// panicking) is not added: the answer carries the error, the supervisor and its children go
/// on untouched (no restart counted against the intensity), and the child's address refuses
/// sends. As OTP's `start_child` returns an error.
#[test]
fn a_child_added_that_cannot_start_is_refused_with_its_error() {
    struct Never;
    impl Actor for Never {
        type Msg = u32;
        fn handle(&mut self, _: u32, _: &mut Context<Self>) {}
    }
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (holder, holder_h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.recv());
    threadlet::register("added-but-taken", &holder).unwrap();
    let log = Log::default();
    let (a, a_addr) = logging_child("a", &log);
    // No restart at all is allowed: a failed `Add` counted as one would end the supervisor.
    let mut sup = Supervisor::new(Strategy::OneForAll).intensity(0, Duration::from_secs(60));
    sup.add(a);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    wait_for(&log, "start a", 1);

    let (clash, clash_addr) = Child::process("clash", |mb: Mailbox<u32>| mb.recv());
    let err = sup_addr
        .ask(|r| SupervisorMsg::Add(clash.register("added-but-taken"), r))
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
    assert_eq!(clash_addr.send(1).map_err(|e| e.0), Err(1));

    let (bad, bad_addr) = Child::handler("bad", || -> Never { panic!("no factory today") });
    let err = sup_addr
        .ask(|r| SupervisorMsg::Add(bad, r))
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("no factory today"), "{err}");
    assert_eq!(bad_addr.send(2).map_err(|e| e.0), Err(2));

    // Untouched: `a` still runs its first incarnation, the supervisor runs.
    a_addr.send(5).unwrap();
    assert!(!h.is_finished());
    assert_eq!(log.lock().iter().filter(|e| is_start(e)).count(), 1);
    stop(&sup_addr, h);
    holder.send(1).unwrap();
    within_watchdog("holder", move || holder_h.join().unwrap());
}

/// What `WhichChildren` says of each child: (name, running, kind).
fn which_children(
    sup_addr: &threadlet::Addr<SupervisorMsg>,
) -> Vec<(String, bool, threadlet::supervisor::ChildKind)> {
    let children = sup_addr.ask(SupervisorMsg::WhichChildren).unwrap();
    children
        .into_iter()
        .map(|c| (c.name, c.actor.is_some(), c.kind))
        .collect()
}

/// `Terminate` stops a child and keeps it stopped (a group restart of its siblings leaves it
/// be, sends to it are handed back, its registered name goes) until `Restart` starts it again
/// on the same address; `Delete` removes a stopped child; requests on a child in the wrong
/// state, or on no child, are refused, as OTP's `terminate_child`, `restart_child` and
/// `delete_child` are.
#[test]
fn a_terminated_child_stays_stopped_until_restarted_or_deleted() {
    use threadlet::supervisor::{ChildError, ChildKind};
    let rt = Runtime::builder().workers(2).build().unwrap();
    let log = Log::default();
    let (a, a_addr) = logging_child("a", &log);
    let (b, b_addr) = logging_handler_child("b", &log);
    // No restart is allowed: a terminate or restart counted as one would end the supervisor.
    let mut sup = Supervisor::new(Strategy::OneForAll).intensity(1, Duration::from_secs(60));
    sup.add(a).add(b.register("terminated-b"));
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let ask = |msg: fn(String, threadlet::Reply<Result<(), ChildError>>) -> SupervisorMsg,
               name: &str| { sup_addr.ask(|r| msg(name.to_string(), r)).unwrap() };
    wait_for(&log, "start b", 1);
    assert_eq!(
        which_children(&sup_addr),
        [
            ("a".to_string(), true, ChildKind::Process),
            ("b".to_string(), true, ChildKind::Handler)
        ]
    );

    ask(SupervisorMsg::Terminate, "b").unwrap();
    // Stopped as a `Stop` stops it (a handler child logs "stop" as it stops).
    assert!(
        log.lock().contains(&"stop b".to_string()),
        "{:?}",
        log.lock()
    );
    assert_eq!(b_addr.send(7).map_err(|e| e.0), Err(7));
    assert!(threadlet::whereis::<u32>("terminated-b").is_none());
    assert!(!which_children(&sup_addr)[1].1);
    // Stopped already: `Ok`. Not stopped: no restart, no delete.
    ask(SupervisorMsg::Terminate, "b").unwrap();
    assert!(matches!(
        ask(SupervisorMsg::Restart, "a"),
        Err(ChildError::Running)
    ));
    assert!(matches!(
        ask(SupervisorMsg::Delete, "a"),
        Err(ChildError::Running)
    ));
    assert!(matches!(
        ask(SupervisorMsg::Terminate, "c"),
        Err(ChildError::NotFound)
    ));

    // `a` fails: the group restart starts `a` alone, `b` stays stopped.
    a_addr.send(0).unwrap();
    wait_for(&log, "start a", 2);
    assert_eq!(log.lock().iter().filter(|e| *e == "start b").count(), 1);
    assert!(!which_children(&sup_addr)[1].1);

    // Restarted on the same address, in its place, registered again.
    ask(SupervisorMsg::Restart, "b").unwrap();
    assert_eq!(log.lock().iter().filter(|e| *e == "start b").count(), 2);
    b_addr.send(5).unwrap();
    assert!(threadlet::whereis::<u32>("terminated-b").is_some());
    assert_eq!(
        which_children(&sup_addr)
            .iter()
            .map(|c| c.1)
            .collect::<Vec<_>>(),
        [true, true]
    );
    assert!(matches!(
        ask(SupervisorMsg::Restart, "b"),
        Err(ChildError::Running)
    ));

    // Deleted: gone from the list, its address refuses sends for good.
    ask(SupervisorMsg::Terminate, "b").unwrap();
    ask(SupervisorMsg::Delete, "b").unwrap();
    assert_eq!(b_addr.send(8).map_err(|e| e.0), Err(8));
    assert_eq!(which_children(&sup_addr).len(), 1);
    assert!(matches!(
        ask(SupervisorMsg::Restart, "b"),
        Err(ChildError::NotFound)
    ));
    // One restart in all (the group's), within the intensity: the supervisor stops normally.
    stop(&sup_addr, h);
}

/// A terminated child drains what its mailbox accepted before the stop (every message sent
/// is handled or handed back); one that does not end within its shutdown timeout is killed,
/// and what it left queued goes to the incarnation that `Restart` starts.
#[test]
fn terminate_drains_or_kills_and_loses_no_message() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let handled = Arc::new(AtomicU64::new(0));
    let counted = handled.clone();
    // Handles each message, except `0`, on which it spins until killed.
    let (child, addr) = Child::process("worker", move |mb: Mailbox<u64>| {
        for n in &mb {
            if n == 0 {
                loop {
                    threadlet::checkpoint();
                }
            }
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mut sup = Supervisor::new(Strategy::OneForOne);
    sup.add(child.shutdown(Duration::from_millis(50)));
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let terminate = |name: &str| {
        sup_addr
            .ask(|r| SupervisorMsg::Terminate(name.to_string(), r))
            .unwrap()
            .unwrap()
    };
    let restart = |name: &str| {
        sup_addr
            .ask(|r| SupervisorMsg::Restart(name.to_string(), r))
            .unwrap()
            .unwrap()
    };

    // Drained: a sender races the stop; what was accepted is handled, the rest handed back.
    let sender = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let mut back = 0;
            for n in 1..=20_000 {
                if addr.send(n).is_err() {
                    back += 1;
                }
            }
            back
        })
    };
    std::thread::sleep(Duration::from_millis(2));
    terminate("worker");
    let back = sender.join().unwrap();
    assert_eq!(handled.load(Ordering::SeqCst) + back, 20_000);

    // Killed: it hangs on `0` with three more queued behind it, which the next incarnation
    // handles.
    restart("worker");
    for n in [0, 1, 2, 3] {
        addr.send(n).unwrap();
    }
    let before = handled.load(Ordering::SeqCst);
    terminate("worker");
    assert_eq!(handled.load(Ordering::SeqCst), before);
    restart("worker");
    until("the messages left queued", || {
        handled.load(Ordering::SeqCst) >= before + 3
    });
    stop(&sup_addr, h);
}

/// A restart that cannot start the child (its registered name taken meanwhile) leaves it
/// stopped, its address refusing sends, with the error; the supervisor goes on, and a later
/// restart works. A `Temporary` child terminated is deleted, as in OTP.
#[test]
fn a_restart_that_cannot_start_leaves_the_child_stopped() {
    use threadlet::supervisor::ChildError;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (child, addr) = Child::process("named", |mb: Mailbox<u32>| for _ in &mb {});
    let (temp, temp_addr) = Child::process("temp", |mb: Mailbox<u32>| for _ in &mb {});
    let mut sup = Supervisor::new(Strategy::OneForOne).intensity(0, Duration::from_secs(60));
    sup.add(child.register("restart-taken"))
        .add(temp.restart(Restart::Temporary));
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    let ask = |msg: fn(String, threadlet::Reply<Result<(), ChildError>>) -> SupervisorMsg,
               name: &str| { sup_addr.ask(|r| msg(name.to_string(), r)).unwrap() };

    ask(SupervisorMsg::Terminate, "named").unwrap();
    let (holder, holder_h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.recv());
    threadlet::register("restart-taken", &holder).unwrap();
    match ask(SupervisorMsg::Restart, "named") {
        Err(ChildError::Start(e)) => assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists),
        other => panic!("{other:?}"),
    }
    assert_eq!(addr.send(1).map_err(|e| e.0), Err(1));
    holder.send(1).unwrap();
    within_watchdog("holder", move || holder_h.join().unwrap());
    threadlet::unregister("restart-taken");
    ask(SupervisorMsg::Restart, "named").unwrap();
    addr.send(2).unwrap();

    ask(SupervisorMsg::Terminate, "temp").unwrap();
    assert_eq!(temp_addr.send(3).map_err(|e| e.0), Err(3));
    assert!(matches!(
        ask(SupervisorMsg::Restart, "temp"),
        Err(ChildError::NotFound)
    ));
    assert_eq!(which_children(&sup_addr).len(), 1);
    stop(&sup_addr, h);
}

/// `Addr::kill` on a supervised child's address while no incarnation runs (before its
/// supervisor starts it, or between an end and the restart) has no actor to kill: it returns
/// `false` and kills nothing later. It was kept for the next incarnation, which it killed as
/// it started (a stray kill during a stop threw the child's whole queue away), unlike Erlang,
/// where a kill aimed at a process that has ended does nothing.
#[test]
fn a_kill_between_incarnations_kills_no_later_one() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let starts = Arc::new(AtomicU64::new(0));
    let (handled_tx, handled) = std::sync::mpsc::channel();
    let counted = starts.clone();
    let (child, addr) = Child::process("spared", move |mb: Mailbox<u32>| {
        counted.fetch_add(1, Ordering::SeqCst);
        for n in &mb {
            handled_tx.send(n).unwrap();
        }
    });
    // No incarnation yet: nothing to kill.
    assert!(!addr.kill());
    let mut sup = Supervisor::new(Strategy::OneForOne).intensity(0, Duration::from_secs(60));
    sup.add(child);
    let (sup_addr, h) = sup.start(&rt.handle()).unwrap();
    addr.send(1).unwrap();
    assert_eq!(handled.recv_timeout(Duration::from_secs(20)), Ok(1));
    // Stopped by a `Terminate`, then restarted: a kill in between kills nothing either.
    sup_addr
        .ask(|r| SupervisorMsg::Terminate("spared".to_string(), r))
        .unwrap()
        .unwrap();
    assert!(!addr.kill());
    sup_addr
        .ask(|r| SupervisorMsg::Restart("spared".to_string(), r))
        .unwrap()
        .unwrap();
    addr.send(2).unwrap();
    assert_eq!(handled.recv_timeout(Duration::from_secs(20)), Ok(2));
    assert_eq!(starts.load(Ordering::SeqCst), 2);
    // No restart was needed (the intensity allows none): the supervisor stops normally.
    stop(&sup_addr, h);
}

/// A message whose destructor panics.
struct PanicsWhenDropped;

impl Drop for PanicsWhenDropped {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("a queued message's destructor");
        }
    }
}

/// A child that will not be restarted ends with a message left in its mailbox whose destructor
/// panics. The supervisor drops that queue as it closes the mailbox for good: the panic is the
/// ended child's, as in a handler actor's own end, not the supervisor's (which took its
/// sibling and itself down with it).
#[test]
fn a_finished_childs_queued_message_that_panics_when_dropped_spares_the_supervisor() {
    within_watchdog("a finished child's panicking message", || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let handled = Arc::new(AtomicU64::new(0));
        let counter = handled.clone();
        let (sibling, sibling_addr) = Child::process("sibling", move |mb: Mailbox<u32>| {
            for _ in &mb {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
        let (go, wait_for_go) = std::sync::mpsc::channel::<()>();
        let wait_for_go = parking_lot::Mutex::new(wait_for_go);
        // Takes one message, once both are queued, and ends normally: a transient child is not
        // restarted, so its mailbox closes for good with the second message in it.
        let (once, once_addr) =
            Child::process("once", move |mb: Mailbox<Option<PanicsWhenDropped>>| {
                wait_for_go.lock().recv().unwrap();
                let _ = mb.recv();
            });
        let mut sup = Supervisor::new(Strategy::OneForOne);
        sup.add(sibling).add(once.restart(Restart::Transient));
        let (sup_addr, sup_h) = sup.start(&rt.handle()).unwrap();
        let ended = once_addr.monitor();
        once_addr.send(None).unwrap();
        once_addr.send(Some(PanicsWhenDropped)).unwrap();
        go.send(()).unwrap();
        ended.recv();
        // The supervisor hears of the end and drops the child; it answers throughout.
        until("the supervisor drops its finished child", || {
            let children = sup_addr
                .ask(SupervisorMsg::WhichChildren)
                .expect("the supervisor answers");
            children.iter().all(|c| c.name != "once")
        });
        sibling_addr.send(7).unwrap();
        until("the sibling handles its message", || {
            handled.load(Ordering::SeqCst) == 1
        });
        sup_addr.send(SupervisorMsg::Stop).unwrap();
        sup_h.join().expect("the supervisor ends normally");
    });
}
