//! # threadlet
//!
//! Lightweight actors on an M:N work-stealing runtime: as light as Stackless tasklets, written
//! in the blocking style of goroutines and Erlang processes.
//!
//! Each actor is a stackful coroutine with its own small guarded stack. A few worker threads
//! (one per core by default) run very many actors; an actor that blocks (waiting on its
//! [`Mailbox`], a [`channel`], a [`JoinHandle`]) suspends, and its worker runs another.
//!
//! ```
//! use threadlet::{Mailbox, Runtime};
//!
//! let rt = Runtime::new().unwrap();
//! let total = rt.block_on(|| {
//!     // An actor with a mailbox: sums what it gets until every address is gone.
//!     let (addr, sum) = threadlet::spawn_actor(|mb: Mailbox<u64>| mb.iter().sum::<u64>());
//!     let senders: Vec<_> = (0..10)
//!         .map(|i| {
//!             let addr = addr.clone();
//!             threadlet::spawn(move || addr.send(i).unwrap())
//!         })
//!         .collect();
//!     drop(addr);
//!     for s in senders {
//!         s.join().unwrap();
//!     }
//!     sum.join().unwrap()
//! });
//! assert_eq!(total, 45);
//! ```
//!
//! Two kinds of actor share the workers: process actors (a function with a stack of its own,
//! as above) and handler actors ([`Actor`]: a value whose `handle` runs per message, with no
//! stack between messages). A started process actor stays on the worker that started it (see
//! `docs/safety.md`); the scheduler balances work by stealing handler actors between their
//! messages and actors that have not started yet.
//!
//! Much of this crate is re-exported from `threadlet-runtime` ([`Runtime`], [`spawn`],
//! [`sleep`], [`JoinHandle`], ...): their examples are written against `threadlet_runtime::`,
//! and each item is the same here under `threadlet::`.

#![warn(missing_docs)]

pub mod channel;
mod handler;
mod join_set;
mod mailbox;
mod monitor;
mod names;
pub mod select;
pub mod supervisor;
mod tagged;
mod timers;

/// Whether the caller is a plain thread, not an actor: addresses and channel ends made there
/// are counted as held outside the runtime (the deadlock check, `threadlet-runtime`'s
/// `deadlock.rs`).
#[inline]
pub(crate) fn on_plain_thread() -> bool {
    threadlet_runtime::current().is_none()
}

use std::io;

pub use handler::{Actor, BATCH, Context, start};
pub use join_set::JoinSet;
pub use mailbox::{Addr, AskError, Iter, Mailbox, Reply};
pub use monitor::Monitor;

/// Watches the actor with this id on the calling actor's runtime (Erlang's `monitor(process,
/// Pid)`): the [`Monitor`] yields its [`Down`] when it ends; for an id with no live actor there
/// (or outside any runtime: use [`Monitor::of_id`]) the `Down` comes at once with
/// [`ExitReason::NoProc`].
///
/// ```
/// use threadlet::{ExitReason, Mailbox, RuntimeExt};
///
/// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
/// let (addr, h) = rt.spawn_actor(|mb: Mailbox<u8>| mb.recv());
/// let id = h.id();
/// let m = rt.block_on(move || threadlet::monitor(id));
/// addr.send(1).unwrap();
/// assert_eq!(m.recv().reason, ExitReason::Normal);
/// h.join().unwrap();
/// // Ended: its real reason while its worker still tidies up after it, then `NoProc`.
/// let late = threadlet::Monitor::of_id(&rt.handle(), id).recv().reason;
/// assert!(matches!(late, ExitReason::Normal | ExitReason::NoProc));
/// ```
pub fn monitor(id: ActorId) -> Monitor {
    Monitor::of_watch(threadlet_runtime::exit_watch(id), id)
}
pub use names::{RegisterError, register, unregister, whereis};
pub use threadlet_runtime::net;
pub use threadlet_runtime::{
    AbortHandle, ActorDump, ActorId, ActorKind, ActorState, ActorStats, BuildError, Builder,
    DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_BLOCKING_THREADS, DEFAULT_STACK_SIZE, DEFAULT_TIME_SLICE,
    Deadlock, Down, Dump, ExitReason, ExitWatch, Handle, JoinError, JoinErrorKind, JoinHandle,
    LONG_RUN_SLICES, LongRun, MAX_STACK_SIZE, MAX_WORKERS, MIN_STACK_SIZE, MailboxStats, Metrics,
    Runtime, RuntimeStats, Scheduler, SpawnOptions, Wait, WorkerDump, WorkerMetrics,
    WorkerSnapshot, WorkerState, blocking, checkpoint, current, current_name, kill, preemptions,
    sleep, sleep_until, spawn, stats, worker_index, yield_now,
};
pub use timers::TimerHandle;

