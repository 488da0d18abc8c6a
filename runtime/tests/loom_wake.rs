//! Loom models of the per-actor wake state word (`wake.rs`), run against the shipped
//! `WakeState`:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p threadlet-runtime --test loom_wake --release
//! ```
//!
//! The worker and the wakers follow the steps of the protocol in `wake.rs`; the run queue is a
//! counter of pushes. The models check that an actor is pushed at most once per park, and that
//! it is never left `IDLE` with its condition true and nobody pushing it (a lost wakeup).
#![cfg(loom)]

// std's `Arc`, not loom's: a loom `Arc` dropped while a failing execution unwinds aborts the
// test binary, hiding which model failed and how.
use std::sync::Arc;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};

use loom::sync::Mutex;
use loom::sync::atomic::AtomicUsize;
use loom::thread;
use threadlet_runtime::__private::{AfterPark, WakeAction, WakeState};

/// Runs `f` under loom with at most `preemption_bound` preemptions per execution, unless
/// `LOOM_MAX_PREEMPTIONS` sets another bound (or is large, to explore every execution).
fn model(preemption_bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(preemption_bound);
    builder.check(f);
}

/// How one run of the actor on the worker ended.
#[derive(Debug, PartialEq, Eq)]
enum Ran {
    /// The actor saw its condition true and went on (it never became `IDLE`).
    Done,
    /// The worker moved the actor to `IDLE`; a wake must push it again.
    Parked,
}

/// What the waited-for object guards: the condition, and whether the actor waits on it.
#[derive(Default)]
struct Cond {
    ready: bool,
    waiter: bool,
}

/// Two wakers race to wake an actor that is about to park on one condition.
///
/// The actor runs steps 1-4 of the protocol: it registers as the waiter and checks the condition
/// under the object's lock, then parks. Each waker makes the condition true under the lock and,
/// if it finds the actor registered, wakes it after unlocking. The waiter is left in place, so
/// both wakers may wake the actor and their two `wake` calls race each other and the worker's
/// `after_park`. The one that gets `Schedule` pushes the actor.
///
/// A waker acts on the registration it read under the lock, as every caller of `wake` in the
/// runtime does: `wake` begins with a plain load of the state, so a wake that is not ordered
/// after the actor's `start_running` may read the state from before it and do nothing.
///
/// Five preemptions take about two seconds; the unbounded search takes about a minute and finds
/// nothing more.
#[test]
fn racing_wakes_schedule_once_and_lose_nothing() {
    model(5, || {
        let state = Arc::new(WakeState::new_scheduled());
        let cond = Arc::new(Mutex::new(Cond::default()));
        let pushes = Arc::new(AtomicUsize::new(0));

        let wakers: Vec<_> = (0..2)
            .map(|_| {
                let (state, cond, pushes) = (state.clone(), cond.clone(), pushes.clone());
                thread::spawn(move || {
                    let waiter = {
                        let mut c = cond.lock().unwrap();
                        c.ready = true;
                        c.waiter
                    };
                    if waiter && state.wake() == WakeAction::Schedule {
                        let before = pushes.fetch_add(1, AcqRel);
                        assert_eq!(before, 0, "actor pushed twice for one park");
                    }
                })
            })
            .collect();

        // The worker popped the actor (its spawn push) and resumes it.
        state.start_running();
        let ran = loop {
            // Steps 1 and 2: register, then check the condition.
            {
                let mut c = cond.lock().unwrap();
                c.waiter = true;
                if c.ready {
                    break Ran::Done;
                }
            }
            // Step 3: `park`'s fast path.
            if state.take_notification() {
                continue;
            }
            // Step 4: the coroutine suspended; the worker, off its stack, settles the state.
            match state.after_park() {
                AfterPark::Parked => break Ran::Parked,
                AfterPark::Resume => continue,
            }
        };

        for w in wakers {
            w.join().unwrap();
        }

        // Both wakers have made the condition true.
        let pushes = pushes.load(Acquire);
        match ran {
            // Never IDLE, so no wake could win IDLE -> SCHEDULED.
            Ran::Done => assert_eq!(pushes, 0, "a running actor was pushed"),
            // IDLE with its condition true: exactly one waker must have pushed it.
            Ran::Parked => assert_eq!(pushes, 1, "lost wakeup: parked actor never pushed"),
        }
        if ran == Ran::Parked {
            // Whoever pops it resumes it, and it sees its condition.
            state.start_running();
            assert!(cond.lock().unwrap().ready);
        }
        state.complete();
        assert_eq!(state.wake(), WakeAction::None);
    });
}

/// What the mailbox-like object of the second model guards.
#[derive(Default)]
struct Slot {
    items: usize,
    waiter: bool,
}

/// An actor receives two items from two senders through a lock-guarded slot, parking as often
/// as it has to, and is pushed back to its worker each time a sender wakes it.
///
/// This follows the full protocol: the actor registers as the waiter and re-checks under the
/// lock (steps 1-2), parks (3-4); a sender adds an item and takes the waiter under the lock,
/// then wakes it after unlocking. The worker is the model's main thread: after the actor parks
/// it sleeps until the actor is pushed again, so a lost wakeup leaves it asleep forever, which
/// loom reports as a deadlock.
///
/// Four preemptions take about five seconds; the unbounded search takes about two minutes and
/// finds nothing more.
#[test]
fn repeated_parks_are_each_woken_once() {
    model(4, || {
        let state = Arc::new(WakeState::new_scheduled());
        let slot = Arc::new(Mutex::new(Slot::default()));
        let pushes = Arc::new(AtomicUsize::new(0));
        let worker = thread::current();

        let senders: Vec<_> = (0..2)
            .map(|_| {
                let (state, slot, pushes) = (state.clone(), slot.clone(), pushes.clone());
                let worker = worker.clone();
                thread::spawn(move || {
                    let waiter = {
                        let mut s = slot.lock().unwrap();
                        s.items += 1;
                        std::mem::take(&mut s.waiter)
                    };
                    if waiter && state.wake() == WakeAction::Schedule {
                        pushes.fetch_add(1, Release);
                        worker.unpark();
                    }
                })
            })
            .collect();

        let mut received = 0;
        let mut parks = 0;
        'actor: loop {
            // The worker pops the actor and resumes it.
            state.start_running();
            loop {
                {
                    let mut s = slot.lock().unwrap();
                    if s.items > 0 {
                        s.items -= 1;
                        received += 1;
                        if received == 2 {
                            break 'actor;
                        }
                        continue;
                    }
                    s.waiter = true;
                }
                if state.take_notification() {
                    continue;
                }
                match state.after_park() {
                    AfterPark::Parked => break,
                    AfterPark::Resume => continue,
                }
            }
            // Parked: the worker waits until a sender pushes the actor back.
            parks += 1;
            loop {
                let p = pushes.load(Acquire);
                assert!(p <= parks, "actor pushed twice for one park");
                if p == parks {
                    break;
                }
                thread::park();
            }
        }
        state.complete();

        for s in senders {
            s.join().unwrap();
        }
        assert_eq!(pushes.load(Acquire), parks, "actor pushed while not parked");
    });
}
