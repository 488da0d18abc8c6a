//! The idle set: which workers are searching for work, which are parked, and whom to wake.
//!
//! Shared by all workers of a runtime. It keeps two counts in one word (`searching`, and
//! `unparked` = workers not in the sleeper list) and the list of parked workers under a mutex
//! that only the slow paths (parking, waking) take.
//!
//! # The sleep protocol
//!
//! A worker that runs out of local work:
//!
//! 1. becomes *searching* if fewer than half of the workers already are
//!    ([`Idle::try_start_searching`]); a non-searching idle worker goes straight to 3;
//! 2. looks in the injector and steals from the others for a few rounds; if it finds work it
//!    stops searching ([`Idle::stop_searching`]) and, if it was the last searcher, wakes one
//!    parked worker, because more work may be waiting where it did not look;
//! 3. parks: under the lock, it leaves the unparked (and searching) count and joins the sleeper
//!    list ([`Idle::park`]). It then checks every stealable queue once more and wakes a worker
//!    (maybe itself) if any holds work. Every parking worker re-checks, searching or not: a
//!    worker that could not become a searcher may find that the searchers it counted on have
//!    since found work and stopped searching, and a producer that saw it still unparked did not
//!    wake anyone;
//! 4. sleeps on its own `Parker` until woken, then rejoins the unparked count
//!    ([`Idle::unpark_self`]).
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
//! workers that could take it sleep. (An earlier version re-checked only in the last searcher;
//! a worker that was awake but not searching when the last searcher found work and stopped
//! could then park next to a stranded spawn. `examples/steal_probe.rs` reproduced it.) Work for a
//! specific worker (a pinned actor's wake, see `worker.rs`) does not go through this set: the
//! waker unparks that worker's `Parker`, whose token survives an unpark that comes before park.
//!
//! The argument needs the queues' emptiness checks to take part in the `SeqCst` order: crossbeam
//! -deque 0.8's `Injector::is_empty` and `Stealer::is_empty` use `SeqCst` loads, and its pushes
//! publish with `SeqCst` fences or read-modify-writes.
//!
//! `tests/loom_idle.rs` checks this protocol with loom (with one extra fence, since loom models
//! `SeqCst` loads as acquire loads; see that file).

use crate::sync::{AtomicUsize, Mutex, fence};
use std::sync::atomic::Ordering::SeqCst;

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
