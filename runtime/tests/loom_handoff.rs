//! Loom model of the carrier hand-off (`home.rs`): a handler actor pinned to a worker while an
//! activation is suspended inside `handle`, free between activations. It runs the shipped
//! `Home` and `WakeState`; the workers' sequence (pin or unpin, then `after_park`) and the
//! waker's routing are those of `worker.rs` and `Shared::schedule_woken`, written out here.
//! Pinning after `after_park` instead of before makes the model fail: the woken activation is
//! routed as free and resumed off its carrier.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p threadlet-runtime --test loom_handoff --release
//! ```
//!
//! Two workers and a waker. The actor's life, as `worker.rs` runs it:
//!
//! 1. first activation, taken from the shared queue by either worker: `handle` suspends to wait
//!    for the first message, so the worker pins the actor to itself and parks it;
//! 2. woken by the first message: must resume on the same worker, whose carrier holds the
//!    suspended activation. `handle` returns, the activation ends, the worker unpins the actor
//!    and parks it (an idle handler actor waiting for its next message);
//! 3. woken by the second message: free, so it goes to the shared queue and either worker may
//!    run it; it stops.
//!
//! The waker sets each message's flag, then wakes, and routes an actor it scheduled by its
//! `Home`, as `Shared::schedule_woken` does. Asserts: a step-2 resume happens on the worker that
//! pinned it, and a waker never finds a free actor pinned or a pinned one free. A lost wake
//! leaves both workers parked for good, which loom reports as a deadlock.
#![cfg(loom)]

mod loom_support;

use std::collections::VecDeque;
// std's `Arc`, not loom's: a loom `Arc` dropped while a failing execution unwinds aborts the
// test binary, hiding which model failed and how.
use std::sync::Arc;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use loom::sync::Mutex;
use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::thread;
use loom_support::Parker;
use threadlet_runtime::__private::{AfterPark, Home, WakeAction, WakeState};

const WORKERS: usize = 2;
const SHARED_QUEUE: usize = WORKERS;

struct Model {
    state: WakeState,
    home: Home,
    /// The two messages, by step. Read and written with read-modify-writes, standing in for
    /// the mailbox's lock: a receive sees every send that came before it in the lock's order.
    message: [AtomicBool; 2],
    /// Touched only by the worker running the actor (the wake protocol hands it over).
    step: AtomicUsize,
    /// Queues of the two workers, then the shared one; each holds the actor at most once.
    queues: [Mutex<VecDeque<()>>; WORKERS + 1],
    done: AtomicBool,
    parkers: [Parker; WORKERS],
}

impl Model {
    /// `Shared::schedule_woken`: a pinned actor to its home worker, a free one to anyone.
    fn route(&self) {
        let queue = self.home.get().unwrap_or(SHARED_QUEUE);
        self.queues[queue].lock().unwrap().push_back(());
        match queue {
            SHARED_QUEUE => self.parkers.iter().for_each(Parker::unpark),
            w => self.parkers[w].unpark(),
        }
    }

    /// A worker's turn: its own queue first, then the shared one.
    fn pop(&self, worker: usize) -> bool {
        self.queues[worker].lock().unwrap().pop_front().is_some()
            || self.queues[SHARED_QUEUE]
                .lock()
                .unwrap()
                .pop_front()
                .is_some()
    }

    /// The receive's look at its mailbox.
    fn has_message(&self, step: usize) -> bool {
        self.message[step].fetch_or(false, AcqRel)
    }

    /// One run of the actor on `worker`, until it parks or stops.
    fn run(&self, worker: usize) {
        self.state.start_running();
        if let Some(pinned) = self.home.get() {
            assert_eq!(
                pinned, worker,
                "a suspended activation resumed off its carrier's worker"
            );
        }
        loop {
            // Relaxed: only the worker running the actor touches `step`, and the wake protocol
            // orders the runs (a queue pop, then `start_running`).
            match self.step.load(Relaxed) {
                // In `handle`, waiting for message 0.
                0 if !self.has_message(0) => {
                    // The activation suspends: hand-off step 1 (again, after a spurious turn).
                    self.home.pin(worker);
                    match self.state.after_park() {
                        AfterPark::Parked => return,
                        AfterPark::Resume => continue,
                    }
                }
                0 => {
                    // Message 0 is in: `handle` returns and the activation ends. Hand-off
                    // step 2 if it had suspended.
                    if self.home.get().is_some() {
                        self.home.unpin();
                    }
                    self.step.store(1, Relaxed);
                }
                // Idle and free, waiting for message 1.
                1 if !self.has_message(1) => match self.state.after_park() {
                    AfterPark::Parked => return,
                    AfterPark::Resume => continue,
                },
                1 => self.step.store(2, Relaxed),
                _ => {
                    assert_eq!(self.home.get(), None, "a stopped actor left pinned");
                    self.state.complete();
                    self.done.store(true, Release);
                    self.parkers.iter().for_each(Parker::unpark);
                    return;
                }
            }
        }
    }
}

#[test]
fn a_suspended_activation_is_only_queued_at_its_carrier() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(3);
    builder.check(|| {
        let model = Arc::new(Model {
            state: WakeState::new_scheduled(),
            home: Home::new(),
            message: [AtomicBool::new(false), AtomicBool::new(false)],
            step: AtomicUsize::new(0),
            queues: Default::default(),
            done: AtomicBool::new(false),
            parkers: Default::default(),
        });
        // Spawned: in the shared queue.
        model.queues[SHARED_QUEUE].lock().unwrap().push_back(());

        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let model = model.clone();
                thread::spawn(move || {
                    while !model.done.load(Acquire) {
                        if model.pop(w) {
                            model.run(w);
                        } else {
                            model.parkers[w].park();
                        }
                    }
                })
            })
            .collect();

        for message in &model.message {
            message.swap(true, AcqRel);
            if model.state.wake() == WakeAction::Schedule {
                model.route();
            }
        }

        for w in workers {
            w.join().unwrap();
        }
        // Not `model.state.is_done()`: loom 0.7 lets a waker's compare-and-swap that read
        // `RUNNING` land after the worker's later plain store of `DONE` (a two-store test shows
        // it), which the C++ memory model forbids (a read-modify-write reads the value just
        // before it in modification order); the runtime never reads `is_done` to route a wake.
        assert!(model.done.load(Acquire), "the actor stopped");
    });
}
