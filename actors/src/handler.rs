//! Handler actors: a value that handles one message at a time, and owns no stack between
//! messages.
//!
//! A process actor (`spawn_actor`) is a function that loops over its mailbox on a stack of its
//! own, pinned to the worker that started it. A handler actor is a value implementing
//! [`Actor`]; the runtime calls [`Actor::handle`] for each message, in batches, on a stack it
//! lends for the batch. Between batches the actor is only its value and its mailbox, a few
//! hundred bytes, and any worker may run its next batch: idle workers steal runnable handler
//! actors, and a message sent from an actor on worker W makes the receiver run next on W.
//!
//! # Lifecycle
//!
//! 1. `start` queues the actor; its first batch calls [`Actor::started`].
//! 2. Each batch takes up to [`BATCH`] messages from the mailbox, calling `handle` for each,
//!    then ends: the mailbox is empty (the actor parks until the next send), or the budget is
//!    spent (it goes back into a run queue, behind the others: a busy actor cannot monopolise
//!    its worker between safe points). A batch that has been preempted (a `handle` that ran
//!    past its time slice) ends before its next message: it goes back into a run queue, and a
//!    parked worker is woken to take it, so that long messages spread over idle workers instead
//!    of queueing behind the first where it started.
//! 3. The actor stops after the message during which it called [`Context::stop`], or once its
//!    mailbox is empty and every [`Addr`] is gone (the context does not count as one) or it
//!    closed it ([`Context::close`]: the messages queued before are still handled). Its
//!    mailbox is closed first (later sends hand their message back; what is still queued is
//!    dropped unhandled), then [`Actor::stopped`] runs, and its [`JoinHandle`] returns the
//!    actor's value.
//! 4. A panic in `started`, `handle` or `stopped` ends it the same way, except that `join`
//!    returns a [`JoinError`](crate::JoinError) of kind
//!    [`Panicked`](crate::JoinErrorKind::Panicked) instead of the value.
//!
//! If `handle` blocks (a channel, `join`, `sleep`, `ask`) or is preempted, the actor keeps the
//! stack it was lent and stays on that worker until `handle` returns; the worker takes another
//! stack for its other actors. At runtime shutdown an idle handler actor is dropped without
//! `stopped` (its join reports `Cancelled`), like a process actor.

use std::fmt;
use std::io;

use threadlet_runtime::{
    Activation, ActorId, Completion, JoinErrorKind, JoinHandle, SpawnOptions, Step,
    catch_actor_panic,
};

use crate::mailbox::{self, Poll};
use crate::{Addr, Mailbox};

/// Messages one batch handles at most before the actor goes back into a run queue. Enough to
/// amortise the switch to the lent stack and back (a few nanoseconds) over many messages;
/// few enough that actors sharing a worker take turns every few microseconds when each
/// message is cheap. (A message that takes long is preempted at its own safe points anyway.)
pub const BATCH: usize = 64;

/// An actor that handles one message at a time; see the module docs.
///
/// ```
/// use threadlet::{Actor, Context, RuntimeExt};
///
/// #[derive(Default)]
/// struct Counter {
///     total: u64,
/// }
///
/// impl Actor for Counter {
///     type Msg = u64;
///     fn handle(&mut self, n: u64, _ctx: &mut Context<Self>) {
///         self.total += n;
///     }
/// }
///
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// let (addr, handle) = rt.start(Counter::default());
/// for n in 1..=10 {
///     addr.send(n).unwrap();
/// }
/// drop(addr); // the last address: the actor stops once its mailbox is empty
/// assert_eq!(handle.join().unwrap().total, 55);
/// ```
pub trait Actor: Send + Sized + 'static {
    /// What its mailbox carries.
    type Msg: Send + 'static;

    /// Handles one message.
    fn handle(&mut self, msg: Self::Msg, ctx: &mut Context<Self>);

    /// Runs once, before the first message.
    fn started(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }

    /// Runs once, after the last message, when the actor stops (not at runtime shutdown).
    fn stopped(&mut self) {}
}

/// What a handler actor may do besides handling its message: its address, its id, stopping,
/// closing.
///
/// It holds the actor's mailbox (the receiving end, which only the program polls): one
/// pointer, from which an address and the actor's id are made when asked for, so that an idle
/// handler actor keeps no copies of them (`program_size`).
pub struct Context<A: Actor> {
    /// With the context's flags (`STOPPING`, `STARTED`, `SPAWNED_OUTSIDE`) in its
    /// `owner_bits`, a byte that would otherwise be padding (see `Program`).
    mailbox: Mailbox<A::Msg>,
}

