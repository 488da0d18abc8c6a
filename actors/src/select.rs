//! Waiting on several sources at once: [`select!`](crate::select!) and [`Select`].
//!
//! A select waits until one of its operations can complete, completes exactly that one, and
//! runs its branch. Sources: mailboxes ([`Mailbox`]), channel receivers
//! ([`channel::Receiver`], [`oneshot::Receiver`]), join handles ([`JoinHandle`]) and channel
//! senders ([`channel::Sender`]). It suspends an actor (process actors, and handler actors
//! inside `handle`) and blocks a plain thread.
//!
//! Rules, as crossbeam-channel's and Go's:
//!
//! * When several branches are ready, one is chosen at random: every look starts at a random
//!   branch, so a branch that is always ready cannot starve the others.
//! * A receive branch takes its message only when it fires; the other branches take nothing.
//! * A send branch's value is evaluated once, when the select starts (as in Go). If another
//!   branch fires, the value is dropped with the select, never sent.
//! * A closed or disconnected source is ready: its branch fires with what a plain receive
//!   would return there (`None`, `Err(RecvError)`, `Err(SendError(v))`).
//! * `default => ...` runs when nothing is ready now; `default(timeout) => ...` when nothing
//!   became ready within `timeout`.
//!
//! # Protocol (why no wakeup is lost)
//!
//! Each source keeps waiters to wake when its operation may have become possible (a channel's
//! watcher lists, a mailbox's waiter, a join packet's waiter; see those modules). A select
//! runs these steps, following the wake protocol of the runtime (`wake.rs`):
//!
//! 1. *look*: try every operation once without waiting, starting at a random branch; the first
//!    that completes fires, and the select returns. A try takes no safe point (see 4).
//! 2. With `default` and nothing ready, return. Otherwise *watch*: record the caller's
//!    [`Waiter`] with every source, and arm a guard that withdraws those records when dropped.
//! 3. Look again, as in 1. A source that became ready between 1 and 2 is seen here; one that
//!    becomes ready after 2 finds the waiter recorded and wakes it after changing its state.
//! 4. Park (until the deadline, with `default(timeout)`). No safe point lies between 2 and 4:
//!    a yield there would drop a wake that arrived meanwhile, so the tries of 1 and 3 skip the
//!    safe point that `try_recv` and `try_send` have; a wake that arrives between 2 and 4
//!    leaves a notification, and `park` returns at once.
//! 5. Woken (or timed out): drop the guard, withdrawing every record, and go to 1. A wake may
//!    be spurious (another receiver took the value first); the look simply finds nothing and
//!    the select watches again. With the deadline passed and nothing ready, run `default`.
//!
//! A receive that fails in a look leaves its source untouched, so no message is taken by a
//! branch that does not fire. If shutdown unwinds the actor while it is parked in 4, the guard
//! withdraws the records during the unwind. If `park` reports that the actor is being
//! cancelled (a destructor selecting while shutdown unwinds it), the select looks once more
//! and otherwise fires its first branch with that source's "closed" result (or runs
//! `default`), as a plain receive returns an error there.
//!
//! # Limits
//!
//! A select watches and never parks an operation in a channel's queues. So a send branch on a
//! rendezvous channel ([`bounded(0)`](crate::channel::bounded)) completes only with a receiver
//! that waits in a plain `recv`, and a receive branch on one only with a sender that waits in
//! a plain `send`: a select sending on a rendezvous channel and a select receiving on it never
//! meet. Use a channel with room for one value (`bounded(1)`) between two selects.
//!
//! [`Mailbox`]: crate::Mailbox
//! [`channel::Receiver`]: crate::channel::Receiver
//! [`channel::Sender`]: crate::channel::Sender
//! [`oneshot::Receiver`]: crate::channel::oneshot::Receiver

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

use threadlet_runtime::__private::{join_cancelled, join_take_now, join_unwatch, join_watch};
use threadlet_runtime::{JoinError, JoinHandle, Waiter, checkpoint, park_on, park_on_until};

