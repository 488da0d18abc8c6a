//! Supervisors: actors that start children, watch them, and restart them when they end, with
//! Erlang/OTP's strategies, restart policies and restart intensity.
//!
//! # What a supervisor owns
//!
//! Each child has one mailbox for the supervisor's whole life. The supervisor keeps an address
//! of it (so the child does not end just because every outside address went away) and *lends*
//! the mailbox to each incarnation: an incarnation that ends, however it ends, leaves the
//! mailbox open with its queue (one that closed it hands it on open again). So the address
//! handed out when the child was added stays valid across restarts, and messages queued while
//! a child restarts go to the next incarnation; only the message whose handling panicked is
//! lost (it had been taken out of the queue). A child that is finished (its policy declined a
//! restart), or dropped with its supervisor, has its mailbox closed for good.
//!
//! # The loop
//!
//! 1. Start the children in the order they were added, each once the one before runs (a
//!    handler child: once its `started` has returned, OTP's `init`); each incarnation gets a
//!    monitor. A process child has no `init`: the mark is that its body has been entered, so
//!    what its body does first may interleave with the next child's start on another worker.
//!    A child whose setup must come before its siblings' is a handler child with that setup
//!    in `started`. A nested supervisor's mark is that its own children have started, as
//!    OTP's supervisor `init` returns once they have. No timeout bounds a start (none does in
//!    OTP either): a child whose `started` never returns holds up its siblings' starts, and
//!    its supervisor's own mailbox (a `Stop` included), up through every supervisor above
//!    that waits for it to start.
//! 2. Wait (one `Select`) for a message on the supervisor's own mailbox or a `Down` of a child.
//! 3. A child ended (a start that failed, for want of a stack or because a handler child's
//!    factory panicked, counts as an abnormal end of an incarnation that never ran:
//!    `ExitReason::NoStart`): if its restart policy asks for a restart
//!    (`Permanent` always, `Transient` after an abnormal end, `Temporary` never), count the restart
//!    against the intensity (at most `max_restarts` in any `period`). Past it, stop every child and
//!    end abnormally (a panic), so that a supervisor above decides. Otherwise restart by the
//!    strategy: `OneForOne` the child alone; `OneForAll` every child (the others killed in reverse
//!    start order first, then all started in order); `RestForOne` the child and those started after
//!    it, likewise. A child whose policy declines the restart is finished, as a `Temporary` child
//!    is in OTP: its mailbox is closed for good (a send to its address fails and hands the message
//!    back), and no restart of the others starts it again. For an incarnation that ran, the close
//!    comes with the end itself, under the mailbox's lock, before any monitor (the supervisor's
//!    included) hears of it; the mailbox knows the policy (`Child::restart`). For a start that
//!    failed, the supervisor closes it when it takes that end. Messages sent to a child waiting for
//!    its restart queue for its next incarnation; if the supervisor gives up instead (past the
//!    intensity), they are dropped with the mailbox, as the messages of an actor that ends without
//!    reading them are.
//! 4. `Stop` (or the supervisor's last address going) stops the children in reverse start
//!    order: each mailbox is closed, so the child drains what was accepted and ends; an
//!    incarnation still running after the child's shutdown timeout is killed (what it left
//!    queued is dropped). A child that ends abnormally with messages still queued (it panicked
//!    on one while draining, or it had ended so and was waiting for its restart when the stop
//!    came: the one `Select` takes the stop and a child's `Down` in either order) is started
//!    again to drain the rest, on its mailbox, which stays closed (no send is accepted again),
//!    as its policy and the intensity allow, and for as long as each run takes a message; the
//!    strategy does not apply, as the others are being stopped. One that ends normally leaves
//!    what it did not read to be dropped, as any actor that ends without reading its mailbox.
//!    Then the supervisor ends; if a restart its policy asked for was not made (past the
//!    intensity, a failed start, or a run that took no message), the rest of that queue is
//!    dropped, the other children are stopped all the same, and it ends abnormally, as in
//!    step 3.
//!
//! 5. `Add` (a child added at run time) starts that child at once, last in the start order,
//!    and answers once its start is done (as in step 1); from then on it is a child like the
//!    others. A child that cannot start is not added: the answer carries the error. A child
//!    finished in step 3 is dropped from the supervisor's lists at the end of the step, so that
//!    a supervisor that takes children for passing work (each ending for good: `Temporary`, or
//!    `Transient` and ending normally) does not grow.
//! 6. `Terminate` stops one child as step 4 stops each (its mailbox closed, what it accepted
//!    drained, killed after its shutdown timeout), without step 4's restarts to drain, and
//!    keeps it stopped: no policy applies to that end, and no group restart starts it, until
//!    `Restart` starts it again (its mailbox opened by the next loan) or `Delete` closes its
//!    mailbox for good and it is dropped as in step 5. A stopped child's mailbox is closed, so
//!    a send to it hands its message back; what a killed incarnation left queued waits for the
//!    next one (a `Delete`, or the supervisor's stop, drops it, as the messages of an actor
//!    that ends without reading them are). A request names a child; where several share the
//!    name, it applies to the first in start order that it can apply to.
//!
//! A child is only restarted once its previous incarnation has ended (the supervisor waits for
//! its `Down`), so a mailbox never has two receivers.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use threadlet_runtime::{AbortHandle, Handle, JoinHandle, SpawnOptions};

use crate::handler::{self, Actor};
use crate::mailbox::{self, Addr, Mailbox};
use crate::monitor::Monitor;
use crate::names::RegisterError;
use crate::select::Select;
use crate::{Down, ExitReason};

/// Which children a supervisor restarts when one must be restarted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Only the child that ended.
    OneForOne,
    /// Every child: the others are killed (in reverse start order), then all start again.
    OneForAll,
    /// The child that ended and every child started after it.
    RestForOne,
}

/// When a child is restarted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Always.
    Permanent,
    /// Only after an abnormal end (a panic, a kill).
    Transient,
    /// Never.
    Temporary,
}

impl Restart {
    /// Whether an incarnation that ended for `reason` is restarted.
    pub(crate) fn wants(self, reason: &ExitReason) -> bool {
        match self {
            Restart::Permanent => true,
            Restart::Transient => !reason.is_normal(),
            Restart::Temporary => false,
        }
    }
}