/// `Context::stop` was called.
const STOPPING: u8 = 1;
/// `Actor::started` has run.
const STARTED: u8 = 2;
/// Started from a plain thread: the actor links its mailbox to its end itself, before its
/// first park (`Mailbox::sink_for_self`), as the spawner's attach may come later.
const SPAWNED_OUTSIDE: u8 = 4;

// SAFETY: a `Mailbox` is not `Sync` because its receiving operations (`recv`, `poll`, `close`,
// `end`) assume one receiver. Through a shared `&Context` none of them is reachable:
// the field is private, and `Context`'s `&self` methods (`addr`, `trap_exits`,
// `trap_exits_as`, `id`) only make an address, set a trap or read the id, each under the
// mailbox's lock, as any address may from any thread. The receiving operations run only
// through `Program`, which owns the context and hands the user a `&mut` one for a call.
unsafe impl<A: Actor> Sync for Context<A> {}

impl<A: Actor> Context<A> {
    /// A new address of this actor's mailbox (holding one keeps it running).
    ///
    /// ```
    /// use threadlet::{Actor, Addr, Context, RuntimeExt};
    ///
    /// /// Counts down by sending itself the next number.
    /// struct Countdown(Vec<u32>);
    /// impl Actor for Countdown {
    ///     type Msg = u32;
    ///     fn handle(&mut self, n: u32, ctx: &mut Context<Self>) {
    ///         self.0.push(n);
    ///         if n > 0 {
    ///             ctx.addr().send(n - 1).unwrap();
    ///         } else {
    ///             ctx.stop();
    ///         }
    ///     }
    /// }
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.start(Countdown(Vec::new()));
    /// addr.send(3).unwrap();
    /// assert_eq!(h.join().unwrap().0, [3, 2, 1, 0]);
    /// ```
    pub fn addr(&self) -> Addr<A::Msg> {
        self.mailbox.addr()
    }

    /// Traps exits for this actor (see [`Mailbox::trap_exits`](crate::Mailbox::trap_exits)):
    /// an exit signal from a linked actor arrives on the returned channel instead of killing
    /// it.
    pub fn trap_exits(&self) -> crate::channel::Receiver<threadlet_runtime::Down> {
        self.mailbox.trap_exits()
    }

