//! What a suspended actor waits on: one word per actor, for the dump (`dump.rs`) and the
//! deadlock report (`deadlock.rs`).
//!
//! # The word
//!
//! Every actor keeps a [`WaitWord`]. The actor itself writes it, with one relaxed store, just
//! before it parks ([`park_on`](crate::park_on)); a worker writes it for a handler actor whose
//! activation ended waiting for its next message. Nobody clears it: whether the actor is
//! suspended at all is its wake state's business (`wake.rs`), and readers look at the word
//! only while that state says `IDLE`. So the hot path pays one store per park and nothing per
//! run.
//!
//! Readers (the dump, the deadlock check, both on other threads) load the state and then the
//! word, relaxed: an actor that wakes and parks again in between may show its new wait with
//! its old state, or the other way round. That is the dump's "consistent enough"; the deadlock
//! check confirms what it sees over two looks (`deadlock.rs`).
//!
//! # Encoding
//!
//! ```text
//!  63      56 55   54                                    0
//! +----------+-----+--------------------------------------+
//! |   kind   |timed|              argument                |
//! +----------+-----+--------------------------------------+
//! ```
//!
//! The argument is an actor id, a channel id (with, in bit 54, whether a plain thread held an
//! end of the channel), a file descriptor, a select's branch count, or a sleep's deadline in
//! milliseconds since the process's first use of it; 55 bits hold any of them (ids are
//! counters; 2^55 ms is a million years).

use std::fmt;
use std::num::NonZeroU64;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::actor::ActorId;

/// What a suspended actor waits on.
///
/// The runtime's own blocking operations and the `threadlet` crate's mailboxes and channels
/// say what they wait on; a bare [`park`](crate::park) shows as [`Wait::Parked`].
///
/// ```
/// use threadlet_runtime::{ActorId, Wait};
///
/// assert_eq!(Wait::Message.to_string(), "its mailbox");
/// let recv = Wait::ChannelRecv { channel: 7, outside: false };
/// assert_eq!(recv.to_string(), "a receive on channel 7");
/// assert!(!Wait::Message.is_external());
/// assert!(Wait::Blocking.is_external()); // a pool thread will come back with the answer
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wait {
    /// A message in its own mailbox (a `recv`, or a handler actor between messages).
    Message,
    /// Room in the full bounded mailbox of `actor` (a `send`).
    Room {
        /// The receiver.
        actor: ActorId,
    },
    /// A value on a channel (a `recv`).
    ChannelRecv {
        /// The channel's id (`threadlet::channel`).
        channel: u64,
        /// A plain thread held an end of the channel when the actor last parked (or took one
        /// since): something outside the runtime may end the wait, by sending, or by closing
        /// the channel from either end.
        outside: bool,
    },
    /// Room or a receiver on a channel (a `send`).
    ChannelSend {
        /// The channel's id.
        channel: u64,
        /// A plain thread held an end of the channel when the actor last parked (or took one
        /// since): by receiving, or by closing the channel from either end.
        outside: bool,
    },
    /// The end of another actor (`JoinHandle::join`).
    Join {
        /// The actor joined.
        actor: ActorId,
    },
    /// The reply to a request sent to `actor` (`Addr::ask`).
    Reply {
        /// The actor asked.
        actor: ActorId,
    },
    /// Any of several sources (`select!`).
    Select {
        /// How many branches the select has.
        branches: u32,
    },
    /// A deadline (`sleep`).
    Sleep {
        /// When it wakes.
        until: Instant,
    },
    /// A socket (`threadlet::net`).
    Io {
        /// The socket's file descriptor.
        fd: i32,
        /// Waiting to write (else to read or accept).
        write: bool,
    },
    /// A closure running on the blocking pool (`threadlet::blocking`), or the shutdown of another
    /// runtime whose last handle the actor dropped (`Runtime::drop`).
    Blocking,
    /// A bare [`park`](crate::park), with no reason given.
    Parked,
}

impl Wait {
    /// Whether something outside the runtime's actors may end the wait: a timer, a socket's
    /// peer, a pool thread, a plain thread holding an end of the channel. A select and a
    /// bare park count too (their sources are not recorded: a park's `Waiter` may be anywhere).
    /// Such a wait is never part of a deadlock.
    pub fn is_external(&self) -> bool {
        match self {
            Wait::Sleep { .. }
            | Wait::Io { .. }
            | Wait::Blocking
            | Wait::Select { .. }
            | Wait::Parked => true,
            Wait::ChannelRecv { outside, .. } | Wait::ChannelSend { outside, .. } => *outside,
            _ => false,
        }
    }

