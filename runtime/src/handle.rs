//! [`Handle`]: a cloneable way to spawn onto a runtime from anywhere, which never owns it.
//!
//! A `Runtime` owns its threads, and dropping it shuts them down. A `Handle` holds only the
//! state the workers share: cloning and dropping handles does nothing to the runtime, so an
//! actor can keep one without the ownership puzzle of an `Arc<Runtime>` (whose last drop inside
//! an actor would shut the runtime down from one of its own threads).
//!
//! # Spawning after shutdown
//!
//! A spawn from outside the runtime pushes the new actor into a queue that other threads push
//! into: the injector, or the queue of placed actors of the worker it is placed on.
//! `Runtime::drop` drains those queues one last time after joining its workers; anything pushed
//! after that drain would never run, never be dropped, and its join would wait forever. A
//! `Runtime` cannot spawn after its own drop, but a handle can, from any thread. So:
//!
//! 1. a spawn through a handle holds the *spawn gate* for reading from its check to its push,
//!    and pushes only if the gate is open. No user code runs under the gate: a handler actor's
//!    program is built (the caller's `make`) before the gate is taken, and a spawn that fails
//!    gets the user's closure (or the built actor) back and drops it after releasing the gate
//!    (user code that spawned through a handle again while shutdown waits to write would
//!    deadlock on the fair lock);
//! 2. shutdown, after joining the workers, closes the gate under the write lock, then drains
//!    the queues for the last time.
//!
//! A push that held the gate open finished before the gate closed, so a worker ran it or the
//! last drain finds it (then its actor never starts: its join reports `Cancelled`); a spawn
//! that finds the gate closed, or shutdown begun (the flag is raised before the workers stop),
//! pushes nothing and reports the shutdown instead: its actor never starts. Spawns from inside
//! actors need no gate: they run on workers, which are all joined before the gate closes.

use std::fmt;
use std::io;
use std::sync::Arc;

use crate::actor::{ActorId, SpawnOptions};
use crate::context;
use crate::handler::{Activation, Completion};
use crate::join::{self, JoinHandle};
use crate::runtime::{Shared, check_options, prepare_stack, spawn_prepared};

/// Spawns and starts actors on a runtime from any thread, without owning it: dropping every
/// handle never shuts the runtime down, and once the runtime has shut down, spawns through a
/// handle fail (or, with [`spawn`](Handle::spawn), give a join handle that reports
/// `Cancelled`). `Clone + Send + Sync`. A handle kept after the runtime's drop keeps the state
/// its workers shared, and with it the address space of the runtime's stacks, whose memory the
/// shutdown gave back.
///
/// ```
/// use threadlet_runtime::{Handle, Runtime};
///
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// // Inside an actor, `Handle::current()` is its runtime's handle.
/// let handle: Handle = rt.block_on(Handle::current);
/// let from_thread = std::thread::spawn(move || handle.spawn(|| "spawned").join().unwrap());
/// assert_eq!(from_thread.join().unwrap(), "spawned");
///
/// let late = rt.handle();
/// drop(rt); // handles do not keep the runtime running
/// assert!(late.spawn(|| ()).join().unwrap_err().is_cancelled());
/// assert!(late.spawn_with(Default::default(), || ()).is_err());
/// ```
#[derive(Clone)]
pub struct Handle {
    shared: Arc<Shared>,
}

impl Handle {
    pub(crate) fn new(shared: Arc<Shared>) -> Handle {
        Handle { shared }
    }

    /// The handle of the runtime running the calling actor.
    ///
    /// # Panics
    ///
    /// Outside any runtime; [`try_current`](Handle::try_current) returns an error there.
    pub fn current() -> Handle {
        Handle::try_current().unwrap_or_else(|e| panic!("{e}"))
    }

    /// The handle of the runtime running the calling actor, or an error outside any runtime.
    ///
    /// ```
    /// use threadlet_runtime::{Handle, Runtime};
    ///
    /// assert!(Handle::try_current().is_err()); // a plain thread
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// assert!(rt.block_on(|| Handle::try_current().is_ok()));
    /// ```
    pub fn try_current() -> io::Result<Handle> {
        context::current_runtime_for("Handle::current").map(Handle::new)
    }

