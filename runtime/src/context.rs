//! The calling thread's view of the runtime: which worker it is, which actor it runs, and the
//! operations that depend on that (park, yield, spawn targets).
//!
//! Each worker thread publishes a pointer to its [`WorkerContext`] in a thread-local for as long
//! as its loop runs. Code running inside an actor reaches its worker through it; code on any
//! other thread finds no context and falls back to blocking the OS thread.
//!
//! The thread-local is read through `#[inline(never)]` accessors. A migratable actor may resume
//! on another thread, and a thread-local address computed before a suspension must not be
//! reused after it; a call that the optimiser cannot inline recomputes it every time.

use std::cell::Cell;
use std::io;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use corosensei::trap::CoroutineTrapHandler;

use crate::actor::{ACTIVATION_WOKEN, ActorCell, ActorFrame, ActorId, ActorRef, Finished, Suspend};
use crate::runtime::Shared;
use crate::safepoint;
use crate::sync::thread;
use crate::timer::{TimerAction, TimerHandle};
use crate::wait::{Wait, encode};
use crate::worker::Core;

/// What one worker thread publishes about itself; lives on the worker thread's stack.
pub(crate) struct WorkerContext {
    pub(crate) shared: Arc<Shared>,
    pub(crate) index: usize,
    pub(crate) core: Core,
    /// The actor being resumed, or null while the worker runs its own loop.
    pub(crate) current: Cell<*const ActorCell>,
    /// The frame of the coroutine running on this thread now (its yielder, and its stack's
    /// guard), or null while the worker runs its own loop: set by the coroutine when it gains
    /// control, cleared by the worker when a resume returns (`ActorFrame`).
    pub(crate) frame: Cell<*const ActorFrame<'static>>,
    /// While the worker force-unwinds a coroutine (a kill, shutdown), when no frame is current:
    /// the bounds of that coroutine's stack, for the overflow reporter (`guard.rs`).
    pub(crate) unwinding: Cell<Option<CoroutineTrapHandler<Finished>>>,
    /// Set while shutdown unwinds this worker's actors, or while it kills one: parks fail
    /// instead of suspending.
    pub(crate) cancelling: Cell<bool>,
    /// Set while this worker kills an actor (`worker.rs`, "Kill"): a join completer dropped
    /// meanwhile reports `Killed` rather than `Cancelled`.
    pub(crate) killing: Cell<bool>,
    /// Set while this worker ends a started handler actor that could not get a stack for its
    /// next activation (`worker/carrier.rs`): a join completer dropped meanwhile reports this
    /// error (`Spawn`) rather than `Cancelled`.
    pub(crate) no_stack: Cell<Option<std::io::Error>>,
    /// How deep this thread is in running exit hooks (`join.rs`): safe points there do not
    /// yield, so an actor ending cannot be preempted, killed or unwound half-way through
    /// telling its monitors; and blocking operations fail as if cancelled (`park_recording`),
    /// so the actor never suspends with the depth, this worker's, still raised (every other
    /// actor here would lose its yields and preemptions meanwhile, and one resumed elsewhere
    /// would lower another worker's depth).
    pub(crate) exit_hooks: Cell<u32>,
}

/// Runs `f` (an actor's exit hooks) with safe points inert on this worker; see
/// `WorkerContext::exit_hooks`.
pub(crate) fn running_exit_hooks<R>(f: impl FnOnce() -> R) -> R {
    struct Depth;
    impl Drop for Depth {
        fn drop(&mut self) {
            with_worker(|ctx| {
                if let Some(c) = ctx {
                    c.exit_hooks.set(c.exit_hooks.get() - 1);
                }
            });
        }
    }
    // Outside a worker (a plain thread ending nothing of a runtime's) there is no depth.
    let _depth = with_worker(|ctx| {
        ctx.map(|c| {
            c.exit_hooks.set(c.exit_hooks.get() + 1);
            Depth
        })
    });
    f()
}

thread_local! {
    static WORKER: Cell<*const WorkerContext> = const { Cell::new(ptr::null()) };
    /// The runtime whose due timers this thread fires now (its monitor, `firing_timers_of`):
    /// a callback's `call_at` arms on that runtime's heap, as one made in an actor does.
    static FIRING_FOR: Cell<*const Shared> = const { Cell::new(ptr::null()) };
    /// While this thread runs a timer counted for another runtime's deadlock check
    /// (`TimerElsewhere::fire`): that runtime, so that what the timer arms in turn with
    /// `call_at_for` (a delayed message's retry, an interval's next tick) counts for it too.
    static FIRING_COUNTED_FOR: Cell<Option<Weak<Shared>>> = const { Cell::new(None) };
}

