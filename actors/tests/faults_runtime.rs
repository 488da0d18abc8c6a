//! Fault containment in the runtime: no user code kills a worker, loses a value, or hangs
//! shutdown. One test (or a few) per defect that once did; each names it (F1, F2, ...), as
//! listed in `docs/safety.md`, "Where user code runs".
//!
//! Tests that must hold a worker busy until shutdown has begun use an actor that spins until
//! `__private::shutting_down()`, so that an actor queued behind it is still unstarted when the
//! runtime drops, deterministically. Hangs are caught by a watchdog rather than a test timeout.

mod common;

use std::cell::{RefCell, RefMut};
use std::io::ErrorKind;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{WATCHDOG, in_child, passes_in_child, within_watchdog};
use threadlet::channel::{self, Sender};
use threadlet::{
    ActorBuilder, BuildError, JoinHandle, MAX_STACK_SIZE, MAX_WORKERS, Mailbox, Runtime,
    RuntimeExt, SpawnOptions,
};
use threadlet_runtime::__private::shutting_down;
use threadlet_runtime::{Cancelled, Waiter, park};

/// No spare workers: several tests hold the only worker with a hog (`hog_until_shutdown`) so
/// that what they spawn stays queued until shutdown, which a spare would run instead.
fn runtime(workers: usize) -> Runtime {
    Runtime::builder()
        .workers(workers)
        .spare_workers(0)
        .build()
        .unwrap()
}

/// Holds a worker, with no safe point, until its runtime begins to shut down; returns once
/// the hog runs.
fn hog_until_shutdown(rt: &Runtime) -> JoinHandle<()> {
    let (running, is_running) = mpsc::channel();
    let h = rt.spawn(move || {
        running.send(()).unwrap();
        while !shutting_down() {
            std::hint::spin_loop();
        }
    });
    is_running.recv().unwrap();
    h
}

/// Panics when dropped.
struct PanicOnDrop(&'static str);
impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("PanicOnDrop({})", self.0);
    }
}

/// Counts its drops and remembers the thread that dropped it.
#[derive(Clone, Default)]
struct DropLog(Arc<Mutex<Vec<String>>>);
struct Logged(DropLog);
impl Drop for Logged {
    fn drop(&mut self) {
        let name = thread::current().name().unwrap_or("?").to_string();
        self.0.0.lock().unwrap().push(name);
    }
}
impl DropLog {
    fn threads(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Fresh actors run and can be joined: the worker(s) still serve. A dead worker fails this
/// (the actors it should run never finish), rather than hanging the test.
fn assert_workers_serve(rt: &Runtime) {
    let deadline = std::time::Instant::now() + WATCHDOG;
    for _ in 0..4 * rt.workers() {
        let h = rt.spawn(|| 42);
        while !h.is_finished() {
            assert!(
                std::time::Instant::now() < deadline,
                "a fresh actor did not run within {WATCHDOG:?}: a worker is dead"
            );
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(h.join().unwrap(), 42);
    }
}

// F1: a panic from dropping an actor's result or payload, with the join handle gone, escaped
// the actor and killed its worker.

#[test]
fn f1_a_result_that_panics_when_dropped_does_not_kill_the_worker() {
    let rt = runtime(1);
    let (go, wait) = mpsc::channel::<()>();
    drop(rt.spawn(move || {
        wait.recv().unwrap();
        PanicOnDrop("result")
    }));
    go.send(()).unwrap();
    assert_workers_serve(&rt);
    within_watchdog("drop(rt)", move || drop(rt));
}

#[test]
fn f1_a_panic_payload_that_panics_when_dropped_does_not_kill_the_worker() {
    let rt = runtime(1);
    let (go, wait) = mpsc::channel::<()>();
    drop(rt.spawn(move || {
        wait.recv().unwrap();
        std::panic::panic_any(PanicOnDrop("payload"))
    }));
    go.send(()).unwrap();
    assert_workers_serve(&rt);
    within_watchdog("drop(rt)", move || drop(rt));
}

thread_local! {
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Lives on an actor's stack across a park, borrowing its worker's thread-local.
struct TiedToThread<'a> {
    _buf: RefMut<'a, Vec<u8>>,
    _log: Logged,
}

#[test]
fn f1_a_pinned_stack_is_unwound_on_its_own_worker() {
    // Once, a worker killed by a result's destructor left its pinned actors to be unwound on
    // whatever thread dropped them last: here the main thread, through a `Waiter`.
    let log = DropLog::default();
    let rt = runtime(1);
    let (waiter_tx, waiter_rx) = mpsc::channel::<Waiter>();
    let l = log.clone();
    let parked = rt.spawn(move || {
        BUF.with(|b| {
            let _tied = TiedToThread {
                _buf: b.borrow_mut(),
                _log: Logged(l),
            };
            waiter_tx.send(Waiter::current()).unwrap();
            while park().is_ok() {} // nobody wakes it
        })
    });
    let waiter = waiter_rx.recv().unwrap();
    let (go, wait) = mpsc::channel::<()>();
    drop(rt.spawn(move || {
        wait.recv().unwrap();
        PanicOnDrop("result")
    }));
    go.send(()).unwrap();
    assert_workers_serve(&rt);
    drop(waiter); // once the last reference but one
    within_watchdog("drop(rt)", move || drop(rt));
    assert!(parked.join().unwrap_err().is_cancelled());
    let threads = log.threads();
    assert_eq!(threads.len(), 1, "dropped once: {threads:?}");
    assert!(threads[0].starts_with("threadlet-worker"), "{threads:?}");
}

#[test]
fn f1_runtime_dropped_while_the_caller_panics_unwinds_actors_on_their_worker() {
    let log = DropLog::default();
    let rt = runtime(1);
    let logged = Logged(log.clone());
    let (addr, _h) = rt.spawn_actor(move |mb: Mailbox<u32>| {
        let _logged = logged;
        mb.recv();
        mb.recv() // parks again after the first message
    });
    addr.send(1).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _rt = rt; // dropped while this closure unwinds
        panic!("a failing test while the runtime is alive");
    }));
    assert!(r.is_err());
    let threads = log.threads();
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert!(threads[0].starts_with("threadlet-worker"), "{threads:?}");
    drop(addr);
}

