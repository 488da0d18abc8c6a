//! Criterion micro-benchmarks of the runtime's basic operations.
//!
//! Each benchmark runs its whole measured loop inside one actor (`block_on`), so it measures the
//! operation, not the cost of entering the runtime. Where a partner actor is needed it is set up
//! before the loop and torn down after it.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use threadlet::{Mailbox, Runtime, channel};

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
    targets = spawn_join, yield_now, round_trips, rendezvous
}
criterion_main!(benches);
