//! Lingering: a worker about to sleep that was woken soon after its recent sleeps waits for
//! the next wake by watching a flag for a short while, before it blocks in the kernel.
//!
//! A started process actor runs only on its home worker, so a message between process actors
//! pinned to two workers is a wake of the receiver's worker. Blocked in the kernel, that worker
//! takes microseconds to run again (a futex wake, then the scheduler; more inside a sandbox such
//! as gVisor). On 16 workers a game of 1,000 process players passed the sack at 8 us a kick,
//! nearly every kick waiting for a parked worker to wake; with workers lingering by the rule
//! below, 2.6 us (`docs/benchmarks.md`, "Lingering before a park"). A worker that watches a
//! flag sees the wake within a fraction of a microsecond.
//!
//! Watching costs a CPU (and, on a machine with SMT, some of its sibling's speed), so a worker
//! lingers, for at most [`LINGER`], only while lingering pays: after a sleep that a wake ended
//! within [`LINGER`] of its start, soon enough for a watch to catch. Workers that stay idle (a
//! message chain kept on one core, a quiet server) block at once, as before, and so does a
//! worker whose wakes come too far apart for a watch to catch them. The state is split as the
//! worker's is: whether to linger is the worker's alone ([`Linger`], in its `Core`); the flag
//! is raised by every waker ([`WakeFlag`], in its `Remote`).
//!
//! # The protocol
//!
//! The sleep protocol (`idle.rs`, step 4) asks of a worker's sleep only that it return once
//! unparked, at once if the unpark came first, and allows it to return spuriously:
//!
//! 1. Every wake of a worker (`Remote::unpark`) raises its [`WakeFlag`] (release), then unparks
//!    its `Parker`, which keeps a token if the worker is not blocked in it.
//! 2. A lingering worker about to sleep watches the flag for up to [`LINGER`] (less if its
//!    sleep has a shorter limit). If it finds the flag raised, it lowers it (an acquire swap,
//!    which pairs with the raises, each a read-modify-write so that none ends another's release
//!    sequence: the wakers' pushes before their unparks are visible to the search that
//!    follows), takes the `Parker`'s token if it is there yet, and returns.
//! 3. Otherwise it blocks on its `Parker` for what is left of the sleep's limit. A wake whose
//!    raise came too late for the watch left a token, so the park returns at once.
//! 4. After a blocking sleep the worker lowers the flag (the park consumed the token of the
//!    raise it finds) and decides whether to linger next time: only if a wake, not the sleep's
//!    limit, ended the sleep within [`LINGER`] of its start (the watch included).
//!
//! No wake is lost: a wake either raised the flag before the watch lowered it (step 2 sees it)
//! or left a token that step 3's park takes. The costs are bounded. A wake that lands between
//! the watch's take of the flag and its take of the token leaves a token that cuts the next
//! sleep short, spuriously, which the sleep protocol allows. A wake that lands between the end
//! of a blocking park and step 4's lowering (on the I/O poll's path, the poll's hand-over is
//! in that window) is seen only through its token, at the end of the next watch, at most
//! [`LINGER`] later. A lingering worker does not take the I/O poll (`worker.rs`, "Polling for
//! I/O") until it blocks: when every worker lingers, readiness waits for a busy worker's poll,
//! or at most [`LINGER`].
//!
//! `tests/loom_linger.rs` runs this module's watch and flag against wakers in loom: no wake
//! is lost, and a caught wake's push is seen. Under loom a watch makes `LOOM_LOOKS` looks
//! instead of watching the clock.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::sync::AtomicBool;

/// How long a lingering worker watches its flag before it blocks, and how soon after the start
/// of a sleep a wake must come for the next sleep to linger. Long enough to span the gap
/// between the wakes of one worker of 16 passing messages among pinned actors (a kick every
/// 1-2 us, so a worker's turn every 20-30 us); short enough that an idle runtime stops burning
/// CPU soon. Of 20, 50 and 200 us on 16 cores, 20 us left a third of the gain, 50 and 200 us
/// did equally well.
pub(super) const LINGER: Duration = Duration::from_micros(50);

