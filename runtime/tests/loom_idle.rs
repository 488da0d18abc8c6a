//! Loom models of the worker sleep protocol (`idle.rs`) and of the grace (`grace.rs`): the
//! shipped `Idle::search`, the search and park sequence every worker runs when it has no work,
//! and the shipped `Grace` it drives, run by modelled workers.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p threadlet-runtime --test loom_idle --release
//! ```
//!
//! Each worker implements `Searcher` against modelled queues, atomic counts of items. One stands
//! for another worker's deque: only a *searching* worker may take from it (`steal`), as only
//! searchers steal in the runtime; `find` (a worker's own queues) finds nothing there. A
//! producer pushes one item and calls `Idle::worker_to_wake`, as `Shared::spawn_cell` does
//! after a push into the spawner's deque. Each worker sleeps on its own parker, a token under a
//! mutex and condvar like `crossbeam_utils::sync::Parker` (an unpark before the park is not
//! lost).
//!
//! Whoever takes the item shuts the model down: it sets a flag and unparks every worker, as
//! runtime shutdown does. Nothing else ends it, so if the item could stay in its queue while
//! the workers sleep, every thread would block for good and loom would report a deadlock.
//! The sleep protocol's models run with both workers starting parked, as the runtime's do, and
//! with both starting to search.
//!
//! The grace's models put the item in the fresh queue of worker 0, the *owner*, played by the
//! model's main thread: it pushes, wakes a parked worker as a spawn does, and then is stuck
//! in actor code for good, or comes back and takes the item itself. The other workers hold
//! pinned actors, so the balance rule holds them back from that queue (`holds_back`) until
//! their grace is over. Time is modelled: a clock that moves only while a worker sleeps with
//! a deadline (to the deadline, or to when its own next work arrives), so executions stay
//! deterministic, as loom needs. A worker that slept with a deadline more than a few times in
//! one execution fails the model: that is a worker spinning on a grace that never ends, or on
//! one that no longer holds anything back.
#![cfg(loom)]

mod loom_support;

use std::cell::{Cell, RefCell};
// std's `Arc`, not loom's: a loom `Arc` dropped while a failing execution unwinds aborts the
// test binary, hiding which model failed and how.
use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
// The clock and the model's records are outside the memory model (std atomics): they add no
// interleavings, and within one execution their values follow from its schedule.
use std::sync::atomic::{AtomicU64 as StdAtomicU64, AtomicUsize as StdAtomicUsize};
use std::time::{Duration, Instant};

use loom::sync::atomic::{AtomicBool, AtomicUsize, fence};
use loom::thread;
use loom_support::Parker;
use threadlet_runtime::__private::{FRESH_GRACE, Grace, Idle, Searcher};

/// Timed sleeps one worker may take in one execution of a grace model. Each sleep the grace
/// bounds ends it or moves the clock to its end, after which `find` takes the item (or the
/// worker no longer holds back, and sleeps without a deadline); an unpark's token may end one
/// early. A worker past this bound is spinning.
const MAX_TIMED_SLEEPS: usize = 4;

/// Time in a model: moves only when a sleeping worker moves it.
struct Clock {
    base: Instant,
    micros: StdAtomicU64,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            base: Instant::now(),
            micros: StdAtomicU64::new(0),
        }
    }

    fn now(&self) -> Instant {
        self.base + Duration::from_micros(self.micros.load(SeqCst))
    }

    fn advance_to(&self, t: Instant) {
        let micros = u64::try_from(t.saturating_duration_since(self.base).as_micros()).unwrap();
        self.micros.fetch_max(micros, SeqCst);
    }
}

