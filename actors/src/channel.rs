//! Channels between actors (and plain threads): rendezvous, bounded and unbounded, many
//! senders and many receivers.
//!
//! A blocked send or receive suspends the calling actor, never its worker thread; called from
//! a plain thread, it blocks that thread. Semantics follow `crossbeam-channel`:
//!
//! * [`bounded(0)`](bounded) is a rendezvous channel, as Stackless channels are: `send` returns
//!   only once a receiver has taken the value, and `recv` only once a sender has given one.
//! * [`bounded(n)`](bounded) holds up to `n` values; `send` waits while it is full.
//! * [`unbounded()`] never makes `send` wait.
//! * When every `Sender` is gone, receivers drain what is left, then get [`RecvError`]; when
//!   every `Receiver` is gone, sends fail and hand their value back.
//! * [`Sender::close`] or [`Receiver::close`] closes the channel (Go's `close`, tokio's
//!   `Receiver::close`): later sends fail and hand their value back, senders waiting for room
//!   get theirs back at once, and receivers drain what was sent before, then get [`RecvError`].
//!
//! ```
//! use threadlet::channel;
//!
//! let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
//! let (tx, rx) = channel::bounded(2);
//! let producer = rt.spawn(move || {
//!     for i in 1..=5u32 {
//!         tx.send(i).unwrap(); // suspends while two values wait
//!     }
//! });
//! // A plain thread can take part too: this one blocks in `recv`.
//! assert_eq!(rx.iter().sum::<u32>(), 15);
//! producer.join().unwrap();
//! ```
//!
//! # State and protocol
//!
//! One lock guards the channel: the buffer, the counts of senders and receivers, and two FIFO
//! lists of parked operations. A parked operation is a `Slot`: the waiter to wake plus a cell
//! holding its value (a sender's value waiting to be taken, or the value handed to a receiver).
//! Invariants, kept under the lock:
//!
//! 1. receivers wait only while the buffer is empty, so `send` hands its value straight to the
//!    first waiting receiver when there is one;
//! 2. senders wait only while the buffer is full (always, for rendezvous), so `recv` that frees
//!    a place moves the first waiting sender's value in (or, for rendezvous, takes it directly);
//! 3. a slot is completed (value delivered, value taken, or disconnected) exactly once, under
//!    the lock, by whoever removes it from its list.
//!
//! Every operation runs these steps:
//!
//! 1. under the lock: do what can be done now, completing and removing from their lists the
//!    slots of the peers it serves (their `Arc`s move out with it); or, to wait, push its own
//!    slot;
//! 2. release the lock, then wake the peers it completed in 1. Nothing runs under the lock but
//!    the channel's own bookkeeping: a wake may run arbitrary code (during shutdown it can drop
//!    other actors' closures, which may own a `Sender` of this very channel), and so may a
//!    value's destructor, so both happen after unlocking; values a channel drops (the buffer
//!    when the last `Receiver` goes, a cancelled sender's value) are dropped unlocked too;
//! 3. a waiting operation parks, arming a cancel guard first; woken, it reads its slot: if
//!    completed, it disarms the guard and returns; if not (a spurious wakeup), it parks again.
//!
//! A parked operation that gives up (a timeout, or `park` failing because shutdown is
//! cancelling the actor) leaves its list under the lock and then keeps whatever a racing peer
//! completed meanwhile: a receiver returns a value handed over, a sender whose value was taken
//! reports success.
//!
//! # Cancellation by unwinding
//!
//! Shutdown force-unwinds a parked actor from *inside* `park`: no code after `park` runs. So the
//! slot is withdrawn by the guard armed in step 3, whose `Drop` runs during the unwind. Under
//! the lock it removes the slot from its list if it is still there (no later operation can hand
//! a value to, or take one from, a dead slot, and the slot's waiter, which keeps the actor and
//! its whole runtime allocated, is released), then:
//!
//! * a sender whose value was still waiting drops it with the unwinding actor: its `send` never
//!   returned, so the value was never accepted and is never delivered later;
//! * a receiver to which a sender had already handed a value (its slot completed just before
//!   the unwind) must not lose it, because that `send` returned `Ok`: the guard gives it to the
//!   first waiting receiver if there is one, or else puts it back at the *front* of the buffer
//!   (it was sent before anything buffered there), where the next `recv` takes it. The buffer
//!   may then hold one value more than its capacity; invariant 2 still holds, because a `recv`
//!   moves a parked sender's value in only once the buffer is below its capacity.
//!
//! So a value is delivered exactly once, or handed back to its sender, or dropped with a sender
//! that never returned, or dropped with the channel when the last `Receiver` goes.
//!
//! # Values in hand
//!
//! A value handed to a parked receiver (invariant 1) is *in hand* until that receiver takes it
//! from its slot. A receiver killed in between puts it back (above), so the channel must not
//! tell anyone it is drained while a value is in hand, or the value would come back after a
//! `recv` had returned `RecvError`, and a consumer that stopped there would drop it unreceived.
//!
//! 1. A send that hands its value to a parked receiver counts it in hand (`Chan::in_hand`),
//!    under the lock.
//! 2. Receivers are told the channel is disconnected (a `recv`'s `RecvError`, `try_recv`'s
//!    `Disconnected`, a parked receiver completed so) only once its senders are gone or it is
//!    closed *and* no value is in hand. Until then a receive finds it empty, and one that may
//!    wait parks.
//! 3. The receiver takes its value from its slot, without the channel's lock, and lowers the
//!    count; if it took the last value in hand, step 4 (its side).
//! 4. Whoever would make receivers wait for a value in hand, under the lock (the disconnect,
//!    for the receivers already waiting; a receive or a select's look, for itself), first
//!    raises `Chan::held`, then reads the count again; the receiver of step 3 lowers the
//!    count, then reads the flag; each side has a `SeqCst` fence between its write and its
//!    read. Of the two fences one comes first in their single total order, so at least one
//!    side sees the other's write: the waiting side sees the count at 0 (and takes the
//!    channel for drained after all), or the taker sees the flag (and tells the waiting
//!    receivers and selects, under the lock, if the channel is drained by then: nothing
//!    buffered, nothing in hand; telling twice is harmless). Where nobody would wait (the
//!    common case: a reply's one receiver takes it), the flag stays down and the taker pays
//!    only its fence.
//! 5. A killed receiver's value goes to the next waiting receiver (still in hand) or to the
//!    front of the buffer (out of hand: the count is lowered under the lock). Into the buffer
//!    only when no receiver waits (invariant 1), and a buffered value is received before any
//!    `Disconnected`.
//!
//! So a receiver that waits because a value is in hand is woken by that value (step 5) or by
//! the end of its being in hand (steps 3 and 4): none waits for good.
//!
//! # Select
//!
//! A [`select!`](crate::select!) waiting on a channel does not park a slot: it *watches*. Two
//! more lists under the lock hold the waiters of selects that want to hear when a receive, or
//! a send, may have become possible. Every step that can make one possible takes the whole
//! matching list and wakes it after unlocking: a value entering the buffer (or requeued by a
//! cancelled receiver), a sender parking, and the last `Sender` going make a receive possible;
//! room freed by a receive, a receiver parking, and the last `Receiver` going make a send
//! possible; `close` makes both possible. A woken select unwatches everything and tries each
//! of its operations again with `try_recv`/`try_send` (without their safe point), so a value
//! is only ever taken by the branch that fires, and it keeps nothing in the channel's lists
//! while it runs. The select module's docs give its side of the protocol.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use threadlet_runtime::sync::{AtomicBool, AtomicUsize, Mutex, fence};
use threadlet_runtime::{ActorId, Wait, Waiter, checkpoint, park_on, park_on_until};

