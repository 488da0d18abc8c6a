//! Loom model of the worker sleep protocol (`idle.rs`), run against the shipped `Idle`:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p threadlet-runtime --test loom_idle --release
//! ```
//!
//! Two workers run the search/park loop of `worker.rs` (`Worker::search`) against a modeled
//! injector, an atomic count of items; a producer pushes one item and calls
//! `Idle::worker_to_wake`, as `Shared::push_injector` does. Each worker sleeps on its own
//! parker, a token under a mutex and condvar like `crossbeam_utils::sync::Parker` (an unpark
//! before the park is not lost).
//!
//! Whoever takes the item shuts the model down: it sets a flag and unparks both workers, as
//! runtime shutdown does. Nothing else ends it, so if the item could stay in the queue while
//! both workers sleep, every thread would block for good and loom would report a deadlock.
#![cfg(loom)]

// std's `Arc`, not loom's: a loom `Arc` dropped while a failing execution unwinds aborts the
// test binary, hiding which model failed and how.
use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use loom::sync::atomic::{AtomicBool, AtomicUsize, fence};
use loom::sync::{Condvar, Mutex};
use loom::thread;
use threadlet_runtime::__private::Idle;

const WORKERS: usize = 2;

/// A worker's parker: one token; `unpark` before `park` makes `park` return at once.
#[derive(Default)]
struct Parker {
    token: Mutex<bool>,
    cv: Condvar,
}

impl Parker {
    fn park(&self) {
        let mut token = self.token.lock().unwrap();
        while !*token {
            token = self.cv.wait(token).unwrap();
        }
        *token = false;
    }

    fn unpark(&self) {
        *self.token.lock().unwrap() = true;
        self.cv.notify_one();
    }
}

struct Shared {
    idle: Idle,
    /// The injector: how many items it holds. Pushes and pops are `SeqCst` read-modify-writes,
    /// as in `crossbeam_deque::Injector`; see `try_pop` and `any_stealable_work` for the
    /// emptiness checks.
    queue: AtomicUsize,
    taken: AtomicUsize,
    shutdown: AtomicBool,
    parkers: [Parker; WORKERS],
}

impl Shared {
    /// `Shared::notify_parked`.
    fn notify_parked(&self) {
        if let Some(index) = self.idle.worker_to_wake() {
            self.parkers[index].unpark();
        }
    }

    /// `Shared::push_injector` (without the shutdown drain).
    fn push(&self) {
        self.queue.fetch_add(1, SeqCst);
        self.notify_parked();
    }

    /// A steal from the injector. `Injector::steal` reads the head, issues a `SeqCst` fence,
    /// then reads the tail to see whether the queue is empty, and takes an item with a `SeqCst`
    /// CAS of the head.
    fn try_pop(&self) -> bool {
        fence(SeqCst);
        let mut n = self.queue.load(Relaxed);
        while n > 0 {
            match self.queue.compare_exchange(n, n - 1, SeqCst, SeqCst) {
                Ok(_) => return true,
                Err(actual) => n = actual,
            }
        }
        false
    }

    /// `Shared::any_stealable_work`, right after `Idle::park`.
    ///
    /// The fence is not in the shipped code. There, `Idle::park`'s `SeqCst` read-modify-write
    /// of the counts and `Injector::is_empty`'s `SeqCst` loads are ordered in the single total
    /// order of `SeqCst` operations, which is what makes the re-check see a push whose producer
    /// read the counts too early (the store-buffering case in `idle.rs`). Loom models `SeqCst`
    /// accesses as `AcqRel` and only `SeqCst` fences as such, so without this fence it reports
    /// that impossible execution; the fence stands in for the ordering the accesses already
    /// have.
    fn any_stealable_work(&self) -> bool {
        fence(SeqCst);
        self.queue.load(SeqCst) > 0
    }

    /// Runtime shutdown, done by whoever took the item.
    fn shut_down(&self) {
        self.shutdown.store(true, SeqCst);
        for p in &self.parkers {
            p.unpark();
        }
    }

    fn is_shutdown(&self) -> bool {
        self.shutdown.load(SeqCst)
    }
}

/// `Worker::search` with one search round and no local queue, looping until shutdown.
fn worker(shared: &Shared, index: usize) {
    let idle = &shared.idle;
    let mut searching = idle.try_start_searching();
    loop {
        // Step 2: only a searching worker steals from the injector.
        if searching && shared.try_pop() {
            if idle.stop_searching() {
                shared.notify_parked();
            }
            shared.taken.fetch_add(1, SeqCst);
            shared.shut_down();
            return;
        }
        if shared.is_shutdown() {
            if searching {
                idle.stop_searching();
            }
            return;
        }
        // Step 3: park, then re-check the queues (every parking worker does).
        idle.park(index, searching);
        if shared.any_stealable_work() {
            shared.notify_parked();
        }
        // Step 4: sleep, then rejoin the unparked count.
        if !shared.is_shutdown() {
            shared.parkers[index].park();
        }
        searching = idle.unpark_self(index);
        if shared.is_shutdown() {
            if searching {
                idle.stop_searching();
            }
            return;
        }
    }
}

/// Runs the model with at most `preemption_bound` preemptions per execution, unless
/// `LOOM_MAX_PREEMPTIONS` sets another bound.
fn model(preemption_bound: usize) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(preemption_bound);
    builder.check(|| {
        let shared = Arc::new(Shared {
            idle: Idle::new(WORKERS),
            queue: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            parkers: Default::default(),
        });
        let workers: Vec<_> = (0..WORKERS)
            .map(|index| {
                let shared = shared.clone();
                thread::spawn(move || worker(&shared, index))
            })
            .collect();

        // The producer: an actor spawned from outside the workers.
        shared.push();

        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(shared.taken.load(SeqCst), 1);
        assert_eq!(shared.queue.load(SeqCst), 0);
        assert_eq!(shared.idle.num_searching(), 0);
        assert_eq!(shared.idle.num_parked(), 0);
    });
}

/// The pushed item is always taken: never is it left in the queue with both workers asleep.
///
/// Three preemptions explore the model in about a second; four take about ten seconds and
/// five about a minute (`LOOM_MAX_PREEMPTIONS=5`), and find nothing more.
#[test]
fn pushed_work_is_always_taken() {
    model(3);
}