struct Shared {
    idle: Idle,
    /// A stealable queue (another worker's deque): how many items it holds. Pushes and pops
    /// are `SeqCst` read-modify-writes, as in crossbeam's deque and injector; see `try_pop` and
    /// `any_stealable_work` for the emptiness checks.
    queue: AtomicUsize,
    /// The owner's fresh queue (its unstarted process actors), for the grace's models.
    fresh: AtomicUsize,
    taken: AtomicUsize,
    shutdown: AtomicBool,
    parkers: Vec<Parker>,
    clock: Clock,
    /// Work of its own the worker that took the fresh item had still to come, then.
    own_left_at_fresh: StdAtomicUsize,
}

impl Shared {
    fn new(workers: usize) -> Arc<Shared> {
        Arc::new(Shared {
            idle: Idle::new(workers),
            queue: AtomicUsize::new(0),
            fresh: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            parkers: (0..workers).map(|_| Parker::default()).collect(),
            clock: Clock::new(),
            own_left_at_fresh: StdAtomicUsize::new(usize::MAX),
        })
    }

    /// `Shared::notify_parked`.
    fn notify_parked(&self) {
        if let Some(index) = self.idle.worker_to_wake() {
            self.parkers[index].unpark();
        }
    }

    /// A spawn into a worker's deque (or, for `fresh`, its fresh queue), then
    /// `notify_parked` (`Shared::spawn_cell`).
    fn push(&self, queue: &AtomicUsize) {
        queue.fetch_add(1, SeqCst);
        self.notify_parked();
    }

    /// Runtime shutdown, done by whoever took the item.
    fn shut_down(&self) {
        self.shutdown.store(true, SeqCst);
        for p in &self.parkers {
            p.unpark();
        }
    }
}

/// A steal (or, by the owner, a pop). crossbeam's `steal` reads the head, issues a `SeqCst`
/// fence, then reads the tail to see whether the queue is empty, and takes an item with a
/// `SeqCst` CAS of the head.
fn try_pop(queue: &AtomicUsize) -> bool {
    fence(SeqCst);
    let mut n = queue.load(Relaxed);
    while n > 0 {
        match queue.compare_exchange(n, n - 1, SeqCst, SeqCst) {
            Ok(_) => return true,
            Err(actual) => n = actual,
        }
    }
    false
}

/// What a modelled worker found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// The item of the stealable queue.
    Queued,
    /// The item of the owner's fresh queue.
    Fresh,
    /// A piece of work of its own (the grace's models).
    Own,
}

/// One modelled worker, as `Idle::search` sees it.
struct Worker<'a> {
    shared: &'a Shared,
    index: usize,
    /// `Some` for a worker that holds pinned actors: the balance rule holds it back from the
    /// owner's fresh queue, whose load is not `PLACE_MARGIN` above its own, until its grace
    /// is over. `None`: it holds nothing, and takes fresh work freely.
    grace: Option<Grace>,
    /// When each piece of its own work arrives, the soonest last (a trickle of wakes of its
    /// pinned actors, each run at once).
    own: RefCell<Vec<Instant>>,
    timed_sleeps: Cell<usize>,
}

impl Worker<'_> {
    /// `WorkerLoop::may_take_fresh`: the balance rule, or the grace over.
    fn may_take_fresh(&self) -> bool {
        self.grace
            .as_ref()
            .is_none_or(|g| g.hold_back(self.now()).is_zero())
    }

    fn fresh_takeable(&self) -> bool {
        self.shared.fresh.load(SeqCst) > 0 && self.may_take_fresh()
    }
}

