//! The I/O poller: readiness of sockets, and actors parked until a socket is ready.
//!
//! Sockets (`net.rs`) are always in non-blocking mode. An operation is tried first; only when it
//! would block does its caller wait:
//!
//! * an actor parks until the runtime's poller reports the socket ready (its worker runs other
//!   actors meanwhile);
//! * a plain thread blocks in `poll(2)` on the one socket (no poller is involved).
//!
//! # What is here
//!
//! * [`Driver`]: one per runtime, made by the first socket that waits in one of its actors
//!   (`DriverSlot`). It owns a `mio::Poll`, which has no thread of its own: an idle worker
//!   waits in it instead of parking, a busy worker looks at it every few dozen turns, and
//!   the monitor at every sample while workers run ("Polling for I/O" in `worker.rs`). One
//!   thread polls at a time (`try_lock_poll`). A readiness event reaches an actor through
//!   the same wake as a message would (`wake.rs`).
//! * [`IoState`]: per registered socket, a count of readiness events and the waiters in each
//!   direction (read, write), under one small lock.
//! * [`PollSource`]: a socket with its registration, made on the first wait inside an actor,
//!   edge-triggered for both directions; and the retry loop every socket operation runs.
//!
//! # The readiness protocol (one operation in an actor)
//!
//! 1. Read the direction's event count `seen` (0 if the socket is not registered yet). If an
//!    earlier operation drained the socket at that same count (a read shorter than its
//!    buffer), trying now can only say `WouldBlock`: go to 3 without trying. Not once an event
//!    has reported end of stream or an error: that came with the event the short read
//!    consumed, no later event will repeat it, and only a read can return it. Nor once urgent
//!    data has come (a priority event): a read stops at its mark with data queued behind it.
//! 2. Try the operation. Anything but `WouldBlock` is the answer (an answer that drained the
//!    socket is recorded with `seen`, for step 1 of the next operation).
//! 3. Register the socket if it is not (the kernel then reports its current readiness as a
//!    first event). Under the socket's lock: if the count differs from `seen`, an event came
//!    after step 1, so go back to 1; else push the actor as a waiter of that direction.
//! 4. Park (until the deadline, if there is one); on the way out, leave the waiter list.
//!    Back to 1.
//!
//! The poller, for each event: under the socket's lock, bumps the count of each direction the
//! event covers (an error or hang-up counts for both) and takes that direction's waiters; then
//! wakes them after unlocking.
//!
//! No readiness is lost. The kernel reports an edge for every change that could make the
//! operation succeed (new data, new room, a new connection, an error) that happens after step
//! 2 looked; the poller handles that event either before the lock of step 3, which then sees a
//! new count and retries, or after it, and then finds the waiter and wakes it. A wake that
//! lands before the actor parks leaves it notified, and its park returns at once. Wakes may be
//! spurious (a count bumped by an event step 2 already saw, a socket shared by two actors): the
//! operation just says `WouldBlock` again and the loop waits again.
//!
//! # Shutdown
//!
//! When its runtime shuts down (after every actor ended), every socket still registered with
//! its poller (one moved to a plain thread, say) is marked gone: its waiters are woken and its
//! later waits in that runtime's actors fail with an error. A socket is deregistered when
//! dropped: an actor killed or cancelled mid-read unwinds and drops (closes) the sockets it
//! owns.
//!
//! # A socket that moves
//!
//! A socket handed to an actor of another runtime keeps waiting through the poller it was
//! first registered with while that runtime runs: a poller wakes actors of any runtime. Once
//! that runtime has shut down, the next wait of an actor of another runtime registers the
//! socket with its own runtime's poller (the later registration, under a lock that only moved
//! sockets take), and an actor parked on the stopped poller when it stopped is woken and
//! waits again there. Registering reports the socket's current readiness as a first event,
//! so nothing that arrived meanwhile is missed. Between the start of the first runtime's
//! shutdown and that moment its workers and its monitor have left their loops, so the thread
//! that shuts it down polls the poller while it waits for them (`runtime.rs`, `shut_down`):
//! a drop held up by one of its actors (stuck in a plain blocking call, say) does not hold up
//! the other runtime's waits with it.

