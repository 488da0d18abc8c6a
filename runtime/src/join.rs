//! Join handles: the one-shot hand-off of an actor's result (or panic) to whoever waits for it.
//!
//! The actor's side is a [`Completer`], moved into its entry closure; the waiting side is a
//! [`JoinHandle`]. Both share a [`Packet`] whose slot a mutex guards. Waiting follows the wake
//! protocol of `wake.rs`: publish the waiter under the lock, check the slot, park, loop. The
//! completer fills the slot and takes the waiter under the same lock, so exactly one of them
//! sees the other. If the completer is dropped without a value (the actor never started, or
//! shutdown unwound it), the slot records `Cancelled` (`Killed` while its worker kills it), so
//! a joiner never waits forever. The slot holds a [`JoinErrorKind`]; the packet knows the
//! actor's id and name, and `join` adds them to make the [`JoinError`] it returns.
//!
//! Who else hears of the end is under the same lock, and costs nothing until asked for: the
//! [`ExitWatch`] that monitors share is made on first use, and an actor with a mailbox has its
//! mailbox told first ([`ExitSink`]), which keeps the end for monitors made through an address.
//! Until then the slot says why the actor ended (`Slot::reason`), after a join too.

use std::any::Any;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, Weak};

use crate::actor::{ActorCell, ActorId, Start, StartFn};
use crate::context::{self, Waiter};
use crate::exit_hooks::{ExitHook, ExitHooks, Listener};
use crate::fault;
use crate::sync::Mutex;

/// Why joining an actor gave no value, and which actor it was: its id, its name (if it was
/// spawned with one), and the [`JoinErrorKind`].
///
/// ```
/// use threadlet_runtime::{JoinErrorKind, Runtime, SpawnOptions};
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let h = rt
///     .spawn_with(SpawnOptions::new().name("mapper"), || -> u32 { panic!("boom") })
///     .unwrap();
/// let id = h.id();
/// let err = h.join().unwrap_err();
/// assert_eq!(err.id(), id);
/// assert_eq!(err.name(), Some("mapper"));
/// assert!(matches!(err.kind(), JoinErrorKind::Panicked(_)));
/// assert_eq!(err.panic_message(), Some("boom"));
/// assert_eq!(err.to_string(), format!("actor {id} \"mapper\" panicked: boom"));
/// ```
pub struct JoinError {
    id: ActorId,
    name: Option<Arc<str>>,
    kind: JoinErrorKind,
    /// A `Cancelled` that says nothing of the actor: the caller gave up waiting for it, as it
    /// could not suspend (`JoinHandle::join`); the actor may still be running.
    not_joined: bool,
}

/// How an actor ended without a value: [`JoinError::kind`].
///
/// More kinds may be added: a `match` on it needs a wildcard arm.
#[non_exhaustive]
pub enum JoinErrorKind {
    /// The actor panicked; the payload is what `panic!` was given.
    Panicked(Box<dyn Any + Send + 'static>),
    /// The actor was dropped before finishing: the runtime shut down first. Also what a join
    /// returns when its caller may not wait (a runtime's shutdown or a kill unwinding the
    /// caller, the caller's own panic, an exit hook): then the actor may still be running, and
    /// the error's message says that it was not joined.
    Cancelled,
    /// The actor was killed ([`JoinHandle::abort`]): its stack was unwound (destructors ran)
    /// at its next suspension or safe point, or it was dropped before it started.
    Killed,
    /// The actor could not start: no stack could be mapped for it when it was due to run (the
    /// kernel refused the memory). Messages already in its mailbox are dropped with it.
    Spawn(std::io::Error),
}

impl JoinError {
    fn new(id: ActorId, name: Option<Arc<str>>, kind: JoinErrorKind) -> JoinError {
        JoinError {
            id,
            name,
            kind,
            not_joined: false,
        }
    }

    /// The id of the actor.
    pub fn id(&self) -> ActorId {
        self.id
    }

    /// The actor's name, if it was spawned with one.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let err = rt.spawn(|| -> u32 { panic!("boom") }).join().unwrap_err();
    /// assert_eq!(err.name(), None); // spawned without a name
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// How the actor ended.
    ///
    /// ```
    /// use threadlet_runtime::JoinErrorKind;
    ///
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| threadlet_runtime::sleep(std::time::Duration::from_secs(3600)));
    /// h.abort();
    /// let err = h.join().unwrap_err();
    /// assert!(matches!(err.kind(), JoinErrorKind::Killed));
    /// ```
    pub fn kind(&self) -> &JoinErrorKind {
        &self.kind
    }

    /// How the actor ended, by value (for the panic payload, see also
    /// [`into_panic`](JoinError::into_panic)).
    pub fn into_kind(self) -> JoinErrorKind {
        self.kind
    }

