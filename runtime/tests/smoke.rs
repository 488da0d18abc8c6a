mod common;

use common::under_each_scheduler;
use threadlet_runtime::{Runtime, Scheduler, spawn, yield_now};

#[test]
fn block_on_returns_value() {
    for (s, rt) in under_each_scheduler(2) {
        assert_eq!(rt.scheduler(), s);
        assert_eq!(rt.block_on(|| 40 + 2), 42);
    }
}

#[test]
fn many_spawns_yield_and_join() {
    for workers in [1, 2] {
        for (s, rt) in under_each_scheduler(workers) {
            let total = rt.block_on(|| {
                let hs: Vec<_> = (0..10_000u64)
                    .map(|i| {
                        spawn(move || {
                            yield_now();
                            i
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
            });
            assert_eq!(total, 10_000 * 9_999 / 2, "{s:?} on {workers} workers");
        }
    }
}

#[test]
fn nested_spawns_form_a_tree() {
    fn tree(depth: u32) -> u64 {
        if depth == 0 {
            return 1;
        }
        let l = spawn(move || tree(depth - 1));
        let r = spawn(move || tree(depth - 1));
        l.join().unwrap() + r.join().unwrap()
    }
    for (s, rt) in under_each_scheduler(2) {
        assert_eq!(rt.block_on(|| tree(12)), 4096, "{s:?}");
    }
}

/// An actor that yields until an actor it spawned has run: under every scheduler, on one
/// worker, the spawned one gets its turn. Under the global-queue baseline it never did: the
/// worker took its own pinned actors (the yielder, requeued at each yield) before shared work.
#[test]
fn a_yielding_actor_lets_the_actor_it_spawned_run() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    for (s, rt) in under_each_scheduler(1) {
        let ran = rt.block_on(|| {
            let flag = Arc::new(AtomicBool::new(false));
            let f = flag.clone();
            let child = spawn(move || f.store(true, Ordering::SeqCst));
            // Bounded, so that a failure reports instead of hanging.
            let t = Instant::now();
            while !flag.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(10) {
                yield_now();
            }
            let ran = flag.load(Ordering::SeqCst);
            child.join().unwrap();
            ran
        });
        assert!(
            ran,
            "{s:?}: the spawned actor never ran while its spawner yielded"
        );
    }
}

/// Under the GIL baseline, actor code runs one actor at a time, destructors included: those
/// that shutdown's unwind runs, too. Two workers unwound their actors side by side.
#[test]
fn under_the_gil_shutdown_runs_destructors_one_at_a_time() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Counts the destructors running at once, and the most seen.
    struct Guard(Arc<(AtomicUsize, AtomicUsize)>);
    impl Drop for Guard {
        fn drop(&mut self) {
            let (now, most) = &*self.0;
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(n, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(5));
            now.fetch_sub(1, Ordering::SeqCst);
        }
    }

    let rt = Runtime::builder()
        .workers(2)
        .scheduler(Scheduler::Gil)
        .build()
        .unwrap();
    let counts = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let parked = Arc::new(AtomicUsize::new(0));
    for _ in 0..16 {
        let (g, p) = (Guard(counts.clone()), parked.clone());
        drop(rt.spawn(move || {
            let _guard = g;
            p.fetch_add(1, Ordering::SeqCst);
            while threadlet_runtime::park().is_ok() {}
        }));
    }
    while parked.load(Ordering::SeqCst) < 16 {
        std::thread::yield_now();
    }
    drop(rt);
    assert_eq!(counts.1.load(Ordering::SeqCst), 1);
}