use std::borrow::Cow;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use parking_lot::Mutex;
use slab::Slab;

use crate::context::{self, Waiter};
use crate::poll_right::PollRight;
use crate::wait::Wait;

/// The token of the poller's own waker (shutdown); sockets get their slab index.
const WAKER: Token = Token(usize::MAX);

/// How long a worker that would have waited in the poll pauses after the poll itself failed
/// (not expected of `epoll_wait`; short enough to retry promptly, long enough not to spin).
const POLL_ERROR_BACKOFF: Duration = Duration::from_millis(1);

/// Events taken per `epoll_wait`: more are left for the next call, none is lost.
const EVENTS_PER_POLL: usize = 1024;

/// A direction of readiness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Read = 0,
    Write = 1,
}

/// A runtime's poller, made on first use (see the module docs).
#[derive(Default)]
pub(crate) struct DriverSlot {
    driver: OnceLock<Arc<Driver>>,
    /// Serialises the making of the driver (`get`) against itself and `shut_down`.
    making: Mutex<()>,
    shut: AtomicBool,
}

impl DriverSlot {
    /// The runtime's poller, made now if this is the first wait; with `true` if it was made
    /// by this call (the caller then wakes the workers that parked before it existed, so
    /// that an idle one comes to wait in it: "Polling for I/O" in `worker.rs`).
    pub(crate) fn get(&self) -> io::Result<(Arc<Driver>, bool)> {
        if let Some(d) = self.driver.get() {
            return Ok((d.clone(), false));
        }
        let _making = self.making.lock();
        // Acquire: pairs with the release store in `shut_down`.
        if self.shut.load(Ordering::Acquire) {
            return Err(driver_gone());
        }
        if let Some(d) = self.driver.get() {
            return Ok((d.clone(), false));
        }
        let d = Driver::new()?;
        let _ = self.driver.set(d.clone());
        Ok((d, true))
    }

    /// The poller, if some socket has made it: what idle workers poll.
    pub(crate) fn started(&self) -> Option<&Arc<Driver>> {
        self.driver.get()
    }

    /// After every actor has ended (module docs, "Shutdown"): sockets still registered fail
    /// their later waits.
    pub(crate) fn shut_down(&self) {
        let _making = self.making.lock();
        self.shut.store(true, Ordering::Release);
        if let Some(d) = self.driver.get() {
            d.mark_all_gone();
        }
    }
}

/// One runtime's poller: the mio `Poll` (held by whichever thread polls), the registered
/// sockets, and the waker that interrupts a worker blocked in the poll.
pub(crate) struct Driver {
    registry: mio::Registry,
    waker: mio::Waker,
    /// Held by whichever thread polls, handed over to a parked worker when released without
    /// waiting (`poll_right.rs`).
    poll: PollRight<PollState>,
    sources: Mutex<Slab<Arc<IoState>>>,
    gone: AtomicBool,
    /// An error of the poll itself has been reported (once).
    poll_failed: AtomicBool,
}

/// The right to poll a runtime's I/O: one thread at a time.
pub(crate) struct PollGuard<'a>(crate::sync::MutexGuard<'a, PollState>);

/// What the polling thread uses, kept between polls.
struct PollState {
    poll: Poll,
    events: Events,
    ready: Vec<(Arc<IoState>, Readiness)>,
    woken: Vec<Waiter>,
}

