//! [`TimerHandle`]: a message scheduled for later ([`Addr::send_after`](crate::Addr::send_after))
//! or for every period ([`Addr::send_interval`](crate::Addr::send_interval)), and its cancel.
//!
//! Both run on the timers of the receiving actor's runtime (`threadlet_runtime`'s
//! `call_at_for`): one heap entry per pending message, no thread of its own. The receiver's,
//! not the caller's: a delayed message lives as long as the actor it goes to may take it, as
//! Erlang's `send_after` to a pid does, so an actor of one runtime that schedules a message to
//! an actor of another runtime, and the first runtime shutting down before the deadline, does
//! not lose it. (A mailbox with no live actor attached, such as a supervised child's between
//! incarnations, has no runtime to name yet: its delayed messages wait on the process-wide
//! timer thread, which outlives every runtime, not on the caller's runtime, whose shutdown
//! would drop them. And a delayed message whose runtime's timers drop it unrun, because that
//! runtime shut down while the mailbox lived on elsewhere, handed to an actor of another
//! runtime, is armed again where the mailbox is then: `Delivery`.) The handle shares one small state with the timer closure, which holds
//! nothing else, so that a cancel lets go of the address (a counted one: while a timer is
//! pending, its actor does not end for want of addresses, as with a sender about to send):
//!
//! * `send_after`: the message itself and its address, in a slot. Whoever takes them out first
//!   wins: the timer (which sends the message) or `cancel` (which drops both at once and
//!   reports `true`).
//! * `send_interval`: a flag, and the address. Each tick checks the flag, takes the address out
//!   while it sends a new message, puts it back and arms the next tick; `cancel` raises the
//!   flag and drops the address (or leaves it to the tick that has it out, which drops it on
//!   seeing the flag), and the next tick does nothing more. The ticks also stop when a send
//!   fails (the actor has ended or closed its mailbox) or `make_msg` panics; a `cancel` then
//!   reports `false`. A tick dropped unrun by a runtime's shutdown is armed again where the
//!   mailbox is then, as a delayed message is (`Ticking`), unless it is dropped by the unwind
//!   of its own failed arming (`ARMING`).
//!
//! The heap entry of a cancelled timer stays until its deadline (the runtime's heap cancels
//! lazily), holding only the emptied state; a cancelled `send_after` cancels that entry too
//! (`call_at_for`'s `ArmedTimer`), so that it no longer counts as pending for a deadlock check.
//! (An interval's next tick is not cancelled: it counts until it comes, a period at most.)
//!
//! Timer callbacks run on the thread that fires the timers (the runtime's monitor), which must
//! never wait: a full bounded mailbox would stall every timer of the runtime. So they send with
//! `try_send`. A delayed message that finds the mailbox full goes back into its slot and is
//! tried again [`FULL_RETRY`] later (still cancellable); an interval tick that finds it full is
//! skipped, as tokio's `MissedTickBehavior::Skip` does. A capacity-0 mailbox, which has room
//! only for a message its owner waits for, takes a delayed message at the first try that finds
//! its owner waiting, in a receive or a select (`Addr::try_send_now`; a `try_send` is not taken
//! by a select, which may fire another branch, but a delayed message has no sender to mislead,
//! and stays queued for the next receive then).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use threadlet_runtime::__private::{ActorCell, ArmedTimer};

use crate::channel::TrySendError;
use crate::mailbox::Addr;

/// How long a delayed message that found its bounded mailbox full waits before the next try:
/// short enough not to add much latency, long enough not to spin the monitor.
const FULL_RETRY: Duration = Duration::from_millis(1);

/// What a [`TimerHandle`] can stop.
trait Cancel: Send + Sync {
    /// `true` if this call stopped something still pending.
    fn cancel(&self) -> bool;
}

/// A message waiting for its deadline (`send_after`), with the address it goes to: the timer's
/// closure holds only this, so that a cancel lets go of the address too (held until the
/// deadline, it kept an actor whose last other address was gone from ending). And the timer
/// armed for it last, which a cancel cancels too: a cancelled message's timer must not count
/// as pending for a deadlock check until its deadline (`ArmedTimer::cancel`).
struct Delayed<M> {
    msg: Mutex<Option<(Addr<M>, M)>>,
    timer: Mutex<Option<ArmedTimer>>,
}

