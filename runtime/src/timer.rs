//! Timers: min-heaps of deadlines, one per runtime (fired by its monitor thread) and one for the
//! whole process (fired by the `threadlet-timer` thread, for `call_at` from plain threads).
//!
//! A sleeping or timed-out-waiting actor holds no worker and no OS thread: it is parked, and a
//! heap entry will wake it. Entries are cancelled lazily: [`TimerHandle::cancel`] flips the
//! entry's state, the heap keeps it until its deadline (or until a compaction when cancelled
//! entries outnumber live ones), and a cancelled entry does nothing when popped. That keeps
//! adding and cancelling at one lock each, O(log n), and the heap at most about twice the number
//! of pending timers.
//!
//! # Protocol
//!
//! 1. *Adding* pushes an entry in state `PENDING` under the heap lock, and tells the caller
//!    whether it is now the earliest: the thread that fires the heap may be asleep past its
//!    deadline and must then be kicked.
//! 2. *Cancelling* first counts the entry in `cancelled`, then flips it `PENDING -> CANCELLED`
//!    (and takes the count back if the flip fails: the entry had fired). Counting first matters:
//!    the firing thread may pop the entry the instant the flip lands and uncount it at once, and
//!    its decrement must find the increment already there. So `cancelled` never wraps below
//!    zero; it is at least the number of cancelled entries in the heap.
//! 3. *Firing* pops every entry whose deadline is not after the `Instant` the firing thread
//!    read, under the lock, and runs them outside it, so a callback may add timers. Each popped
//!    entry is flipped `PENDING -> FIRED`; one that was cancelled is uncounted and dropped.
//!    Entries with equal deadlines fire in the order they were added; none fires early.
//! 4. *Compaction*, when adding to a heap of at least `COMPACT_MIN_LEN` entries of which more
//!    than half are cancelled, rebuilds the heap from the pending entries and uncounts the rest.
//! 5. *Containment*: every piece of user code a timer carries runs under `fault::contain`: a
//!    `call_at` closure when it fires, and its destructor when it is dropped without running
//!    (cancelled, compacted away, or cleared at shutdown). A panic there is reported on stderr
//!    and the thread carries on firing timers; it never runs under the heap lock.
//! 6. *Shutdown*: `Timers::close` (the last step of `Runtime`'s drop, once its threads have
//!    exited and every actor is gone) closes the heap, then drops every pending entry without
//!    running it, contained as in step 5. A cleared entry counts as cancelled for a later
//!    `cancel`. A closed heap takes no new entry: nothing would ever fire or drop it while a
//!    `Handle` keeps the runtime's memory, and a plain thread's `send_after` to an actor it
//!    still names can come after. `call_at_for` arms such an entry on the process-wide heap
//!    instead (step 7), where it fires at its deadline and finds its mailbox closed. (A
//!    delayed message dropped by the clear finds its mailbox closed, and goes at once.)
//! 7. *The process-wide timer thread*: `call_at` outside any runtime adds to one process-wide
//!    heap, fired by one thread named `threadlet-timer`, started by the first such call (it
//!    is never started otherwise). It sleeps on a condition variable until the earliest
//!    deadline, or without a deadline while the heap is empty, and wakes early only when kicked
//!    by a new earliest entry (step 1); the kick is a flag under the condition variable's
//!    mutex, so one that lands while the thread is firing is seen before it sleeps. It never
//!    exits: it costs one parked thread for the rest of the process, and entries still pending
//!    when the process exits never run.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use crate::context::Waiter;
use crate::fault::{self, AbortOnUnwind};

/// Heaps smaller than this are never compacted: rebuilding costs more than it saves.
const COMPACT_MIN_LEN: usize = 1024;

const PENDING: u8 = 0;
const FIRED: u8 = 1;
const CANCELLED: u8 = 2;

/// What a timer does when its deadline passes.
pub(crate) enum TimerAction {
    /// Wake a parked actor or thread (`sleep`, `recv_timeout`).
    Wake(Waiter),
    /// Run a closure on the thread that fires the heap (`call_at`, `send_after`); it must not
    /// block. A panic in it, or in its destructor, is contained (step 5).
    Call(Box<dyn FnOnce() + Send>),
}