use crate::Mailbox;
use crate::channel::{self, RecvError, SendError, TryRecvError, TrySendError, oneshot};

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A source that a select can receive from: what `recv(source) -> result` accepts.
///
/// `Output` is what the branch's pattern binds: what the source's own blocking receive returns.
///
/// | source | `Output` |
/// |---|---|
/// | [`Mailbox<M>`](crate::Mailbox) | `Option<M>` (`None`: closed, or every address gone) |
/// | [`channel::Receiver<T>`](crate::channel::Receiver) | `Result<T, RecvError>` |
/// | [`oneshot::Receiver<T>`](crate::channel::oneshot::Receiver) | `Result<T, RecvError>` |
/// | [`JoinHandle<R>`] | `Result<R, JoinError>` |
/// | [`Monitor`](crate::Monitor) | [`Down`](crate::Down) |
///
/// A join handle whose branch fired is spent: its result was taken, and joining it (or
/// selecting on it) again panics. One select at a time may wait on a join handle: a second
/// one (another actor or thread, through a shared `&JoinHandle`) panics, since only one could
/// take the result.
pub trait Recv: sealed::Sealed {
    /// What a receive from this source gives.
    type Output;
    /// Takes what is ready now, without a safe point; `None` if the source would wait.
    #[doc(hidden)]
    fn recv_now(&self) -> Option<Self::Output>;
    /// Records `w` to be woken when a receive may have become possible.
    #[doc(hidden)]
    fn watch(&self, w: &Waiter);
    /// Withdraws the record of `watch`, if a wake has not taken it already.
    #[doc(hidden)]
    fn unwatch(&self, w: &Waiter);
    /// What the receive gives up with when the select is cancelled.
    #[doc(hidden)]
    fn closed(&self) -> Self::Output;
}

impl<T> sealed::Sealed for channel::Receiver<T> {}
impl<T> Recv for channel::Receiver<T> {
    type Output = Result<T, RecvError>;
    fn recv_now(&self) -> Option<Self::Output> {
        match channel::Receiver::recv_now(self) {
            Ok(v) => Some(Ok(v)),
            Err(TryRecvError::Disconnected) => Some(Err(RecvError)),
            Err(TryRecvError::Empty) => None,
        }
    }
    fn watch(&self, w: &Waiter) {
        channel::Receiver::watch(self, w);
    }
    fn unwatch(&self, w: &Waiter) {
        channel::Receiver::unwatch(self, w);
    }
    fn closed(&self) -> Self::Output {
        Err(RecvError)
    }
}

impl<T> sealed::Sealed for oneshot::Receiver<T> {}
impl<T> Recv for oneshot::Receiver<T> {
    type Output = Result<T, RecvError>;
    fn recv_now(&self) -> Option<Self::Output> {
        Recv::recv_now(&self.0)
    }
    fn watch(&self, w: &Waiter) {
        Recv::watch(&self.0, w);
    }
    fn unwatch(&self, w: &Waiter) {
        Recv::unwatch(&self.0, w);
    }
    fn closed(&self) -> Self::Output {
        Err(RecvError)
    }
}

impl<M> sealed::Sealed for Mailbox<M> {}
impl<M> Recv for Mailbox<M> {
    type Output = Option<M>;
    fn recv_now(&self) -> Option<Self::Output> {
        match Mailbox::recv_now(self) {
            Ok(m) => Some(Some(m)),
            Err(TryRecvError::Disconnected) => Some(None),
            Err(TryRecvError::Empty) => None,
        }
    }
    fn watch(&self, w: &Waiter) {
        Mailbox::watch(self, w);
    }
    fn unwatch(&self, w: &Waiter) {
        Mailbox::unwatch(self, w);
    }
    fn closed(&self) -> Self::Output {
        None
    }
}