/// Starts one incarnation (named as the child, and registered under the name given to
/// [`Child::register`], if any): its kill switch and its monitor.
type StartFn =
    Box<dyn FnMut(&Handle, &str, Option<&str>) -> io::Result<(AbortHandle, Monitor)> + Send>;

/// One child of a [`Supervisor`]: a factory for its incarnations, and its mailbox.
pub struct Child {
    name: String,
    kind: ChildKind,
    restart: Restart,
    shutdown: Duration,
    start: StartFn,
    /// The name each incarnation is registered under ([`Child::register`]).
    registered: Option<String>,
    /// The child's mailbox, as the supervisor keeps it: an address that does not count.
    mailbox: Box<dyn ChildMailbox>,
    /// Its current incarnation, while its supervisor runs it ([`Supervisor::run`]).
    running: Option<Running>,
    /// Where it stands with its supervisor.
    status: Status,
}

/// What a supervisor does with a child's mailbox, whatever its message type.
trait ChildMailbox: Send {
    /// Closes the mailbox, keeping the queue (a graceful stop).
    fn close(&self);
    /// Closes the mailbox and drops the queue (the supervisor is done with it).
    fn close_for_good(&self);
    /// Records the child's restart policy: an incarnation's end that the policy declines
    /// closes the mailbox at once (`mailbox.rs`, `Rare::restart`).
    fn set_restart(&self, restart: Restart);
    /// Closes the mailbox for a stop, keeping the queue, and keeps it closed for an
    /// incarnation started to drain it.
    fn close_for_stop(&self);
    /// How many messages are queued, accepted and not yet received.
    fn queued(&self) -> usize;
    /// Undoes `close_for_stop` for the next loan, which opens the mailbox (a restart after
    /// `Terminate`).
    fn end_stop(&self);
}

impl<M: Send> ChildMailbox for mailbox::UncountedAddr<M> {
    fn close(&self) {
        mailbox::UncountedAddr::close(self);
    }
    fn close_for_good(&self) {
        mailbox::UncountedAddr::close_for_good(self);
    }
    fn set_restart(&self, restart: Restart) {
        mailbox::UncountedAddr::set_restart(self, restart);
    }
    fn close_for_stop(&self) {
        mailbox::UncountedAddr::close_for_stop(self);
    }
    fn queued(&self) -> usize {
        mailbox::UncountedAddr::queued(self)
    }
    fn end_stop(&self) {
        mailbox::UncountedAddr::end_stop(self);
    }
}

/// A child's options before its kind is chosen ([`Child::builder`]): its name and its
/// mailbox's capacity.
#[derive(Clone, Debug)]
pub struct ChildBuilder {
    name: String,
    /// `None`: an unbounded mailbox.
    mailbox_capacity: Option<usize>,
}

impl ChildBuilder {
    /// Bounds the child's mailbox to `capacity` queued messages, as
    /// [`ActorBuilder::mailbox_capacity`](crate::ActorBuilder::mailbox_capacity) does for an
    /// actor: a send waits while that many are queued, and `try_send` hands its message back.
    /// The one mailbox serves every incarnation, so the bound holds across restarts: messages
    /// queued for the next incarnation count against it, and senders waiting for room wait
    /// through a restart. A stop (or a finished child) hands their messages back.
    ///
    /// ```
    /// use threadlet::supervisor::{Child, Strategy, Supervisor, SupervisorMsg};
    /// use threadlet::{Mailbox, Runtime};
    ///
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// let (child, addr) = Child::builder("summer")
    ///     .mailbox_capacity(2)
    ///     .process(|mb: Mailbox<(u64, threadlet::Reply<usize>)>| {
    ///         for (_, reply) in &mb {
    ///             reply.send(mb.len()); // queued behind this one: at most 2
    ///         }
    ///     });
    /// let mut sup = Supervisor::new(Strategy::OneForOne);
    /// sup.add(child);
    /// let (sup_addr, done) = sup.start(&rt.handle()).unwrap();
    /// for n in 0..10 {
    ///     assert!(addr.ask(|r| (n, r)).unwrap() <= 2);
    /// }
    /// sup_addr.send(SupervisorMsg::Stop).unwrap();
    /// done.join().unwrap();
    /// ```
    pub fn mailbox_capacity(mut self, capacity: usize) -> ChildBuilder {
        self.mailbox_capacity = Some(capacity);
        self
    }

    /// A process actor child: every incarnation runs `f` on the child's mailbox. Returns the
    /// child and its address, valid across restarts.
    pub fn process<M, F, R>(self, f: F) -> (Child, Addr<M>)
    where
        M: Send + 'static,
        F: Fn(Mailbox<M>) -> R + Send + Sync + 'static,
        R: Send + 'static,
    {
        // Ordered start: the next child starts once this one runs (an OTP child's `init`
        // returns before the next starts; a process actor has no `init`, so running is the
        // mark).
        self.process_telling(ChildKind::Process, move |mb, started| {
            let _ = started.send(());
            drop(started);
            f(mb)
        })
    }

    /// [`ChildBuilder::process`], with the ordered start's signal handed to `f`: the supervisor
    /// starts the next child once `f` sends on it (or drops it).
    fn process_telling<M, F, R>(self, kind: ChildKind, f: F) -> (Child, Addr<M>)
    where
        M: Send + 'static,
        F: Fn(Mailbox<M>, crate::channel::Sender<()>) -> R + Send + Sync + 'static,
        R: Send + 'static,
    {
        let (addr, first) = mailbox::mailbox_with::<M>(self.mailbox_capacity);
        let lender = first.uncounted();
        drop(first.into_lent());
        let f = Arc::new(f);
        let stable = addr.clone();
        let start: StartFn = Box::new(move |handle, name, registered| {
            let mb = lender.lend();
            let f = f.clone();
            // Ordered start: the next child starts once `f` says so. A child cancelled before
            // it runs drops the sender: no wait either.
            let (running_tx, running_rx) = crate::channel::bounded::<()>(1);
            let h = handle.spawn_with(
                SpawnOptions::new().name(name),
                crate::run_with_mailbox(mb, move |mb| f(mb, running_tx)),
            )?;
            stable.attach(&h);
            let starting = Starting::new(&h);
            register_incarnation(registered, &stable, &h)?;
            let _ = running_rx.recv();
            starting.started();
            Ok(incarnation(&h))
        });
        (Child::new(self.name, kind, start, &addr), addr)
    }

