//! The monitor: one background thread per runtime (Go's `sysmon`) that preempts actors which
//! hold their worker too long, reports actors that never reach a safe point, and fires timers.
//!
//! # Preemption protocol
//!
//! 1. A worker starts a new *time slice* whenever it runs an actor taken from anywhere but its
//!    next slot: it bumps its slice number, publishes it in `Remote::slice`, and lowers its
//!    preempt flag. Runs out of the next slot (a ping-pong chain of wakes) continue the slice,
//!    so two actors messaging each other share one slice, as in Go. An idle worker publishes 0.
//! 2. The monitor samples every worker's slice number each `sample period` (a quarter of the
//!    time slice). It remembers when it first saw each number; a worker whose number has not
//!    changed for a whole time slice gets its preempt flag raised, once per slice.
//! 3. The running actor reads the flag at its next safe point (`checkpoint`, `yield_now`, any
//!    mailbox or channel operation) with one relaxed load, and yields: it goes to the back of
//!    its worker's local queue, never to the next slot.
//! 4. A slice that lasts `HANDOFF_SLICES` slices, while its thread was mostly off the CPU
//!    (its thread CPU clock advanced less than an eighth as much) and not for want of one (its
//!    thread is asleep in the kernel now, not runnable and starved on a crowded machine), gets
//!    a spare worker, if one is free, to run the actors that may move while this one is stuck
//!    (`spare.rs`). A spare stuck that way gets another one, if one is free.
//! 5. A slice that lasts `LONG_RUN_SLICES` slices, of which the last `LONG_RUN_SLICES - 1`
//!    came after step 1 asked its actor to yield, is reported once, through the runtime's
//!    long-run hook: the actor runs a loop with no safe point, or a blocking call. (Counted
//!    from the request too: a monitor that came late, taken off its CPU or busy in a timer
//!    callback or a slow hook, has asked nothing, and the actor may have passed millions of
//!    safe points meanwhile. A worker that waits for the GIL baseline's lock shows as idle
//!    meanwhile, as it runs nothing.) It is only
//!    reported, not preempted: nothing can stop code that never reaches a safe point. The
//!    report names the actor running at that moment by id and, if it has one, by name (see
//!    `running_on`).
//!
//! The flag is advisory: raising it late or reading it late only delays a switch, and a flag
//! left up when the actor parks is lowered by the next slice (step 1).
//!
//! All the monitor's time arithmetic saturates: a time slice too long to add to an `Instant`
//! (up to `Duration::MAX`) simply never preempts and is never reported. The sample period is
//! a quarter of the slice, clamped to between `MIN_SAMPLE_PERIOD` and `MAX_SAMPLE_PERIOD`.
//!
//! # Containment
//!
//! The monitor runs user code: `call_at` and `send_after` callbacks (and the destructors of
//! those it drops unrun), and the long-run hook. Each runs under `fault::contain`, so a panic
//! there is reported on stderr and the monitor carries on: timers still fire and actors are
//! still preempted. A panic anywhere else in the monitor's loop is a runtime bug; rather than
//! let the thread die silently (and every timer with it), `AbortOnUnwind` aborts the process
//! with a message naming the thread (`fault::AbortOnUnwind`).
//!
//! # Sleeping
//!
//! The monitor sleeps on a condition variable until the earliest of: the next sample (only
//! while some worker is running an actor and time slices are on; with them off, while a
//! worker runs and the runtime has a poller, which is all it then looks at) and the next
//! timer deadline.
//! With every worker idle it stops sampling and sleeps until the next timer, or until kicked:
//! a new earliest timer, or a worker that starts running after being idle, kicks it. The
//! monitor raises its `not_sampling` flag and then re-reads every worker's slice; a worker publishes its
//! slice and then reads the flag (both `SeqCst`), so one of them sees the other: the monitor
//! never sleeps indefinitely while an actor runs.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::actor::ActorId;
use crate::deadlock::Recheck;
use crate::fault;
use crate::fault::AbortOnUnwind;
use crate::runtime::Shared;
use crate::spare::HANDOFF_SLICES;
use crate::worker::Remote;

