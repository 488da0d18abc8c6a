//! The grace: how long idle workers leave another worker's unstarted process actors alone,
//! and why that work is never stranded.
//!
//! A process actor pins to the worker that starts it, so a thief that starts one decides where
//! it will run for good. Placement (`worker/placement.rs`, step 5) keeps pinned load
//! balanced by holding an idle worker that already holds pinned actors back from another
//! worker's unstarted process actors (its *fresh queue*, and those placed on it) unless that
//! worker is clearly busier. Held back, the work still needs a worker answerable for it: it is
//! its owner's to start, and the owner may be stuck in actor code that never returns to its
//! loop (a blocking call, a loop without safe points). The sleep protocol of `idle.rs` takes work only where a
//! worker may take it, so a hold-back with no end could leave the work in its queue while
//! every other worker sleeps. The grace gives the hold-back its end.
//!
//! The grace belongs to the work, not to the worker held back: each worker's unstarted process
//! actors (its fresh queue, and those placed on it by spawns elsewhere) have one
//! [`FreshMark`] (in its `Remote`), the time since which some worker has been held back from
//! them. Every worker held back from them counts from the same mark, and what a held-back
//! worker does meanwhile (run work of its own, sleep) does not move it. Below, "the queue"
//! means both of those queues. [`Idle::search`](crate::idle::Idle) runs the protocol through
//! the [`Searcher`](crate::idle::Searcher) hooks `holds_back`, `grace_left` and
//! `take_held_back`. The loom model in `tests/loom_idle.rs` runs `Idle::search` and
//! `FreshMark` with a modelled clock, through hooks of its own written like the worker's.
//!
//! # The protocol
//!
//! 1. A worker W held back from another worker O's unstarted process actors (by the balance rule,
//!    in a steal or in the re-check before it sleeps) marks that queue with the time unless it
//!    is marked ([`FreshMark::hold_back`]), and gets what is left of the queue's grace. W looks
//!    at the queue before it reads the mark.
//! 2. W sleeps no longer than the shortest grace left among the queues its re-check held it
//!    back from (`Searcher::recheck`) and those it holds back from after that
//!    (`Searcher::grace_left`, asked after the re-check, which may have made a mark). Once a
//!    queue's grace is over ([`FreshMark::is_over`]), W's search takes from it right after
//!    `find`, whether or not W counts as searching (`Searcher::take_held_back`).
//! 3. If W finds other work while it still holds back, it wakes a parked worker, which may
//!    take the held-back work sooner. The mark does not move: the grace runs on through W's
//!    own work.
//! 4. Whoever pushes into the queue while it is empty clears the mark first
//!    ([`FreshMark::before_push`]): O, into its fresh queue, or a spawn that places an actor on O. A
//!    queue that has run empty and filled again so starts unmarked; work pushed into a queue
//!    that is not empty joins the current run of work and its grace. (The gaps, all races
//!    with a take: a thief that read the old mark, found it over, and then steals from the
//!    refilled queue takes new work without its grace, as much as one steal takes, up to half
//!    the queue; a pusher that saw the queue non-empty just before its last actor was taken
//!    pushes new work under the old mark, which may be over; and a pusher that saw it empty may
//!    clear a mark that a thief made for work pushed meanwhile, which then waits one grace
//!    more. Each makes a placement less apt or a wait a grace longer, once per race; none
//!    strands work: a cleared mark is made again by the next look.)
//!
//! # Why nothing held back is stranded
//!
//! Held-back work waits in O's queue. If O comes back to its loop, it runs that queue itself
//! (it empties its unstarted actors before it searches or parks). If it does not, O pushes
//! nothing; a placement may still push onto O, but only into a queue that is not empty (the
//! held-back work is there), which clears nothing, so the mark that the first held-back
//! worker made (step 1) stays for as long as the work is there (or, after a clear raced with
//! it, is made again at the next look), and so does the hold-back: the loads the balance rule
//! weighs do not move while a held-back worker W sleeps and O is stuck, except by a placement
//! onto W (which unparks W) or onto O (only if O looks parked; `parked` is a relaxed hint, so
//! a stale one can pick an O that has only just woken), and a change that lets W through makes
//! the work plain stealable work for W. Such a change wakes nobody (O's load rises as a
//! handler actor suspends in its `handle` there, or as O starts an actor it had popped), so a
//! W that its re-check held back still sleeps no longer than the grace the re-check saw
//! (step 2), and its next search takes the work. (An earlier version asked the balance rule
//! again for that bound: a W let through in between saw nothing held back and slept for good
//! beside the work; `tests/loom_idle.rs` has the case.) While W sleeps, its sleep ends with
//! the grace (step 2);
//! while W runs work of its own, the grace runs on (step 3), and W's next search after it
//! takes the work. So held-back work waits about one grace, or until a held-back worker next
//! looks for work after that; never for good. A worker that is not held back (it holds no
//! pinned actors, or O is busier) takes fresh work like any other stealable work, under the
//! argument of `idle.rs`.
//!
//! # Why the grace is not cut short
//!
//! W takes held-back work only once the queue's mark is a grace old (steps 1 and 2), and the
//! mark is no older than the queue's current run of work: the time it last went from empty to
//! not (step 4; the gap is named there). Ordering: the pusher's clear is sequenced before its
//! push, whose publication W's look at the queue acquires (crossbeam's push and `is_empty`),
//! and W reads the mark, and the clock for a new mark, after that look; so a W that saw the
//! new work reads a mark no older than the clear, and dates a mark it makes after the work was
//! there. The mark itself is a hint under that order: relaxed accesses, and a
//! compare-and-swap so that held-back workers agree on one.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::sync::AtomicU64;