    /// A handler actor child: every incarnation is `make()` on the child's mailbox.
    pub fn handler<A, F>(self, make: F) -> (Child, Addr<A::Msg>)
    where
        A: Actor,
        F: Fn() -> A + Send + Sync + 'static,
    {
        let (addr, first) = mailbox::mailbox_with::<A::Msg>(self.mailbox_capacity);
        let lender = first.uncounted();
        drop(first.into_lent());
        let stable = addr.clone();
        let start: StartFn = Box::new(move |handle, name, registered| {
            // `make` runs here, on the supervisor's stack: a panic in it is this child's failed
            // start (`NoStart`, which its policy and the intensity decide on, as on any end),
            // not the supervisor's, which would take every sibling down with it. (A process
            // child's body, and a nested supervisor's `make`, run in the child.)
            let actor = threadlet_runtime::catch_actor_panic(&make).map_err(|p| {
                let what = threadlet_runtime::__private::panic_message(&*p)
                    .unwrap_or("a payload that is not a string");
                io::Error::other(format!("its factory panicked: {what}"))
            })?;
            let mb = lender.lend();
            // Ordered start: the next child starts once this one's `started` has returned (or
            // the actor ended without running it, dropping the sender).
            let (started_tx, started_rx) = crate::channel::bounded::<()>(1);
            let (_, h) = handler::start_lent(handle, name, stable.clone(), mb, actor, started_tx)?;
            let starting = Starting::new(&h);
            register_incarnation(registered, &stable, &h)?;
            let _ = started_rx.recv();
            starting.started();
            Ok(incarnation(&h))
        });
        (
            Child::new(self.name, ChildKind::Handler, start, &addr),
            addr,
        )
    }

    /// A supervisor as a child (supervisors nest): each incarnation runs a new supervisor
    /// from `make`. Its address takes [`SupervisorMsg`].
    pub fn supervisor<F>(self, make: F) -> (Child, Addr<SupervisorMsg>)
    where
        F: Fn() -> Supervisor + Send + Sync + 'static,
    {
        // Ordered start: the next sibling starts once this supervisor's own children have
        // started (OTP: a supervisor's `init` returns then).
        self.process_telling(
            ChildKind::Supervisor,
            move |mb: Mailbox<SupervisorMsg>, started| {
                let mut sup = make();
                sup.started = Some(started);
                sup.run(mb)
            },
        )
    }
}

impl Child {
    /// A child's options: its name (the name of each incarnation, in diagnostics, and its
    /// id in the supervisor's reports) and its mailbox's capacity; the builder's `process`,
    /// `handler` or `supervisor` then makes the child.
    pub fn builder(name: impl Into<String>) -> ChildBuilder {
        ChildBuilder {
            name: name.into(),
            mailbox_capacity: None,
        }
    }

    /// A process actor child: every incarnation runs `f` on the child's mailbox. Returns the
    /// child and its address, valid across restarts. (`Child::builder(name).process(f)`.)
    pub fn process<M, F, R>(name: impl Into<String>, f: F) -> (Child, Addr<M>)
    where
        M: Send + 'static,
        F: Fn(Mailbox<M>) -> R + Send + Sync + 'static,
        R: Send + 'static,
    {
        Child::builder(name).process(f)
    }

    /// A handler actor child: every incarnation is `make()` on the child's mailbox.
    /// (`Child::builder(name).handler(make)`.)
    pub fn handler<A, F>(name: impl Into<String>, make: F) -> (Child, Addr<A::Msg>)
    where
        A: Actor,
        F: Fn() -> A + Send + Sync + 'static,
    {
        Child::builder(name).handler(make)
    }

    /// A supervisor as a child (supervisors nest): each incarnation runs a new supervisor
    /// from `make`. Its address takes [`SupervisorMsg`]. (`Child::builder(name).supervisor(make)`.)
    pub fn supervisor<F>(name: impl Into<String>, make: F) -> (Child, Addr<SupervisorMsg>)
    where
        F: Fn() -> Supervisor + Send + Sync + 'static,
    {
        Child::builder(name).supervisor(make)
    }

    fn new<M: Send + 'static>(
        name: String,
        kind: ChildKind,
        start: StartFn,
        addr: &Addr<M>,
    ) -> Child {
        Child {
            name,
            kind,
            restart: Restart::Permanent,
            shutdown: Duration::from_secs(5),
            start,
            registered: None,
            mailbox: Box::new(addr.uncounted()),
            running: None,
            status: Status::Supervised,
        }
    }

    /// Registers every incarnation of the child under `name` ([`register`](crate::register)),
    /// as an OTP child spec's `{local, Name}` does: [`whereis`](crate::whereis) finds the
    /// running incarnation. Each incarnation is registered as soon as it is spawned, before
    /// the supervisor starts the next child (so siblings started after it find it by name;
    /// its own first steps may run on another worker meanwhile, and should not count on the
    /// name), and the name goes when it ends, so between an end and the restart `whereis`
    /// returns `None` (the child's
    /// address, valid across restarts, takes messages meanwhile: they queue for the next
    /// incarnation). A name registered to another live actor fails the start: that
    /// incarnation is killed (a message it had taken is lost, as with any kill), and the
    /// failure is an abnormal end (`ExitReason::NoStart`) for the child's restart policy and
    /// the intensity to decide on, as OTP's `already_started` is.
    ///
    /// ```
    /// use threadlet::supervisor::{Child, Strategy, Supervisor, SupervisorMsg};
    /// use threadlet::{Actor, Context, Mailbox, Runtime, whereis};
    ///
    /// struct Greeter;
    /// impl Actor for Greeter {
    ///     type Msg = ();
    ///     fn started(&mut self, _: &mut Context<Self>) {
    ///         // "log" was started, and registered, before this sibling.
    ///         let log = whereis::<String>("log").expect("started before me");
    ///         log.send("hello".to_string()).unwrap();
    ///     }
    ///     fn handle(&mut self, _: (), _: &mut Context<Self>) {}
    /// }
    ///
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// let (heard_tx, heard) = std::sync::mpsc::channel();
    /// let heard_tx = std::sync::Mutex::new(heard_tx);
    /// let (log, _addr) = Child::process("log", move |mb: Mailbox<String>| {
    ///     for line in &mb {
    ///         heard_tx.lock().unwrap().send(line).unwrap();
    ///     }
    /// });
    /// let (greeter, _addr) = Child::handler("greeter", || Greeter);
    /// let mut sup = Supervisor::new(Strategy::OneForOne);
    /// sup.add(log.register("log")).add(greeter);
    /// let (sup_addr, done) = sup.start(&rt.handle()).unwrap();
    /// assert_eq!(heard.recv().unwrap(), "hello");
    /// sup_addr.send(SupervisorMsg::Stop).unwrap();
    /// done.join().unwrap();
    /// assert!(whereis::<String>("log").is_none()); // gone with the child
    /// ```
    pub fn register(mut self, name: impl Into<String>) -> Child {
        self.registered = Some(name.into());
        self
    }

    /// The restart policy (default `Permanent`). An incarnation that ends without a restart
    /// to follow (a `Temporary` child's, a `Transient` child's normal end) has its mailbox
    /// closed as it ends, before its monitors hear of it: a send after that hands its message
    /// back.
    pub fn restart(mut self, restart: Restart) -> Child {
        self.restart = restart;
        self.mailbox.set_restart(restart);
        self
    }

    /// How long a stop waits for the child to drain its mailbox and end before killing it
    /// (default 5 s).
    pub fn shutdown(mut self, timeout: Duration) -> Child {
        self.shutdown = timeout;
        self
    }
}