/// A slice that lasts this many time slices without a switch, all but the first after the
/// monitor asked its actor to yield, is reported (step 5).
///
/// ```
/// use std::time::Duration;
/// use threadlet_runtime::{DEFAULT_TIME_SLICE, LONG_RUN_SLICES};
///
/// // With the default 10 ms slice, an actor is reported after 100 ms without a safe point.
/// assert_eq!(DEFAULT_TIME_SLICE * LONG_RUN_SLICES, Duration::from_millis(100));
/// ```
pub const LONG_RUN_SLICES: u32 = 10;

/// The shortest sample period: below a millisecond the monitor would cost more than it saves.
const MIN_SAMPLE_PERIOD: Duration = Duration::from_millis(1);

/// The longest sample period: a long time slice is still checked every second, so that its
/// preemption and report come at most a second late, and no deadline comes near the end of
/// `Instant`'s range.
const MAX_SAMPLE_PERIOD: Duration = Duration::from_secs(1);

/// How often a runtime with time slices off looks at its poller while a worker runs (see
/// `run`): as often as one with the default slice samples, so that readiness waits no longer.
const IO_WATCH_PERIOD: Duration = Duration::from_micros(2_500);

/// The monitor's sample period for a time slice (step 2), or for time slices off.
fn sample_period(slice: Option<Duration>) -> Duration {
    slice.map_or(MAX_SAMPLE_PERIOD, |s| {
        (s / 4).clamp(MIN_SAMPLE_PERIOD, MAX_SAMPLE_PERIOD)
    })
}

/// An actor that ran far past its time slice without reaching a safe point.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::mpsc;
/// use std::time::Duration;
/// use threadlet_runtime::{LONG_RUN_SLICES, LongRun, Runtime};
///
/// let (tx, rx) = mpsc::channel::<LongRun>();
/// let rt = Runtime::builder()
///     .workers(1)
///     .time_slice(Duration::from_millis(1))
///     .on_long_run(move |lr| {
///         let _ = tx.send(lr.clone());
///     })
///     .build()
///     .unwrap();
/// let stop = Arc::new(AtomicBool::new(false));
/// let s = stop.clone();
/// // A loop with no safe point: it is reported, not preempted.
/// let h = rt.spawn(move || {
///     while !s.load(Ordering::Relaxed) {
///         std::hint::spin_loop();
///     }
/// });
/// let report = rx.recv().unwrap();
/// stop.store(true, Ordering::Relaxed);
/// assert_eq!(report.actor, h.id());
/// assert_eq!(report.name, None); // an unnamed actor
/// assert_eq!(report.worker, 0);
/// assert_eq!(report.time_slice, Duration::from_millis(1));
/// assert!(report.running_for >= report.time_slice * LONG_RUN_SLICES);
/// h.join().unwrap();
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LongRun {
    /// The actor.
    pub actor: ActorId,
    /// Its name, if it has one (from the runtime's registry of named actors).
    pub name: Option<String>,
    /// The worker it runs on.
    pub worker: usize,
    /// How long it had held the worker when reported (the whole time slice so far, which a
    /// chain of actors waking each other shares).
    pub running_for: Duration,
    /// The runtime's time slice.
    pub time_slice: Duration,
    /// Other actors pinned to this worker that are runnable (stopped mid-run by a preemption
    /// or a yield, or woken and not run yet), with their names: the worker cannot run them
    /// while it is held. If the reported actor waits for a lock (a `std::sync::Mutex` held
    /// across a safe point), one of these holds it; if this is empty, the lock, if any, is held
    /// elsewhere.
    pub stopped_here: Vec<(ActorId, Option<String>)>,
    /// The spare worker brought in to run this worker's stealable actors meanwhile
    /// (`Builder::spare_workers`), by its index (after the workers'), if one was.
    pub spare: Option<usize>,
    /// How much of `running_for` the worker's thread spent on a CPU, where the kernel tells
    /// (Linux): near all of it for a loop with no safe point; little for a blocking system
    /// call, or for a thread the machine kept off its CPU (an overloaded machine: then its
    /// actor reached no safe point because it did not run).
    pub on_cpu: Option<Duration>,
}

