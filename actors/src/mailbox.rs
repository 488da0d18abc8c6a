//! Mailboxes: the one typed inbox of each actor, and the [`Addr`]esses that send to it.
//!
//! # State and protocol
//!
//! One short lock guards the mailbox state: the queue, the parked receiver (if any), the count
//! of live addresses, whether the mailbox is closed (by [`Mailbox::close`] or because the
//! actor ended), and its link to its actor (see "Links to the actor"). Nothing else is shared.
//! A mailbox has exactly one receiver (`Mailbox` is not `Sync`), so there is at most one
//! waiter to record.
//!
//! Receiving (the actor, steps of the wake protocol in `threadlet-runtime`'s `wake.rs`):
//! 1. under the lock: pop a message and return it; else, if no address is left or the mailbox
//!    is closed, return `None`; else record the caller as the waiter;
//! 2. arm a guard, then park; when woken, disarm the guard and loop to 1. If the actor is
//!    unwound while parked (runtime shutdown starts the forced unwind inside `park`, so no code
//!    after it runs), the guard's `Drop` clears the recorded waiter if it is still this actor,
//!    so a mailbox that outlives its actor's stack does not keep the actor (and its runtime)
//!    allocated.
//!
//! Sending (any thread):
//! 1. under the lock: if the mailbox is closed, hand the message back; else push it and *take*
//!    the waiter out of the state;
//! 2. after unlocking, wake the waiter taken, if any.
//!
//! Exactly one sender takes a recorded waiter, because taking happens under the lock; that
//! sender's message is in the queue before the receiver can look again, so the receiver never
//! parks on a non-empty queue and is never woken twice for one park. The last `Addr` to drop
//! takes the waiter the same way and wakes it after unlocking, so a receiver waiting on a
//! mailbox that nobody can send to wakes and sees `None`. Nothing but bookkeeping runs under
//! the lock: wakes, and drops of messages and waiters, happen after it is released, since they
//! can run arbitrary code (a message's destructor may send to this mailbox again).
//!
//! # Bounded mailboxes
//!
//! A mailbox built with a capacity (`ActorBuilder::mailbox_capacity`) keeps a second list
//! under the same lock: the senders waiting for room, in arrival order, each with a slot that
//! holds its message (the channel module's `Slot`). Invariant: senders wait only while the
//! queue is full. Then:
//!
//! 1. a send finding the queue full pushes its slot, takes the recorded waiter (with capacity
//!    0 the owner takes messages straight from the slots, so an owner waiting on an empty
//!    queue must look again), and parks until its slot is completed;
//! 2. every take by the owner (`recv`, `try_recv`, a select, a handler's batch) that frees a
//!    place pops the first waiting slot *in the same step*, moves its message to the back of
//!    the queue, completes the slot, and wakes that sender after unlocking. With capacity 0,
//!    a take from the empty queue takes from the first slot directly;
//! 3. `close` (or the mailbox's drop) completes every waiting slot as refused, handing the
//!    message back in the same step; the senders wake and return it in `SendError`;
//! 4. a sender that gives up (a timeout, or `park` failing during shutdown) leaves the list
//!    under the lock and keeps what happened meanwhile: if the owner already moved its message
//!    in, the send succeeded; if shutdown unwinds it while parked, a guard leaves the list and
//!    the message, never accepted, drops with the sender.
//!
//! The owner moves messages in, so a place freed is never lost between senders: there is no
//! wake of a sender that then finds the place taken. The queue never holds more than the
//! capacity, and a flood of senders costs one parked slot each, not queue growth. The one
//! exception is a send that cannot wait (`try_send`, a timer's delivery) or may time out
//! (`send_timeout`) to a capacity-0 mailbox whose owner waits for a message in a receive, with
//! nobody in line: as a send on an unbuffered Go channel meets a waiting receiver, it is
//! accepted into the queue at once, and takes the owner's waiter, so the next one waits (or
//! is refused) until the owner has taken it. A `send` without a timeout always waits in line
//! until the owner has taken its message.
//!
//! # Conservation
//!
//! A message is either accepted (pushed while the mailbox is open: the actor receives it, or it
//! is dropped with the mailbox when the actor ends without reading it) or returned to the sender
//! in [`SendError`]. [`Mailbox::close`] marks the state closed under the lock: every later send
//! fails and returns its message, while everything accepted before stays queued for the owner
//! to drain, so "close, then drain" loses nothing. When the actor ends, its `Mailbox` drops and
//! closes the same way.
//!
//! # Links to the actor
//!
//! The spawner *attaches* the mailbox to its actor right after spawning (`Addr::attach`): the
//! mailbox records the actor's id and a weak reference to it (for [`Addr::kill`]), and
//! registers itself with the actor's join packet as its exit sink (`threadlet-runtime`'s
//! `set_exit_sink`), which tells it of the end before anything else hears of it (and holds the
//! mailbox until then: an actor may drop its `Mailbox`, and its addresses be gone, before it
//! ends). The mailbox keeps that end: monitors, links and the name registry made through an address wait in the
//! mailbox's own list of exit hooks until then, and one made after the end gets the `Down` at
//! once, however long after (the join packet, and with it the result, is gone by then if
//! nobody joins). What comes before the attach (a monitor, or a kill, from an address the
//! actor made of itself at once) waits in the mailbox and is acted on when the end comes, or
//! at the attach. A supervised child's mailbox is attached again to each incarnation
//! (`supervisor.rs`), once the one before has ended; lending it to the next one forgets what
//! the last one left (its end, its id, its trap channel), so that what the new one does
//! before its attach waits for it as for a new actor, and a link holds only between the
//! incarnations that made it. Each loan is numbered, and the current one is the mailbox's one
//! receiver: an old loan that an ended incarnation handed on receives nothing more (as from a
//! closed mailbox; one waiting when the next loan is made is woken to see it) and closes
//! nothing.
//!
//! # Memory
//!
//! Every actor has a mailbox, and most never use more than the queue: the state is kept to a
//! few words. An end is kept as a one-byte `Link` when it needs no more (an unnamed actor that
//! ended normally, was killed, or was cancelled: the `Down` is rebuilt from the id). Everything
//! else that few mailboxes use is in one block, `Rare`, allocated on first use: a bounded
//! mailbox's capacity and waiting senders (allocated with the mailbox), a supervised child's
//! loan number, pending exit hooks, a kept `Down`, a trap channel, a kill before the attach.
//! The queue keeps a lone message inline, and allocates a buffer only once it holds two
//! (`queue.rs`): most mailboxes hold at most one at a time, and never allocate for it.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use threadlet_runtime::__private::{
    ActorCell, ExitHook, ExitHooks, ExitSink, Listener, actor_of, call_exit_hook, kill_actor,
    mailbox_ended, set_exit_sink, set_own_exit_sink, unassigned_actor_id,
};
use threadlet_runtime::sync::Mutex;
use threadlet_runtime::{
    ActorId, Down, ExitReason, JoinHandle, MailboxStats, Wait, Waiter, checkpoint, park_on,
    park_on_until,
};

use crate::monitor::Monitor;
use crate::on_plain_thread;
use crate::supervisor::Restart;
use crate::tagged::TaggedArc;

use crate::channel::{
    self, Cell, RecvTimeoutError, SendError, SendTimeoutError, Slot, TryRecvError, TrySendError,
    oneshot,
};
use crate::timers::TimerHandle;

mod queue;
use queue::Queue;

struct State<M> {
    queue: Queue<M>,
    waiter: Option<Waiter>,
    /// The recorded waiter is a select's watch (`Mailbox::watch`), not a receive: a select
    /// has not chosen this mailbox yet, and may take another branch, so it is no receiver for
    /// a rendezvous to meet (`owner_waits_at_rendezvous`).
    watched: bool,
    /// The owning actor, set right after spawning; for a supervised child, its latest
    /// incarnation.
    actor: Option<ActorId>,
    /// The attached actor, for `Addr::kill`: weak, so that a mailbox does not keep its actor
    /// alive. Empty (`Weak::new`) until the attach, and again once the end is recorded.
    cell: Weak<ActorCell>,
    /// What few mailboxes use, allocated on first use (see "Memory" above).
    rare: Option<Box<Rare<M>>>,
    /// Live counted addresses.
    addrs: u32,
    /// Of those, addresses made or cloned on plain threads (`Addr::outside`): something
    /// outside the runtime may still send (the deadlock check, `threadlet-runtime`'s
    /// `deadlock.rs`).
    outside: u32,
    /// The most messages the queue has held at once, and the messages accepted, since the
    /// attached actor started (reported to the runtime, and reset, at its end).
    high_water: u32,
    received: u64,
    /// No more sends are accepted: the owner closed the mailbox, or dropped it.
    closed: bool,
    /// Built with a capacity (`ActorBuilder::mailbox_capacity`), which `rare` holds, with the
    /// senders waiting for room.
    bounded: bool,
    /// Where the mailbox stands with its actor.
    link: Link,
}

/// The senders a close hands their message back, to wake after unlocking.
type Refused<M> = VecDeque<Arc<Slot<M>>>;

/// The parts of a mailbox that few use, in one block allocated on first use (see "Memory"
/// above).
struct Rare<M> {
    /// The most messages the queue holds (`ActorBuilder::mailbox_capacity`), if `bounded`.
    cap: usize,
    /// Senders waiting for room, in arrival order, each slot holding its message (bounded
    /// mailboxes only; see "Bounded mailboxes" above).
    waiting_senders: VecDeque<Arc<Slot<M>>>,
    /// The number of the latest loan of a supervised child's mailbox (`Mailbox::lend`); 0 for
    /// a mailbox that was never lent.
    loan: u32,
    /// A supervised child's restart policy (`Child::restart`): an incarnation's end that it
    /// declines to restart closes the lent mailbox then, under the lock that records the end,
    /// so that no send is accepted for a child that will not run again.
    restart: Restart,
    /// `Addr::kill` (or a link's signal) came before the attach, which carries it out. (A plain
    /// kill of a supervised child with no incarnation attached is not kept: `Shared::kill_if`.)
    killed: bool,
    /// The supervisor is stopping the child (`UncountedAddr::close_for_stop`): a new loan
    /// leaves the mailbox closed, so that an incarnation started to drain it takes no new
    /// message and a refused sender is not accepted again.
    stopping: bool,
    /// The supervisor is done with the mailbox (`UncountedAddr::close_for_good`): it holds no
    /// name from then on, though an incarnation killed with its supervisor may still be
    /// unwinding (`UncountedAddr::holds_names`).
    for_good: bool,
    /// Exit hooks (monitors, links, the name registry) waiting for the actor's end.
    hooks: ExitHooks,
    /// The actor's end, when `link` is [`Link::Kept`].
    down: Option<Down>,
    /// Where exit signals from linked actors go when the actor traps exits
    /// (`Mailbox::trap_exits`, `Mailbox::trap_exits_as`); `None`: a signal kills it.
    trap: Option<Trap<M>>,
    /// The mailboxes (`Addr::mailbox_key`) of the actors the attached one is linked with, each
    /// with the incarnation linked (`Addr::link`): a link already there is not made twice.
    links: Vec<(usize, Incarnation)>,
    /// Ends recorded since this block was made, wrapping: which incarnation is the mailbox's
    /// current one, or the next to attach (`State::incarnation`).
    ends: u32,
}

/// An incarnation of a mailbox's actor, as a link names it (`Addr::link`): the number of ends
/// the mailbox had recorded before it (`Rare::ends`). A supervised child's later incarnation
/// has another number, and so does the first one of an unattached mailbox once it has ended;
/// an actor id could not name one that has not attached yet. A link makes the block if there
/// is none (a missing block counts 0, as a new one starts), and a block stays, so every end
/// after a link is counted.
type Incarnation = u32;