/// A child goes with its supervisor (after its stop, or as it unwinds) or unstarted: its
/// mailbox closes for good, so a send to its address fails and hands the message back rather
/// than waiting in a queue that nobody will read.
impl Drop for Child {
    fn drop(&mut self) {
        self.mailbox.close_for_good();
    }
}

/// An incarnation whose supervisor waits for it to run (the ordered start) before it has a
/// `Running` record: if the supervisor unwinds meanwhile (killed), this kills the incarnation,
/// as `Running` would.
struct Starting(Option<AbortHandle>);

impl Starting {
    fn new<R>(h: &JoinHandle<R>) -> Starting {
        Starting(Some(h.abort_handle()))
    }

    /// It runs: its `Running` record takes over.
    fn started(mut self) {
        self.0 = None;
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(abort) = self.0.take() {
            abort.abort();
        }
    }
}

/// Registers an incarnation just attached to its child's address `addr` under `name`
/// ([`Child::register`]). An incarnation that has ended already keeps no name (its end reaches
/// the supervisor as any end does). A name held by another live actor fails the start: the
/// incarnation is killed, and waited for, since the next one may borrow the mailbox only once
/// this one has ended.
fn register_incarnation<M: Send + 'static, R>(
    name: Option<&str>,
    addr: &Addr<M>,
    h: &JoinHandle<R>,
) -> io::Result<()> {
    let Some(name) = name else { return Ok(()) };
    match crate::names::register(name, addr) {
        Ok(()) | Err(RegisterError::Ended(_)) => Ok(()),
        Err(taken @ RegisterError::Taken(_)) => {
            let ended = Monitor::of(h);
            h.abort();
            ended.recv();
            Err(io::Error::new(io::ErrorKind::AlreadyExists, taken))
        }
    }
}

fn incarnation<R>(h: &JoinHandle<R>) -> (AbortHandle, Monitor) {
    (h.abort_handle(), Monitor::of(h))
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Child")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("restart", &self.restart)
            .finish_non_exhaustive()
    }
}

/// What a supervisor's mailbox takes.
#[derive(Debug)]
pub enum SupervisorMsg {
    /// Stop every child (reverse start order, each within its shutdown timeout), then end.
    Stop,
    /// Add a child at run time (OTP's `start_child`): it starts after the children already
    /// there, last in the start order, and is then supervised as they are (a group restart
    /// takes it in its place). The reply comes once its start is done: `Ok` once its
    /// `started` has returned or its body has been entered; the error if it could not start
    /// (no stack, its factory panicked, its registered name taken), and then it is not added
    /// (its mailbox is closed) and the supervisor goes on as before, as OTP's `start_child`
    /// returns an error and keeps no child. A supervisor that has ended refuses the request;
    /// one that takes a stop first drops it; either way the child goes unstarted, its mailbox
    /// closed. Send it with [`Addr::ask`]: `sup.ask(|r| SupervisorMsg::Add(child, r))`.
    Add(Child, crate::Reply<io::Result<()>>),
    /// Stops the named child (OTP's `terminate_child`) and keeps it, not running, until a
    /// [`Restart`](SupervisorMsg::Restart) or [`Delete`](SupervisorMsg::Delete) names it. The
    /// stop is the one `Stop` gives each child: its mailbox closes (a send from then on hands
    /// its message back), the incarnation drains what was accepted and ends, or is killed
    /// after the child's shutdown timeout; its registered name goes with it. This end is not
    /// a failure: no restart policy, strategy or intensity applies, and a group restart of
    /// its siblings leaves it stopped. A `Temporary` child is deleted as well, as in OTP.
    /// The answer comes once the incarnation has ended; a child already stopped answers `Ok`.
    Terminate(String, crate::Reply<Result<(), ChildError>>),
    /// Starts a child stopped by [`Terminate`](SupervisorMsg::Terminate) again (OTP's
    /// `restart_child`), in its place in the start order: its mailbox opens again, the next
    /// incarnation receives what the last one left queued (if it was killed), and from then on
    /// it is supervised as before. If its start fails, it stays stopped and the answer says
    /// why; this does not count against the intensity. (What a killed incarnation left queued
    /// is dropped if no `Restart` comes: by a `Delete`, or with the supervisor's stop.)
    Restart(String, crate::Reply<Result<(), ChildError>>),
    /// Removes a child stopped by [`Terminate`](SupervisorMsg::Terminate) (OTP's
    /// `delete_child`): its mailbox closes for good, dropping what it held.
    Delete(String, crate::Reply<Result<(), ChildError>>),
    /// The children, in start order (OTP's `which_children`).
    WhichChildren(crate::Reply<Vec<ChildInfo>>),
}

/// Why a supervisor refused a request about one of its children ([`SupervisorMsg`]).
#[derive(Debug)]
pub enum ChildError {
    /// The supervisor has no child of that name.
    NotFound,
    /// The child is running: [`SupervisorMsg::Restart`] and [`SupervisorMsg::Delete`] take
    /// only a child stopped by [`SupervisorMsg::Terminate`].
    Running,
    /// A restart could not start the child (no stack, its factory panicked, its registered
    /// name taken); it stays stopped.
    Start(io::Error),
}

