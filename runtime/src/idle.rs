//! The idle set: which workers are searching for work, which are parked, and whom to wake; and
//! the sleep protocol that a worker with no work runs against it.
//!
//! [`Idle`] is shared by all workers of a runtime. It keeps two counts in one word
//! (`searching`, and `unparked` = workers not in the sleeper list) and the list of parked
//! workers under a mutex that only the slow paths (parking, waking) take. [`Idle::search`] is
//! one worker's side of the protocol, steps 1 to 4 below, written against the [`Searcher`]
//! trait: the worker loop (`worker.rs`) implements it with its run queues, stealing and
//! `Parker`, and `tests/loom_idle.rs` with a model of them, so the model checks this code.
//!
//! # The sleep protocol
//!
//! A worker that runs out of local work ([`Idle::search`]; a new worker starts at step 3):
//!
//! 1. becomes *searching* if fewer than half of the workers already are
//!    ([`Idle::try_start_searching`]); a non-searching idle worker does not steal in step 2
//!    (except what `find` takes: see the second exception below);
//! 2. looks in its own queues and the injector (and at the unstarted process actors it held
//!    back from whose grace is over: see the second exception below) and, if searching, steals
//!    from the others, for up to [`Searcher::ROUNDS`] rounds; if it finds work it stops
//!    searching ([`Idle::stop_searching`]) and, if it was the last searcher, wakes one parked
//!    worker, because more work may be waiting where it did not look;
//! 3. parks: under the lock, it leaves the unparked (and searching) count and joins the sleeper
//!    list ([`Idle::park`]). It then checks every stealable queue once more and wakes a worker
//!    (maybe itself) if any holds work. Every parking worker re-checks, searching or not: a
//!    worker that could not become a searcher may find that the searchers it counted on have
//!    since found work and stopped searching, and a producer that saw it still unparked did not
//!    wake anyone;
//! 4. sleeps on its own `Parker` until woken (unless shutdown has begun; the worker loop's
//!    sleep may first watch for a wake for a short while, on the same contract: see
//!    `worker/linger.rs`), then rejoins the unparked count ([`Idle::unpark_self`]) and goes
//!    back to 2, searching if it was woken by a producer. At shutdown it stops searching and
//!    returns.
//!
//! Whoever makes stealable work appear (spawn, injector push) calls [`Idle::worker_to_wake`]
//! after the push: a `SeqCst` fence, then if no worker is searching and one is parked, it pops
//! a sleeper, counts it as searching, and the caller unparks it.
//!
//! # Why no wakeup is lost
//!
//! The producer's push, fence, and read of the counts, and a parking worker's update of the
//! counts (a `SeqCst` read-modify-write) and its re-check of the queues, are ordered in the one
//! `SeqCst` total order. Take a producer and the last searcher W:
//!
//! * the producer reads `searching == 0`: W's decrement came first. W pushes itself on the
//!   sleeper list in the same critical section as the decrement, and the producer takes that
//!   lock before popping a sleeper, so it finds W (or another sleeper) and wakes it. Some worker
//!   wakes and searches.
//! * the producer reads `searching > 0`: W's decrement comes after the producer's push in the
//!   total order, and W's re-check after that, so W's re-check sees the work.
//!
//! The same holds for any parking worker W and the producer's read of `unparked`: either the
//! producer sees W parked (and, nobody searching, wakes a sleeper), or W's decrement comes after
//! the push and W's re-check sees the work. So work never sits in a stealable queue while the
//! workers that could take it sleep. (One exception, by design: a worker's free FIFO (`worker.rs`)
//! is pushed only by its own worker, which is awake and runs what it holds, so its pushes wake
//! nobody, except for a handler actor whose batch a preemption cut short (`handler.rs`); thieves
//! take from it when they search anyway, and a stuck worker's is covered by a spare, `spare.rs`. An
//! earlier version re-checked only in the last searcher; a worker that was awake but not searching
//! when the last searcher found work and stopped could then park next to a stranded spawn.
//! `examples/steal_probe.rs` reproduced it.) A second exception, also by design: a worker may hold
//! back from another worker's unstarted process actors (its fresh queue, and those placed on it)
//! for a short grace, to keep pinned load balanced (`worker/placement.rs`, steps 5 and 6), in
//! its steals and in its re-check alike. It then stays answerable for that work: the work is marked
//! with the time it was first held back from, its sleep ends when that grace does and, once the
//! grace is over, [`Idle::search`] takes what is still there, searching or not; if it finds other
//! work first, the grace runs on, it takes the queue at its next look for work after the grace, and
//! it wakes a parked worker that may take it sooner. `grace.rs` has that protocol and why nothing
//! held back is stranded; `search` runs it through the [`Searcher`] hooks `recheck`,
//! `holds_back`, `grace_left` and `take_held_back` (the grace the re-check saw bounds the sleep,
//! whatever the balance rule says by then); the loom model runs it with hooks of its own written
//! like the worker's. Work for a specific worker (a pinned actor's wake, see `worker.rs`) does
//! not go through this set: the waker unparks that worker's `Parker`, whose token survives an
//! unpark that comes before park.
//!
//! The argument needs the queues' emptiness checks to take part in the `SeqCst` order: crossbeam
//! -deque 0.8's `Injector::is_empty` uses `SeqCst` loads, `Stealer::is_empty` a `SeqCst` fence
//! between its two loads, and its pushes publish with `SeqCst` fences or read-modify-writes. A
//! thief's steal looks the same way, so the worker loop's look at `is_empty` before a steal
//! (`steal_batch_from`) skips only what the steal would have found empty.
//!
//! `tests/loom_idle.rs` checks this protocol with loom, running [`Idle::search`] itself in
//! modelled workers (with one extra fence in the model's re-check, since loom models `SeqCst`
//! loads as acquire loads; see that file), and the grace's `FreshMark` with it, on a modelled
//! clock. The workers' `Searcher` hooks there are the model's own.