/// Runs `f` (firing `shared`'s due timers) with `shared` as the runtime of this thread's
/// `call_at`s: a timer that re-arms itself (an interval's next tick, a delayed message's
/// retry) stays on its runtime's heap, which its shutdown clears, instead of going to the
/// process-wide one and outliving the runtime.
pub(crate) fn firing_timers_of<R>(shared: &Shared, f: impl FnOnce() -> R) -> R {
    struct Restore(*const Shared);
    impl Drop for Restore {
        fn drop(&mut self) {
            FIRING_FOR.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(FIRING_FOR.with(|c| c.replace(shared)));
    f()
}

/// Publishes `ctx` as this thread's worker context, and its safe-point words, until the guard
/// drops.
pub(crate) fn enter(ctx: &WorkerContext) -> impl Drop + '_ {
    struct Exit<G>(G);
    impl<G> Drop for Exit<G> {
        fn drop(&mut self) {
            WORKER.with(|w| w.set(ptr::null()));
        }
    }
    WORKER.with(|w| w.set(ctx));
    Exit(safepoint::enter(&ctx.shared.remotes[ctx.index].safe_point))
}

/// Runs `f` with this thread's worker context, if it is a worker thread.
#[inline(never)]
pub(crate) fn with_worker<R>(f: impl FnOnce(Option<&WorkerContext>) -> R) -> R {
    let ptr = WORKER.with(|w| w.get());
    // SAFETY: the pointer is set by `enter` from a `&WorkerContext` that lives on this thread's
    // stack for the whole worker loop, and reset to null before that frame ends; only this
    // thread reads it. Every access to the context's interior goes through `Cell`/`RefCell`, so
    // handing out a shared reference while the worker loop also holds one is sound.
    f(unsafe { ptr.as_ref() })
}

/// The actor running on this thread, if any, with its worker context.
#[inline(never)]
pub(crate) fn with_current<R>(f: impl FnOnce(Option<(&WorkerContext, &ActorCell)>) -> R) -> R {
    with_worker(|ctx| {
        let pair = ctx.and_then(|ctx| {
            // SAFETY: `current` is set by the worker to an actor it holds an `Arc` to for the
            // whole resume, and cleared after; we are inside that resume.
            unsafe { ctx.current.get().as_ref() }.map(|a| (ctx, a))
        });
        f(pair)
    })
}

/// Returned by [`park`] when the actor is being cancelled by runtime shutdown: the blocking
/// operation must give up (report disconnection) instead of waiting.
///
/// Shutdown unwinds a suspended actor's stack; a destructor that parks during that unwind
/// gets `Cancelled` at once:
///
/// ```
/// use std::sync::{Arc, Mutex, mpsc};
/// use threadlet_runtime::{Cancelled, Runtime, park};
///
/// struct ParkOnDrop(Arc<Mutex<Option<Result<(), Cancelled>>>>);
/// impl Drop for ParkOnDrop {
///     fn drop(&mut self) {
///         *self.0.lock().unwrap() = Some(park());
///     }
/// }
///
/// let seen = Arc::new(Mutex::new(None));
/// let guard = ParkOnDrop(seen.clone());
/// let (started, is_started) = mpsc::channel();
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let h = rt.spawn(move || {
///     let _guard = guard;
///     started.send(()).unwrap();
///     while park().is_ok() {} // nobody wakes it
/// });
/// is_started.recv().unwrap();
/// drop(rt); // unwinds the parked actor, dropping `_guard`
/// assert_eq!(*seen.lock().unwrap(), Some(Err(Cancelled)));
/// assert!(h.join().unwrap_err().is_cancelled());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

/// Suspends `reason` on the coroutine running on this worker (`ctx`'s), which runs `actor`.
///
/// Once the suspension returns, the coroutine has control again, possibly on another thread (a
/// migratable actor), and points that thread's context back at its frame (`ActorFrame`). A
/// forced unwind (a kill, shutdown) leaves the suspension without coming back here: the
/// frame stays unset until the unwind ends, which needs none, for no code suspends while its
/// worker unwinds it (`cancelling` is raised throughout, and every caller of this function
/// checks it first); an overflow during the unwind is reported without its stack's size
/// (`guard.rs`).
#[inline(always)]
fn suspend(ctx: &WorkerContext, actor: &ActorCell, reason: Suspend) {
    let raw = ctx.frame.get();
    // SAFETY: a non-null frame was set by the coroutine we are running on (`enter_frame`, or
    // the end of an earlier suspension, below) and lives at the root of its stack, the stack we
    // run on now; the worker clears the pointer only once a resume has returned, and no other
    // coroutine ran on this thread since ours gained control (coroutines do not nest, and each
    // sets its own frame when it gains control). So it is valid for this call.
    let frame = unsafe { raw.as_ref() }.expect("a coroutine runs here, so its frame is set");
    let input = frame.yielder.suspend(crate::actor::Out::Suspend(reason));
    if actor.is_migratable() {
        // Possibly another worker's thread: its context, looked up afresh.
        with_worker(|ctx| {
            if let Some(ctx) = ctx {
                ctx.frame.set(raw);
            }
        });
    } else {
        // Pinned (a process actor from its start, a handler actor whose activation suspended
        // from that moment): resumed only by this worker, on this thread, so `ctx` is still
        // this thread's context.
        ctx.frame.set(raw);
    }
    debug_assert!(
        input.is_none(),
        "a suspended actor is resumed with no new program"
    );
}

/// A coroutine gains control at its root (a process actor's start, a carrier's activation):
/// from now until it suspends, `frame` is what the code running on it suspends through and
/// what an overflow of its stack is reported with (`ActorFrame`).
pub(crate) fn enter_frame(frame: &ActorFrame<'_>) {
    let frame: *const ActorFrame<'_> = frame;
    with_worker(|ctx| {
        if let Some(ctx) = ctx {
            // The lifetime is erased: the pointer is cleared when the resume returns, before
            // the coroutine (and the frame at its root) could go.
            ctx.frame.set(frame.cast());
        }
    });
}

/// The frame of the coroutine running on this thread, or null, and the bounds of the stack
/// of a coroutine this worker force-unwinds (the overflow reporter, `guard.rs`, from a signal
/// handler: only reads a thread-local and the context).
pub(crate) fn current_frame_raw() -> (
    *const ActorFrame<'static>,
    Option<CoroutineTrapHandler<Finished>>,
) {
    let ctx = WORKER.with(|w| w.get());
    // SAFETY: as in `with_worker`: a non-null pointer is this thread's live worker context.
    unsafe { ctx.as_ref() }.map_or((ptr::null(), None), |c| (c.frame.get(), c.unwinding.get()))
}

/// Blocks the caller until woken: suspends the running actor, or parks a plain thread.
///
/// This is step 3 of the wake protocol (`wake.rs`); the caller must already have published its
/// [`Waiter`] and re-checked its condition. Wakeups may be spurious: callers loop.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use threadlet_runtime::{Runtime, Waiter, park};
///
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let ready = Arc::new(AtomicBool::new(false));
///     // Publish who to wake before the condition is checked.
///     let me = Waiter::current();
///     let r = ready.clone();
///     threadlet_runtime::spawn(move || {
///         r.store(true, Ordering::Release);
///         me.wake();
///     });
///     while !ready.load(Ordering::Acquire) {
///         park().expect("not shutting down"); // may return spuriously: re-check
///     }
/// });
/// ```
pub fn park() -> Result<(), Cancelled> {
    park_recording(encode(Wait::Parked, false))
}

/// [`park`], saying what the actor waits on: the dump and the deadlock report show it
/// (`wait.rs`). The `threadlet` crate's mailboxes, channels and selects park this way.
///
/// ```
/// use threadlet_runtime::{Runtime, Wait, Waiter, park_on};
///
/// // A `Waiter` handed to a plain thread is invisible to the deadlock check, which would
/// // take this actor (waiting on a mailbox it does not have) for deadlocked: quiet it here.
/// let rt = Runtime::builder().workers(1).on_deadlock(|_| {}).build().unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// let h = rt.spawn(move || {
///     tx.send(Waiter::current()).unwrap();
///     park_on(Wait::Message) // returns when woken (or spuriously)
/// });
/// let waiter = rx.recv().unwrap();
/// // Once it has parked, the dump says what it waits on.
/// while rt.dump().actor(h.id()).and_then(|a| a.waiting_on()) != Some(Wait::Message) {
///     std::thread::yield_now();
/// }
/// waiter.wake();
/// assert!(h.join().unwrap().is_ok());
/// ```
#[inline]
pub fn park_on(wait: Wait) -> Result<(), Cancelled> {
    park_recording(encode(wait, false))
}

/// `park` recording `wait`, encoded (`wait::encode`; timed: the caller set a timer that ends
/// it), in the actor's wait word just before it suspends: one relaxed store, and none when a
/// notification is waiting.
fn park_recording(wait: u64) -> Result<(), Cancelled> {
    // Inlined into `with_worker` (out of line, LLVM left it a call of its own: 11 more
    // instructions a park, measured).
    with_caller(
        #[inline(always)]
        |caller| match caller {
            Caller::Actor(ctx, actor) => {
                if !may_suspend(ctx) {
                    // Shutdown or a kill unwinding the actor, an exit hook (which must not
                    // block; see `WorkerContext::exit_hooks`), or a panic's unwind.
                    return Err(Cancelled);
                }
                if actor.is_killed() {
                    // A kill's wake must reach the worker, not be taken here as a notification
                    // (`worker.rs`, "Kill", step 3): yield, and the worker ends the actor.
                    suspend(ctx, actor, Suspend::Yield);
                    return Ok(());
                }
                if !actor.state.take_notification() {
                    actor.wait.set_encoded(wait);
                    crate::trace::parked(actor, wait);
                    suspend(ctx, actor, Suspend::Park);
                } else if actor.is_handler() {
                    // The wake taken here may be one its mailbox sent, to a waiter its batch
                    // published before this message (`handler::activation_may_park`).
                    actor.raise_activation_flag(ACTIVATION_WOKEN);
                }
                Ok(())
            }
            Caller::WorkerLoop => Err(Cancelled),
            Caller::Thread => {
                thread::park();
                Ok(())
            }
        },
    )
}

/// Who is calling, for the operations that block.
enum Caller<'a> {
    /// An actor, on its worker.
    Actor(&'a WorkerContext, &'a ActorCell),
    /// A worker thread outside any actor: user code the runtime runs on the worker's own stack,
    /// such as the destructor of an actor that never started. It must not block (the worker's
    /// other actors would stall, and at shutdown the actor it waits for may be unwound only
    /// after it returns), so blocking operations there fail as if cancelled.
    WorkerLoop,
    /// Any other thread: blocking operations block it.
    Thread,
}

fn with_caller<R>(f: impl FnOnce(Caller<'_>) -> R) -> R {
    with_worker(|ctx| match ctx {
        Some(ctx) => {
            // SAFETY: as in `with_current`: `current` is an actor the worker holds an `Arc` to
            // for the whole resume, and cleared after it.
            match unsafe { ctx.current.get().as_ref() } {
                Some(actor) => f(Caller::Actor(ctx, actor)),
                None => f(Caller::WorkerLoop),
            }
        }
        None => f(Caller::Thread),
    })
}

/// Puts the running actor at the back of its worker's queue, letting others run. On a plain
/// thread it calls `std::thread::yield_now`.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
///
/// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
/// rt.block_on(|| {
///     let done = Arc::new(AtomicBool::new(false));
///     let d = done.clone();
///     let h = threadlet_runtime::spawn(move || d.store(true, Ordering::Release));
///     // Without a yield (or another safe point) this loop would keep the only worker forever.
///     while !done.load(Ordering::Acquire) {
///         threadlet_runtime::yield_now();
///     }
///     h.join().unwrap();
/// });
/// ```
pub fn yield_now() {
    with_current(|cur| match cur {
        Some((ctx, actor)) if may_suspend(ctx) => suspend(ctx, actor, Suspend::Yield),
        Some(_) => {}
        None => std::thread::yield_now(),
    })
}

/// Whether the running actor may suspend now (park, yield, be preempted). Not while its
/// worker unwinds it (shutdown, a kill: `cancelling`), nor while it tells its watchers of its
/// end (`exit_hooks`), nor while a panic of its own unwinds it: a coroutine that suspended
/// there would leave the thread's panic count raised for the other actors of this worker (std
/// keeps it per thread, and `std::thread::panicking` would be true in them: a lock they drop
/// poisoned, a kill's unwind taken for a panic), and a kill or shutdown would then force an
/// unwind out of a destructor already running for the panic, which aborts the process
/// (`docs/safety.md`, "Why parks fail during shutdown"). Parks fail then, as in shutdown's
/// unwind.
#[inline]
fn may_suspend(ctx: &WorkerContext) -> bool {
    !ctx.cancelling.get() && ctx.exit_hooks.get() == 0 && !std::thread::panicking()
}

/// Whether the caller is an actor that may suspend now (`may_suspend`): `false` on a plain
/// thread or a worker's own stack too.
pub(crate) fn actor_may_suspend() -> bool {
    with_current(|cur| cur.is_some_and(|(ctx, _)| may_suspend(ctx)))
}

/// A preemption is due at a safe point (`safepoint.rs`): yield, unless this is not an actor
/// or it may not suspend now (`may_suspend`: then the preemption waits for a later safe point;
/// a time slice's request stays raised, and a spent tick budget stays at 0).
#[cold]
#[inline(never)]
pub(crate) fn preempt_current() {
    with_current(|cur| {
        if let Some((ctx, actor)) = cur
            && may_suspend(ctx)
        {
            ctx.shared.remotes[ctx.index].safe_point.clear_preempt();
            suspend(ctx, actor, Suspend::Preempted);
        }
    })
}

/// How many times the running actor has been preempted so far (0 on a plain thread; the
/// count wraps at 2^32).
///
/// ```
/// use std::time::Duration;
/// use threadlet_runtime::{Runtime, checkpoint, preemptions};
///
/// // Tick-based preemption only (time slices off), so the count is exact.
/// let rt = Runtime::builder()
///     .workers(1)
///     .time_slice(Duration::ZERO)
///     .preempt_ticks(10)
///     .build()
///     .unwrap();
/// let n = rt.block_on(|| {
///     assert_eq!(preemptions(), 0);
///     for _ in 0..30 {
///         checkpoint(); // every 10th one yields
///     }
///     preemptions()
/// });
/// assert_eq!(n, 3);
/// assert_eq!(preemptions(), 0); // not an actor
/// ```
pub fn preemptions() -> u64 {
    with_current(|cur| cur.map_or(0, |(_, a)| u64::from(a.preemptions.load(Ordering::Relaxed))))
}

/// Blocks the caller until woken or until `deadline`, whichever comes first: suspends an actor
/// (a runtime timer wakes it; it holds no worker meanwhile), or parks a plain thread. Like
/// [`park`], it may return early; callers loop and check the time.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::time::{Duration, Instant};
/// use threadlet_runtime::{Runtime, Waiter, park_until};
///
/// /// Waits until `flag` is set (by someone holding our `Waiter`) or `deadline` passes.
/// fn wait_for(flag: &AtomicBool, deadline: Instant) -> bool {
///     while !flag.load(Ordering::Acquire) {
///         if Instant::now() >= deadline {
///             return false;
///         }
///         park_until(deadline).expect("not shutting down");
///     }
///     true
/// }
///
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let set = Arc::new(AtomicBool::new(false));
///     let (s, me) = (set.clone(), Waiter::current());
///     threadlet_runtime::spawn(move || {
///         s.store(true, Ordering::Release);
///         me.wake();
///     });
///     assert!(wait_for(&set, Instant::now() + Duration::from_secs(10)));
///
///     let never = AtomicBool::new(false);
///     let deadline = Instant::now() + Duration::from_millis(10);
///     assert!(!wait_for(&never, deadline));
///     assert!(Instant::now() >= deadline);
/// });
/// ```
pub fn park_until(deadline: Instant) -> Result<(), Cancelled> {
    park_on_until(Wait::Parked, deadline)
}

/// [`park_until`], saying what the actor waits on (as [`park_on`]); the dump shows the wait as
/// one with a timeout.
pub fn park_on_until(wait: Wait, deadline: Instant) -> Result<(), Cancelled> {
    let shared = with_caller(|caller| match caller {
        Caller::Actor(ctx, _) => Ok(Some(ctx.shared.clone())),
        Caller::WorkerLoop => Err(Cancelled),
        Caller::Thread => Ok(None),
    })?;
    match shared {
        Some(shared) => {
            let (timer, earliest) = shared
                .timers
                .add(deadline, TimerAction::Wake(Waiter::current()));
            if earliest {
                shared.monitor.kick();
            }
            // Cancelled on every way out, the unwind of a kill or shutdown included: a timer
            // left behind would keep the actor allocated until its deadline.
            struct CancelOnDrop<'a>(crate::timer::TimerHandle, &'a crate::timer::Timers);
            impl Drop for CancelOnDrop<'_> {
                fn drop(&mut self) {
                    let _ = self.0.cancel(self.1);
                }
            }
            let _cancel = CancelOnDrop(timer, &shared.timers);
            park_recording(encode(wait, true))
        }
        None => {
            thread::park_timeout(deadline.saturating_duration_since(Instant::now()));
            Ok(())
        }
    }
}

/// Suspends the running actor for at least `duration` (a plain thread sleeps). The actor holds
/// no worker and no OS thread meanwhile.
///
/// ```
/// use std::time::{Duration, Instant};
/// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
/// let slept = rt.block_on(|| {
///     let t = Instant::now();
///     threadlet_runtime::sleep(Duration::from_millis(20));
///     t.elapsed()
/// });
/// assert!(slept >= Duration::from_millis(20));
/// ```
pub fn sleep(duration: Duration) {
    match Instant::now().checked_add(duration) {
        Some(deadline) => sleep_until(deadline),
        // Too far to represent (`Duration::MAX`): sleep for good, as std does.
        None => sleep_forever(),
    }
}

/// A sleep with no deadline: an actor parks until shutdown cancels it; a thread sleeps.
fn sleep_forever() {
    match with_caller(|caller| matches!(caller, Caller::Thread)) {
        true => std::thread::sleep(Duration::MAX),
        false => while park().is_ok() {},
    }
}

/// Suspends the running actor until `deadline` (a plain thread sleeps).
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
/// let deadline = Instant::now() + Duration::from_millis(10);
/// let woke = rt.block_on(move || {
///     threadlet_runtime::sleep_until(deadline);
///     Instant::now()
/// });
/// assert!(woke >= deadline);
/// ```
pub fn sleep_until(deadline: Instant) {
    if with_caller(|caller| matches!(caller, Caller::Thread)) {
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        return;
    }
    // An actor parks; a worker outside any actor returns at once (`park_until` fails there).
    while Instant::now() < deadline {
        if park_on_until(Wait::Sleep { until: deadline }, deadline).is_err() {
            return;
        }
    }
}

/// Runs `f` once `deadline` has passed, on the runtime's monitor thread when called from an
/// actor (or from a callback of that runtime's timers), or else on the process-wide timer
/// thread (`threadlet-timer`, started by the first such call). Either way it costs one heap
/// entry and no thread of its own. `f` must not block: it delays every other timer of its heap.
///
/// A panic in `f`, or in its destructor, is reported on stderr and contained: timers keep
/// firing. A runtime's pending calls are dropped without running when it shuts down; those on
/// the process-wide thread that are still pending when the process exits never run.
///
/// ```
/// use std::sync::mpsc;
/// use std::time::{Duration, Instant};
///
/// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
/// let (tx, rx) = mpsc::channel();
/// let deadline = Instant::now() + Duration::from_millis(10);
/// rt.block_on(move || {
///     // Returns at once; the closure runs later on the monitor thread.
///     threadlet_runtime::call_at(deadline, move || tx.send(Instant::now()).unwrap());
/// });
/// let fired = rx.recv().unwrap();
/// assert!(fired >= deadline);
/// ```
pub fn call_at(deadline: Instant, f: impl FnOnce() + Send + 'static) {
    let action = TimerAction::Call(Box::new(f));
    if let Some(action) = with_worker(|ctx| match ctx {
        Some(ctx) => {
            drop(arm_timer(&ctx.shared, deadline, action));
            None
        }
        None => Some(action),
    }) {
        let firing = FIRING_FOR.with(Cell::get);
        // SAFETY: a non-null `firing` was set by `firing_timers_of` from a `&Shared` that the
        // monitor holds (an `Arc`) for the whole call, and is reset before that call returns;
        // we are inside it, on its thread.
        match unsafe { firing.as_ref() } {
            Some(shared) => drop(arm_timer(shared, deadline, action)),
            None => drop(crate::timer::add_process_wide(deadline, action)),
        }
    }
}

/// [`call_at`] on the timers of the runtime that `actor` belongs to, wherever the caller is:
/// for work that concerns that actor, such as a delayed message to it (the `threadlet` crate's
/// `send_after`), which then lives as long as the actor's runtime does, not the caller's.
/// With no actor (a supervised child's mailbox between incarnations, whose next runtime is not
/// known yet), on the process-wide timer thread, which outlives every runtime: never on the
/// caller's runtime, whose shutdown would drop the work with its timers.
/// For the `threadlet` crate (`__private`); not part of the API.
///
/// Armed by an actor of another runtime (every runtime is another than the process-wide
/// thread's), the timer counts for that runtime's deadlock check until it fires or is dropped
/// (`deadlock.rs`): it may lead to a reply that wakes one of its actors.
///
/// So does a timer that such a timer arms in turn while it runs (a delayed message's retry, an
/// interval's next tick): those run on the monitor thread of the runtime whose heap they are on,
/// or on the process-wide timer thread, where no actor's runtime is at hand, so the one
/// counting is passed along
/// (`FIRING_COUNTED_FOR`). The count of the next is taken before the count of the one running
/// goes: in between, the runtime that counts never looks free of timers.
///
/// Returns the timer armed, which the caller may cancel ([`ArmedTimer::cancel`]).
pub fn call_at_for(
    actor: Option<&ActorCell>,
    deadline: Instant,
    f: impl FnOnce() + Send + 'static,
) -> ArmedTimer {
    let target = actor.map(|a| &a.shared);
    let elsewhere_of = |shared: &Arc<Shared>| match target {
        Some(t) if Arc::ptr_eq(shared, t) => None,
        Some(t) => {
            // The timer's message may lead to a reply: `deadlock.rs`, "Linked runtimes".
            crate::deadlock::link(shared, t);
            Some(TimerElsewhere::arm(shared))
        }
        None => Some(TimerElsewhere::arm(shared)),
    };
    let elsewhere = match TimerElsewhere::counting_now() {
        Some(counting) => elsewhere_of(&counting),
        None => with_worker(|ctx| ctx.and_then(|ctx| elsewhere_of(&ctx.shared))),
    };
    // The count, shared by the timer and its `ArmedTimer`: it goes when `f` has run, when the
    // timer is dropped unrun (cleared, compacted), or when the caller cancels it, whichever
    // comes first (a cancelled entry stays in its heap until its deadline).
    let counted = elsewhere.map(|c| Arc::new(parking_lot::Mutex::new(Some(c))));
    let action = match &counted {
        None => TimerAction::Call(Box::new(f)),
        Some(counted) => {
            let count = CountedTimer(counted.clone());
            TimerAction::Call(Box::new(move || {
                let taken = count.0.lock().take();
                match taken {
                    Some(counted) => counted.fire(f),
                    None => f(), // cancelled: `f` finds nothing left to do
                }
            }))
        }
    };
    let (entry, heap) = match target {
        Some(shared) => match arm_timer(shared, deadline, action) {
            (entry, true) => (entry, Some(Arc::downgrade(shared))),
            (entry, false) => (entry, None),
        },
        None => (crate::timer::add_process_wide(deadline, action), None),
    };
    ArmedTimer {
        entry,
        heap,
        counted,
    }
}

/// A timer armed by [`call_at_for`], for its caller to cancel. Dropped, it cancels nothing.
/// For the `threadlet` crate (`__private`); not part of the API.
pub struct ArmedTimer {
    entry: TimerHandle,
    /// The runtime whose heap holds the entry; `None`: the process-wide heap.
    heap: Option<Weak<Shared>>,
    /// The count the timer keeps for another runtime's deadlock check (`TimerElsewhere`).
    counted: Option<Arc<parking_lot::Mutex<Option<TimerElsewhere>>>>,
}

impl ArmedTimer {
    /// Cancels the timer: its entry no longer counts as pending for the deadlock check of the
    /// runtime whose heap holds it (`Timers::is_pending`), nor for another's
    /// (`TimerElsewhere`), though the entry, with its closure, stays in the heap until its
    /// deadline or a compaction. Its closure, if it still runs, must find nothing to do.
    pub fn cancel(&self) {
        match &self.heap {
            Some(heap) => {
                if let Some(shared) = heap.upgrade()
                    && !self.entry.cancel(&shared.timers)
                {
                    // It was pending: the runtime's deadlock check, which may have put its next
                    // look off until this entry's deadline, looks again (a cancel from a plain
                    // thread, or from another runtime, runs nothing there that would).
                    shared.monitor.kick();
                }
            }
            None => {
                self.entry.cancel(crate::timer::process_wide());
            }
        }
        if let Some(counted) = &self.counted {
            let gone = counted.lock().take();
            drop(gone); // after unlocking: it may kick the monitor
        }
    }
}

impl std::fmt::Debug for ArmedTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArmedTimer").finish_non_exhaustive()
    }
}

