//! One actor: its identity, its wake state, and the coroutine it runs on.
//!
//! An [`ActorCell`] is shared (`Arc`) by everything that may wake the actor: run queues,
//! mailboxes, channels, join handles. What it runs, its [`Body`], is touched only by the one
//! worker that is running it, as the wake state word guarantees (see `wake.rs`): a worker gets
//! the body only through the actor's run-queue entry, a [`Runnable`], which only the spawner
//! (for the first run) and the single winner of `IDLE -> SCHEDULED` receive.
//!
//! # Pinning (the soundness rule)
//!
//! A started process actor's stack may hold thread-affine values: a `thread_local!` borrow, a
//! `ThreadRng`, a `MutexGuard`. Resuming that stack on another OS thread would be undefined
//! behaviour, so an actor that has started is *pinned*: its `home` is the worker that started
//! it, every wake goes to that worker, and no thief ever sees it. Until it starts, an actor is
//! only a `Send` closure and may run anywhere. An actor spawned with the `unsafe` migration
//! opt-in ([`SpawnOptions::migratable`]) may be resumed on any worker; its spawner promised
//! that nothing on its stack is tied to a thread across a suspension point.

use std::cell::{Cell, UnsafeCell};
use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use corosensei::{Coroutine, Yielder};
use parking_lot::Mutex;

use crate::handler::Step;
use crate::home::Home;
use crate::join::ExitSource;
use crate::program::{Lent, Program};
use crate::runtime::Shared;
use crate::stack::{GuardSpan, OwnedStack, Stack};
use crate::wait::WaitWord;
use crate::wake::{WakeAction, WakeState};

/// A process-wide unique actor id, usable in logs (`#42`).
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
/// let a = rt.spawn(threadlet_runtime::current);
/// let b = rt.spawn(|| ());
/// assert_ne!(a.id(), b.id()); // every actor gets its own id
/// let id = a.id();
/// assert_eq!(a.join().unwrap(), Some(id)); // the actor sees the id its handle reports
/// assert_eq!(id.to_string(), format!("#{}", id.as_u64()));
/// b.join().unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActorId(pub(crate) NonZeroU64);

impl ActorId {
    /// The number behind the id.
    ///
    /// ```
    /// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
    /// let id = rt.spawn(|| ()).id();
    /// assert!(id.as_u64() > 0); // ids start at 1
    /// assert_eq!(format!("{id}"), format!("#{}", id.as_u64()));
    /// ```
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }

    /// `#42 "name"`, or `#42` for an unnamed actor: how reports name an actor.
    pub(crate) fn labelled(self, name: Option<&str>) -> String {
        match name {
            Some(n) => format!("{self} {n:?}"),
            None => self.to_string(),
        }
    }

    pub(crate) fn next() -> ActorId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // Never 0 (`Option<ActorId>` is one word): 2^64 spawns would wrap first.
        ActorId(NonZeroU64::new(n).expect("actor ids run out after 2^64 spawns"))
    }
}

/// A fresh id that no actor has: what a `Down` names when a monitor watched an address whose
/// mailbox never had an actor (`threadlet`'s monitors).
pub fn unassigned_actor_id() -> ActorId {
    ActorId::next()
}

impl fmt::Display for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Why a coroutine handed control back to its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suspend {
    /// Blocked: step 3 of the wake protocol.
    Park,
    /// `yield_now`: back of the run queue.
    Yield,
    /// Preempted at a safe point: back of the run queue.
    Preempted,
}

/// The stack an actor runs on.
pub(crate) enum ActorStack {
    /// From the runtime's slab, returned to a worker's pool when the actor ends.
    Pooled(Stack),
    /// A custom size, unmapped when the actor ends.
    Owned(OwnedStack),
}

// SAFETY: both variants satisfy corosensei's `Stack` contract themselves (see `stack.rs`); this
// only forwards to them.
unsafe impl corosensei::stack::Stack for ActorStack {
    fn base(&self) -> corosensei::stack::StackPointer {
        match self {
            ActorStack::Pooled(s) => s.base(),
            ActorStack::Owned(s) => s.base(),
        }
    }

    fn limit(&self) -> corosensei::stack::StackPointer {
        match self {
            ActorStack::Pooled(s) => s.limit(),
            ActorStack::Owned(s) => s.limit(),
        }
    }
}

impl ActorStack {
    /// Its guard page and usable size, for the overflow reporter.
    pub(crate) fn guard_span(&self) -> GuardSpan {
        match self {
            ActorStack::Pooled(s) => s.guard_span(),
            ActorStack::Owned(s) => s.guard_span(),
        }
    }
}

/// A coroutine that runs an actor: a process actor's for its whole life, or a worker's
/// *carrier*, lent to one handler actor per activation (`handler.rs`). An idle carrier is
/// resumed with the program to run, lent where it lies (`program.rs`); a process actor's
/// coroutine, and the carrier of an activation that suspended, are resumed with `None`.
pub(crate) type ActorCoroutine = Coroutine<Option<Lent>, Out, Finished, ActorStack>;

/// What a coroutine hands back when it suspends.
pub(crate) enum Out {
    /// The actor suspended (parked, yielded, preempted), keeping the coroutine.
    Suspend(Suspend),
    /// A carrier finished an activation (the program is its body's again), and what to do
    /// next.
    Activated(Step),
    /// A carrier finished an activation whose actor stopped: it took the program out of the
    /// body, which is `Done` now, and dropped it (`program.rs`, step 3).
    Stopped,
}