impl<M> Rare<M> {
    fn new() -> Rare<M> {
        Rare {
            cap: 0,
            waiting_senders: VecDeque::new(),
            loan: 0,
            restart: Restart::Permanent,
            killed: false,
            stopping: false,
            for_good: false,
            hooks: ExitHooks::new(),
            down: None,
            trap: None,
            links: Vec::new(),
            ends: 0,
        }
    }
}

/// Where a mailbox stands with its actor (see "Links to the actor" above).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    /// Not attached yet: exit hooks wait, and a kill is kept, in `rare`.
    Unattached,
    /// Attached to a live actor.
    Live,
    /// The (unnamed) actor returned; its `Down` is rebuilt from `actor`, as for the next two.
    Normal,
    /// The (unnamed) actor was killed.
    Killed,
    /// The (unnamed) actor was cancelled by shutdown.
    Cancelled,
    /// The actor ended; its `Down` is kept in `rare.down`.
    Kept,
}

impl<M> State<M> {
    /// One more counted address; `outside`: made on a plain thread.
    fn count_addr(&mut self, outside: bool) {
        // As `Arc` does for its count: an overflow (only after leaking billions of addresses)
        // aborts rather than wraps.
        self.addrs = self
            .addrs
            .checked_add(1)
            .unwrap_or_else(|| std::process::abort());
        self.outside += u32::from(outside);
    }

    /// Puts a message in the queue, and counts it for the dump and the metrics.
    #[inline]
    fn enqueue(&mut self, msg: M) {
        let len = self.queue.push_back(msg);
        self.received += 1;
        if len > self.high_water as usize {
            self.new_high_water(len);
        }
    }

    #[cold]
    fn new_high_water(&mut self, len: usize) {
        self.high_water = u32::try_from(len).unwrap_or(u32::MAX);
    }

    /// The counters, reset, with the live actor they belong to (for `mailbox_ended`); `None`
    /// when no actor is attached any more.
    fn take_counters(&mut self) -> Option<(Arc<ActorCell>, u64, usize)> {
        if self.received == 0 {
            // Nothing accepted since the last report (so no high water either).
            return None;
        }
        let cell = self.cell.upgrade()?;
        let received = std::mem::take(&mut self.received);
        let high_water = std::mem::take(&mut self.high_water) as usize;
        Some((cell, received, high_water))
    }

    fn stats(&self) -> MailboxStats {
        MailboxStats {
            len: self.queue.len(),
            high_water: self.high_water as usize,
            received: self.received,
            held_outside: self.outside as usize,
        }
    }

    /// The incarnation attached now, or the next one to attach if none is (see
    /// [`Incarnation`]); asked only while no end is recorded for it.
    fn incarnation(&self) -> Incarnation {
        self.rare.as_ref().map_or(0, |r| r.ends)
    }

    /// An end is recorded: the next incarnation has another number (see [`Incarnation`]).
    fn count_end(&mut self) {
        if let Some(r) = &mut self.rare {
            r.ends = r.ends.wrapping_add(1);
        }
    }

    /// The rare block, allocated now if it was not.
    fn rare(&mut self) -> &mut Rare<M> {
        self.rare.get_or_insert_with(|| Box::new(Rare::new()))
    }

    /// Records `w` as the waiter a send takes and wakes (`watched`: a select's watch); returns
    /// the one it replaces, to be dropped after unlocking.
    #[inline]
    fn publish(&mut self, w: Waiter, watched: bool) -> Option<Waiter> {
        self.watched = watched;
        self.waiter.replace(w)
    }

    #[inline]
    fn has_room(&self) -> bool {
        // Always for an unbounded mailbox: one flag, no look at the rare block.
        !self.bounded || self.queue.len() < self.rare.as_ref().map_or(usize::MAX, |r| r.cap)
    }

    /// Whether the owner of a capacity-0 mailbox waits for a message now (parked in `recv`, or
    /// a handler actor between messages), with nothing queued and no sender in line: the one
    /// time a send that cannot wait (`try_send`, a timer's delivery), or one that may time out
    /// (`send_timeout`), meets it, as a non-blocking send on an unbuffered Go channel meets a
    /// waiting receiver. The message then goes into the queue, and the sender takes the
    /// recorded waiter, so a second such send finds none and is refused or waits in line: the
    /// queue holds at most that one. Not an owner waiting
    /// in a select: it has not committed to this branch (a Go select commits to the case a
    /// sender meets; ours only watches), and if another branch fired, the message accepted
    /// would stay queued unreceived while the sender took it for received. (`to_a_select`: a
    /// select counts, for a timer's delivery, which no sender waits on: `Addr::try_send_now`.)
    fn owner_waits_at_rendezvous(&self, to_a_select: bool) -> bool {
        self.bounded
            && self.waiter.is_some()
            && (to_a_select || !self.watched)
            && self.queue.is_empty()
            && self
                .rare
                .as_ref()
                .is_some_and(|r| r.cap == 0 && r.waiting_senders.is_empty())
    }

    /// Takes the next message for the owner. The place it frees goes to the first waiting
    /// sender, whose message moves into the queue; with capacity 0 the message comes straight
    /// from that sender. Returns the sender to wake once the lock is released.
    #[inline]
    fn take(&mut self) -> (Option<M>, Option<Arc<Slot<M>>>) {
        if !self.bounded {
            // Nobody waits for room in an unbounded mailbox.
            return (self.queue.pop_front(), None);
        }
        self.take_letting_in()
    }

    /// Whether `take` would return a message.
    #[inline]
    fn has_message(&self) -> bool {
        !self.queue.is_empty()
            || (self.bounded
                && self
                    .rare
                    .as_ref()
                    .is_some_and(|r| !r.waiting_senders.is_empty()))
    }

    /// `take` for a bounded mailbox: lets the first sender waiting for room in.
    #[cold]
    fn take_letting_in(&mut self) -> (Option<M>, Option<Arc<Slot<M>>>) {
        match self.queue.pop_front() {
            Some(m) => {
                if self.has_room()
                    && let Some(s) = self.rare().waiting_senders.pop_front()
                {
                    let moved = s
                        .complete(Cell::Done, None)
                        .expect("a waiting sender holds its message");
                    self.enqueue(moved);
                    return (Some(m), Some(s));
                }
                (Some(m), None)
            }
            None => match self.rare().waiting_senders.pop_front() {
                Some(s) => {
                    let m = s
                        .complete(Cell::Done, None)
                        .expect("a waiting sender holds its message");
                    self.received += 1;
                    (Some(m), Some(s))
                }
                None => (None, None),
            },
        }
    }

    /// Marks the mailbox closed and hands every waiting sender its message back; the caller
    /// wakes the returned senders (and drops the waiter) after unlocking. `None`: no sender
    /// waited (always so for an unbounded mailbox), and nothing is left to drop.
    fn close(&mut self) -> (Option<Refused<M>>, Option<Waiter>) {
        self.closed = true;
        let refused = match &mut self.rare {
            Some(r) if !r.waiting_senders.is_empty() => {
                let refused = std::mem::take(&mut r.waiting_senders);
                for s in &refused {
                    s.complete_with(Cell::Disconnected);
                }
                Some(refused)
            }
            _ => None,
        };
        (refused, self.waiter.take())
    }

    /// The actor's end, if it is recorded.
    fn down(&self) -> Option<Down> {
        let reason = match self.link {
            Link::Unattached | Link::Live => return None,
            Link::Kept => return self.rare.as_ref().and_then(|r| r.down.clone()),
            Link::Normal => ExitReason::Normal,
            Link::Killed => ExitReason::Killed,
            Link::Cancelled => ExitReason::Cancelled,
        };
        Some(Down {
            id: self.actor.expect("an attached mailbox knows its actor"),
            name: None,
            reason,
        })
    }

    /// Records the actor's end: in the link byte when it says all, else in the rare block.
    fn record_end(&mut self, down: &Down) {
        let short = match (&down.reason, &down.name, &self.rare) {
            // With no rare block, and never lent, the id cannot change after the end.
            (ExitReason::Normal, None, None) => Some(Link::Normal),
            (ExitReason::Killed, None, None) => Some(Link::Killed),
            (ExitReason::Cancelled, None, None) => Some(Link::Cancelled),
            _ => None,
        };
        self.link = match short {
            Some(link) => link,
            None => {
                self.rare().down = Some(down.clone());
                Link::Kept
            }
        };
        self.count_end();
    }
}

struct Shared<M> {
    state: Mutex<State<M>>,
}

impl<M> Shared<M> {
    /// `Addr::kill`, or a kill kept for the attach; `false` if the actor had ended.
    fn kill(&self) -> bool {
        self.kill_if(None)
    }

    /// `kill`, of incarnation `linked` only when one is named (a link's signal): checked under
    /// the same lock as the kill, so that a lend in between cannot turn the signal into a kill
    /// kept for the next incarnation.
    fn kill_if(&self, linked: Option<Incarnation>) -> bool {
        let actor = {
            let mut st = self.state.lock();
            if linked.is_some_and(|inc| st.incarnation() != inc) {
                return false;
            }
            match st.link {
                // A supervised child's mailbox (lent: see `Mailbox::into_lent`) with no
                // incarnation at all: not started yet, or between an end and the next
                // incarnation's spawn (which records itself as the mailbox's `actor` before
                // its attach). A plain kill has no actor to kill (the one it aimed at has
                // ended, as in Erlang); kept, it would kill the next incarnation as it
                // started. A link's signal is for the incarnation it names, which may be the
                // next one (checked above), and is kept for it.
                Link::Unattached
                    if linked.is_none()
                        && st.actor.is_none()
                        && st.rare.as_ref().is_some_and(|r| r.loan != 0) =>
                {
                    return false;
                }
                Link::Unattached => {
                    st.rare().killed = true;
                    return true;
                }
                Link::Live => st.cell.clone(),
                _ => return false,
            }
        };
        actor.upgrade().is_some_and(|a| kill_actor(&a))
    }
}

impl<M: Send> ExitSink for Shared<M> {
    fn mailbox(&self) -> Option<MailboxStats> {
        Some(self.mailbox_stats())
    }

    /// The attached actor ended (see "Links to the actor" above): keeps the end, hands the
    /// incarnation's counters to the runtime's totals, and calls the hooks that waited for it.
    fn exited(&self, down: &Down) {
        let (hooks, actor, counters, closed, trap) = {
            let mut st = self.state.lock();
            if st.link != Link::Live || st.actor != Some(down.id) {
                // Not the attached incarnation (a supervisor attaches the next one only once
                // this one's end is recorded, so this does not happen).
                return;
            }
            let counters = st.take_counters();
            st.record_end(down);
            // A supervised child that will not be restarted: closed now, before anyone hears of
            // its end (its supervisor closes it for good when it hears; a send in between was
            // accepted and then dropped with the queue).
            let finished = st
                .rare
                .as_ref()
                .is_some_and(|r| r.loan != 0 && !r.restart.wants(&down.reason));
            let closed = if finished { Some(st.close()) } else { None };
            let (hooks, trap) = match &mut st.rare {
                Some(r) => {
                    // Its links end with it (a link made later signals at once), and so does
                    // its trap: a `trap_exits_as` closure that holds an address of this
                    // mailbox would otherwise keep it, and itself, alive for good.
                    r.links.clear();
                    (std::mem::take(&mut r.hooks), r.trap.take())
                }
                None => (ExitHooks::new(), None),
            };
            (hooks, std::mem::take(&mut st.cell), counters, closed, trap)
        };
        // User values, dropped after unlocking.
        drop(trap);
        if let Some((cell, received, high_water)) = counters {
            mailbox_ended(&cell, received, high_water);
        }
        if let Some((refused, waiter)) = closed {
            wake_refused(refused);
            // A receiver parked on it (what the incarnation handed the mailbox on to) sees the
            // close.
            if let Some(w) = waiter {
                w.wake_by_value();
            }
        }
        // The actor's memory can go now, even while addresses live.
        drop(actor);
        hooks.call_all(down);
    }
}