/// The timer's side of an `ArmedTimer`'s count: dropped with the timer's closure, run or not,
/// it lets the count go if nothing has.
struct CountedTimer(Arc<parking_lot::Mutex<Option<TimerElsewhere>>>);

impl Drop for CountedTimer {
    fn drop(&mut self) {
        let gone = self.0.lock().take();
        drop(gone); // after unlocking: it may kick the monitor
    }
}

/// A timer that an actor armed on another runtime's heap, counted by its own runtime's
/// deadlock check until this is dropped. Weak: it does not keep that runtime alive.
struct TimerElsewhere(Weak<Shared>);

impl TimerElsewhere {
    fn arm(shared: &Arc<Shared>) -> TimerElsewhere {
        shared.deadlock.timer_elsewhere_armed();
        TimerElsewhere(Arc::downgrade(shared))
    }

    /// The runtime that the timer this thread runs now counts for, if it counts for one.
    /// `try_with`: any thread may arm a timer, a thread-local's destructor at thread exit too,
    /// after this thread's slot may have been destroyed (it holds a `Weak`, so it has a
    /// destructor); such a thread runs no counted timer.
    fn counting_now() -> Option<Arc<Shared>> {
        FIRING_COUNTED_FOR
            .try_with(|c| {
                let counting = c.take();
                let shared = counting.as_ref().and_then(Weak::upgrade);
                c.set(counting);
                shared
            })
            .ok()
            .flatten()
    }

