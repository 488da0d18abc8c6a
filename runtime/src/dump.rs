//! The dump: every live actor and every worker of a runtime, as one value that prints
//! ([`Runtime::dump`](crate::Runtime::dump)), and the per-actor counters behind it
//! ([`stats`](fn@crate::stats)).
//!
//! # How it is gathered
//!
//! 1. The workers: each one's state (running an actor, searching, parked) and queue depths,
//!    read from what other threads may read of it (`Remote`): relaxed loads, no lock.
//! 2. The actors: the table of live actors (`live.rs`) is read one shard at a time, copying out
//!    the weak references under that shard's lock only; no lock is held across all actors, and
//!    none while an actor is inspected.
//! 3. Each actor: its wake state, then its wait word (`wait.rs`), its counters, and, through its
//!    join packet, its mailbox's figures (`ExitSink::mailbox`, one short mailbox lock). If the
//!    actor ends and its handle and addresses are dropped during that look, the last reference
//!    to its result or its messages may be the dump's: they are then dropped on the dumping
//!    thread, contained (`mailbox_of`).
//!
//! Nothing is stopped, so the dump is a sample, not a snapshot: an actor may have moved on
//! between its state and its wait word, an actor spawned during the dump may be missing and one
//! that ended may still be listed, and queue depths may lag. Counters are exact but read at
//! slightly different moments.
//!
//! # CPU time
//!
//! Reading a clock at every run would cost more than the rest of a short run. Instead, at each
//! of its samples (every quarter of a time slice while any worker runs an actor), the monitor
//! charges the time since its previous sample, at most one sample period, to the actor each
//! worker is running then (`charge_cpu`), as a sampling profiler does. The figure is
//! statistical, to the sample period (2.5 ms with the default slice), counted in `CPU_TICK`s,
//! and stays 0 with time slices off.

use std::fmt;
use std::sync::atomic::Ordering;
use std::time::Duration;

mod signal;
pub(crate) use signal::DumpSignal;

use crate::actor::{ActorCell, ActorId};
use crate::runtime::Shared;
use crate::wait::Wait;
use crate::wake::Phase;

/// Milliseconds on the process's coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`, a few ns to
/// read, a few ms of resolution), wrapping at 2^32: when each actor was spawned, for its age.
pub(crate) fn coarse_now_ms() -> u32 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes one `timespec` through a valid pointer; a failure (no
    // such clock) leaves it zeroed, which only makes ages wrong.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    let ms = (ts.tv_sec as u64)
        .wrapping_mul(1000)
        .wrapping_add(ts.tv_nsec as u64 / 1_000_000);
    ms as u32
}

/// What kind of actor it is (`docs/actors.md`, "Two kinds of actor").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActorKind {
    /// A stackful actor (`spawn`, `spawn_actor`): its own stack, pinned to its worker once
    /// started.
    Process,
    /// A handler actor (`start`): no stack between messages.
    Handler,
}

/// Where an actor stands, as far as the dump could see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ActorState {
    /// Spawned, waiting for its first run.
    NotStarted,
    /// Ready, in a run queue (woken, yielded, or preempted).
    Runnable,
    /// Running now, on this worker if the dump found which.
    Running {
        /// The worker.
        worker: Option<usize>,
    },
    /// Suspended until something happens.
    Waiting {
        /// What it waits on.
        on: Wait,
        /// Whether a timeout bounds the wait.
        timeout: bool,
    },
    /// Ended while the dump was being taken.
    Ended,
}

impl fmt::Display for ActorState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActorState::NotStarted => write!(f, "not started"),
            ActorState::Runnable => write!(f, "runnable"),
            ActorState::Running { worker: Some(w) } => write!(f, "running on worker {w}"),
            ActorState::Running { worker: None } => write!(f, "running"),
            ActorState::Waiting { on, timeout } => {
                write!(f, "waiting on {on}")?;
                if *timeout {
                    write!(f, " (with a timeout)")?;
                }
                Ok(())
            }
            ActorState::Ended => write!(f, "ended"),
        }
    }
}

