//! Per-worker counters: cheap enough to leave on, readable at any time.
//!
//! Each counter has one writer (its worker) except `remote_wakes` and `wakeups`, which other
//! threads bump with `fetch_add`, so most updates are a relaxed
//! load and store, not a locked read-modify-write. Readers see values that may lag by a few
//! events, which is what counters are for.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// The live counters of one worker.
#[derive(Debug, Default)]
pub(crate) struct WorkerStats {
    pub(crate) actors_run: AtomicU64,
    pub(crate) spawns: AtomicU64,
    pub(crate) placed: AtomicU64,
    pub(crate) steals: AtomicU64,
    pub(crate) stolen: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) lingers: AtomicU64,
    pub(crate) wakeups: AtomicU64,
    pub(crate) remote_wakes: AtomicU64,
    pub(crate) preemptions: AtomicU64,
    /// What the mailboxes of actors that ended on this worker received, and the most any held
    /// at once (`MailboxTotals::add`; not in the snapshot, summed by `metrics`).
    pub(crate) mailbox_messages: AtomicU64,
    pub(crate) mailbox_high_water: AtomicU64,
}

impl WorkerStats {
    /// Adds one to a counter this worker alone writes.
    #[inline]
    pub(crate) fn bump(&self, c: &AtomicU64) {
        self.add(c, 1);
    }