impl<M> Delayed<M> {
    /// Keeps the timer just armed for the message (`deliver`). A cancel takes the message,
    /// then the timer; this stores the timer, then looks for the message, so that a cancel
    /// in between is not missed: one of the two cancels the timer.
    fn armed(&self, timer: ArmedTimer) {
        *self.timer.lock() = Some(timer);
        if self.msg.lock().is_none() {
            let cancelled = self.timer.lock().take();
            if let Some(timer) = cancelled {
                timer.cancel();
            }
        }
    }
}

impl<M: Send> Cancel for Delayed<M> {
    fn cancel(&self) -> bool {
        let taken = self.msg.lock().take();
        let pending = taken.is_some();
        // The timer before the message goes: dropping the address may wake its actor, whose
        // deadlock check must not find the timer still pending (nor miss its cancel if the
        // message's destructor panics).
        let timer = self.timer.lock().take();
        if let Some(timer) = timer {
            timer.cancel();
        }
        // After unlocking: a destructor may use the timer again, and the address may be the
        // mailbox's last.
        drop(taken);
        pending
    }
}

/// A running interval (`send_interval`): its flag, and the address its ticks send to, which a
/// cancel lets go of (as `Delayed`'s).
struct Interval<M> {
    stopped: AtomicBool,
    /// Taken by a tick while it sends, put back for the next unless the flag went up meanwhile.
    addr: Mutex<Option<Addr<M>>>,
}

impl<M: Send> Cancel for Interval<M> {
    fn cancel(&self) -> bool {
        // Relaxed: a tick reads the flag under `addr`'s lock, after this store's lock below
        // (the lock orders them) or before it (then this waits for the tick's send, which it
        // holds that lock across, or takes the address): once this returns, nothing is sent.
        let was_stopped = self.stopped.swap(true, Ordering::Relaxed);
        let addr = self.addr.lock().take();
        drop(addr); // after unlocking: it may be the mailbox's last address
        !was_stopped
    }
}

/// A scheduled message; see [`Addr::send_after`] and [`Addr::send_interval`]. Dropping the
/// handle does not cancel anything.
pub struct TimerHandle(Arc<dyn Cancel>);

impl TimerHandle {
    /// Stops it: a delayed message not sent yet is dropped now; an interval sends nothing more.
    /// Returns whether this call stopped something (`false` if the message was already sent,
    /// or the interval already stopped).
    pub fn cancel(&self) -> bool {
        self.0.cancel()
    }
}

impl std::fmt::Debug for TimerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerHandle").finish_non_exhaustive()
    }
}

/// `Addr::send_after`.
pub(crate) fn send_after<M: Send + 'static>(
    addr: &Addr<M>,
    delay: Duration,
    msg: M,
) -> TimerHandle {
    let delayed = Arc::new(Delayed {
        msg: Mutex::new(Some((addr.clone(), msg))),
        timer: Mutex::new(None),
    });
    // A delay too long to represent as an `Instant` never comes: drop the message now.
    let Some(deadline) = Instant::now().checked_add(delay) else {
        delayed.cancel();
        return TimerHandle(delayed);
    };
    deliver(addr.attached_actor(), delayed.clone(), deadline);
    TimerHandle(delayed)
}

/// Runs `f` at `deadline` on the timers of `receiver`'s runtime (the receiving actor's, from
/// `Addr::attached_actor`; module docs), or on the process-wide timer thread when there is none.
fn call_at_receiver(
    receiver: Option<Arc<ActorCell>>,
    deadline: Instant,
    f: impl FnOnce() + Send + 'static,
) -> ArmedTimer {
    /// Puts back what `ARMING` was (the arming may nest: a drop during it may arm again).
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = ARMING.try_with(|a| a.set(self.0));
        }
    }
    let _restore = Restore(ARMING.try_with(|a| a.replace(true)).unwrap_or(false));
    threadlet_runtime::__private::call_at_for(receiver.as_deref(), deadline, f)
}