/// What an actor's coroutine returns: a process actor's entry returned, the actor has ended.
/// (A carrier never returns: it loops over activations until it is unwound.)
/// (`Copy`, so that the bounds of a coroutine's stack, `CoroutineTrapHandler<Finished>`, are
/// too: `WorkerContext::unwinding`.)
#[derive(Clone, Copy)]
pub(crate) enum Finished {
    Process,
}
pub(crate) type ActorYielder = Yielder<Option<Lent>, Out>;

/// What a coroutine keeps at the root of its own stack for the code it runs: its yielder (how
/// that code suspends), and the guard page and size of the stack (for the overflow report).
///
/// Kept there rather than in the cell, whose allocation class it took 16 bytes of: the worker
/// context points at the frame of the coroutine running on its thread now
/// (`WorkerContext::frame`). The coroutine sets that pointer itself whenever it gains control,
/// on the thread it runs on then (`context::enter_frame` when a process actor starts and when
/// a carrier starts an activation; `context::suspend` when a suspension returns); the worker
/// clears it whenever a resume returns. So while a coroutine runs its own code, the pointer is
/// its own frame, which lives as long as the coroutine's entry function. (In the moment between
/// that function's return and the worker's clearing, it names a popped slot of a stack that is
/// still mapped; nothing reads a frame then.) A forced unwind does not pass through the end of
/// a suspension: no frame is current while it runs (`context::suspend`, `guard.rs`).
pub(crate) struct ActorFrame<'y> {
    pub(crate) yielder: &'y ActorYielder,
    pub(crate) guard: GuardSpan,
}

/// An actor's entry (`join::entry` makes it): started on its own stack with `None`, or, if no
/// stack could be had when it was due to start (the kernel refused memory), on the worker's
/// stack with that error, which it only reports to its joiner.
pub(crate) trait Start: Send {
    /// Takes its box, rather than being a boxed `FnOnce`, so that it can free the box before the
    /// actor's code runs: a boxed `FnOnce` is freed only when the call returns, which for an
    /// actor blocked for good means never (one allocation per blocked actor, for nothing).
    fn start(self: Box<Self>, failed: Option<std::io::Error>);
}

/// See [`Start`].
pub(crate) type StartFn = Box<dyn Start>;

/// What an actor runs.
///
/// 48 bytes, the size of `Running`'s coroutine: `ActorStack`'s tag byte has room for the other
/// variants' tags (which is why `OwnedStack` keeps no length of its own beside its `Stack`).
pub(crate) enum Body {
    /// Not started: a `Send` closure, which may run on any worker. A stack of the runtime's size
    /// is taken from the starting worker's pool when it first runs, so that short actors spawned
    /// in bulk reuse a few warm stacks; a stack of a custom size was mapped at spawn.
    Unstarted(StartFn, Option<OwnedStack>),
    /// A handler actor (`handler.rs`): its `Send` program, kept in place when it is small
    /// (`program.rs`). Between activations it holds no stack and may run on any worker. It
    /// stays here during an activation, lent to the carrier that runs it; the carrier of one
    /// that suspended is with its worker (`suspended`, `worker.rs`), never in the body, so the
    /// program never moves while a stack refers to it.
    Idle(Program),
    /// Started: a process actor's coroutine, suspended or running, with its stack.
    Running(ActorCoroutine),
    /// Finished or cancelled.
    Done,
}

/// Per-actor options, shaped like `std::thread::Builder`.
///
/// ```
/// use threadlet_runtime::{Runtime, SpawnOptions};
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let opts = SpawnOptions::new().name("parser").stack_size(128 * 1024);
/// let h = rt.spawn_with(opts, threadlet_runtime::current_name).unwrap();
/// assert_eq!(h.join().unwrap().as_deref(), Some("parser"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct SpawnOptions {
    pub(crate) name: Option<String>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) migratable: bool,
}

impl SpawnOptions {
    /// Default options: unnamed, the runtime's stack size, pinned once started.
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, SpawnOptions};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn_with(SpawnOptions::new(), threadlet_runtime::current_name).unwrap();
    /// assert_eq!(h.join().unwrap(), None); // unnamed
    /// ```
    pub fn new() -> SpawnOptions {
        SpawnOptions::default()
    }

    /// Names the actor (shown by `current_name`, overflow reports and panics).
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, SpawnOptions};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let opts = SpawnOptions::new().name(format!("worker-{}", 7));
    /// let h = rt.spawn_with(opts, threadlet_runtime::current_name).unwrap();
    /// assert_eq!(h.join().unwrap().as_deref(), Some("worker-7"));
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> SpawnOptions {
        self.name = Some(name.into());
        self
    }

    /// Usable stack size in bytes for this actor. Checked at spawn: page aligned and at least
    /// the runtime's minimum.
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, SpawnOptions};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// // 128 KiB of locals would overflow the default 64 KiB stack; this actor gets 1 MiB.
    /// let big = SpawnOptions::new().stack_size(1024 * 1024);
    /// let h = rt
    ///     .spawn_with(big, || {
    ///         let buf = std::hint::black_box([1u8; 128 * 1024]);
    ///         buf.iter().map(|&b| u32::from(b)).sum::<u32>()
    ///     })
    ///     .unwrap();
    /// assert_eq!(h.join().unwrap(), 128 * 1024);
    ///
    /// // A size that is not page aligned is refused at spawn.
    /// let err = rt.spawn_with(SpawnOptions::new().stack_size(20_000), || ()).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> SpawnOptions {
        self.stack_size = Some(bytes);
        self
    }

    /// Lets the actor be resumed on any worker after it has suspended.
    ///
    /// # Safety
    ///
    /// The caller promises that whenever the actor suspends (any mailbox or channel operation,
    /// `join`, `spawn`, `yield_now`, `checkpoint`, `sleep`) its stack holds nothing tied to the current OS
    /// thread: no `thread_local!` borrow or reference into one, no `ThreadRng`, no guard of a
    /// lock that must be released by the thread that took it (`std::sync::MutexGuard`,
    /// `parking_lot` guards), no `Rc` shared with the thread, no OS handle with thread affinity.
    /// See `docs/safety.md`.
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, SpawnOptions};
    ///
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// // SAFETY: across its suspension points (`yield_now`) the actor below holds only a plain
    /// // `u32` on its stack: no thread-local borrow, lock guard, `Rc` or thread-bound handle.
    /// let opts = unsafe { SpawnOptions::new().migratable() };
    /// let h = rt
    ///     .spawn_with(opts, || {
    ///         let mut steps = 0u32;
    ///         for _ in 0..3 {
    ///             steps += 1;
    ///             threadlet_runtime::yield_now(); // may resume on the other worker
    ///         }
    ///         steps
    ///     })
    ///     .unwrap();
    /// assert_eq!(h.join().unwrap(), 3);
    /// ```
    pub unsafe fn migratable(mut self) -> SpawnOptions {
        self.migratable = true;
        self
    }
}