use crate::sync::{AtomicUsize, Mutex, fence};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

/// Rounds of looking for work before an idle worker parks (step 2). Waking a parked thread
/// costs about 10 us here against well under 1 us for a spinning one, so a short spin pays for
/// itself when work arrives in bursts; the bound keeps an idle runtime from burning CPU.
pub const SEARCH_ROUNDS: u32 = 32;

/// What the sleep protocol needs of one worker: where it looks for work and how it sleeps.
/// Implemented by the worker loop (`worker.rs`) and by the loom model (`tests/loom_idle.rs`).
pub trait Searcher {
    /// What the worker runs once found (an actor).
    type Work;

    /// Rounds of step 2 before the worker parks.
    const ROUNDS: u32 = SEARCH_ROUNDS;

    /// Work the worker may take without stealing: its own queues and the injector.
    fn find(&self) -> Option<Self::Work>;

    /// Steals from another worker; called only while the worker counts as searching.
    fn steal(&self) -> Option<Self::Work>;

    /// Whether the runtime has begun to shut down.
    fn is_shutdown(&self) -> bool;

    /// The re-check of step 3: whether any queue that thieves can reach holds work this
    /// worker may take, and the grace left of the queues the balance rule held it back from
    /// meanwhile (`grace.rs`, step 1). Its emptiness checks must take part in the `SeqCst` order (see
    /// "Why no wakeup is lost").
    fn recheck(&self) -> Recheck;

    /// Wakes a parked worker to search if nobody searches: [`Idle::worker_to_wake`], then
    /// unpark the worker it names.
    fn notify_parked(&self);

    /// Idle chores before the worker announces its park (step 3): returns how long it may
    /// sleep at most, `None` for no limit.
    fn before_park(&self) -> Option<Duration>;

    /// Sleeps until unparked (step 4), or until `timeout`; may return spuriously. An unpark
    /// that came before the sleep must make it return at once (a `Parker`'s token).
    fn sleep(&self, timeout: Option<Duration>);

    /// Whether the balance rule holds the worker back from some other worker's unstarted
    /// process actors now (`grace.rs`, step 3); asked after it found work. The default, for a
    /// worker that never holds back: no.
    fn holds_back(&self) -> bool {
        false
    }

    /// The shortest grace left among the workers whose unstarted process actors this worker
    /// holds back from, marking each that is not marked (`grace.rs`, steps 1 and 2); `None` if it holds back from none,
    /// as by default.
    fn grace_left(&self) -> Option<Duration> {
        None
    }

    /// Takes unstarted process actors whose grace is over, freely (`grace.rs`, step 2); by
    /// default, nothing.
    fn take_held_back(&self) -> Option<Self::Work> {
        None
    }
}

