//! The monitor thread survives the user code it runs (timer callbacks and their destructors,
//! the long-run hook) and any time slice; `call_at` from plain threads shares one timer thread;
//! long-run reports name the actor.
//!
//! "The monitor is alive" is checked by behaviour: a `sleep` inside an actor returns (a timer
//! fired) and a loop of safe points is preempted (the monitor sampled it). Timeouts here are
//! only watchdogs against a hang, never measurements.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use threadlet_runtime::{LongRun, Runtime, SpawnOptions, call_at, checkpoint, preemptions, sleep};

/// How long a step may take before the test calls it a hang.
const WATCHDOG: Duration = Duration::from_secs(20);

/// Runs `f` on its own thread and returns its value, failing the test if it hangs.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what} did not finish within {WATCHDOG:?}: the monitor thread is dead")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

/// Waits for `flag`, failing the test if it is not raised in time.
fn wait_for(what: &str, flag: &AtomicBool) {
    let start = Instant::now();
    while !flag.load(Ordering::SeqCst) {
        assert!(start.elapsed() < WATCHDOG, "{what} never happened");
        thread::sleep(Duration::from_millis(1));
    }
}

fn runtime(slice: Duration) -> Arc<Runtime> {
    Arc::new(
        Runtime::builder()
            .workers(1)
            .time_slice(slice)
            .build()
            .unwrap(),
    )
}

/// Timers still fire and actors are still preempted: the monitor runs.
fn assert_monitor_alive(rt: &Arc<Runtime>) {
    let r = rt.clone();
    within("sleep(20 ms) inside an actor", move || {
        r.block_on(|| sleep(Duration::from_millis(20)))
    });
    let r = rt.clone();
    let preempted = within("a loop of checkpoints", move || {
        r.block_on(|| {
            while preemptions() == 0 {
                checkpoint();
            }
            preemptions()
        })
    });
    assert!(preempted >= 1);
}

/// Panics when dropped; counts its drops first.
struct PanicOnDrop(Arc<AtomicUsize>);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("a message that panics when dropped");
    }
}

#[test]
fn a_panicking_call_at_callback_leaves_the_monitor_running() {
    let rt = runtime(Duration::from_millis(2));
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    rt.block_on(move || {
        call_at(Instant::now(), move || {
            r.store(true, Ordering::SeqCst);
            panic!("a call_at callback panics");
        })
    });
    wait_for("the callback", &ran);
    assert_monitor_alive(&rt);
}

/// Like `send_after` to an actor that has ended: the callback drops its message, whose
/// destructor panics.
#[test]
fn a_callback_whose_message_panics_when_dropped_leaves_the_monitor_running() {
    let rt = runtime(Duration::from_millis(2));
    let drops = Arc::new(AtomicUsize::new(0));
    let msg = PanicOnDrop(drops.clone());
    rt.block_on(move || {
        call_at(Instant::now() + Duration::from_millis(1), move || {
            drop(msg); // "the actor has ended": nobody to hand the message to
        })
    });
    let start = Instant::now();
    while drops.load(Ordering::SeqCst) == 0 {
        assert!(start.elapsed() < WATCHDOG, "the callback never ran");
        thread::sleep(Duration::from_millis(1));
    }
    assert_monitor_alive(&rt);
}

/// Shutdown drops pending callbacks without running them, on the thread dropping the runtime;
/// a destructor's panic there is contained too.
#[test]
fn callbacks_pending_at_shutdown_are_dropped_and_contained() {
    let rt = runtime(Duration::from_millis(2));
    let drops = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicBool::new(false));
    let (msg, r) = (PanicOnDrop(drops.clone()), ran.clone());
    rt.block_on(move || {
        call_at(Instant::now() + Duration::from_secs(3600), move || {
            let _msg = msg;
            r.store(true, Ordering::SeqCst);
        })
    });
    let rt = Arc::into_inner(rt).expect("the only reference");
    drop(rt);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped at shutdown");
    assert!(!ran.load(Ordering::SeqCst), "never run");
}