impl LongRun {
    /// The default hook's words on `stopped_here`: who may hold a lock the actor waits for.
    pub fn lock_holders(&self) -> String {
        if self.stopped_here.is_empty() {
            return "no other actor is stopped mid-run on this worker, so a lock it may wait \
                    for is not held by one of them"
                .to_string();
        }
        let names: Vec<String> = self
            .stopped_here
            .iter()
            .map(|(id, name)| id.labelled(name.as_deref()))
            .collect();
        format!(
            "if it waits for a lock, the holder is one of the actors stopped mid-run on this \
             worker: {}",
            names.join(", ")
        )
    }
}

impl fmt::Display for LongRun {
    /// The default hook's line, without the advice.
    ///
    /// ```
    /// # use std::sync::mpsc;
    /// # use std::time::{Duration, Instant};
    /// # use threadlet_runtime::{LongRun, Runtime};
    /// # let (tx, rx) = mpsc::channel::<LongRun>();
    /// # let rt = Runtime::builder()
    /// #     .workers(1)
    /// #     .time_slice(Duration::from_millis(1))
    /// #     .on_long_run(move |lr| { let _ = tx.send(lr.clone()); })
    /// #     .build()
    /// #     .unwrap();
    /// # let h = rt.spawn(|| {
    /// #     let t = Instant::now();
    /// #     while t.elapsed() < Duration::from_millis(100) { std::hint::spin_loop(); }
    /// # });
    /// let report: LongRun = rx.recv().unwrap(); // as in `LongRun`'s example
    /// let line = report.to_string();
    /// assert!(line.starts_with(&format!("actor {} has held worker 0 for ", report.actor)));
    /// assert!(line.contains("without reaching a safe point (time slice 1 ms"));
    /// # h.join().unwrap();
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "actor {}", self.actor)?;
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        write!(
            f,
            " has held worker {} for {} ms without reaching a safe point (time slice {} ms",
            self.worker,
            self.running_for.as_millis(),
            self.time_slice.as_millis()
        )?;
        match self.on_cpu {
            Some(cpu) => write!(f, "; its thread on a CPU for {} ms of it)", cpu.as_millis()),
            None => f.write_str(")"),
        }
    }
}

/// What the runtime calls on a [`LongRun`]; set with `Builder::on_long_run`.
pub type LongRunHook = Arc<dyn Fn(&LongRun) + Send + Sync>;

/// The default hook: one line on stderr.
pub(crate) fn default_long_run_hook() -> LongRunHook {
    Arc::new(|r: &LongRun| {
        let spare = match r.spare {
            Some(s) => format!("; spare worker {s} runs its other actors that may move"),
            None => String::new(),
        };
        eprintln!(
            "threadlet: {r}: call threadlet::checkpoint() in its loops, or move blocking calls \
             off the runtime; {}{spare}",
            r.lock_holders()
        )
    })
}

/// The id and name of the actor running on `remote`, for a long-run report. The worker
/// publishes only the id (one relaxed store per run); the name comes from the runtime's
/// registry of named actors, which costs only named actors anything (`actor::ActorNames`).
/// An actor that ended meanwhile is reported without its name. `None` before the worker has
/// published any id (0).
fn running_on(shared: &Shared, remote: &Remote) -> Option<(ActorId, Option<String>)> {
    // Relaxed: the id is a plain number, read for a report; no other memory depends on it.
    let id = ActorId(NonZeroU64::new(
        remote.running_actor.load(Ordering::Relaxed),
    )?);
    Some((id, shared.names.get(id).map(|n| n.to_string())))
}