impl TimerAction {
    /// Runs the action (step 3), containing a callback's panic (step 5).
    fn fire(self) {
        match self {
            TimerAction::Wake(w) => w.wake_by_value(),
            TimerAction::Call(f) => {
                fault::contain("a timer callback (call_at, send_after)", f);
            }
        }
    }

    /// Drops an action that will never run (steps 2, 4, 6), containing a destructor's panic.
    fn drop_unrun(self) {
        if let TimerAction::Call(f) = self {
            fault::contain(
                "the destructor of a timer callback that never ran",
                move || drop(f),
            );
        }
    }
}

struct Entry {
    deadline: Instant,
    seq: u64,
    state: Arc<AtomicU8>,
    action: TimerAction,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest deadline first.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.deadline, other.seq).cmp(&(self.deadline, self.seq))
    }
}

/// A pending timer; cancelling it makes it a no-op.
#[derive(Debug)]
pub(crate) struct TimerHandle {
    state: Arc<AtomicU8>,
}

impl TimerHandle {
    /// Cancels the timer if it is still pending (step 2). Returns whether it was no longer
    /// pending: it had fired, or shutdown had cleared it.
    pub(crate) fn cancel(&self, timers: &Timers) -> bool {
        // Relaxed: the count is published by the release half of the CAS below, which every
        // thread that uncounts this entry acquires (pairs with the acquire loads of the state in
        // `fire_due`, `compact` and `clear`).
        timers.cancelled.fetch_add(1, Ordering::Relaxed);
        #[cfg(test)]
        tests::widen_cancel_window();
        // AcqRel on success: releases the count above to whoever pops the entry; acquire on
        // failure pairs with the firing thread's `FIRED` flip (nothing is read after it here).
        match self
            .state
            .compare_exchange(PENDING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => false,
            Err(_) => {
                // Our own increment precedes this in the counter's order: no wrap.
                timers.uncount(1);
                true
            }
        }
    }
}

/// A heap of timers: one runtime's, or the process-wide one.
pub(crate) struct Timers {
    heap: Mutex<BinaryHeap<Entry>>,
    seq: AtomicU64,
    /// Cancelled entries still in the heap, plus cancels counted but not yet flipped (step 2).
    cancelled: AtomicUsize,
    /// Set by a runtime's shutdown, under the heap lock, before its last clear (step 6): no
    /// thread fires this heap any more, so it takes no new entry.
    closed: AtomicBool,
}

impl Default for Timers {
    fn default() -> Self {
        Timers::new()
    }
}

impl Timers {
    pub(crate) const fn new() -> Timers {
        Timers {
            heap: Mutex::new(BinaryHeap::new()),
            seq: AtomicU64::new(0),
            cancelled: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        }
    }

    /// Takes back `n` counts of `cancelled`, each matched by an earlier increment (step 2).
    fn uncount(&self, n: usize) {
        // Relaxed: a counter whose increments are ordered before this by the state word's
        // release/acquire (see `cancel`); only the value matters.
        let before = self.cancelled.fetch_sub(n, Ordering::Relaxed);
        debug_assert!(before >= n, "timer cancel count wrapped: {before} - {n}");
    }

    /// Adds a timer (step 1) to a heap that is open: the process-wide one, which is never
    /// closed, or a runtime's from one of its actors (a timed park), which run no more once
    /// it is closed (step 6). Returns its handle and whether it is now the earliest (the
    /// thread that fires the heap must be told, since it may be sleeping past this deadline).
    pub(crate) fn add(&self, deadline: Instant, action: TimerAction) -> (TimerHandle, bool) {
        match self.add_unless_closed(deadline, action) {
            Ok(added) => added,
            Err(_) => unreachable!("a timer added to a closed heap by one of its runtime's actors"),
        }
    }