impl<R> sealed::Sealed for JoinHandle<R> {}
impl<R> Recv for JoinHandle<R> {
    type Output = Result<R, JoinError>;
    fn recv_now(&self) -> Option<Self::Output> {
        join_take_now(self)
    }
    fn watch(&self, w: &Waiter) {
        join_watch(self, w);
    }
    fn unwatch(&self, w: &Waiter) {
        join_unwatch(self, w);
    }
    fn closed(&self) -> Self::Output {
        Err(join_cancelled(self))
    }
}

impl<S: Recv + ?Sized> sealed::Sealed for &S {}
impl<S: Recv + ?Sized> Recv for &S {
    type Output = S::Output;
    fn recv_now(&self) -> Option<Self::Output> {
        (**self).recv_now()
    }
    fn watch(&self, w: &Waiter) {
        (**self).watch(w);
    }
    fn unwatch(&self, w: &Waiter) {
        (**self).unwatch(w);
    }
    fn closed(&self) -> Self::Output {
        (**self).closed()
    }
}

/// One operation of a select, type-erased for the engine. Interior mutability (`Cell`) lets
/// the engine look at branches while their records are held by the watch guard.
trait Branch {
    /// Tries the operation without waiting; on success keeps its result and returns `true`.
    fn look(&self) -> bool;
    fn watch(&self, w: &Waiter);
    fn unwatch(&self, w: &Waiter);
    /// Keeps the "closed" result for a cancelled select; `false` if it has none to give (a
    /// send branch whose value was already sent).
    fn give_up(&self) -> bool;
    /// Whether the branch can never fire again (a send branch whose value was sent).
    fn spent(&self) -> bool {
        false
    }
}

/// How the engine reaches a branch, so that it can take the macro's branches and `Select`'s
/// arms as they are stored, without collecting them into a new list per select.
trait AsBranch {
    fn branch(&self) -> &dyn Branch;
}

/// A receive branch: the source and, once fired, its result.
struct RecvOp<'a, S: Recv + ?Sized> {
    src: &'a S,
    out: Cell<Option<S::Output>>,
}

impl<'a, S: Recv + ?Sized> RecvOp<'a, S> {
    fn new(src: &'a S) -> Self {
        RecvOp {
            src,
            out: Cell::new(None),
        }
    }

    fn take(&self) -> S::Output {
        self.out
            .take()
            .expect("a fired select branch holds its result")
    }
}

impl<S: Recv + ?Sized> Branch for RecvOp<'_, S> {
    fn look(&self) -> bool {
        let got = self.src.recv_now();
        let fired = got.is_some();
        self.out.set(got);
        fired
    }
    fn watch(&self, w: &Waiter) {
        self.src.watch(w);
    }
    fn unwatch(&self, w: &Waiter) {
        self.src.unwatch(w);
    }
    fn give_up(&self) -> bool {
        self.out.set(Some(self.src.closed()));
        true
    }
}

/// A send branch: the channel, the value until it is sent, and once fired, the result.
struct SendOp<'a, T> {
    tx: &'a channel::Sender<T>,
    value: Cell<Option<T>>,
    out: Cell<Option<Result<(), SendError<T>>>>,
}

impl<'a, T> SendOp<'a, T> {
    fn new(tx: &'a channel::Sender<T>, value: T) -> Self {
        SendOp {
            tx,
            value: Cell::new(Some(value)),
            out: Cell::new(None),
        }
    }

    fn take(&self) -> Result<(), SendError<T>> {
        self.out
            .take()
            .expect("a fired select branch holds its result")
    }
}

