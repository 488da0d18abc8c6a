//! Edge cases of kill, exit hooks, links and timers found by review: each failed (or would
//! hang or abort) before its fix.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::within_watchdog;
use threadlet::{ActorBuilder, JoinError, Mailbox, Runtime, RuntimeExt};

/// A timer must never wait for room in a bounded mailbox: the monitor thread that fires it
/// also fires every other timer (sleeps, timeouts) of the runtime.
#[test]
fn timers_on_a_full_bounded_mailbox_neither_stall_the_runtime_nor_lose_a_delayed_message() {
    within_watchdog("timers and bounded mailboxes", || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        // Set once the delayed message is in: "last" goes only after it (or after a deadline
        // only a lost message reaches), else it could take the room a retried timer waits for.
        let got_delayed = Arc::new(AtomicBool::new(false));
        let g = got_delayed.clone();
        let (addr, h) = ActorBuilder::new()
            .mailbox_capacity(1)
            .spawn_actor_on(&rt, move |mb: Mailbox<&'static str>| {
                let mut got = Vec::new();
                while let Some(m) = mb.recv() {
                    got.push(m);
                    if m == "delayed" {
                        g.store(true, Ordering::SeqCst);
                    }
                    if m == "last" {
                        break;
                    }
                    threadlet::sleep(Duration::from_millis(20)); // slower than the ticks
                }
                got
            })
            .unwrap();
        let ticks = addr.send_interval(Duration::from_millis(2), || "tick");
        let delayed = addr.send_after(Duration::from_millis(5), "delayed");
        // Other timers keep firing meanwhile.
        let start = Instant::now();
        rt.block_on(|| threadlet::sleep(Duration::from_millis(60)));
        assert!(start.elapsed() < Duration::from_secs(20)); // a hang guard, not a timing
        ticks.cancel();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !got_delayed.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        addr.send("last").unwrap();
        let got = h.join().unwrap();
        assert!(
            got.contains(&"delayed"),
            "the delayed message was lost: {got:?}"
        );
        assert!(!delayed.cancel(), "it was delivered");
    });
}

/// An actor that links itself, first thing, to one that has already failed is killed, even if
/// the link's signal comes before its spawner has linked the mailbox to the actor.
#[test]
fn a_link_signal_before_the_spawner_attaches_still_kills() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    for _ in 0..50 {
        let (dead, hd) = rt.spawn_actor(|_mb: Mailbox<()>| -> () { panic!("already failed") });
        assert!(hd.join().is_err());
        let (_addr, h) = rt.spawn_actor(move |mb: Mailbox<()>| {
            mb.addr().link(&dead);
            threadlet::sleep(Duration::from_secs(3600));
        });
        let r = within_watchdog("early link", move || h.join());
        assert!(r.as_ref().is_err_and(JoinError::is_killed));
    }
}

/// An exit hook that panics while its actor is being killed is contained: the process does
/// not abort, and the kill completes.
#[test]
fn a_panicking_exit_hook_during_a_kill_is_contained() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let h = rt.spawn(|| threadlet::sleep(Duration::from_secs(3600)));
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    h.exit_watch().on_exit(move |_| {
        r.fetch_add(1, Ordering::SeqCst);
        panic!("a hook that panics");
    });
    assert!(h.abort());
    assert!(h.join().is_err_and(|e| e.is_killed()));
    // The hook ran (it may finish a moment after the join returns), once.
    common::until("the hook ran", || ran.load(Ordering::SeqCst) > 0);
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

/// A message that counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Monitors and addresses do not keep a detached actor's result alive: it drops when the
/// actor ends, as it did before monitors existed.
#[test]
fn watchers_do_not_keep_a_detached_result_alive() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let (addr, h) = rt.spawn_actor(move |mb: Mailbox<()>| {
        mb.recv();
        Counted(d)
    });
    let monitor = addr.monitor();
    let abort = h.abort_handle();
    drop(h); // detached: nobody will take the result
    addr.send(()).unwrap();
    monitor.recv();
    let deadline = Instant::now() + Duration::from_secs(10);
    while drops.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the result is kept alive");
        std::thread::yield_now();
    }
    drop((addr, monitor, abort));
}