// F2: a panicking destructor of an unstarted actor's closure killed a worker during shutdown.

#[test]
fn f2_an_unstarted_closure_that_panics_when_dropped_at_shutdown_is_contained() {
    let log = DropLog::default();
    let rt = runtime(1);
    let logged = Logged(log.clone());
    let (addr, parked) = rt.spawn_actor(move |mb: Mailbox<()>| {
        let _logged = logged;
        mb.recv();
    });
    let hog = hog_until_shutdown(&rt);
    let p = PanicOnDrop("unstarted capture");
    let unstarted = rt.spawn(move || drop(p));
    let r = within_watchdog("drop(rt)", move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(rt)))
    });
    assert!(r.is_ok(), "Runtime::drop must not panic");
    assert_eq!(log.threads().len(), 1, "the parked actor was unwound");
    assert!(parked.join().unwrap_err().is_cancelled());
    assert!(unstarted.join().unwrap_err().is_cancelled());
    hog.join().unwrap();
    drop(addr);
}

// F4: a blocking destructor of an unstarted actor's closure hung `Runtime::drop`: it parked
// the worker's OS thread, waiting for an actor that would be unwound only afterwards.

struct SendOnDrop(Sender<&'static str>, Arc<Mutex<Option<bool>>>);
impl Drop for SendOnDrop {
    fn drop(&mut self) {
        let sent = self.0.send("goodbye").is_ok();
        *self.1.lock().unwrap() = Some(sent);
    }
}

#[test]
fn f4_a_blocking_destructor_of_an_unstarted_actor_does_not_hang_shutdown() {
    let outcome = Arc::new(Mutex::new(None));
    let o = outcome.clone();
    within_watchdog("drop(rt)", move || {
        let rt = runtime(1);
        let (tx, rx) = channel::bounded::<&'static str>(0);
        // A started actor owns the receiver and waits on its mailbox for good.
        let (addr, _h) = rt.spawn_actor(move |mb: Mailbox<()>| {
            let _rx = rx;
            mb.recv();
        });
        let _hog = hog_until_shutdown(&rt);
        let guard = SendOnDrop(tx, o);
        let _unstarted = rt.spawn(move || drop(guard));
        drop(rt);
        drop(addr);
    });
    // Outside any actor a worker cannot block: the rendezvous send failed as cancelled.
    assert_eq!(*outcome.lock().unwrap(), Some(false));
}

#[test]
fn blocking_outside_an_actor_on_a_worker_fails_as_cancelled() {
    struct ParkOnDrop(Arc<Mutex<Option<Result<(), Cancelled>>>>);
    impl Drop for ParkOnDrop {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = Some(park());
        }
    }
    let seen = Arc::new(Mutex::new(None));
    let rt = runtime(1);
    let _hog = hog_until_shutdown(&rt);
    let guard = ParkOnDrop(seen.clone());
    let _unstarted = rt.spawn(move || drop(guard));
    within_watchdog("drop(rt)", move || drop(rt));
    assert_eq!(*seen.lock().unwrap(), Some(Err(Cancelled)));
}