impl<M: Send> Shared<M> {
    /// The figures the dump and the deadlock check read (`ExitSink::mailbox`).
    fn mailbox_stats(&self) -> MailboxStats {
        self.state.lock().stats()
    }
}

/// Where a trapping actor's exit signals go.
enum Trap<M> {
    /// A channel of their own (`Mailbox::trap_exits`).
    Channel(channel::Sender<Down>),
    /// The actor's own mailbox, each made into a message (`Mailbox::trap_exits_as`).
    Message(Arc<dyn Fn(Down) -> M + Send + Sync>),
}

impl<M> Clone for Trap<M> {
    fn clone(&self) -> Self {
        match self {
            Trap::Channel(tx) => Trap::Channel(tx.clone()),
            Trap::Message(into) => Trap::Message(into.clone()),
        }
    }
}

/// The receiving side of a link: what happens to an actor when a linked one ends abnormally.
trait ExitSignal: Send + Sync {
    /// `linked`: the incarnation of this mailbox's actor that the link was made with.
    fn exit_signal(&self, down: &Down, linked: Incarnation);
    /// The linked actor `peer` (its mailbox's key and incarnation) has ended: the record of
    /// the link goes (`Rare::links`).
    fn forget_link(&self, peer: (usize, Incarnation));
}

impl<M: Send> ExitSignal for Shared<M> {
    /// Erlang's rule: a trapping actor gets the `Down` as a message, on its trap channel or in
    /// its mailbox; any other is killed. A link is the linked incarnation's: a supervised
    /// child's later incarnation (another actor on the same mailbox) hears nothing of it.
    fn exit_signal(&self, down: &Down, linked: Incarnation) {
        let trap = {
            let st = self.state.lock();
            if st.incarnation() != linked {
                return;
            }
            st.rare.as_ref().and_then(|r| r.trap.clone())
        };
        match trap {
            Some(Trap::Channel(tx)) => {
                // The receiver may be gone: the actor no longer listens, and is not killed.
                let _ = tx.send(down.clone());
            }
            Some(Trap::Message(into)) => {
                // User code, run here, outside the lock (contained as an exit hook is).
                let msg = into(down.clone());
                self.deliver_signal(msg, linked);
            }
            None => {
                self.kill_if(Some(linked));
            }
        }
    }

    fn forget_link(&self, peer: (usize, Incarnation)) {
        if let Some(r) = &mut self.state.lock().rare {
            r.links.retain(|&l| l != peer);
        }
    }
}

impl<M> Shared<M> {
    /// Queues an exit signal made into a message (`Trap::Message`), for incarnation `linked`,
    /// whatever the mailbox's capacity: a signal comes from a hook that
    /// cannot wait for room, and is not refused for want of it (Erlang's mailboxes have no
    /// bound). A closed mailbox (the actor is ending) drops it, after unlocking.
    fn deliver_signal(&self, msg: M, linked: Incarnation) {
        let waiter = {
            let mut st = self.state.lock();
            if st.closed || st.incarnation() != linked {
                drop(st);
                drop(msg);
                return;
            }
            st.enqueue(msg);
            st.waiter.take()
        };
        if let Some(w) = waiter {
            w.wake_by_value();
        }
    }
}

/// Creates a mailbox and its first address, for an actor not spawned yet (`spawn_actor` does
/// this for you).
pub(crate) fn mailbox<M>() -> (Addr<M>, Mailbox<M>) {
    mailbox_with(None)
}