/// How long workers that hold pinned actors leave another worker's unstarted process actors
/// to that worker before they take them anyway. Long enough for an owner whose thread the
/// kernel set aside for a moment to come back and start them itself (a few hundred
/// microseconds were seen here, and a pool came apart over them); short enough that an owner
/// stuck in a blocking call or in a loop without safe points delays its children by about a
/// millisecond, not for good.
pub const FRESH_GRACE: Duration = Duration::from_millis(1);

/// `FRESH_GRACE` in the mark's unit.
const GRACE_NANOS: u64 = FRESH_GRACE.as_nanos() as u64;

/// The grace of one worker's unstarted process actors; see the module docs. Times are nanoseconds on the
/// runtime's clock (`Shared::grace_now`), which never reads zero.
#[derive(Debug, Default)]
pub struct FreshMark {
    /// Since when some worker has been held back from the queue's contents; 0: nobody has.
    since: AtomicU64,
}

impl FreshMark {
    /// An unmarked queue.
    pub fn new() -> FreshMark {
        FreshMark::default()
    }

    /// Step 1: a worker is held back from the queue, which it saw non-empty, at `now`. Marks
    /// it unless it is marked, and returns what is left of its grace (zero: the worker may
    /// take the work).
    pub fn hold_back(&self, now: u64) -> Duration {
        // Relaxed, both: see "Why the grace is not cut short".
        let since = match self.since.load(Relaxed) {
            0 => match self.since.compare_exchange(0, now, Relaxed, Relaxed) {
                Ok(_) => now,
                Err(marked) => marked,
            },
            marked => marked,
        };
        Duration::from_nanos((since + GRACE_NANOS).saturating_sub(now))
    }

    /// Whether some worker has been held back from the queue's contents (a relaxed load: a
    /// hint, for callers that skip work when it is unmarked).
    pub fn is_marked(&self) -> bool {
        self.since.load(Relaxed) != 0
    }

    /// Step 2: whether the queue's grace is over. Reads the clock only if it is marked.
    pub fn is_over(&self, now: impl FnOnce() -> u64) -> bool {
        // Relaxed: see "Why the grace is not cut short".
        match self.since.load(Relaxed) {
            0 => false,
            since => now().saturating_sub(since) >= GRACE_NANOS,
        }
    }

    /// Step 4: someone is about to push into the queue. If it is marked and `is_empty()`
    /// says the queue holds nothing, the mark is cleared, so that the new work gets a grace of
    /// its own. The mark is read first: most pushes find none, and skip the emptiness check
    /// (and no write touches an unmarked queue's mark). The runtime's one caller is
    /// `Remote::before_unstarted_push`; the loom model (`tests/loom_idle.rs`) calls it too.
    pub fn before_push(&self, is_empty: impl FnOnce() -> bool) {
        if self.is_marked() && is_empty() {
            // Relaxed: the push that follows publishes it (see "Why the grace is not cut
            // short").
            self.since.store(0, Relaxed);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const G: u64 = GRACE_NANOS;

    #[test]
    fn the_grace_runs_from_the_first_hold_back() {
        let m = FreshMark::new();
        assert!(!m.is_over(|| 5 * G), "no grace before a hold-back");
        assert_eq!(m.hold_back(10), FRESH_GRACE);
        assert_eq!(
            m.hold_back(10 + G / 2),
            FRESH_GRACE / 2,
            "a second worker counts from the same mark"
        );
        assert!(!m.is_over(|| 10 + G / 2));
        assert!(m.is_over(|| 10 + G));
        assert_eq!(m.hold_back(10 + 2 * G), Duration::ZERO);
    }

    #[test]
    fn new_work_in_an_empty_queue_starts_a_new_grace() {
        let m = FreshMark::new();
        m.hold_back(10);
        m.before_push(|| false);
        assert!(
            m.is_over(|| 10 + G),
            "a push behind work waiting keeps the mark"
        );
        m.before_push(|| true);
        assert!(!m.is_over(|| 10 + 5 * G), "cleared");
        assert_eq!(m.hold_back(10 + 5 * G), FRESH_GRACE, "a grace of its own");
        assert!(m.is_over(|| 10 + 6 * G));
    }

    #[test]
    fn the_clock_is_read_only_while_a_grace_runs() {
        let m = FreshMark::new();
        assert!(!m.is_over(|| panic!("read the clock with no mark")));
    }
}