/// A thread that used less than this share of the time on a CPU is blocked, not computing:
/// a thread blocked in the kernel uses next to nothing, while a busy one on a crowded machine
/// may get much less than all of a core, but seldom less than an eighth. (One that does, on a
/// very crowded machine, is still runnable: `blocked_now` tells it apart.)
const OFF_CPU_SHARE: u32 = 8;

/// Whether the worker's thread spent less than `1 / OFF_CPU_SHARE` of the `ran` since
/// `cpu_at_start` on a CPU: blocked in the kernel (a sleep, a read), not computing. A busy
/// thread gets no spare: one more thread on the same cores would only slow it down.
/// Unreadable clocks say no.
fn off_cpu(remote: &Remote, cpu_at_start: Option<Duration>, ran: Duration) -> bool {
    match (cpu_at_start, remote.thread_cpu_time()) {
        (Some(start), Some(now)) => now.saturating_sub(start) * OFF_CPU_SHARE < ran,
        _ => false,
    }
}

/// Whether a worker's thread, seen off the CPU, is blocked in the kernel now rather than
/// waiting for a CPU (runnable, on a crowded machine or under a CPU quota). A starved thread
/// looks as far off the CPU as a blocked one, but it is busy: a spare would be one more thread
/// waiting for the same CPUs. A thread blocked in many short calls may be caught runnable at
/// one sample; the next one finds it asleep. Where the thread's state cannot be read, it
/// counts as blocked, as the CPU time alone says.
pub(crate) fn blocked_now(remote: &Remote) -> bool {
    remote.is_runnable() != Some(true)
}

/// Started actors pinned to worker `index`, other than `running`, that are runnable: stopped
/// mid-run and waiting for that worker (`LongRun::stopped_here`). Walks the live actors, one
/// shard lock at a time: a long-run report is rare.
fn stopped_on(shared: &Shared, index: usize, running: ActorId) -> Vec<(ActorId, Option<String>)> {
    let mut found = Vec::new();
    shared.live.for_each(|cell| {
        if cell.id != running
            && cell.home() == Some(index)
            && cell.state.phase() == crate::wake::Phase::Scheduled
        {
            found.push((cell.id, cell.name().map(|n| n.to_string())));
        }
    });
    found.sort_unstable_by_key(|(id, _)| *id);
    found
}

/// The monitor's side of the runtime: its wake-up signal.
#[derive(Default)]
pub(crate) struct MonitorSignal {
    kicked: Mutex<bool>,
    cv: Condvar,
    /// The monitor is not sampling workers (it saw them all idle): a worker that starts
    /// running must kick it.
    not_sampling: AtomicBool,
}

impl MonitorSignal {
    /// Wakes the monitor to re-plan its sleep.
    pub(crate) fn kick(&self) {
        *self.kicked.lock() = true;
        self.cv.notify_one();
    }

    /// Called by a worker that starts running after being idle, *after* it published its new
    /// slice: cheap unless the monitor sleeps indefinitely. With `sleep`'s re-check, this is a
    /// Dekker pair: either the monitor's re-check sees the slice, or the worker sees the flag.
    pub(crate) fn worker_active(&self) {
        // SeqCst: pairs with the store raising the flag in `sleep` (the Dekker pair above).
        if self.not_sampling.load(Ordering::SeqCst) {
            self.kick();
        }
    }

    /// Sleeps until `deadline` or a kick. When not sampling (`sampling` false) it raises the
    /// flag that makes a worker leaving idle kick it, then re-checks `busy` (some worker runs
    /// an actor) and, if so, sleeps no longer than `period`.
    fn sleep(
        &self,
        deadline: Option<Instant>,
        sampling: bool,
        busy: impl Fn() -> bool,
        period: Duration,
    ) {
        let mut kicked = self.kicked.lock();
        if !sampling {
            // SeqCst: pairs with the load in `worker_active`, against the `busy` re-check below.
            self.not_sampling.store(true, Ordering::SeqCst);
        }
        let deadline = if !sampling && busy() {
            // Saturating: a deadline past `Instant`'s range is no deadline.
            match Instant::now().checked_add(period) {
                Some(capped) => Some(deadline.map_or(capped, |d| d.min(capped))),
                None => deadline,
            }
        } else {
            deadline
        };
        if !*kicked {
            match deadline {
                Some(d) => {
                    self.cv.wait_until(&mut kicked, d);
                }
                None => self.cv.wait(&mut kicked),
            }
        }
        // SeqCst like the raising store; lowering late only costs a spare kick.
        self.not_sampling.store(false, Ordering::SeqCst);
        *kicked = false;
    }
}