/// A mailbox holding at most `cap` messages (`None`: unbounded).
pub(crate) fn mailbox_with<M>(cap: Option<usize>) -> (Addr<M>, Mailbox<M>) {
    let rare = cap.map(|cap| Box::new(Rare { cap, ..Rare::new() }));
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: Queue::new(),
            waiter: None,
            watched: false,
            actor: None,
            cell: Weak::new(),
            rare,
            addrs: 1,
            outside: u32::from(on_plain_thread()),
            high_water: 0,
            received: 0,
            closed: false,
            bounded: cap.is_some(),
            link: Link::Unattached,
        }),
    });
    (
        Addr {
            shared: TaggedArc::new(shared.clone(), on_plain_thread()),
        },
        Mailbox {
            shared,
            loan: 0,
            owner_bits: 0,
            ended: false,
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
    /// 0: the actor's own. Else lent by a supervisor to one incarnation of a child
    /// (`supervisor.rs`), as loan number `loan`: dropping it leaves the mailbox open, with its
    /// queue, for the next incarnation.
    loan: u32,
    /// A byte for its owner, in what would be padding: a handler actor's context keeps its
    /// flags here (`handler.rs`), so that the program of an actor of one word fits four words
    /// (a smaller allocation class). Zero when made; the mailbox never reads it.
    pub(crate) owner_bits: u8,
    /// Closed, drained and reported by its owner's end already (`end`): `Drop` has nothing
    /// left to do.
    ended: bool,
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
        loop {
            let on = {
                let mut st = self.shared.state.lock();
                if self.is_stale(&st) {
                    return Err(RecvTimeoutError::Disconnected);
                }
                if let (Some(m), sender) = st.take() {
                    drop(st);
                    if let Some(s) = sender {
                        s.waiter.wake();
                    }
                    return Ok(m);
                }
                if st.addrs == 0 || st.closed {
                    return Err(RecvTimeoutError::Disconnected);
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    // A waiter left behind only costs a spurious wake later; clear it anyway.
                    st.waiter = None;
                    return Err(RecvTimeoutError::Timeout);
                }
                let me = Waiter::current();
                // `Wait::Message` is a wait on the actor's own mailbox, which the deadlock
                // check reads (for a queued message, an address held outside). A mailbox
                // handed on to this actor by the one it is attached to is another's, which the
                // check cannot reach: a bare park, which it never takes for a deadlock. (One
                // not attached yet is the receiver's own, about to be attached to it.)
                let on = match st.actor {
                    Some(a) if Some(a) != me.actor_id() => Wait::Parked,
                    _ => Wait::Message,
                };
                st.publish(me, false);
                on
            };
            let published = Published(&self.shared);
            let parked = match deadline {
                None => park_on(on),
                Some(d) => park_on_until(on, d),
            };
            if parked.is_err() {
                // Cancelled: give up, and clear the waiter (the guard's drop does it).
                drop(published);
                return Err(RecvTimeoutError::Disconnected);
            }
            published.disarm();
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
        self.recv_now()
    }

    /// Closes the mailbox: from now on every [`Addr::send`] fails and hands its message back,
    /// and [`Addr::is_closed`] is true. Everything accepted before stays queued: the owner
    /// still receives it, then `recv` returns `None` (and `try_recv` and `recv_timeout` report
    /// `Disconnected`), even while addresses live. Closing twice does nothing more.
    ///
    /// This is how an actor stops without losing messages: close, then drain. Every send that
    /// returned `Ok` is received, by an actor that drains its mailbox after closing it (one
    /// that ends with messages queued drops them with its mailbox: a handler actor's
    /// `ctx.stop()` does; [`Context::close`](crate::Context::close) drains first).
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
        // The one receiver is the caller, which is not parked: only the senders waiting for
        // room (bounded mailboxes) are woken, with their messages handed back. An old loan
        // closes nothing: the mailbox is a later incarnation's now. A waiter is woken all the
        // same: a handler actor closing from `handle` published itself before the message
        // (`Poll::Last`), and its batch ends parked unless something woke it meanwhile
        // (`activation_may_park`); woken, it looks again and finds the mailbox ended. For
        // anyone else the wake is a spurious one.
        if let Some(w) = close_shared(&self.shared, false, self.loan) {
            w.wake_by_value();
        }
    }

    /// Traps exits (Erlang's `trap_exit`): from now on, an exit signal from a linked actor
    /// ([`Addr::link`]) does not kill this actor but arrives as a [`Down`] on the returned
    /// channel (every call gives a receiver of the same channel). Select on it beside the
    /// mailbox to supervise.
    ///
    /// ```
    /// use threadlet::{ExitReason, Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (child, c) = rt.spawn_actor(|mb: Mailbox<()>| {
    ///     mb.recv();
    ///     panic!("child fails");
    /// });
    /// let (_watcher, w) = rt.spawn_actor(move |mb: Mailbox<()>| {
    ///     let exits = mb.trap_exits();
    ///     mb.addr().link(&child);
    ///     child.send(()).unwrap();
    ///     exits.recv().unwrap().reason // survives, and hears why
    /// });
    /// assert_eq!(w.join().unwrap(), ExitReason::Panicked("child fails".into()));
    /// assert!(c.join().is_err());
    /// ```
    pub fn trap_exits(&self) -> channel::Receiver<Down> {
        trap_exits(&self.shared)
    }

    /// Traps exits, each made into a message of the actor's own by `into` and queued in this
    /// mailbox, as Erlang delivers `{'EXIT', Pid, Reason}`: what a handler actor, which waits
    /// on nothing but its mailbox, needs to hear of a linked actor's end while idle. `into`
    /// runs on the thread that records that end (it must not block; a panic in it is contained
    /// and the signal lost); the message is queued even in a full bounded mailbox. The latest
    /// of `trap_exits` and `trap_exits_as` decides where signals go.
    ///
    /// ```
    /// use threadlet::{Down, ExitReason, Mailbox, RuntimeExt};
    ///
    /// enum Msg {
    ///     Work,
    ///     Exit(Down),
    /// }
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (child, c) = rt.spawn_actor(|mb: Mailbox<()>| {
    ///     mb.recv();
    ///     panic!("child fails");
    /// });
    /// let (_watcher, w) = rt.spawn_actor(move |mb: Mailbox<Msg>| {
    ///     mb.trap_exits_as(Msg::Exit);
    ///     mb.addr().link(&child);
    ///     child.send(()).unwrap();
    ///     loop {
    ///         if let Some(Msg::Exit(down)) = mb.recv() {
    ///             return down.reason; // survives, and hears why, in its mailbox
    ///         }
    ///     }
    /// });
    /// assert_eq!(w.join().unwrap(), ExitReason::Panicked("child fails".into()));
    /// assert!(c.join().is_err());
    /// ```
    pub fn trap_exits_as(&self, into: impl Fn(Down) -> M + Send + Sync + 'static) {
        trap_exits_as(&self.shared, Arc::new(into));
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
        self.shared.state.lock().closed
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
        Addr::counted(&self.shared)
    }

    /// Messages waiting now.
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
        self.shared.state.lock().queue.len()
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
    /// A message, the last one queued: the calling actor is published as the waiter already,
    /// so once it has handled the message its batch may end with `Step::Park` without another
    /// poll, if nothing woke it meanwhile and it did not suspend
    /// (`threadlet_runtime::activation_may_park`).
    Last(M),
    /// Nothing now; the calling actor is published as the waiter (steps 1 and 2 of the wake
    /// protocol), so it may end its activation with `Step::Park`.
    Parked,
    /// Nothing, ever again: closed, or every address is gone.
    Ended,
    /// A message is waiting, but the batch has had its time slice: it ends, with the actor
    /// queued again (`Step::Yield`).
    Spent,
}

impl<M> Mailbox<M> {
    /// This mailbox as a lent one, whose drop leaves it open (for a supervisor that made it).
    pub(crate) fn into_lent(mut self) -> Mailbox<M> {
        self.loan = next_loan(&self.shared);
        self
    }

    /// Whether a supervisor lent this mailbox (see `loan`).
    pub(crate) fn is_lent(&self) -> bool {
        self.loan != 0
    }

    /// Whether this is an old loan of a supervised child's mailbox, kept by whatever an ended
    /// incarnation handed it to, while a later loan is out: it receives nothing any more (as
    /// if the mailbox were closed) and closes nothing, so that the current incarnation stays
    /// its one receiver (two would overwrite each other's waiter, and one would miss its
    /// wake-up).
    fn is_stale(&self, st: &State<M>) -> bool {
        self.loan != 0 && st.rare.as_ref().is_some_and(|r| r.loan != self.loan)
    }

    /// Records the owning actor (see `run_with_mailbox` in `lib.rs`).
    pub(crate) fn set_actor(&self, id: ActorId) {
        self.shared.state.lock().actor = Some(id);
    }

    /// Tells the calling actor's end to this mailbox, from the actor's side, before it first
    /// waits on it: `attach` does the same from the spawner's side once `spawn` returns, which
    /// an actor started from a plain thread may outrun, and the deadlock check reads a waiting
    /// actor's mailbox (for a message queued, an address held outside) through what its end is
    /// told to. Called only for an actor spawned from a plain thread: a spawner that is an
    /// actor is running or runnable until its `attach` (nothing between the spawn and the
    /// attach waits), and the deadlock check reports nothing while any actor is, so the
    /// attach alone is in time.
    pub(crate) fn sink_for_self(&self)
    where
        M: Send + 'static,
    {
        set_own_exit_sink(self.shared.clone() as Arc<dyn ExitSink>);
    }

    /// The actor whose mailbox this is, once `set_actor` (or an attach) has told it.
    pub(crate) fn actor_id(&self) -> Option<ActorId> {
        self.shared.state.lock().actor
    }

    /// A handler actor's receive: a message, or the caller published as the waiter. No
    /// suspension here: the activation returns, and its worker does step 4 of the protocol.
    /// With `past_first` (the batch has handled a message already), a message
    /// waiting is left there if the activation has been preempted or the actor killed
    /// ([`Poll::Spent`]); the check costs nothing when the mailbox is empty.
    pub(crate) fn poll(&self, past_first: bool) -> Poll<M> {
        let mut st = self.shared.state.lock();
        if st.has_message() {
            if past_first && threadlet_runtime::activation_preempted() {
                return Poll::Spent;
            }
            let (m, sender) = st.take();
            // The message was the last one of an unbounded mailbox that stays open: publish
            // the caller as the waiter now, in this hold (step 1 of the wake protocol, with
            // step 2's look done: the queue is empty), so that the batch may end parked after
            // `handle` without locking again (`Poll::Last`). Not for a bounded mailbox: a
            // waiter there tells a rendezvous send that the owner waits, which it does not
            // while it handles this message.
            if !st.bounded && !st.has_message() && st.addrs != 0 && !st.closed {
                // Only a bounded mailbox lets a waiting sender in.
                debug_assert!(sender.is_none());
                let old = st.publish(Waiter::current(), false);
                drop(st);
                drop(old);
                return Poll::Last(m.expect("`has_message` said so"));
            }
            drop(st);
            if let Some(s) = sender {
                s.waiter.wake();
            }
            return Poll::Message(m.expect("`has_message` said so"));
        }
        if st.addrs == 0 || st.closed {
            return Poll::Ended;
        }
        st.publish(Waiter::current(), false);
        Poll::Parked
    }

    /// Takes every queued message out (to be dropped by the caller, outside the lock).
    /// `try_recv` without the safe point, for `select` (see `channel::Sender::send_now`).
    pub(crate) fn recv_now(&self) -> Result<M, TryRecvError> {
        let mut st = self.shared.state.lock();
        if self.is_stale(&st) {
            return Err(TryRecvError::Disconnected);
        }
        match st.take() {
            (Some(m), sender) => {
                drop(st);
                if let Some(s) = sender {
                    s.waiter.wake();
                }
                Ok(m)
            }
            (None, _) if st.addrs == 0 || st.closed => Err(TryRecvError::Disconnected),
            (None, _) => Err(TryRecvError::Empty),
        }
    }

    /// For `select`: records `w` as the waiter, as `recv` records itself (a send or the last
    /// address going takes it and wakes it).
    pub(crate) fn watch(&self, w: &Waiter) {
        let old = {
            let mut st = self.shared.state.lock();
            if self.is_stale(&st) {
                return; // its `recv_now` reports the end at once
            }
            st.publish(w.clone(), true)
        };
        drop(old);
    }

    /// For `select`: clears the waiter if it is still `w`.
    pub(crate) fn unwatch(&self, w: &Waiter) {
        let mine = {
            let mut st = self.shared.state.lock();
            if st.waiter.as_ref().is_some_and(|x| x.same_as(w)) {
                st.waiter.take()
            } else {
                None
            }
        };
        drop(mine);
    }

    /// The owner's end (not a lent mailbox's), under one lock: closes the mailbox (a receiver
    /// parked on it is woken), hands its counters on, and takes its queue for the caller to
    /// drop. `Drop` then does nothing more.
    pub(crate) fn end(&mut self) -> Queue<M> {
        debug_assert_eq!(
            self.loan, 0,
            "a lent mailbox is not ended by its incarnation"
        );
        let (waiter, left) = close_taking(&self.shared, true, 0);
        self.ended = true;
        if let Some(w) = waiter {
            w.wake_by_value();
        }
        left
    }

    /// An address that does not keep the mailbox open: a supervisor holds one for each child,
    /// to lend the child's mailbox to its next incarnation (`supervisor.rs`).
    pub(crate) fn uncounted(&self) -> UncountedAddr<M> {
        UncountedAddr {
            shared: self.shared.clone(),
        }
    }
}

/// `Mailbox::trap_exits` (and so `Context::trap_exits`): the trap channel, made on first use.
fn trap_exits<M>(shared: &Shared<M>) -> channel::Receiver<Down> {
    let mut st = shared.state.lock();
    let rare = st.rare();
    if let Some(Trap::Channel(tx)) = &rare.trap {
        return tx.receiver();
    }
    let (tx, rx) = channel::unbounded();
    let old = rare.trap.replace(Trap::Channel(tx));
    drop(st);
    // A `trap_exits_as` closure, dropped after unlocking.
    drop(old);
    rx
}

/// `Mailbox::trap_exits_as` (and so `Context::trap_exits_as`).
fn trap_exits_as<M>(shared: &Shared<M>, into: Arc<dyn Fn(Down) -> M + Send + Sync>) {
    let old = shared.state.lock().rare().trap.replace(Trap::Message(into));
    // Dropped after unlocking: a closure's captures are user values.
    drop(old);
}

/// See [`Mailbox::uncounted`]: makes counted addresses on demand.
pub(crate) struct UncountedAddr<M> {
    shared: Arc<Shared<M>>,
}

impl<M> UncountedAddr<M> {
    /// The mailbox for the next incarnation of a supervised child: dropping it does not close
    /// the mailbox. The supervisor lends it only once the previous incarnation has ended, so
    /// there is one receiving incarnation at a time; but the previous incarnation's `Mailbox`
    /// may still be dropped after that (a handler actor's program is dropped after its end is
    /// reported), which is why each loan has a number: see `Drop for Mailbox`.
    pub(crate) fn lend(&self) -> Mailbox<M> {
        Mailbox {
            shared: self.shared.clone(),
            loan: next_loan(&self.shared),
            owner_bits: 0,
            ended: false,
            one_receiver: PhantomData,
        }
    }

    /// The supervised child's restart policy: an incarnation's end that it declines closes the
    /// mailbox (see `Rare::restart`).
    pub(crate) fn set_restart(&self, restart: Restart) {
        self.shared.state.lock().rare().restart = restart;
    }

    /// The supervisor is done with the mailbox: closes it as an actor's end does (waiting
    /// senders get their message back; what is queued is dropped, after unlocking).
    ///
    /// If no incarnation is attached (the supervisor gave up, or went, before one attached),
    /// none ever will be: what waits for an end there (monitors and links made through an
    /// address) hears [`ExitReason::NoProc`] now, as a monitor of an address whose mailbox goes
    /// without an actor does, instead of waiting for an end that cannot come while addresses
    /// keep the mailbox.
    pub(crate) fn close_for_good(&self) {
        let never_attached = {
            let mut st = self.shared.state.lock();
            st.rare().for_good = true;
            if st.link == Link::Unattached {
                let down = Down {
                    id: unassigned_actor_id(),
                    name: None,
                    reason: ExitReason::NoProc,
                };
                st.link = Link::Kept;
                let rare = st.rare();
                rare.down = Some(down.clone());
                rare.links.clear();
                rare.ends = rare.ends.wrapping_add(1);
                Some((std::mem::take(&mut rare.hooks), down))
            } else {
                None
            }
        };
        // A receiver may be parked on it (what an incarnation handed the mailbox on to, or a
        // handler child between messages): it must see the close.
        let (waiter, left) = close_taking(&self.shared, true, 0);
        if let Some(w) = waiter {
            w.wake_by_value();
        }
        // What the child left queued is dropped here, on its supervisor's stack: a panic in a
        // message's destructor is the ended child's (as a handler actor's own end contains
        // it), and must not end the supervisor, taking the siblings with it. A kill's or
        // shutdown's unwind of the supervisor passes through.
        let _ = threadlet_runtime::catch_actor_panic(move || drop(left));
        if let Some((hooks, down)) = never_attached {
            hooks.call_all(&down);
        }
    }

    /// Closes the mailbox but keeps its queue for the owner to drain (a graceful stop).
    pub(crate) fn close(&self) {
        // The owner may be parked in `recv` on an empty queue: it must see the close.
        if let Some(w) = close_shared(&self.shared, false, 0) {
            w.wake_by_value();
        }
    }

    /// How many messages are queued (accepted, not yet received).
    pub(crate) fn queued(&self) -> usize {
        self.shared.state.lock().queue.len()
    }

    /// Closes the mailbox for the child's stop, keeping the queue for it to drain, and for any
    /// incarnation started after to drain it (`lend_next` leaves it closed).
    pub(crate) fn close_for_stop(&self) {
        self.shared.state.lock().rare().stopping = true;
        self.close();
    }

    /// Undoes [`close_for_stop`](Self::close_for_stop) for the next loan, which opens the
    /// mailbox again (`lend_next`): a stopped child is restarted. Until then it stays closed.
    pub(crate) fn end_stop(&self) {
        if let Some(rare) = self.shared.state.lock().rare.as_mut() {
            rare.stopping = false;
        }
    }

    /// Whether the mailbox's names stay its own (`names.rs`): while it is open, or while its
    /// actor is live though it closed it (close, then drain). A closed mailbox whose actor has
    /// ended, or that no actor ever took, holds no name; nor does a supervised child's that its
    /// supervisor is done with (`close_for_good`): an incarnation killed with a nested
    /// supervisor may unwind after the restarted supervisor has started the next one, which
    /// takes the name.
    pub(crate) fn holds_names(&self) -> bool {
        let st = self.shared.state.lock();
        !st.closed || (st.link == Link::Live && !st.rare.as_ref().is_some_and(|r| r.for_good))
    }

    /// The mailbox's identity (as `Addr::mailbox_key`).
    pub(crate) fn mailbox_key(&self) -> usize {
        Arc::as_ptr(&self.shared) as *const () as usize
    }

    /// A new (counted) address of the mailbox, while it is open and some counted address is
    /// still there; `None` once the last one has gone. An uncounted address must not bring a
    /// mailbox back from there (as tokio's `WeakSender::upgrade` does not): its actor has seen,
    /// or is about to see, every address gone (`recv` returning `None`, a handler actor
    /// stopping), and a message sent through a revived address would be accepted and then
    /// dropped with the mailbox, unreceived. (The actor itself may still make an address of
    /// its own mailbox: that is its decision, made while it runs.)
    pub(crate) fn upgrade(&self) -> Option<Addr<M>> {
        let outside = on_plain_thread();
        {
            let mut st = self.shared.state.lock();
            if st.closed || st.addrs == 0 {
                return None;
            }
            st.count_addr(outside);
        }
        Some(Addr {
            shared: TaggedArc::new(self.shared.clone(), outside),
        })
    }
}

impl<M> Drop for Mailbox<M> {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        if self.loan != 0 {
            // Back to the supervisor: this incarnation's waiter goes, unless a later loan is
            // out already; then the waiter, if any, is the next incarnation's, which must stay
            // (taking it would lose that incarnation's next wake-up).
            let waiter = {
                let mut st = self.shared.state.lock();
                if st.rare.as_ref().is_some_and(|r| r.loan == self.loan) {
                    st.waiter.take()
                } else {
                    None
                }
            };
            drop(waiter);
            return;
        }
        drop(close_shared(&self.shared, true, 0));
    }
}

/// Numbers a new loan of a supervised child's mailbox (`UncountedAddr::lend`).
fn next_loan<M>(shared: &Shared<M>) -> u32 {
    let (loan, waiter, trap) = lend_next(&mut shared.state.lock());
    // The last incarnation's trap, dropped after unlocking: a `trap_exits_as` closure's
    // captures are user values (an address of this very mailbox, whose drop takes its lock).
    drop(trap);
    // A receiver of the last loan parked here (whatever an ended incarnation handed its
    // mailbox to): woken, it finds its loan old, and ends (`Mailbox::is_stale`).
    if let Some(w) = waiter {
        w.wake_by_value();
    }
    loan
}

/// `next_loan`'s step under the lock: the new loan's number, the waiter it displaces, and the
/// last incarnation's trap, for the caller to drop after unlocking.
fn lend_next<M>(st: &mut State<M>) -> (u32, Option<Waiter>, Option<Trap<M>>) {
    // A new incarnation: until its spawner attaches it, the address names no actor, as a new
    // actor's does before its attach. What the last incarnation left (its end, its id, its trap
    // channel) was its own: kept, its end would answer a monitor, a name's registration or a
    // link made by the new incarnation before its attach as if that one had ended, and its trap
    // would shield an incarnation that never asked to trap. (A lend comes only after the last
    // incarnation's end is recorded: the supervisor waits for its `Down`, which the mailbox
    // hears first.)
    st.link = Link::Unattached;
    st.actor = None;
    st.cell = Weak::new();
    // A mailbox the last incarnation closed ("close, then drain") opens again: the next one
    // would find it closed at once, end, and be restarted, until the supervisor gave up. Not
    // one its supervisor closed to stop the child: the new incarnation only drains it.
    if !st.rare.as_ref().is_some_and(|r| r.stopping) {
        st.closed = false;
    }
    let rare = st.rare();
    rare.down = None;
    let trap = rare.trap.take();
    // The last incarnation's links went at its end (`exited`); what is recorded now are links
    // made since, while none was attached (the child not started yet, or a start that failed),
    // which are the next incarnation's, as their hooks are (`Addr::link`): kept.
    // Wrapping past u32::MAX (4 billion restarts) skips 0, which means "never lent".
    rare.loan = rare.loan.wrapping_add(1).max(1);
    (rare.loan, st.waiter.take(), trap)
}

/// Closes a mailbox: waiting senders are handed their messages back; with `drop_queue` (the
/// mailbox's end: its actor's, or its supervisor's) the queue is dropped too, else it stays
/// for the owner to drain. Returns the owner's recorded waiter, for the caller to wake or drop.
/// `loan`: the caller's loan (0 for none); an old one closes nothing.
fn close_shared<M>(shared: &Shared<M>, drop_queue: bool, loan: u32) -> Option<Waiter> {
    let (waiter, left) = close_taking(shared, drop_queue, loan);
    // Dropped outside the lock: a message's destructor may send to this mailbox again.
    drop(left);
    waiter
}

/// `close_shared` under one lock, with the queue taken (with `take_queue`) returned to the
/// caller, to drop outside the lock, rather than dropped here.
fn close_taking<M>(shared: &Shared<M>, take_queue: bool, loan: u32) -> (Option<Waiter>, Queue<M>) {
    let (refused, waiter, left, counters) = {
        let mut st = shared.state.lock();
        if loan != 0 && st.rare.as_ref().is_some_and(|r| r.loan != loan) {
            // Asked through an old loan (`Mailbox::is_stale`).
            return (None, Queue::new());
        }
        let (refused, waiter) = st.close();
        let (left, counters) = if take_queue {
            // The mailbox's end: its counters go to the runtime's totals now, while its actor
            // is still there to name the runtime (the exit sink, which would do it at the
            // actor's end, goes with the last reference to the mailbox).
            (std::mem::take(&mut st.queue), st.take_counters())
        } else {
            (Queue::new(), None)
        };
        (refused, waiter, left, counters)
    };
    if let Some((cell, received, high_water)) = counters {
        mailbox_ended(&cell, received, high_water);
    }
    wake_refused(refused);
    (waiter, left)
}

/// Wakes the senders that a close refused (each finds its message handed back in its slot).
#[inline]
fn wake_refused<M>(refused: Option<Refused<M>>) {
    if let Some(refused) = refused {
        for s in refused {
            s.waiter.wake();
        }
    }
}

/// The guard of a published waiter (step 2 of receiving): armed only while the receiver parks.
/// The cancel guard of a sender waiting for room: leaves the line if the sender gives up or
/// its actor is unwound while parked (shutdown), so that no dead slot stays in the line.
struct WaitingSender<'a, M> {
    shared: &'a Shared<M>,
    slot: &'a Arc<Slot<M>>,
}