#[test]
fn a_panicking_long_run_hook_leaves_the_monitor_running() {
    let called = Arc::new(AtomicBool::new(false));
    let c = called.clone();
    let rt = Arc::new(
        Runtime::builder()
            .workers(1)
            .time_slice(Duration::from_millis(2))
            .on_long_run(move |_| {
                c.store(true, Ordering::SeqCst);
                panic!("the long-run hook panics");
            })
            .build()
            .unwrap(),
    );
    let c = called.clone();
    let spinner = rt.spawn(move || {
        // No safe point until the report: the monitor must call the hook.
        let start = Instant::now();
        while !c.load(Ordering::SeqCst) && start.elapsed() < WATCHDOG {
            std::hint::spin_loop();
        }
    });
    within("the spinning actor", move || spinner.join().unwrap());
    assert!(called.load(Ordering::SeqCst), "the hook was never called");
    assert_monitor_alive(&rt);
}

/// A time slice too long to add to an `Instant` never preempts and never reports, and the
/// monitor's arithmetic on it does not overflow while it samples a busy worker.
#[test]
fn a_maximal_time_slice_never_preempts_and_keeps_the_monitor_running() {
    let reports = Arc::new(AtomicUsize::new(0));
    let n = reports.clone();
    let rt = Arc::new(
        Runtime::builder()
            .workers(2)
            .time_slice(Duration::MAX)
            .on_long_run(move |_| {
                n.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap(),
    );
    // A hog holds one worker with no safe point while a sleeper's timers, on the other worker,
    // wake the monitor again and again: it samples the hog's slice each time.
    let (started, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, d) = (started.clone(), done.clone());
    let hog = rt.spawn(move || {
        s.store(true, Ordering::SeqCst);
        let start = Instant::now();
        while !d.load(Ordering::SeqCst) && start.elapsed() < WATCHDOG {
            std::hint::spin_loop();
        }
    });
    wait_for("the hog's start", &started);
    // Spawned from outside, so only the free worker can take it.
    let sleeper = rt.spawn(|| {
        for _ in 0..20 {
            sleep(Duration::from_millis(2));
        }
    });
    within("sleeps beside a busy worker", move || {
        sleeper.join().unwrap()
    });
    done.store(true, Ordering::SeqCst);
    within("the hog", move || hog.join().unwrap());
    let r = rt.clone();
    let preempted = within("a loop of checkpoints", move || {
        r.block_on(|| {
            for _ in 0..100_000 {
                checkpoint();
            }
            preemptions()
        })
    });
    assert_eq!(preempted, 0, "a huge time slice never preempts");
    assert_eq!(reports.load(Ordering::SeqCst), 0, "nor reports");
    let r = rt.clone();
    within("sleep(20 ms) inside an actor", move || {
        r.block_on(|| sleep(Duration::from_millis(20)))
    });
}

fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// `call_at` outside any runtime shares one process-wide timer thread instead of starting a
/// thread per call.
#[test]
fn call_at_from_a_plain_thread_shares_one_timer_thread() {
    const CALLS: usize = 10_000;
    let fired = Arc::new(AtomicUsize::new(0));
    // Sampled while calls are pending: each is due about 50 ms after it is made.
    let mut most_threads = thread_count();
    for i in 0..CALLS {
        let fired = fired.clone();
        call_at(Instant::now() + Duration::from_millis(50), move || {
            fired.fetch_add(1, Ordering::SeqCst);
        });
        if i % 250 == 0 {
            most_threads = most_threads.max(thread_count());
        }
    }
    most_threads = most_threads.max(thread_count());
    assert!(
        most_threads < 50,
        "{most_threads} threads while up to {CALLS} calls were pending"
    );
    let start = Instant::now();
    while fired.load(Ordering::SeqCst) < CALLS {
        assert!(
            start.elapsed() < WATCHDOG,
            "only {} of {CALLS} calls fired",
            fired.load(Ordering::SeqCst)
        );
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(fired.load(Ordering::SeqCst), CALLS);
}

/// The process-wide timer thread contains panics as the monitor does.
#[test]
fn a_panicking_callback_leaves_the_process_timer_thread_running() {
    let drops = Arc::new(AtomicUsize::new(0));
    let msg = PanicOnDrop(drops.clone());
    call_at(Instant::now(), || {
        panic!("a plain thread's callback panics")
    });
    call_at(Instant::now(), move || drop(msg));
    let (tx, rx) = mpsc::channel();
    call_at(Instant::now() + Duration::from_millis(5), move || {
        tx.send(()).unwrap()
    });
    rx.recv_timeout(WATCHDOG)
        .expect("the timer thread died: a later call never ran");
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

/// Spins with no safe point on a runtime whose hook sends its report, until reported.
fn long_run_report(opts: SpawnOptions) -> (threadlet_runtime::ActorId, LongRun) {
    let (tx, rx) = mpsc::channel::<LongRun>();
    let reported = Arc::new(AtomicBool::new(false));
    let r = reported.clone();
    let rt = Runtime::builder()
        .workers(1)
        .time_slice(Duration::from_millis(1))
        .on_long_run(move |lr| {
            let _ = tx.send(lr.clone());
            r.store(true, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let r = reported.clone();
    let h = rt
        .spawn_with(opts, move || {
            let start = Instant::now();
            while !r.load(Ordering::SeqCst) && start.elapsed() < WATCHDOG {
                std::hint::spin_loop();
            }
        })
        .unwrap();
    let id = h.id();
    let report = rx.recv_timeout(WATCHDOG).expect("no long-run report");
    h.join().unwrap();
    (id, report)
}

#[test]
fn a_long_run_report_names_an_unnamed_actor_by_id() {
    let (id, report) = long_run_report(SpawnOptions::new());
    assert_eq!(report.actor, id);
    assert_eq!(report.name, None);
    assert_eq!(report.worker, 0);
    assert_eq!(report.time_slice, Duration::from_millis(1));
    let line = report.to_string();
    let expected = format!("actor {id} has held worker 0 for ");
    assert!(line.starts_with(&expected), "{line}");
    assert!(
        line.contains(" ms without reaching a safe point (time slice 1 ms; its thread on a CPU "),
        "{line}"
    );
    assert!(line.ends_with(" ms of it)"), "{line}");
}

#[test]
fn a_long_run_report_names_a_named_actor_by_id_and_name() {
    let (id, report) = long_run_report(SpawnOptions::new().name("spinner"));
    assert_eq!(report.actor, id);
    assert_eq!(report.name.as_deref(), Some("spinner"));
    let expected = format!("actor {id} \"spinner\" has held worker 0 for ");
    let line = report.to_string();
    assert!(line.starts_with(&expected), "{line}");
}

const CHILD_ENV: &str = "THREADLET_LONG_RUN_CHILD";

/// The default hook's line, read from a child process's stderr (the child spins until killed).
#[test]
fn the_default_long_run_hook_prints_one_line_naming_the_actor() {
    if std::env::var_os(CHILD_ENV).is_some() {
        let rt = Runtime::builder()
            .workers(1)
            .time_slice(Duration::from_millis(1))
            .build()
            .unwrap();
        let h = rt.spawn(|| {
            let start = Instant::now();
            while start.elapsed() < WATCHDOG {
                std::hint::spin_loop(); // no safe point
            }
        });
        eprintln!("child: spinning actor {}", h.id());
        let _ = h.join();
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "the_default_long_run_hook_prints_one_line_naming_the_actor",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut id = None;
    let mut line = None;
    for l in BufReader::new(child.stderr.take().unwrap()).lines() {
        let l = l.unwrap();
        if let Some(rest) = l.strip_prefix("child: spinning actor ") {
            id = Some(rest.to_owned());
        } else if l.starts_with("threadlet: actor ") {
            line = Some(l);
        }
        if id.is_some() && line.is_some() {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let (id, line) = (id.expect("the child's actor id"), line.expect("no report"));
    let prefix = format!("threadlet: actor {id} has held worker 0 for ");
    assert!(line.starts_with(&prefix), "{line}");
    assert!(
        line.contains(" ms without reaching a safe point (time slice 1 ms; its thread on a CPU "),
        "{line}"
    );
    assert!(
        line.contains(" ms of it): call threadlet::checkpoint()"),
        "{line}"
    );
}
