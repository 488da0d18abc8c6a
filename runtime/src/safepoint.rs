//! Safe points: where a running actor can be preempted, and what they cost when it is not.
//!
//! A safe point ([`checkpoint`], and every mailbox, channel, join, spawn or yield) lets the
//! running actor be switched out if the monitor asked for it (its time slice is over) or if it
//! spent its tick budget (`Builder::preempt_ticks`). CPU-bound loops call `checkpoint` once per
//! iteration, so its cost when nothing is due is what matters: it is one relaxed load of one
//! process-wide word, [`GATE`], and one branch that is predicted not taken.
//!
//! # The gate
//!
//! `GATE` counts, across every runtime in the process, the workers whose preemption request is
//! pending, plus [`TICKS`] for every worker that counts ticks. It is almost always zero, and
//! nobody writes it while actors merely run: the monitor adds one when it raises a worker's
//! preempt flag, the worker takes it away when it lowers the flag (the actor yielded, or a new
//! time slice began). While it is not zero, every safe point in the process takes the slow
//! path, which reads the calling worker's own [`SafePoint`] through a thread-local:
//!
//! 1. the monitor raises worker W's `preempt` flag (a swap, so only a `false -> true` change
//!    counts) and adds one to `GATE`;
//! 2. W's running actor reaches a safe point, sees `GATE != 0`, reads W's flag, finds it up,
//!    lowers it (a swap, so only a `true -> false` change counts) and takes one from `GATE`,
//!    then yields;
//! 3. an actor on another worker that reaches a safe point meanwhile takes the slow path too,
//!    finds its own flag down and returns: a false alarm costs a thread-local read and two
//!    loads, for as long as some preemption is pending (one safe point of the preempted actor,
//!    normally; a loop with no safe point keeps it pending, and is reported as a long run).
//!
//! The flag and the gate are advisory, as preemption always was here: raising or reading them
//! late only delays a switch. Relaxed ordering is enough for that, and the counts stay exact
//! because every change of the flag is a swap whose result says who adjusts the gate. (A
//! lowering can come before the matching raise's increment: the gate then wraps for an
//! instant, which only sends safe points down the slow path for that instant.)
//!
//! Deterministic ticks are opt-in, and only they pay for counting: a worker that counts ticks
//! adds `TICKS` to the gate for its lifetime, so that every safe point goes to the slow path,
//! which does the counting. (So does every safe point of any other runtime in the same process
//! while such a worker lives: ticks are for tests and experiments, not for production.)
//!
//! # Why one process-wide word
//!
//! The previous fast path read a thread-local pointer, checked it for null, and loaded two
//! bytes of the worker's `SafePoint` (the flag and the ticks switch): three loads and three
//! branches per iteration, one of them through the thread-local block. The gate is a plain
//! static: its address is a link-time constant, no thread-local is involved, a migratable
//! actor that moved to another thread reads the same word, and no per-worker memory is touched
//! until a preemption is actually pending. It sits alone on its page: nothing else
//! shares its cache line, and its address has fixed low bits, so whether it collides with a
//! stack slot in the store buffer (4K aliasing) does not change from one run to the next.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use crate::context;

/// What [`GATE`] adds for a worker that counts ticks: far above any count of pending
/// preemptions (at most one per worker).
const TICKS: usize = 1 << 32;

/// See the module docs. Aligned to a page of its own (see "Why one process-wide word").
#[repr(align(4096))]
struct Gate(AtomicUsize);

/// See the module docs.
static GATE: Gate = Gate(AtomicUsize::new(0));

thread_local! {
    /// This worker's safe-point words, for the slow path. Written only by `enter` and its
    /// guard, so its value is constant while actors run on this thread.
    static SAFE_POINT: Cell<*const SafePoint> = const { Cell::new(ptr::null()) };
}

/// One worker's safe-point words. Other threads touch them (the monitor raises `preempt`), so
/// they live in the worker's `Remote` half.
///
/// Both are atomics, though only this worker (and, for `preempt`, the monitor) writes them:
/// code of a migratable actor running on another worker never reaches them through a cached
/// address (the slow path reads the thread-local afresh, see `checkpoint_slow`), but if it did,
/// the race would be benign, not a data race.
pub(crate) struct SafePoint {
    /// Raised by the preemption monitor; lowered when a new time slice starts or the actor
    /// yields to it. Each change is a swap that adjusts `GATE` (see the module docs).
    preempt: AtomicBool,
    /// Whether the runtime counts ticks (`preempt_ticks`); fixed when it is built.
    ticks: bool,
    /// Safe points left in this run before a deterministic preemption (`preempt_ticks`).
    budget: AtomicU32,
}

impl SafePoint {
    pub(crate) fn new(ticks: bool) -> SafePoint {
        if ticks {
            // Relaxed: the gate only decides fast or slow path; see the module docs.
            GATE.0.fetch_add(TICKS, Ordering::Relaxed);
        }
        SafePoint {
            preempt: AtomicBool::new(false),
            ticks,
            budget: AtomicU32::new(u32::MAX),
        }
    }

