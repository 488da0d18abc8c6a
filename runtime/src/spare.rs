//! Spare workers: threads the monitor brings in when a worker is stuck in one actor (a blocking
//! system call or a long C call made outside `threadlet::blocking`), so that the actors that
//! could run anywhere do not wait for it. Go hands a blocked thread's processor to another
//! thread the same way.
//!
//! # What a spare may run
//!
//! The stuck worker's own state (`Core`: its pinned queue, its stack pool) is in use by the
//! thread that is stuck, and the actors pinned to it may only ever run on that thread: they
//! wait. What any thread may take is the stealable work: actors that have not started, handler
//! actors between messages and migratable actors, in the stuck worker's deque, fresh queue,
//! queue of placed actors and free FIFO and everyone's, and the injector; and a free actor in
//! the stuck worker's next slot, which is often the one its stuck actor waits for (it woke it
//! just before blocking: a request, then a plain blocking wait for the reply; `next_slot.rs`).
//!
//! A spare is a worker slot of its own (a `Remote` in `Shared::remotes`, indexes `first..`,
//! and its own `Core`), outside the sleep protocol (`idle.rs`): it takes stealable work while
//! it covers a stuck worker, and hands back what it holds once it no longer does. What it
//! started (a process actor, or a handler actor suspended in `handle`) is pinned to it like to
//! any worker, and it keeps running those until they end. A spare can be stuck too (an actor
//! it took from a stuck worker's next slot asks in turn, and blocks): the monitor covers it as
//! it covers a worker, with another spare if one is dormant.
//!
//! # Protocol
//!
//! 1. The monitor sees a worker's time slice last `HANDOFF_SLICES` slices (`monitor.rs`, step
//!    4). It looks for a dormant spare (its `covering` is `NONE`, and it runs nothing, or its
//!    thread is runnable: a spare can be stuck too, after giving its claim back, in an actor
//!    pinned to it), writes
//!    the stuck slice's number into its `covered_slice`, and claims it with a compare-and-swap
//!    of `covering` from `NONE` to the stuck worker's index (release: the slice number is
//!    visible to whoever reads the index). It starts the spare's thread the first time, else unparks it. With no dormant
//!    spare left, there is no handoff this time; the monitor tries again at its next sample.
//! 2. The spare, while the covered worker's slice number is still the covered one (it is
//!    stuck), runs what is in its own queues and takes stealable work from the covered worker's
//!    deque, fresh queue, placed actors, free FIFO and next slot (a free actor only) and the
//!    injector (not from healthy workers, whose actors would end up
//!    pinned to it), polling when it finds none: every `SPARE_POLL_MIN` at first, backing off to
//!    `SPARE_POLL_MAX` while nothing comes.
//! 3. Once the covered worker has moved on, the spare gives its claim back at once: a
//!    compare-and-swap of `covering` from the index it read back to `NONE` (failing only if
//!    the monitor claimed it anew meanwhile, which then stands), so the monitor may claim it
//!    again even while actors are pinned to it. It stops taking work (no injector, no steals):
//!    unpinned entries in its own queues go back to the injector (a parked worker is woken for
//!    them), pinned ones it runs.
//! 4. With its queues empty, it parks until the monitor claims it again, one of its pinned
//!    actors is woken (a wake of a pinned actor unparks its worker), or shutdown wakes it. With
//!    nothing pinned to it either, it first gives its warm stacks back to the runtime's slab.
//! 5. Shutdown: every remote is unparked (`Shared::begin_shutdown`), so a started spare leaves
//!    its loop and takes part in the workers' shutdown meetings like any worker; a spare that
//!    never started gives up its shares of those meetings (`drop_unstarted`), so that nobody
//!    waits for it.
//!
//! Nothing is lost by a handoff: an entry is only ever moved between queues (steal, hand-back),
//! never dropped, and a wake of an actor pinned to a spare goes to the spare's inbox and unparks
//! it, as for any worker.
//!
//! Spares exist only under the work-stealing scheduler (the baselines' queues and lock are per
//! worker or global, and a stuck worker holding the global lock could not be helped anyway);
//! their number is `Builder::spare_workers` (default: one per worker).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use crossbeam_utils::sync::{Parker, WaitGroup};
use parking_lot::Mutex;

use crate::runtime::Shared;
use crate::worker::{Role, StealableQueues};