    /// Traps exits, each arriving in this actor's mailbox as the message `into` makes of it
    /// (see [`Mailbox::trap_exits_as`](crate::Mailbox::trap_exits_as)): the way for a handler
    /// actor, which waits on nothing but its mailbox, to hear of a linked actor's end while
    /// idle. (The channel of [`trap_exits`](Context::trap_exits) it could only look at while
    /// handling a message.)
    ///
    /// ```
    /// use threadlet::{Actor, Addr, Context, Down, ExitReason, Mailbox, RuntimeExt};
    ///
    /// enum Msg {
    ///     Watch(Addr<()>),
    ///     Exit(Down),
    /// }
    ///
    /// struct Watcher(Option<ExitReason>);
    /// impl Actor for Watcher {
    ///     type Msg = Msg;
    ///     fn started(&mut self, ctx: &mut Context<Self>) {
    ///         ctx.trap_exits_as(Msg::Exit);
    ///     }
    ///     fn handle(&mut self, msg: Msg, ctx: &mut Context<Self>) {
    ///         match msg {
    ///             Msg::Watch(child) => {
    ///                 ctx.addr().link(&child);
    ///                 child.send(()).unwrap();
    ///             }
    ///             Msg::Exit(down) => {
    ///                 self.0 = Some(down.reason);
    ///                 ctx.stop();
    ///             }
    ///         }
    ///     }
    /// }
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (child, _c) = rt.spawn_actor(|mb: Mailbox<()>| {
    ///     mb.recv();
    ///     panic!("child fails");
    /// });
    /// let (watcher, w) = rt.start(Watcher(None));
    /// watcher.send(Msg::Watch(child)).unwrap();
    /// let reason = w.join().unwrap().0;
    /// assert_eq!(reason, Some(ExitReason::Panicked("child fails".into())));
    /// ```
    pub fn trap_exits_as(
        &self,
        into: impl Fn(threadlet_runtime::Down) -> A::Msg + Send + Sync + 'static,
    ) {
        self.mailbox.trap_exits_as(into);
    }

    /// This actor's id.
    ///
    /// ```
    /// use threadlet::{Actor, Context, RuntimeExt};
    ///
    /// struct Me;
    /// impl Actor for Me {
    ///     type Msg = threadlet::Addr<threadlet::ActorId>;
    ///     fn handle(&mut self, reply: Self::Msg, ctx: &mut Context<Self>) {
    ///         reply.send(ctx.id()).unwrap();
    ///     }
    /// }
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (me, h) = rt.start(Me);
    /// let id = rt.block_on(move || {
    ///     let (reply, got) = threadlet::spawn_actor(|mb: threadlet::Mailbox<_>| mb.recv());
    ///     me.send(reply).unwrap();
    ///     got.join().unwrap().unwrap()
    /// });
    /// assert_eq!(id, h.id());
    /// ```
    ///
    /// (It is read from the mailbox, under its lock: a context keeps no copy.)
    pub fn id(&self) -> ActorId {
        // Set before the program first runs (`Make::into_fn`), to this incarnation's id for
        // a supervised child's lent mailbox.
        self.mailbox
            .actor_id()
            .expect("a handler actor's mailbox knows its actor")
    }

    /// Stops the actor once the current message is handled: its mailbox closes (later sends
    /// hand their message back; messages already queued are dropped unhandled, as a process
    /// actor's are when it returns), `stopped` runs, and `join` returns the actor. (An actor
    /// whose every address has gone stops by itself once its queue is empty.)
    ///
    /// ```
    /// use threadlet::{Actor, Context, RuntimeExt};
    ///
    /// struct FirstOnly(Option<&'static str>);
    /// impl Actor for FirstOnly {
    ///     type Msg = &'static str;
    ///     fn handle(&mut self, msg: &'static str, ctx: &mut Context<Self>) {
    ///         self.0 = Some(msg);
    ///         ctx.stop();
    ///     }
    /// }
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.start(FirstOnly(None));
    /// addr.send("first").unwrap();
    /// assert_eq!(h.join().unwrap().0, Some("first"));
    /// assert_eq!(addr.send("late").unwrap_err().into_inner(), "late"); // handed back
    /// ```
    pub fn stop(&mut self) {
        self.mailbox.owner_bits |= STOPPING;
    }

    /// Closes the actor's mailbox and lets it drain: later sends hand their message back, the
    /// messages already queued are still handled, and then the actor stops as by
    /// [`stop`](Context::stop). The handler actor's "close, then drain"
    /// ([`Mailbox::close`](crate::Mailbox::close)): every send that returned `Ok` is handled.
    ///
    /// ```
    /// use threadlet::{Actor, Context, RuntimeExt};
    ///
    /// /// Takes jobs until told `0`, then finishes the ones already sent.
    /// #[derive(Default)]
    /// struct Jobs(Vec<u32>);
    /// impl Actor for Jobs {
    ///     type Msg = u32;
    ///     fn handle(&mut self, job: u32, ctx: &mut Context<Self>) {
    ///         match job {
    ///             0 => ctx.close(),
    ///             _ => self.0.push(job),
    ///         }
    ///     }
    /// }
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (addr, h) = rt.start(Jobs::default());
    /// // Sent while the actor may be running: those after `0` are queued or handed back.
    /// let accepted: Vec<u32> = [1, 2, 0, 3, 4]
    ///     .into_iter()
    ///     .filter(|&job| addr.send(job).is_ok())
    ///     .filter(|&job| job != 0)
    ///     .collect();
    /// assert_eq!(h.join().unwrap().0, accepted); // every accepted job was done
    /// assert_eq!(addr.send(5).unwrap_err().into_inner(), 5); // handed back
    /// ```
    pub fn close(&mut self) {
        self.mailbox.close();
    }

    fn stopping(&self) -> bool {
        self.mailbox.owner_bits & STOPPING != 0
    }
}

impl<A: Actor> fmt::Debug for Context<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("id", &self.mailbox.actor_id())
            .field("stopping", &self.stopping())
            .finish()
    }
}