/// A handler actor's program is built by user code (`make`, at the runtime's level). Built
/// under the spawn gate, a `make` that spawned through a handle while the runtime was
/// dropping took the gate's fair read lock a second time, behind shutdown's waiting write:
/// both waited for good. It is built before the gate is taken.
#[test]
fn a_program_built_while_the_runtime_drops_may_spawn_through_a_handle() {
    use threadlet_runtime::{Activation, Completion, SpawnOptions, Step};

    /// Ends at its first activation.
    struct Ends(Option<Completion<()>>);
    impl Activation for Ends {
        fn run(&mut self) -> Step {
            if let Some(c) = self.0.take() {
                c.complete(Ok(()));
            }
            Step::Stop
        }
    }

    let rt = Runtime::builder().workers(1).build().unwrap();
    let handle = rt.handle();
    let (building_tx, building) = std::sync::mpsc::channel();
    let starter = std::thread::spawn(move || {
        let inner = handle.clone();
        handle.start_handler(SpawnOptions::new(), move |_, completion| {
            building_tx.send(()).unwrap();
            // Long enough for the drop below to reach the gate and wait there to close it.
            std::thread::sleep(Duration::from_millis(300));
            let spawned = inner.spawn(|| ());
            drop(spawned);
            Ends(Some(completion))
        })
    });
    building.recv().unwrap();
    common::within(
        Duration::from_secs(20),
        "drop while a program is built",
        move || drop(rt),
    );
    // Whether it was refused (the gate closed first) or started, the drop and the start both
    // returned: neither waited for the other.
    let _ = starter.join().unwrap();
}

/// An exit hook must not block. One that did suspended its actor with its worker's count of
/// running exit hooks still raised, and every other actor on that worker lost its yields
/// (and time slices): here a spinner that yields until a second actor runs kept the only
/// worker for good. Blocking in an exit hook now fails at once, as in a shutdown.
#[test]
fn an_exit_hook_that_would_block_does_not_take_its_workers_yields_away() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (go_tx, go) = threadlet::channel::bounded::<()>(1);
    let ending = rt.spawn(move || go.recv().ok());
    let (slept_tx, slept) = std::sync::mpsc::channel();
    ending.exit_watch().on_exit(move |_| {
        threadlet::sleep(Duration::from_secs(3600));
        let _ = slept_tx.send(());
    });
    go_tx.send(()).unwrap();
    slept
        .recv_timeout(Duration::from_secs(20))
        .expect("the hook's sleep returns at once");
    let ran = within_watchdog("a spinner that yields", move || {
        rt.block_on(|| {
            let done = Arc::new(AtomicBool::new(false));
            let d = done.clone();
            let other = threadlet::spawn(move || d.store(true, Ordering::SeqCst));
            while !done.load(Ordering::SeqCst) {
                threadlet::yield_now();
            }
            other.join().is_ok()
        })
    });
    assert!(ran);
    assert!(ending.join().is_ok());
}

/// A join that cannot wait (here in an exit hook, which may not suspend) is reported as
/// `Cancelled`, as documented, but its message must not say that the runtime shut down and
/// cancelled the actor: nothing shut down, and the actor runs on to its end.
#[test]
fn a_join_that_cannot_wait_does_not_claim_a_shutdown() {
    within_watchdog("a join inside an exit hook", || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (go, wait_for_go) = threadlet::channel::bounded::<()>(1);
        let (ran_tx, ran) = std::sync::mpsc::channel();
        let late = rt.spawn(move || {
            let _ = wait_for_go.recv();
            ran_tx.send(()).unwrap();
        });
        let late_id = late.id();
        let (seen_tx, seen) = std::sync::mpsc::channel();
        let mut late = Some(late);
        let ending = rt.spawn(|| ());
        ending.exit_watch().on_exit(move |_| {
            let err = late.take().expect("one call").join().unwrap_err();
            seen_tx.send(err).unwrap();
        });
        let err = seen.recv().unwrap();
        assert!(err.is_cancelled() && err.is_not_joined(), "{err:?}");
        assert_eq!(err.id(), late_id);
        let text = err.to_string();
        assert!(!text.contains("cancelled by runtime shutdown"), "{text}");
        assert!(text.contains("was not joined"), "{text}");
        // The actor it named was not cancelled: it still runs, and finishes when told to.
        go.send(()).unwrap();
        ran.recv().unwrap();
        // A real cancellation keeps its message.
        let parked = rt.spawn(|| threadlet::sleep(Duration::from_secs(3600)));
        drop(rt);
        let err = parked.join().unwrap_err();
        assert!(err.is_cancelled() && !err.is_not_joined(), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("cancelled by runtime shutdown"), "{text}");
    });
}

