//! Mailboxes: the one typed inbox of each actor, and the [`Addr`]esses that send to it.
//!
//! # State
//!
//! No lock. A mailbox is a lock-free queue (`queue.rs`: many senders, one receiver) and three
//! words:
//!
//! * `state`: the number of messages accepted and not yet received (what [`Mailbox::len`]
//!   reports), the number of senders *in flight* (between their entry and their exit below),
//!   `CLOSED` (by [`Mailbox::close`] or because the actor ended), and `WAITING` (the receiver
//!   has registered);
//! * `addrs`: the number of live [`Addr`]s;
//! * `waiter`: the registered receiver, if any (a `WaiterSlot` of the runtime: whoever swaps the
//!   waiter out of it owns it, so exactly one thread wakes it).
//!
//! A mailbox has exactly one receiver (`Mailbox` is not `Sync`), so only one thread at a time
//! pops the queue or registers.
//!
//! # Protocol
//!
//! Sending (any thread):
//! 1. allocate the message's queue node (nothing after this can block or run user code);
//! 2. *enter*: add one sender in flight and one message to `state` (one read-modify-write).
//!    If `CLOSED` was set, take both back, hand the message back, and go to 4;
//! 3. push the node onto the queue;
//! 4. *exit*: take the sender back out of `state` (a read-modify-write, release). If `WAITING`
//!    was set, clear it, take the waiter out of the slot (if no other sender has) and wake it.
//!
//! Receiving (the one receiver; a handler actor's `poll` is the same without the park):
//! 1. pop; if a message comes out, count it out of `state` and return it;
//! 2. read `state` and `addrs` (acquire), then pop once more. If the queue is empty and the
//!    mailbox is closed or has no address left, with no sender in flight, it is drained for
//!    good: return `None`;
//! 3. register: put the caller in the waiter slot, then set `WAITING` (a read-modify-write,
//!    acquire) and do 2 with the `state` it returns;
//! 4. park; when woken, do 1 and 2, then go to 3. Whenever the receiver returns (a message,
//!    `None`, a timeout, a cancelled park, or an unwind out of the park), it takes back its
//!    registration if no sender has, so a mailbox that outlives its actor's stack does not
//!    keep the actor (and its runtime) allocated.
//!
//! # Why no wakeup is lost
//!
//! A receiver parks only after registering (3) and finding nothing. Take a sender whose exit
//! (4) and the receiver's `WAITING` (3) are both read-modify-writes of `state`, so one comes
//! first in its modification order, and each reads the latest value:
//!
//! * the registration comes first: the exit reads `WAITING` and takes the slot. The waiter was
//!   put there before `WAITING` was set, so the exit (which reads it, acquire) finds it, unless
//!   another sender took it first and woke the receiver anyway;
//! * the exit comes first: the registration reads the exit's value (or a later one: every
//!   change of `state` is a read-modify-write, so the exit's release sequence goes on) and
//!   synchronizes with it, so the push before the exit happened before the receiver's pop,
//!   which finds the message.
//!
//! Dropping the last `Addr` is an exit with nothing to take out, after its decrement of
//! `addrs`: the receiver either is woken, or reads `addrs == 0` and sees `None`. Only
//! read-modify-writes carry the argument, so it needs no `SeqCst`, and loom, which models
//! `SeqCst` loads as acquire loads, checks it as shipped (`tests/loom_mailbox.rs`).
//!
//! A push is two steps (swap the head, link the previous node), and between them the queue
//! looks shorter than it is: a pop may miss a message whose sender is still in flight. That
//! sender has yet to exit, and its exit wakes the receiver if it has registered. This is also
//! why step 2 checks senders in flight before it calls the mailbox drained.
//!
//! A wake can find the receiver already awake (it registered, then found a message on its
//! second look): the receiver's next park then returns at once and it looks again. Spurious
//! wakes cost a turn, never a message.
//!
//! # Conservation
//!
//! A message is either accepted (its sender entered while the mailbox was open: the actor
//! receives it, or it is dropped with the mailbox when the actor ends without reading it) or
//! returned to the sender in [`SendError`]. `state`'s modification order decides which: a
//! sender that enters before the close is counted in flight, and both the drain and the drop
//! wait for it. [`Mailbox::close`] sets `CLOSED`: every later send fails and returns its
//! message, while everything accepted before stays queued for the owner to drain, so "close,
//! then drain" loses nothing. When the actor ends, its `Mailbox` drops: it closes, waits for
//! senders in flight (a few instructions each; a sender preempted by the OS there delays the
//! drop by as long), and drops what is queued. Message destructors run on the thread that drops
//! them, outside any lock; one that sends to this mailbox again is refused and gets its message
//! back.

