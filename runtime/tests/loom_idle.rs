//! Loom models of the worker sleep protocol (`idle.rs`) and of the grace (`grace.rs`): the
//! shipped `Idle::search`, the search and park sequence every worker runs when it has no work,
//! and the shipped `FreshMark` that it consults, run by modelled workers. The workers'
//! `Searcher` hooks (where they look, how they steal, how they read and make marks) are the
//! model's own, written like `WorkerLoop`'s; the model checks the protocol, not those.
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
//! the grace of the queue's mark (the shipped `FreshMark`, a loom atomic here) is over. Time
//! is modelled: a clock that moves only while a worker sleeps with a deadline or without one
//! while its own next work is due (to the deadline, or to when that work arrives), and while
//! it runs its own work, so executions stay deterministic, as loom needs. The models fail if
//! a worker that holds back sleeps without a deadline (a loom deadlock), if one sleeps with a
//! deadline more than a few times in one execution (a worker spinning on a grace that never
//! ends, or on one that no longer holds anything back), or if held-back work is taken less
//! than a grace after its queue's current run of work began.
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
use std::time::Duration;

use loom::sync::atomic::{AtomicBool, AtomicUsize, fence};
use loom::thread;
use loom_support::Parker;
use threadlet_runtime::__private::{FRESH_GRACE, FreshMark, Idle, Recheck, Searcher};

/// Timed sleeps one worker may take in one execution of a grace model. Each sleep the grace
/// bounds ends it or moves the clock to its end, after which the search takes the item (or the
/// worker no longer holds back, and sleeps without a deadline); an unpark's token may end one
/// early. A worker past this bound is spinning.
const MAX_TIMED_SLEEPS: usize = 4;

/// `FRESH_GRACE` on the model's clock (nanoseconds).
const G: u64 = FRESH_GRACE.as_nanos() as u64;

/// Time in a model, in nanoseconds from 1 (a `FreshMark` reads 0 as unmarked): moves only
/// when a worker moves it.
struct Clock(StdAtomicU64);

impl Clock {
    fn new() -> Clock {
        Clock(StdAtomicU64::new(1))
    }

    fn now(&self) -> u64 {
        self.0.load(SeqCst)
    }

    fn advance_to(&self, t: u64) {
        self.0.fetch_max(t, SeqCst);
    }
}

struct Shared {
    idle: Idle,
    /// A stealable queue (another worker's deque): how many items it holds. Pushes and pops
    /// are `SeqCst` read-modify-writes, as in crossbeam's deque and injector; see `try_pop` and
    /// `any_stealable_work` for the emptiness checks.
    queue: AtomicUsize,
    /// The owner's fresh queue (its unstarted process actors), for the grace's models, and
    /// its mark.
    fresh: AtomicUsize,
    mark: FreshMark,
    /// The balance rule lets the workers that hold pinned actors take from the fresh queue:
    /// the owner's load rose `PLACE_MARGIN` above theirs, which pushes nothing and wakes
    /// nobody (a handler actor that suspended in its `handle` there, an actor it started).
    balance_allows: AtomicBool,
    /// When the fresh queue's contents arrived: the clock at its last push into it empty.
    fresh_since: StdAtomicU64,
    taken: AtomicUsize,
    /// Items the model ends after: one, or two once the owner refills its queue.
    items: StdAtomicUsize,
    shutdown: AtomicBool,
    parkers: Vec<Parker>,
    clock: Clock,
    /// Work of its own the worker that took a fresh item had still to come, then.
    own_left_at_fresh: StdAtomicUsize,
}

