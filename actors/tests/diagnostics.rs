//! Seeing inside a running program: the dump and its wait reasons, the deadlock report (and
//! the waits that must never be reported), metrics that add up, and the dump on a signal.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::within_watchdog;
use threadlet::channel;
use threadlet::{
    Actor, ActorBuilder, ActorKind, ActorState, Context, Deadlock, Dump, JoinHandle, Mailbox,
    Reply, Runtime, RuntimeExt, Wait,
};

/// Takes dumps until `done` holds for one (the actors need a moment to reach their waits).
fn dump_until(rt: &Runtime, what: &str, done: impl Fn(&Dump) -> bool) -> Dump {
    let deadline = Instant::now() + common::WATCHDOG;
    loop {
        let d = rt.dump();
        if done(&d) {
            return d;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: never seen; last dump:\n{d}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_kind(w: &Wait) -> &'static str {
    match w {
        Wait::Message => "message",
        Wait::Room { .. } => "room",
        Wait::ChannelRecv { .. } => "channel recv",
        Wait::ChannelSend { .. } => "channel send",
        Wait::Join { .. } => "join",
        Wait::Reply { .. } => "reply",
        Wait::Select { .. } => "select",
        Wait::Sleep { .. } => "sleep",
        Wait::Io { .. } => "io",
        Wait::Blocking => "blocking",
        Wait::Parked => "parked",
        _ => "other",
    }
}

/// A handler actor that only counts.
struct Idle;
impl Actor for Idle {
    type Msg = u32;
    fn handle(&mut self, _: u32, _: &mut Context<Self>) {}
}

/// Never answers: keeps each request's `Reply` (so the asker waits).
struct Hoarder(Vec<Reply<u32>>);
impl Actor for Hoarder {
    type Msg = Reply<u32>;
    fn handle(&mut self, r: Reply<u32>, _: &mut Context<Self>) {
        self.0.push(r);
    }
}

#[test]
fn the_dump_lists_10000_actors_with_what_each_waits_on() {
    within_watchdog("dump of 10,000 actors", || {
        const IN_RECV: usize = 9_000;
        let rt = Runtime::builder().workers(2).build().unwrap();
        // Built inside an actor, so that nothing counts as held outside; the addresses come
        // back to keep the mailboxes open.
        let (addrs, ids) = rt.block_on(|| {
            let mut addrs = Vec::new();
            let mut ids: Vec<(threadlet::ActorId, &'static str)> = Vec::new();
            for _ in 0..IN_RECV {
                let (a, h) = threadlet::spawn_actor(|mb: Mailbox<u32>| mb.recv());
                ids.push((h.id(), "message"));
                addrs.push(a);
            }
            // Channel receive and send.
            let (tx, rx) = channel::unbounded::<u32>();
            ids.push((threadlet::spawn(move || rx.recv()).id(), "channel recv"));
            let (stx, srx) = channel::bounded::<u32>(0);
            ids.push((threadlet::spawn(move || stx.send(1)).id(), "channel send"));
            // Join of a sleeper; the sleeper itself.
            let sleeper = threadlet::spawn(|| threadlet::sleep(Duration::from_secs(3600)));
            ids.push((sleeper.id(), "sleep"));
            ids.push((threadlet::spawn(move || sleeper.join()).id(), "join"));
            // A request nobody answers.
            let (hoarder, _hh) = threadlet::start(Hoarder(Vec::new()));
            let asker = {
                let hoarder = hoarder.clone();
                threadlet::spawn(move || hoarder.ask(|r| r))
            };
            ids.push((asker.id(), "reply"));
            // Room in a full bounded mailbox.
            let (full, _fh) = ActorBuilder::new()
                .mailbox_capacity(1)
                .spawn_actor(|mb: Mailbox<u32>| {
                    threadlet::sleep(Duration::from_secs(3600));
                    mb.recv()
                })
                .unwrap();
            full.send(0).unwrap();
            ids.push((threadlet::spawn(move || full.send(1)).id(), "room"));
            // A select of two channels.
            let (_a_tx, a_rx) = channel::unbounded::<u32>();
            let (_b_tx, b_rx) = channel::unbounded::<u32>();
            let sel = threadlet::spawn(move || {
                threadlet::select! {
                    recv(a_rx) -> v => v.ok(),
                    recv(b_rx) -> v => v.ok(),
                }
            });
            ids.push((sel.id(), "select"));
            // A socket.
            let listener = threadlet::net::TcpListener::bind("127.0.0.1:0").unwrap();
            ids.push((
                threadlet::spawn(move || listener.accept().map(|_| ())).id(),
                "io",
            ));
            // The blocking pool.
            let (_gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
            let blocker = threadlet::spawn(move || threadlet::blocking(move || gate_rx.recv()));
            ids.push((blocker.id(), "blocking"));
            // A bare park.
            ids.push((
                threadlet::spawn(|| while threadlet_runtime::park().is_ok() {}).id(),
                "parked",
            ));
            // Idle handler actors wait for messages too.
            for _ in 0..(10_000 - IN_RECV - 10) {
                let (a, h) = threadlet::start(Idle);
                ids.push((h.id(), "message"));
                std::mem::forget(h); // detached: lives while its address does
                drop(a.clone());
                std::mem::forget(a);
            }
            // Keep the other ends alive past this closure.
            std::mem::forget((tx, srx, hoarder, _hh, _fh, _a_tx, _b_tx, _gate_tx));
            (addrs, ids)
        });
        assert_eq!(ids.len(), 10_000);
        let dump = dump_until(&rt, "every actor waiting", |d| {
            ids.iter().all(|(id, _)| {
                d.actor(*id)
                    .is_some_and(|a| matches!(a.state, ActorState::Waiting { .. }))
            })
        });
        for (id, kind) in &ids {
            let a = dump.actor(*id).unwrap();
            let on = a.waiting_on().unwrap();
            assert_eq!(wait_kind(&on), *kind, "actor {id}: {a}");
        }
        // Handler actors are reported as such, with their mailbox.
        let handlers = dump
            .actors
            .iter()
            .filter(|a| a.kind == ActorKind::Handler)
            .count();
        assert!(handlers > 1_000 - 10, "{handlers} handler actors");
        let first = dump.actor(ids[0].0).unwrap();
        assert_eq!(first.mailbox.unwrap().len, 0);
        assert!(first.runs >= 1);
        // The report prints every actor on a line of its own.
        let text = dump.to_string();
        assert!(text.lines().count() > 10_000, "{}", text.lines().count());
        assert!(text.contains("waiting on a reply from actor"));
        for a in &addrs {
            a.send(1).unwrap();
        }
    });
}

/// A runtime whose deadlock reports go into a channel.
fn reporting_runtime(workers: usize) -> (Runtime, mpsc::Receiver<Deadlock>) {
    reporting(Runtime::builder().workers(workers))
}

/// `builder`'s runtime, its deadlock reports going into a channel.
fn reporting(builder: threadlet::Builder) -> (Runtime, mpsc::Receiver<Deadlock>) {
    let (tx, rx) = mpsc::channel();
    let rt = builder
        .on_deadlock(move |d| {
            let _ = tx.send(d.clone());
        })
        .build()
        .unwrap();
    (rt, rx)
}

#[test]
fn a_three_actor_cycle_is_reported_naming_all_three() {
    within_watchdog("three-actor cycle", || {
        let (rt, reports) = reporting_runtime(2);
        // a joins b, b joins c, c joins a: each gets the handle of the next.
        let ids = rt.block_on(|| {
            let mut gives = Vec::new();
            let mut handles = Vec::new();
            for _ in 0..3 {
                let (give, take) = channel::oneshot::<JoinHandle<()>>();
                gives.push(give);
                handles.push(threadlet::spawn(move || {
                    let next = take.recv().unwrap();
                    let _ = next.join();
                }));
            }
            let ids: Vec<_> = handles.iter().map(|h| h.id()).collect();
            handles.rotate_left(1);
            for (give, next) in gives.into_iter().zip(handles) {
                give.send(next).unwrap();
            }
            ids
        });
        let report = reports.recv().unwrap();
        let mut cycle = report.cycle.clone();
        cycle.sort();
        assert_eq!(cycle, ids, "{report}");
        let text = report.to_string();
        for id in &ids {
            assert!(text.contains(&id.to_string()), "{text}");
        }
        assert!(text.contains("waits-for cycle"), "{text}");
        // Reported once: nothing runs, so nothing new is reported.
        std::thread::sleep(Duration::from_millis(100));
        assert!(reports.try_recv().is_err());
    });
}

#[test]
fn a_lone_actor_waiting_on_its_own_mailbox_is_reported() {
    within_watchdog("self-deadlock", || {
        let (rt, reports) = reporting_runtime(2);
        // The actor keeps an address of its own, so its `recv` never sees the mailbox close.
        let h = rt.spawn(|| {
            let (_a, h) = threadlet::spawn_actor(|mb: Mailbox<u32>| {
                let _me = mb.addr();
                mb.recv()
            });
            h.join()
        });
        let report = reports.recv().unwrap();
        assert_eq!(report.actors.len(), 2, "{report}");
        assert!(report.actors.iter().any(|a| a.id == h.id()));
        assert!(
            report
                .actors
                .iter()
                .any(|a| a.waiting_on() == Some(Wait::Message))
        );
    });
}

#[test]
fn panic_on_deadlock_makes_block_on_panic_with_the_report() {
    within_watchdog("panic on deadlock", || {
        let rt = Runtime::builder()
            .workers(2)
            .on_deadlock(|_| {})
            .panic_on_deadlock()
            .build()
            .unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(|| {
                let (_tx, rx) = channel::unbounded::<u32>();
                rx.recv()
            })
        }));
        let msg = caught.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains("deadlock"), "{msg}");
        assert!(msg.contains("a receive on channel"), "{msg}");
        // The runtime still works.
        assert_eq!(rt.block_on(|| 7), 7);
    });
}

