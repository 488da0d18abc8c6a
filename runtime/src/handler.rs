//! Handler actors, as the runtime sees them: actors that own no stack between messages.
//!
//! A process actor is one coroutine for its whole life, pinned to the worker that started it.
//! A handler actor is a value that handles one message at a time (the `Actor` trait of the
//! `threadlet` crate builds on this module); between messages it is only that value and its
//! mailbox, a `Send` program that any worker may run and thieves may steal.
//!
//! # Activations
//!
//! The runtime runs a handler actor in *activations*. Its body is `Body::Idle(program)` while
//! it waits; a worker that pops it:
//!
//! 1. lends it one of its idle *carriers* (`worker/carrier.rs`; or makes one, on a stack from
//!    its pool): a coroutine that loops, resumed with a program each time, calling
//!    [`Activation::run`] (which handles a batch of messages) and suspending with the outcome
//!    (`Out::Activated`, or `Out::Stopped` once the actor has stopped and the carrier has
//!    dropped its program). The lent carrier is the top one of the worker's idle carriers, and
//!    is resumed where it lies;
//!    the program is lent where it lies too, in the body (in place if it is small: see
//!    `program.rs`, which also gives the lending protocol): an activation moves nothing;
//! 2. marks it started (from then on its body belongs to registries, and a queue entry of it is
//!    only a reference, as for a started process actor). If `run` suspends (a channel, a
//!    `join`, `sleep`, a preemption), the coroutine keeps its stack and stays on this worker,
//!    like a process actor, until `run` returns: at its first suspension the worker moves the
//!    carrier into its table of suspended activations (`suspended`: not into the body, where
//!    the carrier's stack refers to the program), pins the actor to itself (`home`) and
//!    registers it among its started actors, for wakes and for shutdown; a pinned handler
//!    actor is one whose activation is suspended. For each later resume the carrier is lent
//!    again, on top of the idle ones. An activation that does not suspend needs none of this:
//!    a wake while it runs only leaves `NOTIFIED`, no queue holds it, and shutdown never
//!    interrupts a run. A kill or shutdown unwinds a suspended activation's carrier first and
//!    drops the program after; nothing else drops the program of a pinned handler actor
//!    (`ActorCell::discard_unstarted`);
//! 3. when `run` returns, the program is the body's again (or was dropped, and the body is
//!    `Done`). If it had suspended, its carrier is idle again (the worker keeps a few idle ones
//!    and unwinds the rest), and the worker unpins and unregisters the actor. Then, by the
//!    [`Step`] that `run` returned:
//!    * [`Step::Park`]: `run` found the mailbox empty and published the actor as its waiter
//!      (steps 1 and 2 of the wake protocol in `wake.rs`), or published it as it took the
//!      last message, before `handle`, and [`activation_may_park`] found that no wake was
//!      spent since (the `threadlet` crate's batch); the worker moves the state word
//!      `RUNNING -> IDLE` (step 4). A wake that came in between leaves `NOTIFIED`: the actor is
//!      queued again as for `Yield`. A later wake schedules the actor on the waker's worker if
//!      it runs one (its next slot: a message chain stays on one core; an actor that a second
//!      wake displaces from the slot goes to the stealable deque, and a parked worker is woken
//!      to take it), else through the injector;
//!    * [`Step::Yield`]: `run` spent its batch budget with messages left, or was preempted and
//!      stopped before its next message ([`activation_preempted`]); the actor goes to the back
//!      of this worker's free FIFO, its turn marked at the back of the local queue (so that the
//!      others queued here run first; the deque is LIFO for its owner), where idle workers may
//!      steal it. After a preemption the worker also wakes a parked worker for it: CPU-bound
//!      messages then spread over idle workers, one message at a time;
//!    * [`Step::Stop`]: the actor has ended (`run` completed its join handle); it is ended.
//!
//! So the common case costs one switch pair per batch of messages, on a carrier that stays
//! warm, with no coroutine created and nothing moved; and no stack is held between batches.
//! Only an activation that suspends inside `handle` takes its carrier away, and the worker
//! makes another.
//!
//! # Shutdown
//!
//! An actor suspended inside an activation is in its worker's registry and is unwound there,
//! like a process actor. An idle one may sit in no queue at all (waiting for a message), and
//! its program holds its mailbox, whose waiter holds the actor: a cycle that only a message or
//! the last address breaks. Every live actor is in the runtime's live table (`live.rs`), and
//! shutdown drops the program of each handler actor there that is still idle (step 4 of the
//! shutdown protocol in `worker.rs`): its join handle reports `Cancelled`. No handler actor can
//! be started once shutdown has begun (it would miss that step).

use std::any::Any;
use std::io;
use std::sync::Arc;

use crate::actor::{
    ACTIVATION_PREEMPTED, ACTIVATION_WOKEN, ActorCell, ActorId, Runnable, SpawnOptions,
};
use crate::context;
use crate::join::{self, Completer, JoinErrorKind, JoinHandle};
use crate::program::Program;
use crate::runtime::{Runtime, Shared, check_options};