/// What the re-check of step 3 saw ([`Searcher::recheck`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recheck {
    /// Some queue this worker may take from holds work: it wakes a parked worker (maybe
    /// itself).
    pub work: bool,
    /// The shortest grace left among the queues, of those the re-check looked at before it
    /// found work, that held work the balance rule held this worker back from (`grace.rs`,
    /// step 1); `None` if it was held back from none. (`grace_left` covers the rest.)
    pub held_back: Option<Duration>,
}

impl Recheck {
    /// Adds a queue the balance rule held the worker back from, `left` of its grace to go.
    pub fn held_back_for(&mut self, left: Duration) {
        self.held_back = Some(self.held_back.map_or(left, |h| h.min(left)));
    }
}

/// `state` keeps `searching` in the low half and `unparked` in the high half.
const UNPARKED_SHIFT: usize = usize::BITS as usize / 2;
const SEARCHING_MASK: usize = (1 << UNPARKED_SHIFT) - 1;
const UNPARKED_ONE: usize = 1 << UNPARKED_SHIFT;

/// See the module docs.
#[derive(Debug)]
pub struct Idle {
    state: AtomicUsize,
    sleepers: Mutex<Vec<usize>>,
    num_workers: usize,
}

impl Idle {
    /// All `num_workers` start unparked and not searching.
    pub fn new(num_workers: usize) -> Idle {
        Idle {
            state: AtomicUsize::new(num_workers << UNPARKED_SHIFT),
            sleepers: Mutex::new(Vec::with_capacity(num_workers)),
            num_workers,
        }
    }

    fn searching(state: usize) -> usize {
        state & SEARCHING_MASK
    }

    fn unparked(state: usize) -> usize {
        state >> UNPARKED_SHIFT
    }

    /// Step 1: becomes searching unless half the workers already search. `true` if it did.
    pub fn try_start_searching(&self) -> bool {
        let s = self.state.load(SeqCst);
        if 2 * Self::searching(s) >= self.num_workers.max(2) {
            return false;
        }
        self.state.fetch_add(1, SeqCst);
        true
    }

    /// Step 2: a searching worker found work. `true` if it was the last searcher, in which case
    /// the caller must wake another worker if any is parked ([`Idle::worker_to_wake`]).
    pub fn stop_searching(&self) -> bool {
        Self::searching(self.state.fetch_sub(1, SeqCst)) == 1
    }

    /// Step 3: the worker `index` parks. The caller must then re-check every stealable queue
    /// and wake a worker if one holds work.
    pub fn park(&self, index: usize, searching: bool) {
        let mut sleepers = self.sleepers.lock();
        let dec = UNPARKED_ONE + usize::from(searching);
        self.state.fetch_sub(dec, SeqCst);
        sleepers.push(index);
    }

    /// Step 4: the worker `index` woke up. Returns whether it was woken by
    /// [`Idle::worker_to_wake`] (and is therefore counted as searching); a worker unparked
    /// directly (its pinned actors were woken, or shutdown) takes itself off the sleeper list
    /// here and is not searching.
    pub fn unpark_self(&self, index: usize) -> bool {
        let mut sleepers = self.sleepers.lock();
        if let Some(at) = sleepers.iter().position(|&i| i == index) {
            sleepers.swap_remove(at);
            self.state.fetch_add(UNPARKED_ONE, SeqCst);
            false
        } else {
            true
        }
    }

    /// Called after pushing stealable work: returns a parked worker to unpark, if no worker is
    /// searching and one is parked. The returned worker is already counted as searching.
    pub fn worker_to_wake(&self) -> Option<usize> {
        fence(SeqCst);
        if !self.should_wake(self.state.load(SeqCst)) {
            return None;
        }
        let mut sleepers = self.sleepers.lock();
        if !self.should_wake(self.state.load(SeqCst)) {
            return None;
        }
        let index = sleepers.pop()?;
        self.state.fetch_add(UNPARKED_ONE + 1, SeqCst);
        Some(index)
    }

    fn should_wake(&self, state: usize) -> bool {
        Self::searching(state) == 0 && Self::unparked(state) < self.num_workers
    }