use crate::on_plain_thread;
use crate::tagged::TaggedArc;

/// The error of a send whose receivers are all gone (or whose actor has ended, or, for a
/// handler actor sending to its own full mailbox, that no room could ever come for); holds the
/// value.
///
/// ```
/// use threadlet::channel::{self, SendError};
///
/// let (tx, rx) = channel::unbounded();
/// drop(rx);
/// let err = tx.send("lost").unwrap_err();
/// assert_eq!(err, SendError("lost"));
/// assert_eq!(err.to_string(), "sending on a closed channel, to an ended actor, or to a handler actor's own full mailbox");
/// ```
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

impl<T> SendError<T> {
    /// The value that was not sent.
    ///
    /// ```
    /// let (tx, rx) = threadlet::channel::bounded(1);
    /// drop(rx);
    /// let v = vec![1, 2, 3];
    /// assert_eq!(tx.send(v).unwrap_err().into_inner(), [1, 2, 3]); // nothing is lost
    /// ```
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "sending on a closed channel, to an ended actor, or to a handler actor's own full \
             mailbox",
        )
    }
}

impl<T> std::error::Error for SendError<T> {}

/// The error of a non-blocking send.
///
/// ```
/// use threadlet::channel::{self, TrySendError};
///
/// let (tx, rx) = channel::bounded(1);
/// assert_eq!(tx.try_send(1), Ok(()));
/// assert_eq!(tx.try_send(2), Err(TrySendError::Full(2)));
/// drop(rx);
/// assert_eq!(tx.try_send(3), Err(TrySendError::Disconnected(3)));
/// ```
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// The channel is full (or, for rendezvous, no receiver waits).
    Full(T),
    /// Every receiver is gone.
    Disconnected(T),
}

impl<T> TrySendError<T> {
    /// The value that was not sent.
    ///
    /// ```
    /// let (tx, _rx) = threadlet::channel::bounded(0); // rendezvous, and no receiver waits
    /// let err = tx.try_send(String::from("hi")).unwrap_err();
    /// assert_eq!(err.into_inner(), "hi");
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Disconnected(v) => v,
        }
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full channel"),
            TrySendError::Disconnected(_) => f.write_str("sending on a closed channel"),
        }
    }
}

impl<T> std::error::Error for TrySendError<T> {}

/// The error of a send with a timeout (a bounded mailbox's [`Addr::send_timeout`]).
///
/// [`Addr::send_timeout`]: crate::Addr::send_timeout
///
/// ```
/// use std::time::Duration;
/// use threadlet::channel::SendTimeoutError;
///
/// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
/// let (addr, h) = threadlet::ActorBuilder::new()
///     .mailbox_capacity(1)
///     .spawn_actor_on(&rt, |mb: threadlet::Mailbox<u8>| mb.close())
///     .unwrap();
/// h.join().unwrap();
/// let err = addr.send_timeout(7, Duration::from_millis(1)).unwrap_err();
/// assert_eq!(err, SendTimeoutError::Disconnected(7));
/// assert_eq!(err.into_inner(), 7);
/// ```
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendTimeoutError<T> {
    /// No room came before the deadline (or, for a handler actor sending to its own full
    /// mailbox, could come: it is refused at once).
    Timeout(T),
    /// The receiver is gone or closed.
    Disconnected(T),
}

impl<T> SendTimeoutError<T> {
    /// The value that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            SendTimeoutError::Timeout(v) | SendTimeoutError::Disconnected(v) => v,
        }
    }
}

impl<T> fmt::Debug for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("Timeout(..)"),
            SendTimeoutError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("no room to send within the timeout"),
            SendTimeoutError::Disconnected(_) => {
                f.write_str("sending on a closed channel or to an ended actor")
            }
        }
    }
}

impl<T> std::error::Error for SendTimeoutError<T> {}

/// The error of a receive on a channel that is empty and whose senders are all gone.
///
/// ```
/// use threadlet::channel::{self, RecvError};
///
/// let (tx, rx) = channel::unbounded();
/// tx.send(1).unwrap();
/// drop(tx);
/// assert_eq!(rx.recv(), Ok(1)); // what was sent is still delivered
/// assert_eq!(rx.recv(), Err(RecvError));
/// ```
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on an empty and closed channel")
    }
}

impl std::error::Error for RecvError {}

/// The error of a receive with a timeout or deadline.
///
/// ```
/// use std::time::Duration;
/// use threadlet::channel::{self, RecvTimeoutError};
///
/// let (tx, rx) = channel::unbounded::<u8>();
/// assert_eq!(rx.recv_timeout(Duration::from_millis(1)), Err(RecvTimeoutError::Timeout));
/// drop(tx);
/// assert_eq!(rx.recv_timeout(Duration::from_millis(1)), Err(RecvTimeoutError::Disconnected));
/// ```
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RecvTimeoutError {
    /// The deadline passed with nothing to take.
    Timeout,
    /// Nothing to take, ever: every sender (or every address) is gone.
    Disconnected,
}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => f.write_str("timed out waiting on a channel"),
            RecvTimeoutError::Disconnected => {
                f.write_str("receiving on an empty and closed channel")
            }
        }
    }
}

impl std::error::Error for RecvTimeoutError {}

/// The error of a non-blocking receive.
///
/// ```
/// use threadlet::channel::{self, TryRecvError};
///
/// let (tx, rx) = channel::unbounded::<u8>();
/// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
/// drop(tx);
/// assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
/// ```
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum TryRecvError {
    /// Nothing to take now.
    Empty,
    /// Nothing to take, ever: every sender is gone.
    Disconnected,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Disconnected => f.write_str("receiving on an empty and closed channel"),
        }
    }
}

impl std::error::Error for TryRecvError {}

/// What a parked operation's cell holds (the mailbox's waiting senders use it too).
pub(crate) enum Cell<T> {
    /// Parked: a sender's value not yet taken, or `None` for a receiver.
    Waiting(Option<T>),
    /// Completed: the value handed to a receiver, or `None` for a sender whose value was taken.
    Done(Option<T>),
    /// The other side went away; a sender gets its value back.
    Disconnected(Option<T>),
}

/// One parked operation (see the module docs).
pub(crate) struct Slot<T> {
    pub(crate) waiter: Waiter,
    pub(crate) cell: Mutex<Cell<T>>,
}