// F7: dropping the last `Arc<Runtime>` inside one of its own actors joined its own thread.

#[test]
fn f7_dropping_the_runtime_inside_its_own_actor_hands_shutdown_off() {
    for workers in [1, 2] {
        let out = within_watchdog("drop inside an actor", move || {
            let rt = Arc::new(runtime(workers));
            let (tx, rx) = mpsc::channel();
            let inner = rt.clone();
            let h = rt.spawn(move || {
                rx.recv().unwrap(); // until main has dropped its handle
                drop(inner); // the last one: shutdown starts here
                "returned"
            });
            drop(rt);
            tx.send(()).unwrap();
            h.join()
        });
        assert_eq!(out.unwrap(), "returned", "workers: {workers}");
    }
}

#[test]
fn f7_after_a_handed_off_shutdown_every_actor_is_unwound() {
    let log = DropLog::default();
    let logged = Logged(log.clone());
    let (addr, parked) = within_watchdog("drop inside an actor", move || {
        let rt = Arc::new(runtime(2));
        let (addr, parked) = rt.spawn_actor(move |mb: Mailbox<()>| {
            let _logged = logged;
            mb.recv();
        });
        let (tx, rx) = mpsc::channel();
        let inner = rt.clone();
        let dropper = rt.spawn(move || {
            rx.recv().unwrap(); // until main has dropped its handle
            drop(inner);
        });
        drop(rt);
        tx.send(()).unwrap();
        dropper.join().unwrap();
        (addr, parked)
    });
    // The shutdown thread joins the workers; the parked actor is unwound on its worker.
    let r = within_watchdog("join of the parked actor", move || parked.join());
    assert!(r.unwrap_err().is_cancelled());
    let threads = log.threads();
    assert_eq!(threads.len(), 1);
    assert!(threads[0].starts_with("threadlet-worker"), "{threads:?}");
    drop(addr);
}

// F9: during shutdown, the worker queued a yielded migratable actor with `current` still naming
// it, and the queue push dropped unstarted closures right there: a `park` in such a destructor
// suspended the wrong coroutine (SIGSEGV). Two fixes close it, and this test fails only if both
// regress: pushes at shutdown never drop closures (`Shared::after_push`), and `current` names an
// actor only while its coroutine runs (`WorkerLoop::run_actor`).

#[test]
fn f9_destructors_at_shutdown_never_run_inside_a_stale_actor() {
    /// Who was current, and what `park` said, when the closure dropped.
    type Seen = Option<(Option<threadlet::ActorId>, Result<(), Cancelled>)>;
    struct Probe(Arc<Mutex<Seen>>);
    impl Drop for Probe {
        fn drop(&mut self) {
            let who = threadlet::current();
            *self.0.lock().unwrap() = Some((who, park()));
        }
    }
    let seen = Arc::new(Mutex::new(None));
    let rt = runtime(1);
    let (running, is_running) = mpsc::channel();
    // SAFETY (of the opt-in): the actor holds nothing thread-bound across its yield.
    let m = unsafe { ActorBuilder::new().name("M").migratable() }
        .spawn_on(&rt, move || {
            running.send(()).unwrap();
            while !shutting_down() {
                std::hint::spin_loop();
            }
            threadlet::yield_now(); // after shutdown began
        })
        .unwrap();
    is_running.recv().unwrap();
    let probe = Probe(seen.clone());
    let _u = rt.spawn(move || drop(probe)); // unstarted behind M
    within_watchdog("drop(rt)", move || drop(rt));
    let (who, parked) = seen
        .lock()
        .unwrap()
        .take()
        .expect("the closure was dropped");
    assert_eq!(
        who, None,
        "no actor is current while an unstarted closure drops"
    );
    assert_eq!(parked, Err(Cancelled));
    // M either finished its yield or was unwound at it.
    let _ = m.join();
}

// F10 (runtime part): `sleep(Duration::MAX)` panicked on the deadline's overflow.

#[test]
fn f10_sleep_for_duration_max_sleeps_until_shutdown() {
    let rt = runtime(1);
    let (started, is_started) = mpsc::channel();
    let h = rt.spawn(move || {
        started.send(()).unwrap();
        threadlet::sleep(Duration::MAX);
    });
    is_started.recv().unwrap();
    assert_workers_serve(&rt); // the sleeper holds no worker
    assert!(!h.is_finished());
    within_watchdog("drop(rt)", move || drop(rt));
    assert!(h.join().unwrap_err().is_cancelled());
}