    /// Whether the actor panicked.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let err = rt.spawn(|| -> u32 { panic!("boom") }).join().unwrap_err();
    /// assert!(err.is_panic());
    /// assert!(!err.is_cancelled());
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self.kind, JoinErrorKind::Panicked(_))
    }

    /// Whether the actor was cancelled by shutdown, or this error is a join that could not
    /// wait for it ([`is_not_joined`](JoinError::is_not_joined)).
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use threadlet_runtime::{Runtime, park};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let (started, is_started) = mpsc::channel();
    /// let h = rt.spawn(move || {
    ///     started.send(()).unwrap();
    ///     while park().is_ok() {} // waits for a wake that never comes
    /// });
    /// is_started.recv().unwrap();
    /// drop(rt); // shutdown unwinds the parked actor
    /// let err = h.join().unwrap_err();
    /// assert!(err.is_cancelled());
    /// assert!(!err.is_panic());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self.kind, JoinErrorKind::Cancelled)
    }

    /// Whether this is a join that gave up because its caller could not wait (a runtime's
    /// shutdown or a kill unwinding the caller, its own panic, an exit hook): the error's kind
    /// is `Cancelled`, but the actor may still be running, and its result was not taken.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| threadlet_runtime::sleep(std::time::Duration::from_secs(3600)));
    /// h.abort();
    /// assert!(!h.join().unwrap_err().is_not_joined()); // joined: it was killed
    /// ```
    pub fn is_not_joined(&self) -> bool {
        self.not_joined
    }

    /// Whether the actor was killed ([`JoinHandle::abort`]).
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| threadlet_runtime::sleep(std::time::Duration::from_secs(3600)));
    /// h.abort();
    /// assert!(h.join().unwrap_err().is_killed());
    /// ```
    pub fn is_killed(&self) -> bool {
        matches!(self.kind, JoinErrorKind::Killed)
    }

    /// The panic payload.
    ///
    /// # Panics
    ///
    /// If the actor did not panic; [`try_into_panic`](JoinError::try_into_panic) does not.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| -> u32 { std::panic::panic_any(7_i32) });
    /// let err = h.join().unwrap_err();
    /// assert_eq!(err.panic_message(), None); // not a string payload
    /// let payload = err.into_panic();
    /// assert_eq!(payload.downcast_ref::<i32>(), Some(&7));
    /// ```
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        match self.try_into_panic() {
            Ok(p) => p,
            Err(e) => panic!("JoinError::into_panic: not a panic: {e}"),
        }
    }

    /// The panic payload if the actor panicked, else the error back.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| threadlet_runtime::sleep(std::time::Duration::from_secs(3600)));
    /// h.abort();
    /// let err = h.join().unwrap_err().try_into_panic().unwrap_err();
    /// assert!(err.is_killed());
    /// ```
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.kind {
            JoinErrorKind::Panicked(p) => Ok(p),
            kind => Err(JoinError { kind, ..self }),
        }
    }

    /// The panic message, when the payload is a string (as `panic!("...")` makes).
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let n = 3;
    /// let err = rt.spawn(move || -> u32 { panic!("bad input {n}") }).join().unwrap_err();
    /// assert_eq!(err.panic_message(), Some("bad input 3"));
    /// ```
    pub fn panic_message(&self) -> Option<&str> {
        self.kind.panic_message()
    }
}

impl JoinErrorKind {
    fn panic_message(&self) -> Option<&str> {
        match self {
            JoinErrorKind::Panicked(p) => fault::panic_message(&**p),
            _ => None,
        }
    }
}

impl fmt::Debug for JoinErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinErrorKind::Panicked(_) => f
                .debug_tuple("Panicked")
                .field(&self.panic_message().unwrap_or("<non-string payload>"))
                .finish(),
            JoinErrorKind::Cancelled => f.write_str("Cancelled"),
            JoinErrorKind::Killed => f.write_str("Killed"),
            JoinErrorKind::Spawn(e) => f.debug_tuple("Spawn").field(e).finish(),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("JoinError");
        d.field("id", &self.id)
            .field("name", &self.name)
            .field("kind", &self.kind);
        if self.not_joined {
            d.field("not_joined", &true);
        }
        d.finish()
    }
}

/// `actor #42 "mapper" panicked: boom`, `actor #7 was killed`: the actor, its name if it has
/// one, and what happened to it.
impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "actor {}", self.id)?;
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        match &self.kind {
            JoinErrorKind::Panicked(_) => match self.panic_message() {
                Some(m) => write!(f, " panicked: {m}"),
                None => f.write_str(" panicked"),
            },
            JoinErrorKind::Cancelled if self.not_joined => f.write_str(
                " was not joined: the caller could not wait (shutdown or a kill unwinding it, its \
                 own panic, or an exit hook)",
            ),
            JoinErrorKind::Cancelled => f.write_str(" was cancelled by runtime shutdown"),
            JoinErrorKind::Killed => f.write_str(" was killed"),
            JoinErrorKind::Spawn(e) => write!(f, " could not start: {e}"),
        }
    }
}

impl std::error::Error for JoinError {}

enum Slot<R> {
    Pending(Option<Waiter>),
    /// The outcome; `join` adds the actor's id and name to an error.
    Ready(Result<R, JoinErrorKind>),
    /// Taken by `join` (or a select): only why the actor ended stays, for a watcher that comes
    /// later. `None` is a normal end, the common case; another reason is boxed, so that a
    /// slot is no larger than its result (see `packet_size`).
    Taken(Option<Box<ExitReason>>),
}

impl<R> Slot<R> {
    /// Why the actor ended, once it has.
    fn reason(&self) -> Option<ExitReason> {
        match self {
            Slot::Pending(_) => None,
            Slot::Ready(r) => Some(ExitReason::of(r)),
            Slot::Taken(reason) => Some(reason.as_deref().cloned().unwrap_or(ExitReason::Normal)),
        }
    }

    /// Takes the result out of a `Ready` slot, leaving why the actor ended.
    fn take(&mut self) -> Result<R, JoinErrorKind> {
        let reason = self.reason().expect("a ready slot");
        let kept = (!reason.is_normal()).then(|| Box::new(reason));
        match std::mem::replace(self, Slot::Taken(kept)) {
            Slot::Ready(r) => r,
            _ => unreachable!("taken from a ready slot"),
        }
    }
}

struct Packet<R> {
    /// The slot and who hears of the end, under one lock.
    state: Mutex<PacketState<R>>,
    id: ActorId,
    /// Boxed, one word: most actors have no name (see `packet_size`).
    name: Option<Box<Arc<str>>>,
}

struct PacketState<R> {
    slot: Slot<R>,
    /// The `Exit` that exit watches share, made on first use: most actors are never watched
    /// through their handle. An allocation of its own, so that watchers never keep the result
    /// alive. Until it is made, why the actor ended is read from the slot.
    exit: Option<Arc<Exit>>,
    /// Told of the end before the exit watches ([`set_exit_sink`]): the actor's mailbox, for
    /// an actor that has one. Held until the end: the exit hooks of monitors made through an
    /// address wait in the mailbox, which must not go before the end is told (a process actor
    /// whose addresses are all gone drops its `Mailbox` before it ends, and its monitors
    /// heard `Cancelled` instead of why it ended). What keeps the mailbox so is its block:
    /// its queue is emptied when the owner drops its `Mailbox`.
    sink: Option<Arc<dyn ExitSink>>,
}