impl<T> Branch for SendOp<'_, T> {
    fn look(&self) -> bool {
        // Sent already (a `Select` reused after this branch fired): never ready again.
        let Some(v) = self.value.take() else {
            return false;
        };
        match self.tx.send_now(v) {
            Ok(()) => self.out.set(Some(Ok(()))),
            Err(TrySendError::Disconnected(v)) => self.out.set(Some(Err(SendError(v)))),
            Err(TrySendError::Full(v)) => {
                self.value.set(Some(v));
                return false;
            }
        }
        true
    }
    fn watch(&self, w: &Waiter) {
        self.tx.watch(w);
    }
    fn unwatch(&self, w: &Waiter) {
        self.tx.unwatch(w);
    }
    fn give_up(&self) -> bool {
        match self.value.take() {
            Some(v) => {
                self.out.set(Some(Err(SendError(v))));
                true
            }
            None => false,
        }
    }
    fn spent(&self) -> bool {
        // Taken out only for the moment of a look, which runs on the select's own thread.
        let v = self.value.take();
        let spent = v.is_none();
        self.value.set(v);
        spent
    }
}

/// How long a select may wait (used by the macro's expansion; not part of the API).
#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum Wait {
    /// No `default`: until a branch fires.
    Block,
    /// `default`: not at all.
    Try,
    /// `default(timeout)`: until the deadline.
    Until(Instant),
}

impl Wait {
    /// A timeout too long to represent as an `Instant` means no deadline, as for channels.
    fn timeout(t: Duration) -> Wait {
        Instant::now()
            .checked_add(t)
            .map_or(Wait::Block, Wait::Until)
    }
}

/// A random index below `n`, for the first branch of a look. Quality hardly matters (it only
/// has to spread the choice), so a per-thread xorshift seeded once from std's random hasher
/// keys does.
fn random_below(n: usize) -> usize {
    // Loom replays executions and needs every choice but its own to repeat: start at 0.
    if cfg!(loom) {
        return 0;
    }
    thread_local! {
        static STATE: Cell<u64> = Cell::new(RandomState::new().build_hasher().finish() | 1);
    }
    let x = STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x
    });
    (x % n as u64) as usize
}

/// Step 1 (and 3) of the protocol: the first branch that completes, from a random start.
fn look<B: AsBranch>(branches: &[B]) -> Option<usize> {
    let n = branches.len();
    if n == 0 {
        return None;
    }
    let start = random_below(n);
    (0..n)
        .map(|k| (start + k) % n)
        .find(|&i| branches[i].branch().look())
}

/// The records of step 2; dropping withdraws them (step 5, or an unwind out of `park`).
struct Watching<'a, B: AsBranch> {
    branches: &'a [B],
    me: &'a Waiter,
}

impl<B: AsBranch> Drop for Watching<'_, B> {
    fn drop(&mut self) {
        for b in self.branches {
            b.branch().unwatch(self.me);
        }
    }
}

/// The engine: runs the protocol and returns the fired branch, or `None` for `default`.
fn run<B: AsBranch>(branches: &[B], wait: Wait) -> Option<usize> {
    checkpoint();
    if let Some(i) = look(branches) {
        return Some(i);
    }
    if let Wait::Try = wait {
        return None;
    }
    let me = Waiter::current();
    loop {
        // Made first, so that a watch that panics (a second select on one join handle) leaves
        // no record behind in the branches watched before it: withdrawing one never made is
        // a no-op.
        let watching = Watching { branches, me: &me };
        for b in branches {
            b.branch().watch(&me);
        }
        if let Some(i) = look(branches) {
            return Some(i);
        }
        let on = threadlet_runtime::Wait::Select {
            branches: u32::try_from(branches.len()).unwrap_or(u32::MAX),
        };
        let parked = match wait {
            Wait::Until(d) => park_on_until(on, d),
            _ => park_on(on),
        };
        drop(watching);
        if let Some(i) = look(branches) {
            return Some(i);
        }
        if parked.is_err() {
            // Cancelled: never wait again. Give up as a plain operation would.
            return match wait {
                Wait::Until(_) => None,
                _ => branches.iter().position(|b| b.branch().give_up()),
            };
        }
        if let Wait::Until(d) = wait
            && Instant::now() >= d
        {
            return None;
        }
    }
}