impl fmt::Display for ChildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChildError::NotFound => f.write_str("no child of that name"),
            ChildError::Running => f.write_str("the child is running"),
            ChildError::Start(e) => write!(f, "the child could not start: {e}"),
        }
    }
}

impl std::error::Error for ChildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ChildError::Start(e) => Some(e),
            _ => None,
        }
    }
}

/// What kind of actor a child is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildKind {
    /// [`ChildBuilder::process`].
    Process,
    /// [`ChildBuilder::handler`].
    Handler,
    /// [`ChildBuilder::supervisor`].
    Supervisor,
}

/// One child, as [`SupervisorMsg::WhichChildren`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChildInfo {
    /// Its name, as given to [`Child::builder`].
    pub name: String,
    /// Its running incarnation; `None` while it is stopped by [`SupervisorMsg::Terminate`].
    pub actor: Option<threadlet_runtime::ActorId>,
    /// What kind of actor it is.
    pub kind: ChildKind,
    /// Its restart policy.
    pub restart: Restart,
}

/// Starts children and restarts them as its [`Strategy`] says (see the module docs).
///
/// ```
/// use threadlet::supervisor::{Child, Restart, Strategy, Supervisor, SupervisorMsg};
/// use threadlet::Mailbox;
///
/// let rt = threadlet::Runtime::builder().workers(2).build().unwrap();
/// // A worker that panics on bad input; its address survives the restarts.
/// let (worker, addr) = Child::process("parser", |mb: Mailbox<(String, threadlet::Reply<u32>)>| {
///     for (text, reply) in &mb {
///         reply.send(text.parse().expect("a number"));
///     }
/// });
/// let mut sup = Supervisor::new(Strategy::OneForOne);
/// sup.add(worker.restart(Restart::Permanent));
/// let (sup_addr, sup_handle) = sup.start(&rt.handle()).unwrap();
///
/// assert_eq!(addr.ask(|r| ("12".to_string(), r)), Ok(12));
/// assert!(addr.ask(|r| ("twelve".to_string(), r)).is_err()); // it panicked...
/// assert_eq!(addr.ask(|r| ("7".to_string(), r)), Ok(7)); // ...and was restarted
/// sup_addr.send(SupervisorMsg::Stop).unwrap();
/// sup_handle.join().unwrap();
/// ```
pub struct Supervisor {
    strategy: Strategy,
    max_restarts: usize,
    period: Duration,
    children: Vec<Child>,
    /// A nested supervisor's ordered start (`Child::supervisor`): told once its own children
    /// have started, so that its parent starts the next sibling only then.
    started: Option<crate::channel::Sender<()>>,
}

/// One child's current incarnation. Dropped before its end (the supervisor unwound by a kill,
/// its own or its supervisor's, or by shutdown), it kills the child: children end with their
/// supervisor, as OTP's are linked to theirs. On every other path the child has ended by then,
/// and the kill is a no-op.
struct Running {
    abort: AbortHandle,
    monitor: Monitor,
}

impl Running {
    /// Waits up to `timeout` for the incarnation to end (a stop: its mailbox closed), then
    /// kills it and waits for that: `Ok` with its end if it ended in time, else `Err` with the
    /// kill's.
    fn end_within(self, timeout: Duration) -> Result<Down, Down> {
        match self.monitor.recv_timeout(timeout) {
            Some(ended) => Ok(ended),
            None => {
                self.abort.abort();
                Err(self.monitor.recv())
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.abort.abort();
    }
}

enum Event {
    Msg(Option<SupervisorMsg>),
    Down(usize, Down),
}

/// Where a child stands with its supervisor, beside its incarnation (`run`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    /// Running, or to be restarted as its policy says.
    Supervised,
    /// Stopped by a `Terminate`: not running, and no restart starts it, until a `Restart`
    /// (or a `Delete`) names it. Its mailbox is closed (for a stop: `close_for_stop`).
    Terminated,
    /// Done for the supervisor's life: its policy declined a restart, or it was deleted. Its
    /// mailbox is closed for good, and it leaves the lists at the end of the step
    /// (`forget_finished`).
    Finished,
}

impl Supervisor {
    /// A supervisor with no children and Erlang's default intensity (3 restarts in 5 s).
    pub fn new(strategy: Strategy) -> Supervisor {
        Supervisor {
            strategy,
            max_restarts: 3,
            period: Duration::from_secs(5),
            children: Vec::new(),
            started: None,
        }
    }

    /// At most `max_restarts` restarts in any `period`; one more ends the supervisor.
    pub fn intensity(mut self, max_restarts: usize, period: Duration) -> Supervisor {
        self.max_restarts = max_restarts;
        self.period = period;
        self
    }

    /// Adds a child; children start in the order they are added.
    pub fn add(&mut self, child: Child) -> &mut Supervisor {
        self.children.push(child);
        self
    }

    /// Starts the supervisor as a process actor through `handle`.
    pub fn start(self, handle: &Handle) -> io::Result<(Addr<SupervisorMsg>, JoinHandle<()>)> {
        let (addr, mb) = mailbox::mailbox::<SupervisorMsg>();
        let h = handle.spawn_with(
            SpawnOptions::new().name("supervisor"),
            crate::run_with_mailbox(mb, move |mb| self.run(mb)),
        )?;
        addr.attach(&h);
        Ok((addr, h))
    }