// F11: stack sizes near `usize::MAX` were accepted and failed at the first run.

#[test]
fn f11_stack_sizes_above_the_maximum_are_refused_up_front() {
    for size in [usize::MAX & !4095, 1 << 40, MAX_STACK_SIZE + 4096] {
        let err = Runtime::builder().stack_size(size).build().unwrap_err();
        assert!(
            matches!(err, BuildError::StackTooLarge { requested, maximum: MAX_STACK_SIZE } if requested == size),
            "{err:?}"
        );
        assert!(err.to_string().contains("above the maximum"), "{err}");
    }
    let rt = runtime(1);
    for size in [usize::MAX & !4095, 1 << 40] {
        let err = rt
            .spawn_with(SpawnOptions::new().stack_size(size), || 1)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        let err = ActorBuilder::new()
            .stack_size(size)
            .spawn_on(&rt, || 1)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    }
    // The maximum itself is accepted.
    let h = rt
        .spawn_with(SpawnOptions::new().stack_size(MAX_STACK_SIZE), || 7)
        .unwrap();
    assert_eq!(h.join().unwrap(), 7);
}

// F13: `workers(1 << 40)` aborted the process; thousands of workers took quadratic time.

#[test]
fn f13_worker_counts_above_the_maximum_are_refused() {
    for n in [MAX_WORKERS + 1, 1 << 40, usize::MAX] {
        let err = Runtime::builder().workers(n).build().unwrap_err();
        assert!(
            matches!(err, BuildError::TooManyWorkers { requested, maximum: MAX_WORKERS } if requested == n),
            "{err:?}"
        );
    }
}