/// No worker, in `placed_on`.
pub(crate) const NO_HOME: u32 = u32::MAX;

/// In no registry, in `registry_slot`; not held by the live table, in `held_by_live_table`.
pub(crate) const NO_SLOT: u32 = u32::MAX;
/// Held by the live table, in `held_by_live_table`.
pub(crate) const HELD: u32 = 0;

// `ActorCell::by_kind` starts out as none for either kind.
const _: () = assert!(NO_HOME == NO_SLOT);

/// `ActorCell::life`: a worker has started the actor.
const STARTED: u8 = 1;
/// `ActorCell::life`: a kill was asked for.
const KILLED: u8 = 2;
/// `ActorCell::activation_flags`: the handler activation has been preempted.
pub(crate) const ACTIVATION_PREEMPTED: u8 = 1;
/// `ActorCell::activation_flags`: the handler activation's `park` consumed a wake without
/// suspending.
pub(crate) const ACTIVATION_WOKEN: u8 = 2;

/// What kind of actor a cell is, fixed when it is made: four flags in one byte (four `bool`s
/// took the cell out of its allocation class; see `actor_cell_size`).
#[derive(Clone, Copy)]
struct Traits(u8);

impl Traits {
    /// Spawned with a name.
    const NAMED: u8 = 1;
    /// Spawned migratable (`SpawnOptions::migratable`).
    const MIGRATABLE: u8 = 2;
    /// A handler actor (`handler.rs`), not a process actor.
    const HANDLER: u8 = 4;
    /// Holds a stack reservation in the slab (`StackSlab::reserve`), released by `end`.
    const RESERVED: u8 = 8;

    fn new(named: bool, migratable: bool, handler: bool, reserved: bool) -> Traits {
        let flags = [
            (named, Traits::NAMED),
            (migratable, Traits::MIGRATABLE),
            (handler, Traits::HANDLER),
            (reserved, Traits::RESERVED),
        ];
        Traits(flags.iter().filter(|(on, _)| *on).map(|(_, f)| f).sum())
    }

    fn has(self, flag: u8) -> bool {
        self.0 & flag != 0
    }
}

/// The shared part of one actor. Reached through [`Waiter::Actor`](crate::Waiter::Actor).
///
/// ```
/// use threadlet_runtime::{Runtime, SpawnOptions, Waiter};
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let opts = SpawnOptions::new().name("cell");
/// let h = rt
///     .spawn_with(opts, || match Waiter::current() {
///         Waiter::Actor(cell) => {
///             (Some(cell.id()) == threadlet_runtime::current(), cell.name().map(|n| n.to_string()))
///         }
///         Waiter::Thread(_) => unreachable!("called inside an actor"),
///     })
///     .unwrap();
/// assert_eq!(h.join().unwrap(), (true, Some("cell".to_string())));
/// ```
pub struct ActorCell {
    pub(crate) id: ActorId,
    /// What kind of actor it is, fixed at spawn (see `Traits`).
    traits: Traits,
    pub(crate) state: WakeState,
    /// The worker a started pinned actor belongs to; free before start or if migratable, and
    /// for a handler actor between activations (`home.rs`).
    pub(crate) home: Home,
    /// Index in the owning registry (worker-local or shared), for O(1) removal; `NO_SLOT` in
    /// none. (Indices are `u32`, as is the one below: a cell is well over 100 bytes, so 2^32
    /// live actors would not fit in a 64-bit address space's usable part.)
    pub(crate) registry_slot: AtomicU32,
    /// One word, two uses that never meet, picked by the actor's kind (fixed at spawn): a
    /// process actor's placement (`placed_on`), and for a handler actor whether the live
    /// table holds it (`held_by_live_table`; handler actors are never placed). Two words took
    /// the cell out of its allocation class (`actor_cell_size`). `u32::MAX` is none in both.
    by_kind: AtomicU32,
    /// Times the actor was preempted, and times a worker ran it (one per run, not per switch);
    /// both written only by the worker running it, both wrapping at 2^32 (32 bits each keep the
    /// cell in its allocator class: see `actor_cell_size`).
    pub(crate) preemptions: AtomicU32,
    pub(crate) runs: AtomicU32,
    /// Time it held a worker, in `dump::CPU_TICK`s, as the monitor's samples saw it
    /// (`dump.rs`, "CPU time"; 32 bits of 100 µs ticks hold 119 hours).
    pub(crate) cpu_ticks: AtomicU32,
    /// When it was spawned, on the coarse clock (`dump::coarse_now_ms`), wrapping.
    pub(crate) born_ms: u32,
    /// What it waits on while suspended (`wait.rs`).
    pub(crate) wait: WaitWord,
    /// Its `tracing` span, entered for every run (`trace.rs`).
    #[cfg(feature = "tracing")]
    pub(crate) span: crate::trace::ActorSpan,
    /// `STARTED` and `KILLED`, one byte (see `actor_cell_size`); both bits are only ever
    /// raised, each by a read-modify-write, so that neither raise can undo the other.
    ///
    /// `STARTED` is raised (release) when a worker starts the actor; from then on its body
    /// belongs to the worker running it or to its registry, never to whoever pops a stale
    /// queue entry. `KILLED`: a kill was asked for (`JoinHandle::abort`); the worker that next
    /// holds the actor's body ends it (`worker.rs`, "Kill").
    life: AtomicU8,
    /// What happened in a handler actor's current activation, two bits in one byte (a second
    /// field would grow the cell: `actor_cell_size`), both cleared by its worker when the
    /// activation returns:
    /// - [`ACTIVATION_PREEMPTED`]: its batch has had a time slice, and ends after the message
    ///   at hand (`handler::activation_preempted`); set by the worker;
    /// - [`ACTIVATION_WOKEN`]: a `park` consumed a wake without suspending (it found the actor
    ///   notified and returned at once), a wake its mailbox's waiter may have sent, so its
    ///   batch looks at the mailbox again before it ends parked
    ///   (`handler::activation_may_park`); set by `park`.
    ///
    /// Read by the program running on the activation.
    pub(crate) activation_flags: Cell<u8>,
    /// Touched only by the worker running the actor; see the module docs.
    pub(crate) body: UnsafeCell<Body>,
    pub(crate) shared: Arc<Shared>,
    /// Its join packet, weakly (the packet holds the result, which no cell keeps alive): how a
    /// bare id reaches the actor's end, for `monitor(id)` and `kill(id)` through the table of
    /// live actors (`live.rs`), and its mailbox, for the diagnostics (`dump.rs`). A cell held
    /// after its actor ended (a `Waiter` kept by the user, a timer's pending target) keeps the
    /// packet's allocation, not its contents, until it goes.
    pub(crate) exit: Weak<dyn ExitSource>,
}

