//! The runtime's timers: one min-heap of deadlines per runtime, fired by the monitor thread.
//!
//! A sleeping or timed-out-waiting actor holds no worker and no OS thread: it is parked, and a
//! heap entry will wake it. Entries are cancelled lazily: [`TimerHandle::cancel`] flips the
//! entry's state, the heap keeps it until its deadline (or until a compaction when cancelled
//! entries outnumber live ones), and a cancelled entry does nothing when popped. That keeps
//! adding and cancelling at one lock each, O(log n), and the heap at most about twice the number
//! of pending timers.
//!
//! Firing order: entries with equal deadlines fire in the order they were added. An entry
//! never fires before its deadline: the monitor pops only entries whose deadline is not after
//! the `Instant` it read.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

use crate::context::Waiter;

/// Heaps smaller than this are never compacted: rebuilding costs more than it saves.
const COMPACT_MIN_LEN: usize = 1024;

const PENDING: u8 = 0;
const FIRED: u8 = 1;
const CANCELLED: u8 = 2;

/// What a timer does when its deadline passes.
pub(crate) enum TimerAction {
    /// Wake a parked actor or thread (`sleep`, `recv_timeout`).
    Wake(Waiter),
    /// Run a closure on the monitor thread (`send_after`); it must not block.
    Call(Box<dyn FnOnce() + Send>),
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
    /// Cancels the timer if it has not fired. Returns whether it had fired.
    pub(crate) fn cancel(&self, timers: &Timers) -> bool {
        match self
            .state
            .compare_exchange(PENDING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                timers.cancelled.fetch_add(1, Ordering::Relaxed);
                false
            }
            Err(_) => true,
        }
    }
}

/// The heap of one runtime's timers.
#[derive(Default)]
pub(crate) struct Timers {
    heap: Mutex<BinaryHeap<Entry>>,
    seq: AtomicU64,
    /// Cancelled entries still in the heap.
    cancelled: AtomicUsize,
}

impl Timers {
    /// Adds a timer. Returns its handle and whether it is now the earliest (the monitor must be
    /// told, since it may be sleeping past this deadline).
    pub(crate) fn add(&self, deadline: Instant, action: TimerAction) -> (TimerHandle, bool) {
        let state = Arc::new(AtomicU8::new(PENDING));
        let entry = Entry {
            deadline,
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            state: state.clone(),
            action,
        };
        let mut heap = self.heap.lock();
        let cancelled = self.cancelled.load(Ordering::Relaxed);
        if heap.len() >= COMPACT_MIN_LEN && cancelled * 2 > heap.len() {
            let before = heap.len();
            heap.retain(|e| e.state.load(Ordering::Acquire) == PENDING);
            self.cancelled
                .fetch_sub((before - heap.len()).min(cancelled), Ordering::Relaxed);
        }
        let earliest = heap.peek().is_none_or(|e| deadline < e.deadline);
        heap.push(entry);
        (TimerHandle { state }, earliest)
    }

    /// Fires every timer due at `now` (outside the lock) and returns the next deadline.
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
            match e
                .state
                .compare_exchange(PENDING, FIRED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => match e.action {
                    TimerAction::Wake(w) => w.wake(),
                    TimerAction::Call(f) => f(),
                },
                Err(_) => {
                    self.cancelled.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        next
    }

    /// Entries in the heap, cancelled ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.lock().len()
    }

    /// Drops every pending timer (shutdown).
    pub(crate) fn clear(&self) {
        let entries = std::mem::take(&mut *self.heap.lock());
        drop(entries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    fn counter_action(c: &Arc<AtomicUsize>, add: usize) -> TimerAction {
        let c = c.clone();
        TimerAction::Call(Box::new(move || {
            c.fetch_add(add, Ordering::SeqCst);
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
        t.fire_due(base);
        assert_eq!(hits.load(Ordering::SeqCst), 101);
        assert!(handles[0].cancel(&t), "it had fired");
    }
}