use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use threadlet_runtime::sync::{AtomicU64, AtomicUsize, Backoff};
use threadlet_runtime::{ActorId, Waiter, WaiterSlot, call_at, checkpoint, park, park_until};

use crate::channel::{RecvTimeoutError, SendError, TryRecvError};
use crate::queue::{MessageQueue, Pending};

/// `state`: messages accepted and not yet received, in the low bits.
const ONE_MESSAGE: u64 = 1;
const MESSAGES_BITS: u32 = 40;
/// `state`: senders in flight, above the messages. 2^22 is more than the threads a process
/// can have, and an actor cannot be suspended in flight (no safe point lies there).
const ONE_SENDER: u64 = 1 << MESSAGES_BITS;
const SENDERS_BITS: u32 = 22;
/// `state`: no more sends are accepted.
const CLOSED: u64 = 1 << (MESSAGES_BITS + SENDERS_BITS);
/// `state`: a receiver has registered in the waiter slot; an exit that sees it wakes.
const WAITING: u64 = CLOSED << 1;

fn messages(state: u64) -> u64 {
    state & (ONE_SENDER - 1)
}

fn senders(state: u64) -> u64 {
    (state & (CLOSED - 1)) >> MESSAGES_BITS
}

/// More addresses than this is a leak (each takes at least 8 bytes); abort, as `Arc` does,
/// rather than wrap the count.
const MAX_ADDRS: usize = isize::MAX as usize;

struct Shared<M> {
    queue: MessageQueue<M>,
    state: AtomicU64,
    addrs: AtomicUsize,
    waiter: WaiterSlot,
    /// The owning actor, set by `spawn_actor` right after spawning.
    actor: OnceLock<ActorId>,
}

/// What the receiver finds (steps 1 and 2 of receiving).
enum Found<M> {
    Message(M),
    /// Nothing now.
    Empty,
    /// Nothing, ever again: closed or no address left, drained, no sender in flight.
    Drained,
}

impl<M> Shared<M> {
    /// Pops one message and counts it out.
    ///
    /// # Safety
    ///
    /// The caller is the mailbox's one receiver (holds the `Mailbox`, which is not `Sync`).
    unsafe fn pop(&self) -> Option<M> {
        // SAFETY: the caller's promise: one consumer.
        let m = unsafe { self.queue.pop() }?;
        // Relaxed: only a count; its sender's entry added it before the push we popped.
        self.state.fetch_sub(ONE_MESSAGE, Relaxed);
        Some(m)
    }

    /// Steps 1 and 2 of receiving.
    ///
    /// # Safety
    ///
    /// As for [`Shared::pop`].
    unsafe fn find(&self) -> Found<M> {
        // SAFETY: the caller's promise (here and in `look`).
        if let Some(m) = unsafe { self.pop() } {
            return Found::Message(m);
        }
        // Acquire: pairs with the senders' exits (release): a push before an exit read here is
        // linked, and the pop in `look` finds it.
        let state = self.state.load(Acquire);
        unsafe { self.look(state) }
    }

