//! One value, sent once: the reply channel of a request ([`Addr::ask`](crate::Addr::ask)), usable
//! on its own.
//!
//! A [`oneshot()`](super::oneshot()) pair is a [`bounded(1)`](super::bounded) channel whose ends
//! are consumed by use, so the types say what the protocol is: one `send`, one `recv`. Its
//! semantics are the channel's: a send never waits (the one slot is free); a sender dropped
//! unsent makes the receiver's `recv` fail at once; a receiver dropped first makes the send
//! fail and hand the value back.
//!
//! ```
//! use threadlet::channel::{self, RecvError};
//!
//! let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
//! let (tx, rx) = channel::oneshot();
//! rt.spawn(move || tx.send(6 * 7).unwrap());
//! assert_eq!(rx.recv(), Ok(42));
//!
//! let (tx, rx) = channel::oneshot::<u32>();
//! drop(tx); // never sent
//! assert_eq!(rx.recv(), Err(RecvError));
//! ```

use std::fmt;
use std::time::Duration;

use super::{RecvError, RecvTimeoutError, TryRecvError};

/// The sending half; [`send`](Sender::send) consumes it.
pub struct Sender<T>(pub(super) super::Sender<T>);

/// The receiving half; [`recv`](Receiver::recv) consumes it.
pub struct Receiver<T>(pub(crate) super::Receiver<T>);

impl<T> Sender<T> {
    /// Sends the value; never waits. Hands it back if the receiver is gone.
    ///
    /// ```
    /// let (tx, rx) = threadlet::channel::oneshot();
    /// drop(rx);
    /// assert_eq!(tx.send("late"), Err("late"));
    /// ```
    pub fn send(self, value: T) -> Result<(), T> {
        self.0.send(value).map_err(|e| e.0)
    }

    /// Whether the receiver is gone (a send would fail).
    ///
    /// ```
    /// let (tx, rx) = threadlet::channel::oneshot::<()>();
    /// assert!(!tx.is_closed());
    /// drop(rx);
    /// assert!(tx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.0.is_disconnected()
    }
}

impl<T> Receiver<T> {
    /// Waits for the value: suspends an actor, blocks a plain thread. Fails at once if the
    /// sender was dropped unsent.
    pub fn recv(self) -> Result<T, RecvError> {
        self.0.recv()
    }

    /// Waits for the value for at most `timeout`. The receiver stays usable after a timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// use threadlet::channel::{self, RecvTimeoutError};
    ///
    /// let (tx, rx) = channel::oneshot();
    /// assert_eq!(rx.recv_timeout(Duration::from_millis(5)), Err(RecvTimeoutError::Timeout));
    /// tx.send(1).unwrap();
    /// assert_eq!(rx.recv_timeout(Duration::from_millis(5)), Ok(1));
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.0.recv_timeout(timeout)
    }

    /// `recv` (with a deadline) that, if it waits, shows in the dump as waiting for a reply
    /// from the actor `actor` names (`Addr::ask`; asked only if it waits).
    pub(crate) fn recv_reply(
        &self,
        actor: &dyn Fn() -> Option<threadlet_runtime::ActorId>,
        deadline: Option<std::time::Instant>,
    ) -> Result<T, RecvTimeoutError> {
        self.0.recv_waiting(deadline, Some(actor))
    }

    /// Takes the value if it is there, without waiting.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.0.try_recv()
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("oneshot::Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("oneshot::Receiver").finish_non_exhaustive()
    }
}
