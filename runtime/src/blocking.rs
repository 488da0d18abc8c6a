//! The blocking pool: OS threads that run the calls an actor must not make on its worker (a
//! blocking syscall, a long C call, a file read), while the calling actor is suspended.
//!
//! Each runtime owns one [`BlockingPool`]. Its threads are made on demand, at most
//! `Builder::blocking_threads` of them, and each retires after `Builder::blocking_keep_alive`
//! without work. A call queues its closure and parks the actor; the pool thread that runs it
//! stores the outcome and wakes the actor, which returns the value (or resumes the panic).
//!
//! # The call protocol (one [`blocking`] call)
//!
//! 1. The actor makes a `Call` holding its own [`Waiter`] and an empty outcome slot, and queues
//!    a job that owns the closure and a reference to the call.
//! 2. The pool hands the job to an idle thread (a counted notification), or makes a thread if
//!    fewer than the limit exist, or leaves it queued for the next thread that frees up.
//! 3. The actor loops: under the call's lock, takes the outcome if it is there; else parks.
//! 4. The pool thread runs the closure (a panic caught), then under the call's lock stores the
//!    outcome, and after unlocking wakes the waiter.
//!
//! No wake is lost: the waiter is published in step 1, before the job can run, and step 3 reads
//! the slot under the lock that step 4 writes it under; a wake that lands before the actor
//! parks leaves it notified, and its park returns at once (`wake.rs`). The closure is `'static`
//! and owns what it uses: an actor killed or cancelled while it waits is unwound at once (its
//! stack is gone), the closure runs to its end on the pool thread regardless, and its outcome is
//! dropped there. No OS thread can be interrupted, so neither can the closure.
//!
//! # The deadlock check
//!
//! A closure outlives its caller if the caller is killed while it waits, and may hold an
//! address, a sender or a `Reply` that will wake an actor when it ends: while any job is
//! queued or running, the runtime's deadlock check reports nothing (`deadlock.rs`), as for a
//! pending timer. The check marks the pool when it is held off so; the job that ends the last
//! one then kicks the monitor to look again (both under the pool's lock: either the check
//! sees the job, or the job's end sees the mark).
//!
//! # Shutdown
//!
//! A runtime's drop closes its pool: idle threads exit, busy ones finish the job they run and
//! what is still queued, then exit. The pool threads are never joined: a closure may block for
//! good (a read of stdin), and shutdown must not hang on it. A call that finds the pool closed
//! runs its closure on the caller's thread, unless the caller is an actor that shutdown has
//! not reached yet: it yields, and is unwound without running it.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::context::{self, Waiter};
use crate::monitor::MonitorSignal;

/// The default bound on a runtime's blocking threads. Threads only exist while calls need them;
/// the bound is there so that a flood of blocking calls queues rather than exhausting the
/// process's threads (tokio uses the same figure).
pub const DEFAULT_BLOCKING_THREADS: usize = 512;

/// How long a blocking thread waits for work before it exits, by default: long enough that a
/// steady trickle of calls reuses threads, short enough that a burst leaves no crowd behind.
pub const DEFAULT_BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

/// One runtime's pool of blocking threads (module docs).
pub(crate) struct BlockingPool {
    state: Mutex<PoolState>,
    work: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    /// The runtime's monitor, kicked when the last job ends after the deadlock check was held
    /// off by the pool ("The deadlock check" below).
    monitor: Arc<MonitorSignal>,
}

struct PoolState {
    queue: VecDeque<Job>,
    /// Threads alive (running a job or waiting for one).
    threads: usize,
    /// Threads waiting on `work`.
    idle: usize,
    /// Notifications sent to idle threads and not yet taken (step 2): a submit hands its job to
    /// an idle thread only if one is idle beyond those already told.
    notified: usize,
    /// Jobs queued or running: a closure runs to its end even when its caller is gone, and
    /// may hold an address or a sender that wakes an actor ("The deadlock check" below).
    jobs: usize,
    /// The deadlock check was held off by a job: the last job to end kicks the monitor.
    watched: bool,
    closed: bool,
}

