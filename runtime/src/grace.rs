//! The grace: how long an idle worker leaves another worker's unstarted process actors alone,
//! and why that work is never stranded.
//!
//! A process actor pins to the worker that starts it, so a thief that starts one decides where
//! it will run for good. Placement (`worker.rs`, "Placement", step 5) keeps pinned load
//! balanced by holding an idle worker that already holds pinned actors back from another
//! worker's *fresh queue* (its unstarted process actors) unless that worker is clearly busier.
//! Held back, the work still needs a worker answerable for it: only its owner pushes that
//! queue, and the owner may be stuck in actor code that never returns to its loop (a blocking
//! call, a loop without safe points). The sleep protocol of `idle.rs` takes work only where a
//! worker may take it, so a hold-back with no end could leave the work in its queue while
//! every other worker sleeps. A [`Grace`] gives the hold-back its end. One lives in each
//! worker's `Core`, touched only by that worker's thread; [`Idle::search`](crate::idle::Idle)
//! drives it through the [`Searcher`](crate::idle::Searcher) hooks, so that the loom model in
//! `tests/loom_idle.rs` runs this code with a modelled clock.
//!
//! # The protocol
//!
//! 1. A worker that holds back from a non-empty fresh queue (in a steal, or in the re-check
//!    before it sleeps) marks when it began ([`Grace::hold_back`]); a mark already there
//!    stays. From then on it may take from that queue once `FRESH_GRACE` has passed since the
//!    mark.
//! 2. Its sleep ends by the end of the grace at the latest ([`Grace::sleep_for`], after the
//!    re-check, which may have made the mark). Once the grace is over, its `find`, which runs
//!    whether or not it counts as searching, takes the held-back work ([`Grace::is_over`],
//!    `Searcher::take_held_back`).
//! 3. If it finds other work first, it keeps its mark while it still holds back
//!    ([`Grace::after_found`]), so that its grace runs on through that work: new work of its
//!    own does not start the grace again, and it takes the queue at its next search after the
//!    grace. It also wakes a parked worker, which may take the work sooner.
//! 4. The mark is cleared when the worker is about to sleep and holds nothing back any more
//!    (the owner came back, or another worker took the work), and when it finds work while
//!    holding nothing back. So an idle worker sleeps without a deadline, and a later
//!    hold-back starts a grace of its own.
//!
//! # Why nothing held back is stranded
//!
//! Held-back work is in some worker's fresh queue, whose owner either comes back to its loop
//! (and runs it: it empties its fresh queue before it searches or parks) or not. If not, take
//! any worker W that was held back from it. W marked the time (step 1), and the mark stays
//! while W holds back (steps 3 and 4), that is, while the queue is non-empty and the load rule
//! still says no. The rule's figures do not move while W sleeps and the owner is stuck: W's
//! own load changes on W's thread, or by a placement onto W, whose inbox push unparks W; the
//! owner's, by a placement onto it, which only a parked owner is chosen for (`parked` is a
//! relaxed hint: a stale one can pick an owner that has only just woken). While W sleeps,
//! its sleep ends with the grace (step 2); while W runs work of its own, its mark keeps
//! running (step 3), and its next `find` after the grace takes the work. So the work waits
//! about one grace, or until W next looks for work after it; never for good. A worker that is
//! not held back (it holds no pinned actors, or the owner is busier) takes fresh work like any
//! other stealable work, under the argument of `idle.rs`.
//!
//! Step 3's wake matters when W is busy with its own work for longer than a grace: a parked
//! worker woken then searches, and takes the work if it holds nothing (no balance rule) or
//! once its own grace is over.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How long a searching worker that holds pinned actors leaves another worker's unstarted
/// process actors to that worker before it takes them anyway. Long enough for an owner whose
/// thread the kernel set aside for a moment to come back and start them itself (a few hundred
/// microseconds were seen here, and a pool came apart over them); short enough that an owner
/// stuck in a blocking call or in a loop without safe points delays its children by about a
/// millisecond, not for good.
pub const FRESH_GRACE: Duration = Duration::from_millis(1);