    /// Spawns an actor. If the runtime has shut down, the actor never runs: `f` is dropped
    /// here and the returned handle's `join` reports `Cancelled`.
    pub fn spawn<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        match self.try_spawn(SpawnOptions::default(), f) {
            Ok(handle) => handle,
            // Never started: `f` is dropped, and the join reports `Cancelled`.
            Err(Refused::ShutDown(f)) => join::cancelled(f),
            Err(Refused::Failed(e, f)) => {
                drop(f);
                panic!("threadlet: cannot spawn: {e}")
            }
        }
    }

    /// Spawns an actor with options; fails if an option is invalid, no stack can be had, or
    /// the runtime has shut down.
    pub fn spawn_with<F, R>(&self, opts: SpawnOptions, f: F) -> io::Result<JoinHandle<R>>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        check_options(&opts)?;
        // A refused closure drops here, with the gate released.
        self.try_spawn(opts, f).map_err(Refused::into_error)
    }

    /// Starts a handler actor (the runtime's half of `threadlet::RuntimeExt::start` on a
    /// handle); fails as [`spawn_with`](Handle::spawn_with) does.
    pub fn start_handler<R, P>(
        &self,
        opts: SpawnOptions,
        make: impl FnOnce(ActorId, Completion<R>) -> P,
    ) -> io::Result<JoinHandle<R>>
    where
        R: Send + 'static,
        P: Activation,
    {
        check_options(&opts)?;
        // Once shutdown has begun, `make` is never called; it drops here.
        crate::handler::refuse_after_shutdown(&self.shared)?;
        // `make` is user code: it runs before the gate is taken (step 1 in the module docs),
        // and a refused actor (its program owns the actor's value) drops here, with the gate
        // released.
        let built = crate::handler::build(&self.shared, opts, make);
        self.through_gate(built, |built| {
            crate::handler::launch(&self.shared, built).map_err(|(e, b)| Refused::Failed(e, b))
        })
        .map_err(Refused::into_error)
    }

    /// A process actor's push through the gate: the stack, then the spawn.
    fn try_spawn<F, R>(&self, opts: SpawnOptions, f: F) -> Result<JoinHandle<R>, Refused<F>>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.through_gate(f, |f| match prepare_stack(&self.shared, &opts) {
            Ok((stack, reserved)) => Ok(spawn_prepared(&self.shared, opts, f, stack, reserved)),
            Err(e) => Err(Refused::Failed(e, f)),
        })
    }

    /// Runs `push` holding the spawn gate open (step 1 in the module docs), or refuses at
    /// once if it is closed. What a refusal hands back (the user's closure) is dropped by the
    /// caller, after this returns and so after the gate is released.
    fn through_gate<X, T>(
        &self,
        x: X,
        push: impl FnOnce(X) -> Result<T, Refused<X>>,
    ) -> Result<T, Refused<X>> {
        let open = self.shared.spawn_gate.read();
        // Refused once shutdown has begun, not only once the gate has closed: between the two,
        // workers still run what they find, and an actor spawned after shutdown began must not
        // start. (One that passed this check was spawned before: it may run or be cancelled,
        // as any actor spawned before shutdown.)
        if !*open || self.shared.is_shutdown() {
            return Err(Refused::ShutDown(x));
        }
        push(x)
    }

    /// The runtime's dump (see [`Runtime::dump`](crate::Runtime::dump)).
    pub fn dump(&self) -> crate::Dump {
        crate::dump::dump(&self.shared)
    }

    /// The runtime's metrics (see [`Runtime::metrics`](crate::Runtime::metrics)).
    pub fn metrics(&self) -> crate::Metrics {
        crate::stats::metrics(&self.shared)
    }

    /// The counters of the live actor `id` (see [`stats`](fn@crate::stats)).
    pub fn stats(&self, id: ActorId) -> Option<crate::ActorStats> {
        crate::dump::actor_stats(&self.shared, id)
    }

    /// Kills the live actor with this id on this runtime (see
    /// [`JoinHandle::abort`](crate::JoinHandle::abort)); `false` if there is none.
    pub fn kill(&self, id: ActorId) -> bool {
        self.shared.live.kill(id)
    }

    /// The exit watch of the live actor with this id on this runtime, if there is one.
    pub fn exit_watch(&self, id: ActorId) -> Option<crate::ExitWatch> {
        let watch = self.shared.live.exit_watch(id)?;
        // As `JoinHandle::exit_watch`: the caller may be an actor of another runtime.
        crate::deadlock::link_caller_to(&self.shared);
        Some(watch)
    }

    /// Whether both handles name the same runtime.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let other = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// assert!(rt.handle().same_runtime(&rt.handle()));
    /// assert!(!rt.handle().same_runtime(&other.handle()));
    /// ```
    pub fn same_runtime(&self, other: &Handle) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

/// Why a spawn through a handle did not happen, with what it would have consumed.
enum Refused<X> {
    /// The gate was closed, or shutdown had begun.
    ShutDown(X),
    /// No stack could be had, or the runtime is shutting down.
    Failed(io::Error, X),
}

impl<X> Refused<X> {
    fn into_error(self) -> io::Error {
        match self {
            Refused::ShutDown(_) => {
                io::Error::other("the runtime is shutting down or has shut down")
            }
            Refused::Failed(e, _) => e,
        }
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("workers", &self.shared.spares.first)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::Runtime;

    /// A handle kept after its runtime's drop keeps the runtime's shared state, stacks
    /// included: the shutdown gave every stack's pages back to the kernel, so what it keeps
    /// is address space, not memory (it kept every stack its actors had touched).
    #[test]
    fn a_handle_kept_after_the_drop_keeps_no_stack_memory() {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let actors: Vec<_> = (0..200)
            .map(|i| {
                rt.spawn(move || {
                    let touched = std::hint::black_box([i as u8; 8 * 1024]);
                    crate::yield_now();
                    touched[i % touched.len()]
                })
            })
            .collect();
        for a in actors {
            a.join().unwrap();
        }
        let kept = rt.handle();
        drop(rt);
        assert_eq!(kept.shared.slab.resident_free(), 0);
    }
}