impl<T> Slot<T> {
    pub(crate) fn new(value: Option<T>) -> Arc<Slot<T>> {
        Arc::new(Slot {
            waiter: Waiter::current(),
            cell: Mutex::new(Cell::Waiting(value)),
        })
    }

    /// Completes the slot with `value`, returning what it held; the caller holds the channel
    /// lock and wakes `waiter` after releasing it.
    pub(crate) fn complete(&self, to: fn(Option<T>) -> Cell<T>, value: Option<T>) -> Option<T> {
        let mut old = None;
        self.complete_with(|held| {
            old = held;
            to(value)
        });
        old
    }

    /// Completes the slot with what `f` makes of the value it held, under the slot's lock.
    pub(crate) fn complete_with(&self, f: impl FnOnce(Option<T>) -> Cell<T>) {
        let mut cell = self.cell.lock();
        let Cell::Waiting(held) = std::mem::replace(&mut *cell, Cell::Waiting(None)) else {
            unreachable!("a channel slot is completed once");
        };
        *cell = f(held);
    }
}

/// What an operation must wake once it has released the channel lock: the peer whose slot it
/// completed, and the selects watching for what it made possible (see "Select" in the module
/// docs).
struct Woken<T> {
    slot: Option<Arc<Slot<T>>>,
    watchers: Vec<Waiter>,
}

impl<T> Woken<T> {
    const NONE: Woken<T> = Woken {
        slot: None,
        watchers: Vec::new(),
    };

    fn slot(slot: Arc<Slot<T>>) -> Woken<T> {
        Woken {
            slot: Some(slot),
            watchers: Vec::new(),
        }
    }

    fn watchers(list: &mut Vec<Waiter>) -> Woken<T> {
        Woken {
            slot: None,
            // Taking an empty list allocates nothing.
            watchers: std::mem::take(list),
        }
    }

    /// Call it after releasing the channel lock.
    fn wake(self) {
        if let Some(s) = self.slot {
            s.waiter.wake();
        }
        for w in self.watchers {
            w.wake_by_value();
        }
    }
}

/// Wakes the waiters of slots completed under the channel lock; call it after releasing it.
fn wake_all<T>(slots: impl IntoIterator<Item = Arc<Slot<T>>>) {
    for s in slots {
        s.waiter.wake();
    }
}

/// The cancel guard of a parked operation (step 3 of the protocol; see "Cancellation by
/// unwinding" in the module docs). Armed only once the caller has pushed its slot and is about
/// to park; every path that returns normally disarms it.
struct Parked<'a, T> {
    chan: &'a Chan<T>,
    slot: &'a Arc<Slot<T>>,
    /// Whether the slot is in `waiting_senders` (else `waiting_receivers`).
    sender: bool,
}

impl<T> Parked<'_, T> {
    /// Leaves the waiting list (if still on it) under the channel lock and returns the slot's
    /// final state: still `Waiting` if nobody completed it. With `requeue`, a value already
    /// handed to this receiver goes to the next waiting receiver or back to the front of the
    /// buffer instead of being returned. Wakes and drops happen after the lock is released.
    fn leave(&self, requeue: bool) -> Cell<T> {
        let mut woken = Woken::NONE;
        let (cell, removed) = {
            let mut st = self.chan.state.lock();
            let list = if self.sender {
                &mut st.waiting_senders
            } else {
                &mut st.waiting_receivers
            };
            let removed = list
                .iter()
                .position(|s| Arc::ptr_eq(s, self.slot))
                .and_then(|i| list.remove(i));
            // Off the list, nobody else can complete the slot: its state is final.
            let cell = std::mem::replace(&mut *self.slot.cell.lock(), Cell::Done(None));
            let cell = match cell {
                Cell::Done(Some(v)) if requeue => {
                    if let Some(r) = st.waiting_receivers.pop_front() {
                        // Still in hand, the next receiver's now.
                        r.complete(Cell::Done, Some(v));
                        woken = Woken::slot(r);
                    } else {
                        // Out of hand, into the buffer (step 5 of "Values in hand"): no
                        // receiver waits, so none waits to be told the channel is drained.
                        st.buffer.push_front(v);
                        // Relaxed: under the lock, which every reader that decides holds.
                        self.chan.in_hand.fetch_sub(1, Ordering::Relaxed);
                        woken = Woken::watchers(&mut st.recv_watchers);
                    }
                    Cell::Done(None)
                }
                cell => cell,
            };
            (cell, removed)
        };
        woken.wake();
        drop(removed);
        cell
    }

    /// The operation returns normally: nothing to undo.
    fn disarm(self) {
        // Only references inside: forgetting leaks nothing.
        std::mem::forget(self);
    }
}

impl<T> Drop for Parked<'_, T> {
    /// Reached only when the stack unwinds out of `park` (shutdown's forced unwind, or a
    /// panic): the normal paths disarm the guard.
    fn drop(&mut self) {
        // A sender's value not taken (or handed back) drops here, unlocked, with the unwinding
        // actor; a value handed to this receiver is requeued.
        drop(self.leave(!self.sender));
    }
}

struct State<T> {
    buffer: VecDeque<T>,
    /// `None`: unbounded.
    cap: Option<usize>,
    senders: usize,
    receivers: usize,
    /// `close` was called: no more sends; receivers drain the buffer, then see `Disconnected`.
    closed: bool,
    waiting_receivers: VecDeque<Arc<Slot<T>>>,
    waiting_senders: VecDeque<Arc<Slot<T>>>,
    /// Selects waiting for a receive to become possible (a value, a parked sender, or the
    /// channel closing); woken all at once, they look again (see "Select" above).
    recv_watchers: Vec<Waiter>,
    /// Selects waiting for a send to become possible (room, a parked receiver, or the channel
    /// closing).
    send_watchers: Vec<Waiter>,
    /// Senders and receivers made or cloned on plain threads (`[SENDERS]`, `[RECEIVERS]`):
    /// something outside the runtime may end an actor's wait on the channel (the deadlock
    /// check, `threadlet-runtime`'s `deadlock.rs`).
    outside: [u32; 2],
}

const SENDERS: usize = 0;
const RECEIVERS: usize = 1;

impl<T> State<T> {
    /// One more end of kind `end` (`SENDERS` or `RECEIVERS`), made on a plain thread if
    /// `outside`. An end of either kind counts for waiters of both: a sender may send to a
    /// waiting receiver, a receiver may take from a waiting sender, and either may close the
    /// channel, which ends every wait on it.
    ///
    /// The first outside end of a channel that actors wait on must reach the wait words they
    /// recorded (`outside: false`, read by the deadlock check), including the word of one that
    /// read the count before this end was made but has not stored its wait yet. So it marks
    /// every word now, and returns the waiters to wake once the lock is released: a wait
    /// stored after the mark is cut short by the wake, and the waiter parks again with what it
    /// reads then (`Chan::rewait`).
    #[must_use = "wake the waiters after unlocking"]
    fn count_outside(&mut self, end: usize, outside: bool) -> Vec<Waiter> {
        if !outside {
            return Vec::new();
        }
        self.outside[end] += 1;
        if self.outside != [1, 0] && self.outside != [0, 1] {
            return Vec::new();
        }
        let waiting = self.waiting_receivers.iter().chain(&self.waiting_senders);
        waiting
            .map(|slot| {
                threadlet_runtime::__private::mark_wait_outside(&slot.waiter);
                slot.waiter.clone()
            })
            .collect()
    }