impl<M> WaitingSender<'_, M> {
    /// Leaves the line (if still in it) under the lock and returns the slot's final state:
    /// still `Waiting` if the owner did not take the message.
    fn leave(&self) -> Cell<M> {
        let removed = {
            let mut st = self.shared.state.lock();
            let line = &mut st.rare().waiting_senders;
            let removed = line
                .iter()
                .position(|s| Arc::ptr_eq(s, self.slot))
                .and_then(|i| line.remove(i));
            // Out of the line, nobody else completes the slot: its state is final.
            let cell = std::mem::replace(&mut *self.slot.cell.lock(), Cell::Done(None));
            (cell, removed)
        };
        removed.0
    }

    fn disarm(self) {
        // Only references inside: forgetting leaks nothing.
        std::mem::forget(self);
    }
}

impl<M> Drop for WaitingSender<'_, M> {
    /// Reached only when the stack unwinds out of `park`: the message was never accepted, and
    /// drops here, unlocked, with the unwinding actor.
    fn drop(&mut self) {
        drop(self.leave());
    }
}

struct Published<'a, M>(&'a Shared<M>);

impl<M> Published<'_, M> {
    /// `park` returned normally: a sender took the waiter, or the wakeup was spurious and the
    /// next turn publishes it again.
    fn disarm(self) {
        // Only a reference inside: forgetting leaks nothing.
        std::mem::forget(self);
    }
}

impl<M> Drop for Published<'_, M> {
    /// The receiver gives up: `park` was cancelled, or the actor's stack is unwinding out of
    /// it. Clears the recorded waiter if it is still this one (no sender took it).
    fn drop(&mut self) {
        let me = Waiter::current();
        let mine = {
            let mut st = self.0.state.lock();
            if st.waiter.as_ref().is_some_and(|w| w.same_as(&me)) {
                st.waiter.take()
            } else {
                None
            }
        };
        drop((mine, me));
    }
}

impl<M> fmt::Debug for Mailbox<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let actor = self.shared.state.lock().actor;
        f.debug_struct("Mailbox")
            .field("actor", &actor)
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

/// The answer half of a request ([`Addr::ask`]): the actor sends the answer with it, once.
/// Dropping it unsent tells the asker at once ([`AskError::Dropped`]).
pub struct Reply<R>(oneshot::Sender<R>);

impl<R> Reply<R> {
    /// Answers the request. An answer to an asker that has given up (a timeout) is dropped.
    pub fn send(self, answer: R) {
        drop(self.0.send(answer));
    }

    /// Whether the asker has given up (timed out, or its thread or actor is gone): the work of
    /// answering can be skipped.
    pub fn is_abandoned(&self) -> bool {
        self.0.is_closed()
    }
}

impl<R> fmt::Debug for Reply<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reply").finish_non_exhaustive()
    }
}

/// A reply that answers through a one-shot channel made by hand: for a request that comes by
/// another way than [`Addr::ask`] (a job on a channel that a pool of actors shares), or for a
/// test that calls a handler directly.
///
/// ```
/// use threadlet::Reply;
/// use threadlet::channel::oneshot;
///
/// let (tx, rx) = oneshot::<u32>();
/// let reply = Reply::from(tx);
/// assert!(!reply.is_abandoned());
/// reply.send(42);
/// assert_eq!(rx.recv(), Ok(42));
/// ```
impl<R> From<oneshot::Sender<R>> for Reply<R> {
    fn from(tx: oneshot::Sender<R>) -> Reply<R> {
        Reply(tx)
    }
}

/// Why an [`Addr::ask`] got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskError {
    /// The actor had ended or closed its mailbox: the request was refused (and dropped).
    Closed,
    /// The request's [`Reply`] was dropped without an answer.
    Dropped,
    /// No answer within the timeout of [`Addr::ask_timeout`].
    Timeout,
    /// A handler actor asked its own mailbox: it takes its next message only once the
    /// current one is handled, so the request could never be answered (Erlang's
    /// `calling_self`). The request was not made.
    CallingSelf,
}

impl fmt::Display for AskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AskError::Closed => "the actor's mailbox is closed",
            AskError::Dropped => "the request was dropped without an answer",
            AskError::Timeout => "no answer within the timeout",
            AskError::CallingSelf => "a handler actor asked its own mailbox",
        })
    }
}

impl std::error::Error for AskError {}

/// The address of an actor's mailbox: cheap to clone, sendable and shareable across threads.
///
/// `send` to an unbounded mailbox (the default) never blocks; to a full bounded one
/// ([`ActorBuilder::mailbox_capacity`](crate::ActorBuilder::mailbox_capacity)) it waits for
/// room. Once the actor has ended or closed its mailbox, it returns the message in the error.
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
    /// Flagged if made or cloned on a plain thread: then counted in the mailbox's `outside`
    /// until dropped (`State::outside`); an address moved to a plain thread later is not
    /// counted. One word with its flag (`tagged.rs`): applications hold many addresses.
    shared: TaggedArc<Shared<M>>,
}

impl<M> Addr<M> {
    /// A new address of `shared`'s mailbox, counted (as held outside if made on a plain
    /// thread).
    fn counted(shared: &Arc<Shared<M>>) -> Addr<M> {
        let outside = on_plain_thread();
        shared.state.lock().count_addr(outside);
        Addr {
            shared: TaggedArc::new(shared.clone(), outside),
        }
    }