// SAFETY: the fields other threads touch are atomics or immutable (`id`, `traits`, `shared`).
// `body` and `activation_flags` are touched only by the worker that holds the actor in the
// `RUNNING` state, which the wake protocol makes exclusive (one queue entry at a time, popped by
// one worker). A started pinned actor's coroutine, which is not `Send`, is only ever resumed or
// dropped on its home worker's thread: every wake of it is routed there (`Shared::schedule_woken`),
// thieves never see it (it never enters a stealable queue), and shutdown unwinds it on that thread.
// A migratable coroutine may move, on the promise its spawner made in `SpawnOptions::migratable`. A
// handler actor's program is also reached through the pointer lent to the carrier running its
// activation (`program.rs`), on the worker that holds the actor: the program is `Send`, and the
// lending protocol keeps every other access to the body away until the activation returns (its
// worker leaves the body alone; a suspended activation pins the actor, and nothing drops a pinned
// handler actor's program before its worker has unwound the carrier).
unsafe impl Send for ActorCell {}
// SAFETY: as for `Send`: shared access is to atomics and immutable fields only.
unsafe impl Sync for ActorCell {}

impl ActorCell {
    /// A new process actor, and its first run-queue entry, for its spawner to queue.
    pub(crate) fn new_process(
        shared: Arc<Shared>,
        id: ActorId,
        opts: SpawnOptions,
        f: StartFn,
        exit: Weak<dyn ExitSource>,
        stack: Option<OwnedStack>,
        reserved: bool,
    ) -> Runnable {
        Runnable(ActorCell::with_body(
            shared,
            id,
            opts,
            Body::Unstarted(f, stack),
            exit,
            reserved,
        ))
    }

    /// A handler actor, idle until its first message (or its `started` hook) runs it. Its
    /// activations borrow pooled stacks, so a custom stack size does not apply.
    /// Returns its first run-queue entry, for its spawner to queue.
    pub(crate) fn new_handler(
        shared: Arc<Shared>,
        id: ActorId,
        mut opts: SpawnOptions,
        program: Program,
        exit: Weak<dyn ExitSource>,
    ) -> Runnable {
        opts.stack_size = None;
        // A handler actor moves between activations anyway, and an activation suspended in
        // `handle` must stay on its carrier's worker (`home.rs`): the migration opt-in, which
        // would route it anywhere, does not apply.
        opts.migratable = false;
        Runnable(ActorCell::with_body(
            shared,
            id,
            opts,
            Body::Idle(program),
            exit,
            false,
        ))
    }

    fn with_body(
        shared: Arc<Shared>,
        id: ActorId,
        opts: SpawnOptions,
        body: Body,
        exit: Weak<dyn ExitSource>,
        reserved: bool,
    ) -> Arc<ActorCell> {
        let handler = matches!(body, Body::Idle(_));
        #[cfg(feature = "tracing")]
        let span = crate::trace::spawned(id.as_u64(), opts.name.as_deref(), handler);
        let traits = Traits::new(opts.name.is_some(), opts.migratable, handler, reserved);
        if let Some(name) = opts.name {
            shared.names.insert(id, Arc::from(name));
        }
        Arc::new(ActorCell {
            id,
            traits,
            state: WakeState::new_scheduled(),
            home: Home::new(),
            registry_slot: AtomicU32::new(NO_SLOT),
            by_kind: AtomicU32::new(NO_HOME),
            activation_flags: Cell::new(0),
            preemptions: AtomicU32::new(0),
            runs: AtomicU32::new(0),
            cpu_ticks: AtomicU32::new(0),
            born_ms: crate::dump::coarse_now_ms(),
            wait: WaitWord::default(),
            #[cfg(feature = "tracing")]
            span,
            life: AtomicU8::new(0),
            body: UnsafeCell::new(body),
            shared,
            exit,
        })
    }

