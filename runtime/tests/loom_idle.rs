//! Loom model of the worker sleep protocol (`idle.rs`): the shipped `Idle::search`, the search
//! and park sequence every worker runs when it has no work, driven by two modelled workers.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p threadlet-runtime --test loom_idle --release
//! ```
//!
//! Each worker implements `Searcher` against a modelled queue, an atomic count of items, that
//! stands for another worker's deque: only a *searching* worker may take from it (`steal`), as
//! only searchers steal in the runtime; `find` (a worker's own queues) finds nothing. A producer
//! pushes one item and calls `Idle::worker_to_wake`, as `Shared::spawn_cell` does after a
//! push into the spawner's deque. Each worker sleeps on its own parker, a token under a mutex
//! and condvar like `crossbeam_utils::sync::Parker` (an unpark before the park is not lost).
//!
//! Whoever takes the item shuts the model down: it sets a flag and unparks both workers, as
//! runtime shutdown does. Nothing else ends it, so if the item could stay in the queue while
//! both workers sleep, every thread would block for good and loom would report a deadlock.
//! The model runs with both workers starting parked, as the runtime's do, and with both
//! starting to search.
#![cfg(loom)]

mod loom_support;

// std's `Arc`, not loom's: a loom `Arc` dropped while a failing execution unwinds aborts the
// test binary, hiding which model failed and how.
use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::Duration;

use loom::sync::atomic::{AtomicBool, AtomicUsize, fence};
use loom::thread;
use loom_support::Parker;
use threadlet_runtime::__private::{Idle, Searcher};

const WORKERS: usize = 2;

struct Shared {
    idle: Idle,
    /// The stealable queue: how many items it holds. Pushes and pops are `SeqCst`
    /// read-modify-writes, as in crossbeam's deque and injector; see `try_pop` and
    /// `any_stealable_work` for the emptiness checks.
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

    /// A spawn into a worker's deque, then `notify_parked` (`Shared::spawn_cell`).
    fn push(&self) {
        self.queue.fetch_add(1, SeqCst);
        self.notify_parked();
    }

    /// A steal. crossbeam's `steal` reads the head, issues a `SeqCst` fence, then reads the
    /// tail to see whether the queue is empty, and takes an item with a `SeqCst` CAS of the
    /// head.
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

    /// Runtime shutdown, done by whoever took the item.
    fn shut_down(&self) {
        self.shutdown.store(true, SeqCst);
        for p in &self.parkers {
            p.unpark();
        }
    }
}

/// One modelled worker, as `Idle::search` sees it.
struct Worker<'a> {
    shared: &'a Shared,
    index: usize,
}

impl Searcher for Worker<'_> {
    type Work = ();

    /// One round before parking: each extra round multiplies the interleavings loom explores,
    /// and adds no new kind of step (a round is `find`, `steal`, the shutdown check).
    const ROUNDS: u32 = 1;

    /// A worker's own queues and the injector: empty here.
    fn find(&self) -> Option<()> {
        None
    }

    fn steal(&self) -> Option<()> {
        self.shared.try_pop().then_some(())
    }

    fn is_shutdown(&self) -> bool {
        self.shared.shutdown.load(SeqCst)
    }

    /// `Shared::any_stealable_work`, right after `Idle::park`.
    ///
    /// The fence is not in the shipped code. There, `Idle::park`'s `SeqCst` read-modify-write
    /// of the counts and `Stealer::is_empty`'s `SeqCst` loads are ordered in the single total
    /// order of `SeqCst` operations, which is what makes the re-check see a push whose producer
    /// read the counts too early (the store-buffering case in `idle.rs`). Loom models `SeqCst`
    /// accesses as `AcqRel` and only `SeqCst` fences as such, so without this fence it reports
    /// that impossible execution; the fence stands in for the ordering the accesses already
    /// have.
    fn any_stealable_work(&self) -> bool {
        fence(SeqCst);
        self.shared.queue.load(SeqCst) > 0
    }

    fn notify_parked(&self) {
        self.shared.notify_parked();
    }

    fn before_park(&self) -> Option<Duration> {
        None
    }

    /// Loom has no time: a timeout would only be a spurious wake, which `park` already allows
    /// for in the runtime and which the model does not need to find a lost wakeup.
    fn sleep(&self, _timeout: Option<Duration>) {
        self.shared.parkers[self.index].park();
    }
}

/// A worker: runs the shipped search/park sequence until shutdown; whatever it finds, it
/// takes, then shuts the model down.
fn worker(shared: &Shared, index: usize, park_first: bool) {
    let me = Worker { shared, index };
    let mut park_first = park_first;
    while let Some(()) = shared.idle.search(index, &me, park_first) {
        shared.taken.fetch_add(1, SeqCst);
        shared.shut_down();
        park_first = false;
    }
}

/// Runs the model with at most `preemption_bound` preemptions per execution, unless
/// `LOOM_MAX_PREEMPTIONS` sets another bound.
fn model(preemption_bound: usize, park_first: bool) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(preemption_bound);
    builder.check(move || {
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
                thread::spawn(move || worker(&shared, index, park_first))
            })
            .collect();

        // The producer: an actor spawning another on its worker's deque.
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

/// The pushed item is always taken, with workers that start parked (as the runtime's do):
/// never is it left in the queue with both workers asleep.
#[test]
fn pushed_work_is_always_taken_from_parked_start() {
    model(3, true);
}

/// The same, with workers that start by searching (a worker that just ran out of work).
#[test]
fn pushed_work_is_always_taken_from_searching_start() {
    model(3, false);
}