/// Watch polls between looks at the clock: a pause is some tens of nanoseconds, so the watch
/// overruns its end by a microsecond or so at most.
#[cfg(not(loom))]
const POLLS_PER_CLOCK: u32 = 32;

/// Looks at the flag a watch makes under loom, where the clock is not modelled: two, so that
/// a model has a watch that catches a raise on its second look, and one that gives up.
#[cfg(loom)]
pub const LOOM_LOOKS: u32 = 2;

/// Raised by every wake of a worker (step 1); watched and lowered by that worker alone.
#[derive(Debug, Default)]
pub struct WakeFlag(AtomicBool);

impl WakeFlag {
    /// Step 1, before the `Parker`'s unpark. Release: pairs with the acquire swaps of
    /// `Linger::watch` and `Linger::after_block`, so that what the waker pushed before is seen
    /// by the search that the caught wake starts. A swap, not a store: a read-modify-write
    /// continues the release sequence of an earlier raise not yet taken, where a plain store
    /// of another waker would end it.
    pub fn raise(&self) {
        self.0.swap(true, Ordering::Release);
    }

    /// Lowers the flag; whether it was raised. Acquire: see `raise`.
    fn take(&self) -> bool {
        // A plain load first: while nobody wakes the worker, watching reads a cache line that
        // stays shared, and writes it only once raised.
        self.0.load(Ordering::Relaxed) && self.0.swap(false, Ordering::Acquire)
    }
}

/// Whether the worker lingers before its next sleep; touched by the worker alone.
#[derive(Debug, Default)]
pub struct Linger {
    lingering: Cell<bool>,
}

impl Linger {
    /// A worker that lingers in its next sleep (for the loom model).
    #[cfg(loom)]
    pub fn lingering() -> Linger {
        Linger {
            lingering: Cell::new(true),
        }
    }

    /// Step 2: if this worker lingers, watches `flag` until `LINGER` (or `limit`, if shorter)
    /// after `began`, the start of the sleep. `true` if a wake was caught, after `take_token`
    /// (which takes the `Parker`'s token, if it is there yet): the sleep is over. `false`: the
    /// caller blocks (step 3), then calls [`after_block`](Linger::after_block).
    pub fn watch(
        &self,
        flag: &WakeFlag,
        began: Instant,
        limit: Option<Duration>,
        take_token: impl FnOnce(),
    ) -> bool {
        if !self.lingering.get() {
            return false;
        }
        let end = began + limit.map_or(LINGER, |l| l.min(LINGER));
        let mut polls = 0;
        loop {
            if flag.take() {
                // The token, unless the waker has not unparked yet: then it cuts a later
                // sleep short, spuriously, which the sleep protocol allows.
                take_token();
                return true;
            }
            polls += 1;
            if watched_to(end, polls) {
                // The block that follows ends past `LINGER` (unless a wake slipped in as
                // this look ended), so step 4 ends the lingering: wakes this far apart are
                // not worth a watch.
                return false;
            }
            #[cfg(not(loom))]
            std::hint::spin_loop();
            #[cfg(loom)]
            loom::thread::yield_now();
        }
    }

    /// Step 4, after a blocking sleep that has lasted `slept` (its watch included): lowers
    /// the flag and decides whether the next sleep lingers.
    pub fn after_block(&self, flag: &WakeFlag, slept: Duration) {
        let woken = flag.take();
        self.lingering.set(lingers_after(woken, slept));
    }

    /// Whether the next sleep lingers (for tests).
    #[cfg(test)]
    fn is_lingering(&self) -> bool {
        self.lingering.get()
    }
}

/// Whether a watch that has made `polls` looks has reached `end`: the clock, every
/// [`POLLS_PER_CLOCK`] looks.
#[cfg(not(loom))]
fn watched_to(end: Instant, polls: u32) -> bool {
    polls.is_multiple_of(POLLS_PER_CLOCK) && Instant::now() >= end
}