/// Long enough for many deadlock checks (one per sample, a quarter of the 10 ms slice).
const QUIET: Duration = Duration::from_millis(300);

#[test]
fn sleepers_are_not_deadlocked() {
    within_watchdog("sleepers", || {
        let (rt, reports) = reporting_runtime(2);
        let handles: Vec<_> = (0..1_000)
            .map(|_| rt.spawn(|| threadlet::sleep(QUIET)))
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(reports.try_recv().is_err(), "a sleeper was reported");
    });
}

#[test]
fn an_actor_waiting_on_an_address_held_by_a_plain_thread_is_not_deadlocked() {
    within_watchdog("address held outside", || {
        let (rt, reports) = reporting_runtime(2);
        let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.recv());
        std::thread::sleep(QUIET);
        assert!(
            reports.try_recv().is_err(),
            "reported while main held the address"
        );
        // A clone moved to another thread, with this thread blocked in `join`.
        let late = addr.clone();
        drop(addr);
        let sender = std::thread::spawn(move || {
            std::thread::sleep(QUIET);
            late.send(7).unwrap();
        });
        assert_eq!(h.join().unwrap(), Some(7));
        sender.join().unwrap();
        // A channel whose sender a plain thread holds.
        let (tx, rx) = channel::unbounded::<u32>();
        let h = rt.spawn(move || rx.recv());
        std::thread::sleep(QUIET);
        assert!(
            reports.try_recv().is_err(),
            "reported while main held the sender"
        );
        tx.send(1).unwrap();
        assert_eq!(h.join().unwrap(), Ok(1));
    });
}

#[test]
fn an_actor_waiting_on_a_socket_is_not_deadlocked() {
    within_watchdog("socket", || {
        let (rt, reports) = reporting_runtime(2);
        let (tx, rx) = mpsc::channel();
        let h = rt.spawn(move || {
            let listener = threadlet::net::TcpListener::bind("127.0.0.1:0").unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            listener.accept().map(|_| ())
        });
        let at = rx.recv().unwrap();
        std::thread::sleep(QUIET);
        assert!(reports.try_recv().is_err(), "an accept was reported");
        let _client = std::net::TcpStream::connect(at).unwrap();
        h.join().unwrap().unwrap();
    });
}

#[test]
fn metrics_add_up() {
    within_watchdog("metrics", || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        // 300 process actors that end, 200 that stay (waiting), 100 handler actors that stay.
        let ended: Vec<_> = (0..300).map(|i| rt.spawn(move || i)).collect();
        for h in ended {
            h.join().unwrap();
        }
        let waiting: Vec<_> = (0..200)
            .map(|_| rt.spawn_actor(|mb: Mailbox<u32>| mb.iter().count()))
            .collect();
        let handlers: Vec<_> = (0..100).map(|_| rt.start(Idle)).collect();
        // 5 messages to each waiting actor, in one burst to the first.
        for _ in 0..5 {
            waiting[0].0.send(1).unwrap();
        }
        for (a, _) in &waiting[1..] {
            for _ in 0..5 {
                a.send(1).unwrap();
            }
        }
        for (a, _) in &handlers {
            a.send(1).unwrap();
        }
        let m = dump_until(&rt, "every message taken", |d| {
            d.actors
                .iter()
                .all(|a| a.mailbox.is_none_or(|m| m.len == 0) && a.waiting_on().is_some())
        });
        drop(m);
        let m = rt.metrics();
        assert_eq!(m.spawned, 600);
        assert_eq!(m.live_process, 200);
        assert_eq!(m.live_handler, 100);
        assert_eq!(
            m.spawned,
            m.ended + (m.live_process + m.live_handler) as u64
        );
        assert_eq!(m.messages, 200 * 5 + 100);
        assert!(m.mailbox_high_water >= 1);
        assert_eq!(m.workers.len(), 2);
        assert!(m.total().actors_run >= 600);
        // Per-actor counters.
        let s = rt.actor_stats(waiting[0].1.id()).unwrap();
        assert_eq!(s.mailbox.unwrap().received, 5);
        assert!(s.runs >= 1);
        // Ending them moves their messages to the totals, which still add up.
        for (a, h) in waiting {
            drop(a);
            assert_eq!(h.join().unwrap(), 5);
        }
        for (a, h) in handlers {
            drop(a);
            h.join().unwrap();
        }
        // A joiner may return a moment before its actor has left the tables.
        let m = loop {
            let m = rt.metrics();
            if (m.live_process, m.live_handler) == (0, 0) {
                break m;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(m.spawned, m.ended);
        assert_eq!(m.messages, 200 * 5 + 100);
    });
}

/// The child half of the signal test: run by `dump_on_signal_prints_from_a_child_process`.
#[test]
#[ignore = "run as a child process by dump_on_signal_prints_from_a_child_process"]
fn signal_child() {
    if std::env::var_os("THREADLET_SIGNAL_CHILD").is_none() {
        return;
    }
    let builder = Runtime::builder().workers(1);
    let builder = match std::env::var("THREADLET_DUMP_SIGNAL") {
        Ok(_) => builder, // the environment turns it on
        Err(_) => builder.dump_on_signal(libc::SIGUSR1),
    };
    let rt = builder.build().unwrap();
    let (_a, _h) = ActorBuilder::new()
        .name("signal-waiter")
        .spawn_actor_on(&rt, |mb: Mailbox<u32>| mb.recv())
        .unwrap();
    while rt.dump().actors.iter().all(|a| a.waiting_on().is_none()) {
        std::thread::sleep(Duration::from_millis(5));
    }
    println!("ready");
    std::thread::sleep(Duration::from_secs(60));
}

fn run_signal_child(env: Option<(&str, &str)>, signal: libc::c_int) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["signal_child", "--exact", "--ignored", "--nocapture"])
        .env("THREADLET_SIGNAL_CHILD", "1")
        .env_remove("THREADLET_DUMP_SIGNAL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child ended early"
        );
    }
    // SAFETY: `kill` sends a signal to our own child, whose id we hold.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
    let err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = false;
    for l in err.lines() {
        let l = l.unwrap();
        if l.contains("\"signal-waiter\"") && l.contains("waiting on its mailbox") {
            seen = true;
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen, "the child printed no dump naming its actor");
}