    /// One more run (by the worker running it: a plain load and store, one writer at a time).
    #[inline]
    pub(crate) fn count_run(&self) {
        let n = self.runs.load(Ordering::Relaxed);
        self.runs.store(n.wrapping_add(1), Ordering::Relaxed);
    }

    /// One more preemption (by the worker running it, as `count_run`).
    pub(crate) fn count_preemption(&self) {
        let n = self.preemptions.load(Ordering::Relaxed);
        self.preemptions.store(n.wrapping_add(1), Ordering::Relaxed);
    }

    /// A handler actor's activation ended waiting for the next message: record that wait
    /// (`wait.rs`), then step 4 of the wake protocol.
    #[inline]
    pub(crate) fn park_between_messages(&self) -> crate::wake::AfterPark {
        self.wait.set(crate::wait::Wait::Message, false);
        self.state.after_park()
    }

    /// The actor's id.
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, Waiter};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| match Waiter::current() {
    ///     Waiter::Actor(cell) => Some(cell.id()),
    ///     Waiter::Thread(_) => None,
    /// });
    /// let id = h.id();
    /// assert_eq!(h.join().unwrap(), Some(id));
    /// ```
    pub fn id(&self) -> ActorId {
        self.id
    }

    /// The actor's name, if it was given one, while it lives (looked up in the runtime's table
    /// of named actors).
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, Waiter};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let name = rt.block_on(|| match Waiter::current() {
    ///     Waiter::Actor(cell) => cell.name(),
    ///     Waiter::Thread(_) => unreachable!("called inside an actor"),
    /// });
    /// assert_eq!(name, None); // `block_on` actors are unnamed
    /// ```
    pub fn name(&self) -> Option<Arc<str>> {
        self.is_named()
            .then(|| self.shared.names.get(self.id))
            .flatten()
    }

    /// Wakes the actor (see `wake.rs`): schedules it if it is parked, else leaves a
    /// notification for its next park. Safe to call from any thread, any number of times.
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, Waiter, park};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let Waiter::Actor(me) = Waiter::current() else {
    ///         unreachable!("called inside an actor")
    ///     };
    ///     me.wake(); // not parked yet: the wake is kept as a notification
    ///     park().unwrap(); // so this returns at once instead of waiting
    /// });
    /// ```
    #[inline]
    pub fn wake(self: &Arc<ActorCell>) {
        if self.state.wake() == WakeAction::Schedule {
            crate::trace::woken(self);
            // This wake won `IDLE -> SCHEDULED`: it makes the actor's one entry.
            self.shared.schedule_woken(Runnable(self.clone()));
        }
    }

    /// `wake` that gives up the caller's reference: a wake that schedules the actor makes its
    /// entry from this reference instead of a new one. A waiter taken out of a mailbox or a
    /// channel and woken so costs no reference-count traffic: `wake` and a drop cost a clone
    /// and a release, each a locked instruction, on every message to a parked actor.
    #[inline]
    pub(crate) fn wake_by_value(self: Arc<ActorCell>) {
        if self.state.wake() == WakeAction::Schedule {
            crate::trace::woken(&self);
            // This wake won `IDLE -> SCHEDULED`: this reference becomes the actor's one entry.
            Shared::schedule_woken_owned(Runnable(self));
        }
    }

    /// Asks for the actor to be killed (`worker.rs`, "Kill", steps 1 and 2): raises the flag,
    /// asks every worker to preempt its running actor (so that this one, if it runs now, yields
    /// at its next safe point), and wakes it so that a parked actor is scheduled. `false` if it
    /// had already ended.
    pub(crate) fn kill(self: &Arc<ActorCell>) -> bool {
        if self.state.is_done() {
            return false;
        }
        // Release: pairs with the acquire load in `is_killed` on the worker that next takes
        // the body (through the wake below, whose state-word CAS orders it too).
        self.life.fetch_or(KILLED, Ordering::Release);
        // Every worker is asked to preempt its running actor: kills are rare, a spurious
        // yield is cheap, and asking only the worker whose `running_actor` names this actor
        // could race with that worker switching to it. A worker that starts a new time slice
        // lowers the request, and then (its clear having seen it) checks the flag itself
        // (`run_actor`): the request's release swap and the clear's acquire swap are on the
        // same word, so either the request survives the clear or the clear sees the flag.
        for remote in self.shared.remotes.iter() {
            remote.request_preempt();
        }
        self.wake();
        true
    }

    /// Whether a kill was asked for.
    pub(crate) fn is_killed(&self) -> bool {
        // Acquire: pairs with the release raise in `kill`.
        self.life.load(Ordering::Acquire) & KILLED != 0
    }

    /// Marks the actor started, by the worker that starts it (`WorkerLoop::start`, or a
    /// handler actor's first activation): see `life`.
    pub(crate) fn mark_started(&self) {
        // A handler actor comes here at every activation: the read-modify-write only the
        // first time. Relaxed: only the holder of the body raises `STARTED`, and the queue
        // hand-offs that passed the body on carry its earlier raise.
        if self.life.load(Ordering::Relaxed) & STARTED != 0 {
            return;
        }
        // Release: pairs with the acquire load in `has_started`, by whoever later holds a
        // queue entry of it (a shutdown sweep), which must then leave the body alone.
        self.life.fetch_or(STARTED, Ordering::Release);
    }

    /// Whether a worker has started the actor (`mark_started`).
    pub(crate) fn has_started(&self) -> bool {
        // Acquire: pairs with the release raise in `mark_started`.
        self.life.load(Ordering::Acquire) & STARTED != 0
    }

    /// Whether it was spawned with a name (which the runtime's `ActorNames` holds while it
    /// lives).
    pub(crate) fn is_named(&self) -> bool {
        self.traits.has(Traits::NAMED)
    }

    /// The actor has finished, was cancelled, or could not start: wakes become no-ops and its
    /// stack reservation goes back. Called exactly once, by whoever holds its body.
    pub(crate) fn end(&self) {
        self.end_keeping_name();
        self.forget_name();
    }

    /// `end`, but the name stays readable (`current_name`, panic and overflow reports) until
    /// `forget_name`: for shutdown, which ends an actor before unwinding its stack, where its
    /// destructors still run as that actor.
    pub(crate) fn end_keeping_name(&self) {
        // An actor placed on a worker but never started (dropped at shutdown, or refused a
        // stack) leaves that worker's count here.
        self.unplace();
        self.state.complete();
        self.shared.live.remove(self);
        if self.traits.has(Traits::RESERVED) {
            self.shared.slab.unreserve();
        }
    }

    /// The last step of `end`: the runtime's table of names lets go of its name.
    pub(crate) fn forget_name(&self) {
        if self.is_named() {
            self.shared.names.remove(self.id);
        }
    }

    /// Drops the closure of an actor that never started (shutdown drops queued actors this
    /// way) and ends the actor. The closure's destructors are user code: a panic there is
    /// contained (`fault.rs`). Runs outside any actor, so a destructor that would block gets
    /// `Cancelled` instead (see `context::park`).
    ///
    /// The caller holds the body: it took the actor's one queue entry (as `run_actor` does).
    ///
    /// Never for a handler actor whose activation is suspended (the actor is pinned then): its
    /// body is lent to its carrier (`program.rs`), and its callers leave it to the worker that
    /// unwinds the carrier first (a kill, or shutdown through its registry) and drops the
    /// program after.
    pub(crate) fn discard_unstarted(&self, body: &mut Body) {
        debug_assert!(
            !(self.is_handler() && self.home().is_some()),
            "the body of a suspended activation is lent to its carrier"
        );
        if let Body::Unstarted(..) | Body::Idle(..) = body {
            let closure = std::mem::replace(body, Body::Done);
            self.end();
            crate::fault::contain(
                format_args!(
                    "the closure of actor {}, dropped before it started",
                    self.id
                ),
                move || drop(closure),
            );
        }
    }

    /// The actor stops counting as placed on a worker (`worker::place`): it starts, or ends
    /// without having started. Called by whoever holds the body; a no-op if it was not placed.
    pub(crate) fn unplace(&self) {
        if self.is_handler() {
            // Never placed; its word says whether the live table holds it.
            return;
        }
        // Relaxed: see `placed_on`.
        let on = self.placed_on().load(Ordering::Relaxed);
        if on != NO_HOME {
            self.placed_on().store(NO_HOME, Ordering::Relaxed);
            self.shared.remotes[on as usize].unplace_one();
        }
    }

    /// A process actor's placement: the worker whose `Remote::placed` count includes it, set
    /// when a spawn places it there (`worker::place`), reset when it starts or ends unstarted;
    /// `NO_HOME` otherwise. Touched only by whoever holds the body (the spawner, then the one
    /// queue entry's holder), so relaxed accesses suffice: the queue push and pop that hand
    /// the body over order them.
    pub(crate) fn placed_on(&self) -> &AtomicU32 {
        debug_assert!(!self.is_handler(), "handler actors are never placed");
        &self.by_kind
    }

    /// Whether the live table holds a reference to this handler actor (`live.rs`): `HELD`
    /// from its start until it ends or shutdown's sweep takes the reference, `NO_SLOT` else.
    pub(crate) fn held_by_live_table(&self) -> &AtomicU32 {
        debug_assert!(
            self.is_handler(),
            "only handler actors are held by the table"
        );
        &self.by_kind
    }

    /// Whether this is a handler actor (`handler.rs`).
    pub(crate) fn is_handler(&self) -> bool {
        self.traits.has(Traits::HANDLER)
    }

    /// Raises `flag` (`ACTIVATION_PREEMPTED` or `ACTIVATION_WOKEN`) for the handler actor's
    /// current activation; only the worker holding the actor calls it (`activation_flags`).
    #[inline]
    pub(crate) fn raise_activation_flag(&self, flag: u8) {
        self.activation_flags
            .set(self.activation_flags.get() | flag);
    }

    /// Whether `flag` is raised in the handler actor's current activation.
    #[inline]
    pub(crate) fn has_activation_flag(&self, flag: u8) -> bool {
        self.activation_flags.get() & flag != 0
    }

    /// Whether its spawner made it migratable (`SpawnOptions::migratable`).
    pub(crate) fn is_migratable(&self) -> bool {
        self.traits.has(Traits::MIGRATABLE)
    }

    /// Whether the worker that starts it keeps it for good: a process actor that is not
    /// migratable.
    pub(crate) fn pins_at_start(&self) -> bool {
        !self.is_handler() && !self.is_migratable()
    }

    /// The pinned home worker, if the actor has started and is not migratable.
    pub(crate) fn home(&self) -> Option<usize> {
        self.home.get()
    }
}

impl Drop for ActorCell {
    /// The last reference to an actor is gone. On every normal path its coroutine has returned
    /// or been unwound by then (`Body::Done`). A coroutine still suspended here means a runtime
    /// thread died without unwinding it (a bug in the runtime: workers abort the process rather
    /// than die, see `worker::run`). Dropping a corosensei coroutine would unwind its stack on
    /// *this* thread, which for a pinned actor may be the wrong one (its stack can hold
    /// references into the dead worker's thread-locals): undefined behaviour. Leaking the
    /// stack is safe, so that is what happens, with a line on stderr.
    fn drop(&mut self) {
        // Every actor that entered the table of live actors leaves it in `end`, before its last
        // reference can go. One that never ended (never entered the table, as a handler actor
        // refused at shutdown; or, were there such a bug, dropped without `end`) leaves it now,
        // before its fields are dropped, so that no entry ever outlives its cell (what
        // `live::id_of` relies on). One atomic load on the common path.
        if !self.state.is_done() {
            debug_assert!(
                !self.shared.live.holds(self),
                "actor {} dropped while in the table of live actors",
                self.id
            );
            self.shared.live.forget_dropped(self);
        }
        if let Body::Running(c) = self.body.get_mut()
            && c.started()
            && !c.done()
        {
            // Not `eprintln!`, which panics when stderr is gone.
            let _ = writeln!(
                std::io::stderr(),
                "threadlet: actor {} was dropped while suspended outside its worker; its stack \
                 is leaked rather than unwound on the wrong thread",
                self.id
            );
            if let Body::Running(c) = std::mem::replace(self.body.get_mut(), Body::Done) {
                std::mem::forget(c);
            }
        }
    }
}

/// What one actor's cell costs: `ActorCell` plus the `Arc`'s two counts, in the allocator's
/// 144-byte class (glibc: a 16-byte multiple with 8 bytes of header). It was in the 128-byte
/// class until it took the weak reference to the join packet (`exit`) that the table of live
/// actors kept in each entry, which made that entry one word (`live.rs`): 16 bytes more here,
/// about 50 fewer in the table at 1M actors. It was in the 144-byte class before,
/// until the yielder and the stack's guard moved to the root of the coroutine's own
/// stack (`ActorFrame`), 16 bytes an actor that only a running actor needs. The diagnostic fields
/// (the wait word, runs, CPU time and age, `dump.rs`) took it to 176 until the name left the
/// cell for the runtime's table of names; it was 136 bytes (the 160-byte class) until its
/// four kind flags shared a byte (`Traits`), `STARTED` and `KILLED` another (`life`), the
/// guard page and the stack's size a word (`GuardSpan`, which replaced a custom size kept
/// from spawn), and placement and the handler flag another (`by_kind`). Kept here so that a
/// field added without thought shows up (`docs/benchmarks.md`, "Memory").
#[cfg(all(test, target_pointer_width = "64", not(feature = "tracing")))]
#[test]
fn actor_cell_size() {
    assert!(std::mem::size_of::<ActorCell>() <= 120);
    assert_eq!(std::mem::size_of::<Body>(), 48);
}

impl fmt::Debug for ActorCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActorCell")
            .field("id", &self.id)
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// The names of a runtime's live named actors, by id: how the monitor names an actor it only
/// knows by id (the long-run report), and where a cell finds its own name. Only named actors
/// pay for it: one short lock when they are spawned and one when they end; unnamed ones never
/// touch it. Its lock is innermost: taken under a live-table shard's lock (the dump), never
/// held around another.
#[derive(Default)]
pub(crate) struct ActorNames(Mutex<HashMap<ActorId, Arc<str>>>);

impl ActorNames {
    pub(crate) fn insert(&self, id: ActorId, name: Arc<str>) {
        self.0.lock().insert(id, name);
    }

    pub(crate) fn remove(&self, id: ActorId) {
        self.0.lock().remove(&id);
    }

    /// The name of a live actor, if it has one.
    pub(crate) fn get(&self, id: ActorId) -> Option<Arc<str>> {
        self.0.lock().get(&id).cloned()
    }

    /// For the stack overflow report only, in a signal handler, after which the process dies:
    /// calls `f` with the name of a live actor without allocating or waiting (`None` if it has
    /// none, or if the lock is held: the fault may have interrupted its holder), and leaves
    /// the lock held. Unlocking could wake a thread waiting for it, which is not
    /// async-signal-safe; nobody needs the lock again.
    pub(crate) fn read_while_dying<T>(&self, id: ActorId, f: impl FnOnce(&str) -> T) -> Option<T> {
        let names = self.0.try_lock()?;
        let found = names.get(&id).map(|n| f(n));
        std::mem::forget(names);
        found
    }
}

/// A registry of actors (a worker's started pinned actors, the runtime's migratable actors)
/// with O(1) removal: each actor keeps its index in the field that `slot` names.
pub(crate) struct Registry {
    slot: fn(&ActorCell) -> &AtomicU32,
}

impl Registry {
    /// The registry whose index lives in `ActorCell::registry_slot`.
    pub(crate) const STARTED: Registry = Registry {
        slot: |a| &a.registry_slot,
    };

    // Relaxed, the slot's loads and stores in `insert` and `remove`: they happen only while
    // holding the registry (`&mut Vec`: a worker's own, or a shared one under its lock), which
    // orders them; they pair with nothing else.
    pub(crate) fn insert(&self, live: &mut Vec<ActorRef>, actor: ActorRef) {
        // Below `NO_SLOT`: see `registry_slot`.
        (self.slot)(&actor).store(live.len() as u32, Ordering::Relaxed);
        live.push(actor);
    }

    /// Takes `actor` out and returns the registry's reference to it, for the caller to drop
    /// where it may. (An actor in no registry is a bug, which debug builds catch; release
    /// builds return `None`.)
    pub(crate) fn remove(&self, live: &mut Vec<ActorRef>, actor: &ActorCell) -> Option<ActorRef> {
        let slot = (self.slot)(actor).swap(NO_SLOT, Ordering::Relaxed);
        if slot == NO_SLOT {
            debug_assert!(false, "removed an actor that is in no registry");
            return None;
        }
        let slot = slot as usize;
        debug_assert!(std::ptr::eq(Arc::as_ptr(&live[slot]), actor));
        let removed = live.swap_remove(slot);
        if let Some(moved) = live.get(slot) {
            (self.slot)(moved).store(slot as u32, Ordering::Relaxed);
        }
        Some(removed)
    }
}

/// Shorthand for a shared actor.
pub(crate) type ActorRef = Arc<ActorCell>;

/// A run-queue entry: the right to run one actor, and so to touch its body. (Tokio's
/// `Notified` plays the same part for its tasks.)
///
/// Every run queue holds `Runnable`s, and an actor has at most one at a time. Only this module
/// makes them, at two points: a new actor's first entry, which its spawner queues
/// ([`ActorCell::new_process`], [`ActorCell::new_handler`]), and the entry that the wake winning
/// `IDLE -> SCHEDULED` makes ([`ActorCell::wake`]; the state word lets one wake win per park,
/// see `wake.rs`). A worker that pops an entry holds it while it runs the actor, gives it up
/// (drops it) when the actor parks or ends, and queues the same entry again when it yields.
/// `Runnable` is not `Clone`.
///
/// So the holder of a `Runnable` is the one thread that may run the actor, and
/// [`Runnable::body`] and [`Runnable::body_ptr`] are the run path's only ways to the body. The one other owner a body has is
/// a registry at shutdown (`worker.rs`, "Shutdown"): a started actor is unwound through its
/// registry while an entry of it may still sit in a queue. Sweeps that take such entries on
/// other threads get [`Runnable::release_at_shutdown`], which never touches a started actor's
/// body; `body` asks for the worker's [`Core`](crate::worker::Core), which only the worker loop
/// has, and a worker touches registered bodies only in its own shutdown steps (see `body`).
pub(crate) struct Runnable(ActorRef);

impl Runnable {
    /// The actor this entry runs.
    pub(crate) fn actor(&self) -> &ActorRef {
        &self.0
    }

    /// The actor and its body, for the worker loop that popped this entry (`_worker` is its
    /// `Core`, which only a worker loop has).
    pub(crate) fn body(&mut self, _worker: &crate::worker::Core) -> (&ActorRef, &mut Body) {
        // SAFETY: this entry is the actor's only one (see the type's docs), so no other thread
        // runs the actor or touches its body through an entry. The caller is a worker loop (it
        // holds a `Core`), not a sweep: the registries own started bodies only at shutdown,
        // and a worker's own registry is unwound by that worker after it has stopped running
        // actors (pinned actors: on this thread, in sequence with its drains), while a
        // migratable actor is unwound between the two shutdown barriers, when no worker pops
        // a queue. The pinned actor's coroutine is resumed on its home thread because a
        // started pinned actor's entries go only to its home worker's queues
        // (`Shared::schedule_woken`); thieves never see them.
        let body = unsafe { &mut *self.0.body.get() };
        (&self.0, body)
    }

    /// The actor and the raw pointer to its body, for `run_actor`, which may lend the body to a
    /// carrier (`program.rs`) and so makes its references to it itself, each for a short time:
    /// the pointer may be dereferenced on the terms of [`body`](Runnable::body), outside the
    /// lending protocol's step 2.
    pub(crate) fn body_ptr(&mut self, _worker: &crate::worker::Core) -> (&ActorRef, *mut Body) {
        (&self.0, self.0.body.get())
    }

    /// An entry that a shutdown sweep took from a queue, on any thread: an actor that has not
    /// started is dropped with its closure (its join handle reports `Cancelled`); a started
    /// one is left alone, without touching its body: its worker, or the shutdown's migratable
    /// phase, unwinds it through its registry, possibly right now.
    pub(crate) fn release_at_shutdown(self) {
        if self.0.has_started() {
            return;
        }
        // SAFETY: the actor has not started (`has_started`'s acquire load pairs with the
        // release raise of `mark_started` in `WorkerLoop::start`/`activate`), so it cannot be
        // woken (only a started actor parks) and is in no registry but, for a handler actor,
        // its live-table shard's, which shutdown step 4 swept before the workers were joined;
        // this runs only after that (`Shared::drain_injector`). This entry is its only one,
        // which gives us its body as in `body`. An unstarted body is a `Send` closure (and
        // maybe a stack no code ran on), or a handler actor's `Send` program, which any
        // thread may drop.
        let body = unsafe { &mut *self.0.body.get() };
        self.0.discard_unstarted(body);
    }
}

/// A run-queue entry in a worker's next slot (`next_slot.rs`): the `Arc`'s pointer; free to
/// move when the actor is pinned to no worker.
// SAFETY: `Arc::into_raw` points at the cell, whose alignment (8 or more: it holds 64-bit
// atomics; checked below) leaves the low bit 0, and `Arc::from_raw` of that pointer gives
// back the `Arc` with the count it owned.
unsafe impl crate::next_slot::SlotEntry for Runnable {
    fn into_raw(self) -> *mut () {
        Arc::into_raw(self.0).cast_mut().cast()
    }

    unsafe fn from_raw(ptr: *mut ()) -> Runnable {
        // SAFETY: the caller's promise: `ptr` came from `into_raw` above, so it is an `Arc`'s
        // pointer to a cell, whose one count it still owns; it is turned back once.
        Runnable(unsafe { Arc::from_raw(ptr.cast_const().cast::<ActorCell>()) })
    }

    fn may_move(&self) -> bool {
        // A queued entry's home does not change until it runs (`home.rs`).
        self.home().is_none()
    }
}

const _: () = assert!(
    std::mem::align_of::<ActorCell>() >= 2,
    "the next slot's mark bit"
);

impl std::ops::Deref for Runnable {
    type Target = ActorCell;

    fn deref(&self) -> &ActorCell {
        &self.0
    }
}