/// A handler actor as the runtime runs it: its value, mailbox, context and join completion.
///
/// Four words for an actor of up to a word (`program_size`), so that its box is in glibc's
/// 48-byte class: the value and its completion share one `Option` (they are taken together,
/// and the completion's pointer gives the `Option` its tag for free), the context's two flags
/// sit in its mailbox's spare byte, and the start signal `S` is `()` (no bytes) except for a
/// supervised child's.
struct Program<A: Actor, S: StartSignal = ()> {
    /// `None` once stopped.
    live: Option<Live<A>>,
    /// Holds the mailbox, which `batch` polls, and whether `started` has run.
    ctx: Context<A>,
    /// Told when `started` has run (or dropped, if it panicked).
    on_started: S,
}

/// What a running handler actor gives back when it stops: its value, through its completion.
struct Live<A: Actor> {
    actor: A,
    completion: Completion<A>,
}

/// Told once a handler actor's `started` has returned; see `Program`. `Default` is a signal
/// already told (or none at all).
trait StartSignal: Default + Send + 'static {
    fn tell(self);
}

/// No one waits for the start.
impl StartSignal for () {
    fn tell(self) {}
}

/// A supervisor starting its children in order waits for each one's start (`supervisor.rs`);
/// if `started` panics, the dropped sender tells it as much.
impl StartSignal for Option<crate::channel::Sender<()>> {
    fn tell(self) {
        if let Some(tx) = self {
            let _ = tx.try_send(());
        }
    }
}

impl<A: Actor, S: StartSignal> Program<A, S> {
    /// One batch (step 2 of the module docs), or `started` first.
    fn batch(&mut self) -> Step {
        let actor = &mut self
            .live
            .as_mut()
            .expect("a stopped actor is never activated")
            .actor;
        if self.ctx.mailbox.owner_bits & STARTED == 0
            && let Some(step) = Self::start(actor, &mut self.ctx, &mut self.on_started)
        {
            return step;
        }
        for i in 0..BATCH {
            let (msg, last) = match self.ctx.mailbox.poll(i > 0) {
                Poll::Message(msg) => (msg, false),
                Poll::Last(msg) => (msg, true),
                Poll::Parked => return Step::Park,
                Poll::Ended => return Step::Stop,
                Poll::Spent => return Step::Yield,
            };
            actor.handle(msg, &mut self.ctx);
            if self.ctx.stopping() {
                return Step::Stop;
            }
            // The last message: published as the waiter before `handle`, with the queue
            // empty, so parked already, unless a wake came meanwhile or `handle` suspended
            // (the next poll looks again).
            if last && threadlet_runtime::activation_may_park() {
                return Step::Park;
            }
        }
        Step::Yield
    }

    /// `started`, at the first activation (out of the batch's way: once per actor); the step
    /// that ends the activation after it, if it does.
    #[cold]
    #[inline(never)]
    fn start(actor: &mut A, ctx: &mut Context<A>, on_started: &mut S) -> Option<Step> {
        ctx.mailbox.owner_bits |= STARTED;
        if ctx.mailbox.owner_bits & SPAWNED_OUTSIDE != 0 {
            // Before its first park on the mailbox (the spawner's attach may come later).
            ctx.mailbox.sink_for_self();
        }
        // Dropped on every way out of `started`, a panic included: the waiter goes on.
        let told = std::mem::take(on_started);
        actor.started(ctx);
        told.tell();
        if ctx.stopping() {
            return Some(Step::Stop);
        }
        // `started` is the batch's first piece of user code: preempted or killed meanwhile,
        // the actor takes no message in this batch, as after a first message
        // (`Mailbox::poll`).
        threadlet_runtime::activation_preempted().then_some(Step::Yield)
    }

    /// Step 3 (or 4, with the panic): close, drop what is left, `stopped`, complete. Everything
    /// the actor leaves behind is dropped before `join` returns, as for a process actor.
    fn stop(&mut self, panicked: Option<Box<dyn std::any::Any + Send>>) -> Step {
        // A queued message whose destructor panics is a panic of this actor's, as it is for a
        // process actor whose mailbox drops it: the first panic is the one reported, and
        // `stopped` does not run after it, as after a panic in `handle`.
        let panicked = match (panicked, self.close_mailbox()) {
            (Some(p), _) | (None, Some(p)) => Some(p),
            (None, None) => None,
        };
        let Some(Live { actor, completion }) = self.live.take() else {
            return Step::Stop;
        };
        let mut actor = Some(actor);
        let result = match panicked {
            Some(p) => Err(JoinErrorKind::Panicked(p)),
            None => match catch_actor_panic(|| {
                if let Some(a) = actor.as_mut() {
                    a.stopped();
                }
            }) {
                Ok(()) => Ok(actor.take().expect("taken once")),
                Err(p) => Err(JoinErrorKind::Panicked(p)),
            },
        };
        // A value that panicked is dropped before `join` returns (its destructor may panic
        // too: the join already reports a panic).
        let _ = catch_actor_panic(move || drop(actor));
        completion.complete(result);
        Step::Stop
    }