/// A join packet without its result type, for the actor's cell, which holds it weakly
/// (`ActorCell::exit`): how a bare id reaches the actor's end through the table of live actors
/// (`live.rs`).
pub(crate) trait ExitSource: Send + Sync {
    fn exit_watch(&self) -> ExitWatch;
    /// Whether the result (or why there is none) is recorded.
    fn is_ended(&self) -> bool;
    /// The actor's mailbox's figures, from its exit sink, if it has one (`dump.rs`).
    fn mailbox(&self) -> Option<crate::MailboxStats>;
    /// [`set_exit_sink`], from the actor's side ([`set_own_exit_sink`]).
    fn set_sink(&self, sink: Arc<dyn ExitSink>);
}

impl<R: Send> ExitSource for Packet<R> {
    fn exit_watch(&self) -> ExitWatch {
        ExitWatch(self.exit())
    }

    fn is_ended(&self) -> bool {
        !matches!(self.state.lock().slot, Slot::Pending(_))
    }

    fn mailbox(&self) -> Option<crate::MailboxStats> {
        let sink = self.state.lock().sink.clone()?;
        sink.mailbox()
    }

    fn set_sink(&self, sink: Arc<dyn ExitSink>) {
        self.set_sink(sink);
    }
}

impl<R> Packet<R> {
    /// The `Exit` watchers share, made now if nobody watched before.
    fn exit(&self) -> Arc<Exit> {
        let mut st = self.state.lock();
        if let Some(e) = &st.exit {
            return e.clone();
        }
        let state = match st.slot.reason() {
            None => ExitState::Live(ExitHooks::new()),
            Some(reason) => ExitState::Ended(self.down(reason)),
        };
        let exit = Arc::new(Exit {
            id: self.id,
            state: Mutex::new(state),
        });
        st.exit = Some(exit.clone());
        exit
    }

    fn down(&self, reason: ExitReason) -> Down {
        Down {
            id: self.id,
            name: self.name.as_deref().cloned(),
            reason,
        }
    }
}

/// Where an actor's end is told before its exit watches hear it: the `threadlet` crate's
/// mailbox, which keeps the end for monitors made through an address later, so that an actor
/// nobody watches pays for no [`ExitWatch`]. See [`set_exit_sink`].
pub trait ExitSink: Send + Sync {
    /// The actor has ended. Called once, on the thread that records the end (before the exit
    /// watches' hooks, and before a waiting `join` is woken), or at once by `set_exit_sink` if
    /// it had ended already. Runs as an exit hook does: it must not block, and a panic in it
    /// is contained.
    fn exited(&self, down: &Down);

    /// The mailbox's figures, for the dump and the deadlock check (`dump.rs`). Must not block
    /// for long: it is called from the monitor thread and from `Runtime::dump`.
    fn mailbox(&self) -> Option<crate::MailboxStats> {
        None
    }
}

/// Tells `sink` of the actor's end: when it ends, or now if it has. One sink per actor: a later
/// call replaces an earlier one that has not been told yet. For the `threadlet` crate's
/// mailboxes (`__private`); not part of the API.
pub fn set_exit_sink<R>(h: &JoinHandle<R>, sink: Arc<dyn ExitSink>) {
    h.packet.set_sink(sink);
}

/// [`set_exit_sink`] for the calling actor's own end, from inside it, before it waits on the
/// mailbox that `sink` is: the deadlock check reads a waiting actor's mailbox through its
/// sink (`dump::mailbox_of`), and an actor started from a plain thread may run before its
/// spawner has set the sink from the join handle. Outside an actor it does nothing. For the
/// `threadlet` crate's mailboxes (`__private`); not part of the API.
pub fn set_own_exit_sink(sink: Arc<dyn ExitSink>) {
    if let Some(packet) = context::with_current(|cur| cur.and_then(|(_, a)| a.exit.upgrade())) {
        packet.set_sink(sink);
    }
}

impl<R> Packet<R> {
    /// See [`set_exit_sink`].
    fn set_sink(&self, sink: Arc<dyn ExitSink>) {
        let reason = {
            let mut st = self.state.lock();
            match st.slot.reason() {
                Some(reason) => reason,
                None => {
                    let replaced = st.sink.replace(sink);
                    drop(st);
                    // After unlocking, contained: it may be the last reference to a mailbox.
                    if let Some(old) = replaced {
                        let id = self.id;
                        fault::contain(format_args!("the exit sink of actor {id}"), || drop(old));
                    }
                    return;
                }
            }
        };
        tell_sink(sink, &self.down(reason));
    }
}

/// Tells a sink of the end; contained, as an exit hook.
fn tell_sink(sink: Arc<dyn ExitSink>, down: &Down) {
    fault::contain(format_args!("the exit sink of actor {}", down.id), || {
        sink.exited(down);
        // The last reference to the sink (a mailbox whose addresses are all gone) may drop
        // here, contained too.
        drop(sink);
    });
}

/// The hooks waiting on an actor's exit watch, pruned or not: for tests of pruning
/// (`__private`); not part of the API.
pub fn exit_hooks_waiting(watch: &ExitWatch) -> usize {
    watch.0.hooks()
}

/// Calls an exit hook as the runtime calls its own: a panic in it is contained (reported on
/// stderr). For the `threadlet` crate's mailboxes (`__private`); not part of the API.
pub fn call_exit_hook(hook: impl FnOnce(&Down), down: &Down) {
    fault::contain(format_args!("an exit hook of actor {}", down.id), || {
        hook(down)
    });
}

/// The actor behind a join handle, weakly: for the `threadlet` crate's mailboxes, which kill it
/// with [`kill_actor`] (`__private`); not part of the API.
pub fn actor_of<R>(h: &JoinHandle<R>) -> Weak<ActorCell> {
    h.actor.clone()
}