    /// Puts `msg` into the mailbox and wakes the actor if it waits. Never blocks on an unbounded
    /// mailbox; on a full bounded one it suspends the calling actor (blocks a plain thread)
    /// until there is room, or until the mailbox closes. Fails, handing `msg` back, if the
    /// actor has ended or closed its mailbox ([`Mailbox::close`]).
    ///
    /// A handler actor that sends to its own full mailbox (from `started`, `handle` or
    /// `stopped`) gets the message back at once: it takes its next message only once `handle`
    /// returns, so no room could come. A process actor that does waits forever, as a goroutine
    /// sending on a full channel that only it reads (it may have handed its `Mailbox` on to an
    /// actor that makes room); use [`try_send`](Addr::try_send) there.
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
        let waiter = {
            let mut st = self.shared.state.lock();
            if st.closed {
                return Err(SendError(msg));
            }
            if !st.has_room() {
                drop(st);
                return self
                    .send_waiting(msg, None)
                    .map_err(|e| SendError(e.into_inner()));
            }
            st.enqueue(msg);
            st.waiter.take()
        };
        if let Some(w) = waiter {
            w.wake_by_value();
        }
        Ok(())
    }

    /// Sends without waiting: fails with `Full` when a bounded mailbox has no room. A
    /// capacity-0 mailbox has room only for a message its owner is waiting for: `try_send`
    /// succeeds while the owner waits to receive, and is refused otherwise.
    ///
    /// ```
    /// use threadlet::channel::TrySendError;
    /// use threadlet::{ActorBuilder, Mailbox};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = ActorBuilder::new()
    ///     .mailbox_capacity(2)
    ///     .spawn_actor_on(&rt, |mb: Mailbox<u8>| {
    ///         threadlet::sleep(std::time::Duration::from_millis(20));
    ///         mb.iter().count()
    ///     })
    ///     .unwrap();
    /// assert_eq!(addr.try_send(1), Ok(()));
    /// assert_eq!(addr.try_send(2), Ok(()));
    /// assert_eq!(addr.try_send(3), Err(TrySendError::Full(3))); // the actor is still asleep
    /// assert_eq!(addr.len(), 2);
    /// drop(addr);
    /// assert_eq!(h.join().unwrap(), 2);
    /// ```
    pub fn try_send(&self, msg: M) -> Result<(), TrySendError<M>> {
        checkpoint();
        self.try_send_now(msg, false)
    }

    /// `try_send` without the safe point, for a caller that holds a lock of its own (a
    /// delayed message's slot, `timers.rs`). `to_a_select`: a capacity-0 mailbox whose owner
    /// waits in a select takes the message too (`State::owner_waits_at_rendezvous`). Timers
    /// ask for that: a delayed message has no sender that takes it for received, and is only
    /// due to arrive; it stays queued for the next receive if the select fires another branch,
    /// where refusing it would leave it retried for as long as the owner waits only in selects.
    pub(crate) fn try_send_now(&self, msg: M, to_a_select: bool) -> Result<(), TrySendError<M>> {
        let waiter = {
            let mut st = self.shared.state.lock();
            if st.closed {
                return Err(TrySendError::Disconnected(msg));
            }
            if !st.has_room() && !st.owner_waits_at_rendezvous(to_a_select) {
                return Err(TrySendError::Full(msg));
            }
            st.enqueue(msg);
            st.waiter.take()
        };
        if let Some(w) = waiter {
            w.wake_by_value();
        }
        Ok(())
    }

    /// Sends, waiting at most `timeout` for room in a full bounded mailbox. A timeout too
    /// long to represent as an [`Instant`] means no timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// use threadlet::channel::SendTimeoutError;
    /// use threadlet::{ActorBuilder, Mailbox};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = ActorBuilder::new()
    ///     .mailbox_capacity(1)
    ///     .spawn_actor_on(&rt, |mb: Mailbox<u8>| {
    ///         threadlet::sleep(Duration::from_millis(50));
    ///         mb.iter().collect::<Vec<_>>()
    ///     })
    ///     .unwrap();
    /// addr.send(1).unwrap();
    /// let late = addr.send_timeout(2, Duration::from_millis(1));
    /// assert_eq!(late, Err(SendTimeoutError::Timeout(2))); // handed back, never delivered
    /// addr.send_timeout(3, Duration::from_secs(10)).unwrap(); // room comes within 50 ms
    /// drop(addr);
    /// assert_eq!(h.join().unwrap(), [1, 3]);
    /// ```
    pub fn send_timeout(&self, msg: M, timeout: Duration) -> Result<(), SendTimeoutError<M>> {
        checkpoint();
        self.send_waiting(msg, Instant::now().checked_add(timeout))
    }

    /// The capacity of the mailbox (`None`: unbounded, the default).
    ///
    /// ```
    /// use threadlet::{ActorBuilder, Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (unbounded, _a) = rt.spawn_actor(|mb: Mailbox<u8>| mb.recv());
    /// assert_eq!(unbounded.capacity(), None);
    /// let (bounded, _b) = ActorBuilder::new()
    ///     .mailbox_capacity(64)
    ///     .spawn_actor_on(&rt, |mb: Mailbox<u8>| mb.recv())
    ///     .unwrap();
    /// assert_eq!(bounded.capacity(), Some(64));
    /// ```
    pub fn capacity(&self) -> Option<usize> {
        let st = self.shared.state.lock();
        st.bounded.then(|| st.rare.as_ref().map_or(0, |r| r.cap))
    }

    /// The slow path of a send to a bounded mailbox (see "Bounded mailboxes" in the module
    /// docs): wait in line with the message until the owner moves it into the queue, the
    /// mailbox closes, or `deadline` passes.
    #[cold]
    fn send_waiting(&self, msg: M, deadline: Option<Instant>) -> Result<(), SendTimeoutError<M>> {
        let (slot, owner, actor) = {
            let mut st = self.shared.state.lock();
            if st.closed {
                return Err(SendTimeoutError::Disconnected(msg));
            }
            // A send that may time out, as `try_send`: a capacity-0 mailbox whose owner waits
            // in a receive takes it now, whatever time is left. (Taken only with no time left,
            // a send with a timeout of some microseconds was refused, as the owner had not run
            // yet to take it, where one of zero was taken.) A `send` without a timeout waits
            // in line until the owner has taken its message: the rendezvous it promises.
            if st.has_room() || (deadline.is_some() && st.owner_waits_at_rendezvous(false)) {
                st.enqueue(msg);
                let w = st.waiter.take();
                drop(st);
                if let Some(w) = w {
                    w.wake_by_value();
                }
                return Ok(());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(SendTimeoutError::Timeout(msg));
            }
            // A handler actor's mailbox is received from only between its messages (the
            // program that polls it is private): its own send from `started`, `handle` or
            // `stopped` could wait for room only for ever, or for its whole timeout. Handed
            // back at once, as `ask` refuses with `CallingSelf`, as a `Timeout` (which `send`
            // hands back in a `SendError`): the mailbox is open. (A process actor may have
            // handed its `Mailbox` to another actor that makes room, so its own sends wait.)
            if st.actor.is_some() && threadlet_runtime::__private::current_handler() == st.actor {
                return Err(SendTimeoutError::Timeout(msg));
            }
            let slot = Slot::new(Some(msg));
            st.rare().waiting_senders.push_back(slot.clone());
            // With capacity 0 the owner takes messages straight from waiting senders: wake it
            // (or its select). With room in the queue it never waits, so this costs nothing.
            (slot, st.waiter.take(), st.actor)
        };
        if let Some(w) = owner {
            w.wake_by_value();
        }
        let waiting = WaitingSender {
            shared: &self.shared,
            slot: &slot,
        };
        // Room in the mailbox of its actor (unattached yet: shown as a bare park).
        let on = actor.map_or(Wait::Parked, |actor| Wait::Room { actor });
        let result = loop {
            let cancelled = match deadline {
                None => park_on(on).is_err(),
                Some(d) => park_on_until(on, d).is_err(),
            };
            if cancelled || deadline.is_some_and(|d| Instant::now() >= d) {
                // Giving up: leave the line, unless the owner took the message meanwhile.
                break match waiting.leave() {
                    Cell::Done(_) => Ok(()),
                    Cell::Disconnected(v) => Err(SendTimeoutError::Disconnected(
                        v.expect("a refused message comes back"),
                    )),
                    Cell::Waiting(v) => {
                        let v = v.expect("a waiting sender holds its message");
                        Err(if cancelled {
                            SendTimeoutError::Disconnected(v)
                        } else {
                            SendTimeoutError::Timeout(v)
                        })
                    }
                };
            }
            match &mut *slot.cell.lock() {
                Cell::Done(_) => break Ok(()),
                Cell::Disconnected(v) => {
                    break Err(SendTimeoutError::Disconnected(
                        v.take().expect("a refused message comes back"),
                    ));
                }
                Cell::Waiting(_) => {} // a spurious wakeup
            }
        };
        waiting.disarm();
        result
    }

    /// Delivers `msg` once `delay` has passed, without blocking the caller. It costs one entry
    /// in a timer heap: the runtime's from inside an actor, else the process-wide timer thread's. If the actor
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
    /// The returned handle cancels the delivery if it has not happened yet
    /// ([`TimerHandle::cancel`]: the message is then dropped at once); dropping the handle
    /// cancels nothing. The delivery waits on the timers of the receiving actor's runtime, so it
    /// does not depend on the caller's runtime still running at the deadline; if no actor is
    /// attached to the mailbox when it is armed (a supervised child between incarnations), on
    /// the process-wide timer thread (`threadlet-timer`, started on first use). A retry, after
    /// a full bounded mailbox, is armed the same way, anew.
    ///
    /// # Panics
    ///
    /// If the process-wide timer thread is needed and the operating system refuses to start
    /// it (the message is dropped).
    ///
    /// ```
    /// use std::time::Duration;
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<&str>| mb.recv());
    /// let timeout = addr.send_after(Duration::from_secs(60), "timed out");
    /// assert!(timeout.cancel()); // it had not fired: the message is dropped now
    /// assert!(!timeout.cancel());
    /// addr.send("done").unwrap();
    /// assert_eq!(h.join().unwrap(), Some("done"));
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
    pub fn send_after(&self, delay: Duration, msg: M) -> TimerHandle
    where
        M: Send + 'static,
    {
        crate::timers::send_after(self, delay, msg)
    }

    /// Sends `make_msg()` every `period` (the first one `period` from now), until the returned
    /// handle is [cancelled](TimerHandle::cancel), or the mailbox is closed (its actor ended or
    /// closed it; a mailbox handed on to an actor of another runtime keeps ticking when the
    /// first runtime shuts down). Ticks are at a fixed rate: each is due one period after the
    /// one before was due. `make_msg` runs on the runtime's timer thread (each tick on the
    /// receiving actor's runtime, as [`send_after`](Addr::send_after) says, or on the
    /// process-wide one while no actor is attached); a panic in it is reported and stops the
    /// interval.
    ///
    /// # Panics
    ///
    /// If `period` is zero, or if the process-wide timer thread is needed and cannot be
    /// started.
    ///
    /// ```
    /// use std::time::Duration;
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<&str>| mb.iter().take(3).count());
    /// let ticks = addr.send_interval(Duration::from_millis(2), || "tick");
    /// assert_eq!(h.join().unwrap(), 3);
    /// ticks.cancel();
    /// ```
    pub fn send_interval(
        &self,
        period: Duration,
        make_msg: impl FnMut() -> M + Send + 'static,
    ) -> TimerHandle
    where
        M: Send + 'static,
    {
        crate::timers::send_interval(self, period, make_msg)
    }

    /// Whether the mailbox is closed: the actor has ended, or called [`Mailbox::close`] (a send
    /// would fail). A supervised child's mailbox stays open across its restarts; it closes when
    /// an incarnation ends that will not be restarted, or when its supervisor is done with it.
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
        self.shared.state.lock().closed
    }

    /// Sends a request made by `make` around a [`Reply`], and waits for the answer: suspends an
    /// actor, blocks a plain thread (gen_server's `call`).
    ///
    /// Fails with [`AskError::Closed`] if the actor has ended or closed its mailbox (the
    /// request, with its `Reply`, is dropped), with [`AskError::Dropped`] as soon as the
    /// `Reply` is dropped unsent (the actor dropped the request, ended, or panicked), and at
    /// once with [`AskError::CallingSelf`] when a handler actor asks its own mailbox.
    ///
    /// ```
    /// use threadlet::{Actor, Context, Reply, RuntimeExt};
    ///
    /// enum Msg {
    ///     Add(u64),
    ///     Get(Reply<u64>),
    /// }
    ///
    /// #[derive(Default)]
    /// struct Counter(u64);
    ///
    /// impl Actor for Counter {
    ///     type Msg = Msg;
    ///     fn handle(&mut self, msg: Msg, _ctx: &mut Context<Self>) {
    ///         match msg {
    ///             Msg::Add(n) => self.0 += n,
    ///             Msg::Get(reply) => reply.send(self.0),
    ///         }
    ///     }
    /// }
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (counter, _h) = rt.start(Counter::default());
    /// counter.send(Msg::Add(40)).unwrap();
    /// counter.send(Msg::Add(2)).unwrap();
    /// assert_eq!(counter.ask(Msg::Get), Ok(42));
    /// ```
    pub fn ask<R>(&self, make: impl FnOnce(Reply<R>) -> M) -> Result<R, AskError> {
        let rx = self.request(make, None)?;
        rx.recv_reply(&|| self.actor_id(), None)
            .map_err(|_| AskError::Dropped)
    }

    /// [`ask`](Addr::ask), waiting at most `timeout` in all ([`AskError::Timeout`]): for room in
    /// a full bounded mailbox (the request is then dropped unsent) and for the answer.
    /// An answer that comes after the timeout is dropped: each request has a reply channel of
    /// its own, so it can never be taken for the answer to a later request.
    ///
    /// ```
    /// use std::time::Duration;
    /// use threadlet::{AskError, Mailbox, Reply, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (slow, _h) = rt.spawn_actor(|mb: Mailbox<(u64, Reply<u64>)>| {
    ///     for (delay_ms, reply) in &mb {
    ///         threadlet::sleep(Duration::from_millis(delay_ms));
    ///         reply.send(delay_ms);
    ///     }
    /// });
    /// let first = slow.ask_timeout(Duration::from_millis(10), |r| (200, r));
    /// assert_eq!(first, Err(AskError::Timeout));
    /// // The late answer (200) is dropped; this request gets its own.
    /// assert_eq!(slow.ask_timeout(Duration::from_secs(10), |r| (1, r)), Ok(1));
    /// ```
    pub fn ask_timeout<R>(
        &self,
        timeout: Duration,
        make: impl FnOnce(Reply<R>) -> M,
    ) -> Result<R, AskError> {
        // A timeout too long to represent as an `Instant` means none, as `recv_timeout`'s. It
        // covers the whole ask: the wait for room in a full bounded mailbox too.
        let deadline = Instant::now().checked_add(timeout);
        let rx = self.request(make, deadline)?;
        rx.recv_reply(&|| self.actor_id(), deadline)
            .map_err(|e| match e {
                RecvTimeoutError::Timeout => AskError::Timeout,
                RecvTimeoutError::Disconnected => AskError::Dropped,
            })
    }

    /// Sends the request of an ask, waiting for room in a full bounded mailbox until
    /// `deadline` at most; returns where its answer will come.
    fn request<R>(
        &self,
        make: impl FnOnce(Reply<R>) -> M,
        deadline: Option<Instant>,
    ) -> Result<oneshot::Receiver<R>, AskError> {
        // A handler actor's mailbox is received from only between its messages (the program
        // that polls it is private), so an ask to it from its own `handle` (or `started`)
        // would wait for ever, or for its whole timeout. A process actor may have handed its
        // `Mailbox` to another actor that answers, so its own asks are left alone.
        if threadlet_runtime::__private::current_handler()
            .is_some_and(|me| self.shared.state.lock().actor == Some(me))
        {
            return Err(AskError::CallingSelf);
        }
        let (tx, rx) = crate::channel::oneshot();
        let request = make(Reply(tx));
        let sent = match deadline {
            None => self.send(request).map_err(|_| AskError::Closed),
            Some(d) => {
                checkpoint();
                self.send_waiting(request, Some(d)).map_err(|e| match e {
                    SendTimeoutError::Timeout(_) => AskError::Timeout,
                    SendTimeoutError::Disconnected(_) => AskError::Closed,
                })
            }
        };
        // A request refused comes back with its `Reply`; dropping both is all there is to do.
        sent.map(|()| rx)
    }

    /// Messages waiting in the mailbox now (sent, not yet received): how far behind its actor
    /// is, readable by anyone who can send to it (Erlang's `message_queue_len`).
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (go_tx, go_rx) = mpsc::channel::<()>();
    /// let (addr, h) = rt.spawn_actor(move |mb: Mailbox<u32>| {
    ///     go_rx.recv().unwrap(); // holds its worker until told to read
    ///     mb.iter().count()
    /// });
    /// for i in 0..3 {
    ///     addr.send(i).unwrap();
    /// }
    /// assert_eq!((addr.len(), addr.is_empty()), (3, false));
    /// go_tx.send(()).unwrap();
    /// drop(addr); // the last address: the actor's iteration ends once the queue is empty
    /// assert_eq!(h.join().unwrap(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.shared.state.lock().queue.len()
    }

    /// Whether no message is waiting in the mailbox now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The id of the actor behind this address, when it was made by `spawn_actor`. For a
    /// supervised child's address, its current incarnation's (`None` while a restart starts
    /// the next one).
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
        self.shared.state.lock().actor
    }

    /// The live actor attached to the mailbox, if any (for `timers.rs`: a delayed message is
    /// armed on its runtime's timers).
    pub(crate) fn attached_actor(&self) -> Option<Arc<ActorCell>> {
        let cell = {
            let st = self.shared.state.lock();
            if st.link != Link::Live {
                return None;
            }
            st.cell.clone()
        };
        cell.upgrade()
    }

    /// Links the mailbox to the actor behind `h` (see "Links to the actor" in the module
    /// docs): its id, a way to kill it, and its end for monitors.
    pub(crate) fn attach<R: Send + 'static>(&self, h: &JoinHandle<R>)
    where
        M: Send + 'static,
    {
        let killed = {
            let mut st = self.shared.state.lock();
            st.actor = Some(h.id());
            st.cell = actor_of(h);
            st.link = Link::Live;
            match &mut st.rare {
                // A supervised child's next incarnation: the end kept is the last one's.
                Some(r) => {
                    r.down = None;
                    std::mem::take(&mut r.killed)
                }
                None => false,
            }
        };
        // Told at once if the actor has ended already.
        set_exit_sink(h, self.shared.arc() as Arc<dyn ExitSink>);
        if killed {
            // Killed (by `Addr::kill` or a link) before the spawner got here.
            self.shared.kill();
        }
    }

    /// Watches the actor: the returned [`Monitor`] yields one [`Down`] when it ends (at once
    /// if it already has), with its id, name and [`ExitReason`]. Any
    /// number of monitors may watch one actor; dropping one is all it takes to stop watching.
    ///
    /// ```
    /// use threadlet::{ExitReason, Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, _h) = rt.spawn_actor(|mb: Mailbox<u32>| {
    ///     if mb.recv() == Some(0) {
    ///         panic!("zero");
    ///     }
    /// });
    /// let monitor = addr.monitor();
    /// addr.send(0).unwrap();
    /// let down = monitor.recv();
    /// assert_eq!(down.reason, ExitReason::Panicked("zero".into()));
    /// assert_eq!(addr.monitor().recv(), down); // an ended actor: at once
    /// ```
    pub fn monitor(&self) -> Monitor {
        let mut made = None;
        // The monitor learns the id under the lock that keeps its hook: read apart, an
        // incarnation of a supervised child could end and the next attach between the two,
        // and the monitor would name one incarnation while its hook waited on the next.
        self.on_exit_with(|actor| {
            let (monitor, hook, listener) = Monitor::new(actor);
            made = Some(monitor);
            (Some(listener), Box::new(hook))
        });
        made.expect("on_exit_with calls its maker once")
    }

    /// Runs `hook` once the actor has ended (at once if it has); kept in the mailbox until then
    /// (see "Links to the actor" in the module docs).
    ///
    /// Returns whether the hook was kept for later (`false`: the actor had ended, and the hook
    /// ran here).
    pub(crate) fn on_exit(&self, hook: ExitHook) -> bool {
        self.on_exit_for(None, hook)
    }

    /// [`on_exit`](Addr::on_exit), for a hook that only matters while somebody holds
    /// `listener`: once nobody does, it may be pruned unrun (`threadlet-runtime`'s
    /// `exit_hooks.rs`), so that a monitor made and dropped again and again leaves nothing
    /// behind on an actor that lives on.
    fn on_exit_for(&self, listener: Option<Listener>, hook: ExitHook) -> bool {
        self.on_exit_with(|_| (listener, hook))
    }

    /// [`on_exit_for`](Addr::on_exit_for), with the hook made by `make` from the actor's id
    /// under the same lock that keeps it, so that the two agree on the incarnation.
    fn on_exit_with(
        &self,
        make: impl FnOnce(Option<ActorId>) -> (Option<Listener>, ExitHook),
    ) -> bool {
        let (hook, down) = {
            let mut st = self.shared.state.lock();
            let (listener, hook) = make(st.actor);
            match st.down() {
                Some(down) => (hook, down),
                None => {
                    let pruned = st.rare().hooks.push(listener, hook);
                    let actor = st.cell.upgrade();
                    drop(st);
                    // Hooks nobody wants any more go now, outside the lock.
                    drop(pruned);
                    // A hook kept from an actor of another runtime links the two runtimes'
                    // deadlock checks (`threadlet-runtime`'s `deadlock.rs`): its `Down` is a
                    // wake that comes from the attached actor's runtime.
                    if let Some(actor) = actor {
                        threadlet_runtime::__private::link_caller_to_runtime_of(&actor);
                    }
                    return true;
                }
            }
        };
        call_exit_hook(hook, &down);
        false
    }

    /// Whether the actor's end is recorded (its exit hooks have run, or run at once).
    pub(crate) fn has_ended(&self) -> bool {
        self.shared.state.lock().down().is_some()
    }

    /// How many exit hooks wait for the actor's end (for tests of who adds them).
    #[cfg(test)]
    pub(crate) fn exit_hooks(&self) -> usize {
        self.shared
            .state
            .lock()
            .rare
            .as_ref()
            .map_or(0, |r| r.hooks.len())
    }

    /// How many links the actor's mailbox records (for tests of their release).
    #[cfg(test)]
    pub(crate) fn links(&self) -> usize {
        self.shared
            .state
            .lock()
            .rare
            .as_ref()
            .map_or(0, |r| r.links.len())
    }

    /// An address that does not count as one (the actor still ends when every counted
    /// address is gone), for the name registry.
    pub(crate) fn uncounted(&self) -> UncountedAddr<M> {
        UncountedAddr {
            shared: self.shared.arc(),
        }
    }

    /// The mailbox's identity, for comparing without holding it.
    pub(crate) fn mailbox_key(&self) -> usize {
        self.shared.as_ptr() as *const () as usize
    }

    /// Links the actor behind this address with the one behind `other`, both ways (Erlang's
    /// `link`): when either ends abnormally (a panic, a kill, a cancellation), the other is
    /// killed too, unless it traps exits ([`Mailbox::trap_exits`]), in which case it gets the
    /// [`Down`] on its trap channel. A normal end signals nothing. Linking to an actor that
    /// has already ended abnormally signals at once. Linking again while linked does nothing,
    /// as does linking to oneself. Through a supervised child's address, the link is its
    /// current incarnation's, or, while a new one has not attached yet (the child not started,
    /// or restarted an instant ago), that one's: a later one neither signals nor hears of it.
    /// Made after an incarnation's end and before its restart, it is a link to an actor that
    /// has ended, as above. A
    /// process actor links itself with `mb.addr().link(&other)`, a handler actor with
    /// `ctx.addr().link(&other)`.
    ///
    /// ```
    /// use threadlet::{Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (worker, w) = rt.spawn_actor(|mb: Mailbox<u32>| {
    ///     if mb.recv() == Some(0) {
    ///         panic!("division by zero");
    ///     }
    /// });
    /// let (partner, p) = rt.spawn_actor(|mb: Mailbox<()>| mb.recv());
    /// worker.link(&partner);
    /// worker.send(0).unwrap();
    /// assert!(w.join().unwrap_err().is_panic());
    /// assert!(p.join().unwrap_err().is_killed()); // taken down with it
    /// ```
    pub fn link<N: Send + 'static>(&self, other: &Addr<N>)
    where
        M: Send + 'static,
    {
        let (my_key, their_key) = (self.mailbox_key(), other.mailbox_key());
        if my_key == their_key {
            return; // as in Erlang, linking to oneself does nothing
        }
        // Each side's end signals the other, unless the other has ended (a hook that would only
        // wait, useless, for as long as the side that is still alive lives). Either end, normal
        // too, also takes the record of the link out of the other side's list.
        //
        // Each hook holds the other side's mailbox, and is wanted only until the other side
        // ends: it names as its listener a token that the other side's hook holds, which goes
        // when that hook has run (or was dropped), so that the hook may then be pruned
        // (`exit_hooks.rs`). Without it, an actor that lives on and links to actor after actor
        // that ends kept every one's hook, and with it its mailbox, until its own end.
        let (token_mine, token_theirs): (Arc<dyn Any + Send + Sync>, Arc<dyn Any + Send + Sync>) =
            (Arc::new(()), Arc::new(()));
        let (wants_mine, wants_theirs) =
            (Arc::downgrade(&token_mine), Arc::downgrade(&token_theirs));
        let (run_now, pruned) = {
            // Both locks, in the order of their addresses, so that two links made at once
            // between the same pair (each side linking to the other) see each other.
            let (mut mine, mut theirs);
            if my_key < their_key {
                mine = self.shared.state.lock();
                theirs = other.shared.state.lock();
            } else {
                theirs = other.shared.state.lock();
                mine = self.shared.state.lock();
            }
            // The incarnations linked: the ones attached now, or the next to attach where none
            // is (a supervised child between incarnations, an actor not attached yet). Each
            // hook is kept, or run, under the same locks as these are read: a lend in between
            // (an end, then a supervised child's restart) would have it wait for a later
            // incarnation's end, which is not the one linked.
            let (my_inc, their_inc) = (mine.incarnation(), theirs.incarnation());
            let linked = (their_key, their_inc);
            // With either end recorded, a link signals at once (its hooks run now), again
            // each time it is made, as Erlang's link to a process that is gone does; and the
            // ended one's record is no longer needed.
            let (my_down, their_down) = (mine.down(), theirs.down());
            let ended = my_down.is_some() || their_down.is_some();
            if !ended
                && mine
                    .rare
                    .as_ref()
                    .is_some_and(|r| r.links.contains(&linked))
            {
                return; // as in Erlang, a link already there is not made twice
            }
            mine.rare().links.retain(|&(key, _)| key != their_key);
            theirs.rare().links.retain(|&(key, _)| key != my_key);
            if !ended {
                mine.rare().links.push(linked);
                theirs.rare().links.push((my_key, my_inc));
            }
            let mut run_now = Vec::new();
            let mut pruned = Vec::new();
            if my_down.is_none() {
                let hook = link_hook(self.shared.arc(), my_inc, linked, token_theirs);
                match their_down.clone() {
                    Some(down) => run_now.push((hook, down)),
                    None => pruned.push(theirs.rare().hooks.push(Some(wants_mine), hook)),
                }
            }
            if their_down.is_none() {
                let hook = link_hook(other.shared.arc(), their_inc, (my_key, my_inc), token_mine);
                match my_down {
                    Some(down) => run_now.push((hook, down)),
                    None => pruned.push(mine.rare().hooks.push(Some(wants_theirs), hook)),
                }
            }
            (run_now, pruned)
        };
        // Hooks nobody wants any more go outside the locks, and so do those that run now.
        drop(pruned);
        for (hook, down) in run_now {
            call_exit_hook(hook, &down);
        }
    }

    /// Kills the actor (see [`JoinHandle::abort`]): it ends at its next suspension or safe
    /// point, its stack unwound on its own worker, and monitors hear
    /// [`ExitReason::Killed`]. Messages still queued are dropped with
    /// the mailbox; later sends hand theirs back. For a supervised child's address the
    /// mailbox stays with its supervisor: what is queued, and what is sent meanwhile, waits for
    /// the next incarnation, unless the child is not restarted (its mailbox then closes for
    /// good, dropping the queue and handing later sends back). `false` if it had already
    /// ended; for a supervised child's address, `false` while no incarnation runs (before its
    /// supervisor starts it, or between an end and the restart), and no later incarnation is
    /// killed.
    ///
    /// ```
    /// use threadlet::{ExitReason, Mailbox, RuntimeExt};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.iter().sum::<u32>());
    /// let monitor = addr.monitor();
    /// assert!(addr.kill());
    /// assert_eq!(monitor.recv().reason, ExitReason::Killed);
    /// assert!(h.join().unwrap_err().is_killed());
    /// assert!(addr.send(1).is_err());
    /// ```
    pub fn kill(&self) -> bool {
        self.shared.kill()
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
        self.shared.ptr_eq(&other.shared)
    }
}

