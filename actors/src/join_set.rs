//! [`JoinSet`]: many actors, joined in the order they finish (tokio's `JoinSet`).
//!
//! Each actor added to the set gets an exit hook (see `threadlet_runtime::ExitWatch`) that
//! sends its id into the set's channel when it ends; `join_next` takes the next id from that
//! channel and joins that actor, which no longer waits. Dropping the set kills every actor
//! still in it.

use std::collections::HashMap;
use std::fmt;

use threadlet_runtime::__private::join_cancelled;
use threadlet_runtime::{AbortHandle, ActorId, Handle, JoinError, JoinHandle};

use crate::channel;

/// A set of actors joined in completion order; dropping it kills the ones still running.
///
/// ```
/// use std::time::Duration;
/// use threadlet::JoinSet;
///
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// let order = rt.block_on(|| {
///     let mut set = JoinSet::new();
///     for ms in [30u64, 10, 20] {
///         set.spawn(move || {
///             threadlet::sleep(Duration::from_millis(ms));
///             ms
///         });
///     }
///     let mut order = Vec::new();
///     while let Some(r) = set.join_next() {
///         order.push(r.unwrap());
///     }
///     order
/// });
/// assert_eq!(order, [10, 20, 30]);
/// ```
pub struct JoinSet<R: Send + 'static> {
    running: HashMap<ActorId, JoinHandle<R>>,
    done_tx: channel::Sender<ActorId>,
    done_rx: channel::Receiver<ActorId>,
}

impl<R: Send + 'static> JoinSet<R> {
    /// An empty set.
    pub fn new() -> JoinSet<R> {
        let (done_tx, done_rx) = channel::unbounded();
        JoinSet {
            running: HashMap::new(),
            done_tx,
            done_rx,
        }
    }

    /// Spawns an actor on the current runtime into the set.
    ///
    /// # Panics
    ///
    /// Outside any runtime; use [`spawn_on`](JoinSet::spawn_on) there.
    pub fn spawn<F>(&mut self, f: F) -> AbortHandle
    where
        F: FnOnce() -> R + Send + 'static,
    {
        self.insert(threadlet_runtime::spawn(f))
    }

    /// Spawns an actor through `handle` (any thread) into the set.
    pub fn spawn_on<F>(&mut self, handle: &Handle, f: F) -> AbortHandle
    where
        F: FnOnce() -> R + Send + 'static,
    {
        self.insert(handle.spawn(f))
    }

    /// Adds an actor spawned elsewhere (a process actor's or a handler actor's handle).
    pub fn insert(&mut self, handle: JoinHandle<R>) -> AbortHandle {
        let id = handle.id();
        let done = self.done_tx.clone();
        handle.exit_watch().on_exit(move |_| {
            // The set may be gone: nobody to tell.
            let _ = done.send(id);
        });
        let abort = handle.abort_handle();
        self.running.insert(id, handle);
        abort
    }

    /// Waits for the next actor to finish and returns its result, or `None` if the set is
    /// empty. Suspends an actor; blocks a plain thread.
    pub fn join_next(&mut self) -> Option<Result<R, JoinError>> {
        self.join_next_with_id().map(|(_, r)| r)
    }

    /// As [`join_next`](JoinSet::join_next), with the id of the actor that finished.
    ///
    /// Where the caller may not wait (an actor being unwound by a kill or by shutdown, say in
    /// a destructor that drains the set), each call instead takes one actor of the set: if it
    /// has finished, with its result; else it kills it and gives it back with a `Cancelled`
    /// error, as [`JoinHandle::join`] gives up there.
    pub fn join_next_with_id(&mut self) -> Option<(ActorId, Result<R, JoinError>)> {
        while !self.running.is_empty() {
            // The set holds a sender of its own channel: the receive fails only because this
            // caller may not wait.
            let Ok(id) = self.done_rx.recv() else {
                // Any actor of the set: one that has finished (though the hook that names it on
                // the channel may not have run yet) gives its result, as `join` does not wait
                // for a finished actor, and an abort that finds its actor ended says so; any
                // other is killed. One look per call, so a drain costs one per actor.
                let id = *self.running.keys().next().expect("not empty");
                let handle = self.running.remove(&id).expect("listed");
                if !handle.abort() {
                    return Some((id, handle.join()));
                }
                return Some((id, Err(join_cancelled(&handle))));
            };
            if let Some(r) = self.take(id) {
                return Some(r);
            }
        }
        None
    }

    /// The result of an actor that has finished, without waiting; `None` if none has (or the
    /// set is empty).
    pub fn try_join_next(&mut self) -> Option<Result<R, JoinError>> {
        while let Ok(id) = self.done_rx.try_recv() {
            if let Some((_, r)) = self.take(id) {
                return Some(r);
            }
        }
        None
    }

    /// Joins the actor `id` if it is still in the set (its end was just announced, so this
    /// does not wait).
    fn take(&mut self, id: ActorId) -> Option<(ActorId, Result<R, JoinError>)> {
        self.running.remove(&id).map(|h| (id, h.join()))
    }

    /// Kills every actor in the set (they stay in it until joined: `join_next` then reports
    /// `Killed`, or the result of one that finished first).
    pub fn abort_all(&mut self) {
        for h in self.running.values() {
            h.abort();
        }
    }

    /// The number of actors in the set, finished or not, that have not been joined.
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }
}

impl<R: Send + 'static> Default for JoinSet<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Send + 'static> Drop for JoinSet<R> {
    /// Kills every actor still in the set, as tokio's `JoinSet` aborts its tasks.
    fn drop(&mut self) {
        self.abort_all();
    }
}

impl<R: Send + 'static> fmt::Debug for JoinSet<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet")
            .field("len", &self.running.len())
            .finish()
    }
}