/// What the monitor remembers of one worker between samples.
#[derive(Clone, Copy)]
struct Sample {
    slice: u64,
    since: Instant,
    preempted: bool,
    /// When the monitor raised this slice's preemption request (`preempted`): a long run is
    /// counted from here too, not only from the slice's start.
    requested_at: Option<Instant>,
    reported: bool,
    /// The spare brought in for this slice (`spare.rs`), if one was.
    spare: Option<usize>,
    /// The worker thread's CPU time when the slice was first seen, if readable.
    cpu_at_start: Option<Duration>,
}

/// The monitor thread's body. Holds the runtime weakly, so it never keeps it alive.
pub(crate) fn run(shared: Weak<Shared>) {
    let _abort = AbortOnUnwind::new(
        "the monitor thread (threadlet-monitor)",
        "no timer would fire again, and no actor be preempted",
    );
    let mut samples: Vec<Sample> = Vec::new();
    // When the previous sample was taken, for the CPU time it charges (`dump.rs`).
    let mut last_sample: Option<Instant> = None;
    loop {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if shared.is_shutdown() {
            return;
        }
        let now = Instant::now();
        let next_timer = crate::context::firing_timers_of(&shared, || shared.timers.fire_due(now));
        let slices_on = shared.config.time_slice.is_some();
        // With time slices off nothing is sampled, but a runtime with a poller still looks at
        // it while a worker runs: a socket registered with it may be waited on by an actor of
        // another runtime (io.rs, "A socket that moves"), whose idle workers do not poll here,
        // and a worker here that runs one actor for long would leave it waiting.
        let io_watch = !slices_on && shared.io.started().is_some();
        // Whether a worker runs an actor now (its published slice); `order`: see the uses.
        let a_worker_runs = |order| shared.remotes.iter().any(|r| r.slice.load(order) != 0);
        // Relaxed: a sample, as in `sample`.
        let any_running = sample(&shared, &mut samples, now, last_sample)
            || (io_watch && a_worker_runs(Ordering::Relaxed));
        last_sample = Some(now);
        let period = if io_watch {
            IO_WATCH_PERIOD
        } else {
            sample_period(shared.config.time_slice)
        };
        let mut recheck = Recheck::OnKick;
        if any_running {
            // Workers busy with actors that run long between turns poll I/O seldom ("Polling
            // for I/O" in `worker.rs`, step 5): look every sample, without waiting.
            shared.poll_io_now();
        } else {
            // Every worker idle: are the actors all waiting on each other? (`deadlock.rs`)
            recheck = shared.deadlock.check(&shared, shared.timers.is_pending());
        }
        let next_sample = if any_running || recheck == Recheck::NextSample {
            now.checked_add(period)
        } else {
            None
        };
        // Held off by the process-wide heap: look a period after its last timer is due (or
        // after now, if it is late: it fires on another thread), by which time it has fired.
        let recheck_at = match recheck {
            Recheck::After(due) => due.max(now).checked_add(period),
            Recheck::OnKick | Recheck::NextSample => None,
        };
        let wake_at = [next_timer, next_sample, recheck_at]
            .into_iter()
            .flatten()
            .min();
        // SeqCst: pairs with the worker's SeqCst slice store on leaving idle.
        let busy = || (slices_on || io_watch) && a_worker_runs(Ordering::SeqCst);
        shared
            .monitor
            .sleep(wake_at, next_sample.is_some(), busy, period);
    }
}

