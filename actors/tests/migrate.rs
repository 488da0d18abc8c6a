//! Actors spawned with the `unsafe` migration opt-in: they may resume on any worker, and
//! shutdown must still unwind each of them exactly once, on one thread, after every worker has
//! stopped running actors.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::within_watchdog;
use threadlet::{ActorBuilder, Mailbox, Runtime, Scheduler};

struct CountDrop(Arc<AtomicUsize>);

impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn migratable() -> ActorBuilder {
    // SAFETY: the actors below keep nothing tied to an OS thread on their stacks: only
    // integers, `Arc`s, mailboxes and addresses, all `Send`.
    unsafe { ActorBuilder::new().migratable() }
}

#[test]
fn shutdown_unwinds_running_migratable_actors_once() {
    for round in 0..20 {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = Runtime::builder().workers(4).build().unwrap();
        let d = drops.clone();
        rt.block_on(move || {
            for _ in 0..64 {
                let guard = CountDrop(d.clone());
                migratable()
                    .spawn(move || {
                        let _guard = guard;
                        loop {
                            threadlet::yield_now();
                        }
                    })
                    .unwrap();
            }
        });
        std::thread::sleep(Duration::from_millis(2));
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 64, "round {round}");
    }
}

#[test]
fn migratable_ping_pong_counts_every_message() {
    for workers in [1, 2] {
        let rt = Runtime::builder().workers(workers).build().unwrap();
        let total = rt.block_on(|| {
            let (pong, pong_done) = migratable()
                .spawn_actor(|mb: Mailbox<(u64, threadlet::Addr<u64>)>| {
                    let mut n = 0;
                    for (v, reply) in &mb {
                        n += 1;
                        reply.send(v + 1).unwrap();
                    }
                    n
                })
                .unwrap();
            let (_ping, ping_done) = migratable()
                .spawn_actor(move |mb: Mailbox<u64>| {
                    let me = mb.addr();
                    let mut v = 0;
                    for _ in 0..10_000 {
                        pong.send((v, me.clone())).unwrap();
                        v = mb.recv().unwrap();
                    }
                    v
                })
                .unwrap();
            let v = ping_done.join().unwrap();
            (v, pong_done.join().unwrap())
        });
        assert_eq!(total, (10_000, 10_000));
    }
}

/// Migratable actors that spin through safe points, one more than there are workers, and a
/// pinned actor that tells them to stop: preempted, a spinner goes behind the pinned actor
/// (`push_yielded`), which runs. (A preempted migratable actor went to the injector, where
/// its worker looked first after the preemption: it took the spinner straight back, and the
/// pinned actor never ran.)
#[test]
fn preempted_migratable_spinners_let_pinned_actors_run() {
    for scheduler in [Scheduler::WorkStealing, Scheduler::Gil] {
        for workers in [1, 2] {
            within_watchdog("spinners and a pinned actor", move || {
                let rt = Runtime::builder()
                    .workers(workers)
                    .scheduler(scheduler)
                    .time_slice(Duration::from_millis(1))
                    .build()
                    .unwrap();
                let stop = Arc::new(AtomicBool::new(false));
                let heard = rt.block_on(move || {
                    let spinners: Vec<_> = (0..=workers)
                        .map(|_| {
                            let stop = stop.clone();
                            migratable()
                                .spawn(move || {
                                    let give_up = Instant::now() + Duration::from_secs(10);
                                    while !stop.load(Ordering::Relaxed) {
                                        threadlet::checkpoint();
                                        if Instant::now() > give_up {
                                            return false;
                                        }
                                    }
                                    true
                                })
                                .unwrap()
                        })
                        .collect();
                    threadlet::yield_now(); // the spinners start here, or on the other worker
                    threadlet::spawn(move || stop.store(true, Ordering::Relaxed))
                        .join()
                        .unwrap();
                    spinners
                        .into_iter()
                        .map(|h| h.join().unwrap())
                        .collect::<Vec<_>>()
                });
                assert!(
                    heard.iter().all(|&h| h),
                    "{scheduler:?}, {workers} workers: a spinner ran 10 s unstopped"
                );
            });
        }
    }
}