    /// `add`, or the action back if the heap is closed (step 6).
    pub(crate) fn add_unless_closed(
        &self,
        deadline: Instant,
        action: TimerAction,
    ) -> Result<(TimerHandle, bool), TimerAction> {
        let state = Arc::new(AtomicU8::new(PENDING));
        let (earliest, dropped) = {
            let mut heap = self.heap.lock();
            // Relaxed: written under this lock (`close`), which orders the two.
            if self.closed.load(Ordering::Relaxed) {
                return Err(action);
            }
            let entry = Entry {
                deadline,
                // Relaxed: a unique tie-breaker; the heap lock orders the entries themselves.
                seq: self.seq.fetch_add(1, Ordering::Relaxed),
                state: state.clone(),
                action,
            };
            let dropped = self.compact(&mut heap);
            let earliest = heap.peek().is_none_or(|e| deadline < e.deadline);
            heap.push(entry);
            (earliest, dropped)
        };
        // Outside the lock: a destructor may add timers (step 5).
        for e in dropped {
            e.action.drop_unrun();
        }
        Ok((TimerHandle { state }, earliest))
    }

    /// Step 4: takes the cancelled entries out of a heap that is mostly cancelled, and returns
    /// them, to be dropped outside the lock.
    fn compact(&self, heap: &mut BinaryHeap<Entry>) -> Vec<Entry> {
        // Relaxed: a heuristic; the count may run ahead of the flips it announces.
        let cancelled = self.cancelled.load(Ordering::Relaxed);
        if heap.len() < COMPACT_MIN_LEN || cancelled.saturating_mul(2) <= heap.len() {
            return Vec::new();
        }
        // Acquire: pairs with the release of `cancel`'s CAS, so its count is there to take back.
        let (live, dead): (Vec<Entry>, Vec<Entry>) = std::mem::take(heap)
            .into_vec()
            .into_iter()
            .partition(|e| e.state.load(Ordering::Acquire) == PENDING);
        *heap = BinaryHeap::from(live);
        self.uncount(dead.len());
        dead
    }

    /// Fires every timer due at `now` (outside the lock) and returns the next deadline (step 3).
    pub(crate) fn fire_due(&self, now: Instant) -> Option<Instant> {
        let mut due = Vec::new();
        let next = {
            let mut heap = self.heap.lock();
            while heap.peek().is_some_and(|e| e.deadline <= now) {
                due.push(heap.pop().expect("peeked"));
            }
            heap.peek().map(|e| e.deadline)
        };
        for e in due {
            // AcqRel on success: a later `cancel` that fails acquires it; Acquire on failure
            // pairs with the release of `cancel`'s CAS, so its count is there to take back.
            match e
                .state
                .compare_exchange(PENDING, FIRED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => e.action.fire(),
                Err(_) => {
                    self.uncount(1);
                    e.action.drop_unrun();
                }
            }
        }
        next
    }

    /// Whether a timer that has not been cancelled waits in the heap (for the deadlock check,
    /// which asks only while every worker is idle: the look at each entry costs nothing then).
    pub(crate) fn is_pending(&self) -> bool {
        self.heap
            .lock()
            .iter()
            // Acquire: pairs with the release of a cancel, as `fire_due`'s reads do.
            .any(|e| e.state.load(Ordering::Acquire) == PENDING)
    }

    /// The latest deadline of the timers that have not been cancelled, if any: once it has
    /// passed (and its timer fired), none of them is pending any more. (A walk of the whole
    /// heap, where `is_pending` stops at the first: only the process-wide heap, seldom used,
    /// is asked this.)
    fn latest_pending(&self) -> Option<Instant> {
        self.heap
            .lock()
            .iter()
            // Acquire: pairs with the release of a cancel, as `fire_due`'s reads do.
            .filter(|e| e.state.load(Ordering::Acquire) == PENDING)
            .map(|e| e.deadline)
            .max()
    }