#[test]
fn dump_on_signal_prints_from_a_child_process() {
    within_watchdog("dump on a signal", || {
        run_signal_child(None, libc::SIGUSR1);
        run_signal_child(Some(("THREADLET_DUMP_SIGNAL", "USR2")), libc::SIGUSR2);
    });
}

#[test]
fn the_long_run_report_names_the_actor_stopped_while_holding_a_lock() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    within_watchdog("lock holder", || {
        let (tx, reports) = mpsc::channel::<threadlet::LongRun>();
        let reported = Arc::new(AtomicBool::new(false));
        let r = reported.clone();
        // No spare: one could run the waiter beside the stuck worker, and then nothing would
        // hold a worker long enough for a report.
        let rt = Runtime::builder()
            .workers(1)
            .spare_workers(0)
            .time_slice(Duration::from_millis(2))
            .on_long_run(move |lr| {
                // Only the waiter's report lets it give up: a monitor starved of the CPU on a
                // crowded machine may first report the holder (its worker's thread went without
                // a CPU mid-slice), and the waiter must keep the worker until its own report.
                if lr.name.as_deref() == Some("waiter") {
                    r.store(true, Ordering::Release);
                }
                let _ = tx.send(lr.clone());
            })
            .build()
            .unwrap();
        let lock = Arc::new(Mutex::new(0u32));
        let (waiter_tx, waiter_rx) = mpsc::channel();
        let l = lock.clone();
        let holder = ActorBuilder::new()
            .name("holder")
            .spawn_on(&rt, move || {
                let mut g = l.lock().unwrap();
                // Spins for the lock with no safe point, holding the only worker, until the
                // report comes; then gives up so that the holder can run.
                let (l, r) = (l.clone(), reported.clone());
                let running = Arc::new(AtomicBool::new(false));
                let w = running.clone();
                let waiter = ActorBuilder::new()
                    .name("waiter")
                    .spawn(move || {
                        w.store(true, Ordering::Release);
                        loop {
                            if let Ok(mut g) = l.try_lock() {
                                *g += 1;
                                return true;
                            }
                            if r.load(Ordering::Acquire) {
                                return false;
                            }
                            std::hint::spin_loop();
                        }
                    })
                    .unwrap();
                waiter_tx.send(waiter).unwrap();
                // Preempted at a safe point with the guard held (the documented mistake); the
                // worker then runs the waiter.
                while !running.load(Ordering::Acquire) {
                    threadlet::checkpoint();
                }
                *g += 1;
            })
            .unwrap();
        let waiter: JoinHandle<bool> = waiter_rx.recv().unwrap();
        // Reports of other actors (the holder, on a crowded machine) may come first.
        let report = loop {
            let report = reports.recv().unwrap();
            if report.actor == waiter.id() {
                break report;
            }
        };
        assert_eq!(report.name.as_deref(), Some("waiter"));
        assert_eq!(
            report.stopped_here,
            [(holder.id(), Some("holder".to_string()))]
        );
        assert!(report.lock_holders().contains("\"holder\""));
        assert!(!waiter.join().unwrap());
        holder.join().unwrap();
    });
}

#[test]
fn signals_that_cannot_be_caught_are_refused_at_build() {
    // Between the standard signals and `SIGRTMIN` (32 and 33 with glibc): the C library's own.
    let kept_by_libc = libc::SIGSYS + 1..libc::SIGRTMIN();
    for bad in [libc::SIGKILL, libc::SIGSEGV, libc::SIGBUS, 0, -1, 100_000]
        .into_iter()
        .chain(kept_by_libc)
    {
        let built = Runtime::builder().workers(1).dump_on_signal(bad).build();
        let err = built
            .err()
            .unwrap_or_else(|| panic!("signal {bad} was accepted"));
        assert!(
            err.to_string().contains("cannot be used for the dump"),
            "{bad}: {err}"
        );
    }
}

/// The child half of `a_dump_signal_from_the_environment_that_cannot_be_had_is_ignored`.
#[test]
fn env_signal_child() {
    if std::env::var_os("THREADLET_ENV_SIGNAL_CHILD").is_none() {
        return;
    }
    let rt = Runtime::builder()
        .workers(1)
        .build()
        .expect("the runtime builds");
    assert_eq!(rt.block_on(|| 7), 7);
}