    /// Closes the mailbox (later sends hand their message back) and drops what is queued. (A
    /// supervised child's mailbox stays open, queue and all, for its next incarnation.)
    /// Returns the panic of a message's destructor, if one panicked: it ends nothing more
    /// than this actor, which ends.
    fn close_mailbox(&mut self) -> Option<Box<dyn std::any::Any + Send>> {
        let mailbox = &mut self.ctx.mailbox;
        if mailbox.is_lent() {
            return None;
        }
        let left = mailbox.end();
        catch_actor_panic(move || drop(left)).err()
    }
}

/// A program dropped before it stopped (a kill, or shutdown) lets go in the order a process
/// actor's unwinding does: the value, then the mailbox (closed, its queue dropped), and the
/// join completion last, so that, as after `stop`, `join` returns only once all of it is gone.
/// (The fields' own order would drop the completion with the value, before the mailbox.)
impl<A: Actor, S: StartSignal> Drop for Program<A, S> {
    fn drop(&mut self) {
        let Some(Live { actor, completion }) = self.live.take() else {
            return;
        };
        // The value's destructor is user code: if it panics, the rest still goes, in order.
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(actor)));
        // Killed or cancelled already: a message's panic changes nothing of the end.
        drop(self.close_mailbox());
        drop(completion);
        if let Err(payload) = dropped {
            std::panic::resume_unwind(payload);
        }
    }
}

impl<A: Actor, S: StartSignal> Activation for Program<A, S> {
    fn run(&mut self) -> Step {
        match catch_actor_panic(|| self.batch()) {
            // Killed while the batch ran (no safe point reached): the worker ends it as killed.
            Ok(Step::Stop) if threadlet_runtime::activation_killed() => Step::Yield,
            Ok(Step::Stop) => self.stop(None),
            Ok(step) => step,
            Err(p) => self.stop(Some(p)),
        }
    }
}

/// What a new handler actor's program is made of, until the runtime names the actor and
/// gives it its join completion (`into_fn`): passed to the runtime's `start_handler` as a plain
/// closure, with no allocation of its own.
struct Make<A: Actor, S: StartSignal> {
    actor: A,
    mailbox: Mailbox<A::Msg>,
    on_started: S,
}

impl<A: Actor, S: StartSignal> Make<A, S> {
    /// The `make` argument of the runtime's `start_handler`.
    fn into_fn(self) -> impl FnOnce(ActorId, Completion<A>) -> Program<A, S> {
        move |id, completion| {
            let Make {
                actor,
                mailbox,
                on_started,
            } = self;
            mailbox.set_actor(id);
            Program {
                live: Some(Live { actor, completion }),
                ctx: Context { mailbox },
                on_started,
            }
        }
    }
}

/// Builds the program of a new handler actor and starts it with `start`.
fn start_with<A: Actor>(
    actor: A,
    capacity: Option<usize>,
    start: impl FnOnce(Make<A, ()>) -> io::Result<JoinHandle<A>>,
) -> io::Result<(Addr<A::Msg>, JoinHandle<A>)> {
    start_in(actor, mailbox::mailbox_with(capacity), (), start)
}

/// Starts an incarnation of a supervised handler actor on its lent mailbox (`supervisor.rs`);
/// `on_started` is told once its `started` has returned.
pub(crate) fn start_lent<A: Actor>(
    handle: &threadlet_runtime::Handle,
    name: &str,
    addr: Addr<A::Msg>,
    mailbox: Mailbox<A::Msg>,
    actor: A,
    on_started: crate::channel::Sender<()>,
) -> io::Result<(Addr<A::Msg>, JoinHandle<A>)> {
    start_in(actor, (addr, mailbox), Some(on_started), |make| {
        handle.start_handler(SpawnOptions::new().name(name), make.into_fn())
    })
}