impl Driver {
    fn new() -> io::Result<Arc<Driver>> {
        let poll = Poll::new()?;
        Ok(Arc::new(Driver {
            registry: poll.registry().try_clone()?,
            waker: mio::Waker::new(poll.registry(), WAKER)?,
            poll: PollRight::new(PollState {
                poll,
                events: Events::with_capacity(EVENTS_PER_POLL),
                ready: Vec::new(),
                woken: Vec::new(),
            }),
            sources: Mutex::new(Slab::new()),
            gone: AtomicBool::new(false),
            poll_failed: AtomicBool::new(false),
        }))
    }

    /// Polls once, if no other thread is polling now, waiting up to `timeout` (`None`: until
    /// an event or [`wake`](Driver::wake)), and wakes the actors whose sockets are ready.
    /// Returns whether it polled (`false`: another thread holds the poll).
    pub(crate) fn try_poll(&self, timeout: Option<Duration>) -> bool {
        match self.try_lock_poll() {
            Some(mut st) => {
                self.poll_locked(&mut st, timeout);
                true
            }
            None => false,
        }
    }

    /// The right to poll, if no other thread has it.
    pub(crate) fn try_lock_poll(&self) -> Option<PollGuard<'_>> {
        self.poll.try_take().map(PollGuard)
    }

    /// For an idle worker that is about to sleep: the right to poll, or else `None` with the
    /// wish recorded, so that the thread holding the right hands it over when it lets go
    /// without waiting (`take_wanted`).
    pub(crate) fn lock_poll_or_want(&self) -> Option<PollGuard<'_>> {
        self.poll.take_or_want().map(PollGuard)
    }

    /// After releasing the right without waiting in the poll: whether an idle worker wanted
    /// it meanwhile (then the caller wakes a parked worker to take it).
    pub(crate) fn take_wanted(&self) -> bool {
        self.poll.take_wanted()
    }

    /// Polls once with the right to (see `try_poll`).
    pub(crate) fn poll_locked(&self, guard: &mut PollGuard<'_>, timeout: Option<Duration>) {
        let st = &mut *guard.0;
        let PollState {
            poll,
            events,
            ready,
            woken,
        } = st;
        if let Err(e) = poll.poll(events, timeout) {
            // Interrupted by a signal: the caller polls again when it next has nothing to do.
            // Nothing else is expected of epoll_wait with valid arguments.
            if e.kind() != io::ErrorKind::Interrupted {
                // Said once per runtime; and an idle worker that would wait here must not spin
                // on an error that persists: it waits a little instead.
                if !self.poll_failed.swap(true, Ordering::Relaxed) {
                    eprintln!("threadlet: the I/O poller failed: {e}");
                }
                if timeout.is_none_or(|t| !t.is_zero()) {
                    std::thread::sleep(POLL_ERROR_BACKOFF);
                }
            }
            return;
        }
        {
            let sources = self.sources.lock();
            for ev in events.iter() {
                if ev.token() == WAKER {
                    continue;
                }
                // A token whose socket was dropped meanwhile (or reused by another): at worst a
                // spurious wake, which the protocol allows.
                if let Some(state) = sources.get(ev.token().0) {
                    let failed = ev.is_error();
                    let readiness = Readiness {
                        readable: ev.is_readable() || ev.is_read_closed() || failed,
                        writable: ev.is_writable() || ev.is_write_closed() || failed,
                        closed: failed || ev.is_read_closed(),
                        urgent: ev.is_priority(),
                    };
                    ready.push((state.clone(), readiness));
                }
            }
        }
        for (state, readiness) in ready.drain(..) {
            state.notify(readiness, woken);
        }
        for w in woken.drain(..) {
            w.wake_by_value();
        }
    }

    /// Makes a poll in progress (or the next one) return at once.
    pub(crate) fn wake(&self) {
        let _ = self.waker.wake();
    }

    fn mark_all_gone(&self) {
        self.gone.store(true, Ordering::Release);
        let sources: Vec<Arc<IoState>> =
            self.sources.lock().iter().map(|(_, s)| s.clone()).collect();
        for s in sources {
            s.mark_gone();
        }
    }

    /// Its runtime has shut down (`mark_all_gone`).
    fn is_gone(&self) -> bool {
        // Acquire: pairs with the release store in `mark_all_gone`.
        self.gone.load(Ordering::Acquire)
    }

    fn register(self: &Arc<Self>, fd: RawFd) -> io::Result<Registration> {
        let state = Arc::new(IoState::default());
        let token = self.sources.lock().insert(state.clone());
        let interest = Interest::READABLE | Interest::WRITABLE;
        // Urgent data (see `IoState::urgent`).
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let interest = interest | Interest::PRIORITY;
        if let Err(e) = self
            .registry
            .register(&mut SourceFd(&fd), Token(token), interest)
        {
            self.sources.lock().remove(token);
            return Err(e);
        }
        // Registered after the runtime shut down: nobody would ever report it.
        if self.gone.load(Ordering::Acquire) {
            state.mark_gone();
        }
        Ok(Registration {
            driver: self.clone(),
            state,
            token,
        })
    }
}

