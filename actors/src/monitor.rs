//! Monitors: hearing, once, that an actor has ended, and why (Erlang's `monitor`).
//!
//! A [`Monitor`] is the receiving end of a one-value channel. Its sending end sits in the
//! actor's exit hooks (its mailbox's for [`Addr::monitor`](crate::Addr::monitor), see
//! `mailbox.rs`; the runtime's `ExitWatch` for [`Monitor::of`] and [`monitor`](fn@crate::monitor)),
//! which run once, when the actor ends, right after its join handle learns the result: the hook
//! sends the [`Down`] and is gone. A monitor made after the end gets its `Down` at once. A
//! monitor keeps the `Down` it got, so asking again gives the same one (and in a `select!` a
//! fired monitor stays ready, as a closed channel does).
//!
//! Dropping a monitor drops the receiving end and the state it shares with its hook, which the
//! hook holds only weakly: the hook is then pruned the next time the actor's list of hooks
//! fills up (`threadlet-runtime`'s `exit_hooks.rs`), so that an actor monitored again and again
//! by monitors that come and go (Erlang's `gen_server:call` monitors the server for each call)
//! keeps hooks in proportion to the monitors still there, not one for every monitor ever made.
//! A hook not pruned yet runs at the end and finds nobody to tell.

use std::fmt;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use threadlet_runtime::{ActorId, Down, ExitReason, JoinHandle, Waiter};

use crate::channel::{self, RecvTimeoutError, TryRecvError};
use crate::select::{Recv, sealed};

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
    /// receive that finds the channel closed; not by a wait that gave up because its caller
    /// may not wait, `given_up`). Shared with the hook, so that every user of one
    /// monitor (a `Monitor` is `Sync`: say, a thread polling it beside a select waiting on it)
    /// reads the same `Down`: the one that did not get the channel's one message, finding it
    /// closed, took the end for lost, and its `Cancelled` could be the one both kept.
    got: Arc<OnceLock<Down>>,
    /// The actor, when known when the monitor was made (for a `Down` the hook never sent).
    id: Option<ActorId>,
}

impl Monitor {
    /// A monitor, the exit hook that feeds it, and the hook's listener: the state the two
    /// share, which the hook holds only weakly, so that once the monitor is dropped its hook
    /// can be pruned before the actor ends (`threadlet-runtime`'s `exit_hooks.rs`) rather than
    /// kept, one a monitor ever made, on an actor that lives on.
    pub(crate) fn new(
        id: Option<ActorId>,
    ) -> (
        Monitor,
        impl FnOnce(&Down) + Send + 'static,
        Weak<OnceLock<Down>>,
    ) {
        let (tx, rx) = channel::bounded(1);
        let got = Arc::new(OnceLock::new());
        let listener = Arc::downgrade(&got);
        let kept = listener.clone();
        let hook = move |down: &Down| {
            // The monitor may be gone: nobody to tell.
            if let Some(kept) = kept.upgrade() {
                let _ = kept.set(down.clone());
                let _ = tx.try_send(down.clone());
            }
        };
        (Monitor { rx, got, id }, hook, listener)
    }

    /// Watches the actor behind a join handle (the handle keeps its result).
    pub fn of<R>(handle: &JoinHandle<R>) -> Monitor {
        let (monitor, hook, listener) = Monitor::new(Some(handle.id()));
        handle.exit_watch().on_exit_for(listener, hook);
        monitor
    }

    /// Watches the live actor with this id on `handle`'s runtime; for an id with no live
    /// actor the `Down` comes at once with [`ExitReason::NoProc`].
    pub fn of_id(handle: &threadlet_runtime::Handle, id: ActorId) -> Monitor {
        Monitor::of_watch(handle.exit_watch(id), id)
    }

    pub(crate) fn of_watch(watch: Option<threadlet_runtime::ExitWatch>, id: ActorId) -> Monitor {
        let (monitor, hook, listener) = Monitor::new(Some(id));
        match watch {
            Some(w) => w.on_exit_for(listener, hook),
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
        match self.rx.recv() {
            Ok(d) => self.keep(d),
            Err(_) => self.given_up(),
        }
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
            Err(RecvTimeoutError::Disconnected) => Some(self.given_up()),
        }
    }

    /// What a wait that failed gives: the channel closed for good (the hook went unsent, see
    /// [`lost`](Monitor::lost)), or the caller may not wait (a destructor that a kill or
    /// shutdown runs), which the channel reports alike. Only the first decides the monitor; the
    /// second gives this caller the same `Cancelled` but keeps nothing, so that the monitor,
    /// shared, still hears the real end. The `Down` the hook may have set or sent meanwhile
    /// wins over both.
    fn given_up(&self) -> Down {
        if let Some(d) = self.got.get() {
            return d.clone();
        }
        match self.rx.try_recv() {
            Ok(d) => self.keep(d),
            Err(TryRecvError::Disconnected) => self.keep(self.lost()),
            Err(TryRecvError::Empty) => self.lost(),
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
        self.given_up()
    }
}

#[cfg(test)]
mod tests {
    use super::Monitor;
    use crate::{Mailbox, RuntimeExt};
    use threadlet_runtime::ExitReason;

    /// A monitor made and dropped again and again leaves no hook behind on an actor that
    /// lives on (the list is pruned when it fills up), while a monitor that stays hears of the
    /// end.
    #[test]
    fn monitors_that_were_dropped_do_not_pile_up() {
        let rt = crate::Runtime::builder().workers(1).build().unwrap();
        let (addr, h) = rt.spawn_actor(|mb: Mailbox<()>| mb.recv());
        let stays = addr.monitor();
        for _ in 0..10_000 {
            drop(addr.monitor());
            assert!(addr.exit_hooks() <= 16, "{} hooks kept", addr.exit_hooks());
        }
        addr.send(()).unwrap();
        assert_eq!(h.join().unwrap(), Some(()));
        assert_eq!(stays.recv().reason, ExitReason::Normal);
        assert_eq!(addr.exit_hooks(), 0);
    }

    /// The same through the runtime's exit watch: monitors of a join handle or of an id.
    #[test]
    fn monitors_of_a_handle_or_an_id_that_were_dropped_do_not_pile_up() {
        use threadlet_runtime::__private::exit_hooks_waiting;
        let rt = crate::Runtime::builder().workers(1).build().unwrap();
        let h = rt.spawn(|| crate::sleep(std::time::Duration::from_secs(3600)));
        let watch = h.exit_watch();
        let stays = Monitor::of(&h);
        for _ in 0..10_000 {
            drop(Monitor::of(&h));
            drop(Monitor::of_id(&rt.handle(), h.id()));
            let waiting = exit_hooks_waiting(&watch);
            assert!(waiting <= 16, "{waiting} hooks kept");
        }
        h.abort();
        assert!(h.join().unwrap_err().is_killed());
        assert_eq!(stays.recv().reason, ExitReason::Killed);
    }
}