    /// One end fewer of kind `end`, made on a plain thread if `outside`. When the last end held
    /// outside goes, the waits it marked are judged afresh: returns the waiters to wake once
    /// the lock is released, which park again with what they read then (`Chan::rewait`), so
    /// that a deadlock left behind is reported.
    #[must_use = "wake the waiters after unlocking"]
    fn uncount_outside(&mut self, end: usize, outside: bool) -> Vec<Waiter> {
        if !outside {
            return Vec::new();
        }
        self.outside[end] -= 1;
        if self.held_outside() {
            return Vec::new();
        }
        let waiting = self.waiting_receivers.iter().chain(&self.waiting_senders);
        waiting.map(|slot| slot.waiter.clone()).collect()
    }

    /// Whether a plain thread holds an end of the channel (see `count_outside`).
    fn held_outside(&self) -> bool {
        self.outside != [0, 0]
    }

    fn has_room(&self) -> bool {
        self.cap.is_none_or(|c| self.buffer.len() < c)
    }
}

struct Chan<T> {
    /// For the dump: what an actor waiting on the channel waits on (`Wait::ChannelRecv`).
    /// Given the first time an actor waits on the channel (0 until then), so that making a
    /// channel (one per `ask`) touches no process-wide counter.
    id: AtomicU64,
    /// Values handed to parked receivers and not taken by them yet ("Values in hand" in the
    /// module docs). Raised under the lock by the hand-off; lowered by the receiver as it takes
    /// the value (without the lock), or under the lock when a killed receiver puts it back.
    in_hand: AtomicUsize,
    /// Raised, for good, when a receiver (or a select) of the disconnected channel was told
    /// to wait for a value in hand (step 4 of "Values in hand"): the receiver that takes the
    /// last one then tells them. Raised under the lock, read without it.
    held: AtomicBool,
    state: Mutex<State<T>>,
}

impl<T> Chan<T> {
    /// The channel's id, given now if it has none (1, 2, ...).
    fn id(&self) -> u64 {
        // Relaxed, all: only uniqueness matters, which the counter's `fetch_add` and the
        // compare-and-swap give.
        let id = self.id.load(Ordering::Relaxed);
        if id != 0 {
            return id;
        }
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let new = NEXT.fetch_add(1, Ordering::Relaxed);
        match self
            .id
            .compare_exchange(0, new, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => new,
            Err(theirs) => theirs,
        }
    }

    /// What a sender (`send`) or a receiver waiting on this channel records, with `st` its
    /// locked state: whether a plain thread holds an end of it is read now.
    fn wait(&self, st: &State<T>, send: bool) -> Wait {
        let (channel, outside) = (self.id(), st.held_outside());
        if send {
            Wait::ChannelSend { channel, outside }
        } else {
            Wait::ChannelRecv { channel, outside }
        }
    }

    /// The wait to record when parking again after a spurious wakeup: read afresh, for a
    /// plain thread may have taken an end since the last park. Taking one marked the wait word
    /// (`State::count_outside`), and recording the old `Wait` again would clear the mark, so
    /// that the deadlock check would take a wait an outside thread can end for a deadlock.
    /// Other waits (a request's reply) are kept as they are.
    fn rewait(&self, on: Wait) -> Wait {
        match on {
            Wait::ChannelSend { .. } => self.wait(&self.state.lock(), true),
            Wait::ChannelRecv { .. } => self.wait(&self.state.lock(), false),
            other => other,
        }
    }

    /// Step 1 of "Values in hand": a sender hands a value to a parked receiver, under the lock.
    fn hand_to(&self, r: &Slot<T>, value: T) {
        // Relaxed: every other access that decides anything is under the lock too, or ordered
        // by step 4's fences.
        self.in_hand.fetch_add(1, Ordering::Relaxed);
        r.complete(Cell::Done, Some(value));
    }

    /// Step 2, under the lock, the channel disconnected (its senders gone or it closed) with
    /// nothing buffered: whether receivers may be told so, that is whether no value is in hand.
    /// `waiting`: some receiver would wait (one already waits, or the caller would) if one is;
    /// then step 4's hand-shake with the receiver that will take it decides.
    fn drained(&self, waiting: bool) -> bool {
        // Relaxed: under the lock; step 4's fences order what the hand-shake reads.
        if self.in_hand.load(Ordering::Relaxed) == 0 {
            return true;
        }
        if !waiting {
            return false;
        }
        // Step 4, the waiting side: raise the flag, then, past a `SeqCst` fence that pairs
        // with the one in `taken_from_hand`, read the count again.
        self.held.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        self.in_hand.load(Ordering::Relaxed) == 0
    }

    /// Step 3: a receiver took a value handed to it (its slot is off every list: no lock
    /// needed). The last one in hand after a disconnect tells the receivers that waited for it.
    fn taken_from_hand(&self) {
        if self.in_hand.fetch_sub(1, Ordering::Relaxed) == 1 {
            // Pairs with the fence in `drained` (step 4).
            fence(Ordering::SeqCst);
            if self.held.load(Ordering::Relaxed) {
                self.tell_drained();
            }
        }
    }

    /// Step 2 for the receivers waiting, under the lock, the channel disconnected with nothing
    /// buffered: if it is drained, completes every one of them as disconnected and returns
    /// them, to be woken after unlocking; `None` while a value is in hand (they wait on).
    fn disconnect_waiting(&self, st: &mut State<T>) -> Option<VecDeque<Arc<Slot<T>>>> {
        if !self.drained(!st.waiting_receivers.is_empty()) {
            return None;
        }
        let woken = std::mem::take(&mut st.waiting_receivers);
        for r in &woken {
            r.complete(Cell::Disconnected, None);
        }
        Some(woken)
    }

    /// Step 4, the taker's side, under the lock: if the channel is drained now (disconnected,
    /// nothing buffered, nothing in hand), every waiting receiver and select is told so; woken
    /// after unlocking.
    fn tell_drained(&self) {
        let (woken, watchers) = {
            let mut st = self.state.lock();
            if !(st.senders == 0 || st.closed) || !st.buffer.is_empty() {
                return;
            }
            let Some(woken) = self.disconnect_waiting(&mut st) else {
                return;
            };
            (woken, Woken::<T>::watchers(&mut st.recv_watchers))
        };
        wake_all(woken);
        watchers.wake();
    }
}