    /// Entries in the heap, cancelled ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.lock().len()
    }

    /// The cancel count (step 2), for tests of its invariant.
    #[cfg(test)]
    pub(crate) fn cancelled_count(&self) -> usize {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// A runtime's shutdown, once its threads have exited (step 6): takes no entry from now on,
    /// and drops the pending ones without running them.
    pub(crate) fn close(&self) {
        {
            let _heap = self.heap.lock();
            // Relaxed: read under the same lock (`add_unless_closed`).
            self.closed.store(true, Ordering::Relaxed);
        }
        self.clear();
    }

    /// Drops every pending timer without running it (step 6).
    pub(crate) fn clear(&self) {
        let entries = std::mem::take(&mut *self.heap.lock());
        let mut cancelled = 0;
        for e in entries.into_vec() {
            // A pending entry becomes cancelled, so that a later `cancel` of it counts nothing;
            // one already cancelled is uncounted. Orderings as in `fire_due`.
            if e.state
                .compare_exchange(PENDING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                cancelled += 1;
            }
            e.action.drop_unrun();
        }
        self.uncount(cancelled);
    }
}

impl Drop for Timers {
    /// Entries left in a dropped heap are dropped as at shutdown, contained.
    fn drop(&mut self) {
        self.clear();
    }
}

/// The process-wide heap and its thread (step 7).
struct ProcessTimers {
    timers: Timers,
    /// A kick: a new earliest entry. Set and cleared under this mutex.
    kicked: Mutex<bool>,
    cv: Condvar,
    /// The thread has been started (set once, under `start`).
    started: AtomicBool,
    start: Mutex<()>,
}

static PROCESS_TIMERS: ProcessTimers = ProcessTimers {
    timers: Timers::new(),
    kicked: Mutex::new(false),
    cv: Condvar::new(),
    started: AtomicBool::new(false),
    start: Mutex::new(()),
};

/// Runs `action` at `deadline` on the process-wide timer thread (step 7), starting the thread
/// on first use.
///
/// # Panics
///
/// If the operating system refuses to start the thread; the action is then dropped, and a later
/// call tries again.
pub(crate) fn add_process_wide(deadline: Instant, action: TimerAction) -> TimerHandle {
    let p = &PROCESS_TIMERS;
    p.ensure_started();
    let (handle, earliest) = p.timers.add(deadline, action);
    if earliest {
        *p.kicked.lock() = true;
        p.cv.notify_one();
    }
    handle
}

/// The process-wide heap, for a cancel of one of its entries (`context::ArmedTimer`).
pub(crate) fn process_wide() -> &'static Timers {
    &PROCESS_TIMERS.timers
}

/// When the last timer pending on the process-wide heap is due, if one is (`deadlock.rs`: a
/// `call_at` from a plain thread, or a delayed message to a mailbox with no actor attached,
/// may still wake an actor of any runtime).
pub(crate) fn process_timers_pending_until() -> Option<Instant> {
    PROCESS_TIMERS.timers.latest_pending()
}

impl ProcessTimers {
    fn ensure_started(&'static self) {
        // Acquire: pairs with the release store below; nothing else is published by it, but it
        // keeps the fast path a plain load.
        if self.started.load(Ordering::Acquire) {
            return;
        }
        let _start = self.start.lock();
        // Relaxed: the `start` lock orders this with the store below.
        if self.started.load(Ordering::Relaxed) {
            return;
        }
        std::thread::Builder::new()
            .name("threadlet-timer".into())
            .spawn(move || self.run())
            .unwrap_or_else(|e| panic!("threadlet: call_at cannot start its timer thread: {e}"));
        self.started.store(true, Ordering::Release);
    }

    /// The thread's body: fire what is due, then sleep until the next deadline or a kick.
    fn run(&self) {
        let _abort = AbortOnUnwind::new(
            "the process-wide timer thread (threadlet-timer)",
            "no timer would fire again",
        );
        loop {
            let next = self.timers.fire_due(Instant::now());
            let mut kicked = self.kicked.lock();
            if !*kicked {
                match next {
                    Some(deadline) => {
                        self.cv.wait_until(&mut kicked, deadline);
                    }
                    None => self.cv.wait(&mut kicked),
                }
            }
            *kicked = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    thread_local! {
        /// Set by a test to make `cancel` linger between its two steps.
        static WIDEN: Cell<bool> = const { Cell::new(false) };
    }

    /// Called by `cancel` between counting and flipping: in a test that asks for it, spins a
    /// few microseconds there, so that a concurrent `fire_due` lands in the gap.
    pub(super) fn widen_cancel_window() {
        if WIDEN.with(Cell::get) {
            for _ in 0..2_000 {
                std::hint::spin_loop();
            }
        }
    }

    fn counter_action(c: &Arc<AtomicUsize>, add: usize) -> TimerAction {
        let c = c.clone();
        TimerAction::Call(Box::new(move || {
            c.fetch_add(add, Ordering::SeqCst);
        }))
    }

    struct PanicOnDrop(Arc<AtomicUsize>);
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
            panic!("a timer callback's capture panics when dropped");
        }
    }