/// One side of a link (`Addr::link`): the hook on the `ended` side (its mailbox's key and the
/// incarnation linked) that tells the other side, `to` (incarnation `linked`), of that end:
/// the record of the link goes, and an abnormal end signals. `token` is what the hook on the
/// other side names as its listener: it goes with this hook. The hook is kept, or run, for the
/// end of the incarnation linked (`link` takes care of it), so it does not look at the id.
fn link_hook(
    to: Arc<dyn ExitSignal>,
    linked: Incarnation,
    ended: (usize, Incarnation),
    token: Arc<dyn Any + Send + Sync>,
) -> ExitHook {
    Box::new(move |down| {
        let _token = token;
        to.forget_link(ended);
        if !down.reason.is_normal() {
            to.exit_signal(down, linked);
        }
    })
}

impl<M> Clone for Addr<M> {
    fn clone(&self) -> Self {
        let outside = on_plain_thread();
        self.shared.state.lock().count_addr(outside);
        Addr {
            shared: self.shared.clone_with(outside),
        }
    }
}

impl<M> Drop for Addr<M> {
    fn drop(&mut self) {
        let waiter = {
            let mut st = self.shared.state.lock();
            st.addrs -= 1;
            let outside = self.shared.flag();
            st.outside -= u32::from(outside);
            if st.addrs == 0 {
                st.waiter.take()
            } else if outside && st.outside == 0 {
                // The last address a plain thread held: a receive it kept from looking dead
                // (`deadlock.rs`) is woken to park again, so that the check judges it anew,
                // as a channel's last outside end does. The waiter stays: a spurious wake.
                st.waiter.clone()
            } else {
                None
            }
        };
        if let Some(w) = waiter {
            w.wake_by_value();
        }
    }
}