fn new_channel<T>(cap: Option<usize>) -> (Sender<T>, Receiver<T>) {
    let outside = on_plain_thread();
    let chan = Arc::new(Chan {
        id: AtomicU64::new(0),
        in_hand: AtomicUsize::new(0),
        held: AtomicBool::new(false),
        state: Mutex::new(State {
            outside: [u32::from(outside); 2],
            buffer: VecDeque::with_capacity(cap.unwrap_or(0).min(1024)),
            cap,
            senders: 1,
            receivers: 1,
            closed: false,
            waiting_receivers: VecDeque::new(),
            waiting_senders: VecDeque::new(),
            recv_watchers: Vec::new(),
            send_watchers: Vec::new(),
        }),
    });
    (
        Sender {
            chan: TaggedArc::new(chan.clone(), outside),
        },
        Receiver {
            chan: TaggedArc::new(chan, outside),
        },
    )
}

/// A channel holding at most `cap` values; `bounded(0)` is a rendezvous channel.
///
/// ```
/// use threadlet::channel;
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let (tx, rx) = channel::bounded(0);
///     let h = threadlet::spawn(move || tx.send("sack").unwrap());
///     assert_eq!(rx.recv(), Ok("sack")); // the sender was parked until now
///     h.join().unwrap();
/// });
/// ```
pub fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    new_channel(Some(cap))
}

pub mod oneshot;

/// A channel for one value: the reply channel of a request (see [`oneshot`](mod@oneshot)).
///
/// ```
/// let (tx, rx) = threadlet::channel::oneshot();
/// tx.send('!').unwrap();
/// assert_eq!(rx.recv(), Ok('!'));
/// ```
pub fn oneshot<T>() -> (oneshot::Sender<T>, oneshot::Receiver<T>) {
    let (tx, rx) = bounded(1);
    (oneshot::Sender(tx), oneshot::Receiver(rx))
}

/// A channel with no capacity limit: `send` never waits.
///
/// ```
/// let (tx, rx) = threadlet::channel::unbounded();
/// tx.send(1).unwrap();
/// drop(tx);
/// assert_eq!(rx.recv(), Ok(1));
/// assert!(rx.recv().is_err());
/// ```
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    new_channel(None)
}

/// The sending side of a channel. Clone it for more senders.
///
/// ```
/// use threadlet::channel;
///
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// let (tx, rx) = channel::unbounded();
/// for i in 0..3 {
///     let tx = tx.clone();
///     rt.spawn(move || tx.send(i).unwrap());
/// }
/// drop(tx); // the clones in the actors are the last senders
/// let mut got: Vec<i32> = rx.iter().collect();
/// got.sort();
/// assert_eq!(got, [0, 1, 2]);
/// ```
pub struct Sender<T> {
    /// Flagged if made or cloned on a plain thread: then counted in `State::outside` until
    /// dropped. One word with its flag (`tagged.rs`).
    chan: TaggedArc<Chan<T>>,
}

impl<T> Sender<T> {
    /// Sends `value`, waiting while the channel is full (for rendezvous: until a receiver takes
    /// it). Fails, handing the value back, when every receiver is gone.
    ///
    /// ```
    /// use threadlet::channel;
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let sum = rt.block_on(|| {
    ///     let (tx, rx) = channel::bounded(1);
    ///     let consumer = threadlet::spawn(move || rx.iter().sum::<u32>());
    ///     for i in 1..=4 {
    ///         tx.send(i).unwrap(); // waits while the one place is taken
    ///     }
    ///     drop(tx);
    ///     consumer.join().unwrap()
    /// });
    /// assert_eq!(sum, 10);
    /// ```
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.send_until(value, None)
            .map_err(|e| SendError(e.into_inner()))
    }

    /// Sends `value`, waiting at most `timeout` for room (for rendezvous: for a receiver to
    /// take it); on a timeout the value comes back in [`SendTimeoutError::Timeout`]. A value
    /// a receiver took meanwhile is sent, however late. On a rendezvous channel a receiver that
    /// waits only in a `select!` watches the channel rather than waiting on it (see "Select"
    /// in the module docs): a zero timeout, like `try_send`, never meets it, and a sender
    /// retrying with one would spin; any timeout above zero lets the select take the value.
    ///
    /// ```
    /// use std::time::Duration;
    /// use threadlet::channel::{self, SendTimeoutError};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let (tx, rx) = channel::bounded(1);
    ///     tx.send_timeout(1, Duration::from_millis(5)).unwrap(); // room at once
    ///     let full = tx.send_timeout(2, Duration::from_millis(5));
    ///     assert_eq!(full, Err(SendTimeoutError::Timeout(2))); // nobody took the first
    ///     assert_eq!(rx.recv(), Ok(1));
    ///     drop(rx);
    ///     let gone = tx.send_timeout(3, Duration::from_millis(5));
    ///     assert_eq!(gone, Err(SendTimeoutError::Disconnected(3)));
    /// });
    /// ```
    pub fn send_timeout(&self, value: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        // A timeout too long to represent as an `Instant` (`Duration::MAX`) means no deadline.
        self.send_until(value, Instant::now().checked_add(timeout))
    }

    /// [`send_timeout`](Sender::send_timeout) with a deadline.
    pub fn send_deadline(&self, value: T, deadline: Instant) -> Result<(), SendTimeoutError<T>> {
        self.send_until(value, Some(deadline))
    }

    /// `send`, giving up at `deadline` if there is one. As a receive does (`recv_waiting`): a
    /// sender that gives up leaves the waiting list under the lock, then keeps what happened
    /// meanwhile (`Parked::leave`): taken by a receiver, it was sent.
    fn send_until(&self, value: T, deadline: Option<Instant>) -> Result<(), SendTimeoutError<T>> {
        checkpoint();
        let (slot, watchers, mut on) = {
            let mut st = self.chan.state.lock();
            match Self::try_send_locked(&self.chan, &mut st, value) {
                Ok(woken) => {
                    drop(st);
                    woken.wake();
                    return Ok(());
                }
                Err(TrySendError::Disconnected(v)) => {
                    return Err(SendTimeoutError::Disconnected(v));
                }
                Err(TrySendError::Full(v)) if deadline.is_some_and(|d| Instant::now() >= d) => {
                    return Err(SendTimeoutError::Timeout(v));
                }
                Err(TrySendError::Full(v)) => {
                    let slot = Slot::new(Some(v));
                    st.waiting_senders.push_back(slot.clone());
                    let on = self.chan.wait(&st, true);
                    // A receive can now take this value (rendezvous): tell watching selects.
                    (slot, Woken::<T>::watchers(&mut st.recv_watchers), on)
                }
            }
        };
        watchers.wake();
        let parked = Parked {
            chan: &self.chan,
            slot: &slot,
            sender: true,
        };
        let result = loop {
            // Cancelled: a destructor sending while shutdown unwinds its actor.
            let cancelled = match deadline {
                None => park_on(on).is_err(),
                Some(d) => park_on_until(on, d).is_err(),
            };
            if cancelled || deadline.is_some_and(|d| Instant::now() >= d) {
                // Giving up, unless a receiver took the value meanwhile.
                let back = |v: Option<T>| v.expect("a sender's value is still here");
                break match parked.leave(false) {
                    Cell::Done(_) => Ok(()),
                    Cell::Waiting(v) if !cancelled => Err(SendTimeoutError::Timeout(back(v))),
                    Cell::Waiting(v) | Cell::Disconnected(v) => {
                        Err(SendTimeoutError::Disconnected(back(v)))
                    }
                };
            }
            match &mut *slot.cell.lock() {
                Cell::Done(_) => break Ok(()),
                Cell::Disconnected(v) => {
                    break Err(SendTimeoutError::Disconnected(
                        v.take().expect("value back"),
                    ));
                }
                Cell::Waiting(_) => {} // a spurious wakeup
            }
            // The slot's lock is free again: the channel's may be taken (senders hold it
            // while they take a slot's).
            on = self.chan.rewait(on);
        };
        parked.disarm();
        result
    }

    /// Sends without waiting: fails with `Full` if it would have to wait.
    ///
    /// ```
    /// use threadlet::channel::{self, TrySendError};
    ///
    /// let (tx, rx) = channel::bounded(2);
    /// assert!(tx.try_send('a').is_ok());
    /// assert!(tx.try_send('b').is_ok());
    /// assert_eq!(tx.try_send('c'), Err(TrySendError::Full('c')));
    /// assert_eq!(rx.try_recv(), Ok('a')); // frees a place
    /// assert!(tx.try_send('c').is_ok());
    /// ```
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        checkpoint();
        self.send_now(value)
    }