/// What an activation reports back to the worker; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The mailbox is empty and the actor is published as its waiter: park it.
    Park,
    /// The batch budget is spent and messages are left: queue it again.
    Yield,
    /// The actor has ended and completed its join handle.
    Stop,
}

/// The bytes of a program that a handler actor's cell keeps in place: a program no larger, and
/// aligned to no more than a word, costs no allocation of its own; a larger one is boxed.
pub const ACTIVATION_IN_PLACE: usize = crate::program::INLINE_WORDS * std::mem::size_of::<usize>();

/// A handler actor's program: handles a batch of messages per call. Called on a coroutine
/// stack that the worker lends it for the call; it may suspend (then the stack stays with it
/// until it returns).
pub trait Activation: Send + 'static {
    /// Handles what is waiting, up to a batch; see [`Step`] for what to return.
    ///
    /// A panic that escapes `run` ends the actor, contained (reported on stderr): the program
    /// is dropped without completing its join, which then reports `Cancelled`. A program that
    /// wants its panics reported as such catches them in `run` ([`catch_actor_panic`]) and
    /// completes its join with the payload, as the `threadlet` crate's handler actors do.
    fn run(&mut self) -> Step;
}

/// Whether the handler activation running now has been preempted: it has held its worker
/// for a time slice (`handle` reached a safe point after the slice ended), so it keeps its
/// lent stack and this worker until it returns. A program checks this before taking a second
/// or later message of a batch, and ends the batch with [`Step::Yield`] if so: the actor's next
/// messages may then run on an idle worker (the worker wakes one for it), instead of on this
/// one, behind the others that share it. Also `true` once the actor has been killed (a kill
/// that came while `handle` ran with no safe point): it takes no further message, and its
/// worker ends it as the activation returns (`worker.rs`, "Kill", step 3), so that a killed
/// actor handles nothing after the message at hand. `false` outside a handler activation.
///
/// ```
/// // Not an actor, so not a preempted activation.
/// assert!(!threadlet_runtime::activation_preempted());
/// ```
pub fn activation_preempted() -> bool {
    context::with_current(|cur| {
        cur.is_some_and(|(_, a)| {
            a.is_handler() && (a.has_activation_flag(ACTIVATION_PREEMPTED) || a.is_killed())
        })
    })
}

/// Whether the handler activation running now may end with [`Step::Park`] on a waiter it
/// published before its last `handle` (with its mailbox empty then): `true` if nothing has
/// woken the actor since and the activation has not suspended. A wake since then (a message, or
/// anything else) is consumed here and `false` returned: the program looks at its mailbox
/// again, as after any wake, and publishes itself again if it finds it empty. The consumed
/// wake is remembered for the rest of the activation, so every later call says `false` too:
/// a call made from `handle` cannot hide the wake from the batch's own call. An activation
/// that suspended gives `false` too: a wake may have been spent on resuming it (its state word
/// went `IDLE -> SCHEDULED` and back to running), so only a look at the mailbox can tell; and
/// so does one whose `park` took a wake without suspending (a notification waiting), for the
/// same reason.
/// `false` outside a handler activation.
///
/// ```
/// assert!(!threadlet_runtime::activation_may_park()); // not an actor
/// ```
pub fn activation_may_park() -> bool {
    // `with_worker` rather than `with_current`: one call fewer on every message that empties
    // its mailbox.
    context::with_worker(|ctx| {
        // SAFETY: as in `with_current`: `current` names an actor the worker holds for the
        // whole resume, and this runs inside it.
        match ctx.and_then(|c| unsafe { c.current.get().as_ref() }) {
            // Pinned: this activation suspended (`worker/carrier.rs`, `suspend_activation`).
            // Woken: a `park` inside `handle` took a wake without suspending.
            Some(a)
                if a.is_handler()
                    && a.home().is_none()
                    && !a.has_activation_flag(ACTIVATION_WOKEN) =>
            {
                if !a.state.take_notification() {
                    return true;
                }
                // Spent here: remembered as a `park`'s is, so that a later call in this
                // activation (the batch's, after one from `handle`) does not read the wake
                // as never sent.
                a.raise_activation_flag(ACTIVATION_WOKEN);
                false
            }
            _ => false,
        }
    })
}

/// Whether the handler actor running now has been killed (a kill that came while its program
/// ran with no safe point). A program that would end the actor normally (its mailbox ended, or
/// it stopped itself) returns [`Step::Yield`] instead: its worker then ends it as killed, as it
/// would at the next safe point, so that its `join` and monitors say `Killed` and nothing of a
/// normal end (the `stopped` hook) runs. `false` outside a handler activation.
///
/// ```
/// assert!(!threadlet_runtime::activation_killed()); // not an actor
/// ```
pub fn activation_killed() -> bool {
    context::with_current(|cur| cur.is_some_and(|(_, a)| a.is_handler() && a.is_killed()))
}

/// The one-shot completion of a handler actor's join handle. Dropped without completing, it
/// records `Cancelled`.
pub struct Completion<R>(Completer<R>);