    /// Step 3 of receiving: registers the caller, then looks again.
    ///
    /// # Safety
    ///
    /// As for [`Shared::pop`].
    unsafe fn register_and_find(&self) -> Found<M> {
        // A stale registration of this receiver (left by a spurious wake) comes back, dropped.
        drop(self.waiter.register(Waiter::current()));
        // AcqRel: the receiver's half of the pattern in the module docs. As a read-modify-write
        // it reads the latest `state`: either an exit after this one sees `WAITING`, or this
        // reads that exit (acquire, pairing with its release) and the pop finds its message.
        let state = self.state.fetch_or(WAITING, AcqRel);
        // SAFETY: the caller's promise.
        unsafe { self.look(state) }
    }

    /// Step 2 with `state` read: pops once more, then decides whether the mailbox is drained.
    ///
    /// # Safety
    ///
    /// As for [`Shared::pop`].
    unsafe fn look(&self, state: u64) -> Found<M> {
        // Acquire: pairs with the last `Addr`'s drop (module docs).
        let addrs = self.addrs.load(Acquire);
        // SAFETY: the caller's promise.
        if let Some(m) = unsafe { self.pop() } {
            return Found::Message(m);
        }
        let no_more = state & CLOSED != 0 || addrs == 0;
        if no_more && senders(state) == 0 {
            Found::Drained
        } else {
            Found::Empty
        }
    }

    /// The receiver stops waiting: takes its registration back if no sender has.
    fn withdraw(&self) {
        if self.waiter.take().is_some() {
            // Relaxed: a hint for senders only; the slot is what is owned.
            self.state.fetch_and(!WAITING, Relaxed);
        }
    }

    /// Sending, steps 2 to 4.
    fn send(&self, msg: M) -> Result<(), SendError<M>> {
        let pending = Pending::new(msg);
        // Relaxed: whether the send is accepted is decided by this read-modify-write's place in
        // `state`'s modification order against the close (a read-modify-write too); no data is
        // read here.
        let entered = self.state.fetch_add(ONE_SENDER + ONE_MESSAGE, Relaxed);
        debug_assert!(
            senders(entered) < (1 << SENDERS_BITS) - 1,
            "senders in flight overflow"
        );
        if entered & CLOSED != 0 {
            self.exit(ONE_SENDER + ONE_MESSAGE);
            return Err(SendError(pending.into_inner()));
        }
        self.queue.push(pending);
        self.exit(ONE_SENDER);
        Ok(())
    }

    /// Sending, step 4 (and the last `Addr`'s drop, with nothing to take out).
    fn exit(&self, taken: u64) {
        // AcqRel: release publishes the push to the receiver that reads this value (or a later
        // one); as a read-modify-write it reads the latest `state`, so it sees `WAITING` if
        // the receiver's registration came first (module docs).
        let state = self.state.fetch_sub(taken, AcqRel);
        if state & WAITING != 0 {
            // Relaxed: a hint (see `withdraw`); the slot decides who wakes the receiver.
            self.state.fetch_and(!WAITING, Relaxed);
            self.waiter.wake();
        }
    }

    fn close(&self) {
        // Relaxed: a read-modify-write, ordered against every sender's entry in `state`'s
        // modification order (see `send`).
        self.state.fetch_or(CLOSED, Relaxed);
        // The one receiver is the caller, which is not parked: nobody to wake. A registration
        // left by a handler actor's `poll` is dropped (it would keep the actor allocated).
        self.withdraw();
    }

    fn is_closed(&self) -> bool {
        self.state.load(Acquire) & CLOSED != 0
    }

    fn new_addr(self: &Arc<Self>) -> Addr<M> {
        // Relaxed: as `Arc::clone`; the count only has to be exact.
        if self.addrs.fetch_add(1, Relaxed) >= MAX_ADDRS {
            std::process::abort();
        }
        Addr {
            shared: self.clone(),
        }
    }
}

/// A receiver inside steps 3 and 4: dropping it (on every way out, an unwind included)
/// withdraws the registration.
struct Waiting<'a, M>(&'a Shared<M>);

impl<M> Drop for Waiting<'_, M> {
    fn drop(&mut self) {
        self.0.withdraw();
    }
}

