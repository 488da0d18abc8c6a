//! Actors spawned with the `unsafe` migration opt-in: they may resume on any worker, and
//! shutdown must still unwind each of them exactly once, on one thread, after every worker has
//! stopped running actors.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use threadlet::{ActorBuilder, Mailbox, Runtime};

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