/// Steps 2, 4 and 5 for every worker. Returns whether any worker is running an actor.
fn sample(
    shared: &Arc<Shared>,
    samples: &mut Vec<Sample>,
    now: Instant,
    last_sample: Option<Instant>,
) -> bool {
    let Some(slice) = shared.config.time_slice else {
        return false;
    };
    samples.resize(
        shared.remotes.len(),
        Sample {
            slice: 0,
            since: now,
            preempted: false,
            requested_at: None,
            reported: false,
            spare: None,
            cpu_at_start: None,
        },
    );
    let mut any_running = false;
    // CPU time, by sampling (`dump.rs`): each running actor is charged the time since the
    // previous sample, at most one period (the monitor also wakes for timers and kicks, and
    // after sleeping through an idle spell it must not charge that).
    let since = last_sample.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
    let cpu = since.min(sample_period(Some(slice)));
    for (index, (remote, s)) in shared.remotes.iter().zip(samples.iter_mut()).enumerate() {
        // Relaxed: a sample of a number; a stale one only delays a preemption (see step 2).
        let current = remote.slice.load(Ordering::Relaxed);
        if current == 0 {
            s.slice = 0;
            continue;
        }
        any_running = true;
        // The clock afresh: `now` was read before the timers fired, and the hook may have run
        // for earlier workers since; a stale `now` would date a slice's start, and a request,
        // too early.
        let now = Instant::now();
        if let Some(actor) = remote.running() {
            crate::dump::charge_cpu(shared, actor, cpu);
        }
        if current != s.slice {
            *s = Sample {
                slice: current,
                since: now,
                preempted: false,
                requested_at: None,
                reported: false,
                spare: None,
                cpu_at_start: remote.thread_cpu_time(),
            };
            continue;
        }
        let ran = now.saturating_duration_since(s.since);
        if ran >= slice && !s.preempted {
            remote.request_preempt();
            s.preempted = true;
            s.requested_at = Some(now);
        }
        // An actor waits in the next slot of a worker that overran its slice: an idle worker
        // may take it (`steal_overdue_next`), once woken. At every sample while it waits, in
        // case the one woken searched before it could.
        if s.preempted && shared.policy.takes_overdue_next() && remote.next_stealer.has_free() {
            shared.notify_parked();
        }
        // Handoff (`spare.rs`, step 1): a worker stuck this long gets a spare, once per slice.
        // So does a spare: one that took an actor from a stuck worker's next slot may be stuck
        // in it the same way, with the actor that one woke last in its own next slot.
        if ran >= slice.saturating_mul(HANDOFF_SLICES)
            && s.spare.is_none()
            && off_cpu(remote, s.cpu_at_start, ran)
            && blocked_now(remote)
        {
            s.spare = shared.spares.activate(shared, index, current);
        }
        // Saturating: a huge slice is never reported (`Duration::MAX` is never reached).
        // Counted from the request too, not only from the slice's start: a slice the monitor
        // never asked to end (it was late: descheduled, or busy in a timer callback or a slow
        // hook) says nothing about safe points; its actor may have passed millions of them.
        let pending = s
            .requested_at
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        if ran >= slice.saturating_mul(LONG_RUN_SLICES)
            && pending >= slice.saturating_mul(LONG_RUN_SLICES - 1)
            && !s.reported
            && let Some((actor, name)) = running_on(shared, remote)
        {
            s.reported = true;
            let report = LongRun {
                actor,
                name,
                worker: index,
                running_for: ran,
                time_slice: slice,
                stopped_here: stopped_on(shared, index, actor),
                spare: s.spare,
                on_cpu: s
                    .cpu_at_start
                    .zip(remote.thread_cpu_time())
                    .map(|(start, now)| now.saturating_sub(start)),
            };
            let hook = &shared.config.long_run_hook;
            fault::contain("the long-run hook (Builder::on_long_run)", || hook(&report));
        }
    }
    any_running
}