    /// Step 1: asks the actor running on this worker to yield at its next safe point.
    pub(crate) fn request_preempt(&self) {
        // Release: pairs with the acquire swap in `clear_preempt`, for shutdown's request (the
        // worker re-raises a request it lowered, see `worker.rs`); otherwise advisory (module
        // docs). The swap's result keeps the gate's count exact.
        if !self.preempt.swap(true, Ordering::Release) {
            GATE.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Step 2 (and a new time slice): lowers this worker's request, if it is up. A plain load
    /// first, so that the worker's hot path (every new slice) writes nothing when no request
    /// is pending. Returns whether it lowered one.
    pub(crate) fn clear_preempt(&self) -> bool {
        // Acquire: pairs with the release swap in `request_preempt`.
        let lowered =
            self.preempt.load(Ordering::Relaxed) && self.preempt.swap(false, Ordering::Acquire);
        if lowered {
            GATE.0.fetch_sub(1, Ordering::Relaxed);
        }
        lowered
    }

    /// Whether a request is up: mostly, the actor running on this worker has had its time slice
    /// and has not reached a safe point since (a kill or shutdown raises it on every worker
    /// too, until each reaches one or starts a slice). For a thief's look at an overdue next
    /// slot (`next_slot.rs`). Relaxed: a hint; the steal it allows is safe either way.
    pub(crate) fn preempt_requested(&self) -> bool {
        self.preempt.load(Ordering::Relaxed)
    }

    /// Starts a run with a fresh tick budget (ticks only).
    pub(crate) fn refill(&self, ticks: u32) {
        self.budget.store(ticks, Ordering::Relaxed);
    }
}

impl Drop for SafePoint {
    /// A runtime that goes away takes its share of the gate with it: a request left pending,
    /// and its ticks.
    fn drop(&mut self) {
        self.clear_preempt();
        if self.ticks {
            GATE.0.fetch_sub(TICKS, Ordering::Relaxed);
        }
    }
}

/// Publishes `sp` as this thread's safe-point words until the guard drops.
pub(crate) fn enter(sp: &SafePoint) -> impl Drop + '_ {
    struct Exit;
    impl Drop for Exit {
        fn drop(&mut self) {
            SAFE_POINT.with(|p| p.set(ptr::null()));
        }
    }
    SAFE_POINT.with(|p| p.set(sp));
    Exit
}

/// A preemption safe point: yields if the running actor's time slice is over, or if it has
/// spent its tick budget (`Builder::preempt_ticks`). Does nothing on a plain thread.
///
/// CPU-bound loops call it, at any depth of their call stack: the whole stack of the actor is
/// suspended and resumed later. With no preemption due anywhere in the process it is inlined
/// and costs one relaxed load of a process-wide word and one predicted branch (see the module
/// docs of `safepoint.rs`). Every mailbox and channel operation and [`yield_now`] are safe
/// points too.
///
/// [`yield_now`]: crate::yield_now
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
/// let n = rt.block_on(|| {
///     let mut n = 0u64;
///     for i in 0..1_000_000u64 {
///         n = n.wrapping_add(i);
///         threadlet_runtime::checkpoint(); // lets other actors run if this one hogs the worker
///     }
///     n
/// });
/// assert_eq!(n, 499_999_500_000);
/// ```
#[inline]
pub fn checkpoint() {
    // Relaxed: advisory (module docs).
    if GATE.0.load(Ordering::Relaxed) != 0 {
        checkpoint_slow();
    }
}

/// Some preemption is pending in the process, or some worker counts ticks: is one due here?
///
/// Inlined, so that counting ticks stays a decrement in the caller's loop; only a preemption
/// that is due leaves it (`context::preempt_current`, cold).
#[inline]
fn checkpoint_slow() {
    let sp = SAFE_POINT.with(|p| p.get());
    // SAFETY: a non-null pointer was set by `enter` to this worker's `SafePoint`, inside the
    // `Shared` that the worker context keeps alive until `enter`'s guard resets it. A stale
    // copy (inlined into a loop, the thread-local's address may be computed once, and a
    // migratable actor may move between iterations) points into a live worker of the same
    // runtime, whose words are atomics: a benign race that at worst preempts late or counts a
    // tick on the wrong worker's budget (and, that budget spent while its worker is idle,
    // yields at each safe point until that worker's next run refills it).
    let Some(sp) = (unsafe { sp.as_ref() }) else {
        return; // not a worker thread
    };
    let due = if sp.preempt.load(Ordering::Relaxed) {
        true
    } else if sp.ticks {
        // Saturating: a budget spent where the actor may not suspend (a destructor run by an
        // unwind, an exit hook) stays spent, so the next safe point that may suspend does;
        // wrapping would give the actor 2^32 more ticks. The next run refills it.
        let budget = sp.budget.load(Ordering::Relaxed).saturating_sub(1);
        sp.budget.store(budget, Ordering::Relaxed);
        budget == 0
    } else {
        false // another worker's request: a false alarm (module docs, step 3)
    };
    if due {
        context::preempt_current();
    }
}

/// Safe points skipped or taken so far are not counted; this only tells tests whether the gate
/// is shut (nothing pending, no ticks anywhere in the process).
#[cfg(test)]
pub(crate) fn gate() -> usize {
    GATE.0.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_ticks_open_the_gate_and_closing_them_shuts_it() {
        // Other tests in this binary may hold the gate open: count relative to now.
        let before = gate();
        let sp = SafePoint::new(false);
        sp.request_preempt();
        sp.request_preempt(); // twice: counted once
        assert_eq!(gate(), before + 1);
        sp.clear_preempt();
        sp.clear_preempt();
        assert_eq!(gate(), before);
        sp.request_preempt();
        drop(sp); // a pending request goes with its worker
        assert_eq!(gate(), before);
        let ticking = SafePoint::new(true);
        assert_eq!(gate(), before + TICKS);
        drop(ticking);
        assert_eq!(gate(), before);
    }
}
