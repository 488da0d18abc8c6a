//! Monitors: hearing, once, that an actor has ended, and why (Erlang's `monitor`).
//!
//! A [`Monitor`] is the receiving end of a one-value channel. Its sending end sits in the
//! actor's exit hooks (its mailbox's for [`Addr::monitor`](crate::Addr::monitor), see
//! `mailbox.rs`; the runtime's `ExitWatch` for [`Monitor::of`] and [`monitor`](crate::monitor)),
//! which run once, when the actor ends, right after its join handle learns the result: the hook
//! sends the [`Down`] and is gone. A monitor
//! made after the end gets its `Down` at once. Dropping a monitor drops the receiving end; the
//! hook's send then fails quietly when the actor ends. A monitor keeps the `Down` it got, so
//! asking again gives the same one (and in a `select!` a fired monitor stays ready, as a
//! closed channel does).

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use threadlet_runtime::{ActorId, Down, ExitReason, JoinHandle, Waiter};

use crate::channel::{self, RecvTimeoutError, TryRecvError};
use crate::select::{Recv, sealed};

/// What runs once an actor has ended: a monitor's feed.
pub(crate) type ExitHook = Box<dyn FnOnce(&Down) + Send>;

/// Yields one [`Down`] when the actor it watches ends: from [`Addr::monitor`](crate::Addr::monitor)
/// or [`Monitor::of`]. Works from actors (which suspend) and plain threads (which block), and
/// in [`select!`](crate::select!) (`recv(monitor) -> down`).
///
/// ```
/// use std::time::Duration;
/// use threadlet::{ExitReason, Monitor};
///
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// let worker = rt.spawn(|| threadlet::sleep(Duration::from_secs(3600)));
/// let monitor = Monitor::of(&worker);
/// assert!(monitor.try_recv().is_none()); // still asleep
/// worker.abort();
/// let down = monitor.recv();
/// assert_eq!((down.id, down.reason), (worker.id(), ExitReason::Killed));
/// ```
pub struct Monitor {
    /// Wakes whoever waits: the hook sends the `Down` here once it has set `got`.
    rx: channel::Receiver<Down>,
    /// The `Down`, set by the hook before it sends (or, for a hook dropped unsent, by the first
    /// receive that finds the channel closed). Shared with the hook, so that every user of one
    /// monitor (a `Monitor` is `Sync`: say, a thread polling it beside a select waiting on it)
    /// reads the same `Down`: the one that did not get the channel's one message, finding it
    /// closed, took the end for lost, and its `Cancelled` could be the one both kept.
    got: Arc<OnceLock<Down>>,
    /// The actor, when known when the monitor was made (for a `Down` the hook never sent).
    id: Option<ActorId>,
}

impl Monitor {
    /// A monitor and the exit hook that feeds it.
    pub(crate) fn new(id: Option<ActorId>) -> (Monitor, ExitHook) {
        let (tx, rx) = channel::bounded(1);
        let got = Arc::new(OnceLock::new());
        let kept = got.clone();
        let hook = Box::new(move |down: &Down| {
            let _ = kept.set(down.clone());
            // The monitor may be gone: nobody to tell.
            let _ = tx.try_send(down.clone());
        });
        (Monitor { rx, got, id }, hook)
    }

    /// Watches the actor behind a join handle (the handle keeps its result).
    pub fn of<R>(handle: &JoinHandle<R>) -> Monitor {
        let (monitor, hook) = Monitor::new(Some(handle.id()));
        handle.exit_watch().on_exit(hook);
        monitor
    }

    /// Watches the live actor with this id on `handle`'s runtime; for an id with no live
    /// actor the `Down` comes at once with [`ExitReason::NoProc`].
    pub fn of_id(handle: &threadlet_runtime::Handle, id: ActorId) -> Monitor {
        Monitor::of_watch(handle.exit_watch(id), id)
    }

    pub(crate) fn of_watch(watch: Option<threadlet_runtime::ExitWatch>, id: ActorId) -> Monitor {
        let (monitor, hook) = Monitor::new(Some(id));
        match watch {
            Some(w) => w.on_exit(hook),
            None => hook(&Down {
                id,
                name: None,
                reason: ExitReason::NoProc,
            }),
        }
        monitor
    }

    /// Waits for the actor to end.
    pub fn recv(&self) -> Down {
        if let Some(d) = self.got.get() {
            return d.clone();
        }
        let d = self.rx.recv().unwrap_or_else(|_| self.lost());
        self.keep(d)
    }

    /// The `Down` if the actor has ended, without waiting.
    pub fn try_recv(&self) -> Option<Down> {
        if let Some(d) = self.got.get() {
            return Some(d.clone());
        }
        match self.rx.try_recv() {
            Ok(d) => Some(self.keep(d)),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(self.keep(self.lost())),
        }
    }

    /// Waits at most `timeout` for the actor to end.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Down> {
        if let Some(d) = self.got.get() {
            return Some(d.clone());
        }
        match self.rx.recv_timeout(timeout) {
            Ok(d) => Some(self.keep(d)),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(self.keep(self.lost())),
        }
    }

    /// Remembers the `Down` for later calls; returns it.
    fn keep(&self, d: Down) -> Down {
        self.got.get_or_init(|| d).clone()
    }

    /// The hook was dropped unsent. For a known actor, only when its end was never recorded
    /// (its stack leaked after a panic escaped an unwind): reported as a cancellation rather
    /// than a wait that never ends. For a monitor made on an address before any actor was
    /// attached to its mailbox (a supervised child's, before its first incarnation), when the
    /// mailbox went without one: there was no actor to end, as for a monitor by an id that
    /// names none (Erlang's `noproc`); the `Down` names a fresh id that no actor has.
    fn lost(&self) -> Down {
        match self.id {
            Some(id) => Down {
                id,
                name: None,
                reason: ExitReason::Cancelled,
            },
            None => Down {
                id: threadlet_runtime::__private::unassigned_actor_id(),
                name: None,
                reason: ExitReason::NoProc,
            },
        }
    }
}

impl fmt::Debug for Monitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Monitor").field("actor", &self.id).finish()
    }
}

impl sealed::Sealed for Monitor {}
impl Recv for Monitor {
    type Output = Down;
    fn recv_now(&self) -> Option<Down> {
        if let Some(d) = self.got.get() {
            return Some(d.clone());
        }
        match self.rx.recv_now() {
            Ok(d) => Some(self.keep(d)),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(self.keep(self.lost())),
        }
    }
    fn watch(&self, w: &Waiter) {
        self.rx.watch(w);
    }
    fn unwatch(&self, w: &Waiter) {
        self.rx.unwatch(w);
    }
    fn closed(&self) -> Down {
        self.keep(self.lost())
    }
}