impl BlockingPool {
    pub(crate) fn new(
        max_threads: usize,
        keep_alive: Duration,
        monitor: Arc<MonitorSignal>,
    ) -> BlockingPool {
        BlockingPool {
            state: Mutex::new(PoolState {
                queue: VecDeque::new(),
                threads: 0,
                idle: 0,
                notified: 0,
                jobs: 0,
                watched: false,
                closed: false,
            }),
            work: Condvar::new(),
            max_threads,
            keep_alive,
            monitor,
        }
    }

    /// Whether a job is queued or running, for the deadlock check of a runtime linked to this
    /// one's (which looks again on its own).
    pub(crate) fn has_jobs(&self) -> bool {
        self.state.lock().jobs > 0
    }

    /// Whether a job is queued or running, for this runtime's deadlock check, which is then
    /// held off: the last job to end kicks the monitor to look again. (Under the pool's lock,
    /// as that end is: either this sees the job, or the job's end sees the mark.)
    pub(crate) fn holds_off_deadlock_check(&self) -> bool {
        let mut st = self.state.lock();
        let busy = st.jobs > 0;
        st.watched |= busy;
        busy
    }

    /// Step 2: queues `job` for a pool thread. Gives it back if the pool is closed, or if it
    /// has no thread and cannot make one.
    fn submit(self: &Arc<Self>, job: Job) -> Result<(), Job> {
        let mut st = self.state.lock();
        if st.closed {
            return Err(job);
        }
        st.queue.push_back(job);
        st.jobs += 1;
        if st.idle > st.notified {
            st.notified += 1;
            self.work.notify_one();
            return Ok(());
        }
        if st.threads < self.max_threads {
            st.threads += 1;
            let pool = self.clone();
            let made = thread::Builder::new()
                .name("threadlet-blocking".into())
                .spawn(move || pool.run_thread());
            if made.is_err() {
                st.threads -= 1;
                if st.threads == 0 {
                    // Nobody will ever take it: the caller runs it.
                    st.jobs -= 1;
                    return Err(st.queue.pop_back().expect("just queued"));
                }
            }
        }
        // Else queued: the next thread that finishes a job takes it.
        Ok(())
    }

    /// A pool thread: runs jobs until it has waited `keep_alive` for none, or the pool closed.
    fn run_thread(&self) {
        let mut st = self.state.lock();
        loop {
            if let Some(job) = st.queue.pop_front() {
                drop(st);
                // A job catches its closure's panic itself (`blocking`); this only keeps a
                // panicking destructor of the outcome from taking the thread's count with it.
                let _ = catch_unwind(AssertUnwindSafe(job));
                st = self.state.lock();
                st.jobs -= 1;
                if st.jobs == 0 && std::mem::take(&mut st.watched) {
                    // The monitor, held off by this job, looks again (module docs).
                    drop(st);
                    self.monitor.kick();
                    st = self.state.lock();
                }
                continue;
            }
            if st.closed {
                break;
            }
            st.idle += 1;
            let timed_out = self.work.wait_for(&mut st, self.keep_alive).timed_out();
            st.idle -= 1;
            if st.notified > 0 {
                // Told there is a job (or a close): look again.
                st.notified -= 1;
                continue;
            }
            if timed_out && st.queue.is_empty() {
                break;
            }
        }
        st.threads -= 1;
    }

    /// Whether the pool has closed (its runtime's shutdown began).
    fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    /// Closes the pool (module docs, "Shutdown").
    pub(crate) fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        st.notified = st.idle;
        self.work.notify_all();
    }

    /// Threads alive now, for tests.
    #[cfg(all(test, not(loom)))]
    fn threads(&self) -> usize {
        self.state.lock().threads
    }
}

/// One call's meeting point (steps 1, 3 and 4): the closure's outcome once it has run.
struct Call<R> {
    outcome: Mutex<Option<std::thread::Result<R>>>,
    waiter: Waiter,
}