    /// Runs the timer's callback with this count's runtime as the one that timers it arms
    /// count for (`call_at_for`); the count goes after it.
    fn fire(self, f: impl FnOnce()) {
        struct Restore(Option<Weak<Shared>>);
        impl Drop for Restore {
            fn drop(&mut self) {
                FIRING_COUNTED_FOR.with(|c| c.set(self.0.take()));
            }
        }
        let _restore = Restore(FIRING_COUNTED_FOR.with(|c| c.replace(Some(self.0.clone()))));
        f();
    }
}

impl Drop for TimerElsewhere {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade()
            && shared.deadlock.timer_elsewhere_done()
        {
            // The last one: the monitor, which may sleep with nothing of its own pending, must
            // look at the deadlock check again (`deadlock.rs`, step 1).
            shared.monitor.kick();
        }
    }
}

/// Puts `action` on `shared`'s timer heap, waking its monitor if it is now the earliest; on
/// the process-wide heap if shutdown has closed that one (`timer.rs`, step 6). Returns the
/// entry, and whether `shared`'s heap holds it (`false`: the process-wide heap).
fn arm_timer(shared: &Shared, deadline: Instant, action: TimerAction) -> (TimerHandle, bool) {
    match shared.timers.add_unless_closed(deadline, action) {
        Ok((entry, earliest)) => {
            if earliest {
                shared.monitor.kick();
            }
            (entry, true)
        }
        Err(action) => (crate::timer::add_process_wide(deadline, action), false),
    }
}