/// Kills an actor (see [`JoinHandle::abort`]); `false` if it has ended. Unlike `abort` it does
/// not look at the actor's result: the caller knows whether the end is recorded (`__private`).
pub fn kill_actor(actor: &Arc<ActorCell>) -> bool {
    actor.kill()
}

/// Why an actor ended, as its monitors hear it ([`Down`]).
///
/// ```
/// use threadlet_runtime::{ExitReason, Runtime};
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let h = rt.spawn(|| -> u32 { panic!("bad input") });
/// let (tx, heard) = std::sync::mpsc::channel();
/// h.exit_watch().on_exit(move |down| tx.send(down.reason.clone()).unwrap());
/// assert!(h.join().is_err());
/// // A hook may run a moment after `join` returns: wait for it rather than look.
/// assert_eq!(heard.recv().unwrap(), ExitReason::Panicked("bad input".into()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitReason {
    /// It returned (a process actor's function, or a handler actor that stopped).
    Normal,
    /// It panicked; the panic message (or `<non-string payload>`).
    Panicked(String),
    /// It was killed ([`JoinHandle::abort`]).
    Killed,
    /// The runtime shut down before it finished.
    Cancelled,
    /// It could not start (no stack could be had); the error.
    NoStart(String),
    /// A monitor asked for by id found no live actor with it (`threadlet::monitor(id)`): it
    /// had ended already, or never existed on that runtime (Erlang's `noproc`).
    NoProc,
}

impl ExitReason {
    fn of<R>(result: &Result<R, JoinErrorKind>) -> ExitReason {
        match result {
            Ok(_) => ExitReason::Normal,
            Err(e @ JoinErrorKind::Panicked(_)) => ExitReason::Panicked(
                e.panic_message()
                    .unwrap_or("<non-string payload>")
                    .to_owned(),
            ),
            Err(JoinErrorKind::Killed) => ExitReason::Killed,
            Err(JoinErrorKind::Cancelled) => ExitReason::Cancelled,
            Err(JoinErrorKind::Spawn(e)) => ExitReason::NoStart(e.to_string()),
        }
    }

    /// Whether the actor ended normally (Erlang's `normal`): anything else is abnormal.
    pub fn is_normal(&self) -> bool {
        matches!(self, ExitReason::Normal)
    }
}

/// The notice that an actor has ended: its id, its name (if it had one), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Down {
    /// The actor that ended.
    pub id: ActorId,
    /// Its name, if it was spawned with one.
    pub name: Option<Arc<str>>,
    /// Why it ended.
    pub reason: ExitReason,
}

/// The end of one actor, for monitors: hooks to call once, or the `Down` once it happened.
struct Exit {
    id: ActorId,
    state: Mutex<ExitState>,
}

enum ExitState {
    Live(ExitHooks),
    Ended(Down),
}

impl Exit {
    /// The actor ended: records the `Down` and calls every hook, after unlocking, each
    /// contained (`fault.rs`).
    fn ended(&self, down: Down) {
        let hooks = {
            let mut st = self.state.lock();
            match std::mem::replace(&mut *st, ExitState::Ended(down.clone())) {
                ExitState::Live(hooks) => hooks,
                ExitState::Ended(_) => unreachable!("an actor ends once"),
            }
        };
        hooks.call_all(&down);
    }

    fn on_exit(&self, listener: Option<Listener>, hook: ExitHook) {
        let down = {
            let mut st = self.state.lock();
            match &mut *st {
                ExitState::Live(hooks) => {
                    let pruned = hooks.push(listener, hook);
                    drop(st);
                    // Hooks nobody wants any more go now, outside the lock (`exit_hooks.rs`).
                    drop(pruned);
                    return;
                }
                ExitState::Ended(down) => down.clone(),
            }
        };
        call_exit_hook(hook, &down);
    }

    /// Hooks waiting (tests of pruning).
    fn hooks(&self) -> usize {
        match &*self.state.lock() {
            ExitState::Live(hooks) => hooks.len(),
            ExitState::Ended(_) => 0,
        }
    }
}

/// Hears when one actor ends, without owning its result: [`JoinHandle::exit_watch`].
/// `Clone + Send + Sync`; cheap to keep.
#[derive(Clone)]
pub struct ExitWatch(Arc<Exit>);