impl<R> Completion<R> {
    /// Completes the join handle with the actor's outcome (`join` adds the actor's id and
    /// name to an error).
    pub fn complete(self, result: Result<R, JoinErrorKind>) {
        self.0.complete(result);
    }
}

impl<R> std::fmt::Debug for Completion<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Completion { .. }")
    }
}

/// Runs user code inside an actor under `catch_unwind`, and returns its panic, if any. The one
/// unwind it does not catch is shutdown's forced unwind of the actor (it resumes it, so that
/// the actor's stack unwinds to its root), which is not a panic of the user's.
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
/// let caught = rt.block_on(|| threadlet_runtime::catch_actor_panic(|| -> u32 { panic!("no") }));
/// assert!(caught.is_err());
/// ```
pub fn catch_actor_panic<R>(f: impl FnOnce() -> R) -> Result<R, Box<dyn Any + Send>> {
    crate::fault::catch(f)
}

/// Starts a handler actor on `shared`: `make` builds its program from its id and completion.
pub(crate) fn start_on<R, P>(
    shared: &Arc<Shared>,
    opts: SpawnOptions,
    make: impl FnOnce(ActorId, Completion<R>) -> P,
) -> io::Result<JoinHandle<R>>
where
    R: Send + 'static,
    P: Activation,
{
    match launch(shared, build(shared, opts, make)) {
        Ok(handle) => Ok(handle),
        // Shutdown has begun (say, a destructor of an actor it unwinds starts one): as a
        // process actor spawned now, the actor never runs, and its join handle reports
        // `Cancelled`; its address refuses sends.
        Err((_, built)) => Ok(built.cancel()),
    }
}

/// A handler actor built and not started yet: its cell, which holds its program, and its join
/// handle. Dropped, it drops the program (its join handle would report `Cancelled`).
pub(crate) struct Built<R> {
    entry: Runnable,
    handle: JoinHandle<R>,
}

impl<R> Built<R> {
    /// Drops the actor unstarted, here: its program (user code; contained, as this may run in
    /// a destructor during an unwind) and with it its completion, so that the returned join
    /// handle reports `Cancelled`.
    fn cancel(self) -> JoinHandle<R> {
        let Built { entry, handle } = self;
        let id = entry.actor().id;
        crate::fault::contain(
            format_args!("handler actor {id}, dropped unstarted at shutdown"),
            move || drop(entry),
        );
        handle
    }
}

/// Builds a handler actor: runs `make`, user code, so a caller that holds a lock
/// (`Handle::start_handler`, the spawn gate) calls this before taking it.
pub(crate) fn build<R, P>(
    shared: &Arc<Shared>,
    opts: SpawnOptions,
    make: impl FnOnce(ActorId, Completion<R>) -> P,
) -> Built<R>
where
    R: Send + 'static,
    P: Activation,
{
    // No stack is reserved: an idle handler actor holds none, and an activation borrows one
    // of the runtime's size from its worker's pool (a custom `stack_size` is ignored).
    let id = ActorId::next();
    let (completer, mut handle) = join::packet(id, opts.name.as_deref().map(Arc::from));
    let program = Program::new(make(id, Completion(completer)));
    let entry = ActorCell::new_handler(shared.clone(), id, opts, program, handle.exit_source());
    handle.set_actor(entry.actor());
    Built { entry, handle }
}

/// Starts a built handler actor; refuses, giving it back, once shutdown has begun. Runs no
/// user code.
pub(crate) fn launch<R: Send + 'static>(
    shared: &Arc<Shared>,
    built: Built<R>,
) -> Result<JoinHandle<R>, (io::Error, Built<R>)> {
    if let Err(e) = refuse_after_shutdown(shared) {
        return Err((e, built));
    }
    let Built { entry, handle } = built;
    let actor = entry.actor();
    shared.live.insert(actor);
    shared.spawn_cell(entry);
    Ok(handle)
}

/// No handler actor starts once shutdown has begun: its program could only be dropped through
/// the live table's sweep of handler actors, which shutdown has already made (or is making).
pub(crate) fn refuse_after_shutdown(shared: &Shared) -> io::Result<()> {
    if shared.is_shutdown() {
        return Err(io::Error::other("the runtime is shutting down"));
    }
    Ok(())
}

/// Starts a handler actor on the current runtime (from inside an actor).
///
/// This is the runtime's half; applications use `threadlet::start` and the `Actor` trait.
pub fn start_handler<R, P>(
    opts: SpawnOptions,
    make: impl FnOnce(ActorId, Completion<R>) -> P,
) -> io::Result<JoinHandle<R>>
where
    R: Send + 'static,
    P: Activation,
{
    check_options(&opts)?;
    crate::checkpoint();
    let shared = context::current_runtime_for("start")?;
    start_on(&shared, opts, make)
}

impl Runtime {
    /// Starts a handler actor on this runtime, from any thread.
    ///
    /// This is the runtime's half; applications use `threadlet::RuntimeExt::start` and the
    /// `Actor` trait.
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
        start_on(self.shared(), opts, make)
    }
}