/// Sets its flag when dropped.
struct FlagOnDrop(Arc<AtomicBool>);

impl Drop for FlagOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// An actor of one runtime that drops the last handle of another waits for that runtime's
/// shutdown (its suspended actors unwound) as a plain thread would, suspended rather than
/// holding its worker.
#[test]
fn an_actor_dropping_another_runtime_waits_for_its_shutdown() {
    within_watchdog("drop a runtime from an actor of another", || {
        let a = Runtime::builder().workers(1).build().unwrap();
        let b = Runtime::builder().workers(1).build().unwrap();
        let unwound = Arc::new(AtomicBool::new(false));
        let guard = FlagOnDrop(unwound.clone());
        let (parked_tx, parked) = std::sync::mpsc::channel();
        let parked_on_b = b.spawn(move || {
            let _guard = guard;
            parked_tx.send(()).unwrap();
            while threadlet_runtime::park().is_ok() {}
        });
        parked.recv().unwrap();
        // Meanwhile A's only worker runs another actor.
        let other = a.spawn(|| 6 * 7);
        let seen = a
            .spawn(move || {
                drop(b);
                unwound.load(Ordering::SeqCst)
            })
            .join()
            .unwrap();
        assert!(seen, "the drop returned before B's actors were unwound");
        assert!(parked_on_b.join().unwrap_err().is_cancelled());
        assert_eq!(other.join().unwrap(), 42);
    });
}

/// Two runtimes, each one's last handle held by an actor of the other: an actor of A drops
/// B, whose shutdown unwinds the actor that holds A. Both shut down; neither waits for the
/// other for good (each drop ran its shutdown on the dropping thread, a worker of the other
/// runtime, and joined the other's worker: both hung).
#[test]
fn two_runtimes_that_hold_each_others_last_handle_both_shut_down() {
    within_watchdog("two runtimes dropped through each other", || {
        let a = Arc::new(Runtime::builder().workers(1).build().unwrap());
        let b = Arc::new(Runtime::builder().workers(1).build().unwrap());
        let (parked_tx, parked) = std::sync::mpsc::channel();
        let holds_a = a.clone();
        let on_b = b.spawn(move || {
            let _a = holds_a;
            parked_tx.send(()).unwrap();
            while threadlet_runtime::park().is_ok() {}
        });
        parked.recv().unwrap();
        let (go_tx, go) = std::sync::mpsc::channel::<()>();
        let holds_b = b.clone();
        let on_a = a.spawn(move || {
            go.recv().unwrap();
            drop(holds_b);
        });
        drop((a, b));
        go_tx.send(()).unwrap();
        // A shut down while its actor waited for B's shutdown, or after: either end is right.
        let _ = on_a.join();
        assert!(on_b.join().unwrap_err().is_cancelled());
    });
}

/// An actor that drops another runtime's last handle waits for its shutdown without a thread
/// of its own runtime's blocking pool: with that pool's one thread held by a job that waits
/// for what the actor does after the drop, the drop still returns (it waited in the pool's
/// queue for good).
#[test]
fn an_actor_dropping_another_runtime_needs_no_blocking_pool_thread() {
    within_watchdog("a drop beside a busy blocking pool", || {
        let other = Runtime::builder().workers(1).build().unwrap();
        let rt = Runtime::builder()
            .workers(2)
            .blocking_threads(1)
            .build()
            .unwrap();
        let (after_drop_tx, after_drop) = std::sync::mpsc::channel::<()>();
        let (job_runs_tx, job_runs) = std::sync::mpsc::channel::<()>();
        let pool_held = rt.spawn(move || {
            threadlet::blocking(move || {
                job_runs_tx.send(()).unwrap();
                after_drop.recv().unwrap();
            })
        });
        job_runs.recv().unwrap();
        let dropper = rt.spawn(move || {
            drop(other);
            after_drop_tx.send(()).unwrap();
        });
        dropper.join().unwrap();
        pool_held.join().unwrap();
    });
}