    /// `try_send` without the safe point, for `select`: a yield between a select's watching
    /// and its parking could drop the wakeup it waits for.
    pub(crate) fn send_now(&self, value: T) -> Result<(), TrySendError<T>> {
        let woken = Self::try_send_locked(&self.chan, &mut self.chan.state.lock(), value)?;
        woken.wake();
        Ok(())
    }

    /// Step 1 of a send; returns the receiver to wake once the lock is released.
    fn try_send_locked(
        chan: &Chan<T>,
        st: &mut State<T>,
        value: T,
    ) -> Result<Woken<T>, TrySendError<T>> {
        if st.receivers == 0 || st.closed {
            return Err(TrySendError::Disconnected(value));
        }
        if let Some(r) = st.waiting_receivers.pop_front() {
            chan.hand_to(&r, value);
            return Ok(Woken::slot(r));
        }
        if st.has_room() {
            st.buffer.push_back(value);
            return Ok(Woken::watchers(&mut st.recv_watchers));
        }
        Err(TrySendError::Full(value))
    }

    /// Values waiting in the buffer now.
    ///
    /// ```
    /// let (tx, rx) = threadlet::channel::unbounded();
    /// tx.send(1).unwrap();
    /// tx.send(2).unwrap();
    /// assert_eq!(tx.len(), 2);
    /// rx.recv().unwrap();
    /// assert_eq!(tx.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.chan.state.lock().buffer.len()
    }

    /// Whether every receiver is gone (a send would fail and hand its value back).
    ///
    /// ```
    /// let (tx, rx) = threadlet::channel::unbounded::<u8>();
    /// assert!(!tx.is_disconnected());
    /// drop(rx);
    /// assert!(tx.is_disconnected());
    /// ```
    pub fn is_disconnected(&self) -> bool {
        let st = self.chan.state.lock();
        st.receivers == 0 || st.closed
    }

    /// Closes the channel, as Go's `close`: no more sends are accepted (they fail and hand their
    /// value back, and senders waiting for room get theirs back now); receivers still get
    /// everything sent before, then [`RecvError`]. Closing again does nothing.
    ///
    /// ```
    /// use threadlet::channel::{self, RecvError, SendError};
    ///
    /// let (tx, rx) = channel::unbounded();
    /// tx.send(1).unwrap();
    /// tx.send(2).unwrap();
    /// tx.close();
    /// assert_eq!(tx.send(3), Err(SendError(3)));
    /// assert_eq!((rx.recv(), rx.recv(), rx.recv()), (Ok(1), Ok(2), Err(RecvError)));
    /// ```
    pub fn close(&self) {
        self.chan.close();
    }

    /// Whether the buffer is empty now.
    ///
    /// ```
    /// let (tx, _rx) = threadlet::channel::bounded(4);
    /// assert!(tx.is_empty());
    /// tx.send("x").unwrap();
    /// assert!(!tx.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The capacity (`None` for unbounded).
    ///
    /// ```
    /// use threadlet::channel;
    ///
    /// assert_eq!(channel::bounded::<u8>(8).0.capacity(), Some(8));
    /// assert_eq!(channel::bounded::<u8>(0).0.capacity(), Some(0)); // rendezvous
    /// assert_eq!(channel::unbounded::<u8>().0.capacity(), None);
    /// ```
    pub fn capacity(&self) -> Option<usize> {
        self.chan.state.lock().cap
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        let outside = on_plain_thread();
        let marked = {
            let mut st = self.chan.state.lock();
            st.senders += 1;
            st.count_outside(SENDERS, outside)
        };
        marked.iter().for_each(Waiter::wake);
        Sender {
            chan: self.chan.clone_with(outside),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let (woken, unmarked) = {
            let mut st = self.chan.state.lock();
            st.senders -= 1;
            let unmarked = st.uncount_outside(SENDERS, self.chan.flag());
            if st.senders > 0 {
                (None, unmarked)
            } else {
                // (The buffer is empty where receivers wait: invariant 1.)
                let (woken, unmarked) = match self.chan.disconnect_waiting(&mut st) {
                    // The waiters `unmarked` names are these (a parked sender would hold an
                    // end): woken once, as disconnected.
                    Some(woken) => {
                        drop(unmarked);
                        (woken, Vec::new())
                    }
                    // They wait on for a value in hand ("Values in hand"): woken as for any
                    // change of the marks, to record their wait afresh.
                    None => (VecDeque::new(), unmarked),
                };
                (
                    Some((woken, Woken::<T>::watchers(&mut st.recv_watchers))),
                    unmarked,
                )
            }
        };
        unmarked.iter().for_each(Waiter::wake);
        if let Some((woken, watchers)) = woken {
            wake_all(woken);
            watchers.wake();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sender { .. }")
    }
}

/// The receiving side of a channel. Clone it for more receivers (each value goes to one).
///
/// ```
/// use threadlet::channel;
///
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// let (tx, rx) = channel::unbounded::<u32>();
/// // Two consumers share the work: every value goes to exactly one of them.
/// let consumers: Vec<_> = (0..2)
///     .map(|_| {
///         let rx = rx.clone();
///         rt.spawn(move || rx.iter().collect::<Vec<_>>())
///     })
///     .collect();
/// drop(rx);
/// for i in 1..=6 {
///     tx.send(i).unwrap();
/// }
/// drop(tx);
/// let mut all: Vec<u32> = consumers.into_iter().flat_map(|h| h.join().unwrap()).collect();
/// all.sort();
/// assert_eq!(all, [1, 2, 3, 4, 5, 6]);
/// ```
pub struct Receiver<T> {
    /// As a `Sender`'s.
    chan: TaggedArc<Chan<T>>,
}

impl<T> Receiver<T> {
    /// Waits for a value. Fails once the channel is empty and every sender is gone.
    ///
    /// ```
    /// use threadlet::channel::{self, RecvError};
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (tx, rx) = channel::bounded(0);
    /// rt.spawn(move || {
    ///     tx.send("ping").unwrap();
    /// }); // `tx` is dropped when the actor ends
    /// assert_eq!(rx.recv(), Ok("ping")); // blocks this thread until the actor sends
    /// assert_eq!(rx.recv(), Err(RecvError));
    /// ```
    pub fn recv(&self) -> Result<T, RecvError> {
        self.recv_until(None).map_err(|_| RecvError)
    }

    /// Waits for a value for at most `timeout`. A timeout too long to represent as an
    /// [`Instant`] (such as `Duration::MAX`) means no timeout, as with `std`'s channels.
    ///
    /// ```
    /// use std::time::Duration;
    /// use threadlet::channel::{self, RecvTimeoutError};
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let (tx, rx) = channel::unbounded::<u8>();
    ///     assert_eq!(rx.recv_timeout(Duration::from_millis(5)), Err(RecvTimeoutError::Timeout));
    ///     tx.send(1).unwrap();
    ///     assert_eq!(rx.recv_timeout(Duration::from_millis(5)), Ok(1));
    /// });
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        // A timeout too long to represent as an `Instant` (`Duration::MAX`) means no deadline.
        self.recv_until(Instant::now().checked_add(timeout))
    }

    /// Waits for a value until `deadline`.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use threadlet::channel::{self, RecvTimeoutError};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let (tx, rx) = channel::unbounded::<u8>();
    ///     let deadline = Instant::now() + Duration::from_millis(10);
    ///     assert_eq!(rx.recv_deadline(deadline), Err(RecvTimeoutError::Timeout));
    ///     assert!(Instant::now() >= deadline);
    ///     tx.send(1).unwrap();
    ///     assert_eq!(rx.recv_deadline(deadline), Ok(1)); // a value waiting is taken even late
    /// });
    /// ```
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(deadline))
    }

    fn recv_until(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        self.recv_waiting(deadline, None)
    }

    /// A receive that, if it waits, shows as the reply to a request sent to `reply_from`
    /// (`Addr::ask`) rather than as a channel receive.
    pub(crate) fn recv_waiting(
        &self,
        deadline: Option<Instant>,
        reply_from: Option<&dyn Fn() -> Option<ActorId>>,
    ) -> Result<T, RecvTimeoutError> {
        checkpoint();
        let (slot, watchers, on) = {
            let mut st = self.chan.state.lock();
            match Self::try_recv_locked(&self.chan, &mut st) {
                Ok((v, woken)) => {
                    drop(st);
                    woken.wake();
                    return Ok(v);
                }
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(RecvTimeoutError::Timeout);
                    }
                    let slot = Slot::new(None);
                    st.waiting_receivers.push_back(slot.clone());
                    let on = self.chan.wait(&st, false);
                    // A send can now hand its value to this receiver (rendezvous): tell
                    // watching selects.
                    (slot, Woken::<T>::watchers(&mut st.send_watchers), on)
                }
            }
        };
        watchers.wake();
        // A request's reply names the actor asked (looked up only now, with no lock held).
        let mut on = match reply_from.and_then(|f| f()) {
            Some(actor) => Wait::Reply { actor },
            None => on,
        };
        let parked = Parked {
            chan: &self.chan,
            slot: &slot,
            sender: false,
        };
        let result = loop {
            let cancelled = match deadline {
                None => park_on(on).is_err(),
                Some(d) => park_on_until(on, d).is_err(),
            };
            if cancelled || deadline.is_some_and(|d| Instant::now() >= d) {
                // Giving up: leave the waiting list under the lock, then keep a value that a
                // sender may have handed over meanwhile.
                break match parked.leave(false) {
                    Cell::Done(v) => {
                        let v = v.expect("value delivered");
                        self.chan.taken_from_hand();
                        Ok(v)
                    }
                    Cell::Disconnected(_) => Err(RecvTimeoutError::Disconnected),
                    Cell::Waiting(_) if cancelled => Err(RecvTimeoutError::Disconnected),
                    Cell::Waiting(_) => Err(RecvTimeoutError::Timeout),
                };
            }
            let done = match &mut *slot.cell.lock() {
                Cell::Done(v) => Some(Ok(v.take().expect("value delivered"))),
                Cell::Disconnected(_) => Some(Err(RecvTimeoutError::Disconnected)),
                Cell::Waiting(_) => None, // a spurious wakeup
            };
            if let Some(done) = done {
                if done.is_ok() {
                    // After the slot's lock: the last value in hand may take the channel's.
                    self.chan.taken_from_hand();
                }
                break done;
            }
            // The slot's lock is free again: the channel's may be taken (senders hold it
            // while they take a slot's).
            on = self.chan.rewait(on);
        };
        parked.disarm();
        result
    }

    /// Takes a value if one is ready, without waiting.
    ///
    /// ```
    /// use threadlet::channel::{self, TryRecvError};
    ///
    /// let (tx, rx) = channel::unbounded();
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    /// tx.send(5).unwrap();
    /// assert_eq!(rx.try_recv(), Ok(5));
    /// drop(tx);
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        checkpoint();
        self.recv_now()
    }

    /// `try_recv` without the safe point, for `select` (see [`Sender::send_now`]).
    pub(crate) fn recv_now(&self) -> Result<T, TryRecvError> {
        let (v, woken) = Self::try_recv_locked(&self.chan, &mut self.chan.state.lock())?;
        woken.wake();
        Ok(v)
    }

    /// Step 1 of a receive; returns the value and the sender to wake once the lock is released.
    fn try_recv_locked(chan: &Chan<T>, st: &mut State<T>) -> Result<(T, Woken<T>), TryRecvError> {
        if let Some(v) = st.buffer.pop_front() {
            // A place freed up: move the first parked sender's value in (invariant 2). The
            // buffer can be over capacity after a cancelled receiver requeued a value; then no
            // place freed up yet.
            let mut woken = Woken::NONE;
            if st.has_room() {
                if let Some(s) = st.waiting_senders.pop_front() {
                    let moved = s
                        .complete(Cell::Done, None)
                        .expect("a parked sender has a value");
                    st.buffer.push_back(moved);
                    woken = Woken::slot(s);
                } else {
                    // Room for a send: tell watching selects.
                    woken = Woken::watchers(&mut st.send_watchers);
                }
            }
            return Ok((v, woken));
        }
        if let Some(s) = st.waiting_senders.pop_front() {
            // Rendezvous: take the value straight from the parked sender.
            let v = s
                .complete(Cell::Done, None)
                .expect("a parked sender has a value");
            return Ok((v, Woken::slot(s)));
        }
        // Disconnected, but with a value still in hand: it may come back ("Values in hand").
        if (st.senders == 0 || st.closed) && chan.drained(true) {
            Err(TryRecvError::Disconnected)
        } else {
            Err(TryRecvError::Empty)
        }
    }

    /// An iterator that receives until the channel is closed and empty.
    ///
    /// ```
    /// let (tx, rx) = threadlet::channel::unbounded();
    /// for word in ["a", "b", "c"] {
    ///     tx.send(word).unwrap();
    /// }
    /// drop(tx);
    /// assert_eq!(rx.iter().collect::<String>(), "abc");
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(|| self.recv().ok())
    }

    /// Values waiting in the buffer now.
    ///
    /// ```
    /// let (tx, rx) = threadlet::channel::bounded(3);
    /// tx.send(1).unwrap();
    /// tx.send(2).unwrap();
    /// assert_eq!(rx.len(), 2);
    /// rx.recv().unwrap();
    /// assert_eq!(rx.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.chan.state.lock().buffer.len()
    }

    /// Whether the buffer is empty now.
    ///
    /// ```
    /// let (tx, rx) = threadlet::channel::unbounded();
    /// assert!(rx.is_empty());
    /// tx.send(()).unwrap();
    /// assert!(!rx.is_empty());
    /// rx.recv().unwrap();
    /// assert!(rx.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        Receiver::of(&self.chan)
    }
}