/// An actor's mailbox, as the `threadlet` crate reports it (`ExitSink::mailbox`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MailboxStats {
    /// Messages queued now.
    pub len: usize,
    /// The most messages it has held at once.
    pub high_water: usize,
    /// Messages accepted into it since it was made.
    pub received: u64,
    /// Addresses of it held by plain threads (made or cloned outside any actor): something
    /// outside the runtime could still send to it.
    pub held_outside: usize,
}

/// One actor in a [`Dump`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ActorDump {
    /// Its id.
    pub id: ActorId,
    /// Its name, if it has one.
    pub name: Option<String>,
    /// Process or handler actor.
    pub kind: ActorKind,
    /// Where it stands.
    pub state: ActorState,
    /// Its mailbox, if it has one.
    pub mailbox: Option<MailboxStats>,
    /// Times a worker ran it (wrapping at 2^32).
    pub runs: u64,
    /// Times it was preempted (wrapping at 2^32).
    pub preemptions: u64,
    /// The time it held a worker, sampled (see the module docs: 0 with time slices off).
    pub cpu_time: Duration,
    /// How long ago it was spawned (to a few milliseconds).
    pub age: Duration,
}

impl ActorDump {
    /// What it waits on, if it is waiting.
    pub fn waiting_on(&self) -> Option<Wait> {
        match self.state {
            ActorState::Waiting { on, .. } => Some(on),
            _ => None,
        }
    }

    /// `#42 "name"` or `#42`.
    pub(crate) fn label(&self) -> String {
        self.id.labelled(self.name.as_deref())
    }
}

impl fmt::Display for ActorDump {
    /// One line: `actor #42 "name" (process): waiting on its mailbox; mailbox 0 (high 3,
    /// received 7); 8 runs, 0 preemptions, cpu 0 ms, age 1204 ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ActorKind::Process => "process",
            ActorKind::Handler => "handler",
        };
        write!(f, "actor {} ({kind}): {}", self.label(), self.state)?;
        if let Some(m) = &self.mailbox {
            write!(
                f,
                "; mailbox {} (high {}, received {}",
                m.len, m.high_water, m.received
            )?;
            if m.held_outside > 0 {
                write!(f, ", {} addresses outside", m.held_outside)?;
            }
            write!(f, ")")?;
        }
        write!(
            f,
            "; {} runs, {} preemptions, cpu {} ms, age {} ms",
            self.runs,
            self.preemptions,
            self.cpu_time.as_millis(),
            self.age.as_millis()
        )
    }
}

/// What a worker was doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkerState {
    /// Running an actor.
    Running {
        /// The actor.
        actor: ActorId,
    },
    /// Awake without an actor: looking for work, or between two runs.
    Searching,
    /// Asleep (on its parker, or in the I/O poll).
    Parked,
}

/// One worker in a [`Dump`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WorkerDump {
    /// Its index.
    pub index: usize,
    /// A spare worker (`Builder::spare_workers`), listed after the workers.
    pub spare: bool,
    /// What it was doing.
    pub state: WorkerState,
    /// Actors in its stealable queues (its deque, its fresh queue, the actors placed on it and
    /// not started, and its free FIFO); under the global-queue baseline, in its pinned FIFO.
    pub queued: usize,
    /// Pinned actors woken by other threads, not yet taken in.
    pub inbox: usize,
}

impl fmt::Display for WorkerDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.spare { "spare" } else { "worker" };
        write!(f, "{what} {}: ", self.index)?;
        match self.state {
            WorkerState::Running { actor } => write!(f, "running actor {actor}")?,
            WorkerState::Searching => write!(f, "searching")?,
            WorkerState::Parked => write!(f, "parked")?,
        }
        write!(f, "; {} queued, {} in its inbox", self.queued, self.inbox)
    }
}