    /// The supervisor's loop (module docs), on its own mailbox. Ends normally after a stop;
    /// panics when the restart intensity is exceeded.
    pub fn run(mut self, mb: Mailbox<SupervisorMsg>) {
        let handle = Handle::current();
        // Starts that failed, each as the end of an incarnation that never ran (step 3).
        let mut failed: VecDeque<(usize, Down)> = VecDeque::new();
        for i in 0..self.children.len() {
            self.start_child(&handle, i, &mut failed);
        }
        if let Some(started) = self.started.take() {
            // Its children have started (each after the one before): the parent may go on.
            let _ = started.send(());
        }
        let mut restarts: VecDeque<Instant> = VecDeque::new();
        loop {
            self.forget_finished(&mut failed);
            let event = if let Some((i, down)) = failed.pop_front() {
                Event::Down(i, down)
            } else {
                let mut sel = Select::new();
                sel.recv(&mb, Event::Msg);
                for (i, child) in self.children.iter().enumerate() {
                    if let Some(r) = &child.running {
                        sel.recv(&r.monitor, move |d| Event::Down(i, d));
                    }
                }
                sel.wait()
            };
            let (i, down) = match event {
                Event::Msg(Some(SupervisorMsg::Stop)) | Event::Msg(None) => {
                    // (A stop is taken only once every failed start has been: `failed` is
                    // empty, and every child is running, stopped by a `Terminate`, or finished.)
                    let drain = Drain {
                        handle: &handle,
                        restarts: &mut restarts,
                    };
                    if let Some(why) = self.stop_all(Some(drain)) {
                        // The supervisor ends abnormally, so that a supervisor above decides.
                        panic!("{why}");
                    }
                    return;
                }
                Event::Msg(Some(request)) => {
                    self.answer(&handle, request);
                    continue;
                }
                Event::Down(i, down) => (i, down),
            };
            // A suspension between an end and what follows it. During shutdown every start is
            // refused (a handler child) or ends unrun (a process child) and each end is ready
            // without a park, so a loop of restarts that never suspended kept its worker for
            // good: the runtime's drop waited on it for ever, or, under a finite intensity,
            // the supervisor failed on ends that were the shutdown's. Here the shutdown cancels
            // it. (It also keeps a storm of failed starts from holding a worker.)
            threadlet_runtime::yield_now();
            let child = &mut self.children[i];
            child.running = None;
            if !child.restart.wants(&down.reason) {
                // Its mailbox closes as an actor's does at its end: a later send fails and
                // hands its message back, rather than waiting in a queue nobody will read.
                child.mailbox.close_for_good();
                child.status = Status::Finished;
                continue;
            }
            if !self.may_restart(&mut restarts) {
                self.stop_all(None);
                panic!("{}", self.past_intensity(&down));
            }
            let n = self.children.len();
            let again: Vec<usize> = match self.strategy {
                Strategy::OneForOne => vec![i],
                Strategy::OneForAll => (0..n).collect(),
                Strategy::RestForOne => (i..n).collect(),
            };
            // The others of the group first, in reverse start order, then all in order. A
            // `Temporary` sibling taken down with the group is finished (OTP: never restarted,
            // not even by a sibling's restart).
            for &j in again.iter().rev() {
                let sibling = &mut self.children[j];
                if let Some(r) = sibling.running.take() {
                    r.abort.abort();
                    // Its policy decides on the end it had, as the mailbox did when it ended
                    // (`Child::restart`): killed here, or its own end just before (a
                    // `Transient` sibling's normal end, which closed its mailbox).
                    let ended = r.monitor.recv();
                    if !sibling.restart.wants(&ended.reason) {
                        sibling.mailbox.close_for_good();
                        sibling.status = Status::Finished;
                    }
                }
            }
            // A failed start of the group still queued is superseded by this start: taken
            // later, it would end (kill) the incarnation started now and count once more.
            failed.retain(|(k, _)| !again.contains(k));
            // A stopped child (`Terminate`) stays stopped.
            for j in again {
                if self.children[j].status == Status::Supervised {
                    self.start_child(&handle, j, &mut failed);
                }
            }
        }
    }

    /// Answers a request other than `Stop`: steps 5 and 6 of the module docs.
    fn answer(&mut self, handle: &Handle, request: SupervisorMsg) {
        match request {
            SupervisorMsg::Stop => unreachable!("the loop takes a stop itself"),
            SupervisorMsg::Add(mut child, reply) => {
                // Step 5: last in the start order, once started.
                match Self::try_start(handle, &mut child) {
                    Ok(r) => {
                        child.running = Some(r);
                        self.children.push(child);
                        reply.send(Ok(()));
                    }
                    Err(e) => {
                        // Dropped, its mailbox closed for good, before the answer: a send
                        // to its address after the answer is handed back.
                        drop(child);
                        reply.send(Err(e));
                    }
                }
            }
            SupervisorMsg::Terminate(name, reply) => {
                // Step 6.
                let answer = match self.find(&name, Status::Supervised) {
                    Ok(i) => {
                        self.terminate(i);
                        Ok(())
                    }
                    // Stopped already.
                    Err(ChildError::Running) => Ok(()),
                    Err(e) => Err(e),
                };
                reply.send(answer);
            }
            SupervisorMsg::Restart(name, reply) => {
                let answer = self.find(&name, Status::Terminated).and_then(|i| {
                    let child = &mut self.children[i];
                    // The next loan opens the mailbox again (`lend_next`).
                    child.mailbox.end_stop();
                    match Self::try_start(handle, child) {
                        Ok(r) => {
                            child.running = Some(r);
                            child.status = Status::Supervised;
                            Ok(())
                        }
                        Err(e) => {
                            // Stopped as before: the loan may have opened it.
                            child.mailbox.close_for_stop();
                            Err(ChildError::Start(e))
                        }
                    }
                });
                reply.send(answer);
            }
            SupervisorMsg::Delete(name, reply) => {
                let answer = self.find(&name, Status::Terminated).map(|i| {
                    let child = &mut self.children[i];
                    child.mailbox.close_for_good();
                    child.status = Status::Finished;
                });
                reply.send(answer);
            }
            SupervisorMsg::WhichChildren(reply) => {
                let children = (self.children.iter())
                    .map(|child| ChildInfo {
                        name: child.name.clone(),
                        actor: child.running.as_ref().map(|r| r.abort.id()),
                        kind: child.kind,
                        restart: child.restart,
                    })
                    .collect();
                reply.send(children);
            }
        }
    }