impl ExitWatch {
    /// Calls `hook` with the [`Down`] once the actor has ended: at once (on this thread) if
    /// it already has, else on the thread that ends it, once its result is stored and before
    /// a waiting `join` is woken (a `join` that starts while the hooks run finds the result
    /// and may return before they have: what a hook does is seen through the hook, not
    /// through `join`). The hook must not block: run at an actor's end, a blocking
    /// operation there fails at once, as if the runtime were shutting down (a send to a full
    /// bounded mailbox hands its message back, a `sleep` returns, a `blocking` call runs its
    /// closure on the spot), for an actor suspended in its own exit hooks would hold its
    /// worker's safe points off. A panic in it is contained (reported on stderr). Each hook is
    /// kept until the actor ends.
    ///
    /// ```
    /// use std::sync::mpsc;
    ///
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| 1);
    /// let (tx, rx) = mpsc::channel();
    /// h.exit_watch().on_exit(move |down| tx.send(down.reason.clone()).unwrap());
    /// assert!(rx.recv().unwrap().is_normal());
    /// ```
    pub fn on_exit(&self, hook: impl FnOnce(&Down) + Send + 'static) {
        self.0.on_exit(None, Box::new(hook));
    }

    /// [`on_exit`](ExitWatch::on_exit), for a hook that only matters while somebody holds
    /// `listener` (say, the state a monitor shares with its hook, which the hook holds only
    /// weakly): once nobody does, the hook may be dropped unrun before the actor ends, so
    /// that an actor watched again and again by watchers that come and go keeps only the
    /// hooks of those still there. A hook is either called once or dropped unrun; one whose
    /// listener is gone may still be called at the end.
    ///
    /// ```
    /// use std::sync::{Arc, OnceLock, Weak};
    /// use threadlet_runtime::{Down, ExitReason, Runtime};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| threadlet_runtime::sleep(std::time::Duration::from_secs(3600)));
    /// let watch = h.exit_watch();
    /// for _ in 0..1_000 {
    ///     // A watcher that goes away before the actor ends: its hook does not pile up.
    ///     let heard: Arc<OnceLock<Down>> = Arc::new(OnceLock::new());
    ///     let weak = Arc::downgrade(&heard);
    ///     watch.on_exit_for(weak.clone(), move |down| {
    ///         if let Some(h) = weak.upgrade() {
    ///             let _ = h.set(down.clone());
    ///         }
    ///     });
    /// }
    /// let heard: Arc<OnceLock<Down>> = Arc::new(OnceLock::new());
    /// let weak: Weak<OnceLock<Down>> = Arc::downgrade(&heard);
    /// watch.on_exit_for(weak.clone(), move |down| {
    ///     let _ = weak.upgrade().map(|h| h.set(down.clone()));
    /// });
    /// h.abort();
    /// assert!(h.join().unwrap_err().is_killed());
    /// assert_eq!(heard.get().map(|d| &d.reason), Some(&ExitReason::Killed));
    /// ```
    pub fn on_exit_for<L: Any + Send + Sync>(
        &self,
        listener: Weak<L>,
        hook: impl FnOnce(&Down) + Send + 'static,
    ) {
        self.0.on_exit(Some(listener), Box::new(hook));
    }

    /// The [`Down`], if the actor has ended.
    pub fn down(&self) -> Option<Down> {
        match &*self.0.state.lock() {
            ExitState::Ended(d) => Some(d.clone()),
            ExitState::Live(_) => None,
        }
    }

    /// The actor's id.
    pub fn id(&self) -> ActorId {
        self.0.id
    }
}

impl fmt::Debug for ExitWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExitWatch").field("id", &self.id()).finish()
    }
}

/// The actor's end: fills the packet once, or records `Cancelled` when dropped unfilled.
///
/// One word with no `Option` inside, so that an `Option<Completion>` is one word too (a handler
/// actor's program holds one, and every idle handler actor keeps its program).
pub(crate) struct Completer<R>(Arc<Packet<R>>);

impl<R> Completer<R> {
    pub(crate) fn complete(self, result: Result<R, JoinErrorKind>) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the `Arc` is moved out of `this` exactly once: `this` is never dropped
        // (`ManuallyDrop`) and not used after this read, so the reference count stays right and
        // `Drop` (which would record `Cancelled`) does not run.
        let packet = unsafe { std::ptr::read(&this.0) };
        // With the handle gone, `packet` is the last reference: the result drops with it here.
        fill(&packet, result);
    }
}

impl<R> Drop for Completer<R> {
    fn drop(&mut self) {
        // Dropped unfilled: while its worker kills it (`worker.rs`, "Kill"), or else because
        // the runtime shut down (or the actor never started).
        let why = if context::is_killing() {
            JoinErrorKind::Killed
        } else if let Some(e) = context::take_no_stack() {
            JoinErrorKind::Spawn(e)
        } else {
            JoinErrorKind::Cancelled
        };
        fill(&self.0, Err(why));
    }
}

fn fill<R>(packet: &Packet<R>, result: Result<R, JoinErrorKind>) {
    let reason = ExitReason::of(&result);
    let (waiter, exit, sink) = {
        let mut st = packet.state.lock();
        let waiter = match std::mem::replace(&mut st.slot, Slot::Ready(result)) {
            Slot::Pending(w) => w,
            _ => unreachable!("a join packet is filled once"),
        };
        (waiter, st.exit.clone(), st.sink.take())
    };
    // The joiner is woken on every way out, an unwind out of a hook included.
    struct WakeOnDrop(Option<Waiter>);
    impl Drop for WakeOnDrop {
        fn drop(&mut self) {
            if let Some(w) = self.0.take() {
                w.wake_by_value();
            }
        }
    }
    let _joiner = WakeOnDrop(waiter);
    if exit.is_none() && sink.is_none() {
        // Nobody to tell: a watcher that comes later reads why from the slot.
        return;
    }
    // Exit hooks before the joiner is woken: a `join` that was waiting returns with every
    // monitor told, and a name removed. (One that looks at the slot while the hooks run finds
    // the result there and returns at once, before they finish: the slot is filled first, so
    // that a watch made meanwhile (`Packet::exit`) sees the end.) The sink (the mailbox)
    // before the exit watches: a supervisor that hears of the end through
    // its watch and restarts the child finds this incarnation's end recorded in its mailbox.
    // Safe points are inert meanwhile: no preemption, kill or shutdown unwinds the actor
    // half-way through its hooks.
    let down = packet.down(reason);
    context::running_exit_hooks(|| {
        if let Some(sink) = sink {
            tell_sink(sink, &down);
        }
        if let Some(exit) = exit {
            exit.ended(down);
        }
    });
}

/// A fresh packet: the actor's end and the waiting end.
pub(crate) fn packet<R>(id: ActorId, name: Option<Arc<str>>) -> (Completer<R>, JoinHandle<R>) {
    let packet = Arc::new(Packet {
        state: Mutex::new(PacketState {
            slot: Slot::Pending(None),
            exit: None,
            sink: None,
        }),
        id,
        name: name.map(Box::new),
    });
    (
        Completer(packet.clone()),
        JoinHandle {
            packet,
            actor: Weak::new(),
        },
    )
}

/// Wraps a user closure into an actor entry that reports to the returned handle.
///
/// Two places here run user code outside the closure itself, and both are contained (see
/// `fault.rs`): dropping the result or panic payload when nobody holds the join handle any more
/// (the last `Arc` of the packet is then the completer's), and dropping the closure of an actor
/// that could not start.
pub(crate) fn entry<F, R>(id: ActorId, name: Option<Arc<str>>, f: F) -> (StartFn, JoinHandle<R>)
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let (completer, handle) = packet(id, name);
    (Box::new(Entry { id, f, completer }), handle)
}