thread_local! {
    /// Set while this thread arms a timer (`call_at_receiver`): a guard dropped by a panic
    /// then is dropped by the failed arming itself, which arming again would repeat.
    static ARMING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a guard dropped unrun now is dropped by the unwind of a failed arming (not by an
/// unrelated unwind, such as a runtime dropped by a thread that panicked).
fn arming_failed() -> bool {
    std::thread::panicking() && ARMING.try_with(std::cell::Cell::get).unwrap_or(true)
}

/// Arms the delivery of a delayed message at `deadline` (again, if its mailbox was full), on
/// the timers of `receiver`'s runtime.
///
/// The slot stays locked across the try, so that a `cancel` meanwhile waits for its outcome: a
/// message sent is gone from the slot (`cancel` reports `false`), and one refused for a full
/// mailbox is back in it (`cancel` takes it and reports `true`), never the other way round.
fn deliver<M: Send + 'static>(
    receiver: Option<Arc<ActorCell>>,
    slot: Arc<Delayed<M>>,
    deadline: Instant,
) {
    let kept = slot.clone();
    let mut delivery = Delivery {
        slot: Some(slot),
        deadline,
    };
    let timer = call_at_receiver(receiver, deadline, move || {
        let slot = delivery.slot.take().expect("a delivery runs once");
        let mut held = slot.msg.lock();
        let Some((addr, msg)) = held.take() else {
            return; // cancelled
        };
        match addr.try_send_now(msg, true) {
            // The address after unlocking: it may be the mailbox's last. The timer that ran
            // goes too (it holds a weak reference to its runtime's memory).
            Ok(()) => {
                drop(held);
                drop(slot.timer.lock().take());
                drop(addr);
            }
            // The actor has ended: there is nobody to hand the message back to. Dropped after
            // unlocking: its destructor may use the timer again.
            Err(TrySendError::Disconnected(msg)) => {
                drop(held);
                drop(slot.timer.lock().take());
                drop((addr, msg));
            }
            Err(TrySendError::Full(msg)) => {
                let receiver = addr.attached_actor();
                *held = Some((addr, msg));
                drop(held);
                deliver(receiver, slot, Instant::now() + FULL_RETRY);
            }
        }
    });
    kept.armed(timer);
}

/// A delayed message's delivery, as its timer holds it. Dropped unrun (the runtime whose timers
/// held it shut down before the deadline: the mailbox was handed on to an actor of another
/// runtime, or another incarnation attached elsewhere), it arms the delivery again for the same
/// deadline, where the mailbox's actor now is, or on the process-wide timer thread if none is
/// attached: the message lives as long as a receiver may take it. A message whose mailbox is
/// closed goes now instead.
struct Delivery<M: Send + 'static> {
    /// Taken by the timer when it runs.
    slot: Option<Arc<Delayed<M>>>,
    deadline: Instant,
}

impl<M: Send + 'static> Drop for Delivery<M> {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else {
            return; // it ran
        };
        if arming_failed() {
            // Dropped by the unwind of a failed arming (the process-wide timer thread could
            // not start): arming again would fail again, inside this unwind. The message goes,
            // as it did before the guard existed.
            return;
        }
        let mut held = slot.msg.lock();
        let receiver = match held.as_ref() {
            None => return, // cancelled
            Some((addr, _)) if addr.is_closed() => {
                let gone = held.take();
                drop(held);
                drop(gone); // after unlocking: its destructor may use the timer again
                return;
            }
            Some((addr, _)) => addr.attached_actor(),
        };
        drop(held);
        deliver(receiver, slot, self.deadline);
    }
}

/// `Addr::send_interval`.
pub(crate) fn send_interval<M, F>(addr: &Addr<M>, period: Duration, make_msg: F) -> TimerHandle
where
    M: Send + 'static,
    F: FnMut() -> M + Send + 'static,
{
    assert!(
        !period.is_zero(),
        "send_interval: the period must not be zero"
    );
    let armed = Instant::now().checked_add(period);
    let interval = Arc::new(Interval {
        stopped: AtomicBool::new(false),
        addr: Mutex::new(armed.map(|_| addr.clone())),
    });
    if let Some(first) = armed {
        tick(
            addr.attached_actor(),
            interval.clone(),
            first,
            period,
            make_msg,
        );
    }
    TimerHandle(interval)
}