#[test]
fn f13_many_workers_build_run_and_stop() {
    // Workers are born parked: building costs a thread each, not a scan of every other
    // worker's queue. (Behaviour only; the cost is measured in docs/benchmarks.md.)
    let rt = Runtime::builder().workers(256).build().unwrap();
    let sum = rt.block_on(|| {
        let hs: Vec<_> = (0..1000u64).map(|i| threadlet::spawn(move || i)).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(sum, 999 * 1000 / 2);
    within_watchdog("drop(rt)", move || drop(rt));
}

// F12: under mprotect guards, custom-size stacks were not counted against the cap on kernel
// mappings, so they used up `vm.max_map_count` for the whole process. The guard kind is chosen
// once per process, so this runs in a child process with mprotect guards forced.

const MPROTECT_CHILD: &str = "THREADLET_TEST_MPROTECT_CHILD";

#[test]
fn f12_custom_size_stacks_count_against_the_mapping_cap() {
    if std::env::var_os(MPROTECT_CHILD).is_some() {
        return mprotect_child(false);
    }
    f12_parent("f12_custom_size_stacks_count_against_the_mapping_cap");
}

// The same after a burst of default-size actors: their slots stay carved (and counted) after
// they end, while the reservations that bounded custom stacks were given back. Custom stacks,
// held only to the cap on reservations, ran the process out of mappings (a bare "Cannot
// allocate memory", and no thread could be made).

#[test]
fn f12_custom_size_stacks_after_a_burst_count_too() {
    if std::env::var_os(MPROTECT_CHILD).is_some() {
        return mprotect_child(true);
    }
    f12_parent("f12_custom_size_stacks_after_a_burst_count_too");
}

/// The kernel's limit on a process's mappings (its default where it cannot be read).
fn max_map_count() -> usize {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65_530)
}

/// Runs test `name` as the f12 child, under `mprotect` guards (chosen once per process).
fn f12_parent(name: &str) {
    let max_map_count = max_map_count();
    if max_map_count > 200_000 {
        eprintln!("vm.max_map_count is {max_map_count}: too many stacks to map in a test; skipped");
        return;
    }
    let out = in_child(
        name,
        &[
            (MPROTECT_CHILD, "1"),
            ("THREADLET_FORCE_MPROTECT_GUARDS", "1"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stdout}\n{stderr}");
    assert!(stdout.contains("CHILD OK"), "{stdout}\n{stderr}");
}

/// Runs a burst of default-size actors, all alive at once (so that each takes a stack of its
/// own, carved), then lets them end: about two thirds of the slots the cap allows.
fn carve_a_burst(rt: &Runtime) {
    let max_map_count = max_map_count();
    let burst = max_map_count / 3;
    let (release, released) = channel::unbounded::<()>();
    let running = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..burst)
        .map(|_| {
            let (released, running) = (released.clone(), running.clone());
            rt.spawn(move || {
                running.fetch_add(1, SeqCst);
                let _ = released.recv();
            })
        })
        .collect();
    while running.load(SeqCst) < burst {
        thread::sleep(Duration::from_millis(1));
    }
    drop(release);
    for h in hs {
        h.join().unwrap();
    }
}

/// The f12 child: custom-size stacks until the runtime refuses one, after a burst of
/// default-size actors if `burst`.
fn mprotect_child(burst: bool) {
    let rt = runtime(1);
    assert!(!rt.stats().madvise_guards);
    if burst {
        carve_a_burst(&rt);
    }
    let hog = hog_until_shutdown(&rt);
    let mut handles = Vec::new();
    let err = loop {
        match ActorBuilder::new()
            .stack_size(128 * 1024)
            .spawn_on(&rt, || ())
        {
            Ok(h) => handles.push(h),
            Err(e) => break e,
        }
        assert!(handles.len() < 200_000, "no error after 200k custom stacks");
    };
    assert!(err.to_string().contains("vm.max_map_count"), "{err}");
    // The rest of the process still gets mappings and threads.
    let big = vec![1u8; 8 << 20];
    assert_eq!(big.len(), 8 << 20);
    assert_eq!(thread::spawn(|| 5).join().unwrap(), 5);
    drop(rt);
    hog.join().unwrap();
    for h in handles {
        assert!(h.join().unwrap_err().is_cancelled());
    }
    println!("CHILD OK after {err}");
}

// Decided: a destructor that panics while a forced unwind (shutdown) already unwinds the same
// stack aborts the process, as Rust does for any panic during unwinding. Checked in a child.

const ABORT_CHILD: &str = "THREADLET_TEST_ABORT_CHILD";

#[test]
fn a_destructor_panicking_during_a_shutdown_unwind_aborts() {
    if std::env::var_os(ABORT_CHILD).is_some() {
        let rt = runtime(1);
        let (started, is_started) = mpsc::channel();
        let _h = rt.spawn(move || {
            let _bomb = PanicOnDrop("during the unwind");
            started.send(()).unwrap();
            while park().is_ok() {}
        });
        is_started.recv().unwrap();
        drop(rt);
        unreachable!("the process aborts while unwinding the actor");
    }
    let out = in_child(
        "a_destructor_panicking_during_a_shutdown_unwind_aborts",
        &[(ABORT_CHILD, "1")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(6), "SIGABRT expected: {stderr}");
    assert!(
        stderr.contains("PanicOnDrop(during the unwind)"),
        "{stderr}"
    );
}

// A conservation check across all of the above: actors that panic in every way the runtime
// contains, mixed with ones that finish, on both worker counts; every join reports an outcome.

#[test]
fn every_join_reports_an_outcome_whatever_panics() {
    for workers in [1, 2] {
        let rt = runtime(workers);
        let done = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        for i in 0..400u32 {
            let d = done.clone();
            let h: JoinHandle<Option<PanicOnDrop>> = rt.spawn(move || {
                d.fetch_add(1, SeqCst);
                match i % 4 {
                    0 => None,
                    1 => Some(PanicOnDrop("result")),
                    2 => std::panic::panic_any(PanicOnDrop("payload")),
                    _ => panic!("plain panic"),
                }
            });
            // Detach half of them: their results and payloads are dropped by the runtime, or,
            // if the actor has already ended, with the handle here, where a result's panic on
            // drop is this thread's, as for any value dropped here.
            if i % 2 == 0 {
                handles.push((i, h));
            } else {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(h)));
            }
        }
        for (i, h) in handles {
            match (i % 4, h.join()) {
                (0, Ok(None)) => {}
                (2, Err(e)) => {
                    // The payload panics when dropped: drop it where that is caught.
                    let payload = e.into_panic();
                    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        drop(payload);
                    }));
                    assert!(dropped.is_err());
                }
                (i, r) => panic!("actor {i}: unexpected {:?}", r.map(|v| v.is_some())),
            }
        }
        assert_workers_serve(&rt);
        within_watchdog("drop(rt)", move || drop(rt));
        assert_eq!(done.load(SeqCst), 400);
    }
}

// B6: a fast producer flooding an unbounded mailbox, while its consumer holds the worker with
// no safe point: the long-run report must name the consumer (by id and name), the actor that
// actually holds the worker, not the producer that fills its mailbox.