/// The running actor's id, or `None` on a plain thread.
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
/// assert_eq!(threadlet_runtime::current(), None); // not an actor
/// let h = rt.spawn(threadlet_runtime::current);
/// let id = h.id();
/// assert_eq!(h.join().unwrap(), Some(id));
/// ```
pub fn current() -> Option<ActorId> {
    with_current(|cur| cur.map(|(_, a)| a.id))
}

/// The index of the worker running the caller, or `None` on a plain thread: `0..workers` for
/// a worker, and from `workers` on for a spare worker (`Builder::spare_workers`), so do not
/// size per-worker arrays by `Runtime::workers` alone. For diagnostics and tests: a handler
/// actor may run on a different worker for every message.
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(2).build().unwrap();
/// assert_eq!(threadlet_runtime::worker_index(), None); // not a worker
/// let w = rt.block_on(threadlet_runtime::worker_index).unwrap();
/// assert!(w < 2);
/// ```
pub fn worker_index() -> Option<usize> {
    with_worker(|ctx| ctx.map(|c| c.index))
}

/// The running actor's name, if it is an actor and has one.
///
/// ```
/// use threadlet_runtime::{Runtime, SpawnOptions, current_name};
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let named = rt.spawn_with(SpawnOptions::new().name("logger"), current_name).unwrap();
/// assert_eq!(named.join().unwrap().as_deref(), Some("logger"));
/// assert_eq!(rt.block_on(current_name), None); // an unnamed actor
/// assert_eq!(current_name(), None); // not an actor
/// ```
pub fn current_name() -> Option<String> {
    with_current(|cur| cur.and_then(|(_, a)| a.name().map(|n| n.to_string())))
}