/// A mailbox and its first address, with no actor behind them; for the loom model in
/// `tests/loom_mailbox.rs` only, not part of the API.
#[doc(hidden)]
pub fn __mailbox_for_tests<M>() -> (Addr<M>, Mailbox<M>) {
    mailbox::mailbox()
}

/// A bounded mailbox and its first address, with no actor behind them; for the loom model in
/// `tests/loom_mailbox.rs` only, not part of the API.
#[doc(hidden)]
pub fn __bounded_mailbox_for_tests<M>(capacity: usize) -> (Addr<M>, Mailbox<M>) {
    mailbox::mailbox_with(Some(capacity))
}

/// An actor's body with its mailbox. The mailbox learns its actor's id from both sides: here,
/// before `f` runs (so the actor's own addresses know it), and from the spawner once `spawn`
/// returns the handle (so the caller's address knows it, even before the actor starts). Called
/// on the spawner's thread, before the spawn.
pub(crate) fn run_with_mailbox<M, F, R>(mb: Mailbox<M>, f: F) -> impl FnOnce() -> R + Send + 'static
where
    M: Send + 'static,
    F: FnOnce(Mailbox<M>) -> R + Send + 'static,
    R: Send + 'static,
{
    let spawned_outside = on_plain_thread();
    move || {
        if let Some(id) = current() {
            mb.set_actor(id);
            if spawned_outside {
                mb.sink_for_self();
            }
        }
        f(mb)
    }
}

