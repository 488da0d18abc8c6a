//! Loom models of lingering before a park (`worker/linger.rs`): the shipped `WakeFlag` and
//! `Linger::watch`, run by a modelled worker against wakers that push work and wake it as
//! `Remote::unpark` does (raise the flag, then unpark the parker).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p threadlet-runtime --test loom_linger --release
//! ```
//!
//! The worker sleeps as `WorkerLoop::sleep` does: a watch (under loom, `LOOM_LOOKS` looks at
//! the flag), then, if it caught nothing, a park on its parker (the model's, with the same
//! token rule as crossbeam's) and `after_block`. Between sleeps it looks for the work. If a
//! wake could be lost, the worker would park for good after the last waker has gone, and loom
//! would report a deadlock. After a watch that caught a wake, the work of the waker whose raise
//! it read must be visible to it: the flag's release and acquire pair up (with two wakers, the
//! raise it read may be either's, so that model checks only that nothing is lost).
#![cfg(loom)]

mod loom_support;

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use loom::sync::atomic::AtomicUsize;
use loom::thread;
use loom_support::Parker;
use threadlet_runtime::__private::{Linger, WakeFlag};

/// A worker's wake flag and parker, and the work wakers push (a count of items, pushed with
/// relaxed stores: only the wake's flag or the parker's lock can make them visible).
#[derive(Default)]
struct Worker {
    flag: WakeFlag,
    parker: Parker,
    pushed: AtomicUsize,
}

impl Worker {
    /// A waker: pushes one item, then wakes the worker as `Remote::unpark` does.
    fn push_and_wake(&self) {
        self.pushed.fetch_add(1, Relaxed);
        self.flag.raise();
        self.parker.unpark();
    }

    /// The worker: sleeps, looking for work between sleeps, until it has seen `expected`
    /// items. After every watch that caught a wake, `caught` is told how many it saw then.
    fn run(&self, expected: usize, mut caught: impl FnMut(usize)) {
        let linger = Linger::lingering();
        while self.pushed.load(Relaxed) < expected {
            if linger.watch(&self.flag, Instant::now(), None, || {
                self.parker.try_park();
            }) {
                caught(self.pushed.load(Relaxed));
            } else {
                self.parker.park();
                // The clock is not modelled: every block counts as short, so a worker woken
                // out of its park lingers in its next sleep.
                linger.after_block(&self.flag, Duration::ZERO);
            }
        }
    }
}

/// Runs `f` under loom with at most `preemption_bound` preemptions per execution (`None`:
/// all), unless `LOOM_MAX_PREEMPTIONS` sets another bound.
fn model(preemption_bound: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if let Some(bound) = preemption_bound {
        builder.preemption_bound.get_or_insert(bound);
    }
    builder.check(f);
}

/// One waker, every interleaving. Every execution ends with the worker having seen the item; a watch that
/// caught the wake saw it at once.
#[test]
fn one_wake_is_caught_by_the_watch_or_ends_the_park() {
    model(None, || {
        let w = Arc::new(Worker::default());
        let waker = {
            let w = w.clone();
            thread::spawn(move || w.push_and_wake())
        };
        w.run(1, |seen| {
            assert_eq!(seen, 1, "a caught wake's push is visible")
        });
        waker.join().unwrap();
    });
}

/// Two wakers, each with its own item: the worker sees both, however the raises, takes,
/// unparks and parks interleave (up to four preemptions an execution: all of them take
/// minutes).
#[test]
fn two_wakes_are_never_lost() {
    model(Some(4), || {
        let w = Arc::new(Worker::default());
        let wakers: Vec<_> = (0..2)
            .map(|_| {
                let w = w.clone();
                thread::spawn(move || w.push_and_wake())
            })
            .collect();
        w.run(2, |seen| {
            assert!(seen >= 1, "a caught wake's push is visible")
        });
        for waker in wakers {
            waker.join().unwrap();
        }
    });
}