/// `actor #42 "name" on worker 1` for the actor running on this thread, if any (for the panic
/// hook, `fault.rs`).
pub(crate) fn running_actor_label() -> Option<String> {
    let worker = worker_index()?;
    with_current(|cur| {
        cur.map(|(_, a)| match a.name() {
            Some(name) => format!("actor {} {name:?} on worker {worker}", a.id),
            None => format!("actor {} on worker {worker}", a.id),
        })
    })
}

/// The runtime of the running actor.
pub(crate) fn current_shared() -> Option<Arc<Shared>> {
    with_worker(|ctx| ctx.map(|c| c.shared.clone()))
}

/// The I/O poller of the calling worker's runtime (started now if need be); `None` on a plain
/// thread, which blocks in `poll(2)` instead (`io.rs`).
pub(crate) fn current_io() -> Option<io::Result<Arc<crate::io::Driver>>> {
    with_worker(|ctx| {
        ctx.map(|c| {
            let (driver, made) = c.shared.io.get()?;
            if made {
                // Workers that parked before the poll existed sleep on their parkers: wake
                // them, so that the idle ones come back to sleep in the poll.
                for r in c.shared.remotes.iter() {
                    r.unpark();
                }
                // And the monitor, which with time slices off looks at the poll only once
                // there is one (`monitor.rs`, `IO_WATCH_PERIOD`): it may be asleep for a
                // second meanwhile, the deadlock check's pace with slices off.
                c.shared.monitor.kick();
            }
            Ok(driver)
        })
    })
}