/// What one event of the poller says of a socket.
#[derive(Clone, Copy)]
struct Readiness {
    readable: bool,
    writable: bool,
    /// End of stream, or an error.
    closed: bool,
    /// Urgent data is pending.
    urgent: bool,
}

/// One registered socket's readiness counts and waiters (module docs). The counts are
/// atomics, so that an operation that does not wait (step 1 and 2) takes no lock; they only
/// change under `waits`'s lock, and step 3 reads them again under it.
pub(crate) struct IoState {
    waits: Mutex<Waits>,
    /// Events seen per direction (steps 1 and 3 of the protocol).
    events: [AtomicU64; 2],
    /// Per direction, the event count at which an operation found the socket drained (a read
    /// shorter than its buffer), or `u64::MAX`: while the count stays there, trying again
    /// can only say `WouldBlock` (step 1). A value older than the count means nothing.
    drained_at: [AtomicU64; 2],
    /// An event reported end of stream or an error: a short read no longer means drained.
    closed: AtomicBool,
    /// Urgent (out-of-band) TCP data came, or could come unseen: a read stops at the urgent
    /// mark once it has copied anything, with ordinary data still queued behind it, so a short
    /// read no longer means drained either (the poller reports urgent data as a priority
    /// event; where it cannot, this is raised from the start).
    urgent: AtomicBool,
}

/// Whether the poller sees urgent data arrive (epoll's `EPOLLPRI`, mio's priority interest).
const URGENT_SEEN: bool = cfg!(any(target_os = "linux", target_os = "android"));

#[derive(Default)]
struct Waits {
    waiters: [Vec<Waiter>; 2],
    /// The poller stopped: waits fail.
    gone: bool,
}

impl Default for IoState {
    fn default() -> IoState {
        IoState {
            waits: Mutex::default(),
            events: Default::default(),
            drained_at: [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)],
            closed: AtomicBool::new(false),
            urgent: AtomicBool::new(!URGENT_SEEN),
        }
    }
}

impl IoState {
    /// Step 1: the direction's event count, and whether the socket is known to be drained at
    /// it. A stale answer costs at most a retry: step 3 reads the count again under the lock.
    fn events(&self, dir: Direction) -> (u64, bool) {
        // Acquire: pairs with the release increment in `notify`, so that a count that comes
        // with an end of stream is seen with `closed` raised.
        let n = self.events[dir as usize].load(Ordering::Acquire);
        let drained = self.drained_at[dir as usize].load(Ordering::Relaxed) == n
            && !self.closed.load(Ordering::Relaxed)
            && !self.urgent.load(Ordering::Relaxed);
        (n, drained)
    }

    /// An operation that started at event count `seen` drained the socket. (If an event came
    /// since, the count has moved past `seen` and the mark means nothing.)
    fn mark_drained(&self, dir: Direction, seen: u64) {
        // Relaxed: read only by operations on this socket after this one, in the same actor
        // or ordered after it by whatever handed the socket over.
        self.drained_at[dir as usize].store(seen, Ordering::Relaxed);
    }