/// Runs `f` on the runtime's blocking pool and returns its value; the calling actor is
/// suspended meanwhile, so its worker runs other actors. A panic in `f` is resumed in the
/// caller. On a plain thread (or where the runtime cannot take the call) `f` runs right here.
///
/// `f` must own what it uses (`'static`): if the calling actor is killed or its runtime shuts
/// down while `f` runs, the actor ends at once and `f` still runs to its end on the pool
/// thread, its value dropped there. An OS thread cannot be interrupted.
///
/// ```
/// use std::time::Duration;
///
/// let rt = threadlet_runtime::Runtime::builder().workers(1).build().unwrap();
/// let (slow, other) = rt.block_on(|| {
///     // The only worker stays free for the other actor while the pool thread sleeps.
///     let other = threadlet_runtime::spawn(|| "ran meanwhile");
///     let slow = threadlet_runtime::blocking(|| {
///         std::thread::sleep(Duration::from_millis(50));
///         7
///     });
///     (slow, other.join().unwrap())
/// });
/// assert_eq!((slow, other), (7, "ran meanwhile"));
/// ```
pub fn blocking<F, R>(f: F) -> R
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let pool = match context::current_blocking_pool() {
        // An actor that is being unwound (a kill, shutdown, or its own panic), or runs exit
        // hooks, may not suspend: it runs `f` itself.
        Some(pool) if context::actor_may_suspend() => pool,
        _ => return f(),
    };
    let call = Arc::new(Call {
        outcome: Mutex::new(None),
        waiter: Waiter::current(),
    });
    let job: Job = {
        let call = call.clone();
        Box::new(move || {
            let outcome = catch_unwind(AssertUnwindSafe(f));
            *call.outcome.lock() = Some(outcome);
            call.waiter.wake();
        })
    };
    if let Err(job) = pool.submit(job) {
        if pool.is_closed() {
            // Shutdown began while this actor ran (its safe points had not come round yet):
            // run here, `f` would hold up the join of this worker, and with it the drop, for
            // as long as it blocks. Yield instead: its worker, shutting down, never resumes it
            // and unwinds it where it stands (`worker.rs`, "Shutdown"), `f` with it, unrun.
            crate::yield_now();
        }
        // No thread to be had: run it here.
        job();
    }
    loop {
        // The guard is a temporary of this statement: unlocked before the panic resumes.
        let outcome = call.outcome.lock().take();
        match outcome {
            Some(Ok(v)) => return v,
            Some(Err(p)) => resume_unwind(p),
            None => {}
        }
        if context::park_on(crate::Wait::Blocking).is_err() {
            // Only while this actor may not suspend (checked above, so not reached in
            // practice): wait for the pool thread on this OS thread.
            thread::yield_now();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::Runtime;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    #[test]
    fn a_plain_thread_runs_the_closure_itself() {
        let me = thread::current().id();
        assert!(blocking(move || thread::current().id() == me));
    }

    #[test]
    fn the_pool_never_exceeds_its_bound_and_queued_calls_all_run() {
        let rt = Runtime::builder()
            .workers(2)
            .blocking_threads(3)
            .build()
            .unwrap();
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..12)
            .map(|i| {
                let (running, most) = (running.clone(), most.clone());
                rt.spawn(move || {
                    blocking(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        thread::sleep(Duration::from_millis(5));
                        running.fetch_sub(1, Ordering::SeqCst);
                        i
                    })
                })
            })
            .collect();
        let sum: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, (0..12).sum());
        assert!(most.load(Ordering::SeqCst) <= 3);
        assert!(rt.shared().blocking.threads() <= 3);
    }

    #[test]
    fn idle_threads_retire_after_their_keep_alive() {
        let rt = Runtime::builder()
            .workers(1)
            .blocking_keep_alive(Duration::from_millis(20))
            .build()
            .unwrap();
        rt.block_on(|| blocking(|| ()));
        let deadline = Instant::now() + Duration::from_secs(10);
        while rt.shared().blocking.threads() > 0 {
            assert!(Instant::now() < deadline, "the idle thread never retired");
            thread::sleep(Duration::from_millis(5));
        }
    }
}