    /// Adds `n` to a counter this worker alone writes.
    #[inline]
    pub(crate) fn add(&self, c: &AtomicU64, n: u64) {
        c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// Raises a maximum this worker alone writes.
    #[inline]
    pub(crate) fn raise(&self, c: &AtomicU64, to: u64) {
        if to > c.load(Relaxed) {
            c.store(to, Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> WorkerSnapshot {
        WorkerSnapshot {
            actors_run: self.actors_run.load(Relaxed),
            spawns: self.spawns.load(Relaxed),
            placed: self.placed.load(Relaxed),
            steals: self.steals.load(Relaxed),
            stolen: self.stolen.load(Relaxed),
            parks: self.parks.load(Relaxed),
            lingers: self.lingers.load(Relaxed),
            wakeups: self.wakeups.load(Relaxed),
            remote_wakes: self.remote_wakes.load(Relaxed),
            preemptions: self.preemptions.load(Relaxed),
        }
    }
}

/// A copy of one worker's counters.
///
/// ```
/// use threadlet_runtime::{Runtime, WorkerSnapshot};
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// rt.block_on(|| threadlet_runtime::spawn(|| ()).join().unwrap());
/// let w: WorkerSnapshot = rt.stats().workers[0];
/// assert_eq!(w.spawns, 1); // the inner spawn; `block_on` spawned from outside
/// assert!(w.actors_run >= 2); // both actors ran
/// assert_eq!(w.steals, 0); // a lone worker has no one to steal from
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerSnapshot {
    /// Times an actor was resumed from a run queue (one per run, not per switch).
    pub actors_run: u64,
    /// Actors spawned from this worker.
    pub spawns: u64,
    /// Of those, actors placed on another, less loaded worker to start there (see
    /// `worker/placement.rs`).
    pub placed: u64,
    /// Successful steal operations.
    pub steals: u64,
    /// Actors taken by those steals.
    pub stolen: u64,
    /// Times the worker went to sleep (the sleep protocol's park: on the sleeper list, then
    /// watching for a wake or blocked in the kernel).
    pub parks: u64,
    /// Of those, the sleeps that a wake ended while the worker watched for it, before it
    /// blocked in the kernel (workers woken soon after their last sleep linger:
    /// `docs/scheduler.md`, "Lingering before a park").
    pub lingers: u64,
    /// Times another thread unparked it to search for work.
    pub wakeups: u64,
    /// Wakes of its pinned actors that came from other threads.
    pub remote_wakes: u64,
    /// Runs ended by preemption at a safe point.
    pub preemptions: u64,
}

/// Counters of every worker, from [`Runtime::stats`](crate::Runtime::stats).
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(|| ());
/// let stats = rt.stats();
/// assert_eq!(stats.workers.len(), 2);
/// assert!(stats.searching + stats.parked <= 2);
/// let runs: u64 = stats.workers.iter().map(|w| w.actors_run).sum();
/// assert_eq!(stats.total().actors_run, runs);
/// assert!(runs >= 1);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// One entry per worker, by index.
    pub workers: Vec<WorkerSnapshot>,
    /// Stacks carved from the slab so far (each reserved once, then recycled).
    pub stacks_carved: usize,
    /// Whether guard pages use `MADV_GUARD_INSTALL` (`false`: `mprotect`, capped by
    /// `vm.max_map_count`).
    pub madvise_guards: bool,
    /// Workers searching for work now (idle protocol).
    pub searching: usize,
    /// Workers parked now (idle protocol).
    pub parked: usize,
    /// The spare workers' counters (`Builder::spare_workers`), by spare; included in
    /// [`total`](RuntimeStats::total).
    pub spares: Vec<WorkerSnapshot>,
}

impl RuntimeStats {
    /// The sum over all workers.
    ///
    /// ```
    /// use threadlet_runtime::{RuntimeStats, WorkerSnapshot};
    ///
    /// let stats = RuntimeStats {
    ///     workers: vec![
    ///         WorkerSnapshot { spawns: 2, parks: 1, ..Default::default() },
    ///         WorkerSnapshot { spawns: 3, ..Default::default() },
    ///     ],
    ///     ..Default::default()
    /// };
    /// let total = stats.total();
    /// assert_eq!((total.spawns, total.parks, total.steals), (5, 1, 0));
    /// ```
    pub fn total(&self) -> WorkerSnapshot {
        sum(self.workers.iter().chain(&self.spares))
    }
}

/// The sum of some workers' counters.
fn sum<'a>(counters: impl Iterator<Item = &'a WorkerSnapshot>) -> WorkerSnapshot {
    counters.fold(WorkerSnapshot::default(), |a, w| WorkerSnapshot {
        actors_run: a.actors_run + w.actors_run,
        spawns: a.spawns + w.spawns,
        placed: a.placed + w.placed,
        steals: a.steals + w.steals,
        stolen: a.stolen + w.stolen,
        parks: a.parks + w.parks,
        lingers: a.lingers + w.lingers,
        wakeups: a.wakeups + w.wakeups,
        remote_wakes: a.remote_wakes + w.remote_wakes,
        preemptions: a.preemptions + w.preemptions,
    })
}

/// What ended mailboxes received, reported as their actors end (`mailbox_ended`), so that the
/// runtime's totals do not lose them: on a worker of the runtime, into that worker's own
/// counters (`WorkerStats`), written by it alone, so that actors ending on every core do not
/// all write one cache line; elsewhere (an actor's end on a plain thread), into these.
#[derive(Debug, Default)]
pub(crate) struct MailboxTotals {
    messages: AtomicU64,
    high_water: AtomicUsize,
}

impl MailboxTotals {
    /// An actor of `shared`'s mailbox took in `received` messages, at most `high_water` at once.
    pub(crate) fn add(shared: &crate::runtime::Shared, received: u64, high_water: usize) {
        crate::context::with_worker(|ctx| match ctx {
            Some(ctx) if std::ptr::eq(&*ctx.shared, shared) => {
                let stats = &shared.remotes[ctx.index].stats;
                stats.add(&stats.mailbox_messages, received);
                stats.raise(&stats.mailbox_high_water, high_water as u64);
            }
            _ => {
                let totals = &shared.mailbox_totals;
                // Relaxed: counters; `metrics` reads them with no ordering to other memory.
                totals.messages.fetch_add(received, Relaxed);
                totals.high_water.fetch_max(high_water, Relaxed);
            }
        });
    }
}

/// One worker in [`Metrics`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerMetrics {
    /// Its counters: runs, steals, parks, preemptions...
    pub counters: WorkerSnapshot,
    /// Actors in its stealable queues now (its deque, its fresh queue, the actors placed on it
    /// and not started, and its free FIFO); under the global-queue baseline, in its FIFO of
    /// pinned actors, as in the dump.
    pub queued: usize,
    /// Actors in its inbox now (pinned actors woken by other threads).
    pub inbox: usize,
}

/// A runtime's figures, from [`Runtime::metrics`](crate::Runtime::metrics).
///
/// Counters are exact; the figures of now (live actors, queue depths) are samples. The message
/// and mailbox figures cover the mailboxes of the `threadlet` crate's actors.
///
/// ```
/// let rt = threadlet_runtime::Runtime::builder().workers(2).build().unwrap();
/// let hs: Vec<_> = (0..10).map(|i| rt.spawn(move || i)).collect();
/// for h in hs {
///     h.join().unwrap();
/// }
/// let m = rt.metrics();
/// assert_eq!(m.spawned, 10);
/// assert_eq!(m.spawned, m.ended + m.live_process as u64 + m.live_handler as u64);
/// assert_eq!(m.workers.len(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metrics {
    /// Per worker, by index.
    pub workers: Vec<WorkerMetrics>,
    /// The spare workers, by spare (`Builder::spare_workers`); included in
    /// [`total`](Metrics::total).
    pub spares: Vec<WorkerMetrics>,
    /// Actors spawned from outside the runtime, not yet taken by a worker; under the
    /// global-queue baseline, every actor in its shared FIFO, as in the dump.
    pub injected: usize,
    /// Live process actors.
    pub live_process: usize,
    /// Live handler actors.
    pub live_handler: usize,
    /// Actors spawned or started since the runtime was built.
    pub spawned: u64,
    /// Of those, actors that have ended.
    pub ended: u64,
    /// Messages accepted into mailboxes (live actors' and ended ones'; of a mailbox handed over
    /// to another actor, those up to its first actor's end).
    pub messages: u64,
    /// The most messages one mailbox has held at once.
    pub mailbox_high_water: usize,
}