    /// One worker's side of the protocol (module docs, steps 1 to 4) for worker `index`, until
    /// it finds work (`Some`) or the runtime shuts down (`None`). With `park_first` it starts
    /// at step 3, as a new worker does: a start spent searching would make each of n workers
    /// scan every other's queue, quadratic in n, for work that cannot exist yet.
    pub fn search<S: Searcher>(
        &self,
        index: usize,
        worker: &S,
        park_first: bool,
    ) -> Option<S::Work> {
        let mut searching = if park_first {
            self.park_and_sleep(index, worker, false)?
        } else {
            self.try_start_searching()
        };
        loop {
            // Step 2.
            for round in 0..S::ROUNDS {
                let found = worker
                    .find()
                    .or_else(|| worker.take_held_back())
                    .or_else(|| if searching { worker.steal() } else { None });
                if let Some(work) = found {
                    if searching && self.stop_searching() {
                        worker.notify_parked();
                    }
                    // `grace.rs`, step 3: someone else may take what it holds back sooner.
                    if worker.holds_back() {
                        worker.notify_parked();
                    }
                    return Some(work);
                }
                if worker.is_shutdown() {
                    if searching {
                        self.stop_searching();
                    }
                    return None;
                }
                // The first half of the rounds spin, the rest yield the thread; no pause after
                // the last one, which is followed by the park.
                if round + 1 < S::ROUNDS {
                    if round < S::ROUNDS / 2 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
            }
            searching = self.park_and_sleep(index, worker, searching)?;
        }
    }

    /// Steps 3 and 4. Returns whether the worker is searching once woken, or `None` at
    /// shutdown.
    fn park_and_sleep<S: Searcher>(
        &self,
        index: usize,
        worker: &S,
        searching: bool,
    ) -> Option<bool> {
        let mut timeout = worker.before_park();
        self.park(index, searching);
        // Every parking worker re-checks, searching or not (module docs, step 3).
        let recheck = worker.recheck();
        if recheck.work {
            worker.notify_parked();
        }
        // `grace.rs`, step 2: the graces of the queues the re-check held this worker back
        // from bound its sleep, whatever the loads say by now; so do those of the queues it
        // holds back from now (asked after the re-check, which may have marked a queue).
        for left in [recheck.held_back, worker.grace_left()]
            .into_iter()
            .flatten()
        {
            timeout = Some(timeout.map_or(left, |t| t.min(left)));
        }
        if !worker.is_shutdown() {
            worker.sleep(timeout);
        }
        let searching = self.unpark_self(index);
        if worker.is_shutdown() {
            if searching {
                self.stop_searching();
            }
            return None;
        }
        Some(searching)
    }

    /// Whether worker `index` is on the sleeper list: parked (step 3) and not yet taken off it
    /// by a producer (`worker_to_wake`). A worker about to sleep somewhere other than its
    /// `Parker` (the I/O poll) checks it, since a producer's unpark does not reach it there
    /// by itself.
    pub fn is_sleeping(&self, index: usize) -> bool {
        self.sleepers.lock().contains(&index)
    }

    /// Workers currently searching (stats and tests).
    pub fn num_searching(&self) -> usize {
        Self::searching(self.state.load(SeqCst))
    }

    /// Workers currently parked (stats and tests).
    pub fn num_parked(&self) -> usize {
        self.num_workers - Self::unparked(self.state.load(SeqCst))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn searching_is_bounded_to_half() {
        let idle = Idle::new(4);
        assert!(idle.try_start_searching());
        assert!(idle.try_start_searching());
        assert!(!idle.try_start_searching());
        assert!(!idle.stop_searching());
        assert!(idle.stop_searching());
    }

    #[test]
    fn wake_only_when_nobody_searches() {
        let idle = Idle::new(2);
        assert!(idle.try_start_searching());
        idle.park(0, true);
        assert_eq!(idle.num_searching(), 0, "the last searcher parked");
        assert_eq!(idle.num_parked(), 1);
        assert!(idle.try_start_searching());
        assert_eq!(idle.worker_to_wake(), None, "worker 1 searches");
        assert!(idle.stop_searching());
        assert_eq!(idle.worker_to_wake(), Some(0));
        assert_eq!(idle.num_searching(), 1);
        assert!(idle.unpark_self(0), "woken by notify: searching");
        assert_eq!(idle.num_parked(), 0);
    }

    #[test]
    fn direct_unpark_leaves_the_sleeper_list() {
        let idle = Idle::new(2);
        idle.park(1, false);
        assert_eq!(idle.num_parked(), 1);
        assert!(!idle.unpark_self(1));
        assert_eq!(idle.num_parked(), 0);
        assert_eq!(idle.worker_to_wake(), None);
    }
}