/// `THREADLET_DUMP_SIGNAL` names a signal for every runtime of the program: one that cannot
/// be had is reported and ignored, never a reason to refuse a runtime. (With 32, which glibc
/// keeps for itself, every `Runtime::new()` failed with `EINVAL`.)
#[test]
fn a_dump_signal_from_the_environment_that_cannot_be_had_is_ignored() {
    for value in ["32", "KILL", "9", "nonsense"] {
        let env = [
            ("THREADLET_ENV_SIGNAL_CHILD", "1"),
            ("THREADLET_DUMP_SIGNAL", value),
        ];
        let out = common::in_child("env_signal_child", &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{value}: {:?}: {stderr}", out.status);
        assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
        assert!(
            stderr.contains("THREADLET_DUMP_SIGNAL"),
            "{value}: not reported: {stderr}"
        );
    }
}

/// The child half of `a_signal_does_what_it_did_before_once_no_runtime_dumps_on_it`: two
/// runtimes dump on `SIGUSR1`; with one dropped, the signal still dumps the other; with both
/// dropped, it ends the process, as its default action does.
#[test]
fn default_action_child() {
    if std::env::var_os("THREADLET_DEFAULT_ACTION_CHILD").is_none() {
        return;
    }
    let build = || {
        let rt = Runtime::builder().workers(1);
        rt.dump_on_signal(libc::SIGUSR1).build().unwrap()
    };
    let (first, second) = (build(), build());
    drop(first);
    // SAFETY: `raise` sends a signal to this thread; its handler (signal-hook's) only wakes
    // the dump thread of `second`.
    assert_eq!(unsafe { libc::raise(libc::SIGUSR1) }, 0);
    std::thread::sleep(Duration::from_millis(200)); // the dump comes out meanwhile
    println!("still here");
    drop(second);
    // SAFETY: as above; with no runtime dumping on it, the signal ends this process.
    unsafe { libc::raise(libc::SIGUSR1) };
    std::thread::sleep(Duration::from_secs(5));
    println!("survived the signal's default action");
}

/// A signal whose action was the default one gets it back once the last runtime that dumped
/// on it is dropped. (signal-hook's handler stayed installed with nothing to do, and the
/// signal was ignored for the rest of the process.)
#[test]
fn a_signal_does_what_it_did_before_once_no_runtime_dumps_on_it() {
    use std::os::unix::process::ExitStatusExt;
    let out = common::in_child(
        "default_action_child",
        &[("THREADLET_DEFAULT_ACTION_CHILD", "1")],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(stdout.contains("still here"), "{stdout}{stderr}");
    assert!(
        stderr.contains("threadlet dump"),
        "the second runtime dumped: {stderr}"
    );
    assert!(!stdout.contains("survived"), "{stdout}");
    assert_eq!(out.status.signal(), Some(libc::SIGUSR1), "{:?}", out.status);
}

#[test]
fn a_deadlock_is_reported_with_time_slices_off() {
    within_watchdog("slices off", || {
        let (tx, reports) = mpsc::channel();
        let rt = Runtime::builder()
            .workers(2)
            .time_slice(Duration::ZERO)
            .on_deadlock(move |d| {
                let _ = tx.send(d.clone());
            })
            .build()
            .unwrap();
        let h = rt.spawn(|| {
            // Busy for a while first, so the monitor's look comes while a worker runs.
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(50) {
                threadlet::checkpoint();
            }
            let (_tx, rx) = channel::unbounded::<u32>();
            rx.recv()
        });
        let report = reports.recv().unwrap();
        assert!(report.actors.iter().any(|a| a.id == h.id()), "{report}");
    });
}

#[test]
fn waiting_on_an_actor_of_another_runtime_is_not_a_deadlock() {
    within_watchdog("two runtimes", || {
        let (rt, reports) = reporting_runtime(1);
        let other = Runtime::builder().workers(1).build().unwrap();
        let sleeper = other.spawn(|| threadlet::sleep(QUIET));
        let h = rt.spawn(move || sleeper.join().is_ok());
        std::thread::sleep(QUIET / 2);
        assert!(
            reports.try_recv().is_err(),
            "a join across runtimes was reported"
        );
        assert!(h.join().unwrap());
    });
}

/// Waiting for the end of an actor of another runtime through a monitor (made from its handle,
/// from its id, or through its address) or a `JoinSet` is not a deadlock, as a `join` of it is
/// not: the `Down` comes from that runtime, which such a watch did not link to the waiting
/// one, and each of these waits was reported (and `panic_on_deadlock` killed the waiter).
#[test]
fn watching_an_actor_of_another_runtime_for_its_end_is_not_a_deadlock() {
    // Each way of watching on a runtime of its own: a link made by one is runtime-wide.
    for way in [
        "monitor of a handle",
        "monitor of an id",
        "monitor of an address",
        "join set",
    ] {
        within_watchdog(way, move || {
            let (rt, reports) = reporting_runtime(1);
            let other = Runtime::builder().workers(1).build().unwrap();
            let (addr, h) = other.spawn_actor(move |_: Mailbox<u32>| threadlet::sleep(QUIET * 2));
            let handle = other.handle();
            let id = h.id();
            let watcher = rt.spawn(move || match way {
                "monitor of a handle" => threadlet::Monitor::of(&h).recv().reason,
                "monitor of an id" => threadlet::Monitor::of_id(&handle, id).recv().reason,
                "monitor of an address" => addr.monitor().recv().reason,
                _ => {
                    let mut set = threadlet::JoinSet::new();
                    set.insert(h);
                    assert!(set.join_next().is_some_and(|r| r.is_ok()));
                    threadlet::ExitReason::Normal
                }
            });
            std::thread::sleep(QUIET * 3 / 2);
            let reported = reports.try_recv().ok();
            assert_eq!(watcher.join().unwrap(), threadlet::ExitReason::Normal);
            assert!(reported.is_none(), "{way}: {}", reported.unwrap());
        });
    }
}

/// Checks that a wait a plain thread can end is not reported. `round` sets one up on the
/// runtime it is given (an actor parked on something whose end main then takes outside) and
/// returns what ends it; the runtime gets `QUIET` to report in between.
///
/// Until main has taken its outside end, the runtime sees only inside ones, and a report then
/// is right for what it sees: a crowded machine that holds main up between the actor's park
/// and main's move spoils that round, and the test tries another. A wait that did not count
/// would be reported in every round.
fn quiet_in_some_round(
    what: &str,
    round: impl Fn(&Runtime) -> Box<dyn FnOnce()> + Send + Sync + 'static,
) {
    const ROUNDS: usize = 5;
    let round = std::sync::Arc::new(round);
    let quiet_round = (0..ROUNDS).any(|_| {
        let round = round.clone();
        within_watchdog(what, move || {
            let (rt, reports) = reporting_runtime(2);
            let end_the_wait = round(&rt);
            std::thread::sleep(QUIET);
            let quiet = reports.try_recv().is_err();
            end_the_wait();
            quiet
        })
    });
    assert!(quiet_round, "{what}: reported in each of {ROUNDS} rounds");
}

/// Waits until `h`'s actor is parked.
fn parked<R>(rt: &Runtime, h: &JoinHandle<R>) {
    dump_until(rt, "the actor waiting", |d| {
        d.actor(h.id()).and_then(|a| a.waiting_on()).is_some()
    });
}

/// Waits up to 10 s for a deadlock report, which must name actor `id`; `expected` says when
/// the report is due.
fn reported_naming(reports: &mpsc::Receiver<Deadlock>, id: threadlet::ActorId, expected: &str) {
    let report = reports
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("no deadlock report: expected {expected}"));
    assert!(report.actors.iter().any(|a| a.id == id), "{report}");
}

#[test]
fn a_sender_cloned_on_a_plain_thread_after_the_receiver_waits_counts() {
    quiet_in_some_round("late outside sender", |rt| {
        let (give, take) = mpsc::channel();
        // The channel is made inside an actor: both ends count as inside.
        let h = rt.spawn(move || {
            let (tx, rx) = channel::unbounded::<u32>();
            give.send(tx).unwrap();
            rx.recv()
        });
        let inside = take.recv().unwrap();
        // Let the receiver park, then take an outside clone and drop the inside one.
        parked(rt, &h);
        let outside = inside.clone();
        drop(inside);
        Box::new(move || {
            outside.send(5).unwrap();
            assert_eq!(h.join().unwrap(), Ok(5));
        })
    });
}

/// An actor receiving from a `Mailbox` handed to it by the actor it belonged to, while a plain
/// thread holds an address of that mailbox, is not deadlocked. The check read the receiving
/// actor's own mailbox instead (here it has none), saw no address held outside, and reported
/// it in every round.
#[test]
fn a_receive_on_a_handed_over_mailbox_that_a_plain_thread_can_send_to_is_not_a_deadlock() {
    quiet_in_some_round("handed-over mailbox", |rt| {
        let (give, take) = channel::oneshot::<Mailbox<u32>>();
        // The address is made on this plain thread: held outside.
        let (addr, owner) = rt.spawn_actor(move |mb: Mailbox<u32>| give.send(mb).unwrap());
        owner.join().unwrap();
        let h = rt.spawn(move || take.recv().unwrap().recv());
        parked(rt, &h);
        Box::new(move || {
            addr.send(7).unwrap();
            assert_eq!(h.join().unwrap(), Some(7));
        })
    });
}

/// A receiver woken for nothing (a stale wake) parks again on the same channel: what it
/// records then must still say that a plain thread holds a sender, as the mark the clone made
/// said, or the check takes a live wait for a deadlock (and `panic_on_deadlock` would kill).
#[test]
fn a_receiver_woken_for_nothing_still_counts_a_sender_held_outside() {
    quiet_in_some_round("stale wake", |rt| {
        let (give, take) = mpsc::channel();
        let h = rt.spawn(move || {
            let (tx, rx) = channel::unbounded::<u32>();
            give.send((tx, threadlet_runtime::Waiter::current()))
                .unwrap();
            rx.recv()
        });
        let (inside, waiter) = take.recv().unwrap();
        parked(rt, &h);
        let outside = inside.clone();
        drop(inside);
        // A wake with no value: the receiver finds its slot still waiting and parks again.
        let runs = |rt: &Runtime| rt.dump().actor(h.id()).map_or(0, |a| a.runs);
        let before = runs(rt);
        waiter.wake();
        dump_until(rt, "the receiver parked again", |d| {
            d.actor(h.id())
                .is_some_and(|a| a.runs > before && a.waiting_on().is_some())
        });
        Box::new(move || {
            outside.send(5).unwrap();
            assert_eq!(h.join().unwrap(), Ok(5));
        })
    });
}

/// A plain thread that holds only a receiver of a channel can still end a wait on it: by
/// closing the channel. An actor waiting to receive on it is not deadlocked.
#[test]
fn a_receiver_held_outside_can_close_the_channel() {
    quiet_in_some_round("outside receiver", |rt| {
        let (give, take) = mpsc::channel();
        // The actor keeps the only sender: nothing but a close can end its wait.
        let h = rt.spawn(move || {
            let (tx, rx) = channel::unbounded::<u32>();
            give.send(rx.clone()).unwrap();
            let got = rx.recv();
            drop(tx);
            got
        });
        let inside = take.recv().unwrap();
        parked(rt, &h);
        let outside = inside.clone();
        drop(inside);
        Box::new(move || {
            outside.close();
            assert_eq!(h.join().unwrap(), Err(channel::RecvError));
        })
    });
}

/// Checks that a wait an end held outside marked is judged again once main lets that end go.
/// `actor` hands main an end of a channel it made (counted as inside) and parks on that channel
/// keeping an end of its own that only it could use: main takes an outside clone, drops the
/// handed end, lets the outside one go, and the deadlock left behind must be reported.
fn reported_once_main_lets_go<E, R>(
    what: &str,
    actor: impl FnOnce(mpsc::Sender<E>) -> R + Send + 'static,
) where
    E: Clone + Send + 'static,
    R: Send + std::fmt::Debug + 'static,
{
    within_watchdog(what, move || {
        let (rt, reports) = reporting_runtime(2);
        let (give, take) = mpsc::channel();
        let h = rt.spawn(move || actor(give));
        let inside = take.recv().unwrap();
        parked(&rt, &h);
        let outside = inside.clone();
        drop(inside);
        // Marked: no report from now on while main holds `outside`. One made before the clone
        // (right for what the runtime saw then) is let go.
        std::thread::sleep(QUIET);
        while reports.try_recv().is_ok() {}
        drop(outside);
        let report = reports
            .recv_timeout(Duration::from_secs(30))
            .expect("the deadlock left once main's end went is reported");
        assert!(report.actors.iter().any(|a| a.id == h.id()));
        assert!(h.abort());
        assert!(h.join().unwrap_err().is_killed());
    });
}

/// Once the last end a plain thread held is gone, a wait that end marked is judged again: the
/// actor parks again with what it reads then, and the deadlock left behind is reported.
#[test]
fn a_wait_is_judged_again_when_the_last_outside_end_goes() {
    // The actor keeps a sender itself: once main's are gone, nothing can end its wait.
    reported_once_main_lets_go("outside end gone", |give| {
        let (tx, rx) = channel::unbounded::<u32>();
        give.send(tx.clone()).unwrap();
        let got = rx.recv();
        drop(tx);
        got
    });
}

/// The same for a sender waiting for room, once the last receiver a plain thread held is gone.
#[test]
fn a_send_is_judged_again_when_the_last_outside_receiver_goes() {
    // The actor keeps a receiver itself, and waits for room it would have to make.
    reported_once_main_lets_go("outside receiver gone", |give| {
        let (tx, rx) = channel::bounded::<u32>(1);
        give.send(rx.clone()).unwrap();
        tx.send(1).unwrap();
        let sent = tx.send(2);
        drop(rx);
        sent.is_ok()
    });
}

/// The same for a receive on an actor's own mailbox, once the last address a plain thread held
/// is gone: the drop of that address woke nothing (only the drop of the last address did), so
/// the wait stayed judged alive, and the deadlock was never reported.
#[test]
fn a_receive_is_judged_again_when_the_last_outside_address_goes() {
    within_watchdog("outside address gone", || {
        let (rt, reports) = reporting_runtime(2);
        // The actor keeps an address itself: once main's is gone, nothing can end its wait.
        let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| {
            let _me = mb.addr();
            mb.recv()
        });
        parked(&rt, &h);
        // No report while main holds `addr`; one made before the wait was marked is let go.
        std::thread::sleep(QUIET);
        while reports.try_recv().is_ok() {}
        drop(addr);
        reported_naming(&reports, h.id(), "once main's address went");
        assert!(h.abort());
        assert!(h.join().unwrap_err().is_killed());
    });
}