impl Metrics {
    /// The sum of every worker's counters.
    pub fn total(&self) -> WorkerSnapshot {
        sum(self.workers.iter().chain(&self.spares).map(|w| &w.counters))
    }
}

/// Gathers [`Metrics`]. Walks the live actors for their mailboxes' figures (O(live actors),
/// one shard lock at a time); everything else is a counter read.
pub(crate) fn metrics(shared: &crate::runtime::Shared) -> Metrics {
    let counts = shared.live.counts();
    let live_handler = counts.handlers;
    let (mut messages, mut high_water) = (0, 0);
    shared.live.for_each(|cell| {
        if let Some(m) = crate::dump::mailbox_of(cell) {
            messages += m.received;
            high_water = high_water.max(m.high_water);
        }
    });
    // Read after the walk: a mailbox that hands its figures over during the walk is then
    // counted twice at worst, never missed (the totals only grow).
    messages += shared.mailbox_totals.messages.load(Relaxed);
    high_water = high_water.max(shared.mailbox_totals.high_water.load(Relaxed));
    for r in shared.remotes.iter() {
        messages += r.stats.mailbox_messages.load(Relaxed);
        high_water = high_water.max(r.stats.mailbox_high_water.load(Relaxed) as usize);
    }
    // Under the global-queue baseline its queues hold what the workers' and the injector
    // would (as in the dump).
    let (in_global_queue, pinned_in_global_queue) = shared.policy.global_queue_lens();
    let mut workers: Vec<WorkerMetrics> = (shared.remotes.iter().enumerate())
        .map(|(i, r)| worker_metrics(r, pinned_in_global_queue.get(i).copied().unwrap_or(0)))
        .collect();
    let spares = workers.split_off(shared.worker_remotes().len());
    Metrics {
        workers,
        spares,
        injected: shared.injector.len() + in_global_queue,
        live_process: counts.live - live_handler,
        live_handler,
        spawned: counts.inserted,
        ended: counts.removed,
        messages,
        mailbox_high_water: high_water,
    }
}

/// One worker's figures; `pinned_in_global_queue`: its actors in the global-queue baseline's
/// pinned FIFO.
fn worker_metrics(r: &crate::worker::Remote, pinned_in_global_queue: usize) -> WorkerMetrics {
    WorkerMetrics {
        counters: r.stats.snapshot(),
        queued: r.stealable_len() + pinned_in_global_queue,
        inbox: r.inbox.len(),
    }
}