impl<T> Receiver<T> {
    /// One more receiver of `chan`, counted (as made outside if made on a plain thread).
    fn of(chan: &TaggedArc<Chan<T>>) -> Receiver<T> {
        let outside = on_plain_thread();
        let marked = {
            let mut st = chan.state.lock();
            st.receivers += 1;
            st.count_outside(RECEIVERS, outside)
        };
        marked.iter().for_each(Waiter::wake);
        Receiver {
            chan: chan.clone_with(outside),
        }
    }
}

impl<T> Receiver<T> {
    /// Closes the channel from the receiving side, as tokio's `Receiver::close`: the same as
    /// [`Sender::close`]. What was sent before stays to be received ("close, then drain"
    /// loses nothing); every later send fails and hands its value back.
    ///
    /// ```
    /// use threadlet::channel::{self, TryRecvError, TrySendError};
    ///
    /// let (tx, rx) = channel::bounded(4);
    /// tx.send("kept").unwrap();
    /// rx.close();
    /// assert_eq!(tx.try_send("refused"), Err(TrySendError::Disconnected("refused")));
    /// assert_eq!(rx.try_recv(), Ok("kept"));
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    /// ```
    pub fn close(&self) {
        self.chan.close();
    }

    /// Whether the channel was closed ([`Sender::close`] or [`Receiver::close`]).
    pub fn is_closed(&self) -> bool {
        self.chan.state.lock().closed
    }
}