/// What [`select!`](crate::select!) expands to; not part of the API.
#[doc(hidden)]
pub mod __private {
    use super::*;

    pub use super::Wait;

    pub struct RecvBranch<'a, S: Recv + ?Sized>(RecvOp<'a, S>);
    pub struct SendBranch<'a, T>(SendOp<'a, T>);
    /// A branch as the engine sees it.
    pub struct Erased<'a>(&'a dyn Branch);

    pub fn recv_branch<S: Recv + ?Sized>(src: &S) -> RecvBranch<'_, S> {
        RecvBranch(RecvOp::new(src))
    }

    pub fn send_branch<T>(tx: &channel::Sender<T>, value: T) -> SendBranch<'_, T> {
        SendBranch(SendOp::new(tx, value))
    }

    impl<'a, S: Recv + ?Sized> RecvBranch<'a, S> {
        pub fn erase(&self) -> Erased<'_> {
            Erased(&self.0)
        }
        pub fn take(&self) -> S::Output {
            self.0.take()
        }
    }

    impl<'a, T> SendBranch<'a, T> {
        pub fn erase(&self) -> Erased<'_> {
            Erased(&self.0)
        }
        pub fn take(&self) -> Result<(), SendError<T>> {
            self.0.take()
        }
    }

    pub fn block() -> Wait {
        Wait::Block
    }

    pub fn try_now() -> Wait {
        Wait::Try
    }

    pub fn timeout(t: Duration) -> Wait {
        Wait::timeout(t)
    }

    impl AsBranch for Erased<'_> {
        fn branch(&self) -> &dyn Branch {
            self.0
        }
    }

    pub fn run(branches: &[Erased<'_>], wait: Wait) -> Option<usize> {
        super::run(branches, wait)
    }
}

/// Waits on several mailboxes, channels and join handles at once, and runs the branch of the
/// one operation that completes. The syntax is crossbeam-channel's:
///
/// ```text
/// threadlet::select! {
///     recv(source) -> result => body,    // a Mailbox, channel or oneshot Receiver, JoinHandle
///     send(sender, value) -> result => body,
///     default => body,                   // optional, last: nothing is ready now
///     default(timeout) => body,          // or: nothing became ready within `timeout`
/// }
/// ```
///
/// `result` is a pattern bound to what the operation gives (see [`Recv`] for each source; a
/// send gives `Result<(), SendError<T>>`). When several branches are ready, one is picked at
/// random; only the branch that fires takes anything. Bodies run in the caller's scope, so
/// `break`, `continue`, `return` and `?` work in them. See the [module docs](mod@crate::select)
/// for the rules and the one limit (two selects on a rendezvous channel).
///
/// ```
/// use std::time::Duration;
/// use threadlet::{Mailbox, RuntimeExt, channel};
///
/// enum Cmd {
///     Add(u64),
/// }
///
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// let (stop_tx, stop_rx) = channel::bounded::<()>(1);
/// let (addr, total) = rt.spawn_actor(move |mb: Mailbox<Cmd>| {
///     let mut total = 0;
///     loop {
///         threadlet::select! {
///             recv(mb) -> cmd => match cmd {
///                 Some(Cmd::Add(n)) => total += n,
///                 None => break,
///             },
///             recv(stop_rx) -> _ => break,
///             default(Duration::from_secs(5)) => panic!("idle for 5 s"),
///         }
///     }
///     total
/// });
/// addr.send(Cmd::Add(40)).unwrap();
/// addr.send(Cmd::Add(2)).unwrap();
/// while !addr.is_empty() {
///     std::thread::yield_now();
/// }
/// stop_tx.send(()).unwrap();
/// assert_eq!(total.join().unwrap(), 42);
/// ```
#[macro_export]
macro_rules! select {
    ($($tokens:tt)+) => {
        $crate::__select!(@parse [] $($tokens)+)
    };
}

