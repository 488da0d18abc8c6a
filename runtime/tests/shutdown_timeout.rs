//! `Runtime::shutdown_timeout` and `shutdown_background`: they return by their deadline
//! whatever the actors do, say whether the shutdown completed, and a shutdown left to the
//! background still completes: every actor is stopped, its stack unwound.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

mod common;

use common::under_each_scheduler;
use threadlet_runtime::{Runtime, Scheduler, park};

/// Runs `f` on a thread of its own; fails if it has not returned within a minute (a hang).
fn within_a_minute<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what}: no return within a minute"))
}

/// Tells a channel when dropped: the actor's stack was unwound.
struct Unwound(mpsc::Sender<()>);

impl Drop for Unwound {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

/// An actor parked for good in `rt`, which tells the receiver returned when its stack is
/// unwound.
fn parked_for_good(rt: &Runtime) -> mpsc::Receiver<()> {
    let (unwound_tx, unwound) = mpsc::channel();
    let (started, is_started) = mpsc::channel();
    rt.spawn(move || {
        let _guard = Unwound(unwound_tx);
        started.send(()).unwrap();
        while park().is_ok() {}
    });
    is_started.recv().unwrap();
    unwound
}

/// An actor in a loop with no safe point until `release` is set: it holds any shutdown.
fn spinning(rt: &Runtime, release: &Arc<AtomicBool>) {
    let (started, is_started) = mpsc::channel();
    let release = release.clone();
    rt.spawn(move || {
        started.send(()).unwrap();
        while !release.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    is_started.recv().unwrap();
}

/// A runtime of 2 workers under work stealing, with an actor [`parked_for_good`] in it.
fn runtime_with_a_parked_actor() -> (Runtime, mpsc::Receiver<()>) {
    let rt = Runtime::builder()
        .workers(2)
        .scheduler(Scheduler::WorkStealing)
        .build()
        .unwrap();
    let unwound = parked_for_good(&rt);
    (rt, unwound)
}

/// Waits (a minute at most) for the actor of [`parked_for_good`] to be unwound by a shutdown
/// left to finish after the call returned.
fn wait_unwound(unwound: &mpsc::Receiver<()>, what: impl std::fmt::Debug) {
    unwound
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what:?}: the parked actor was never unwound"));
}

#[test]
fn a_shutdown_that_completes_in_time_says_so() {
    for (scheduler, rt) in under_each_scheduler(2) {
        let unwound = parked_for_good(&rt);
        let done = within_a_minute("shutdown_timeout", move || {
            rt.shutdown_timeout(Duration::from_secs(30))
        });
        assert!(done, "{scheduler:?}");
        // Complete: the parked actor was unwound before it returned.
        assert_eq!(unwound.try_recv(), Ok(()), "{scheduler:?}");
    }
}

#[test]
fn a_shutdown_held_by_an_actor_returns_at_its_deadline_and_completes_later() {
    for (scheduler, rt) in under_each_scheduler(2) {
        let unwound = parked_for_good(&rt);
        let release = Arc::new(AtomicBool::new(false));
        spinning(&rt, &release);
        let done = within_a_minute("shutdown_timeout", move || {
            rt.shutdown_timeout(Duration::from_millis(50))
        });
        assert!(!done, "{scheduler:?}");
        // The shutdown goes on in the background: once the spinner ends, it completes.
        release.store(true, Ordering::Relaxed);
        wait_unwound(&unwound, scheduler);
    }
}

#[test]
fn shutdown_background_returns_at_once_and_the_shutdown_completes() {
    let (rt, unwound) = runtime_with_a_parked_actor();
    within_a_minute("shutdown_background", move || rt.shutdown_background());
    wait_unwound(&unwound, "shutdown_background");
}

/// From an actor of another runtime the wait is suspended (its worker runs its other actors)
/// and ends by the deadline; from an actor of the runtime itself it cannot wait at all.
#[test]
fn shutdown_timeout_from_actors() {
    let outer = Runtime::builder().workers(1).build().unwrap();
    let rt = Runtime::builder().workers(1).build().unwrap();
    let release = Arc::new(AtomicBool::new(false));
    spinning(&rt, &release);
    // While the outer actor waits, another actor on its single worker runs.
    let (ran_tx, ran) = mpsc::channel();
    let done = within_a_minute("from another runtime's actor", {
        let outer_handle = outer.handle();
        move || {
            outer.block_on(move || {
                outer_handle.spawn(move || ran_tx.send(()).unwrap());
                rt.shutdown_timeout(Duration::from_millis(100))
            })
        }
    });
    assert!(!done);
    ran.recv_timeout(Duration::from_secs(60))
        .expect("the other actor on the waiting actor's worker ran");
    release.store(true, Ordering::Relaxed);

    // An actor that owns its own runtime: no wait.
    let (rt, unwound) = runtime_with_a_parked_actor();
    let (holder_tx, holder) = mpsc::channel::<Runtime>();
    let (said_tx, said) = mpsc::channel();
    rt.spawn(move || {
        let rt = holder.recv().unwrap();
        said_tx
            .send(rt.shutdown_timeout(Duration::from_secs(30)))
            .unwrap();
    });
    holder_tx.send(rt).unwrap();
    assert_eq!(said.recv_timeout(Duration::from_secs(60)), Ok(false));
    wait_unwound(&unwound, "an actor's own runtime");
}

/// A closure running in `blocking` does not hold a shutdown, timed or not: the actor that
/// waits for it is stopped, and the closure finishes on its pool thread later.
#[test]
fn a_call_in_the_blocking_pool_does_not_hold_a_timed_shutdown() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (release_tx, release) = mpsc::channel::<()>();
    let (in_call_tx, in_call) = mpsc::channel::<()>();
    let (finished_tx, finished) = mpsc::channel::<()>();
    rt.spawn(move || {
        threadlet_runtime::blocking(move || {
            in_call_tx.send(()).unwrap();
            let _ = release.recv();
            finished_tx.send(()).unwrap();
        })
    });
    in_call.recv().unwrap();
    let done = within_a_minute("shutdown_timeout", move || {
        rt.shutdown_timeout(Duration::from_secs(30))
    });
    assert!(done);
    assert!(finished.try_recv().is_err(), "the call had not finished");
    release_tx.send(()).unwrap();
    finished
        .recv_timeout(Duration::from_secs(60))
        .expect("the call finishes on its pool thread");
}