/// Spawns an actor with a mailbox on the current runtime (from inside an actor). Returns the
/// mailbox's address and the actor's join handle.
///
/// # Panics
///
/// When called outside any runtime; use [`RuntimeExt::spawn_actor`] there.
///
/// ```
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let (echo, h) = threadlet::spawn_actor(|mb: threadlet::Mailbox<(u32, threadlet::Addr<u32>)>| {
///         for (n, reply) in &mb {
///             let _ = reply.send(n + 1);
///         }
///     });
///     let (me, inbox) = threadlet::spawn_actor(|mb: threadlet::Mailbox<u32>| mb.recv());
///     echo.send((41, me)).unwrap();
///     assert_eq!(inbox.join().unwrap(), Some(42));
///     drop(echo);
///     h.join().unwrap();
/// });
/// ```
pub fn spawn_actor<M, F, R>(f: F) -> (Addr<M>, JoinHandle<R>)
where
    M: Send + 'static,
    F: FnOnce(Mailbox<M>) -> R + Send + 'static,
    R: Send + 'static,
{
    let (addr, mb) = mailbox::mailbox();
    let h = spawn(run_with_mailbox(mb, f));
    addr.attach(&h);
    (addr, h)
}

/// Spawning on a [`Runtime`] from outside it.
///
/// ```
/// use threadlet::{Mailbox, Runtime, RuntimeExt};
///
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// // From the main thread, which is not an actor: `threadlet::spawn_actor` would panic here.
/// let (addr, h) = rt.spawn_actor(|mb: Mailbox<&str>| mb.iter().map(str::len).sum::<usize>());
/// addr.send("four").unwrap();
/// addr.send("five!").unwrap();
/// drop(addr);
/// assert_eq!(h.join().unwrap(), 9);
/// ```
pub trait RuntimeExt {
    /// Spawns an actor with a mailbox; see [`spawn_actor`].
    ///
    /// ```
    /// use threadlet::{Mailbox, Runtime, RuntimeExt};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.recv().map(|n| n * 2));
    /// assert_eq!(addr.actor_id(), Some(h.id()));
    /// addr.send(21).unwrap();
    /// assert_eq!(h.join().unwrap(), Some(42));
    /// ```
    fn spawn_actor<M, F, R>(&self, f: F) -> (Addr<M>, JoinHandle<R>)
    where
        M: Send + 'static,
        F: FnOnce(Mailbox<M>) -> R + Send + 'static,
        R: Send + 'static;

    /// Starts a handler actor on this runtime, from any thread; see [`Actor`].
    ///
    /// ```
    /// use threadlet::{Actor, Context, RuntimeExt};
    ///
    /// struct Sum(u64);
    /// impl Actor for Sum {
    ///     type Msg = u64;
    ///     fn handle(&mut self, n: u64, _ctx: &mut Context<Self>) {
    ///         self.0 += n;
    ///     }
    /// }
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (addr, h) = rt.start(Sum(0));
    /// addr.send(40).unwrap();
    /// addr.send(2).unwrap();
    /// drop(addr);
    /// assert_eq!(h.join().unwrap().0, 42);
    /// ```
    fn start<A: Actor>(&self, actor: A) -> (Addr<A::Msg>, JoinHandle<A>);
}

/// The same from a [`Handle`]: `handle.spawn_actor(..)` and `handle.start(..)` work from any
/// thread, without owning the runtime. After the runtime has shut down, both give an address
/// whose sends fail (handing their message back) and a join handle that reports `Cancelled`;
/// `start` drops the actor's value unstarted.
///
/// ```
/// use threadlet::{Mailbox, Runtime, RuntimeExt};
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let handle = rt.handle();
/// let doubled = std::thread::spawn(move || {
///     let (addr, h) = handle.spawn_actor(|mb: Mailbox<u32>| mb.recv().map(|n| n * 2));
///     addr.send(21).unwrap();
///     h.join().unwrap()
/// });
/// assert_eq!(doubled.join().unwrap(), Some(42));
/// ```
impl RuntimeExt for Handle {
    fn spawn_actor<M, F, R>(&self, f: F) -> (Addr<M>, JoinHandle<R>)
    where
        M: Send + 'static,
        F: FnOnce(Mailbox<M>) -> R + Send + 'static,
        R: Send + 'static,
    {
        // (Not through a shared helper taking the spawn as a closure: that would box the
        // entry, one allocation per spawn on top of the runtime's own.)
        let (addr, mb) = mailbox::mailbox();
        let h = self.spawn(run_with_mailbox(mb, f));
        addr.attach(&h);
        (addr, h)
    }

    fn start<A: Actor>(&self, actor: A) -> (Addr<A::Msg>, JoinHandle<A>) {
        // With default options the only refusal is the runtime's shutdown (the value drops
        // there, unstarted): a join handle of an actor that never runs, and an address whose
        // mailbox closed with its owner, so that sends hand their message back.
        handler::start_on(self, SpawnOptions::new(), None, actor).unwrap_or_else(|_| {
            let (addr, mb) = mailbox::mailbox();
            drop(mb);
            let h = threadlet_runtime::__private::never_started();
            addr.attach(&h);
            (addr, h)
        })
    }
}

impl RuntimeExt for Runtime {
    fn spawn_actor<M, F, R>(&self, f: F) -> (Addr<M>, JoinHandle<R>)
    where
        M: Send + 'static,
        F: FnOnce(Mailbox<M>) -> R + Send + 'static,
        R: Send + 'static,
    {
        // (Not through a shared helper taking the spawn as a closure: that would box the
        // entry, one allocation per spawn on top of the runtime's own.)
        let (addr, mb) = mailbox::mailbox();
        let h = self.spawn(run_with_mailbox(mb, f));
        addr.attach(&h);
        (addr, h)
    }

    fn start<A: Actor>(&self, actor: A) -> (Addr<A::Msg>, JoinHandle<A>) {
        handler::start_on(self, SpawnOptions::new(), None, actor)
            .unwrap_or_else(|e| panic!("threadlet: cannot start an actor: {e}"))
    }
}

/// What [`ActorBuilder`]'s `*_on` methods spawn on from any thread: a [`Runtime`], or a
/// [`Handle`] of one (which a thread may hold without owning the runtime). Sealed: only those
/// two are.
pub trait Spawner: spawner::Sealed {}

impl Spawner for Runtime {}
impl Spawner for Handle {}

mod spawner {
    use std::io;

    use threadlet_runtime::{
        Activation, ActorId, Completion, Handle, JoinHandle, Runtime, SpawnOptions,
    };

    /// The spawns `Runtime` and `Handle` both have, under one name.
    pub trait Sealed {
        fn spawn_with<F, R>(&self, opts: SpawnOptions, f: F) -> io::Result<JoinHandle<R>>
        where
            F: FnOnce() -> R + Send + 'static,
            R: Send + 'static;

        fn start_handler<R, P>(
            &self,
            opts: SpawnOptions,
            make: impl FnOnce(ActorId, Completion<R>) -> P,
        ) -> io::Result<JoinHandle<R>>
        where
            R: Send + 'static,
            P: Activation;
    }

    macro_rules! forward {
        ($t:ty) => {
            impl Sealed for $t {
                fn spawn_with<F, R>(&self, opts: SpawnOptions, f: F) -> io::Result<JoinHandle<R>>
                where
                    F: FnOnce() -> R + Send + 'static,
                    R: Send + 'static,
                {
                    <$t>::spawn_with(self, opts, f)
                }

                fn start_handler<R, P>(
                    &self,
                    opts: SpawnOptions,
                    make: impl FnOnce(ActorId, Completion<R>) -> P,
                ) -> io::Result<JoinHandle<R>>
                where
                    R: Send + 'static,
                    P: Activation,
                {
                    <$t>::start_handler(self, opts, make)
                }
            }
        };
    }
    forward!(Runtime);
    forward!(Handle);
}

/// Per-actor options, shaped like `std::thread::Builder`: name, stack size, and the `unsafe`
/// migration opt-in.
///
/// ```
/// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
/// rt.block_on(|| {
///     let h = threadlet::ActorBuilder::new()
///         .name("deep")
///         .stack_size(1024 * 1024)
///         .spawn(|| threadlet::current_name())
///         .unwrap();
///     assert_eq!(h.join().unwrap().as_deref(), Some("deep"));
///     // A bad stack size is an error, not a crash.
///     assert!(threadlet::ActorBuilder::new().stack_size(1000).spawn(|| ()).is_err());
/// });
/// ```
#[derive(Clone, Debug, Default)]
pub struct ActorBuilder {
    opts: SpawnOptions,
    /// `None`: an unbounded mailbox.
    mailbox_capacity: Option<usize>,
}

impl ActorBuilder {
    /// Default options.
    ///
    /// ```
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let h = threadlet::ActorBuilder::new().spawn_on(&rt, threadlet::current_name).unwrap();
    /// assert_eq!(h.join().unwrap(), None); // unnamed
    /// ```
    pub fn new() -> ActorBuilder {
        ActorBuilder::default()
    }

    /// Names the actor.
    ///
    /// ```
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let b = threadlet::ActorBuilder::new().name("janitor");
    /// let h = b.spawn_on(&rt, threadlet::current_name).unwrap();
    /// assert_eq!(h.join().unwrap().as_deref(), Some("janitor"));
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> ActorBuilder {
        self.opts = self.opts.name(name);
        self
    }

    /// Usable stack bytes for this actor (a multiple of 4096, at least 16 KiB).
    ///
    /// ```
    /// use threadlet::{ActorBuilder, MIN_STACK_SIZE};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let h = ActorBuilder::new().stack_size(MIN_STACK_SIZE).spawn_on(&rt, || 1).unwrap();
    /// assert_eq!(h.join().unwrap(), 1);
    /// let too_small = ActorBuilder::new().stack_size(MIN_STACK_SIZE / 2).spawn_on(&rt, || 1);
    /// assert_eq!(too_small.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> ActorBuilder {
        self.opts = self.opts.stack_size(bytes);
        self
    }

    /// Lets the actor move between worker threads while suspended. Process actors only: a
    /// handler actor ([`ActorBuilder::start`]) moves between messages anyway, and stays on its
    /// worker while `handle` is suspended whatever this says.
    ///
    /// # Safety
    ///
    /// See [`SpawnOptions::migratable`]: whenever the actor suspends, nothing on its stack may
    /// be tied to the OS thread (thread-local borrows, `ThreadRng`, lock guards, `Rc`s shared
    /// with the thread). `docs/safety.md` has examples.
    ///
    /// ```
    /// use threadlet::{ActorBuilder, Mailbox};
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let total = rt.block_on(|| {
    ///     // SAFETY: while suspended (in `recv`) the actor below holds only its mailbox and a
    ///     // `u64` on its stack: no thread-local borrow, lock guard, `Rc` or thread-bound handle.
    ///     let builder = unsafe { ActorBuilder::new().migratable() };
    ///     let (addr, h) = builder
    ///         .spawn_actor(|mb: Mailbox<u64>| {
    ///             let mut sum = 0u64;
    ///             while let Some(n) = mb.recv() {
    ///                 sum += n; // may resume on either worker after each `recv`
    ///             }
    ///             sum
    ///         })
    ///         .unwrap();
    ///     for n in 1..=4 {
    ///         addr.send(n).unwrap();
    ///     }
    ///     drop(addr);
    ///     h.join().unwrap()
    /// });
    /// assert_eq!(total, 10);
    /// ```
    pub unsafe fn migratable(mut self) -> ActorBuilder {
        // SAFETY: the caller makes the promise this function documents.
        self.opts = unsafe { self.opts.migratable() };
        self
    }

    /// Bounds the actor's mailbox to `capacity` messages (process actors from `spawn_actor*`,
    /// and handler actors). On a full mailbox [`Addr::send`] waits for room (suspending an
    /// actor, blocking a plain thread), [`Addr::try_send`] fails with `Full`, and
    /// [`Addr::send_timeout`] waits at most its timeout; so a flood of senders cannot grow the
    /// queue past `capacity`. Capacity 0 is a rendezvous: `send` waits until the actor takes
    /// its message; `try_send` and `send_timeout` succeed at once while the actor waits for a
    /// message in a receive (it is then its next). Mailboxes are unbounded unless this is set.
    ///
    /// ```
    /// use threadlet::{ActorBuilder, Mailbox};
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let (addr, h) = ActorBuilder::new()
    ///     .mailbox_capacity(4)
    ///     .spawn_actor_on(&rt, |mb: Mailbox<u32>| {
    ///         let mut most = 0;
    ///         let mut sum = 0;
    ///         for n in &mb {
    ///             most = most.max(mb.len()); // queued behind this one
    ///             sum += n;
    ///         }
    ///         (most, sum)
    ///     })
    ///     .unwrap();
    /// for n in 1..=100 {
    ///     addr.send(n).unwrap(); // waits whenever 4 are queued
    /// }
    /// drop(addr);
    /// let (most, sum) = h.join().unwrap();
    /// assert!(most <= 4);
    /// assert_eq!(sum, 5050);
    /// ```
    pub fn mailbox_capacity(mut self, capacity: usize) -> ActorBuilder {
        self.mailbox_capacity = Some(capacity);
        self
    }

    /// Spawns on the current runtime (from inside an actor).
    ///
    /// ```
    /// use threadlet::ActorBuilder;
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let h = ActorBuilder::new().name("child").spawn(threadlet::current_name).unwrap();
    ///     assert_eq!(h.join().unwrap().as_deref(), Some("child"));
    /// });
    /// // Outside any runtime it is an error, not a panic.
    /// assert!(ActorBuilder::new().spawn(|| ()).is_err());
    /// ```
    pub fn spawn<F, R>(self, f: F) -> io::Result<JoinHandle<R>>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        threadlet_runtime::spawn_with(self.opts, f)
    }

    /// Spawns an actor with a mailbox on the current runtime.
    ///
    /// ```
    /// use threadlet::{ActorBuilder, Mailbox};
    ///
    /// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
    /// let greeting = rt.block_on(|| {
    ///     let (addr, h) = ActorBuilder::new()
    ///         .name("greeter")
    ///         .spawn_actor(|mb: Mailbox<&str>| {
    ///             let who = mb.recv().unwrap_or("nobody");
    ///             format!("{} greets {who}", threadlet::current_name().unwrap())
    ///         })
    ///         .unwrap();
    ///     addr.send("you").unwrap();
    ///     h.join().unwrap()
    /// });
    /// assert_eq!(greeting, "greeter greets you");
    /// ```
    pub fn spawn_actor<M, F, R>(self, f: F) -> io::Result<(Addr<M>, JoinHandle<R>)>
    where
        M: Send + 'static,
        F: FnOnce(Mailbox<M>) -> R + Send + 'static,
        R: Send + 'static,
    {
        let (addr, mb) = mailbox::mailbox_with(self.mailbox_capacity);
        let h = threadlet_runtime::spawn_with(self.opts, run_with_mailbox(mb, f))?;
        addr.attach(&h);
        Ok((addr, h))
    }

    /// Spawns an actor with a mailbox on `rt` (a [`Runtime`] or a [`Handle`]), from any thread.
    ///
    /// ```
    /// use threadlet::{ActorBuilder, Mailbox};
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let (addr, h) = ActorBuilder::new()
    ///     .name("doubler")
    ///     .spawn_actor_on(&rt, |mb: Mailbox<u32>| mb.recv().map(|n| n * 2))
    ///     .unwrap();
    /// addr.send(21).unwrap();
    /// assert_eq!(h.join().unwrap(), Some(42));
    /// ```
    pub fn spawn_actor_on<M, F, R>(
        self,
        rt: &impl Spawner,
        f: F,
    ) -> io::Result<(Addr<M>, JoinHandle<R>)>
    where
        M: Send + 'static,
        F: FnOnce(Mailbox<M>) -> R + Send + 'static,
        R: Send + 'static,
    {
        let (addr, mb) = mailbox::mailbox_with(self.mailbox_capacity);
        let h = rt.spawn_with(self.opts, run_with_mailbox(mb, f))?;
        addr.attach(&h);
        Ok((addr, h))
    }

    /// Spawns on `rt` (a [`Runtime`] or a [`Handle`]) from any thread.
    ///
    /// ```
    /// use threadlet::ActorBuilder;
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let h = ActorBuilder::new()
    ///     .name("from-main")
    ///     .spawn_on(&rt, || threadlet::current_name().map(|n| n.len()))
    ///     .unwrap();
    /// assert_eq!(h.join().unwrap(), Some(9));
    /// ```
    pub fn spawn_on<F, R>(self, rt: &impl Spawner, f: F) -> io::Result<JoinHandle<R>>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        rt.spawn_with(self.opts, f)
    }

    /// Starts a handler actor with these options (the name; a stack size applies to process
    /// actors only) on the current runtime; fails outside any runtime or on a bad option.
    ///
    /// ```
    /// use threadlet::{Actor, ActorBuilder, Context};
    ///
    /// struct Named;
    /// impl Actor for Named {
    ///     type Msg = ();
    ///     fn handle(&mut self, _: (), ctx: &mut Context<Self>) {
    ///         ctx.stop();
    ///     }
    /// }
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let (addr, h) = ActorBuilder::new().name("named").start(Named).unwrap();
    ///     addr.send(()).unwrap();
    ///     h.join().unwrap();
    /// });
    /// assert!(ActorBuilder::new().start(Named).is_err()); // outside any runtime
    /// ```
    pub fn start<A: Actor>(self, actor: A) -> io::Result<(Addr<A::Msg>, JoinHandle<A>)> {
        handler::start_here(self.opts, self.mailbox_capacity, actor)
    }

    /// Starts a handler actor with these options on `rt` (a [`Runtime`] or a [`Handle`]), from
    /// any thread.
    ///
    /// ```
    /// use threadlet::{Actor, ActorBuilder, Context};
    ///
    /// struct Greeter;
    /// impl Actor for Greeter {
    ///     type Msg = &'static str;
    ///     fn handle(&mut self, who: &'static str, ctx: &mut Context<Self>) {
    ///         assert_eq!(threadlet::current_name().as_deref(), Some("greeter"));
    ///         println!("hello, {who}");
    ///         ctx.stop();
    ///     }
    /// }
    ///
    /// let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    /// let handle = rt.handle(); // what a thread that does not own the runtime holds
    /// let (addr, h) = std::thread::spawn(move || {
    ///     ActorBuilder::new().name("greeter").mailbox_capacity(8).start_on(&handle, Greeter)
    /// })
    /// .join()
    /// .unwrap()
    /// .unwrap();
    /// addr.send("world").unwrap();
    /// h.join().unwrap();
    /// ```
    pub fn start_on<A: Actor>(
        self,
        rt: &impl Spawner,
        actor: A,
    ) -> io::Result<(Addr<A::Msg>, JoinHandle<A>)> {
        handler::start_on(rt, self.opts, self.mailbox_capacity, actor)
    }
}
