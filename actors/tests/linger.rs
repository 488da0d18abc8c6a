//! Lingering before a park (`runtime/src/worker/linger.rs`): a worker that a wake got out of
//! its last sleep soon watches for the next wake before it blocks in the kernel, and catches
//! wakes that come as quickly.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use common::within_watchdog;
use threadlet::{Mailbox, Runtime, RuntimeExt};

/// Wakes sent at most before the test gives up on seeing one caught.
const WAKES: u64 = 10_000;

/// A plain thread wakes a process actor's worker just after the worker has gone to sleep: it
/// sends one message, waits until the actor has handled it and the worker has begun its next
/// sleep (its `parks` count moved), then sends the next. So every wake comes a few
/// microseconds into a sleep: the first ends a blocking sleep soon enough for the worker to
/// linger in its next one, which catches the next wake. Nothing here depends on the machine's
/// speed but that the thread gets from seeing the sleep to sending within the linger (50 us)
/// now and then. Without the wake flag that `Remote::unpark` raises no sleep would ever be
/// caught, and this would fail after its `WAKES`.
#[test]
fn a_worker_woken_soon_after_its_sleeps_catches_wakes_while_it_lingers() {
    within_watchdog("quick wakes of a sleeping worker", || {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let handled = Arc::new(AtomicU64::new(0));
        let counter = handled.clone();
        let (addr, actor) = rt.spawn_actor(move |mb: Mailbox<u64>| {
            for n in &mb {
                counter.store(n, SeqCst);
            }
        });
        let mut sent = 0;
        while sent < WAKES && rt.stats().total().lingers == 0 {
            let parks = rt.stats().total().parks;
            sent += 1;
            addr.send(sent).unwrap();
            while handled.load(SeqCst) != sent {
                std::hint::spin_loop();
            }
            // The worker, with nothing left to run, searches, then sleeps.
            while rt.stats().total().parks == parks {
                std::hint::spin_loop();
            }
        }
        let stats = rt.stats().total();
        drop(addr);
        actor.join().unwrap();
        assert!(
            stats.lingers > 0,
            "no sleep caught a wake in {sent} wakes each sent as a sleep began ({} sleeps)",
            stats.parks
        );
        assert!(
            stats.lingers <= stats.parks,
            "a caught wake ends a sleep: {stats:?}"
        );
    });
}