    /// Drops the children that are finished (their mailboxes closed for good already),
    /// keeping the others' order, so that a supervisor to which children are added at run
    /// time, each ending for good, does not grow. A failed start still queued for a child that
    /// stays follows it to its new index.
    fn forget_finished(&mut self, failed: &mut VecDeque<(usize, Down)>) {
        if !self.children.iter().any(|c| c.status == Status::Finished) {
            return;
        }
        // Each child's index after the removal (`None`: removed).
        let mut next = 0;
        let moved: Vec<Option<usize>> = (self.children.iter())
            .map(|c| {
                (c.status != Status::Finished).then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        failed.retain_mut(|(i, _)| match moved[*i] {
            Some(to) => {
                *i = to;
                true
            }
            None => false,
        });
        self.children.retain(|c| c.status != Status::Finished);
    }

    /// The first child, in start order, named `name` and standing `wanted` (running, or
    /// stopped by `Terminate`): a request by name applies to it (step 6). Failing that,
    /// [`ChildError::Running`] if one of that name stands otherwise (for a request on a
    /// stopped child, one of that name is running; for a `Terminate`, one is stopped), else
    /// [`ChildError::NotFound`].
    fn find(&self, name: &str, wanted: Status) -> Result<usize, ChildError> {
        let mut named = (self.children.iter().enumerate())
            .filter(|(_, c)| c.name == name && c.status != Status::Finished)
            .peekable();
        if named.peek().is_none() {
            return Err(ChildError::NotFound);
        }
        named
            .find(|(_, c)| c.status == wanted)
            .map(|(i, _)| i)
            .ok_or(ChildError::Running)
    }

    /// Step 6: stops child `i` as a `Stop` stops each child (its mailbox closed, what it
    /// accepted drained, killed after its shutdown timeout) and keeps it stopped; a
    /// `Temporary` child is finished instead (OTP deletes it).
    fn terminate(&mut self, i: usize) {
        let child = &mut self.children[i];
        child.mailbox.close_for_stop();
        if let Some(r) = child.running.take() {
            let _ = r.end_within(child.shutdown);
        }
        if child.restart == Restart::Temporary {
            child.mailbox.close_for_good();
            child.status = Status::Finished;
        } else {
            child.status = Status::Terminated;
        }
    }

    /// Starts child `i`. A start that fails (no stack could be had for it) is an abnormal end
    /// of an incarnation that never ran, queued in `failed` for the loop: its policy and the
    /// restart intensity decide, as for any end, so a child that cannot start is tried again
    /// and, past the intensity, the supervisor gives up; it does not sit with an open mailbox
    /// that no incarnation will read.
    fn start_child(&mut self, handle: &Handle, i: usize, failed: &mut VecDeque<(usize, Down)>) {
        let child = &mut self.children[i];
        match Self::try_start(handle, child) {
            Ok(r) => child.running = Some(r),
            Err(e) => {
                failed.push_back((
                    i,
                    Down {
                        id: threadlet_runtime::__private::unassigned_actor_id(),
                        name: Some(Arc::from(child.name.as_str())),
                        reason: ExitReason::NoStart(e.to_string()),
                    },
                ));
            }
        }
    }

    /// Starts an incarnation of `child`.
    fn try_start(handle: &Handle, child: &mut Child) -> io::Result<Running> {
        let (abort, monitor) = (child.start)(handle, &child.name, child.registered.as_deref())?;
        Ok(Running { abort, monitor })
    }

    /// One more restart now, if the intensity allows it (step 3): at most `max_restarts` in
    /// any `period`.
    fn may_restart(&self, restarts: &mut VecDeque<Instant>) -> bool {
        let now = Instant::now();
        restarts.push_back(now);
        while restarts
            .front()
            .is_some_and(|t| now.duration_since(*t) > self.period)
        {
            restarts.pop_front();
        }
        restarts.len() <= self.max_restarts
    }

    /// Why the supervisor gives up past the intensity, `last` being the end that went past it.
    fn past_intensity(&self, last: &Down) -> String {
        let name = last
            .name
            .as_ref()
            .map_or_else(String::new, |n| format!(" {n:?}"));
        format!(
            "supervisor: more than {} restarts in {:?} (the last: actor {}{name}, which ended \
             {:?})",
            self.max_restarts, self.period, last.id, last.reason
        )
    }

    /// Stops every child in reverse start order (step 4), then closes their mailboxes for
    /// good. With `drain` (a `Stop`), what each mailbox accepted is handled first: the mailbox
    /// is closed (and stays closed for any later incarnation), its incarnation drains it and
    /// ends, and one that ends abnormally with messages still queued (it panicked on one, or
    /// had ended so, waiting for its restart, when the stop came) is followed by another on
    /// the closed mailbox, as its policy and the restart intensity allow, as during the
    /// supervisor's life; the strategy does not apply (the others are being stopped). A run
    /// after the first such restart must have taken a message for another to follow, so the
    /// restarts end with the queue. An incarnation that ends normally leaves what it did not
    /// read to be dropped, as an actor that ends without reading its mailbox does. Returns why
    /// a queue was left undrained, if a restart the policy asked for was not made (past the
    /// intensity, a start that failed, or a run that took no message): the other children are
    /// stopped all the same, and the caller gives up. Without `drain` (giving up already), no child is started
    /// again. Each incarnation has the child's shutdown timeout to end before it is killed,
    /// and what it left queued is dropped.
    fn stop_all(&mut self, mut drain: Option<Drain<'_>>) -> Option<String> {
        let mut undrained = None;
        for i in (0..self.children.len()).rev() {
            // Queued when the last restart was made (none yet: `None`).
            let mut left_at_restart = None;
            if drain.is_some() {
                self.children[i].mailbox.close_for_stop();
            } else {
                self.children[i].mailbox.close();
            }
            while let Some(r) = self.children[i].running.take() {
                let child = &self.children[i];
                let Ok(ended) = r.end_within(child.shutdown) else {
                    break;
                };
                let left = child.mailbox.queued();
                let Some(d) = &mut drain else { break };
                if left == 0 || ended.reason.is_normal() || !child.restart.wants(&ended.reason) {
                    break;
                }
                if left_at_restart.is_some_and(|before| left >= before) {
                    undrained.get_or_insert_with(|| {
                        format!(
                            "supervisor: {:?} ended ({:?}) in its stop without taking a message; \
                             its queue was left undrained",
                            ended.name, ended.reason
                        )
                    });
                    break;
                }
                left_at_restart = Some(left);
                if !self.may_restart(d.restarts) {
                    undrained.get_or_insert_with(|| self.past_intensity(&ended));
                    break;
                }
                let mut failed = VecDeque::new();
                self.start_child(d.handle, i, &mut failed);
                if let Some((_, down)) = failed.pop_front() {
                    undrained.get_or_insert_with(|| {
                        format!(
                            "supervisor: the queue of {:?} was left undrained at its stop: {:?}",
                            down.name, down.reason
                        )
                    });
                }
            }
            self.children[i].mailbox.close_for_good();
        }
        if undrained.is_some() {
            // During shutdown every start is refused and every incarnation cancelled: a queue
            // left undrained for that is the shutdown's doing, not the supervisor's failure.
            // A refusal means the shutdown has begun, so a suspension now lets it cancel the
            // supervisor first, as in the loop (`run`).
            threadlet_runtime::yield_now();
        }
        undrained
    }
}

/// What a stop that drains the children's mailboxes needs from the loop (`stop_all`).
struct Drain<'a> {
    handle: &'a Handle,
    restarts: &'a mut VecDeque<Instant>,
}

impl fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Supervisor")
            .field("strategy", &self.strategy)
            .field("children", &self.children)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Runtime;