impl Searcher for Worker<'_> {
    type Work = Found;

    /// One round before parking: each extra round multiplies the interleavings loom explores,
    /// and adds no new kind of step (a round is `find`, `steal`, the shutdown check).
    const ROUNDS: u32 = 1;

    /// A worker's own queues and the injector: its own work once it has arrived.
    fn find(&self) -> Option<Found> {
        let mut own = self.own.borrow_mut();
        let due = own.last().is_some_and(|&due| due <= self.now());
        due.then(|| {
            own.pop();
            Found::Own
        })
    }

    fn steal(&self) -> Option<Found> {
        if try_pop(&self.shared.queue) {
            return Some(Found::Queued);
        }
        (self.fresh_takeable() && try_pop(&self.shared.fresh)).then_some(Found::Fresh)
    }

    fn is_shutdown(&self) -> bool {
        self.shared.shutdown.load(SeqCst)
    }

    /// `Shared::any_stealable_work`, right after `Idle::park`, with the fresh queue under the
    /// same rule as `steal` (`WorkerLoop::any_takeable_work`).
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
        self.shared.queue.load(SeqCst) > 0 || self.fresh_takeable()
    }

    fn notify_parked(&self) {
        self.shared.notify_parked();
    }

    fn before_park(&self) -> Option<Duration> {
        None
    }

    /// A sleep with a deadline returns at once if an unpark left its token, else when time
    /// reaches the deadline or the worker's own next work arrives (whose push would unpark
    /// it), whichever comes first. A sleep without one waits for an unpark, or for its own
    /// next work.
    fn sleep(&self, timeout: Option<Duration>) {
        let parker = &self.shared.parkers[self.index];
        let next_own = self.own.borrow().last().copied();
        let until = match timeout {
            Some(d) => {
                let n = self.timed_sleeps.get() + 1;
                self.timed_sleeps.set(n);
                assert!(
                    n <= MAX_TIMED_SLEEPS,
                    "worker {} slept with a deadline {n} times: it spins",
                    self.index
                );
                let deadline = self.now() + d;
                Some(next_own.map_or(deadline, |own| own.min(deadline)))
            }
            None => next_own,
        };
        match until {
            Some(t) => {
                if !parker.try_park() {
                    self.shared.clock.advance_to(t);
                }
            }
            None => parker.park(),
        }
    }

    fn grace(&self) -> Option<&Grace> {
        self.grace.as_ref()
    }

    fn holds_back(&self) -> bool {
        self.grace.is_some() && self.shared.fresh.load(SeqCst) > 0
    }

    fn take_held_back(&self) -> Option<Found> {
        try_pop(&self.shared.fresh).then_some(Found::Fresh)
    }

    fn now(&self) -> Instant {
        self.shared.clock.now()
    }
}

/// A worker: runs the shipped search/park sequence until shutdown. It runs its own work as it
/// finds it (taking no time); the item it takes, it counts, then shuts the model down.
fn worker(shared: &Shared, index: usize, park_first: bool, grace: bool, own: Vec<Instant>) {
    let me = Worker {
        shared,
        index,
        grace: grace.then(Grace::new),
        own: RefCell::new(own),
        timed_sleeps: Cell::new(0),
    };
    let mut park_first = park_first;
    while let Some(found) = shared.idle.search(index, &me, park_first) {
        park_first = false;
        if found == Found::Own {
            continue;
        }
        if found == Found::Fresh {
            let left = me.own.borrow().len();
            shared.own_left_at_fresh.store(left, SeqCst);
        }
        shared.taken.fetch_add(1, SeqCst);
        shared.shut_down();
    }
}

/// Runs `body` under loom with at most `preemption_bound` preemptions per execution, unless
/// `LOOM_MAX_PREEMPTIONS` sets another bound.
fn check(preemption_bound: usize, body: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(preemption_bound);
    builder.check(body);
}

/// Joins the workers, then checks that the one item was taken and every count is back.
fn end(shared: &Shared, workers: Vec<thread::JoinHandle<()>>) {
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(shared.taken.load(SeqCst), 1);
    assert_eq!(shared.queue.load(SeqCst), 0);
    assert_eq!(shared.fresh.load(SeqCst), 0);
    assert_eq!(shared.idle.num_searching(), 0);
    assert_eq!(shared.idle.num_parked(), 0);
}