/// An actor's entry: its closure and its end.
struct Entry<F, R> {
    id: ActorId,
    f: F,
    completer: Completer<R>,
}

impl<F, R> Start for Entry<F, R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    fn start(self: Box<Self>, failed: Option<std::io::Error>) {
        let Entry { id, f, completer } = unbox(self);
        if let Some(e) = failed {
            fault::contain(
                format_args!("the closure of actor {id}, which could not start"),
                || drop(f),
            );
            completer.complete(Err(JoinErrorKind::Spawn(e)));
            return;
        }
        let result = match catch_unwind(AssertUnwindSafe(f)) {
            Ok(v) => Ok(v),
            // Shutdown's forced unwind passes through here: let it go on to the coroutine's
            // root (the completer, dropped on the way, records `Cancelled`).
            Err(p) if context::is_cancelling() => resume_unwind(p),
            Err(p) => Err(JoinErrorKind::Panicked(p)),
        };
        // With the handle gone, completing drops the result (or payload) right here.
        fault::contain(
            format_args!("dropping the result of actor {id}, which nobody joined"),
            move || completer.complete(result),
        );
    }
}

/// Moves a value out of its box and frees the box now, not when the caller's scope ends.
#[expect(
    clippy::boxed_local,
    reason = "taking the box is the point: it is freed on return"
)]
fn unbox<T>(b: Box<T>) -> T {
    *b
}

/// An owned permission to wait for an actor's result. Dropping it detaches the actor.
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(2).build().unwrap();
/// let handles: Vec<_> = (1..=3u32).map(|i| rt.spawn(move || i * 10)).collect();
/// let results: Vec<u32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
/// assert_eq!(results, [10, 20, 30]);
/// drop(rt.spawn(|| ())); // detached: runs without anyone waiting for it
/// ```
pub struct JoinHandle<R> {
    /// Holds the id too (two words a handle: applications keep many).
    packet: Arc<Packet<R>>,
    /// The actor, for `abort`; weak, so a handle does not keep an ended actor allocated.
    actor: Weak<ActorCell>,
}

impl<R> JoinHandle<R> {
    /// Waits for the actor to finish: suspends the calling actor, or blocks a plain thread.
    /// Joining is a preemption safe point.
    ///
    /// Returns the actor's value, or why there is none: it panicked (the payload is kept), it
    /// was killed, the runtime shut down first, or (when the kernel refused memory) it could
    /// not start. A caller that may not wait (a runtime's shutdown or a kill unwinding it, its
    /// own panic, an exit hook) gets `Cancelled` at once if the actor has not finished
    /// ([`JoinError::is_not_joined`]).
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(2).build().unwrap();
    /// // From a plain thread, `join` blocks the thread...
    /// assert_eq!(rt.spawn(|| 2 + 2).join().unwrap(), 4);
    /// // ...and from an actor it suspends only that actor.
    /// let v = rt.block_on(|| threadlet_runtime::spawn(|| "inner").join().unwrap());
    /// assert_eq!(v, "inner");
    /// // A panic comes back as an error.
    /// assert!(rt.spawn(|| -> u32 { panic!("oops") }).join().unwrap_err().is_panic());
    /// ```
    pub fn join(self) -> Result<R, JoinError> {
        // A safe point: a loop joining many finished actors never suspends otherwise.
        crate::checkpoint();
        let mut may_wait = true;
        loop {
            {
                let mut st = self.packet.state.lock();
                match &mut st.slot {
                    Slot::Ready(_) => return st.slot.take().map_err(|kind| self.error(kind)),
                    Slot::Pending(_) if !may_wait => break,
                    Slot::Pending(w) => *w = Some(Waiter::current()),
                    Slot::Taken(_) => panic!("{TAKEN}"),
                }
            }
            // A park that fails: the joiner may not suspend (shutdown or a kill unwinds it, or
            // its own panic does, or it is an exit hook: `context::may_suspend`). One more look
            // takes a result that came meanwhile.
            may_wait = context::park_on(crate::Wait::Join {
                actor: self.packet.id,
            })
            .is_ok();
        }
        // Reported as `Cancelled`, the actor's result left unjoined.
        Err(self.not_joined())
    }