    /// `child` with its first start failing, as when no stack can be had for it.
    fn failing_first_start(mut child: Child) -> Child {
        let mut start = std::mem::replace(&mut child.start, Box::new(|_, _, _| unreachable!()));
        let mut tries = 0;
        child.start = Box::new(move |handle, name, registered| {
            tries += 1;
            if tries == 1 {
                return Err(io::Error::other("no stack (the test's)"));
            }
            start(handle, name, registered)
        });
        child
    }

    /// Finished children leave the supervisor's lists, the others keep their order, and a
    /// failed start queued for one that stays follows it to its new index.
    #[test]
    fn finished_children_are_forgotten_and_the_others_keep_their_places() {
        let mut sup = Supervisor::new(Strategy::RestForOne);
        let mut addrs = Vec::new();
        for name in ["a", "b", "c", "d"] {
            let (child, addr) = Child::process(name, |mb: Mailbox<u32>| mb.recv());
            sup.add(child);
            addrs.push(addr);
        }
        let down = |name: &str| Down {
            id: threadlet_runtime::__private::unassigned_actor_id(),
            name: Some(Arc::from(name)),
            reason: ExitReason::NoStart("the test's".into()),
        };
        use Status::{Finished, Supervised, Terminated};
        for (child, status) in sup
            .children
            .iter_mut()
            .zip([Supervised, Finished, Terminated, Finished])
        {
            child.status = status;
        }
        let mut failed = VecDeque::from([(2, down("c")), (1, down("b"))]);
        sup.forget_finished(&mut failed);
        let left: Vec<(&str, Status)> = (sup.children.iter())
            .map(|c| (c.name.as_str(), c.status))
            .collect();
        assert_eq!(left, [("a", Supervised), ("c", Terminated)]);
        let failed: Vec<(usize, Option<Arc<str>>)> =
            failed.into_iter().map(|(i, d)| (i, d.name)).collect();
        assert_eq!(failed, [(1, Some(Arc::from("c")))]);
        // The children forgotten were dropped: their mailboxes are closed for good.
        assert!(addrs[1].send(1).is_err() && addrs[3].send(1).is_err());
        assert!(addrs[0].send(1).is_ok() && addrs[2].send(1).is_ok());
    }

    /// A child whose start failed is started again (its policy and the intensity decide, as
    /// for any end): it was left unstarted for good, its mailbox open, taking messages that no
    /// incarnation would read.
    #[test]
    fn a_child_whose_start_failed_is_started_again() {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (got_tx, got) = std::sync::mpsc::channel();
        let (child, addr) = Child::process("late", move |mb: Mailbox<u32>| {
            if let Some(n) = mb.recv() {
                got_tx.send(n).unwrap();
            }
        });
        let mut sup = Supervisor::new(Strategy::OneForOne);
        sup.add(failing_first_start(child));
        let (sup_addr, sup_h) = sup.start(&rt.handle()).unwrap();
        addr.send(5).unwrap();
        // A bound that only a child never started reaches: it fails instead of hanging.
        assert_eq!(got.recv_timeout(Duration::from_secs(30)), Ok(5));
        sup_addr.send(SupervisorMsg::Stop).unwrap();
        sup_h.join().unwrap();
    }

    /// A `Temporary` child whose start failed is finished: its address refuses sends.
    #[test]
    fn a_temporary_child_whose_start_failed_is_finished() {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let (child, addr) = Child::process("never", |mb: Mailbox<u32>| mb.recv());
        let mut sup = Supervisor::new(Strategy::OneForOne);
        sup.add(failing_first_start(child).restart(Restart::Temporary));
        let (sup_addr, sup_h) = sup.start(&rt.handle()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !addr.is_closed() {
            assert!(Instant::now() < deadline, "its mailbox stayed open");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(addr.send(1).map_err(|e| e.into_inner()), Err(1));
        sup_addr.send(SupervisorMsg::Stop).unwrap();
        sup_h.join().unwrap();
    }

    /// Two children of a `OneForAll` group whose starts both fail: the first failure restarts
    /// the group, starting both; the second, queued meanwhile, is superseded by that start
    /// (taken later, it killed the child just started, restarted the group once more, and
    /// counted against the intensity).
    #[test]
    fn a_group_start_supersedes_failures_still_queued() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let rt = Runtime::builder().workers(2).build().unwrap();
        let starts = Arc::new(AtomicUsize::new(0));
        let (got_tx, got) = std::sync::mpsc::channel();
        let child = |name: &'static str| {
            let (starts, got_tx) = (starts.clone(), got_tx.clone());
            let (c, addr) = Child::process(name, move |mb: Mailbox<u32>| {
                starts.fetch_add(1, Ordering::SeqCst);
                for n in &mb {
                    got_tx.send(n).unwrap();
                }
            });
            (failing_first_start(c), addr)
        };
        let ((a, a_addr), (b, b_addr)) = (child("a"), child("b"));
        // One restart allowed: a second, for the stale failure, would end the supervisor.
        let mut sup = Supervisor::new(Strategy::OneForAll).intensity(1, Duration::from_secs(60));
        sup.add(a);
        sup.add(b);
        let (sup_addr, sup_h) = sup.start(&rt.handle()).unwrap();
        a_addr.send(1).unwrap();
        b_addr.send(2).unwrap();
        let mut both = [0, 0].map(|_| got.recv_timeout(Duration::from_secs(30)).unwrap());
        both.sort();
        assert_eq!(both, [1, 2]);
        sup_addr.send(SupervisorMsg::Stop).unwrap();
        assert!(sup_h.join().is_ok(), "the supervisor gave up");
        assert_eq!(starts.load(Ordering::SeqCst), 2, "one incarnation each");
    }
}