#[test]
fn b6_the_long_run_report_names_the_actor_that_holds_the_worker() {
    let reports: Arc<Mutex<Vec<threadlet::LongRun>>> = Arc::default();
    let r = reports.clone();
    let seen = reports.clone();
    let slice = Duration::from_millis(2);
    // No spare: on a crowded machine the flood's worker can get so little CPU that the
    // monitor brings a spare in, which would start the consumer there (worker 1).
    let rt = Runtime::builder()
        .workers(1)
        .spare_workers(0)
        .time_slice(slice)
        .on_long_run(move |lr| r.lock().unwrap().push(lr.clone()))
        .build()
        .unwrap();
    let slow_id = rt.block_on(move || {
        let (addr, slow) = ActorBuilder::new()
            .name("slow-consumer")
            .spawn_actor(move |mb: Mailbox<u64>| {
                let first = mb.recv();
                // Holds the worker, with no safe point, until a report names it (a mutex is
                // no safe point). Spinning for a fixed time instead failed on a crowded CI
                // machine, where the monitor thread itself went without a CPU for most of the
                // spin; the deadline only keeps a broken monitor from hanging the test.
                let start = std::time::Instant::now();
                let named_me = || {
                    let reports = seen.lock().unwrap();
                    reports
                        .iter()
                        .any(|lr| lr.name.as_deref() == Some("slow-consumer"))
                };
                while !named_me() && start.elapsed() < Duration::from_secs(60) {
                    std::hint::spin_loop();
                }
                let mut n = u64::from(first.is_some());
                while mb.recv().is_some() {
                    n += 1;
                }
                n
            })
            .unwrap();
        let flood = ActorBuilder::new()
            .name("flood")
            .spawn(move || {
                for i in 0..200_000u64 {
                    addr.send(i).unwrap();
                }
            })
            .unwrap();
        let slow_id = slow.id();
        flood.join().unwrap();
        assert_eq!(slow.join().unwrap(), 200_000);
        slow_id
    });
    let reports = reports.lock().unwrap().clone();
    let named = reports
        .iter()
        .find(|lr| lr.actor == slow_id)
        .unwrap_or_else(|| panic!("no report names the slow consumer: {reports:?}"));
    assert_eq!(named.name.as_deref(), Some("slow-consumer"));
    assert!(
        named
            .to_string()
            .contains("\"slow-consumer\" has held worker 0"),
        "{named}"
    );
}

/// Dropping a runtime while an actor spins in a loop with safe points: the drop asks it to yield
/// (with time slices off nothing else would, and the monitor stops at shutdown), so the drop
/// returns and the spinner is unwound. Before, the drop waited for the spinner forever.
#[test]
fn dropping_the_runtime_stops_an_actor_spinning_through_safe_points() {
    within_watchdog("drop with a spinner", || {
        for slice in [Duration::ZERO, Duration::from_millis(2)] {
            let rt = Runtime::builder()
                .workers(1)
                .time_slice(slice)
                .build()
                .unwrap();
            let (started_tx, started_rx) = mpsc::channel();
            let unwound = Arc::new(AtomicUsize::new(0));
            let guard = DropCounter(unwound.clone());
            let _spinner = rt.spawn(move || {
                let _guard = guard;
                started_tx.send(()).unwrap();
                loop {
                    threadlet::checkpoint();
                }
            });
            started_rx.recv().unwrap();
            drop(rt);
            assert_eq!(unwound.load(SeqCst), 1, "the spinner's stack was unwound");
        }
    });
}

/// Counts its drops.
struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

// A destructor run by shutdown's unwind may start actors of either kind: as a process actor
// spawned then, a handler actor started then never runs and its join handle reports
// `Cancelled`. `threadlet::start` panicked there instead ("the runtime is shutting down"),
// a panic during the unwind, which aborted the process. Checked in a child.

const START_CHILD: &str = "THREADLET_TEST_START_IN_UNWIND_CHILD";

#[test]
fn a_destructor_may_start_a_handler_actor_during_shutdown() {
    if std::env::var_os(START_CHILD).is_some() {
        struct Echo;
        impl threadlet::Actor for Echo {
            type Msg = u32;
            fn handle(&mut self, _: u32, _: &mut threadlet::Context<Self>) {}
        }
        /// Starts one on its way out, and reports what became of it.
        struct StartsOnDrop(mpsc::Sender<(bool, bool)>);
        impl Drop for StartsOnDrop {
            fn drop(&mut self) {
                let (addr, h) = threadlet::start(Echo);
                let refused = addr.send(1).is_err();
                let cancelled = h.join().is_err_and(|e| e.is_cancelled());
                let _ = self.0.send((refused, cancelled));
            }
        }
        let rt = runtime(1);
        let (started, is_started) = mpsc::channel();
        let (report, reported) = mpsc::channel();
        let _h = rt.spawn(move || {
            let _starts = StartsOnDrop(report);
            started.send(()).unwrap();
            while park().is_ok() {}
        });
        is_started.recv().unwrap();
        drop(rt);
        assert_eq!(reported.recv().unwrap(), (true, true));
        return;
    }
    passes_in_child(
        "a_destructor_may_start_a_handler_actor_during_shutdown",
        &[(START_CHILD, "1")],
    );
}

