//! A `tracing` subscriber that panics: it is the program's code, called from the runtime's
//! threads, so each call is contained; no worker or monitor dies of it, and the actors run to
//! their end. Run with `cargo test -p threadlet-runtime --features tracing --test
//! tracing_contained` (CI does). Its own binary: the subscriber is the process's global one.
#![cfg(feature = "tracing")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use threadlet_runtime::Runtime;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Panics in every call the runtime makes to it, after counting the call in `CALLS`.
struct Panicky;

static CALLS: AtomicU64 = AtomicU64::new(0);
static NEXT_SPAN: AtomicU64 = AtomicU64::new(1);

impl Panicky {
    fn fail(&self, what: &str) {
        CALLS.fetch_add(1, Ordering::Relaxed);
        panic!("the subscriber fails in {what}");
    }
}

impl Subscriber for Panicky {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.target() == "threadlet"
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        let id = NEXT_SPAN.fetch_add(1, Ordering::Relaxed);
        if id.is_multiple_of(2) {
            self.fail("new_span"); // every other span: the others are entered and exited
        }
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {
        self.fail("event");
    }
    fn enter(&self, _: &Id) {
        self.fail("enter");
    }
    fn exit(&self, _: &Id) {
        self.fail("exit");
    }
    fn try_close(&self, _: Id) -> bool {
        self.fail("try_close");
        true
    }
}

/// Spawns, runs, parks, wakes (a timer's wake on the monitor thread), preemption, and an
/// actor's own panic (the `panic` event, emitted after the panic hook), under a subscriber
/// that panics in every call: every actor ends with its own result. (The process aborted at
/// the first entered span, a worker having "panicked outside any user code".)
#[test]
fn a_subscriber_that_panics_takes_no_runtime_thread_down() {
    tracing::subscriber::set_global_default(Panicky).unwrap();
    std::panic::set_hook(Box::new(|_| {})); // thousands of contained panics: keep the log short
    let rt = Runtime::builder()
        .workers(2)
        .time_slice(Duration::from_millis(1))
        .build()
        .unwrap();
    for round in 0..20u64 {
        let sum = rt.block_on(move || {
            let sleepers: Vec<_> = (0..4u64)
                .map(|i| {
                    threadlet_runtime::spawn(move || {
                        threadlet_runtime::sleep(Duration::from_millis(1));
                        i
                    })
                })
                .collect();
            let spinner = threadlet_runtime::spawn(|| {
                let t = std::time::Instant::now();
                while t.elapsed() < Duration::from_millis(3) {
                    threadlet_runtime::checkpoint();
                }
            });
            let panics = threadlet_runtime::spawn(|| panic!("the actor's own"));
            assert!(panics.join().unwrap_err().is_panic());
            spinner.join().unwrap();
            sleepers.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        });
        assert_eq!(sum, 6, "round {round}");
    }
    drop(rt);
    let _ = std::panic::take_hook();
    assert!(
        CALLS.load(Ordering::Relaxed) > 100,
        "the subscriber was called"
    );
}