/// Creates a mailbox and its first address, for an actor not spawned yet (`spawn_actor` does
/// this for you).
pub(crate) fn mailbox<M>() -> (Addr<M>, Mailbox<M>) {
    let shared = Arc::new(Shared {
        queue: MessageQueue::new(),
        state: AtomicU64::new(0),
        addrs: AtomicUsize::new(1),
        waiter: WaiterSlot::new(),
        actor: OnceLock::new(),
    });
    (
        Addr {
            shared: shared.clone(),
        },
        Mailbox {
            shared,
            one_receiver: PhantomData,
        },
    )
}

/// The receiving end of an actor's mailbox. Owned by the actor; dropping it (the actor ending)
/// makes every later send fail and hand its message back.
///
/// ```
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let (addr, done) = threadlet::spawn_actor(|mb: threadlet::Mailbox<u32>| {
///         mb.iter().sum::<u32>()
///     });
///     for i in 1..=4 {
///         addr.send(i).unwrap();
///     }
///     drop(addr); // the last address: the actor's `recv` now returns `None`
///     assert_eq!(done.join().unwrap(), 10);
/// });
/// ```
///
/// A mailbox has exactly one receiver. It is `Send` (it can be handed to the actor, or moved
/// to another thread), but not `Sync`: two actors or threads cannot receive from one mailbox at
/// the same time, because the mailbox records a single waiter to wake.
///
/// ```
/// fn assert_send<T: Send>() {}
/// assert_send::<threadlet::Mailbox<u32>>();
/// ```
///
/// ```compile_fail,E0277
/// fn assert_sync<T: Sync>() {}
/// assert_sync::<threadlet::Mailbox<u32>>(); // error: `Mailbox` is not `Sync`
/// ```
///
/// ```compile_fail,E0277
/// use std::sync::Arc;
/// use threadlet::{Mailbox, RuntimeExt};
///
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// let (_addr, _h) = rt.spawn_actor(|mb: Mailbox<u32>| {
///     let mb = Arc::new(mb);
///     let other = mb.clone();
///     // error: `Arc<Mailbox<u32>>` is not `Send`, since `Mailbox<u32>` is not `Sync`
///     threadlet::spawn(move || other.recv());
///     mb.recv()
/// });
/// ```
pub struct Mailbox<M> {
    shared: Arc<Shared<M>>,
    /// `Send` but not `Sync`: one receiver.
    one_receiver: PhantomData<std::cell::Cell<()>>,
}

impl<M> Mailbox<M> {
    /// Waits for the next message. Returns `None` once the queue is empty and every [`Addr`] is
    /// gone or the mailbox is [closed](Mailbox::close) (or the runtime is shutting down).
    /// Suspends an actor; blocks a plain thread.
    ///
    /// ```
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| {
    ///     let mut got = Vec::new();
    ///     while let Some(n) = mb.recv() {
    ///         got.push(n);
    ///     }
    ///     got
    /// });
    /// addr.send(1).unwrap();
    /// addr.send(2).unwrap();
    /// drop(addr); // the last address: `recv` gives `None` once the queue is empty
    /// assert_eq!(h.join().unwrap(), [1, 2]);
    /// ```
    pub fn recv(&self) -> Option<M> {
        self.recv_until(None).ok()
    }

    /// Waits for the next message for at most `timeout`. A timeout too long to represent as an
    /// [`Instant`] (such as `Duration::MAX`) means no timeout, as with `std`'s channels.
    ///
    /// ```
    /// use std::time::Duration;
    /// use threadlet::channel::RecvTimeoutError;
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let (addr, h) = threadlet::spawn_actor(|mb: threadlet::Mailbox<&str>| {
    ///         let first = mb.recv_timeout(Duration::from_millis(10));
    ///         let second = mb.recv_timeout(Duration::from_secs(10));
    ///         (first, second)
    ///     });
    ///     addr.send_after(Duration::from_millis(50), "late");
    ///     assert_eq!(h.join().unwrap(), (Err(RecvTimeoutError::Timeout), Ok("late")));
    /// });
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Result<M, RecvTimeoutError> {
        // A timeout too long to represent as an `Instant` (`Duration::MAX`) means no deadline.
        self.recv_until(Instant::now().checked_add(timeout))
    }

    /// Waits for the next message until `deadline`.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use threadlet::channel::RecvTimeoutError;
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| {
    ///     let first = mb.recv_deadline(Instant::now() + Duration::from_secs(10));
    ///     let deadline = Instant::now() + Duration::from_millis(10);
    ///     let second = mb.recv_deadline(deadline); // nothing more is sent
    ///     (first, second, Instant::now() >= deadline)
    /// });
    /// addr.send(5).unwrap();
    /// assert_eq!(h.join().unwrap(), (Ok(5), Err(RecvTimeoutError::Timeout), true));
    /// ```
    pub fn recv_deadline(&self, deadline: Instant) -> Result<M, RecvTimeoutError> {
        self.recv_until(Some(deadline))
    }

    fn recv_until(&self, deadline: Option<Instant>) -> Result<M, RecvTimeoutError> {
        checkpoint();
        // SAFETY (every `find` here): `&self` is the one receiver (`Mailbox` is not `Sync`).
        match unsafe { self.shared.find() } {
            Found::Message(m) => return Ok(m),
            Found::Drained => return Err(RecvTimeoutError::Disconnected),
            Found::Empty => {}
        }
        let _waiting = Waiting(&self.shared);
        loop {
            match unsafe { self.shared.register_and_find() } {
                Found::Message(m) => return Ok(m),
                Found::Drained => return Err(RecvTimeoutError::Disconnected),
                Found::Empty => {}
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(RecvTimeoutError::Timeout);
            }
            let parked = match deadline {
                None => park(),
                Some(d) => park_until(d),
            };
            if parked.is_err() {
                // Cancelled: give up (dropping `_waiting` withdraws the registration).
                return Err(RecvTimeoutError::Disconnected);
            }
            // Woken by a sender (which took the registration), or spuriously: look before
            // registering again, so a message that woke us costs no registration.
            match unsafe { self.shared.find() } {
                Found::Message(m) => return Ok(m),
                Found::Drained => return Err(RecvTimeoutError::Disconnected),
                Found::Empty => {}
            }
        }
    }

    /// Takes the next message if there is one, without waiting.
    ///
    /// ```
    /// use threadlet::channel::TryRecvError;
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (_addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| {
    ///     let me = mb.addr();
    ///     let before = mb.try_recv();
    ///     me.send(7).unwrap();
    ///     (before, mb.try_recv())
    /// });
    /// assert_eq!(h.join().unwrap(), (Err(TryRecvError::Empty), Ok(7)));
    /// ```
    pub fn try_recv(&self) -> Result<M, TryRecvError> {
        checkpoint();
        // SAFETY: `&self` is the one receiver (`Mailbox` is not `Sync`).
        match unsafe { self.shared.find() } {
            Found::Message(m) => Ok(m),
            Found::Empty => Err(TryRecvError::Empty),
            Found::Drained => Err(TryRecvError::Disconnected),
        }
    }

    /// Closes the mailbox: from now on every [`Addr::send`] fails and hands its message back,
    /// and [`Addr::is_closed`] is true. Everything accepted before stays queued: the owner
    /// still receives it, then `recv` returns `None` (and `try_recv` and `recv_timeout` report
    /// `Disconnected`), even while addresses live. Closing twice does nothing more.
    ///
    /// This is how an actor stops without losing messages: close, then drain. Every send that
    /// returned `Ok` is received.
    ///
    /// ```
    /// use threadlet::channel::{SendError, TryRecvError};
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| {
    ///     let first = mb.recv();
    ///     mb.close();
    ///     mb.close(); // idempotent
    ///     let rest: Vec<u32> = mb.iter().collect(); // what was accepted before the close
    ///     (first, rest, mb.try_recv())
    /// });
    /// for i in 1..=3 {
    ///     addr.send(i).unwrap();
    /// }
    /// let (first, rest, after) = h.join().unwrap();
    /// assert_eq!((first, rest, after), (Some(1), vec![2, 3], Err(TryRecvError::Disconnected)));
    /// assert!(addr.is_closed());
    /// assert_eq!(addr.send(4), Err(SendError(4))); // refused, and handed back
    /// ```
    pub fn close(&self) {
        self.shared.close();
    }

    /// Whether [`close`](Mailbox::close) was called.
    ///
    /// ```
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (_addr, h) = rt.spawn_actor(|mb: Mailbox<()>| {
    ///     let before = mb.is_closed();
    ///     mb.close();
    ///     (before, mb.is_closed())
    /// });
    /// assert_eq!(h.join().unwrap(), (false, true));
    /// ```
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// An iterator that calls [`recv`](Mailbox::recv) until it returns `None`.
    ///
    /// ```
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<String>| mb.iter().collect::<Vec<_>>().join(" "));
    /// for word in ["hello", "mailbox"] {
    ///     addr.send(word.to_string()).unwrap();
    /// }
    /// drop(addr); // ends the iteration once both words are read
    /// assert_eq!(h.join().unwrap(), "hello mailbox");
    /// ```
    pub fn iter(&self) -> Iter<'_, M> {
        Iter { mailbox: self }
    }

    /// A new address of this mailbox (Erlang's `self()`). Holding one keeps `recv` from ever
    /// returning `None`.
    ///
    /// ```
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<&str>| {
    ///     let me = mb.addr();
    ///     me.send("note to self").unwrap();
    ///     mb.recv()
    /// });
    /// assert_eq!(h.join().unwrap(), Some("note to self"));
    /// drop(addr);
    /// ```
    pub fn addr(&self) -> Addr<M> {
        self.shared.new_addr()
    }

    /// Messages waiting now (accepted and not yet received).
    ///
    /// ```
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (_addr, h) = rt.spawn_actor(|mb: Mailbox<char>| {
    ///     let me = mb.addr();
    ///     me.send('a').unwrap();
    ///     me.send('b').unwrap();
    ///     let queued = mb.len();
    ///     mb.recv();
    ///     (queued, mb.len())
    /// });
    /// assert_eq!(h.join().unwrap(), (2, 1));
    /// ```
    pub fn len(&self) -> usize {
        // Acquire: a count only; it includes the messages of senders in flight.
        messages(self.shared.state.load(Acquire)) as usize
    }

    /// Whether no message is waiting now.
    ///
    /// ```
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (_addr, h) = rt.spawn_actor(|mb: Mailbox<()>| {
    ///     let empty_at_start = mb.is_empty(); // nobody has sent anything
    ///     mb.addr().send(()).unwrap();
    ///     (empty_at_start, mb.is_empty())
    /// });
    /// assert_eq!(h.join().unwrap(), (true, false));
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a handler actor's activation finds in its mailbox (`handler.rs`).
pub(crate) enum Poll<M> {
    /// A message.
    Message(M),
    /// Nothing now; the calling actor is published as the waiter (steps 1 and 2 of the wake
    /// protocol), so it may end its activation with `Step::Park`.
    Parked,
    /// Nothing, ever again: closed, or every address is gone.
    Ended,
}

impl<M> Mailbox<M> {
    /// Records the owning actor (see `run_with_mailbox` in `lib.rs`).
    pub(crate) fn set_actor(&self, id: ActorId) {
        let _ = self.shared.actor.set(id);
    }

    /// A handler actor's receive: a message, or the caller registered as the waiter. No
    /// suspension here: the activation returns, and its worker parks the actor (step 4 of the
    /// wake protocol in `threadlet-runtime`'s `wake.rs`).
    pub(crate) fn poll(&self) -> Poll<M> {
        // SAFETY (every `find` here): `&self` is the one receiver (`Mailbox` is not `Sync`).
        match unsafe { self.shared.find() } {
            Found::Message(m) => return Poll::Message(m),
            Found::Drained => return Poll::Ended,
            Found::Empty => {}
        }
        match unsafe { self.shared.register_and_find() } {
            Found::Message(m) => {
                self.shared.withdraw();
                Poll::Message(m)
            }
            Found::Drained => {
                self.shared.withdraw();
                Poll::Ended
            }
            // Stays registered while the actor parks.
            Found::Empty => Poll::Parked,
        }
    }

    /// Takes every queued message out (to be dropped by the caller). Senders still in flight
    /// may add more; the mailbox's drop waits for them.
    pub(crate) fn take_queued(&self) -> Vec<M> {
        // SAFETY: `&self` is the one receiver (`Mailbox` is not `Sync`).
        std::iter::from_fn(|| unsafe { self.shared.pop() }).collect()
    }

    /// An address that does not keep the mailbox open: a handler actor's context holds it, so
    /// that the actor still stops once every address handed out is gone (`handler.rs`).
    pub(crate) fn uncounted(&self) -> UncountedAddr<M> {
        UncountedAddr {
            shared: self.shared.clone(),
        }
    }
}

/// See [`Mailbox::uncounted`]: makes counted addresses on demand.
pub(crate) struct UncountedAddr<M> {
    shared: Arc<Shared<M>>,
}

impl<M> UncountedAddr<M> {
    /// A new (counted) address of the mailbox.
    pub(crate) fn addr(&self) -> Addr<M> {
        self.shared.new_addr()
    }
}

impl<M> Drop for Mailbox<M> {
    fn drop(&mut self) {
        self.shared.close();
        // Senders that entered before the close push, then exit, within a few instructions.
        let backoff = Backoff::new();
        // Acquire: pairs with their exits (release), so their pushes are linked and popped
        // below.
        while senders(self.shared.state.load(Acquire)) != 0 {
            backoff.snooze();
        }
        // SAFETY: this is the one receiver, ending. No lock is held: a message's destructor
        // may send to this mailbox again (and get its message back).
        while let Some(m) = unsafe { self.shared.pop() } {
            drop(m);
        }
    }
}

impl<M> fmt::Debug for Mailbox<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mailbox")
            .field("actor", &self.shared.actor.get())
            .field("len", &self.len())
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Iterator over received messages; see [`Mailbox::iter`]. `for msg in &mailbox` uses it too.
///
/// ```
/// use threadlet::{Mailbox, RuntimeExt};
///
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| {
///     let mut max = 0;
///     for n in &mb {
///         max = max.max(n);
///     }
///     max
/// });
/// for n in [3, 9, 4] {
///     addr.send(n).unwrap();
/// }
/// drop(addr);
/// assert_eq!(h.join().unwrap(), 9);
/// ```
pub struct Iter<'a, M> {
    mailbox: &'a Mailbox<M>,
}

impl<M> Iterator for Iter<'_, M> {
    type Item = M;

    fn next(&mut self) -> Option<M> {
        self.mailbox.recv()
    }
}

impl<'a, M> IntoIterator for &'a Mailbox<M> {
    type Item = M;
    type IntoIter = Iter<'a, M>;

    fn into_iter(self) -> Iter<'a, M> {
        self.iter()
    }
}

/// The address of an actor's mailbox: cheap to clone, sendable and shareable across threads.
///
/// `send` never blocks. Once the actor has ended or closed its mailbox, it returns the message
/// in the error.
///
/// ```
/// use threadlet::RuntimeExt;
/// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
/// let (addr, h) = rt.spawn_actor(|mb: threadlet::Mailbox<String>| mb.recv());
/// addr.send("hi".to_string()).unwrap();
/// assert_eq!(h.join().unwrap().as_deref(), Some("hi"));
/// // The actor has ended: the message comes back.
/// let err = addr.send("late".to_string()).unwrap_err();
/// assert_eq!(err.into_inner(), "late");
/// ```
pub struct Addr<M> {
    shared: Arc<Shared<M>>,
}

impl<M> Addr<M> {
    /// Puts `msg` into the mailbox and wakes the actor if it waits; never blocks. Fails, handing
    /// `msg` back, if the actor has ended or closed its mailbox ([`Mailbox::close`]).
    ///
    /// ```
    /// use threadlet::channel::SendError;
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.recv());
    /// addr.send(3).unwrap();
    /// assert_eq!(h.join().unwrap(), Some(3));
    /// assert_eq!(addr.send(4), Err(SendError(4))); // the actor has ended
    /// ```
    #[inline]
    pub fn send(&self, msg: M) -> Result<(), SendError<M>> {
        checkpoint();
        self.shared.send(msg)
    }

    /// Delivers `msg` once `delay` has passed, without blocking the caller. From inside an actor
    /// this costs one entry in the runtime's timer heap; elsewhere, a helper thread. If the actor
    /// has ended (or closed its mailbox) by then, the message is dropped (there is no one to
    /// hand it back to).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<&str>| mb.recv());
    /// let start = Instant::now();
    /// addr.send_after(Duration::from_millis(10), "tick"); // returns at once
    /// assert_eq!(h.join().unwrap(), Some("tick"));
    /// assert!(start.elapsed() >= Duration::from_millis(10));
    /// ```
    ///
    /// A delay too long to represent as an [`Instant`] (such as `Duration::MAX`) never comes:
    /// the message is dropped at once, and nothing is scheduled.
    ///
    /// ```
    /// use std::time::Duration;
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<&str>| mb.recv());
    /// addr.send_after(Duration::MAX, "never");
    /// addr.send("now").unwrap();
    /// assert_eq!(h.join().unwrap(), Some("now"));
    /// ```
    pub fn send_after(&self, delay: Duration, msg: M)
    where
        M: Send + 'static,
    {
        let Some(deadline) = Instant::now().checked_add(delay) else {
            drop(msg);
            return;
        };
        let addr = self.clone();
        call_at(deadline, move || {
            let _ = addr.send(msg);
        });
    }

    /// Whether the mailbox is closed: the actor has ended, or called [`Mailbox::close`] (a send
    /// would fail).
    ///
    /// ```
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<()>| mb.recv());
    /// assert!(!addr.is_closed()); // it waits for a message
    /// addr.send(()).unwrap();
    /// h.join().unwrap();
    /// assert!(addr.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// The id of the actor behind this address, when it was made by `spawn_actor`.
    ///
    /// ```
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<()>| (mb.addr().actor_id(), threadlet::current()));
    /// let id = h.id();
    /// assert_eq!(addr.actor_id(), Some(id));
    /// assert_eq!(h.join().unwrap(), (Some(id), Some(id))); // every address of it agrees
    /// ```
    pub fn actor_id(&self) -> Option<ActorId> {
        self.shared.actor.get().copied()
    }

    pub(crate) fn set_actor(&self, id: ActorId) {
        let _ = self.shared.actor.set(id);
    }

    /// Whether both addresses lead to the same mailbox.
    ///
    /// ```
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (a, ha) = rt.spawn_actor(|mb: Mailbox<u8>| mb.recv());
    /// let (b, hb) = rt.spawn_actor(|mb: Mailbox<u8>| mb.recv());
    /// assert!(a.same_mailbox(&a.clone()));
    /// assert!(!a.same_mailbox(&b));
    /// drop((a, b)); // no address left: both `recv`s give `None`
    /// assert_eq!((ha.join().unwrap(), hb.join().unwrap()), (None, None));
    /// ```
    pub fn same_mailbox(&self, other: &Addr<M>) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl<M> Clone for Addr<M> {
    fn clone(&self) -> Self {
        self.shared.new_addr()
    }
}

impl<M> Drop for Addr<M> {
    fn drop(&mut self) {
        // Release: pairs with the receiver's acquire load in `look`. The last address's drop
        // is then an exit (a read-modify-write of `state` that changes nothing): the receiver
        // that registers before it is woken, one that registers after it reads `addrs == 0`.
        if self.shared.addrs.fetch_sub(1, Release) == 1 {
            self.shared.exit(0);
        }
    }
}

impl<M> fmt::Debug for Addr<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Addr")
            .field("actor", &self.shared.actor.get())
            .finish()
    }
}