    /// The actor whose action would end the wait, where the wait names one (a join, a
    /// request, room in a mailbox): an edge of the waits-for graph.
    pub fn waits_for(&self) -> Option<ActorId> {
        match *self {
            Wait::Room { actor } | Wait::Join { actor } | Wait::Reply { actor } => Some(actor),
            _ => None,
        }
    }
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wait::Message => write!(f, "its mailbox"),
            Wait::Room { actor } => write!(f, "room in the mailbox of actor {actor}"),
            Wait::ChannelRecv { channel, .. } => write!(f, "a receive on channel {channel}"),
            Wait::ChannelSend { channel, .. } => write!(f, "a send on channel {channel}"),
            Wait::Join { actor } => write!(f, "the end of actor {actor}"),
            Wait::Reply { actor } => write!(f, "a reply from actor {actor}"),
            Wait::Select { branches } => write!(f, "a select of {branches} branches"),
            Wait::Sleep { until } => {
                let left = until.saturating_duration_since(Instant::now());
                write!(f, "a sleep ({} ms left)", left.as_millis())
            }
            Wait::Io { fd, write: false } => write!(f, "a socket to read (fd {fd})"),
            Wait::Io { fd, write: true } => write!(f, "a socket to write (fd {fd})"),
            Wait::Blocking => write!(f, "a call on the blocking pool"),
            Wait::Parked => write!(f, "a wake (bare park)"),
        }
    }
}

const KIND_SHIFT: u32 = 56;
const TIMED: u64 = 1 << 55;
/// For channel waits: an end of the channel was held outside (`Wait::ChannelRecv::outside`).
const OUTSIDE: u64 = 1 << 54;
const ARG: u64 = TIMED - 1;
const CHANNEL_ARG: u64 = OUTSIDE - 1;

// Kinds; 0 is "never parked".
const NONE: u64 = 0;
const MESSAGE: u64 = 1;
const ROOM: u64 = 2;
const CHANNEL_RECV: u64 = 3;
const CHANNEL_SEND: u64 = 4;
const JOIN: u64 = 5;
const REPLY: u64 = 6;
const SELECT: u64 = 7;
const SLEEP: u64 = 8;
const IO_READ: u64 = 9;
const IO_WRITE: u64 = 10;
const BLOCKING: u64 = 11;
const PARKED: u64 = 12;

/// The instant sleeps' deadlines count from: the first time one is stored.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn id_of(arg: u64) -> ActorId {
    // An id stored here came from a live `ActorId`, so it is not 0; a torn or foreign value
    // becomes id 1 rather than a panic in a diagnostic.
    ActorId(NonZeroU64::new(arg).unwrap_or(NonZeroU64::MIN))
}

/// One actor's wait (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct WaitWord(AtomicU64);

impl WaitWord {
    /// Records what the actor is about to wait on; `timed`: with a deadline.
    #[inline]
    pub(crate) fn set(&self, wait: Wait, timed: bool) {
        self.set_encoded(encode(wait, timed));
    }

    /// Records a wait already encoded (`encode`, folded to a constant at most call sites).
    #[inline]
    pub(crate) fn set_encoded(&self, word: u64) {
        // Relaxed: read only for reports, which tolerate a stale word (module docs).
        self.0.store(word, Ordering::Relaxed);
    }