impl Shared {
    fn new(workers: usize) -> Arc<Shared> {
        Arc::new(Shared {
            idle: Idle::new(workers),
            queue: AtomicUsize::new(0),
            fresh: AtomicUsize::new(0),
            mark: FreshMark::new(),
            balance_allows: AtomicBool::new(false),
            fresh_since: StdAtomicU64::new(0),
            taken: AtomicUsize::new(0),
            items: StdAtomicUsize::new(1),
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

    /// A spawn into a worker's deque, then `notify_parked` (`Shared::spawn_cell`).
    fn push(&self) {
        self.queue.fetch_add(1, SeqCst);
        self.notify_parked();
    }

    /// A spawn into the owner's fresh queue (`Core::push_spawned`: the shipped
    /// `FreshMark::before_push` first, as `Remote::before_unstarted_push` calls it), then
    /// `notify_parked`.
    fn push_fresh(&self) {
        // The emptiness that `before_push` reads (only if the queue is marked, as in the
        // runtime) is the one the model's own record goes by, so that the two cannot disagree.
        let mut seen_empty = None;
        self.mark.before_push(|| {
            let empty = self.fresh.load(SeqCst) == 0;
            seen_empty = Some(empty);
            empty
        });
        if seen_empty.unwrap_or_else(|| self.fresh.load(SeqCst) == 0) {
            // The model's own record: a run of work begins (for the lower-bound check).
            self.fresh_since.store(self.clock.now(), SeqCst);
        }
        self.fresh.fetch_add(1, SeqCst);
        self.notify_parked();
    }

    /// Runtime shutdown, done by whoever took the last item.
    fn shut_down(&self) {
        self.shutdown.store(true, SeqCst);
        for p in &self.parkers {
            p.unpark();
        }
    }

    /// Counts an item taken; the last one shuts the model down.
    fn took(&self) {
        if self.taken.fetch_add(1, SeqCst) + 1 == self.items.load(SeqCst) {
            self.shut_down();
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

/// A piece of a worker's own work (the grace's models): due at `due`, it keeps the worker
/// busy for `busy`, and with `refill` the owner, meanwhile, takes its item back and pushes a
/// new one into its emptied queue (at the end of that time, so deterministically).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OwnWork {
    due: u64,
    busy: u64,
    refill: bool,
}

impl OwnWork {
    fn at(due: u64) -> OwnWork {
        OwnWork {
            due,
            busy: 0,
            refill: false,
        }
    }
}

/// What a modelled worker found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// The item of the stealable queue.
    Queued,
    /// An item of the owner's fresh queue.
    Fresh,
    /// A piece of work of its own.
    Own(OwnWork),
}

/// One modelled worker, as `Idle::search` sees it.
struct Worker<'a> {
    shared: &'a Shared,
    index: usize,
    /// Holds pinned actors: the balance rule holds it back from the owner's fresh queue, whose
    /// load is not `PLACE_MARGIN` above its own, until the queue's grace is over. Otherwise it
    /// holds nothing, and takes fresh work freely.
    holds_pinned: bool,
    /// Its own work, the soonest last.
    own: RefCell<Vec<OwnWork>>,
    timed_sleeps: Cell<usize>,
}

impl Worker<'_> {
    /// The balance rule of `WorkerLoop::balance_allows`.
    fn balance_allows(&self) -> bool {
        !self.holds_pinned || self.shared.balance_allows.load(SeqCst)
    }

    /// `WorkerLoop::fresh_grace_left`, for a queue seen non-empty: zero if the balance rule
    /// lets it through, else what is left of the queue's grace (marking it if nobody has).
    fn fresh_grace_left(&self) -> Duration {
        if self.balance_allows() {
            return Duration::ZERO;
        }
        self.shared.mark.hold_back(self.shared.clock.now())
    }

    fn fresh_takeable(&self) -> bool {
        self.shared.fresh.load(SeqCst) > 0 && self.fresh_grace_left().is_zero()
    }
}

impl Searcher for Worker<'_> {
    type Work = Found;

    /// One round before parking: each extra round multiplies the interleavings loom explores,
    /// and adds no new kind of step (a round is `find`, `steal`, the shutdown check).
    const ROUNDS: u32 = 1;

    /// A worker's own queues and the injector: its own work once it is due.
    fn find(&self) -> Option<Found> {
        let mut own = self.own.borrow_mut();
        let due = own.last().is_some_and(|w| w.due <= self.shared.clock.now());
        if due { own.pop().map(Found::Own) } else { None }
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
    /// same rule as `steal`, and the grace left of the fresh queue if that rule held the
    /// worker back (`WorkerLoop::any_takeable_work`).
    ///
    /// The fence is not in the shipped code. There, `Idle::park`'s `SeqCst` read-modify-write
    /// of the counts and `Stealer::is_empty`'s `SeqCst` loads are ordered in the single total
    /// order of `SeqCst` operations, which is what makes the re-check see a push whose producer
    /// read the counts too early (the store-buffering case in `idle.rs`). Loom models `SeqCst`
    /// accesses as `AcqRel` and only `SeqCst` fences as such, so without this fence it reports
    /// that impossible execution; the fence stands in for the ordering the accesses already
    /// have.
    fn recheck(&self) -> Recheck {
        fence(SeqCst);
        let mut recheck = Recheck {
            work: self.shared.queue.load(SeqCst) > 0,
            held_back: None,
        };
        if !recheck.work && self.shared.fresh.load(SeqCst) > 0 {
            let left = self.fresh_grace_left();
            if left.is_zero() {
                recheck.work = true;
            } else {
                recheck.held_back_for(left);
            }
        }
        recheck
    }

    fn notify_parked(&self) {
        self.shared.notify_parked();
    }

    fn before_park(&self) -> Option<Duration> {
        None
    }

    /// A sleep with a deadline returns at once if an unpark left its token, else when time
    /// reaches the deadline or the worker's own next work is due (whose push would unpark
    /// it), whichever comes first. A sleep without one waits for an unpark, or for its own
    /// next work.
    fn sleep(&self, timeout: Option<Duration>) {
        let parker = &self.shared.parkers[self.index];
        let next_own = self.own.borrow().last().map(|w| w.due);
        let until = match timeout {
            Some(d) => {
                let n = self.timed_sleeps.get() + 1;
                self.timed_sleeps.set(n);
                assert!(
                    n <= MAX_TIMED_SLEEPS,
                    "worker {} slept with a deadline {n} times: it spins",
                    self.index
                );
                let deadline = self.shared.clock.now() + d.as_nanos() as u64;
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

    /// `WorkerLoop::holds_back`.
    fn holds_back(&self) -> bool {
        self.shared.fresh.load(SeqCst) > 0 && !self.balance_allows()
    }

    /// `WorkerLoop::grace_left`: the queue looked at before its mark is read.
    fn grace_left(&self) -> Option<Duration> {
        self.holds_back()
            .then(|| self.shared.mark.hold_back(self.shared.clock.now()))
    }

    /// `WorkerLoop::take_held_back`: the queue looked at before its mark is read.
    fn take_held_back(&self) -> Option<Found> {
        let over = self.shared.fresh.load(SeqCst) > 0
            && self.shared.mark.is_over(|| self.shared.clock.now());
        (over && try_pop(&self.shared.fresh)).then_some(Found::Fresh)
    }
}

/// A worker: runs the shipped search/park sequence until shutdown. It runs its own work as it
/// finds it; an item it takes, it counts (the last one shuts the model down).
fn worker(shared: &Shared, index: usize, park_first: bool, holds_pinned: bool, own: Vec<OwnWork>) {
    let me = Worker {
        shared,
        index,
        holds_pinned,
        own: RefCell::new(own),
        timed_sleeps: Cell::new(0),
    };
    let mut park_first = park_first;
    while let Some(found) = shared.idle.search(index, &me, park_first) {
        park_first = false;
        match found {
            Found::Own(w) => {
                let clock = &shared.clock;
                clock.advance_to(clock.now() + w.busy);
                if w.refill {
                    // The owner came back: it started its item, then spawned another.
                    shared.items.fetch_add(1, SeqCst);
                    if try_pop(&shared.fresh) {
                        shared.took();
                    }
                    shared.push_fresh();
                }
                continue;
            }
            Found::Fresh => {
                // The grace is not cut short: a held-back worker takes fresh work a grace
                // after it arrived in its queue at the soonest.
                let arrived = shared.fresh_since.load(SeqCst);
                let now = shared.clock.now();
                assert!(
                    !holds_pinned || shared.balance_allows.load(SeqCst) || now >= arrived + G,
                    "worker {index} took held-back work {} ns after it arrived",
                    now - arrived
                );
                let left = me.own.borrow().len();
                shared.own_left_at_fresh.store(left, SeqCst);
            }
            Found::Queued => {}
        }
        shared.took();
    }
}

/// Runs `body` under loom with at most `preemption_bound` preemptions per execution, unless
/// `LOOM_MAX_PREEMPTIONS` sets another bound.
fn check(preemption_bound: usize, body: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(preemption_bound);
    builder.check(body);
}

/// Joins the workers, then checks that every item was taken and every count is back.
fn end(shared: &Shared, workers: Vec<thread::JoinHandle<()>>) {
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(shared.taken.load(SeqCst), shared.items.load(SeqCst));
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
        shared.push();

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
/// spins, a thief takes it no sooner than a grace after it arrived, and (when stuck) loom
/// would report a deadlock if every other worker slept without a deadline.
fn held_back(workers: usize, park_first: bool, owner_returns: bool, preemption_bound: usize) {
    check(preemption_bound, move || {
        let shared = Shared::new(workers);
        let thieves: Vec<_> = (1..workers)
            .map(|index| {
                let shared = shared.clone();
                thread::spawn(move || worker(&shared, index, park_first, true, Vec::new()))
            })
            .collect();

        shared.push_fresh();
        if owner_returns && try_pop(&shared.fresh) {
            shared.took();
        }

        end(&shared, thieves);
    });
}

/// Held-back work is taken though its owner never comes back: the thief's sleep ends with the
/// queue's grace and its search takes the item, with workers that start parked.
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
/// no longer holds anything back sleeps without a deadline until shutdown (one that slept
/// with deadlines on would trip `MAX_TIMED_SLEEPS`).
#[test]
fn held_back_work_is_taken_once_when_its_owner_comes_back() {
    held_back(2, true, true, 3);
}

/// Two thieves held back from a stuck owner, both starting parked: the push wakes one, and
/// whichever sleeps through the queue's grace first takes the item.
#[test]
fn held_back_work_is_taken_with_two_thieves() {
    held_back(3, true, false, 2);
}

/// The balance rule lets a held-back thief through after its re-check held it back: the
/// owner pushes its item, wakes a parked worker as a spawn does, then its load rises with no
/// push and no wake (a handler actor suspends in its `handle` there), and it is stuck. The
/// thief's sleep stays bounded by the grace its re-check saw, and its search then takes the
/// item. Had the bound asked the balance rule again, the thief would find nothing held back
/// and sleep without a deadline for good: loom reports that as a deadlock.
#[test]
fn work_the_balance_rule_lets_through_after_the_recheck_is_taken() {
    check(3, || {
        let shared = Shared::new(2);
        let thief = {
            let shared = shared.clone();
            thread::spawn(move || worker(&shared, 1, true, true, Vec::new()))
        };
        shared.push_fresh();
        shared.balance_allows.store(true, SeqCst);
        end(&shared, vec![thief]);
    });
}

/// A thief with its own work: the owner pushed its item and got stuck before the thief looks,
/// and the thief's own work arrives as `own` says. Returns the model's shared state once the
/// thief is done.
fn thief_with_own_work(own: Vec<OwnWork>) -> Arc<Shared> {
    let shared = Shared::new(2);
    shared.push_fresh();
    let thief = {
        let shared = shared.clone();
        thread::spawn(move || worker(&shared, 1, false, true, own))
    };
    end(&shared, vec![thief]);
    shared
}

/// A trickle of its own work does not restart the grace (`grace.rs`, step 3): pieces arrive
/// every half grace, and the thief takes the held-back item once a grace has passed since it
/// first held back, while its own work still comes. Had each piece restarted the grace, the
/// item would wait for the trickle to end.
#[test]
fn own_work_does_not_restart_the_grace() {
    check(3, || {
        // Due at 0, 1/2, 1, 3/2 and 2 graces, the soonest last.
        let own = (0..5u64)
            .rev()
            .map(|i| OwnWork::at(1 + G * i / 2))
            .collect();
        let shared = thief_with_own_work(own);
        let left = shared.own_left_at_fresh.load(SeqCst);
        assert!(
            (1..5).contains(&left),
            "taken with {left} pieces of own work still to come"
        );
    });
}

/// New work in a queue that ran empty gets a grace of its own (`grace.rs`, step 4): the thief
/// holds back from the owner's first item, then runs its own work for a grace while the owner
/// comes back, starts that item and spawns another. The thief must wait a grace from the new
/// item's arrival (checked where it takes it), not take it at once on the old mark, which a
/// grace kept by the thief, or a mark the owner did not clear, would do.
#[test]
fn new_work_in_an_emptied_queue_gets_a_grace_of_its_own() {
    check(3, || {
        let own = vec![
            // Due at half a grace, busy for a grace, during which the owner refills.
            OwnWork {
                due: 1 + G / 2,
                busy: G,
                refill: true,
            },
            OwnWork::at(1),
        ];
        let shared = thief_with_own_work(own);
        assert_eq!(shared.items.load(SeqCst), 2, "the owner refilled");
    });
}