/// A cancelled `send_after` no longer counts as a pending timer: the cancel emptied the
/// message's slot but left its heap entry pending, which held the deadlock check off until the
/// entry's deadline (a minute here, an hour as well).
#[test]
fn a_cancelled_send_after_does_not_hide_a_deadlock() {
    within_watchdog("cancelled send_after", || {
        let (rt, reports) = reporting_runtime(2);
        let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| {
            let me = mb.addr();
            assert!(me.send_after(Duration::from_secs(60), 1).cancel());
            mb.recv() // `me` keeps the mailbox open: nothing can end this wait
        });
        // `addr`, held here, would keep the wait alive: only the actor's own is left.
        drop(addr);
        reported_naming(&reports, h.id(), "before the cancelled timer's deadline");
        assert!(h.abort());
    });
}

/// The same with the cancel made by a plain thread: nothing ran on the runtime then, and its
/// check, which had put its next look off until the timer's deadline, looked again only then.
#[test]
fn a_send_after_cancelled_from_a_plain_thread_does_not_hide_a_deadlock() {
    within_watchdog("send_after cancelled outside", || {
        let (rt, reports) = reporting_runtime(2);
        let (give, timer) = mpsc::channel();
        let (addr, h) = rt.spawn_actor(move |mb: Mailbox<u32>| {
            let me = mb.addr();
            give.send(me.send_after(Duration::from_secs(60), 1))
                .unwrap();
            mb.recv() // `me` keeps the mailbox open: nothing can end this wait
        });
        let timer = timer.recv().unwrap();
        drop(addr);
        parked(&rt, &h);
        // Held off by the pending timer, the check looks next at its deadline, a minute away.
        std::thread::sleep(QUIET);
        assert!(timer.cancel());
        reported_naming(&reports, h.id(), "once the timer was cancelled");
        assert!(h.abort());
    });
}

