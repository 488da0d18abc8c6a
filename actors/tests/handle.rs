//! `Runtime::handle` and `Handle::current`: spawning from anywhere without owning the runtime,
//! and what a handle does once the runtime has shut down.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::within_watchdog;
use threadlet::{Actor, Context, Handle, Mailbox, Runtime, RuntimeExt};

fn assert_clone_send_sync<T: Clone + Send + Sync + 'static>() {}

#[test]
fn a_handle_is_clone_send_and_sync() {
    assert_clone_send_sync::<Handle>();
}

struct Adder(u64);

impl Actor for Adder {
    type Msg = u64;
    fn handle(&mut self, n: u64, _ctx: &mut Context<Self>) {
        self.0 += n;
    }
}

#[test]
fn handles_spawn_and_start_from_actors_and_threads_and_dropping_them_keeps_the_runtime() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let handle = rt.block_on(Handle::current);
    assert!(handle.same_runtime(&rt.handle()));
    let threads: Vec<_> = (0..4u64)
        .map(|i| {
            let handle = handle.clone();
            std::thread::spawn(move || {
                let (adder, done) = handle.start(Adder(0));
                adder.send(i).unwrap();
                adder.send(10).unwrap();
                drop(adder);
                let (addr, echo) = handle.spawn_actor(|mb: Mailbox<u64>| mb.recv());
                addr.send(i).unwrap();
                (done.join().unwrap().0, echo.join().unwrap())
            })
        })
        .collect();
    for (i, t) in threads.into_iter().enumerate() {
        assert_eq!(t.join().unwrap(), (i as u64 + 10, Some(i as u64)));
    }
    // An actor holding a handle, dropping it: nothing shuts down.
    let h2 = rt.handle();
    rt.spawn(move || drop(h2)).join().unwrap();
    drop(handle);
    assert_eq!(rt.spawn(|| 5).join().unwrap(), 5);
}

#[test]
fn after_shutdown_a_handle_reports_it_and_never_strands_a_spawn() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let handle = rt.handle();
    drop(rt);
    let dropped = Arc::new(AtomicUsize::new(0));
    struct CountDrop(Arc<AtomicUsize>);
    impl Drop for CountDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let c = CountDrop(dropped.clone());
    let h = handle.spawn(move || drop(c));
    assert!(h.join().unwrap_err().is_cancelled());
    assert_eq!(dropped.load(Ordering::SeqCst), 1); // the closure was dropped, not leaked
    assert!(handle.spawn_with(Default::default(), || ()).is_err());
    let (addr, h) = handle.spawn_actor(|mb: Mailbox<u8>| mb.recv());
    assert!(addr.send(1).is_err());
    assert!(h.join().unwrap_err().is_cancelled());
}

/// `start` through a handle after shutdown, as `spawn_actor` there: an address that hands
/// sends back and a join that reports `Cancelled`, the value dropped (it panicked before).
#[test]
fn after_shutdown_a_handle_starts_nothing_and_says_so() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    impl threadlet::Actor for Counted {
        type Msg = u8;
        fn handle(&mut self, _: u8, _: &mut threadlet::Context<Self>) {}
    }
    let rt = Runtime::builder().workers(1).build().unwrap();
    let handle = rt.handle();
    drop(rt);
    let dropped = Arc::new(AtomicUsize::new(0));
    let (addr, h) = handle.start(Counted(dropped.clone()));
    assert_eq!(addr.send(7).unwrap_err().into_inner(), 7);
    assert!(h.join().err().is_some_and(|e| e.is_cancelled()));
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

/// Threads spawn through handles before, during and after the runtime's shutdown: every join
/// returns (with the value, or `Cancelled` for an actor that never ran), so no spawn is
/// stranded in a queue that nobody drains any more.
#[test]
fn spawns_racing_shutdown_all_complete_or_report_cancelled() {
    use std::sync::atomic::AtomicBool;
    within_watchdog("spawns racing shutdown", || {
        for _round in 0..50 {
            let rt = Runtime::builder().workers(2).build().unwrap();
            let start = Arc::new(Barrier::new(4));
            let dropped = Arc::new(AtomicBool::new(false));
            let spawners: Vec<_> = (0..3)
                .map(|_| {
                    let handle = rt.handle();
                    let (start, dropped) = (start.clone(), dropped.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        let mut handles = Vec::new();
                        let mut after = 0;
                        while after < 5 {
                            if dropped.load(Ordering::SeqCst) {
                                after += 1;
                            }
                            handles.push(handle.spawn(|| 1u32));
                        }
                        let (mut ran, mut cancelled) = (0, 0);
                        for h in handles {
                            match h.join() {
                                Ok(_) => ran += 1,
                                Err(e) if e.is_cancelled() => cancelled += 1,
                                Err(e) => panic!("unexpected: {e}"),
                            }
                        }
                        (ran, cancelled)
                    })
                })
                .collect();
            start.wait();
            std::thread::sleep(Duration::from_micros(200));
            drop(rt);
            dropped.store(true, Ordering::SeqCst);
            for s in spawners {
                let (_ran, cancelled) = s.join().unwrap();
                assert!(cancelled >= 5, "spawns after the drop are cancelled");
            }
        }
    });
}

/// Handler actors started through a handle while the runtime shuts down: each either ran (its
/// join gives the value back) or never started (`Cancelled`); none reports a panic. (Once
/// shutdown had begun, `start` through a handle spawned a stand-in closure that must never
/// run, and workers still running what they found ran some: their joins reported a panic.)
#[test]
fn starts_through_a_handle_racing_shutdown_run_or_are_cancelled() {
    struct Quiet;
    impl Actor for Quiet {
        type Msg = ();
        fn handle(&mut self, (): (), _ctx: &mut Context<Self>) {}
    }
    within_watchdog("starts racing shutdown", || {
        for _round in 0..200 {
            let rt = Runtime::builder().workers(2).build().unwrap();
            let handle = rt.handle();
            let start = Arc::new(Barrier::new(2));
            let starter = {
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    let started: Vec<_> = (0..20).map(|_| handle.start(Quiet)).collect();
                    let mut panicked = 0;
                    for (addr, h) in started {
                        drop(addr); // the last address: a running actor stops
                        match h.join() {
                            Ok(_) => {}
                            Err(e) if e.is_cancelled() => {}
                            Err(e) => {
                                assert!(e.is_panic(), "unexpected: {e}");
                                panicked += 1;
                            }
                        }
                    }
                    panicked
                })
            };
            start.wait();
            drop(rt);
            assert_eq!(starter.join().unwrap(), 0, "a join reported a panic");
        }
    });
}