// A destructor run by a kill's unwind may drain a `JoinSet`: it cannot wait there, so each
// `join_next` kills one member and gives it back as cancelled. `join_next` panicked instead
// (its receive failed, which it took for impossible), a panic during the unwind that aborted
// the process. Checked in a child.

const DRAIN_CHILD: &str = "THREADLET_TEST_DRAIN_IN_UNWIND_CHILD";

#[test]
fn a_destructor_may_drain_a_join_set_while_its_actor_is_killed() {
    if std::env::var_os(DRAIN_CHILD).is_some() {
        /// Drains its set on the way out, and reports the results' kinds.
        struct Drain(threadlet::JoinSet<()>, mpsc::Sender<Vec<bool>>);
        impl Drop for Drain {
            fn drop(&mut self) {
                let mut cancelled = Vec::new();
                while let Some(r) = self.0.join_next() {
                    cancelled.push(r.is_err_and(|e| e.is_cancelled()));
                }
                let _ = self.1.send(cancelled);
            }
        }
        let rt = runtime(2);
        let (report, reported) = mpsc::channel();
        let (started, is_started) = mpsc::channel();
        let h = rt.spawn(move || {
            let mut set = threadlet::JoinSet::new();
            set.spawn(|| threadlet::sleep(Duration::from_secs(3600)));
            let _drain = Drain(set, report);
            started.send(()).unwrap();
            threadlet::sleep(Duration::from_secs(3600));
        });
        is_started.recv().unwrap();
        h.abort();
        assert!(h.join().unwrap_err().is_killed());
        assert_eq!(reported.recv().unwrap(), [true]);
        return;
    }
    passes_in_child(
        "a_destructor_may_drain_a_join_set_while_its_actor_is_killed",
        &[(DRAIN_CHILD, "1")],
    );
}

// F14: an actor whose destructor reached a safe point or blocked while its own panic unwound
// it suspended there, mid-unwind. Std keeps the panic count per thread, so the worker's other
// actors then ran with `std::thread::panicking()` true (a lock they dropped was poisoned), and
// a kill or shutdown that reached the suspended actor forced a new unwind out of a destructor
// already running for the panic: the process aborted. An actor no longer suspends while it
// unwinds a panic: safe points do not yield, and parks fail as in shutdown's unwind.

/// A guard that, dropped during its actor's panic, spins past the time slice and then passes
/// a safe point (a send on an unbounded channel), then blocks on a receive.
struct SlowGuard {
    tx: Sender<()>,
    rx: channel::Receiver<()>,
}

impl Drop for SlowGuard {
    fn drop(&mut self) {
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            std::hint::spin_loop();
        }
        let _ = self.tx.send(());
        // Nothing is ever sent: this fails at once (it used to park mid-unwind).
        assert!(self.rx.recv().is_err());
    }
}

const F14_CHILD: &str = "THREADLET_TEST_F14_CHILD";

#[test]
fn f14_a_kill_or_shutdown_during_a_panics_unwind_does_not_abort() {
    if std::env::var_os(F14_CHILD).is_none() {
        return passes_in_child(
            "f14_a_kill_or_shutdown_during_a_panics_unwind_does_not_abort",
            &[(F14_CHILD, "1")],
        );
    }
    for shutdown in [false, true] {
        let rt = Runtime::builder()
            .workers(1)
            .time_slice(Duration::from_millis(5))
            .build()
            .unwrap();
        let (tx, _keep_rx) = channel::unbounded::<()>();
        let (_keep_tx, rx) = channel::unbounded::<()>();
        let a = rt.spawn(move || {
            let _guard = SlowGuard { tx, rx };
            panic!("A fails");
        });
        let abort = a.abort_handle();
        // Runs once A has yielded (or has ended): on one worker, A runs first.
        rt.spawn(move || abort.abort()).join().unwrap();
        if shutdown {
            within_watchdog("drop(rt)", move || drop(rt));
        }
        let err = within_watchdog("join", move || a.join()).unwrap_err();
        assert!(err.is_panic(), "{err}");
    }
}