/// Every live actor and every worker of a runtime, from
/// [`Runtime::dump`](crate::Runtime::dump). `Display` prints it as a report; the fields are
/// there to be searched. See the module docs of `dump.rs` for what may be stale.
///
/// ```
/// use threadlet_runtime::{ActorState, Runtime, SpawnOptions, Wait};
///
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let sleeper = rt
///     .spawn_with(SpawnOptions::new().name("napper"), || {
///         threadlet_runtime::sleep(std::time::Duration::from_secs(60))
///     })
///     .unwrap();
/// let id = sleeper.id();
/// let dump = loop {
///     let d = rt.dump();
///     if matches!(d.actor(id).map(|a| a.state), Some(ActorState::Waiting { .. })) {
///         break d;
///     }
///     std::thread::yield_now();
/// };
/// let a = dump.actor(id).unwrap();
/// assert_eq!(a.name.as_deref(), Some("napper"));
/// assert!(matches!(a.waiting_on(), Some(Wait::Sleep { .. })));
/// assert_eq!(dump.workers.iter().filter(|w| !w.spare).count(), 2); // and 2 spares after them
/// let text = dump.to_string();
/// assert!(text.starts_with("threadlet dump: 2 workers (and 2 spares), "), "{text}");
/// assert!(text.contains("actor #"));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Dump {
    /// The workers, by index.
    pub workers: Vec<WorkerDump>,
    /// Actors spawned from outside the runtime, not yet taken by a worker; under the
    /// global-queue baseline, every actor in its shared FIFO (any worker may take them).
    pub injected: usize,
    /// Every live actor, by id.
    pub actors: Vec<ActorDump>,
}

impl Dump {
    /// The actor with this id, if it was live.
    pub fn actor(&self, id: ActorId) -> Option<&ActorDump> {
        self.actors
            .binary_search_by_key(&id, |a| a.id)
            .ok()
            .map(|i| &self.actors[i])
    }
}

impl fmt::Display for Dump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let spares = self.workers.iter().filter(|w| w.spare).count();
        write!(f, "threadlet dump: {} workers", self.workers.len() - spares)?;
        if spares > 0 {
            write!(f, " (and {spares} spares)")?;
        }
        writeln!(
            f,
            ", {} actors, {} waiting in the shared queue",
            self.actors.len(),
            self.injected
        )?;
        for w in &self.workers {
            writeln!(f, "  {w}")?;
        }
        for a in &self.actors {
            writeln!(f, "  {a}")?;
        }
        Ok(())
    }
}

/// Counters of one actor, from [`stats`](fn@crate::stats).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ActorStats {
    /// Times a worker ran it (wrapping at 2^32).
    pub runs: u64,
    /// Times it was preempted (wrapping at 2^32).
    pub preemptions: u64,
    /// The time it held a worker, sampled (see `Runtime::dump`).
    pub cpu_time: Duration,
    /// How long ago it was spawned.
    pub age: Duration,
    /// Its mailbox, if it has one.
    pub mailbox: Option<MailboxStats>,
}

/// The counters of the live actor `id` of the calling actor's runtime (`None` if there is no
/// such actor, or on a plain thread: use [`Handle::stats`](crate::Handle::stats) there).
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
/// let runs = rt.block_on(|| {
///     let me = threadlet_runtime::current().unwrap();
///     threadlet_runtime::yield_now(); // a second run
///     threadlet_runtime::stats(me).unwrap().runs
/// });
/// assert_eq!(runs, 2);
/// ```
pub fn stats(id: ActorId) -> Option<ActorStats> {
    crate::context::current_shared().and_then(|s| actor_stats(&s, id))
}

pub(crate) fn actor_stats(shared: &Shared, id: ActorId) -> Option<ActorStats> {
    let cell = shared.live.get(id)?;
    let now = coarse_now_ms();
    let a = inspect(&cell, now);
    Some(ActorStats {
        runs: a.runs,
        preemptions: a.preemptions,
        cpu_time: a.cpu_time,
        age: a.age,
        mailbox: a.mailbox,
    })
}