/// A slice that lasts this many time slices gets a spare (step 1), if its thread spent less
/// than an eighth of it on a CPU, and not for want of a free one (`monitor.rs`: a long
/// computation without a safe point, or one starved on a crowded machine, is not helped by one
/// more thread on the same cores). Long enough that an actor which blocks
/// briefly now and then does not make threads come and go, short enough that the others wait
/// at most about that long.
pub(crate) const HANDOFF_SLICES: u32 = 2;

/// How soon a covering spare that found nothing to take looks again (step 2): soon, since
/// what it covers for arrives from other threads without waking it.
pub(crate) const SPARE_POLL_MIN: Duration = Duration::from_millis(1);

/// The longest it waits between looks once nothing has come for a while: a worker stuck for
/// hours then costs its spare about 60 wake-ups a second, not a thousand.
pub(crate) const SPARE_POLL_MAX: Duration = Duration::from_millis(16);

/// `covering` of a dormant spare.
const NONE: usize = usize::MAX;

/// What a spare thread is started with.
pub(crate) struct SpareParts {
    pub(crate) queues: StealableQueues,
    pub(crate) parker: Parker,
    /// Its shares of the workers' shutdown meetings (`worker.rs`, "Shutdown").
    pub(crate) meet: (WaitGroup, WaitGroup),
}

enum Slot {
    Unstarted(SpareParts),
    Started(thread::JoinHandle<()>),
    /// Its parts were given up at shutdown.
    Gone,
}

/// What the monitor and one spare share (steps 1 to 4).
struct SpareState {
    /// The worker it covers, or `NONE`.
    covering: AtomicUsize,
    /// That worker's slice number when it was found stuck.
    covered_slice: AtomicU64,
}

/// The runtime's spares.
pub(crate) struct Spares {
    /// The index of the first spare in `Shared::remotes`: the number of workers.
    pub(crate) first: usize,
    states: Box<[SpareState]>,
    slots: Mutex<Vec<Slot>>,
}

impl Spares {
    pub(crate) fn new(first: usize, count: usize) -> Spares {
        Spares {
            first,
            states: (0..count)
                .map(|_| SpareState {
                    covering: AtomicUsize::new(NONE),
                    covered_slice: AtomicU64::new(0),
                })
                .collect(),
            slots: Mutex::new(Vec::new()),
        }
    }

    /// The parts of every spare, once the shutdown meetings exist (`Builder::build`).
    pub(crate) fn install(&self, parts: Vec<SpareParts>) {
        *self.slots.lock() = parts.into_iter().map(Slot::Unstarted).collect();
    }