/// The parts of [`select!`]; not part of the API.
///
/// `@parse` turns the branches into `(op (args) (pattern) {body})` groups; `@bind` binds one
/// branch per recursion (each expansion's `__branch` is a distinct identifier, by hygiene);
/// `@dispatch` runs the body of the branch that fired.
#[doc(hidden)]
#[macro_export]
macro_rules! __select {
    // ---- parse ----
    (@parse [$($done:tt)*] recv($src:expr) -> $res:pat => $body:block , $($rest:tt)*) => {
        $crate::__select!(@parse [$($done)* (recv ($src) ($res) $body)] $($rest)*)
    };
    (@parse [$($done:tt)*] recv($src:expr) -> $res:pat => $body:block $($rest:tt)*) => {
        $crate::__select!(@parse [$($done)* (recv ($src) ($res) $body)] $($rest)*)
    };
    (@parse [$($done:tt)*] recv($src:expr) -> $res:pat => $body:expr , $($rest:tt)*) => {
        $crate::__select!(@parse [$($done)* (recv ($src) ($res) { $body })] $($rest)*)
    };
    (@parse [$($done:tt)*] recv($src:expr) -> $res:pat => $body:expr) => {
        $crate::__select!(@parse [$($done)* (recv ($src) ($res) { $body })])
    };
    (@parse [$($done:tt)*] send($tx:expr, $val:expr) -> $res:pat => $body:block , $($rest:tt)*) => {
        $crate::__select!(@parse [$($done)* (send ($tx, $val) ($res) $body)] $($rest)*)
    };
    (@parse [$($done:tt)*] send($tx:expr, $val:expr) -> $res:pat => $body:block $($rest:tt)*) => {
        $crate::__select!(@parse [$($done)* (send ($tx, $val) ($res) $body)] $($rest)*)
    };
    (@parse [$($done:tt)*] send($tx:expr, $val:expr) -> $res:pat => $body:expr , $($rest:tt)*) => {
        $crate::__select!(@parse [$($done)* (send ($tx, $val) ($res) { $body })] $($rest)*)
    };
    (@parse [$($done:tt)*] send($tx:expr, $val:expr) -> $res:pat => $body:expr) => {
        $crate::__select!(@parse [$($done)* (send ($tx, $val) ($res) { $body })])
    };
    (@parse [$($done:tt)*] default => $body:block $(,)?) => {
        $crate::__select!(@bind [$($done)*] [] (try $body))
    };
    (@parse [$($done:tt)*] default => $body:expr $(,)?) => {
        $crate::__select!(@bind [$($done)*] [] (try { $body }))
    };
    (@parse [$($done:tt)*] default($t:expr) => $body:block $(,)?) => {
        $crate::__select!(@bind [$($done)*] [] (until ($t) $body))
    };
    (@parse [$($done:tt)*] default($t:expr) => $body:expr $(,)?) => {
        $crate::__select!(@bind [$($done)*] [] (until ($t) { $body }))
    };
    (@parse [$($done:tt)+]) => {
        $crate::__select!(@bind [$($done)+] [] (block))
    };
    (@parse [$($done:tt)*] $($rest:tt)+) => {
        ::core::compile_error!(
            "expected `recv(source) -> pattern => body`, `send(sender, value) -> pattern => body`, \
             or a last `default => body` / `default(timeout) => body`"
        )
    };

    // ---- bind ----
    (@bind [(recv ($src:expr) ($res:pat) $body:block) $($rest:tt)*] [$($bound:tt)*] $mode:tt) => {{
        let __branch = $crate::select::__private::recv_branch(&$src);
        $crate::__select!(@bind [$($rest)*] [$($bound)* (__branch ($res) $body)] $mode)
    }};
    (@bind [(send ($tx:expr, $val:expr) ($res:pat) $body:block) $($rest:tt)*] [$($bound:tt)*] $mode:tt) => {{
        let __branch = $crate::select::__private::send_branch(&$tx, $val);
        $crate::__select!(@bind [$($rest)*] [$($bound)* (__branch ($res) $body)] $mode)
    }};
    (@bind [] [$(($b:ident ($res:pat) $body:block))*] $mode:tt) => {{
        let __fired = $crate::select::__private::run(
            &[$($b.erase()),*],
            $crate::__select!(@wait $mode),
        );
        $crate::__select!(@dispatch __fired (0usize) [$(($b ($res) $body))*] $mode)
    }};

    (@wait (block)) => { $crate::select::__private::block() };
    (@wait (try $body:block)) => { $crate::select::__private::try_now() };
    (@wait (until ($t:expr) $body:block)) => { $crate::select::__private::timeout($t) };

    // ---- dispatch ----
    (@dispatch $fired:ident ($i:expr) [($b:ident ($res:pat) $body:block) $($rest:tt)*] $mode:tt) => {
        if $fired == ::core::option::Option::Some($i) {
            let $res = $b.take();
            $body
        } else {
            $crate::__select!(@dispatch $fired ($i + 1) [$($rest)*] $mode)
        }
    };
    (@dispatch $fired:ident ($i:expr) [] (block)) => {
        ::core::unreachable!("a select without `default` returns only when a branch fires")
    };
    (@dispatch $fired:ident ($i:expr) [] (try $body:block)) => { $body };
    (@dispatch $fired:ident ($i:expr) [] (until ($t:expr) $body:block)) => { $body };
}