/// Gathers a dump (steps 1 to 3 of the module docs).
pub(crate) fn dump(shared: &Shared) -> Dump {
    let (in_global_queue, pinned_in_global_queue) = shared.policy.global_queue_lens();
    let workers = shared
        .remotes
        .iter()
        .enumerate()
        .map(|(index, r)| WorkerDump {
            index,
            spare: index >= shared.spares.first,
            state: match r.running() {
                Some(actor) => WorkerState::Running { actor },
                None if r.is_parked() => WorkerState::Parked,
                None => WorkerState::Searching,
            },
            queued: r.stealable_len() + pinned_in_global_queue.get(index).unwrap_or(&0),
            inbox: r.inbox.len(),
        })
        .collect::<Vec<_>>();
    let now = coarse_now_ms();
    let mut actors = Vec::new();
    shared.live.for_each(|cell| {
        let mut a = inspect(cell, now);
        if let ActorState::Running { worker } = &mut a.state {
            *worker = workers
                .iter()
                .find(|w| w.state == WorkerState::Running { actor: a.id })
                .map(|w| w.index);
        }
        actors.push(a);
    });
    actors.sort_unstable_by_key(|a| a.id);
    Dump {
        workers,
        injected: shared.injector.len() + in_global_queue,
        actors,
    }
}

/// Step 3 for one actor.
pub(crate) fn inspect(cell: &ActorCell, now_ms: u32) -> ActorDump {
    let kind = if cell.is_handler() {
        ActorKind::Handler
    } else {
        ActorKind::Process
    };
    let state = match cell.state.phase() {
        Phase::Done => ActorState::Ended,
        Phase::Running => ActorState::Running { worker: None },
        // A hint for a report (module docs).
        Phase::Scheduled if kind == ActorKind::Process && !cell.has_started() => {
            ActorState::NotStarted
        }
        Phase::Scheduled => ActorState::Runnable,
        Phase::Idle => {
            let (on, timeout) = cell.wait.get().unwrap_or((Wait::Parked, false));
            ActorState::Waiting { on, timeout }
        }
    };
    ActorDump {
        id: cell.id,
        name: cell.name().map(|n| n.to_string()),
        kind,
        state,
        mailbox: mailbox_of(cell),
        runs: u64::from(cell.runs.load(Ordering::Relaxed)),
        preemptions: u64::from(cell.preemptions.load(Ordering::Relaxed)),
        cpu_time: CPU_TICK * cell.cpu_ticks.load(Ordering::Relaxed),
        age: Duration::from_millis(u64::from(now_ms.wrapping_sub(cell.born_ms))),
    }
}

/// The mailbox figures of an actor, through its join packet and the packet's exit sink. The
/// packet and the mailbox are upgraded for the look: if the actor's handle and addresses are
/// dropped meanwhile, the last reference (and the result or messages it owns) drops here, on
/// the looking thread. So that user code there can never take down the monitor, the look runs
/// contained, as the monitor's timer callbacks do (`fault::contain`).
pub(crate) fn mailbox_of(cell: &ActorCell) -> Option<MailboxStats> {
    crate::fault::contain(
        format_args!("a diagnostic look at actor {}", cell.id),
        || cell.exit.upgrade().and_then(|p| p.mailbox()),
    )
    .flatten()
}

/// The unit of an actor's CPU time: fine enough that a sample period of a millisecond or two
/// is not rounded away, coarse enough that 32 bits hold 119 hours.
pub(crate) const CPU_TICK: Duration = Duration::from_micros(100);

/// Charges `elapsed` of CPU time to the actor `id`, running on a worker at the monitor's
/// sample (see "CPU time" in the module docs).
pub(crate) fn charge_cpu(shared: &Shared, id: ActorId, elapsed: Duration) {
    let ticks = u32::try_from(elapsed.as_micros() / CPU_TICK.as_micros()).unwrap_or(u32::MAX);
    if ticks == 0 {
        return;
    }
    if let Some(cell) = shared.live.get(id) {
        // One writer (the monitor); relaxed: a counter.
        let v = cell.cpu_ticks.load(Ordering::Relaxed);
        cell.cpu_ticks
            .store(v.wrapping_add(ticks), Ordering::Relaxed);
    }
}