    /// A callback that is never run and panics when dropped.
    fn panicking_drop_action(drops: &Arc<AtomicUsize>) -> TimerAction {
        let p = PanicOnDrop(drops.clone());
        TimerAction::Call(Box::new(move || {
            let _p = &p;
            unreachable!("never fired in these tests");
        }))
    }

    #[test]
    fn fires_in_deadline_order_and_never_early() {
        let t = Timers::default();
        let order = Arc::new(Mutex::new(Vec::new()));
        let base = Instant::now();
        for (i, ms) in [30u64, 10, 20, 10].into_iter().enumerate() {
            let order = order.clone();
            t.add(
                base + Duration::from_millis(ms),
                TimerAction::Call(Box::new(move || order.lock().push(i))),
            );
        }
        assert_eq!(t.fire_due(base), Some(base + Duration::from_millis(10)));
        assert!(order.lock().is_empty());
        assert_eq!(
            t.fire_due(base + Duration::from_millis(20)),
            Some(base + Duration::from_millis(30))
        );
        assert_eq!(*order.lock(), vec![1, 3, 2]);
        assert_eq!(t.fire_due(base + Duration::from_secs(1)), None);
        assert_eq!(*order.lock(), vec![1, 3, 2, 0]);
    }

    #[test]
    fn cancelled_timers_do_nothing_and_get_compacted() {
        let t = Timers::default();
        let hits = Arc::new(AtomicUsize::new(0));
        let base = Instant::now() + Duration::from_secs(3600);
        let handles: Vec<_> = (0..3 * COMPACT_MIN_LEN)
            .map(|_| t.add(base, counter_action(&hits, 1)).0)
            .collect();
        for h in &handles[1..] {
            assert!(!h.cancel(&t));
        }
        t.add(base, counter_action(&hits, 100));
        assert!(
            t.len() <= 2,
            "compacted to the live entries, got {}",
            t.len()
        );
        assert_eq!(
            t.cancelled_count(),
            0,
            "compaction uncounted what it removed"
        );
        t.fire_due(base);
        assert_eq!(hits.load(Ordering::SeqCst), 101);
        assert!(handles[0].cancel(&t), "it had fired");
        assert_eq!(t.cancelled_count(), 0);
    }