    /// The poller's side: bump and take the waiters of the directions the event covers.
    fn notify(&self, ev: Readiness, woken: &mut Vec<Waiter>) {
        let Readiness {
            readable,
            writable,
            closed,
            urgent,
        } = ev;
        let mut w = self.waits.lock();
        if closed {
            self.closed.store(true, Ordering::Relaxed);
        }
        if urgent {
            // Relaxed, as `closed`: published by the release increment below, or, for a
            // priority event with no readable one, read by a later step 1 after this lock
            // (a mark made before it is then stale anyway: see `events`).
            self.urgent.store(true, Ordering::Relaxed);
        }
        for (dir, ready) in [(Direction::Read, readable), (Direction::Write, writable)] {
            if ready {
                // Release: pairs with the acquire load in `events` (publishes `closed`).
                self.events[dir as usize].fetch_add(1, Ordering::Release);
                woken.append(&mut w.waiters[dir as usize]);
            }
        }
    }

    fn mark_gone(&self) {
        let woken: Vec<Waiter> = {
            let mut w = self.waits.lock();
            w.gone = true;
            let [r, wr] = &mut w.waiters;
            r.drain(..).chain(wr.drain(..)).collect()
        };
        for waiter in woken {
            waiter.wake_by_value();
        }
    }

    /// Steps 3 and 4 for an actor: returns once it may try again.
    fn wait(
        &self,
        fd: RawFd,
        dir: Direction,
        seen: u64,
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        let me = Waiter::current();
        {
            let mut w = self.waits.lock();
            if w.gone {
                return Err(driver_gone());
            }
            // Relaxed: the count only changes under this lock.
            if self.events[dir as usize].load(Ordering::Relaxed) != seen {
                return Ok(());
            }
            w.waiters[dir as usize].push(me.clone());
        }
        // Leaves the list on every way out, the unwind of a kill or shutdown included.
        struct Leave<'a>(&'a IoState, Direction, Waiter);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                let mut w = self.0.waits.lock();
                w.waiters[self.1 as usize].retain(|x| !x.same_as(&self.2));
            }
        }
        let _leave = Leave(self, dir, me);
        let on = Wait::Io {
            fd,
            write: matches!(dir, Direction::Write),
        };
        let parked = match deadline {
            None => context::park_on(on),
            Some(d) => context::park_on_until(on, d),
        };
        parked.map_err(|_| {
            io::Error::other("a socket cannot be waited on here: the actor is being cancelled")
        })
    }
}

/// A socket's registration with a runtime's poller.
struct Registration {
    driver: Arc<Driver>,
    state: Arc<IoState>,
    token: usize,
}

impl Registration {
    /// Takes `fd` out of the poller (errors ignored: the poller may be closed already).
    fn deregister(&self, fd: RawFd) {
        let _ = self.driver.registry.deregister(&mut SourceFd(&fd));
        self.driver.sources.lock().try_remove(self.token);
    }
}

/// A non-blocking socket and its registration (module docs).
pub(crate) struct PollSource<S: AsRawFd> {
    io: S,
    /// Made on the first wait inside an actor, with that actor's runtime. A registration that
    /// fails (no descriptor left for the poller, say) is not kept: that wait reports the error,
    /// and the next one tries again.
    registration: OnceLock<Registration>,
    /// A registration with a later runtime, made when an actor of that runtime waits on the
    /// socket after the first one's poller stopped (module docs, "A socket that moves"). Its
    /// lock also serialises the making of the first registration.
    moved: Mutex<Option<Registration>>,
    /// Raised (release) once `moved` has been set: until then, operations take the first
    /// registration without the lock.
    is_moved: AtomicBool,
}

