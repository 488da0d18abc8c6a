//! The `tracing` feature: a span per actor entered on every run, and the runtime's events.
//! Run with `cargo test -p threadlet-runtime --features tracing --test tracing` (CI does).
#![cfg(feature = "tracing")]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use threadlet_runtime::{Runtime, SpawnOptions};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Records span names with their fields, enters per span, and event messages.
#[derive(Default)]
struct Recorder {
    next: AtomicU64,
    spans: Mutex<HashMap<u64, String>>,
    enters: Mutex<HashMap<u64, u64>>,
    events: Mutex<Vec<String>>,
}

struct Text(String);
impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={:?} ", field.name(), value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push_str(&format!("{}={} ", field.name(), value));
    }
}

/// The subscriber: a shared `Recorder` (the test reads it afterwards).
struct Shared(Arc<Recorder>);

impl Subscriber for Shared {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.target() == "threadlet"
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut t = Text(format!("{} ", attrs.metadata().name()));
        attrs.record(&mut t);
        self.0.spans.lock().unwrap().insert(id, t.0);
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, e: &Event<'_>) {
        let mut t = Text(String::new());
        e.record(&mut t);
        self.0.events.lock().unwrap().push(t.0);
    }
    fn enter(&self, id: &Id) {
        *self
            .0
            .enters
            .lock()
            .unwrap()
            .entry(id.into_u64())
            .or_default() += 1;
    }
    fn exit(&self, _: &Id) {}
}

#[test]
fn each_actor_has_a_span_entered_on_every_run_and_the_runtime_emits_events() {
    let rec = Arc::new(Recorder::default());
    // Global: the spans are made and entered on the runtime's threads.
    tracing::subscriber::set_global_default(Shared(rec.clone())).unwrap();
    let rt = Runtime::builder().workers(1).build().unwrap();
    let h = rt
        .spawn_with(SpawnOptions::new().name("traced"), || {
            threadlet_runtime::yield_now(); // a second run
            threadlet_runtime::sleep(std::time::Duration::from_millis(1)); // a park, a wake
            panic!("on purpose")
        })
        .unwrap();
    assert!(h.join().unwrap_err().is_panic());
    let spans = rec.spans.lock().unwrap().clone();
    let (span_id, text) = spans
        .iter()
        .find(|(_, t)| t.contains("traced"))
        .expect("the actor's span");
    assert!(text.starts_with("actor "), "{text}");
    assert!(text.contains("kind=process"), "{text}");
    let enters = rec
        .enters
        .lock()
        .unwrap()
        .get(span_id)
        .copied()
        .unwrap_or(0);
    assert!(enters >= 3, "entered {enters} times"); // start, after the yield, after the sleep
    // The join can return before the `panic` event is out: the actor's result is handed over
    // as its coroutine ends, and the worker emits the event once the coroutine has handed it
    // back. A CI run saw the worker's thread kept off its CPU for 100 ms in between.
    let names = [
        "message=spawn",
        "message=park",
        "message=wake",
        "message=panic",
    ];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let events = loop {
        let events = rec.events.lock().unwrap().join("\n");
        if names.iter().all(|n| events.contains(n)) || std::time::Instant::now() > deadline {
            break events;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    for name in names {
        assert!(events.contains(name), "no {name} in:\n{events}");
    }
    assert!(events.contains("wait=a sleep"), "{events}");

    // A panic caught by a destructor while shutdown unwinds a suspended actor is told too,
    // once the unwind has handed the worker back. (The worker emitted such events only after
    // a run, and the thread went first: the event was lost.)
    struct CatchesOnDrop;
    impl Drop for CatchesOnDrop {
        fn drop(&mut self) {
            let _ = std::panic::catch_unwind(|| panic!("in a destructor, during the unwind"));
        }
    }
    let parked = rt
        .spawn_with(SpawnOptions::new().name("unwound"), || {
            let _guard = CatchesOnDrop;
            while threadlet_runtime::park().is_ok() {}
        })
        .unwrap();
    while !rec
        .events
        .lock()
        .unwrap()
        .join("\n")
        .contains("wait=a wake (bare park)")
    {
        std::thread::yield_now();
    }
    drop(rt);
    assert!(parked.join().unwrap_err().is_cancelled());
    let events = rec.events.lock().unwrap().join("\n");
    assert!(
        events.contains("message=in a destructor, during the unwind"),
        "no panic event from the unwind in:\n{events}"
    );
}
