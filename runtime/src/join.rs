//! Join handles: the one-shot hand-off of an actor's result (or panic) to whoever waits for it.
//!
//! The actor's side is a [`Completer`], moved into its entry closure; the waiting side is a
//! [`JoinHandle`]. Both share a [`Packet`] whose slot a mutex guards. Waiting follows the wake
//! protocol of `wake.rs`: publish the waiter under the lock, check the slot, park, loop. The
//! completer fills the slot and takes the waiter under the same lock, so exactly one of them
//! sees the other. If the completer is dropped without a value (the actor never started, or
//! shutdown unwound it), the slot records `Cancelled`, so a joiner never waits forever.

use std::any::Any;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;

use crate::actor::{ActorId, StartFn};
use crate::context::{self, Waiter};
use crate::sync::Mutex;

/// Why joining an actor gave no value.
pub enum JoinError {
    /// The actor panicked; the payload is what `panic!` was given.
    Panicked(Box<dyn Any + Send + 'static>),
    /// The actor was dropped before finishing: the runtime shut down first.
    Cancelled,
    /// The actor could not start: no stack could be mapped for it when it was due to run (the
    /// kernel refused the memory). Messages already in its mailbox are dropped with it.
    Spawn(std::io::Error),
}

impl JoinError {
    /// Whether the actor panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panicked(_))
    }

    /// Whether the actor was cancelled by shutdown.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled)
    }

    /// The panic payload, if the actor panicked.
    pub fn into_panic(self) -> Option<Box<dyn Any + Send + 'static>> {
        match self {
            JoinError::Panicked(p) => Some(p),
            _ => None,
        }
    }

    /// The panic message, when the payload is a string (as `panic!("...")` makes).
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(p) => p
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| p.downcast_ref::<String>().map(String::as_str)),
            _ => None,
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(_) => f
                .debug_tuple("Panicked")
                .field(&self.panic_message().unwrap_or("<non-string payload>"))
                .finish(),
            JoinError::Cancelled => f.write_str("Cancelled"),
            JoinError::Spawn(e) => f.debug_tuple("Spawn").field(e).finish(),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(_) => match self.panic_message() {
                Some(m) => write!(f, "actor panicked: {m}"),
                None => f.write_str("actor panicked"),
            },
            JoinError::Cancelled => f.write_str("actor cancelled by runtime shutdown"),
            JoinError::Spawn(e) => write!(f, "actor could not start: {e}"),
        }
    }
}

impl std::error::Error for JoinError {}

enum Slot<R> {
    Pending(Option<Waiter>),
    Ready(Result<R, JoinError>),
    Taken,
}

struct Packet<R> {
    slot: Mutex<Slot<R>>,
}

/// The actor's end: fills the packet once, or records `Cancelled` when dropped unfilled.
struct Completer<R>(Option<Arc<Packet<R>>>);

impl<R> Completer<R> {
    fn complete(mut self, result: Result<R, JoinError>) {
        if let Some(p) = self.0.take() {
            fill(&p, result);
        }
    }
}

impl<R> Drop for Completer<R> {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            fill(&p, Err(JoinError::Cancelled));
        }
    }
}

fn fill<R>(packet: &Packet<R>, result: Result<R, JoinError>) {
    let waiter = {
        let mut slot = packet.slot.lock();
        match std::mem::replace(&mut *slot, Slot::Ready(result)) {
            Slot::Pending(w) => w,
            _ => unreachable!("a join packet is filled once"),
        }
    };
    if let Some(w) = waiter {
        w.wake();
    }
}

/// Wraps a user closure into an actor entry that reports to the returned handle.
pub(crate) fn entry<F, R>(id_slot: ActorId, f: F) -> (StartFn, JoinHandle<R>)
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let packet = Arc::new(Packet {
        slot: Mutex::new(Slot::Pending(None)),
    });
    let completer = Completer(Some(packet.clone()));
    let start: StartFn = Box::new(move |failed: Option<std::io::Error>| {
        if let Some(e) = failed {
            completer.complete(Err(JoinError::Spawn(e)));
            return;
        }
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(v) => completer.complete(Ok(v)),
            // Shutdown's forced unwind passes through here: let it go on to the coroutine's
            // root (the completer, dropped on the way, records `Cancelled`).
            Err(p) if context::is_cancelling() => resume_unwind(p),
            Err(p) => completer.complete(Err(JoinError::Panicked(p))),
        }
    });
    (
        start,
        JoinHandle {
            packet,
            id: id_slot,
        },
    )
}

/// An owned permission to wait for an actor's result. Dropping it detaches the actor.
pub struct JoinHandle<R> {
    packet: Arc<Packet<R>>,
    id: ActorId,
}

impl<R> JoinHandle<R> {
    /// Waits for the actor to finish: suspends the calling actor, or blocks a plain thread.
    /// Joining is a preemption safe point.
    ///
    /// Returns the actor's value, or why there is none: it panicked (the payload is kept), the
    /// runtime shut down first, or (when the kernel refused memory) it could not start.
    pub fn join(self) -> Result<R, JoinError> {
        // A safe point: a loop joining many finished actors never suspends otherwise.
        context::checkpoint();
        loop {
            {
                let mut slot = self.packet.slot.lock();
                match &mut *slot {
                    Slot::Ready(_) => {
                        let Slot::Ready(r) = std::mem::replace(&mut *slot, Slot::Taken) else {
                            unreachable!()
                        };
                        return r;
                    }
                    Slot::Pending(w) => {
                        if w.as_ref().is_none_or(|w| !w.same_as(&Waiter::current())) {
                            *w = Some(Waiter::current());
                        }
                    }
                    Slot::Taken => unreachable!("join consumes the handle"),
                }
            }
            if context::park().is_err() {
                return Err(JoinError::Cancelled);
            }
        }
    }

    /// Whether the actor has finished (or will never run).
    pub fn is_finished(&self) -> bool {
        !matches!(*self.packet.slot.lock(), Slot::Pending(_))
    }

    /// The id of the actor this handle waits for.
    pub fn id(&self) -> ActorId {
        self.id
    }
}

impl<R> fmt::Debug for JoinHandle<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.id).finish()
    }
}