    /// Whether the actor has finished (or will never run).
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, park};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let quick = rt.spawn(|| 1);
    /// while !quick.is_finished() {
    ///     std::thread::yield_now();
    /// }
    /// assert_eq!(quick.join().unwrap(), 1); // does not wait
    ///
    /// let stuck = rt.spawn(|| while park().is_ok() {}); // nobody wakes it
    /// assert!(!stuck.is_finished());
    /// drop(rt);
    /// assert!(stuck.is_finished()); // cancelled: it will never run again
    /// ```
    pub fn is_finished(&self) -> bool {
        !matches!(self.packet.state.lock().slot, Slot::Pending(_))
    }

    /// Kills the actor: it ends at its next suspension or safe point, its stack unwound on
    /// its own worker (destructors run), and `join` reports [`JoinErrorKind::Killed`]. An actor
    /// that has not started is dropped unstarted; a handler actor between messages is dropped
    /// with its state and mailbox (the messages in it are dropped; later sends hand theirs
    /// back). Returns `false` if the actor had already ended (its result is there to join);
    /// `true` means it was still live, though an actor already returning from its function
    /// reaches no safe point again and ends normally. Code with no safe point (a blocking
    /// call, a loop without `checkpoint`) cannot be interrupted: the kill waits for the next
    /// safe point.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    ///
    /// struct SetOnDrop(Arc<AtomicBool>);
    /// impl Drop for SetOnDrop {
    ///     fn drop(&mut self) {
    ///         self.0.store(true, Ordering::SeqCst);
    ///     }
    /// }
    ///
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let dropped = Arc::new(AtomicBool::new(false));
    /// let guard = SetOnDrop(dropped.clone());
    /// let spinner = rt.spawn(move || {
    ///     let _guard = guard;
    ///     loop {
    ///         threadlet_runtime::checkpoint(); // a safe point: where a kill lands
    ///     }
    /// });
    /// assert!(spinner.abort());
    /// assert!(spinner.join().unwrap_err().is_killed());
    /// assert!(dropped.load(Ordering::SeqCst)); // its stack was unwound
    /// ```
    pub fn abort(&self) -> bool {
        // The slot first: it is filled a moment before the exit hooks record the end.
        !self.is_finished() && self.abort_handle().abort()
    }

    /// A handle that can kill the actor ([`abort`](JoinHandle::abort)) without being able to
    /// join it; cloneable.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle {
            actor: self.actor.clone(),
            exit: self.exit_watch(),
        }
    }

    /// Hears when the actor ends, without owning its result (monitors are built on it).
    ///
    /// ```
    /// use threadlet_runtime::ExitReason;
    ///
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| threadlet_runtime::sleep(std::time::Duration::from_secs(3600)));
    /// let watch = h.exit_watch();
    /// assert_eq!(watch.down(), None); // still sleeping
    /// let (tx, heard) = std::sync::mpsc::channel();
    /// watch.on_exit(move |down| tx.send(down.reason.clone()).unwrap());
    /// h.abort();
    /// assert_eq!(heard.recv().unwrap(), ExitReason::Killed);
    /// assert_eq!(watch.down().unwrap().reason, ExitReason::Killed); // told: recorded
    /// ```
    pub fn exit_watch(&self) -> ExitWatch {
        // A watch from an actor of another runtime (a monitor, a `JoinSet`) links the two
        // runtimes' deadlock checks (`deadlock.rs`, "Linked runtimes").
        if let Some(actor) = self.actor.upgrade() {
            crate::deadlock::link_caller_to(&actor.shared);
        }
        ExitWatch(self.packet.exit())
    }

    /// This packet, weakly and without its result type, for the actor's cell
    /// (`ActorCell::exit`).
    pub(crate) fn exit_source(&self) -> Weak<dyn ExitSource>
    where
        R: Send + 'static,
    {
        Arc::downgrade(&self.packet) as Weak<dyn ExitSource>
    }

    /// Gives the handle the actor it waits for (spawning code, once the actor exists).
    pub(crate) fn set_actor(&mut self, actor: &Arc<ActorCell>) {
        self.actor = Arc::downgrade(actor);
    }

    /// The id of the actor this handle waits for.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(threadlet_runtime::current);
    /// let id = h.id();
    /// assert_eq!(h.join().unwrap(), Some(id));
    /// ```
    pub fn id(&self) -> ActorId {
        self.packet.id
    }

    /// The error for this actor's end.
    fn error(&self, kind: JoinErrorKind) -> JoinError {
        JoinError::new(self.id(), self.packet.name.as_deref().cloned(), kind)
    }

    /// The error of a join given up because its caller could not wait: `Cancelled`, with a
    /// message that does not claim the actor was.
    fn not_joined(&self) -> JoinError {
        JoinError {
            not_joined: true,
            ..self.error(JoinErrorKind::Cancelled)
        }
    }
}

const TAKEN: &str = "joining an actor whose result a select already took";

/// For `threadlet::select!`: takes the result if the actor has finished (the handle is then
/// spent: joining it again panics), without a safe point (see the select module's docs).
pub fn join_take_now<R>(h: &JoinHandle<R>) -> Option<Result<R, JoinError>> {
    let mut st = h.packet.state.lock();
    match &st.slot {
        Slot::Pending(_) => None,
        Slot::Ready(_) => Some(st.slot.take().map_err(|kind| h.error(kind))),
        Slot::Taken(_) => panic!("{TAKEN}"),
    }
}

/// The join handle of an actor refused before it started: `f` is dropped here, unrun, and the
/// handle reports `Cancelled` (dropping the entry unstarted records it).
pub(crate) fn cancelled<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let (start, handle) = entry(ActorId::next(), None, f);
    drop(start);
    handle
}

/// For `threadlet::RuntimeExt::start` on a handle whose runtime has shut down: the join
/// handle of an actor that never runs (it reports `Cancelled`), with no runtime involved.
pub fn never_started<R: Send + 'static>() -> JoinHandle<R> {
    cancelled(|| -> R { unreachable!("dropped unstarted by `cancelled`") })
}

/// For `threadlet::select!`: the error of a join branch given up because the selecting actor
/// is being cancelled (shutdown), as `join` returns then.
pub fn join_cancelled<R>(h: &JoinHandle<R>) -> JoinError {
    h.not_joined()
}

/// For `threadlet::select!`: records `w` to be woken when the actor finishes, as `join` records
/// itself. The completer takes the waiter and wakes it after unlocking.
///
/// # Panics
///
/// When another select (another actor or thread, through a shared `&JoinHandle`) waits on the
/// same handle: one slot holds one waiter, and only one select can take the result (the other
/// would panic taking it). Displacing the other's waiter left it waiting for good, and waking
/// it would have the two displace each other for as long as the actor runs.
pub fn join_watch<R>(h: &JoinHandle<R>, w: &Waiter) {
    let (old, contended) = match &mut h.packet.state.lock().slot {
        Slot::Pending(Some(other)) if !other.same_as(w) => (None, true),
        Slot::Pending(slot) => (slot.replace(w.clone()), false),
        // Finished: the select's next look takes the result.
        _ => (None, false),
    };
    // Both unlocked: the panic, and the drop of a waiter that may hold the last reference to
    // an actor.
    if contended {
        panic!("{TWO_SELECTS}");
    }
    drop(old);
}

const TWO_SELECTS: &str =
    "selecting on a join handle that another select is already waiting on (at most one at a time)";

/// For `threadlet::select!`: withdraws the record made by [`join_watch`] if it is still there.
pub fn join_unwatch<R>(h: &JoinHandle<R>, w: &Waiter) {
    let mine = match &mut h.packet.state.lock().slot {
        Slot::Pending(slot) if slot.as_ref().is_some_and(|x| x.same_as(w)) => slot.take(),
        _ => None,
    };
    // Dropped unlocked: it may hold the last reference to an actor.
    drop(mine);
}