#[test]
fn f14_other_actors_never_see_a_panic_that_is_not_theirs() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (_keep_tx, rx) = channel::unbounded::<()>();
    let (tx, _keep_rx) = channel::unbounded::<()>();
    let a = rt.spawn(move || {
        let _guard = SlowGuard { tx, rx };
        panic!("A fails");
    });
    let poisoned = Arc::new(Mutex::new(()));
    let p = poisoned.clone();
    let b = rt.spawn(move || {
        let _held = p.lock().unwrap();
        std::thread::panicking()
    });
    assert!(!within_watchdog("B", move || b.join().unwrap()));
    assert!(!poisoned.is_poisoned());
    assert!(
        within_watchdog("A", move || a.join())
            .unwrap_err()
            .is_panic()
    );
}

/// A `blocking` call from a destructor during the actor's panic runs there, on the actor's own
/// thread, as it does during shutdown's unwind: handed to the pool, its wait could not park
/// (the actor may not suspend then) and spun the worker until the pool thread was done.
#[test]
fn f14_blocking_during_a_panics_unwind_runs_in_place() {
    struct BlockingGuard(mpsc::Sender<bool>);
    impl Drop for BlockingGuard {
        fn drop(&mut self) {
            let here = thread::current().id();
            let ran_here = threadlet::blocking(move || thread::current().id() == here);
            let _ = self.0.send(ran_here);
        }
    }
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let a = rt.spawn(move || {
        let _guard = BlockingGuard(tx);
        panic!("A fails");
    });
    assert!(
        within_watchdog("A", move || a.join())
            .unwrap_err()
            .is_panic()
    );
    assert_eq!(rx.recv_timeout(WATCHDOG), Ok(true));
}

// A panic in an actor on the smallest stack, with backtraces asked for (`RUST_BACKTRACE`):
// the runtime's panic hook, which runs on the actor's stack, captured and formatted the
// backtrace there, which overflowed 16 KiB, and the process died of the overflow. Checked in
// a child, under each setting.

const SMALL_STACK_PANIC_CHILD: &str = "THREADLET_TEST_SMALL_STACK_PANIC_CHILD";

#[test]
fn a_panic_on_the_smallest_stack_with_backtraces_ends_only_its_actor() {
    if std::env::var_os(SMALL_STACK_PANIC_CHILD).is_some() {
        let rt = Runtime::builder()
            .workers(1)
            .stack_size(threadlet::MIN_STACK_SIZE)
            .build()
            .unwrap();
        let h = rt.spawn(|| -> u32 { panic!("on a small stack") });
        assert!(h.join().unwrap_err().is_panic());
        assert_eq!(rt.block_on(|| 1), 1);
        return;
    }
    for backtrace in ["0", "1", "full"] {
        passes_in_child(
            "a_panic_on_the_smallest_stack_with_backtraces_ends_only_its_actor",
            &[
                (SMALL_STACK_PANIC_CHILD, "1"),
                ("RUST_BACKTRACE", backtrace),
            ],
        );
    }
}

// A destructor run by a kill's unwind may contain a panic of its own with
// `catch_actor_panic`: what it catches is that new panic, not the kill's unwind, so it is
// handed back as `Err`, not resumed (which would let it out of a destructor during an unwind,
// an abort). Checked in a child.

const CONTAIN_CHILD: &str = "THREADLET_TEST_CONTAIN_IN_UNWIND_CHILD";

#[test]
fn a_destructor_run_by_a_kill_contains_a_panic_of_its_own() {
    if std::env::var_os(CONTAIN_CHILD).is_some() {
        /// Panics inside a catch on the way out, and reports whether the catch held it.
        struct Contains(mpsc::Sender<bool>);
        impl Drop for Contains {
            fn drop(&mut self) {
                let caught =
                    threadlet_runtime::catch_actor_panic(|| panic!("a destructor's own panic"));
                let _ = self.0.send(caught.is_err());
            }
        }
        let rt = runtime(2);
        let (report, reported) = mpsc::channel();
        let (started, is_started) = mpsc::channel();
        let h = rt.spawn(move || {
            let _contains = Contains(report);
            started.send(()).unwrap();
            threadlet::sleep(Duration::from_secs(3600));
        });
        is_started.recv().unwrap();
        h.abort();
        assert!(h.join().unwrap_err().is_killed());
        assert_eq!(reported.recv(), Ok(true));
        return;
    }
    passes_in_child(
        "a_destructor_run_by_a_kill_contains_a_panic_of_its_own",
        &[(CONTAIN_CHILD, "1")],
    );
}