impl<S: AsRawFd> PollSource<S> {
    pub(crate) fn new(io: S) -> PollSource<S> {
        PollSource {
            io,
            registration: OnceLock::new(),
            moved: Mutex::new(None),
            is_moved: AtomicBool::new(false),
        }
    }

    pub(crate) fn get_ref(&self) -> &S {
        &self.io
    }

    /// Runs `op` until it does not say `WouldBlock`, waiting for `dir` readiness in between
    /// (the readiness protocol); `deadline` bounds the waits (`TimedOut` past it).
    pub(crate) fn io<R>(
        &self,
        dir: Direction,
        deadline: Option<Instant>,
        op: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        self.io_drains(dir, deadline, op, |_| false)
    }

    /// [`io`](PollSource::io) for an operation that can tell when it drained the socket
    /// (`drained`: a read shorter than its buffer). After such an operation, an actor's next
    /// one waits for an event without trying first: one system call fewer per message in a
    /// request/response exchange. (The kernel reports an edge for anything that arrives
    /// after the drain, so nothing is missed; module docs, step 1.)
    pub(crate) fn io_drains<R>(
        &self,
        dir: Direction,
        deadline: Option<Instant>,
        mut op: impl FnMut(&S) -> io::Result<R>,
        drained: impl Fn(&R) -> bool,
    ) -> io::Result<R> {
        loop {
            // Step 1.
            let registered = self.current_state();
            let (seen, known_drained) = registered.as_ref().map_or((0, false), |s| s.events(dir));
            // Step 2, unless known to be futile for an actor (a plain thread does not wait
            // through the poller, so it always tries).
            let skip = known_drained && context::current().is_some();
            if !skip {
                match op(&self.io) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Ok(r) => {
                        if let Some(state) = registered
                            && drained(&r)
                        {
                            state.mark_drained(dir, seen);
                        }
                        return Ok(r);
                    }
                    done => return done,
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(timed_out());
            }
            match context::current_io() {
                // A plain thread: block in poll(2) on this socket alone.
                None => poll_fd(self.io.as_raw_fd(), dir, deadline)?,
                // Steps 3 and 4.
                Some(driver) => {
                    let fd = self.io.as_raw_fd();
                    let (state, theirs) = self.registration(driver)?;
                    // A registration other than the one step 1 read (the socket just moved to
                    // this runtime's poller): `seen` counts the old one's events, so start
                    // over at step 1 with the new one.
                    if registered.is_some_and(|r| !Arc::ptr_eq(&r, &state)) {
                        continue;
                    }
                    match state.wait(fd, dir, seen, deadline) {
                        // Another runtime's poller, which stopped meanwhile: the next round
                        // moves the socket to this actor's runtime.
                        Err(e) if theirs && is_driver_gone(&e) => {}
                        waited => waited?,
                    }
                }
            }
        }
    }