/// A select over a number of sources known only at run time (the [`select!`] macro needs
/// them written out). Every branch maps its result to one output type `O`; the select is
/// reusable, so a loop can wait on the same sources again and again.
///
/// ```
/// use threadlet::channel;
/// use threadlet::select::Select;
///
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// let (txs, rxs): (Vec<_>, Vec<_>) = (0..4).map(|_| channel::unbounded::<u32>()).unzip();
/// for (i, tx) in txs.iter().enumerate() {
///     let tx = tx.clone();
///     rt.spawn(move || tx.send(i as u32 * 10).unwrap());
/// }
/// drop(txs);
/// let mut sel = Select::new();
/// for (i, rx) in rxs.iter().enumerate() {
///     sel.recv(rx, move |r| (i, r));
/// }
/// let mut got = Vec::new();
/// while got.len() < 4 {
///     if let (i, Ok(v)) = sel.wait() {
///         got.push((i, v));
///     }
/// }
/// got.sort();
/// assert_eq!(got, [(0, 0), (1, 10), (2, 20), (3, 30)]);
/// ```
pub struct Select<'a, O> {
    arms: Vec<Box<dyn Arm<O> + 'a>>,
}

/// A branch with its mapping to the select's output.
trait Arm<O> {
    fn branch(&self) -> &dyn Branch;
    /// The fired branch's result, mapped.
    fn output(&mut self) -> O;
}

impl<O> AsBranch for Box<dyn Arm<O> + '_> {
    fn branch(&self) -> &dyn Branch {
        (**self).branch()
    }
}

struct RecvArm<'a, S: Recv + ?Sized, F> {
    op: RecvOp<'a, S>,
    f: F,
}

impl<S: Recv + ?Sized, F: FnMut(S::Output) -> O, O> Arm<O> for RecvArm<'_, S, F> {
    fn branch(&self) -> &dyn Branch {
        &self.op
    }
    fn output(&mut self) -> O {
        (self.f)(self.op.take())
    }
}

struct SendArm<'a, T, F> {
    op: SendOp<'a, T>,
    f: F,
}

impl<T, F: FnMut(Result<(), SendError<T>>) -> O, O> Arm<O> for SendArm<'_, T, F> {
    fn branch(&self) -> &dyn Branch {
        &self.op
    }
    fn output(&mut self) -> O {
        (self.f)(self.op.take())
    }
}

impl<'a, O> Select<'a, O> {
    /// A select with no branches yet.
    pub fn new() -> Self {
        Select { arms: Vec::new() }
    }

