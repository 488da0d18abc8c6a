//! `threadlet::blocking`: a blocking call on the pool leaves the workers to the other actors;
//! values and panics come back; a plain thread runs the closure itself; a killed caller ends
//! at once while its closure finishes on the pool.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::within_watchdog;
use threadlet::{Runtime, RuntimeExt};

/// Two actors sleep for a second inside `blocking`, one per worker; 1,000 actors passing
/// tokens in a ring keep going meanwhile. (Had the sleeps run on the workers, both would be
/// stalled and no token would move during that second.)
#[test]
fn actors_keep_going_while_two_callers_sleep_in_blocking_calls() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    const RING: usize = 1000;
    let passed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // A ring of actors over channels, each forwarding every token to the next.
    let chans: Vec<_> = (0..RING)
        .map(|_| threadlet::channel::unbounded::<u64>())
        .collect();
    let first = chans[0].0.clone();
    let mut handles = Vec::with_capacity(RING);
    for i in 0..RING {
        let rx = chans[i].1.clone();
        let to = chans[(i + 1) % RING].0.clone();
        let (passed, stop) = (passed.clone(), stop.clone());
        handles.push(rt.spawn(move || {
            while let Ok(t) = rx.recv() {
                passed.fetch_add(1, Ordering::Relaxed);
                if stop.load(Ordering::Relaxed) || to.send(t).is_err() {
                    break;
                }
            }
        }));
    }
    drop(chans);
    for t in 0..64 {
        first.send(t).unwrap();
    }
    // Let the ring get going, then start the two sleepers and count what moves meanwhile.
    while passed.load(Ordering::Relaxed) < 10_000 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let sleepers: Vec<_> = (0..2)
        .map(|_| {
            let started = started_tx.clone();
            rt.spawn(move || {
                threadlet::blocking(move || {
                    started.send(()).unwrap();
                    std::thread::sleep(Duration::from_secs(1));
                    "slept"
                })
            })
        })
        .collect();
    started_rx.recv().unwrap();
    started_rx.recv().unwrap();
    let before = passed.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(500));
    let during = passed.load(Ordering::Relaxed) - before;
    for s in sleepers {
        assert_eq!(s.join().unwrap(), "slept");
    }
    stop.store(true, Ordering::Relaxed);
    drop(first);
    within_watchdog("the ring stops", move || {
        for h in handles {
            h.join().unwrap();
        }
    });
    println!("tokens passed while both sleepers slept (500 ms): {during}");
    assert!(
        during > 1000,
        "the ring stalled during the blocking calls: {during} passes"
    );
}

#[test]
fn a_panic_in_the_closure_is_the_callers_panic() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let h = rt.spawn(|| threadlet::blocking(|| -> u32 { panic!("pool-side failure") }));
    let err = h.join().unwrap_err();
    assert_eq!(err.panic_message(), Some("pool-side failure"));
    // The runtime and the pool carry on.
    assert_eq!(rt.block_on(|| threadlet::blocking(|| 5)), 5);
}

#[test]
fn a_handler_actor_may_block_inside_handle() {
    use threadlet::{Actor, Context};
    struct Reader;
    impl Actor for Reader {
        type Msg = (u64, threadlet::Reply<u64>);
        fn handle(&mut self, (n, reply): Self::Msg, _ctx: &mut Context<Self>) {
            reply.send(threadlet::blocking(move || n * 3));
        }
    }
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (addr, _h) = rt.start(Reader);
    for n in 0..20 {
        assert_eq!(addr.ask(|r| (n, r)), Ok(n * 3));
    }
}

/// A caller killed while its closure runs ends at once (its stack unwound); the closure runs
/// to its end on the pool thread, and its value is dropped there.
#[test]
fn a_killed_caller_ends_while_its_closure_finishes_on_the_pool() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let finished = Arc::new(AtomicBool::new(false));
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let f = finished.clone();
    let h = rt.spawn(move || {
        threadlet::blocking(move || {
            started_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            f.store(true, Ordering::SeqCst);
        })
    });
    started_rx.recv().unwrap();
    assert!(h.abort_handle().abort());
    let err = within_watchdog("killed while blocking", move || h.join().unwrap_err());
    assert!(err.is_killed(), "{err:?}");
    assert!(!finished.load(Ordering::SeqCst));
    release_tx.send(()).unwrap();
    within_watchdog("the closure finishes", move || {
        while !finished.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

#[test]
fn a_plain_thread_runs_the_closure_on_itself() {
    let me = std::thread::current().id();
    assert!(threadlet::blocking(
        move || std::thread::current().id() == me
    ));
}

/// An actor that reaches a blocking call after the runtime's drop has begun (and before its
/// next safe point) finds the pool closed. It ran the closure on its worker, and the drop,
/// which joins the workers, waited for the closure: here half a minute.
#[test]
fn a_blocking_call_made_as_the_runtime_drops_does_not_hold_the_drop() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let running = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(false));
    let (r, g) = (running.clone(), go.clone());
    let _caller = rt.spawn(move || {
        r.store(true, Ordering::SeqCst);
        // No safe point here: the drop's request to yield waits for the next one.
        while !g.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
        threadlet::blocking(|| std::thread::sleep(Duration::from_secs(30)));
    });
    while !running.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    let (dropped_tx, dropped) = std::sync::mpsc::channel();
    let dropper = std::thread::spawn(move || {
        drop(rt);
        dropped_tx.send(()).unwrap();
    });
    std::thread::sleep(Duration::from_millis(200)); // the drop has begun
    go.store(true, Ordering::SeqCst);
    dropped
        .recv_timeout(Duration::from_secs(20))
        .expect("the drop waited for the closure");
    dropper.join().unwrap();
}