    /// A plain thread now holds an end of the channel this actor waits on: sets the
    /// word's `outside` bit if the word is a channel wait (`Wait::ChannelRecv::outside`). A
    /// compare-and-swap, so that a newer wait stored meanwhile is left alone.
    pub(crate) fn mark_outside(&self) {
        let word = self.0.load(Ordering::Relaxed);
        if matches!(word >> KIND_SHIFT, CHANNEL_RECV | CHANNEL_SEND) {
            // Relaxed, both: the word is read only for reports; a failure means the actor
            // moved on to another wait, which recorded its own flag.
            let _ =
                self.0
                    .compare_exchange(word, word | OUTSIDE, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// The last wait recorded, and whether it had a deadline; `None` if the actor never parked.
    pub(crate) fn get(&self) -> Option<(Wait, bool)> {
        decode(self.0.load(Ordering::Relaxed))
    }
}

#[inline(always)]
fn channel_arg(channel: u64, outside: bool) -> u64 {
    (channel & CHANNEL_ARG) | if outside { OUTSIDE } else { 0 }
}

/// The word for `wait`: inlined, so that a constant wait (`Wait::Message`) costs a constant.
#[inline(always)]
pub(crate) fn encode(wait: Wait, timed: bool) -> u64 {
    let (kind, arg) = match wait {
        Wait::Message => (MESSAGE, 0),
        Wait::Room { actor } => (ROOM, actor.as_u64()),
        Wait::ChannelRecv { channel, outside } => (CHANNEL_RECV, channel_arg(channel, outside)),
        Wait::ChannelSend { channel, outside } => (CHANNEL_SEND, channel_arg(channel, outside)),
        Wait::Join { actor } => (JOIN, actor.as_u64()),
        Wait::Reply { actor } => (REPLY, actor.as_u64()),
        Wait::Select { branches } => (SELECT, u64::from(branches)),
        Wait::Sleep { until } => {
            let ms = until.saturating_duration_since(epoch()).as_millis();
            (SLEEP, u64::try_from(ms).unwrap_or(ARG))
        }
        // The descriptor's bits, as an unsigned 32-bit number.
        Wait::Io { fd, write } => (if write { IO_WRITE } else { IO_READ }, u64::from(fd as u32)),
        Wait::Blocking => (BLOCKING, 0),
        Wait::Parked => (PARKED, 0),
    };
    (kind << KIND_SHIFT) | if timed { TIMED } else { 0 } | (arg & ARG)
}

pub(crate) fn decode(word: u64) -> Option<(Wait, bool)> {
    let arg = word & ARG;
    let timed = word & TIMED != 0;
    let wait = match word >> KIND_SHIFT {
        NONE => return None,
        MESSAGE => Wait::Message,
        ROOM => Wait::Room { actor: id_of(arg) },
        CHANNEL_RECV => Wait::ChannelRecv {
            channel: arg & CHANNEL_ARG,
            outside: arg & OUTSIDE != 0,
        },
        CHANNEL_SEND => Wait::ChannelSend {
            channel: arg & CHANNEL_ARG,
            outside: arg & OUTSIDE != 0,
        },
        JOIN => Wait::Join { actor: id_of(arg) },
        REPLY => Wait::Reply { actor: id_of(arg) },
        SELECT => Wait::Select {
            branches: u32::try_from(arg).unwrap_or(u32::MAX),
        },
        SLEEP => Wait::Sleep {
            until: epoch()
                .checked_add(Duration::from_millis(arg))
                .unwrap_or_else(epoch),
        },
        IO_READ | IO_WRITE => Wait::Io {
            fd: arg as u32 as i32,
            write: word >> KIND_SHIFT == IO_WRITE,
        },
        BLOCKING => Wait::Blocking,
        _ => Wait::Parked,
    };
    Some((wait, timed))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_wait_survives_the_word() {
        let a = ActorId(NonZeroU64::new(42).unwrap());
        let until = Instant::now() + Duration::from_secs(5);
        let waits = [
            Wait::Message,
            Wait::Room { actor: a },
            Wait::ChannelRecv {
                channel: 9,
                outside: true,
            },
            Wait::ChannelSend {
                channel: 1 << 40,
                outside: false,
            },
            Wait::Join { actor: a },
            Wait::Reply { actor: a },
            Wait::Select { branches: 3 },
            Wait::Io {
                fd: 17,
                write: true,
            },
            Wait::Io {
                fd: 0,
                write: false,
            },
            Wait::Blocking,
            Wait::Parked,
        ];
        let w = WaitWord::default();
        assert_eq!(w.get(), None);
        for wait in waits {
            for timed in [false, true] {
                w.set(wait, timed);
                assert_eq!(w.get(), Some((wait, timed)));
            }
        }
        // A sleep keeps its deadline to the millisecond.
        w.set(Wait::Sleep { until }, true);
        match w.get() {
            Some((Wait::Sleep { until: got }, true)) => {
                let diff = if got > until {
                    got - until
                } else {
                    until - got
                };
                assert!(diff <= Duration::from_millis(1), "{diff:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn external_waits_and_edges() {
        let a = ActorId(NonZeroU64::new(3).unwrap());
        assert!(
            Wait::Sleep {
                until: Instant::now()
            }
            .is_external()
        );
        assert!(
            Wait::Io {
                fd: 1,
                write: false
            }
            .is_external()
        );
        assert!(!Wait::Join { actor: a }.is_external());
        assert_eq!(Wait::Reply { actor: a }.waits_for(), Some(a));
        assert_eq!(Wait::Message.waits_for(), None);
    }
}