/// The sleep protocol: two workers that hold nothing back, and a producer.
fn sleep_protocol(park_first: bool) {
    check(3, move || {
        let shared = Shared::new(2);
        let workers: Vec<_> = (0..2)
            .map(|index| {
                let shared = shared.clone();
                thread::spawn(move || worker(&shared, index, park_first, false, Vec::new()))
            })
            .collect();

        // The producer: an actor spawning another on its worker's deque.
        shared.push(&shared.queue);

        end(&shared, workers);
    });
}

/// The pushed item is always taken, with workers that start parked (as the runtime's do):
/// never is it left in the queue with both workers asleep.
#[test]
fn pushed_work_is_always_taken_from_parked_start() {
    sleep_protocol(true);
}

/// The same, with workers that start by searching (a worker that just ran out of work).
#[test]
fn pushed_work_is_always_taken_from_searching_start() {
    sleep_protocol(false);
}

/// The grace: worker 0, the owner, pushes one unstarted actor into its fresh queue and wakes a
/// parked worker, as a spawn does; `workers - 1` others hold pinned actors, so the balance rule
/// holds them back. Then the owner is stuck for good or, with `owner_returns`, comes back and
/// takes the item itself unless a thief has. Either way it is taken exactly once, nobody
/// spins, and (when stuck) loom would report a deadlock if every other worker slept without a
/// deadline.
fn held_back(workers: usize, park_first: bool, owner_returns: bool, preemption_bound: usize) {
    check(preemption_bound, move || {
        let shared = Shared::new(workers);
        let thieves: Vec<_> = (1..workers)
            .map(|index| {
                let shared = shared.clone();
                thread::spawn(move || worker(&shared, index, park_first, true, Vec::new()))
            })
            .collect();

        shared.push(&shared.fresh);
        if owner_returns && try_pop(&shared.fresh) {
            shared.taken.fetch_add(1, SeqCst);
            shared.shut_down();
        }

        end(&shared, thieves);
    });
}

/// Held-back work is taken though its owner never comes back: the thief's sleep ends with its
/// grace and its `find` takes the item, with workers that start parked.
#[test]
fn held_back_work_is_taken_when_its_owner_is_stuck() {
    held_back(2, true, false, 3);
}

/// The same, with a thief that starts by searching (so it holds back in its steal first).
#[test]
fn held_back_work_is_taken_when_its_owner_is_stuck_from_searching_start() {
    held_back(2, false, false, 3);
}

/// An owner that comes back races the thief's grace: the item is taken once, and a thief that
/// no longer holds anything back sleeps without a deadline (its mark cleared) until shutdown.
#[test]
fn held_back_work_is_taken_once_when_its_owner_comes_back() {
    held_back(2, true, true, 3);
}

/// Two thieves held back from a stuck owner, both starting parked: the push wakes one, and
/// whichever sleeps through its grace first takes the item.
#[test]
fn held_back_work_is_taken_with_two_thieves() {
    held_back(3, true, false, 2);
}

/// A trickle of its own work does not restart a thief's grace (`grace.rs`, step 3): pieces
/// arrive every half grace, and the thief takes the held-back item once a grace has passed
/// since it first held back, while its own work still comes. Had each piece restarted the
/// grace, the item would wait for the trickle to end.
#[test]
fn own_work_does_not_restart_the_grace() {
    check(3, || {
        let shared = Shared::new(2);
        // The owner pushed, then got stuck, before the thief looks.
        shared.push(&shared.fresh);
        let base = shared.clock.now();
        // Due at 0, 1/2, 1, 3/2 and 2 graces, the soonest last.
        let own: Vec<Instant> = (0..5u32)
            .rev()
            .map(|i| base + FRESH_GRACE * i / 2)
            .collect();
        let thief = {
            let shared = shared.clone();
            thread::spawn(move || worker(&shared, 1, false, true, own))
        };
        end(&shared, vec![thief]);
        let left = shared.own_left_at_fresh.load(SeqCst);
        assert!(
            (1..5).contains(&left),
            "taken with {left} pieces of own work still to come"
        );
    });
}