/// One worker's grace; see the module docs. Touched only by its worker's thread.
#[derive(Debug, Default)]
pub struct Grace {
    /// When this worker began to hold back (step 1); `None` while it holds back nothing.
    since: Cell<Option<Instant>>,
}

impl Grace {
    /// A grace that has not started.
    pub fn new() -> Grace {
        Grace::default()
    }

    /// Step 1: the worker holds back from a non-empty fresh queue at `now`. Marks the start
    /// of its grace unless it has one, and returns what is left of it (zero: the worker may
    /// take the work).
    pub fn hold_back(&self, now: Instant) -> Duration {
        let since = *self.since.get().get_or_insert(now);
        self.since.set(Some(since));
        (since + FRESH_GRACE).saturating_duration_since(now)
    }

    /// Step 2: whether the grace has run out, so that `find` takes the held-back work. Reads
    /// the clock only while a grace runs.
    pub fn is_over(&self, now: impl FnOnce() -> Instant) -> bool {
        self.since
            .get()
            .is_some_and(|since| now().saturating_duration_since(since) >= FRESH_GRACE)
    }

    /// Steps 2 and 4: how long the worker, about to sleep at `now`, may sleep before its grace
    /// runs out; `None` if it holds nothing back any more (`holds_back`), which clears the
    /// mark.
    pub fn sleep_for(&self, holds_back: bool, now: Instant) -> Option<Duration> {
        if !holds_back {
            self.since.set(None);
            return None;
        }
        Some(self.hold_back(now))
    }

    /// Steps 3 and 4: the worker found work. Keeps the mark while it still holds back, and
    /// then returns `true`: the caller wakes a parked worker for the held-back work. Clears
    /// the mark otherwise. `holds_back` is asked only while a grace runs.
    pub fn after_found(&self, holds_back: impl FnOnce() -> bool) -> bool {
        if self.since.get().is_none() {
            return false;
        }
        if holds_back() {
            return true;
        }
        self.since.set(None);
        false
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_grace_runs_from_the_first_hold_back() {
        let g = Grace::new();
        let t0 = Instant::now();
        assert!(
            !g.is_over(|| t0 + FRESH_GRACE),
            "no grace before a hold-back"
        );
        assert_eq!(g.hold_back(t0), FRESH_GRACE);
        let half = FRESH_GRACE / 2;
        assert_eq!(g.hold_back(t0 + half), FRESH_GRACE - half, "the mark stays");
        assert!(!g.is_over(|| t0 + half));
        assert!(g.is_over(|| t0 + FRESH_GRACE));
        assert_eq!(g.hold_back(t0 + 2 * FRESH_GRACE), Duration::ZERO);
    }

    #[test]
    fn own_work_does_not_restart_the_grace() {
        let g = Grace::new();
        let t0 = Instant::now();
        g.hold_back(t0);
        assert!(
            g.after_found(|| true),
            "still held back: wake a parked worker"
        );
        assert_eq!(
            g.sleep_for(true, t0 + FRESH_GRACE / 4),
            Some(FRESH_GRACE * 3 / 4)
        );
        assert!(g.is_over(|| t0 + FRESH_GRACE));
    }

    #[test]
    fn holding_nothing_back_clears_the_mark() {
        let g = Grace::new();
        let t0 = Instant::now();
        assert!(!g.after_found(|| panic!("not asked without a grace")));
        g.hold_back(t0);
        assert_eq!(g.sleep_for(false, t0), None, "sleeps without a deadline");
        assert!(!g.is_over(|| t0 + FRESH_GRACE));
        g.hold_back(t0 + FRESH_GRACE);
        assert!(!g.after_found(|| false));
        assert_eq!(
            g.hold_back(t0 + 2 * FRESH_GRACE),
            FRESH_GRACE,
            "a new grace"
        );
    }
}
