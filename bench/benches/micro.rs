//! Criterion micro-benchmarks of the runtime's basic operations.
//!
//! Each benchmark runs its whole measured loop inside one actor (`block_on`), so it measures the
//! operation, not the cost of entering the runtime. Where a partner actor is needed it is set up
//! before the loop and torn down after it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use threadlet::{Addr, Mailbox, Runtime, RuntimeExt, channel};

/// Spawn an empty actor and join it, with warm pooled stacks.
fn spawn_join(c: &mut Criterion) {
    let rt = Runtime::builder().workers(1).build().unwrap();
    c.bench_function("spawn_join/1_worker", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let start = Instant::now();
                for _ in 0..iters {
                    threadlet::spawn(|| ()).join().unwrap();
                }
                start.elapsed()
            })
        })
    });
    c.bench_function("spawn_then_join_1000/1_worker", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let mut hs = Vec::with_capacity(1000);
                let start = Instant::now();
                for _ in 0..iters.div_ceil(1000) {
                    hs.extend((0..1000).map(|_| threadlet::spawn(|| ())));
                    for h in hs.drain(..) {
                        h.join().unwrap();
                    }
                }
                start.elapsed() * iters as u32 / (iters.div_ceil(1000) * 1000) as u32
            })
        })
    });
}

/// `yield_now` with one actor on the worker: a switch out and back in.
fn yield_now(c: &mut Criterion) {
    let rt = Runtime::builder().workers(1).build().unwrap();
    c.bench_function("yield_now/1_worker", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let start = Instant::now();
                for _ in 0..iters {
                    threadlet::yield_now();
                }
                start.elapsed()
            })
        })
    });
}

/// Message round trip between two actors through their mailboxes.
fn mailbox_round_trip(c: &mut Criterion, name: &str, workers: usize) {
    let rt = Runtime::builder().workers(workers).build().unwrap();
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let (me_addr, me) = threadlet::spawn_actor(move |mb: Mailbox<u64>| {
                    let (echo, h) =
                        threadlet::spawn_actor(|mb: Mailbox<(u64, threadlet::Addr<u64>)>| {
                            for (n, reply) in &mb {
                                reply.send(n).unwrap();
                            }
                        });
                    // Let the echo actor start (and be stolen, with 2 workers) before timing.
                    echo.send((0, mb.addr())).unwrap();
                    mb.recv().unwrap();
                    let reply = mb.addr();
                    let start = Instant::now();
                    for i in 0..iters {
                        echo.send((i, reply.clone())).unwrap();
                        mb.recv().unwrap();
                    }
                    let took = start.elapsed();
                    drop(echo);
                    h.join().unwrap();
                    took
                });
                drop(me_addr);
                me.join().unwrap()
            })
        })
    });
}

fn round_trips(c: &mut Criterion) {
    mailbox_round_trip(c, "mailbox_round_trip/same_worker", 1);
    mailbox_round_trip(c, "mailbox_round_trip/2_workers", 2);
}

/// Message round trip between two actors that are certainly on different workers, so that every
/// message wakes an actor pinned to the other thread. (`mailbox_round_trip/2_workers` leaves
/// the placement to the scheduler.)
///
/// The pinger starts the echo actor and then spins, with no safe point, until the echo actor has
/// started: its own worker is busy all that time, so only the other worker can have stolen and
/// started it, and a started actor stays where it started. The echo actor returns its thread,
/// which is checked.
fn cross_worker_round_trip(c: &mut Criterion) {
    let rt = Runtime::builder().workers(2).build().unwrap();
    c.bench_function("mailbox_round_trip/cross_worker", |b| {
        b.iter_custom(|iters| {
            let (me_addr, me) = rt.spawn_actor(move |mb: Mailbox<u64>| {
                let (echo, h) = spawn_echo_elsewhere();
                let reply = mb.addr();
                let start = Instant::now();
                for i in 0..iters {
                    echo.send((i, reply.clone())).unwrap();
                    mb.recv().unwrap();
                }
                let took = start.elapsed();
                drop(echo);
                let echo_thread = h.join().unwrap();
                assert_ne!(
                    echo_thread,
                    std::thread::current().id(),
                    "the two actors shared a worker"
                );
                took
            });
            let took = me.join().unwrap();
            drop(me_addr);
            took
        })
    });
}

/// Spawns an echo actor and makes sure that another worker started it (see
/// `cross_worker_round_trip`). The other worker is not always woken for the new actor while this
/// one spins (seen with 2 workers), so an attempt gives up after 20 ms (well under the monitor's
/// long-run report), lets the echo actor run here and end, and tries again.
#[allow(clippy::type_complexity)]
fn spawn_echo_elsewhere() -> (
    Addr<(u64, Addr<u64>)>,
    threadlet::JoinHandle<std::thread::ThreadId>,
) {
    for _ in 0..200 {
        let started = Arc::new(AtomicBool::new(false));
        let flag = started.clone();
        let (echo, h) = threadlet::spawn_actor(move |mb: Mailbox<(u64, Addr<u64>)>| {
            flag.store(true, Ordering::Release);
            for (n, reply) in &mb {
                reply.send(n).unwrap();
            }
            std::thread::current().id()
        });
        let deadline = Instant::now() + Duration::from_millis(20);
        while !started.load(Ordering::Acquire) && Instant::now() < deadline {
            std::hint::spin_loop();
        }
        if started.load(Ordering::Acquire) {
            return (echo, h);
        }
        drop(echo);
        h.join().unwrap();
    }
    panic!("no other worker started the echo actor in 200 attempts");
}

/// `threadlet::checkpoint()` in a loop inside an actor, with no preemption due (time slices
/// off, no tick budget): the cost a CPU-bound loop pays per safe point. The loop is the `count`
/// seed's (`threadlet_examples::cpu::count`), and the baseline the same loop without the safe
/// point (`count_without_safe_points`): the two differ by the safe point alone.
fn checkpoint(c: &mut Criterion) {
    let rt = Runtime::builder()
        .workers(1)
        .time_slice(Duration::ZERO)
        .build()
        .unwrap();
    c.bench_function("checkpoint/no_preemption_due", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let start = Instant::now();
                threadlet_examples::cpu::count(iters);
                let took = start.elapsed();
                assert_eq!(threadlet::preemptions(), 0, "no preemption was due");
                took
            })
        })
    });
    // The same loop with no safe point in it: the floor the line above is read against.
    c.bench_function("checkpoint/empty_loop_baseline", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let start = Instant::now();
                threadlet_examples::cpu::count_without_safe_points(iters);
                start.elapsed()
            })
        })
    });
}

/// Rendezvous channel hand-off: one value from one actor to another through `bounded(0)`.
fn rendezvous(c: &mut Criterion) {
    let rt = Runtime::builder().workers(1).build().unwrap();
    c.bench_function("rendezvous_handoff/same_worker", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let (tx, rx) = channel::bounded::<u64>(0);
                let h = threadlet::spawn(move || rx.iter().count());
                let start = Instant::now();
                for i in 0..iters {
                    tx.send(i).unwrap();
                }
                let took = start.elapsed();
                drop(tx);
                assert_eq!(h.join().unwrap() as u64, iters);
                took
            })
        })
    });
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = spawn_join, yield_now, round_trips, cross_worker_round_trip, rendezvous, checkpoint
}
criterion_main!(benches);