/// The same for a `send_after` to an actor of another runtime, which counted for the sender's
/// runtime's deadlock check (its message may lead to a reply) until it fired, not until it was
/// cancelled.
#[test]
fn a_cancelled_send_after_to_another_runtime_does_not_hide_a_deadlock() {
    within_watchdog("cancelled send_after elsewhere", || {
        let other = Runtime::builder().workers(1).build().unwrap();
        // Made inside its runtime, so that no plain thread holds an address of it.
        let (far, _far) = other.block_on(|| threadlet::spawn_actor(|mb: Mailbox<u32>| mb.recv()));
        let (rt, reports) = reporting_runtime(1);
        let h = rt.spawn(move || {
            assert!(far.send_after(Duration::from_secs(60), 1).cancel());
            let (_tx, rx) = channel::unbounded::<u32>();
            rx.recv()
        });
        reported_naming(&reports, h.id(), "before the cancelled timer's deadline");
        assert!(h.abort());
    });
}

#[test]
fn a_cancelled_timer_does_not_hide_a_deadlock() {
    within_watchdog("cancelled timer", || {
        let (rt, reports) = reporting_runtime(2);
        let h = rt.spawn(|| {
            let (tx, rx) = channel::unbounded::<u32>();
            tx.send(1).unwrap();
            // Answered at once: its 60 s timer is cancelled, but stays in the heap a while.
            assert_eq!(rx.recv_timeout(Duration::from_secs(60)), Ok(1));
            rx.recv()
        });
        let report = reports.recv().unwrap();
        assert!(report.actors.iter().any(|a| a.id == h.id()), "{report}");
    });
}

#[test]
fn a_later_kill_of_a_block_on_root_does_not_reuse_an_old_report() {
    within_watchdog("stale report", || {
        let rt = Runtime::builder()
            .workers(1)
            .on_deadlock(|_| {})
            .panic_on_deadlock()
            .build()
            .unwrap();
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(|| {
                let (_tx, rx) = channel::unbounded::<u32>();
                rx.recv()
            })
        }));
        assert!(first.is_err());
        // Killed by itself this time, not by a deadlock.
        let second = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(|| {
                threadlet::kill(threadlet::current().unwrap());
                threadlet::sleep(Duration::from_secs(10));
            })
        }));
        let msg = second.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains("killed"), "{msg}");
        assert!(!msg.contains("deadlock"), "{msg}");
    });
}

/// A one-worker runtime whose deadlock reports arrive on the returned channel.
fn one_worker_reporting_deadlocks() -> (Runtime, mpsc::Receiver<()>) {
    let (reports, reported) = mpsc::channel::<()>();
    let rt = Runtime::builder()
        .workers(1)
        .on_deadlock(move |_| {
            let _ = reports.send(());
        })
        .build()
        .unwrap();
    (rt, reported)
}

/// A one-worker runtime whose deadlock reports send the ids of the actors they name.
fn one_worker_reporting_ids() -> (Runtime, mpsc::Receiver<Vec<threadlet::ActorId>>) {
    let (reports, reported) = mpsc::channel();
    let rt = Runtime::builder()
        .workers(1)
        .on_deadlock(move |d: &Deadlock| {
            let _ = reports.send(d.actors.iter().map(|a| a.id).collect::<Vec<_>>());
        })
        .build()
        .unwrap();
    (rt, reported)
}

/// On `rt`, an actor that waits for a message while it holds an address of `keeper` (an actor
/// of another runtime, parked), whose own address an actor of `rt` sends to the keeper: the
/// send wakes the keeper, which links the two runtimes. Then `keeper`, an address made on the
/// main thread, is dropped: the keeper's addresses left are made inside actors.
fn wait_on_keeper(
    rt: &Runtime,
    keeper: threadlet::Addr<threadlet::Addr<u32>>,
) -> JoinHandle<Option<u32>> {
    rt.block_on(move || {
        let inside = keeper.clone();
        let to_keeper = inside.clone();
        let (me, waiter) = threadlet::spawn_actor(move |mb: Mailbox<u32>| {
            let _keeps_the_keeper_waiting = inside;
            mb.recv()
        });
        to_keeper.send(me).unwrap();
        drop(keeper);
        waiter
    })
}

/// A timer pending on the process-wide heap (armed from a plain thread) holds every runtime's
/// check away while it waits: it may still wake an actor. Once it has fired, the check must look
/// again. Before, a monitor asleep with nothing of its own pending never did: a deadlock that
/// began while such a timer waited was never reported, and a `block_on` under
/// `panic_on_deadlock` waited for good.
#[test]
fn a_deadlock_held_off_by_a_process_wide_timer_is_reported_once_it_fires() {
    within_watchdog("a deadlock held off by a process-wide timer", || {
        let (rt, reported) = one_worker_reporting_deadlocks();
        // From a plain thread: on the process-wide timer thread. Long against the check's few
        // milliseconds: the check finds it pending.
        threadlet_runtime::call_at(Instant::now() + Duration::from_millis(300), || {});
        let waiter = rt.spawn(|| {
            let (_tx, rx) = channel::unbounded::<u32>();
            rx.recv()
        });
        reported
            .recv_timeout(Duration::from_secs(10))
            .expect("no deadlock reported once the timer fired");
        assert!(waiter.abort());
    });
}

/// A delayed message that an actor of runtime A schedules to an actor of runtime B waits on
/// B's timers; until it fires it counts as a timer of A's too, for A's deadlock check: the
/// reply it leads to may still wake A's actor (before, A saw no timer of its own and reported
/// a deadlock while the reply was on its way).
#[test]
fn a_delayed_message_to_another_runtime_keeps_the_senders_check_away() {
    within_watchdog("a delayed message to another runtime", || {
        let other = Runtime::builder().workers(1).build().unwrap();
        let (echo, _echo) = other.spawn_actor(|mb: Mailbox<threadlet::Addr<u32>>| {
            if let Some(back) = mb.recv() {
                let _ = back.send(7);
            }
        });
        let (rt, reported) = one_worker_reporting_deadlocks();
        let got = rt.block_on(move || {
            let (me, answer) = threadlet::spawn_actor(|mb: Mailbox<u32>| mb.recv());
            // Long against the check's few milliseconds: it looks many times meanwhile.
            let _timer = echo.send_after(Duration::from_millis(300), me);
            answer.join().unwrap()
        });
        assert_eq!(got, Some(7));
        assert!(reported.try_recv().is_err(), "a deadlock was reported");
    });
}

/// A request to an actor of another runtime that takes its time before it replies, with no
/// timer of either runtime's pending meanwhile (it waits on the blocking pool): the sender's
/// runtime has every actor waiting on a mailbox or a join, but the two runtimes are linked (the
/// request woke the server), and the server's runtime may still wake one of ours. Before,
/// the sender's runtime reported a deadlock while the reply was on its way, at every run.
#[test]
fn a_reply_on_its_way_from_another_runtime_is_no_deadlock() {
    within_watchdog("a reply on its way from another runtime", || {
        let other = Runtime::builder().workers(1).build().unwrap();
        let (server, server_h) = other.spawn_actor(|mb: Mailbox<threadlet::Addr<u32>>| {
            for back in mb.iter() {
                // Long against the check's few milliseconds, and no timer: the blocking pool.
                threadlet::blocking(|| std::thread::sleep(Duration::from_millis(300)));
                let _ = back.send(7);
            }
        });
        // The server parked first, so that the request wakes it: a wake links the runtimes (a
        // send to an actor that is running links nothing yet).
        parked(&other, &server_h);
        let (rt, reported) = one_worker_reporting_deadlocks();
        let got = rt.block_on(move || {
            let (me, answer) = threadlet::spawn_actor(|mb: Mailbox<u32>| mb.recv());
            server.send(me).unwrap();
            answer.join().unwrap()
        });
        assert_eq!(got, Some(7));
        assert!(reported.try_recv().is_err(), "a deadlock was reported");
    });
}