/// The blocking pool of the calling worker's runtime; `None` on a plain thread.
pub(crate) fn current_blocking_pool() -> Option<Arc<crate::blocking::BlockingPool>> {
    with_worker(|ctx| ctx.map(|c| c.shared.blocking.clone()))
}

/// The runtime of the calling worker, for the free functions that act on "the current runtime"
/// (`threadlet::spawn`, `threadlet::start`); outside one, an error naming `api` and the
/// `Runtime` method of the same name to use instead.
pub(crate) fn current_runtime_for(api: &str) -> io::Result<Arc<Shared>> {
    current_shared().ok_or_else(|| {
        io::Error::other(format!(
            "threadlet::{api} called outside a threadlet runtime; use Runtime::{api}"
        ))
    })
}

/// Whether the current actor is being unwound by shutdown or by a kill.
pub(crate) fn is_cancelling() -> bool {
    with_worker(|ctx| ctx.is_some_and(|c| c.cancelling.get()))
}

/// Whether this worker is killing an actor now.
pub(crate) fn is_killing() -> bool {
    with_worker(|ctx| ctx.is_some_and(|c| c.killing.get()))
}

/// Why this worker is ending the actor it drops now for want of a stack, if it is
/// (`WorkerContext::no_stack`); taken, as one completer reports it.
pub(crate) fn take_no_stack() -> Option<std::io::Error> {
    with_worker(|ctx| ctx.and_then(|c| c.no_stack.take()))
}