    /// Step 1: brings a spare in to cover `worker`, stuck in the slice numbered `slice`. Returns
    /// the spare's index in `Shared::remotes`, or `None` if every spare is busy (or shutdown
    /// has begun).
    pub(crate) fn activate(
        &self,
        shared: &Arc<Shared>,
        worker: usize,
        slice: u64,
    ) -> Option<usize> {
        for (k, st) in self.states.iter().enumerate() {
            // Not the stuck one itself, nor another that runs an actor pinned to it (its claim
            // given back: its `covering` is `NONE` too) and whose thread is blocked now: it may
            // be stuck in that actor, and would cover nothing. One that computes is taken: it
            // runs what it covers between its own actor's time slices. Relaxed: a sample, as
            // the monitor's; a spare that blocks right after is taken anyway, and runs what it
            // was taken for once that actor lets it.
            let index = self.first + k;
            let remote = &shared.remotes[index];
            if index == worker
                || st.covering.load(Ordering::Relaxed) != NONE
                || (remote.slice.load(Ordering::Relaxed) != 0
                    && crate::monitor::blocked_now(remote))
            {
                continue;
            }
            // Relaxed: published by the release of the claim below.
            st.covered_slice.store(slice, Ordering::Relaxed);
            // Release: pairs with the acquire load in `covered`, so the spare that sees the
            // index sees the slice number written before it.
            if st
                .covering
                .compare_exchange(NONE, worker, Ordering::Release, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            let mut slots = self.slots.lock();
            if shared.is_shutdown() {
                st.covering.store(NONE, Ordering::Relaxed);
                return None;
            }
            match std::mem::replace(&mut slots[k], Slot::Gone) {
                Slot::Unstarted(parts) => {
                    let s = shared.clone();
                    // Shared with the thread's closure, so that a thread the kernel refuses
                    // (the closure dropped unrun) leaves the parts here for a later try.
                    let parts = Arc::new(Mutex::new(Some(parts)));
                    let theirs = parts.clone();
                    let started = thread::Builder::new()
                        .name(format!("threadlet-spare-{index}"))
                        .spawn(move || {
                            let SpareParts {
                                queues,
                                parker,
                                meet,
                            } = theirs
                                .lock()
                                .take()
                                .expect("a spare's parts are taken once");
                            crate::worker::run(s, index, queues, parker, meet, Role::Spare)
                        });
                    match started {
                        Ok(t) => slots[k] = Slot::Started(t),
                        Err(_) => {
                            // Not started: unclaimed and unstarted again, as before the claim,
                            // for the monitor's next look (the worker may still be stuck).
                            let parts = parts.lock().take().expect("the thread never ran");
                            slots[k] = Slot::Unstarted(parts);
                            st.covering.store(NONE, Ordering::Relaxed);
                            return None;
                        }
                    }
                }
                started @ Slot::Started(_) => {
                    slots[k] = started;
                    shared.remotes[index].unpark();
                }
                Slot::Gone => return None,
            }
            return Some(index);
        }
        None
    }

    /// The worker spare `index` covers (steps 2 and 3): `Some(w)` while `w` is still stuck.
    /// A claim whose worker has moved on is given back here (step 3): the swap is from the
    /// index read, so a newer claim made meanwhile stands, and is seen at the next look.
    pub(crate) fn covered(&self, shared: &Shared, index: usize) -> Option<usize> {
        let st = &self.states[index - self.first];
        // Acquire: pairs with the claim's release (step 1).
        let w = st.covering.load(Ordering::Acquire);
        if w == NONE {
            return None;
        }
        // Relaxed: a sample; a stale slice number only delays the hand-back by a poll.
        let still = shared.remotes[w].slice.load(Ordering::Relaxed)
            == st.covered_slice.load(Ordering::Relaxed);
        if !still {
            // Relaxed: nothing is published by giving a claim back; the monitor's next claim
            // writes its slice number anew before its release.
            let _ = st
                .covering
                .compare_exchange(w, NONE, Ordering::Relaxed, Ordering::Relaxed);
        }
        still.then_some(w)
    }

    /// Whether spare `index` is claimed (covering someone, or about to).
    pub(crate) fn is_claimed(&self, index: usize) -> bool {
        self.states[index - self.first]
            .covering
            .load(Ordering::Relaxed)
            != NONE
    }

    /// Step 5: spares never started give up their shares of the shutdown meetings.
    pub(crate) fn drop_unstarted(&self) {
        for slot in self.slots.lock().iter_mut() {
            if let Slot::Unstarted(_) = slot {
                *slot = Slot::Gone;
            }
        }
    }

    /// Whether `thread` is one of the started spares' threads (`Runtime::drop` must not join
    /// the thread it runs on).
    pub(crate) fn runs_on(&self, thread: thread::ThreadId) -> bool {
        self.slots
            .lock()
            .iter()
            .any(|slot| matches!(slot, Slot::Started(t) if t.thread().id() == thread))
    }

    /// The started spares' threads, for the shutdown to join.
    pub(crate) fn take_threads(&self) -> Vec<thread::JoinHandle<()>> {
        self.slots
            .lock()
            .iter_mut()
            .filter_map(|slot| match std::mem::replace(slot, Slot::Gone) {
                Slot::Started(t) => Some(t),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::Runtime;

    /// A stuck spare gets another one that is not stuck: never itself, nor another spare
    /// running an actor pinned to it after giving its claim back with its thread not runnable
    /// (here: a spare that never started, whose state cannot be read), both of which look as
    /// dormant as any by their claim. (Each was taken, and the monitor tried no other spare
    /// for the rest of the slice: the reviews' tests waited for the stuck actor's timeout.)
    #[test]
    fn a_stuck_spare_is_covered_by_one_that_is_not_stuck() {
        let rt = Runtime::builder()
            .workers(1)
            .spare_workers(3)
            .build()
            .unwrap();
        let shared = rt.shared();
        let first = shared.spares.first;
        // Spare `first + 1` runs an actor (slice 5) without a claim, its thread not runnable.
        shared.remotes[first + 1].slice.store(5, Ordering::Relaxed);
        // As the monitor asks for spare `first`, stuck in slice 1.
        let cover = shared.spares.activate(shared, first, 1);
        shared.remotes[first + 1].slice.store(0, Ordering::Relaxed);
        assert_eq!(cover, Some(first + 2));
    }
}