/// Arms the tick due at `deadline`, on the timers of `receiver`'s runtime; each tick arms the
/// next.
fn tick<M, F>(
    receiver: Option<Arc<ActorCell>>,
    interval: Arc<Interval<M>>,
    deadline: Instant,
    period: Duration,
    make_msg: F,
) where
    M: Send + 'static,
    F: FnMut() -> M + Send + 'static,
{
    let mut ticking = Ticking {
        due: Some((interval, make_msg)),
        deadline,
        period,
    };
    // Not kept: a cancelled interval's next tick stays pending, for a deadlock check too,
    // until it comes (a period at most), and then finds the flag and does nothing.
    let _next_tick = call_at_receiver(receiver, deadline, move || {
        let (interval, mut make_msg) = ticking.due.take().expect("a tick runs once");
        let (deadline, period) = (ticking.deadline, ticking.period);
        // Relaxed: see `Interval::cancel`.
        if interval.stopped.load(Ordering::Relaxed) {
            return; // cancelled
        }
        // Out of the lock while the message is made and sent (`make_msg` is user code, which
        // may cancel this very interval).
        let Some(addr) = interval.addr.lock().take() else {
            return; // cancelled
        };
        // A panic in `make_msg` stops the interval (reported by the timer's containment):
        // ended, so that a later `cancel` reports nothing pending.
        let msg = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut make_msg)) {
            Ok(msg) => msg,
            Err(panic) => {
                interval.end(addr);
                std::panic::resume_unwind(panic);
            }
        };
        // Sent under the slot's lock, which a cancel takes after raising the flag: a cancel
        // that has returned stopped this send (a `make_msg` that ran meanwhile made a message
        // for nothing), and one that comes during it waits for it.
        let sent = {
            let _slot = interval.addr.lock();
            if interval.stopped.load(Ordering::Relaxed) {
                None
            } else {
                Some(addr.try_send_now(msg, true))
            }
        };
        // A message handed back drops here, after unlocking (its destructor is user code).
        match sent {
            None => return, // cancelled: `addr` and the message go with this closure's frame
            Some(Err(TrySendError::Disconnected(_))) => {
                interval.end(addr); // the actor is gone
                return;
            }
            // (A full bounded mailbox skips this tick.)
            Some(_) => {}
        }
        // Fixed rate: the next tick is one period after this one was due, not after it ran.
        let Some(next) = deadline.checked_add(period) else {
            return;
        };
        let receiver = addr.attached_actor();
        {
            let mut slot = interval.addr.lock();
            // Cancelled while the address was out: it goes now, with no next tick.
            if interval.stopped.load(Ordering::Relaxed) {
                drop(slot);
                drop(addr);
                return;
            }
            *slot = Some(addr);
        }
        tick(receiver, interval, next, period, make_msg);
    });
}

impl<M: Send> Interval<M> {
    /// Ends the interval for want of a receiver (its mailbox closed): no tick follows, and a
    /// later `cancel` reports that nothing was pending. `addr` is the address a tick took out,
    /// dropped here after the lock (it may be the mailbox's last).
    fn end(&self, addr: Addr<M>) {
        // Relaxed: as in `cancel`, which reads it back with a read-modify-write.
        self.stopped.store(true, Ordering::Relaxed);
        drop(addr);
    }
}

/// An interval's next tick, as its timer holds it; the interval's counterpart of `Delivery`.
/// Dropped unrun (the runtime whose timers held it shut down before the deadline while the
/// mailbox lived on, handed to an actor of another runtime), it arms the tick again for the
/// same deadline where the mailbox's actor now is, or on the process-wide timer thread if none
/// is attached: an interval ticks until it is cancelled or its mailbox is closed, whichever
/// runtime's timers it was on. One whose mailbox is closed ends.
struct Ticking<M: Send + 'static, F: FnMut() -> M + Send + 'static> {
    /// Taken by the timer when it runs.
    due: Option<(Arc<Interval<M>>, F)>,
    deadline: Instant,
    period: Duration,
}

impl<M: Send + 'static, F: FnMut() -> M + Send + 'static> Drop for Ticking<M, F> {
    fn drop(&mut self) {
        let Some((interval, make_msg)) = self.due.take() else {
            return; // it ran
        };
        if arming_failed() {
            // As `Delivery`'s: arming again could fail again, inside this unwind.
            return;
        }
        let mut slot = interval.addr.lock();
        let receiver = match slot.as_ref() {
            None => return, // cancelled
            Some(addr) if addr.is_closed() => {
                let addr = slot.take().expect("just seen");
                drop(slot);
                interval.end(addr);
                return;
            }
            Some(addr) => addr.attached_actor(),
        };
        drop(slot);
        tick(receiver, interval, self.deadline, self.period, make_msg);
    }
}
