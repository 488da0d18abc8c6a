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
//! 4. A slice that lasts `LONG_RUN_SLICES` slices is reported once, through the runtime's
//!    long-run hook: the actor runs a loop with no safe point, or a blocking call. It is only
//!    reported, not preempted: nothing can stop code that never reaches a safe point.
//!
//! The flag is advisory: raising it late or reading it late only delays a switch, and a flag
//! left up when the actor parks is lowered by the next slice (step 1).
//!
//! # Sleeping
//!
//! The monitor sleeps on a condition variable until the earliest of: the next sample (only
//! while some worker is running an actor and time slices are on) and the next timer deadline.
//! With every worker idle it stops sampling and sleeps until the next timer, or until kicked:
//! a new earliest timer, or a worker that starts running after being idle, kicks it. The
//! monitor raises its `not_sampling` flag and then re-reads every worker's slice; a worker publishes its
//! slice and then reads the flag (both `SeqCst`), so one of them sees the other: the monitor
//! never sleeps indefinitely while an actor runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::actor::ActorId;
use crate::runtime::Shared;

/// A slice that lasts this many time slices without a switch is reported (step 4).
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
/// assert_eq!(report.worker, 0);
/// assert_eq!(report.time_slice, Duration::from_millis(1));
/// assert!(report.running_for >= report.time_slice * LONG_RUN_SLICES);
/// h.join().unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct LongRun {
    /// The actor.
    pub actor: ActorId,
    /// The worker it runs on.
    pub worker: usize,
    /// How long it had run when reported.
    pub running_for: Duration,
    /// The runtime's time slice.
    pub time_slice: Duration,
}

/// What the runtime calls on a [`LongRun`]; set with `Builder::on_long_run`.
pub type LongRunHook = Arc<dyn Fn(&LongRun) + Send + Sync>;

/// The default hook: one line on stderr.
pub(crate) fn default_long_run_hook() -> LongRunHook {
    Arc::new(|r: &LongRun| {
        eprintln!(
            "threadlet: actor {} has run for {} ms on worker {} without reaching a safe point \
             (time slice {} ms): call threadlet::checkpoint() in its loops, or move blocking \
             calls off the runtime",
            r.actor,
            r.running_for.as_millis(),
            r.worker,
            r.time_slice.as_millis()
        )
    })
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
            self.not_sampling.store(true, Ordering::SeqCst);
        }
        let deadline = if !sampling && busy() {
            let capped = Instant::now() + period;
            Some(deadline.map_or(capped, |d| d.min(capped)))
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
    reported: bool,
}

/// The monitor thread's body. Holds the runtime weakly, so it never keeps it alive.
pub(crate) fn run(shared: Weak<Shared>) {
    let mut samples: Vec<Sample> = Vec::new();
    loop {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if shared.is_shutdown() {
            return;
        }
        let now = Instant::now();
        let next_timer = shared.timers.fire_due(now);
        let any_running = sample(&shared, &mut samples, now);
        let period = shared
            .config
            .time_slice
            .map_or(Duration::from_secs(3600), |s| {
                (s / 4).max(MIN_SAMPLE_PERIOD)
            });
        let next_sample = any_running.then(|| now + period);
        let wake_at = match (next_timer, next_sample) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let slices_on = shared.config.time_slice.is_some();
        let busy = || {
            slices_on
                && shared
                    .remotes
                    .iter()
                    .any(|r| r.slice.load(Ordering::SeqCst) != 0)
        };
        shared
            .monitor
            .sleep(wake_at, next_sample.is_some(), busy, period);
    }
}

/// Steps 2 and 4 for every worker. Returns whether any worker is running an actor.
fn sample(shared: &Shared, samples: &mut Vec<Sample>, now: Instant) -> bool {
    let Some(slice) = shared.config.time_slice else {
        return false;
    };
    samples.resize(
        shared.remotes.len(),
        Sample {
            slice: 0,
            since: now,
            preempted: false,
            reported: false,
        },
    );
    let mut any_running = false;
    for (index, (remote, s)) in shared.remotes.iter().zip(samples.iter_mut()).enumerate() {
        let current = remote.slice.load(Ordering::Relaxed);
        if current == 0 {
            s.slice = 0;
            continue;
        }
        any_running = true;
        if current != s.slice {
            *s = Sample {
                slice: current,
                since: now,
                preempted: false,
                reported: false,
            };
            continue;
        }
        let ran = now.saturating_duration_since(s.since);
        if ran >= slice && !s.preempted {
            remote.request_preempt();
            s.preempted = true;
        }
        if ran >= slice * LONG_RUN_SLICES && !s.reported {
            s.reported = true;
            let report = LongRun {
                actor: ActorId(remote.running_actor.load(Ordering::Relaxed)),
                worker: index,
                running_for: ran,
                time_slice: slice,
            };
            (shared.config.long_run_hook)(&report);
        }
    }
    any_running
}