impl<M> fmt::Debug for Addr<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let actor = self.shared.state.lock().actor;
        f.debug_struct("Addr").field("actor", &actor).finish()
    }
}

/// The mailbox state's budget: with the lock, an `Arc`'s counts and glibc's header, 96 bytes
/// of state keep a mailbox in the 128-byte allocation class (see "Memory" above; it was 80
/// and 112 before the counters the dump and the metrics read: `outside`, `high_water`,
/// `received`).
#[cfg(all(test, target_pointer_width = "64"))]
#[test]
fn state_size() {
    assert!(std::mem::size_of::<State<u64>>() <= 96);
}

/// An address is one word, its flag included (`tagged.rs`), and an optional one too.
#[cfg(all(test, target_pointer_width = "64"))]
#[test]
fn addr_size() {
    assert_eq!(std::mem::size_of::<Addr<u64>>(), 8);
    assert_eq!(std::mem::size_of::<Option<Addr<u64>>>(), 8);
}

/// A pruned hook is dropped once the mailbox's lock is free again: here its destructor adds a
/// hook to the same mailbox, which would deadlock under the lock.
#[cfg(test)]
#[test]
fn a_pruned_hook_is_dropped_outside_the_mailbox_lock() {
    use crate::RuntimeExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct Reenters(Addr<()>, Arc<AtomicUsize>);
    impl Drop for Reenters {
        fn drop(&mut self) {
            self.0.on_exit(Box::new(|_| ()));
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }
    let rt = crate::Runtime::builder().workers(1).build().unwrap();
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<()>| mb.recv());
    let dropped = Arc::new(AtomicUsize::new(0));
    let (done, finished) = std::sync::mpsc::channel();
    let (a, d) = (addr.clone(), dropped.clone());
    std::thread::spawn(move || {
        for _ in 0..64 {
            let gone = Arc::new(());
            let listener: Weak<()> = Arc::downgrade(&gone);
            let r = Reenters(a.clone(), d.clone());
            a.on_exit_for(Some(listener as Listener), Box::new(move |_| drop(r)));
        }
        done.send(()).unwrap();
    });
    // A generous bound, only so that a deadlock fails the test instead of hanging it (the
    // runtime is leaked then: the actor's end would wait for the lock held for good).
    if finished.recv_timeout(Duration::from_secs(60)).is_err() {
        std::mem::forget((rt, h, addr));
        panic!("a pruned hook was dropped under the mailbox's lock: deadlock");
    }
    assert!(dropped.load(Ordering::Relaxed) > 0);
    addr.send(()).unwrap();
    assert_eq!(h.join().unwrap(), Some(()));
}

/// An actor that lives on and links to actor after actor that ends (normally, or not, with
/// exits trapped) keeps neither their links' records nor their hooks, and with them their
/// mailboxes: each link's hook on it is pruned once the peer has ended. They piled up, about
/// 500 bytes a link, until its own end.
#[cfg(test)]
#[test]
fn links_to_actors_that_ended_do_not_pile_up() {
    use crate::RuntimeExt;
    // One worker: each peer's hooks (and the server's trapped `Down`) have run before the next
    // peer runs, so at most the last peer's record and hook are left at each check.
    let rt = crate::Runtime::builder().workers(1).build().unwrap();
    let (server, h) = rt.spawn_actor(|mb: Mailbox<u8>| {
        let downs = mb.trap_exits();
        let got = mb.recv();
        (got, std::iter::from_fn(|| downs.try_recv().ok()).count())
    });
    for i in 0..2_000u32 {
        let (peer, hp) = rt.spawn_actor(|mb: Mailbox<u8>| {
            if mb.recv() == Some(1) {
                panic!("an abnormal end, trapped by the server");
            }
        });
        server.link(&peer);
        peer.send(u8::from(i % 2 == 1)).unwrap();
        let _ = hp.join();
        assert!(server.links() <= 1, "{} links recorded", server.links());
        assert!(
            server.exit_hooks() <= 16,
            "{} hooks kept",
            server.exit_hooks()
        );
    }
    // The links still worked: the server heard the 1,000 abnormal ends.
    server.send(0).unwrap();
    assert_eq!(h.join().unwrap(), (Some(0), 1_000));
}

/// A plain thread's `spawn_actor` queues the actor before it attaches the mailbox: an actor
/// that parks on its mailbox in between is not judged deadlocked, for the address its spawner
/// holds is not known to the check until the attach. Here the spawner stays in that window
/// for several of the check's sample periods (a plain thread taken off its CPU there, for a
/// long moment); the report came every time.
#[cfg(test)]
#[test]
fn an_actor_parked_before_its_spawner_attaches_its_mailbox_is_not_reported() {
    let (tx, reports) = std::sync::mpsc::channel();
    let rt = crate::Runtime::builder()
        .workers(1)
        .on_deadlock(move |d| {
            let _ = tx.send(d.to_string());
        })
        .build()
        .unwrap();
    // `RuntimeExt::spawn_actor`, with time between its spawn and its attach.
    let (addr, mb) = mailbox::<u32>();
    let h = rt.spawn(crate::run_with_mailbox(mb, |mb: Mailbox<u32>| mb.recv()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while rt.dump().actor(h.id()).and_then(|a| a.waiting_on()) != Some(Wait::Message) {
        assert!(
            Instant::now() < deadline,
            "the actor never waited on its mailbox"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Forty sample periods of the default 10 ms time slice: a report is due within three.
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        reports.try_recv().is_err(),
        "reported while its spawner holds its address"
    );
    addr.attach(&h);
    addr.send(7).unwrap();
    assert_eq!(h.join().unwrap(), Some(7));
    assert!(reports.try_recv().is_err());
}