/// `start_with` on a given mailbox (a supervised child's lent one).
fn start_in<A: Actor, S: StartSignal>(
    actor: A,
    (addr, mut mailbox): (Addr<A::Msg>, Mailbox<A::Msg>),
    on_started: S,
    start: impl FnOnce(Make<A, S>) -> io::Result<JoinHandle<A>>,
) -> io::Result<(Addr<A::Msg>, JoinHandle<A>)> {
    if crate::on_plain_thread() {
        mailbox.owner_bits |= SPAWNED_OUTSIDE;
    }
    let handle = start(Make {
        actor,
        mailbox,
        on_started,
    })?;
    addr.attach(&handle);
    Ok((addr, handle))
}

/// Starts a handler actor on the current runtime (from inside an actor). Returns its address
/// and its join handle, which gives the actor's value back when it stops.
///
/// # Panics
///
/// When called outside any runtime; use [`RuntimeExt::start`](crate::RuntimeExt::start) there.
///
/// ```
/// use threadlet::{Actor, Context};
///
/// struct Echo;
/// impl Actor for Echo {
///     type Msg = (u32, threadlet::Addr<u32>);
///     fn handle(&mut self, (n, reply): Self::Msg, _ctx: &mut Context<Self>) {
///         let _ = reply.send(n);
///     }
/// }
///
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// let got = rt.block_on(|| {
///     let (echo, _h) = threadlet::start(Echo);
///     let (me, inbox) = threadlet::spawn_actor(|mb: threadlet::Mailbox<u32>| mb.recv());
///     echo.send((7, me)).unwrap();
///     inbox.join().unwrap()
/// });
/// assert_eq!(got, Some(7));
/// ```
pub fn start<A: Actor>(actor: A) -> (Addr<A::Msg>, JoinHandle<A>) {
    start_here(SpawnOptions::new(), None, actor).unwrap_or_else(|e| panic!("threadlet::start: {e}"))
}

/// Starts a handler actor with `opts` on the current runtime (`start`, `ActorBuilder::start`).
pub(crate) fn start_here<A: Actor>(
    opts: SpawnOptions,
    capacity: Option<usize>,
    actor: A,
) -> io::Result<(Addr<A::Msg>, JoinHandle<A>)> {
    start_with(actor, capacity, |make| {
        threadlet_runtime::start_handler(opts, make.into_fn())
    })
}

/// Starts a handler actor with `opts` on `rt`, from any thread (`RuntimeExt::start`,
/// `ActorBuilder::start_on`).
pub(crate) fn start_on<A: Actor>(
    rt: &impl crate::spawner::Sealed,
    opts: SpawnOptions,
    capacity: Option<usize>,
    actor: A,
) -> io::Result<(Addr<A::Msg>, JoinHandle<A>)> {
    start_with(actor, capacity, |make| {
        rt.start_handler(opts, make.into_fn())
    })
}

/// An idle handler actor is mostly its program: four words for a value of a word or less,
/// which with glibc's header keep its box in the 48-byte allocation class (`docs/benchmarks.md`,
/// "Memory", measured with such an actor). The mailbox is held once, by the context; an
/// address and the id are made from it when asked for.
#[cfg(all(test, target_pointer_width = "64"))]
#[test]
fn program_size() {
    use threadlet_runtime::ACTIVATION_IN_PLACE as ROOM;
    struct Holder(#[allow(dead_code)] Option<u32>);
    struct Word(#[allow(dead_code)] u64);
    struct Unit;
    macro_rules! fits {
        ($($a:ty),*) => {$(
            impl Actor for $a {
                type Msg = ();
                fn handle(&mut self, _: (), _: &mut Context<Self>) {}
            }
            assert!(std::mem::size_of::<Program<$a>>() <= ROOM, stringify!($a));
            assert!(std::mem::align_of::<Program<$a>>() <= std::mem::align_of::<usize>());
        )*};
    }
    fits!(Holder, Word, Unit);
}

/// A context may be shared with threads that the actor's `handle` starts (a scoped thread that
/// sends through `ctx.addr()`), as before it held the mailbox.
#[test]
fn context_is_send_and_sync() {
    fn shared_between_threads<T: Send + Sync>() {}
    struct Unit;
    impl Actor for Unit {
        type Msg = ();
        fn handle(&mut self, _: (), _: &mut Context<Self>) {}
    }
    shared_between_threads::<Context<Unit>>();
}