/// Who to wake when a condition comes true: an actor, or a plain OS thread.
///
/// The same protocol serves both: here a plain thread waits for an actor.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use threadlet_runtime::{Runtime, Waiter, park};
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let me = Waiter::current();
/// assert!(matches!(me, Waiter::Thread(_))); // not an actor
/// assert!(rt.block_on(|| matches!(Waiter::current(), Waiter::Actor(_))));
///
/// let done = Arc::new(AtomicBool::new(false));
/// let d = done.clone();
/// rt.spawn(move || {
///     d.store(true, Ordering::Release);
///     me.wake(); // unparks the main thread
/// });
/// while !done.load(Ordering::Acquire) {
///     park().unwrap(); // parks this OS thread
/// }
/// ```
#[derive(Clone, Debug)]
pub enum Waiter {
    /// An actor, scheduled by its wake state word.
    Actor(ActorRef),
    /// A plain thread, unparked.
    Thread(thread::Thread),
}

impl Waiter {
    /// The caller: the running actor, or else the current thread.
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, Waiter};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// assert!(matches!(Waiter::current(), Waiter::Thread(_)));
    /// assert!(rt.block_on(|| matches!(Waiter::current(), Waiter::Actor(_))));
    /// ```
    pub fn current() -> Waiter {
        with_worker(|ctx| {
            let ptr = ctx.map_or(ptr::null(), |c| c.current.get());
            if ptr.is_null() {
                Waiter::Thread(thread::current())
            } else {
                // SAFETY: `ptr` came from `Arc::as_ptr` of the `Arc` the worker holds for the
                // whole resume (see `with_current`), so the allocation is live and bumping its
                // strong count before `from_raw` yields a new owned `Arc`.
                unsafe {
                    Arc::increment_strong_count(ptr);
                    Waiter::Actor(Arc::from_raw(ptr))
                }
            }
        })
    }

    /// Wakes the waiter. Any number of wakes from any threads is fine.
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, Waiter, park};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let me = Waiter::current();
    ///     me.wake();
    ///     me.wake(); // wakes do not pile up: one is kept for the next park
    ///     park().unwrap(); // returns at once
    /// });
    /// ```
    #[inline]
    pub fn wake(&self) {
        match self {
            Waiter::Actor(a) => a.wake(),
            Waiter::Thread(t) => t.unpark(),
        }
    }

    /// Wakes the waiter and gives it up: what to call on a waiter taken out of a queue or a
    /// slot, where `wake` and then dropping it would cost an actor's reference count a clone
    /// and a release (its reference becomes the actor's queue entry instead).
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, Waiter, park};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     Waiter::current().wake_by_value();
    ///     park().unwrap(); // returns at once: the wake was kept
    /// });
    /// ```
    #[inline]
    pub fn wake_by_value(self) {
        match self {
            Waiter::Actor(a) => a.wake_by_value(),
            Waiter::Thread(t) => t.unpark(),
        }
    }

    /// The actor's id, for an actor; `None` for a plain thread.
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, Waiter};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| Waiter::current().actor_id());
    /// let id = h.id();
    /// assert_eq!(h.join().unwrap(), Some(id));
    /// assert_eq!(Waiter::current().actor_id(), None);
    /// ```
    pub fn actor_id(&self) -> Option<ActorId> {
        match self {
            Waiter::Actor(a) => Some(a.id),
            Waiter::Thread(_) => None,
        }
    }

    /// Whether both name the same actor or thread.
    ///
    /// ```
    /// use threadlet_runtime::{Runtime, Waiter};
    ///
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let me = Waiter::current();
    ///     assert!(me.same_as(&Waiter::current()));
    ///     let other = threadlet_runtime::spawn(Waiter::current).join().unwrap();
    ///     assert!(!me.same_as(&other));
    /// });
    /// assert!(Waiter::current().same_as(&Waiter::current())); // the same thread
    /// ```
    pub fn same_as(&self, other: &Waiter) -> bool {
        match (self, other) {
            (Waiter::Actor(a), Waiter::Actor(b)) => Arc::ptr_eq(a, b),
            (Waiter::Thread(a), Waiter::Thread(b)) => a.id() == b.id(),
            _ => false,
        }
    }
}

/// The actor running on this thread, or null; for the fault handler, which must not call
/// anything that could allocate or lock.
pub(crate) fn current_actor_raw() -> *const ActorCell {
    let ctx = WORKER.with(|w| w.get());
    // SAFETY: as in `with_worker`: a non-null pointer is this thread's live worker context.
    unsafe { ctx.as_ref() }.map_or(ptr::null(), |c| c.current.get())
}