/// Linked runtimes are judged together, not excused: an actor of runtime B keeps the address
/// of an actor of runtime A, works outside the actors for a while (the blocking pool), then
/// waits for a message nobody can send, while A's actor waits for an answer. Neither runtime
/// reports while B's actor works (before, A did, at once); both report once it waits, each
/// its own actor.
#[test]
fn a_deadlock_across_linked_runtimes_is_reported_by_each_once_it_is_one() {
    within_watchdog("a deadlock across linked runtimes", || {
        let worked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Each report: the actors it names, and whether the keeper had done its work then.
        let reporting = || {
            let (reports, reported) = mpsc::channel::<(Vec<threadlet::ActorId>, bool)>();
            let worked = worked.clone();
            let rt = Runtime::builder()
                .workers(1)
                .on_deadlock(move |d: &Deadlock| {
                    let when = worked.load(std::sync::atomic::Ordering::SeqCst);
                    let _ = reports.send((d.actors.iter().map(|a| a.id).collect(), when));
                })
                .build()
                .unwrap();
            (rt, reported)
        };
        let (other, other_reported) = reporting();
        let (rt, reported) = reporting();
        let keeper_worked = worked.clone();
        let (keeper, keeper_h) = other.spawn_actor(move |mb: Mailbox<threadlet::Addr<u32>>| {
            // Keeps the first address, works, then waits for a message that never comes.
            let first = mb.recv();
            threadlet::blocking(|| std::thread::sleep(Duration::from_millis(300)));
            keeper_worked.store(true, std::sync::atomic::Ordering::SeqCst);
            let second = mb.recv();
            (first, second).1.is_some()
        });
        let keeper_id = keeper_h.id();
        // The keeper parked first, so that the send below wakes it: a wake links the runtimes.
        parked(&other, &keeper_h);
        let waiter = wait_on_keeper(&rt, keeper);
        let (named, when) = reported
            .recv_timeout(Duration::from_secs(10))
            .expect("no deadlock reported");
        assert!(when, "reported while the keeper worked");
        assert_eq!(named, [waiter.id()]);
        let (other_named, other_when) = other_reported
            .recv_timeout(Duration::from_secs(10))
            .expect("no deadlock reported by the other runtime");
        assert!(
            other_when,
            "the other runtime reported while the keeper worked"
        );
        assert_eq!(other_named, [keeper_id]);
        waiter.abort();
        keeper_h.abort();
    });
}

/// A linked runtime whose actor looked alive only through an address a plain thread held:
/// once the thread drops it (not the last address, so nothing runs, and no stamp changes), the
/// deadlock of the two is still reported, at a later look. Before, the linked runtime's walk
/// was remembered as alive while its stamp stood, and the report never came.
#[test]
fn a_linked_runtime_that_dies_without_running_is_looked_at_again() {
    within_watchdog("a linked runtime that dies without running", || {
        let other = Runtime::builder().workers(1).build().unwrap();
        let (rt, reported) = one_worker_reporting_ids();
        let (keeper, keeper_h) = other.spawn_actor(|mb: Mailbox<threadlet::Addr<u32>>| {
            // Keeps every address it gets, and answers none.
            mb.iter().collect::<Vec<_>>()
        });
        parked(&other, &keeper_h);
        let outside = keeper.clone();
        let waiter = wait_on_keeper(&rt, keeper);
        // The keeper is alive while main holds an address of it: no report.
        std::thread::sleep(QUIET);
        assert!(
            reported.try_recv().is_err(),
            "reported while main could send"
        );
        drop(outside);
        let named = reported
            .recv_timeout(Duration::from_secs(10))
            .expect("no deadlock reported");
        assert_eq!(named, [waiter.id()]);
        waiter.abort();
        keeper_h.abort();
    });
}

/// What a counted timer arms in turn counts too: an interval's later ticks (armed by the tick
/// before, on the receiving runtime's monitor thread, not by an actor of the sender's
/// runtime). Runtime A's actor waits for three echoes of an interval it runs to an actor of
/// runtime B; between two ticks nothing else is pending for A, and before, A reported a
/// deadlock after the first tick.
#[test]
fn an_interval_to_another_runtime_keeps_the_senders_check_away_between_ticks() {
    within_watchdog("an interval to another runtime", || {
        let other = Runtime::builder().workers(1).build().unwrap();
        let (echo, _echo) = other.spawn_actor(|mb: Mailbox<threadlet::Addr<u32>>| {
            for back in mb.iter().take(3) {
                let _ = back.send(7);
            }
        });
        let (rt, reported) = one_worker_reporting_deadlocks();
        let got = rt.block_on(move || {
            let (me, answers) =
                threadlet::spawn_actor(|mb: Mailbox<u32>| mb.iter().take(3).sum::<u32>());
            // Long against the check's few milliseconds: it looks many times between ticks.
            let ticks = echo.send_interval(Duration::from_millis(150), move || me.clone());
            let got = answers.join().unwrap();
            ticks.cancel();
            got
        });
        assert_eq!(got, 21);
        assert!(reported.try_recv().is_err(), "a deadlock was reported");
    });
}

/// And a delayed message's retries: one that finds its bounded mailbox on runtime B full is
/// tried again from B's monitor thread, and still counts for runtime A, whose actor waits for
/// the reply it leads to.
#[test]
fn a_delayed_message_retried_on_another_runtime_keeps_the_senders_check_away() {
    within_watchdog("a delayed message retried on another runtime", || {
        let other = Runtime::builder().workers(1).build().unwrap();
        let (echo, _echo) = ActorBuilder::new()
            .mailbox_capacity(1)
            .spawn_actor_on(&other, |mb: Mailbox<Option<threadlet::Addr<u32>>>| {
                // The filler below keeps the mailbox full this long: the delayed message is
                // refused, and retried every millisecond meanwhile.
                threadlet::sleep(Duration::from_millis(300));
                for back in mb.iter().flatten() {
                    let _ = back.send(7);
                }
            })
            .unwrap();
        echo.send(None).unwrap();
        let (rt, reported) = one_worker_reporting_deadlocks();
        let got = rt.block_on(move || {
            let (me, answer) = threadlet::spawn_actor(|mb: Mailbox<u32>| mb.recv());
            let _timer = echo.send_after(Duration::from_millis(10), Some(me));
            answer.join().unwrap()
        });
        assert_eq!(got, Some(7));
        assert!(reported.try_recv().is_err(), "a deadlock was reported");
    });
}