    /// Adds a receive from `src` (see [`Recv`] for the sources and what they give); when it
    /// fires, the select's output is `f(result)`.
    pub fn recv<S, F>(&mut self, src: &'a S, f: F) -> &mut Self
    where
        S: Recv + ?Sized,
        S::Output: 'a,
        F: FnMut(S::Output) -> O + 'a,
    {
        self.arms.push(Box::new(RecvArm {
            op: RecvOp::new(src),
            f,
        }));
        self
    }

    /// Adds a send of `value` on `tx`; when it fires, the output is `f(result)`. The branch
    /// sends once: after it has fired it is never ready again, and if the select is dropped
    /// before, the value is dropped with it.
    ///
    /// ```
    /// use threadlet::channel;
    /// use threadlet::select::Select;
    ///
    /// let (tx, rx) = channel::bounded(1);
    /// let mut sel = Select::new();
    /// sel.send(&tx, "first", |r| r.is_ok());
    /// assert_eq!(sel.try_wait(), Some(true));
    /// assert_eq!(sel.try_wait(), None); // sent already
    /// assert_eq!(rx.recv(), Ok("first"));
    /// ```
    pub fn send<T, F>(&mut self, tx: &'a channel::Sender<T>, value: T, f: F) -> &mut Self
    where
        T: 'a,
        F: FnMut(Result<(), SendError<T>>) -> O + 'a,
    {
        self.arms.push(Box::new(SendArm {
            op: SendOp::new(tx, value),
            f,
        }));
        self
    }

    /// The number of branches.
    pub fn len(&self) -> usize {
        self.arms.len()
    }

    /// Whether there are no branches.
    pub fn is_empty(&self) -> bool {
        self.arms.is_empty()
    }

    /// Waits until a branch fires and returns its output.
    ///
    /// # Panics
    ///
    /// If the select has no branch that could ever fire (none at all, or only sends that have
    /// sent already): it would wait forever.
    pub fn wait(&mut self) -> O {
        self.run(Wait::Block)
            .expect("Select::wait on a select with no branch that can fire: it would wait forever")
    }

    /// Fires a branch that is ready now, or returns `None` without waiting.
    ///
    /// ```
    /// use threadlet::channel;
    /// use threadlet::select::Select;
    ///
    /// let (tx, rx) = channel::unbounded::<u8>();
    /// let mut sel = Select::new();
    /// sel.recv(&rx, |r| r.ok());
    /// assert_eq!(sel.try_wait(), None);
    /// tx.send(7).unwrap();
    /// assert_eq!(sel.try_wait(), Some(Some(7)));
    /// ```
    pub fn try_wait(&mut self) -> Option<O> {
        self.run(Wait::Try)
    }

    /// Waits at most `timeout` for a branch to fire.
    ///
    /// ```
    /// use std::time::Duration;
    /// use threadlet::channel;
    /// use threadlet::select::Select;
    ///
    /// let (_tx, rx) = channel::unbounded::<u8>();
    /// let mut sel = Select::new();
    /// sel.recv(&rx, |r| r.ok());
    /// assert_eq!(sel.wait_timeout(Duration::from_millis(5)), None);
    /// ```
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<O> {
        self.run(Wait::timeout(timeout))
    }

    /// Waits until `deadline` for a branch to fire.
    pub fn wait_deadline(&mut self, deadline: Instant) -> Option<O> {
        self.run(Wait::Until(deadline))
    }

    fn run(&mut self, wait: Wait) -> Option<O> {
        let fired = {
            if let Wait::Block = wait
                && self.arms.iter().all(|a| a.branch().spent())
            {
                return None;
            }
            run(&self.arms, wait)
        }?;
        Some(self.arms[fired].output())
    }
}

impl<O> Default for Select<'_, O> {
    fn default() -> Self {
        Self::new()
    }
}

impl<O> fmt::Debug for Select<'_, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Select")
            .field("branches", &self.arms.len())
            .finish()
    }
}