    /// Step 2: a cancel racing with the pop of its entry never makes the count wrap, and the
    /// count returns to zero once the heap is empty.
    #[test]
    fn cancelling_while_firing_keeps_the_count_sane() {
        const ROUNDS: usize = 5_000;
        let t = Arc::new(Timers::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (t2, stop2) = (t.clone(), stop.clone());
        let firer = std::thread::spawn(move || {
            let mut worst = 0;
            while !stop2.load(Ordering::SeqCst) {
                t2.fire_due(Instant::now());
                worst = worst.max(t2.cancelled_count());
            }
            worst
        });
        let hits = Arc::new(AtomicUsize::new(0));
        let mut cancelled = 0;
        WIDEN.with(|w| w.set(true));
        for _ in 0..ROUNDS {
            // Due at once: the firer pops it while we cancel it.
            let (h, _) = t.add(Instant::now(), counter_action(&hits, 1));
            if !h.cancel(&t) {
                cancelled += 1;
            }
            // Every cancelled entry counts at most once, so the count stays small.
            assert!(t.cancelled_count() <= ROUNDS, "count wrapped");
        }
        WIDEN.with(|w| w.set(false));
        stop.store(true, Ordering::SeqCst);
        let worst = firer.join().unwrap();
        assert!(worst <= ROUNDS, "the firer saw the count wrap: {worst}");
        t.fire_due(Instant::now() + Duration::from_secs(1));
        assert_eq!(t.len(), 0);
        assert_eq!(t.cancelled_count(), 0, "every count was taken back");
        assert_eq!(hits.load(Ordering::SeqCst) + cancelled, ROUNDS);
    }

    /// Step 6: a closed heap drops what it held, unrun, and takes nothing more: the action
    /// comes back to the caller, who arms it where a thread still fires timers.
    #[test]
    fn a_closed_heap_hands_new_entries_back() {
        let t = Timers::default();
        let hits = Arc::new(AtomicUsize::new(0));
        let base = Instant::now();
        let (pending, _) = t.add(base, counter_action(&hits, 1));
        t.close();
        assert_eq!(t.len(), 0);
        assert!(pending.cancel(&t), "cleared: no longer pending");
        let refused = t.add_unless_closed(base, counter_action(&hits, 10));
        let Err(TimerAction::Call(f)) = refused else {
            panic!("a closed heap took an entry");
        };
        assert_eq!(t.len(), 0);
        assert_eq!(t.fire_due(base), None);
        assert_eq!(hits.load(Ordering::SeqCst), 0, "nothing ran in the heap");
        f();
        assert_eq!(
            hits.load(Ordering::SeqCst),
            10,
            "the action came back whole"
        );
    }

    /// Step 5: a callback that panics, or whose destructor panics when it is dropped unrun
    /// (cancelled, compacted, cleared), does not stop the firing.
    #[test]
    fn panics_in_callbacks_and_their_destructors_are_contained() {
        let t = Timers::default();
        let hits = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let base = Instant::now();
        t.add(
            base,
            TimerAction::Call(Box::new(|| panic!("callback panics"))),
        );
        t.add(base, counter_action(&hits, 1));
        // Cancelled, then popped by `fire_due`.
        let (h, _) = t.add(base, panicking_drop_action(&drops));
        h.cancel(&t);
        assert_eq!(t.fire_due(base), None);
        assert_eq!(
            hits.load(Ordering::SeqCst),
            1,
            "the next callback still ran"
        );
        assert_eq!(drops.load(Ordering::SeqCst), 1);

        // Cancelled, then compacted away.
        let later = base + Duration::from_secs(3600);
        let handles: Vec<_> = (0..COMPACT_MIN_LEN)
            .map(|_| t.add(later, panicking_drop_action(&drops)).0)
            .collect();
        for h in &handles {
            h.cancel(&t);
        }
        t.add(later, counter_action(&hits, 1));
        assert_eq!(t.len(), 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1 + COMPACT_MIN_LEN);

        // Pending at shutdown, then cleared; a later cancel counts nothing.
        let (h, _) = t.add(later, panicking_drop_action(&drops));
        t.clear();
        assert_eq!(drops.load(Ordering::SeqCst), 2 + COMPACT_MIN_LEN);
        assert_eq!(t.len(), 0);
        assert!(h.cancel(&t), "a cleared timer is no longer pending");
        assert_eq!(t.cancelled_count(), 0);
        assert_eq!(hits.load(Ordering::SeqCst), 1, "cleared timers never run");
    }

    /// A runtime thread that unwinds anyway (a bug in the runtime) takes the process down with
    /// a message, rather than dying silently. Checked in a child process, which must abort.
    #[test]
    fn a_timer_thread_that_unwinds_aborts_the_process() {
        const CHILD: &str = "THREADLET_ABORT_ON_UNWIND_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let t = std::thread::spawn(|| {
                let _abort = AbortOnUnwind::new("a test timer thread", "a test");
                panic!("a bug in the runtime");
            });
            let _ = t.join();
            std::process::exit(0); // not reached: the guard aborts
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "timer::tests::a_timer_thread_that_unwinds_aborts_the_process",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{stderr}");
        assert!(
            stderr.contains("threadlet: a test timer thread panicked outside any user code"),
            "{stderr}"
        );
        // A guard on a thread that does not unwind does nothing.
        drop(AbortOnUnwind::new("a thread that returns", "a test"));
    }
}