/// Which readiness a select watches for.
#[derive(Clone, Copy)]
enum Watch {
    Recv,
    Send,
}

impl<T> Chan<T> {
    /// Records `w` to be woken when the operation `what` may have become possible.
    fn watch(&self, w: &Waiter, what: Watch) {
        let mut st = self.state.lock();
        match what {
            Watch::Recv => st.recv_watchers.push(w.clone()),
            Watch::Send => st.send_watchers.push(w.clone()),
        }
    }

    /// Withdraws one record of `w` made by `watch`, if a wake has not taken it already.
    fn unwatch(&self, w: &Waiter, what: Watch) {
        let removed = {
            let mut st = self.state.lock();
            let list = match what {
                Watch::Recv => &mut st.recv_watchers,
                Watch::Send => &mut st.send_watchers,
            };
            list.iter()
                .position(|x| x.same_as(w))
                .map(|i| list.swap_remove(i))
        };
        // Dropped unlocked, as every waiter here.
        drop(removed);
    }

    /// Both ends' `close`: under the lock, marks the channel closed and completes every parked
    /// operation (a sender waiting for room gets its value back; a receiver waiting, which means
    /// the buffer is empty, sees `Disconnected`); wakes them after unlocking.
    fn close(&self) {
        let woken = {
            let mut st = self.state.lock();
            if st.closed {
                return;
            }
            st.closed = true;
            let senders = std::mem::take(&mut st.waiting_senders);
            for s in &senders {
                // As in `Receiver::drop`: the value goes back in the step that completes the slot.
                s.complete_with(Cell::Disconnected);
            }
            // (The buffer is empty where receivers wait: invariant 1.)
            let receivers = self.disconnect_waiting(&mut st).unwrap_or_default();
            let mut watchers = std::mem::take(&mut st.recv_watchers);
            watchers.append(&mut st.send_watchers);
            (
                senders.into_iter().chain(receivers).collect::<Vec<_>>(),
                watchers,
            )
        };
        wake_all(woken.0);
        for w in woken.1 {
            w.wake_by_value();
        }
    }
}

impl<T> Receiver<T> {
    pub(crate) fn watch(&self, w: &Waiter) {
        self.chan.watch(w, Watch::Recv);
    }

    pub(crate) fn unwatch(&self, w: &Waiter) {
        self.chan.unwatch(w, Watch::Recv);
    }
}

impl<T> Sender<T> {
    /// A new receiver of this channel (for a channel whose first receiver was handed out and
    /// may be gone; a channel whose receivers were all dropped takes values again).
    pub(crate) fn receiver(&self) -> Receiver<T> {
        Receiver::of(&self.chan)
    }

    pub(crate) fn watch(&self, w: &Waiter) {
        self.chan.watch(w, Watch::Send);
    }

    pub(crate) fn unwatch(&self, w: &Waiter) {
        self.chan.unwatch(w, Watch::Send);
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let (woken_left, unmarked) = {
            let mut st = self.chan.state.lock();
            st.receivers -= 1;
            let unmarked = st.uncount_outside(RECEIVERS, self.chan.flag());
            if st.receivers > 0 {
                (None, unmarked)
            } else {
                let woken = std::mem::take(&mut st.waiting_senders);
                for s in &woken {
                    // The value goes back to its sender in the same step that completes the
                    // slot, so a sender waking in between never sees a completed slot without
                    // its value.
                    s.complete_with(Cell::Disconnected);
                }
                let watchers = Woken::<T>::watchers(&mut st.send_watchers);
                // As in `Sender::drop`: `unmarked` names these, woken once, as disconnected.
                drop(unmarked);
                (
                    Some((woken, watchers, std::mem::take(&mut st.buffer))),
                    Vec::new(),
                )
            }
        };
        unmarked.iter().for_each(Waiter::wake);
        if let Some((woken, watchers, left)) = woken_left {
            wake_all(woken);
            watchers.wake();
            // Dropped unlocked: a value's destructor may use this channel again.
            drop(left);
        }
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receiver { .. }")
    }
}