/// Kills an actor without owning its result: see [`JoinHandle::abort`].
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
/// let h = rt.spawn(|| threadlet_runtime::sleep(std::time::Duration::from_secs(3600)));
/// let kill = h.abort_handle();
/// assert_eq!(kill.id(), h.id());
/// assert!(kill.abort());
/// assert!(h.join().unwrap_err().is_killed());
/// assert!(!kill.abort()); // it has ended
/// ```
#[derive(Clone)]
pub struct AbortHandle {
    actor: Weak<ActorCell>,
    /// Its end, as monitors see it: an actor whose result is recorded has ended, even while
    /// its worker still tidies up after it.
    exit: ExitWatch,
}

impl AbortHandle {
    /// Kills the actor, as [`JoinHandle::abort`]; `false` if it had already ended.
    pub fn abort(&self) -> bool {
        !self.is_finished() && self.actor.upgrade().is_some_and(|a| a.kill())
    }

    /// The actor's id.
    pub fn id(&self) -> ActorId {
        self.exit.id()
    }

    /// Whether the actor has ended (its result, or why there is none, is recorded).
    pub fn is_finished(&self) -> bool {
        self.exit.down().is_some()
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle")
            .field("id", &self.id())
            .finish()
    }
}

impl<R> fmt::Debug for JoinHandle<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id())
            .finish()
    }
}

/// Two words a handle; one word an optional completion (see `Completer`), so that a handler
/// actor's program fits its allocation class (`docs/benchmarks.md`, "Memory").
#[cfg(all(test, target_pointer_width = "64"))]
#[test]
fn handle_and_completion_sizes() {
    use std::mem::size_of;
    // The packet of an actor with a small result, with the `Arc`'s two counts, in the
    // allocator's 96-byte class (glibc: a 16-byte multiple with 8 bytes of header). It was
    // 112 while a taken slot held a whole `ExitReason` and the name was two words.
    assert!(size_of::<Packet<Option<u32>>>() <= 72);
    assert_eq!(size_of::<JoinHandle<u64>>(), 16);
    assert_eq!(size_of::<Option<crate::Completion<u64>>>(), 8);
}

/// Why an actor ended outlives the taking of its result: a watch made after a select took it
/// hears the same reason (a taken slot keeps a normal end in no bytes, another one boxed).
#[cfg(test)]
#[test]
fn a_watch_made_after_the_result_was_taken_hears_why() {
    let rt = crate::Runtime::builder().workers(1).build().unwrap();
    let ended = |h: &JoinHandle<u32>| loop {
        if let Some(r) = join_take_now(h) {
            return r.is_ok();
        }
        std::thread::yield_now();
    };
    let fine = rt.spawn(|| 7);
    assert!(ended(&fine));
    assert_eq!(fine.exit_watch().down().unwrap().reason, ExitReason::Normal);
    let failed = rt.spawn(|| -> u32 { panic!("taken") });
    assert!(!ended(&failed));
    let reason = failed.exit_watch().down().unwrap().reason;
    assert_eq!(reason, ExitReason::Panicked("taken".into()));
}

/// Hooks whose listener went away do not pile up on an actor that lives on (`exit_hooks.rs`),
/// while the one whose listener stays is told of the end.
#[cfg(test)]
#[test]
fn hooks_of_watchers_that_went_away_are_pruned() {
    use std::sync::OnceLock;
    let rt = crate::Runtime::builder().workers(1).build().unwrap();
    let h = rt.spawn(|| crate::sleep(std::time::Duration::from_secs(3600)));
    let watch = h.exit_watch();
    let tell = |heard: &Arc<OnceLock<Down>>| {
        let weak = Arc::downgrade(heard);
        watch.on_exit_for(weak.clone(), move |down| {
            if let Some(h) = weak.upgrade() {
                let _ = h.set(down.clone());
            }
        });
    };
    let stays = Arc::new(OnceLock::new());
    tell(&stays);
    for _ in 0..10_000 {
        tell(&Arc::new(OnceLock::new()));
        let waiting = exit_hooks_waiting(&watch);
        assert!(waiting <= 16, "{waiting} hooks kept");
    }
    h.abort();
    assert!(h.join().unwrap_err().is_killed());
    assert_eq!(stays.get().map(|d| &d.reason), Some(&ExitReason::Killed));
}

/// A pruned hook is dropped once the watch's lock is free again: here its destructor adds a
/// hook to the same watch, which would deadlock under the lock.
#[cfg(test)]
#[test]
fn a_pruned_hook_is_dropped_outside_the_lock() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct Reenters(ExitWatch, Arc<AtomicUsize>);
    impl Drop for Reenters {
        fn drop(&mut self) {
            self.0.on_exit(|_| ());
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }
    let rt = crate::Runtime::builder().workers(1).build().unwrap();
    let h = rt.spawn(|| crate::sleep(std::time::Duration::from_secs(3600)));
    let watch = h.exit_watch();
    let dropped = Arc::new(AtomicUsize::new(0));
    let (done, finished) = std::sync::mpsc::channel();
    let (w, d) = (watch.clone(), dropped.clone());
    std::thread::spawn(move || {
        for _ in 0..64 {
            let gone = Arc::new(());
            let r = Reenters(w.clone(), d.clone());
            w.on_exit_for(Arc::downgrade(&gone), move |_| drop(r));
        }
        done.send(()).unwrap();
    });
    // A generous bound, only so that a deadlock fails the test instead of hanging it (the
    // runtime is leaked then: the actor's end would wait for the lock held for good).
    if finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .is_err()
    {
        std::mem::forget((rt, h));
        panic!("a pruned hook was dropped under the watch's lock: deadlock");
    }
    assert!(dropped.load(Ordering::Relaxed) > 0);
    h.abort();
    assert!(h.join().unwrap_err().is_killed());
}