/// Under loom, `LOOM_LOOKS` looks.
#[cfg(loom)]
fn watched_to(_: Instant, polls: u32) -> bool {
    polls >= LOOM_LOOKS
}

/// Step 4's rule: the next sleep lingers if a wake ended this one within [`LINGER`] of its
/// start, soon enough for a watch to have caught it.
fn lingers_after(woken: bool, slept: Duration) -> bool {
    woken && slept <= LINGER
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_utils::sync::Parker;

    #[test]
    fn a_worker_starts_out_not_lingering() {
        let (linger, flag, parker) = (Linger::default(), WakeFlag::default(), Parker::new());
        flag.raise();
        // Not lingering: no watch, and the flag stays for the block to account for.
        assert!(!linger.watch(&flag, Instant::now(), None, || {
            parker.park_timeout(Duration::ZERO)
        }));
        assert!(flag.0.load(Ordering::Relaxed));
    }

    #[test]
    fn the_next_sleep_lingers_only_after_a_wake_a_watch_would_have_caught() {
        assert!(lingers_after(true, Duration::ZERO));
        assert!(lingers_after(true, LINGER));
        // A wake that came later than a watch lasts.
        assert!(!lingers_after(true, LINGER + Duration::from_micros(1)));
        // A sleep its limit ended, however soon.
        assert!(!lingers_after(false, Duration::ZERO));
    }

    #[test]
    fn after_a_block_the_flag_is_lowered_and_the_rule_applied() {
        let (linger, flag) = (Linger::default(), WakeFlag::default());
        linger.lingering.set(true);
        // Ended by its limit: no wake raised the flag.
        linger.after_block(&flag, Duration::ZERO);
        assert!(!linger.is_lingering());
        // A wake, but long after the sleep began.
        linger.lingering.set(true);
        flag.raise();
        linger.after_block(&flag, LINGER * 2);
        assert!(!linger.is_lingering());
        assert!(!flag.0.load(Ordering::Relaxed), "lowered after the block");
    }

    #[test]
    fn a_watch_catches_a_wake_from_another_thread() {
        let (linger, flag, parker) = (Linger::default(), WakeFlag::default(), Parker::new());
        linger.lingering.set(true);
        let unparker = parker.unparker();
        std::thread::scope(|s| {
            // A wake as `Remote::unpark` makes it: raise, then unpark.
            s.spawn(|| {
                flag.raise();
                unparker.unpark();
            });
            // Watches until the raise comes (or for one linger, if the thread starts late:
            // then again, until it has).
            while !linger.watch(&flag, Instant::now(), None, || {
                parker.park_timeout(Duration::ZERO)
            }) {}
        });
        assert!(
            !flag.0.load(Ordering::Relaxed),
            "lowered by the watch that caught it"
        );
        assert!(
            linger.is_lingering(),
            "a caught wake keeps the worker lingering"
        );
    }

    #[test]
    fn a_watch_without_a_wake_ends_by_its_limit() {
        let (linger, flag, parker) = (Linger::default(), WakeFlag::default(), Parker::new());
        linger.lingering.set(true);
        // It watches for the whole span (a lower bound: it may run over by a few polls).
        let began = Instant::now();
        assert!(!linger.watch(
            &flag,
            Instant::now(),
            Some(Duration::from_micros(5)),
            || { parker.park_timeout(Duration::ZERO) }
        ));
        assert!(began.elapsed() >= Duration::from_micros(5));
        let began = Instant::now();
        assert!(!linger.watch(&flag, Instant::now(), None, || {
            parker.park_timeout(Duration::ZERO)
        }));
        assert!(began.elapsed() >= LINGER);
        // A zero limit (a sleep due to end now) does not watch past it either.
        assert!(
            !linger.watch(&flag, Instant::now(), Some(Duration::ZERO), || {
                parker.park_timeout(Duration::ZERO)
            })
        );
    }
}