/// Once the last timer that runtime A's actors armed on runtime B's heap has fired, A's check
/// looks again: here the delayed message reaches an actor of B that keeps the address and never
/// replies, so A's actor waits for good, and that is reported (before, A's monitor, asleep
/// with nothing of its own pending, never looked again).
#[test]
fn a_deadlock_left_by_a_timer_on_another_runtime_is_reported() {
    within_watchdog("a deadlock left by a timer on another runtime", || {
        let other = Runtime::builder().workers(1).build().unwrap();
        let (keeper, _keeper) = other.spawn_actor(|mb: Mailbox<threadlet::Addr<u32>>| {
            // Keeps every address it gets, and answers none (its own address stays with the
            // main thread, so it is no deadlock of its runtime's).
            mb.iter().collect::<Vec<_>>()
        });
        let (rt, reported) = one_worker_reporting_ids();
        let waiter = rt.block_on(move || {
            let (me, waiter) = threadlet::spawn_actor(|mb: Mailbox<u32>| mb.recv());
            let _timer = keeper.send_after(Duration::from_millis(50), me);
            waiter
        });
        let named = reported
            .recv_timeout(Duration::from_secs(10))
            .expect("no deadlock reported");
        assert_eq!(named, [waiter.id()]);
        waiter.abort();
    });
}

/// A `blocking` closure runs to its end though the actor that called it was killed meanwhile,
/// and may hold what wakes another actor: while it runs, the deadlock check reports nothing
/// (here `panic_on_deadlock` would kill the `block_on` root that waits for the closure's send).
#[test]
fn a_blocking_closure_that_outlives_its_killed_caller_holds_off_the_deadlock_report() {
    within_watchdog("a blocking closure holding a sender", || {
        let (rt, reports) = reporting(Runtime::builder().workers(1).panic_on_deadlock());
        let (release, released) = mpsc::channel::<()>();
        let (waiting_tx, waiting) = mpsc::channel::<()>();
        let root = std::thread::spawn(move || {
            rt.block_on(move || {
                let (tx, rx) = channel::bounded::<u32>(1);
                let (running_tx, running) = channel::bounded::<()>(1);
                let caller = threadlet::spawn(move || {
                    threadlet::blocking(move || {
                        running_tx.send(()).unwrap();
                        released.recv().unwrap();
                        tx.send(7).unwrap();
                    })
                });
                // Once the closure runs on the pool, its caller goes.
                running.recv().unwrap();
                caller.abort();
                assert!(caller.join().unwrap_err().is_killed());
                waiting_tx.send(()).unwrap();
                rx.recv()
            })
        });
        waiting.recv().unwrap();
        // Several of the monitor's sample periods with every actor waiting on the channel.
        std::thread::sleep(Duration::from_millis(300));
        release.send(()).unwrap();
        assert_eq!(root.join().unwrap(), Ok(7));
        let reported: Vec<String> = reports.try_iter().map(|d| d.to_string()).collect();
        assert_eq!(reported, Vec::<String>::new());
    });
}

/// The other half: a deadlock held off by a job on the blocking pool is reported once the job
/// ends (the pool's last job kicks the monitor, which sleeps with nothing of its own pending).
#[test]
fn a_deadlock_held_off_by_a_blocking_job_is_reported_when_the_job_ends() {
    within_watchdog("a deadlock behind a blocking job", || {
        let (rt, reports) = reporting_runtime(1);
        let (release, released) = mpsc::channel::<()>();
        let (running_tx, running) = mpsc::channel::<()>();
        // A job whose caller is killed once it runs; it holds nothing of the two below.
        let caller = rt.spawn(move || {
            threadlet::blocking(move || {
                running_tx.send(()).unwrap();
                released.recv().unwrap();
            })
        });
        running.recv().unwrap();
        caller.abort();
        assert!(caller.join().unwrap_err().is_killed());
        // Two actors, each waiting for the other's message: a deadlock. (The channels are made
        // inside an actor: ends made on a plain thread count as held outside.)
        rt.spawn(|| {
            let (to_a, from_b) = channel::bounded::<()>(1);
            let (to_b, from_a) = channel::bounded::<()>(1);
            threadlet::spawn(move || {
                let _ = from_b.recv();
                drop(to_b);
            });
            threadlet::spawn(move || {
                let _ = from_a.recv();
                drop(to_a);
            });
        })
        .join()
        .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let reported: Vec<String> = reports.try_iter().map(|d| d.to_string()).collect();
        assert_eq!(reported, Vec::<String>::new());
        release.send(()).unwrap();
        let report = reports
            .recv_timeout(common::WATCHDOG)
            .expect("reported once the job ended")
            .to_string();
        assert!(report.contains("2 actors"), "{report}");
    });
}

/// Under the GIL baseline a worker that has taken an actor waits for the global lock before it
/// runs it: until it has the lock, nothing may say that it runs that actor. Before the fix it
/// published the actor as running first, and the monitor reported it as holding its worker for
/// long (and charged it CPU time) while another actor held the lock in a blocking call.
#[test]
fn under_the_gil_a_worker_waiting_for_the_lock_is_not_reported_as_running_its_actor() {
    within_watchdog("long runs under the GIL", || {
        let (report_tx, reports) = mpsc::channel();
        let rt = Runtime::builder()
            .workers(2)
            .scheduler(threadlet::Scheduler::Gil)
            .time_slice(Duration::from_millis(5))
            .on_long_run(move |run| {
                let _ = report_tx.send(run.actor);
            })
            .build()
            .unwrap();
        let (started_tx, started) = mpsc::channel();
        // A plain blocking call, no safe point: holds its worker, and the lock, for 300 ms.
        let hog = rt.spawn(move || {
            started_tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(300));
        });
        started.recv().unwrap();
        let waiting = rt.spawn(|| 7);
        let (hog_id, waiting_id) = (hog.id(), waiting.id());
        hog.join().unwrap();
        assert_eq!(waiting.join().unwrap(), 7);
        drop(rt);
        // (The hog itself is reported, unless the machine kept the monitor from sampling.)
        let reported: Vec<_> = reports.try_iter().collect();
        assert!(
            !reported.contains(&waiting_id),
            "hog {hog_id}: {reported:?}"
        );
    });
}

/// Under the global-queue baseline the dump counts the actors waiting in its queues (they
/// replace the workers' queues and the injector, which it never uses): before, a dump taken
/// while the one worker was held showed none of the actors queued behind it.
#[test]
fn the_dump_and_the_metrics_count_the_actors_waiting_in_the_global_queue() {
    within_watchdog("a dump under the global queue", || {
        let rt = Runtime::builder()
            .workers(1)
            .scheduler(threadlet::Scheduler::GlobalQueue)
            .build()
            .unwrap();
        let (started_tx, started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        // Holds the one worker (a plain blocking receive) while the others queue.
        let holder = rt.spawn(move || {
            started_tx.send(()).unwrap();
            released.recv().unwrap();
        });
        started.recv().unwrap();
        let queued: Vec<_> = (0..5).map(|_| rt.spawn(|| ())).collect();
        let dump = rt.dump();
        let metrics = rt.metrics();
        release.send(()).unwrap();
        holder.join().unwrap();
        for h in queued {
            h.join().unwrap();
        }
        let waiting = dump.injected + dump.workers.iter().map(|w| w.queued).sum::<usize>();
        assert_eq!(waiting, 5, "{dump}");
        // The metrics say the same (they said 0: they read only the queues this baseline
        // replaces).
        let waiting = metrics.injected + metrics.workers.iter().map(|w| w.queued).sum::<usize>();
        assert_eq!(waiting, 5, "{metrics:?}");
    });
}