    /// The readiness state operations use now: the first registration's, or the later one's
    /// once the socket has moved; `None` before any.
    fn current_state(&self) -> Option<Cow<'_, Arc<IoState>>> {
        // Acquire: pairs with the release store in `registration` (`moved` is set).
        if self.is_moved.load(Ordering::Acquire) {
            return self
                .moved
                .lock()
                .as_ref()
                .map(|r| Cow::Owned(r.state.clone()));
        }
        self.registration.get().map(|r| Cow::Borrowed(&r.state))
    }

    /// Step 3's registration, made now if this is the first wait in an actor, for an actor of
    /// the runtime whose poller is `driver`: the state to wait on, and whether it belongs to
    /// another runtime's poller (module docs, "A socket that moves").
    fn registration(
        &self,
        driver: io::Result<Arc<Driver>>,
    ) -> io::Result<(Cow<'_, Arc<IoState>>, bool)> {
        let fd = self.io.as_raw_fd();
        let mut driver = Some(driver);
        let first = match self.registration.get() {
            Some(first) => first,
            None => {
                // Two first waits at once (from actors on two workers) must not both register:
                // the second would fail (the descriptor is in the poller already).
                let _first_wait = self.moved.lock();
                if self.registration.get().is_none() {
                    // A failure is this wait's error, with its cause (EMFILE, say), and is not
                    // kept: a shortage of descriptors may pass, and the next wait tries again.
                    let d = driver.take().expect("taken only here");
                    let r = d?.register(fd)?;
                    let _ = self.registration.set(r);
                }
                self.registration
                    .get()
                    .expect("set under the lock, now or by another first wait")
            }
        };
        // Just registered with this actor's runtime; or this actor's runtime has no poller to
        // offer (shutting down): the first registration answers.
        let Some(Ok(mine)) = driver else {
            return Ok((Cow::Borrowed(&first.state), false));
        };
        let theirs = |r: &Registration| !Arc::ptr_eq(&r.driver, &mine);
        // Registered here (its waits fail once this runtime has stopped), or with another
        // runtime whose poller still runs: that poller wakes actors of any runtime.
        let usable = |r: &Registration| !theirs(r) || !r.driver.is_gone();
        if !self.is_moved.load(Ordering::Acquire) && usable(first) {
            return Ok((Cow::Borrowed(&first.state), theirs(first)));
        }
        let mut moved = self.moved.lock();
        if let Some(r) = moved.as_ref()
            && usable(r)
        {
            return Ok((Cow::Owned(r.state.clone()), theirs(r)));
        }
        // The poller it waits on is another runtime's, which stopped: this actor's runtime
        // takes the socket over.
        let r = mine.register(fd)?;
        let state = r.state.clone();
        if let Some(old) = moved.replace(r) {
            old.deregister(fd);
            // Its poller stopped, but may not have marked it gone yet (`mark_all_gone`
            // collects its sockets after raising `gone`), and it is out of that poller's list
            // now: wake whoever still waits on it, to wait again here.
            old.state.mark_gone();
        }
        // Release: pairs with the acquire loads in `current_state` and above.
        self.is_moved.store(true, Ordering::Release);
        Ok((Cow::Owned(state), false))
    }
}

impl<S: AsRawFd> Drop for PollSource<S> {
    fn drop(&mut self) {
        let fd = self.io.as_raw_fd();
        if let Some(r) = self.registration.get() {
            r.deregister(fd);
        }
        if let Some(r) = self.moved.get_mut().take() {
            r.deregister(fd);
        }
        // Then `io` drops, closing the socket.
    }
}

/// Blocks this (plain) thread until `fd` is ready for `dir`, or the deadline passes.
fn poll_fd(fd: RawFd, dir: Direction, deadline: Option<Instant>) -> io::Result<()> {
    let events = match dir {
        Direction::Read => libc::POLLIN,
        Direction::Write => libc::POLLOUT,
    };
    loop {
        let timeout_ms: libc::c_int = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(timed_out());
                }
                // Rounded up, so that a wake is never early.
                let ms = left.as_nanos().div_ceil(1_000_000);
                ms.min(libc::c_int::MAX as u128) as libc::c_int
            }
        };
        let mut pfd = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid `pollfd` on this stack, and the count passed is 1; poll
        // writes only its `revents`.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        match n {
            n if n > 0 => return Ok(()),
            0 => {} // timed out: the loop's deadline check answers
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// The error of a wait that passed its deadline.
pub(crate) fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the socket operation timed out")
}

fn driver_gone() -> io::Error {
    io::Error::other(DriverGone)
}

/// Whether `e` is `driver_gone`'s error.
fn is_driver_gone(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<DriverGone>())
}

/// The error of a wait on the poller of a runtime that has shut down.
#[derive(Debug)]
struct DriverGone;

impl std::fmt::Display for DriverGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the runtime whose I/O poller this socket waits on has shut down")
    }
}

impl std::error::Error for DriverGone {}
