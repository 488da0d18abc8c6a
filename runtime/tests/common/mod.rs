//! Helpers shared by the integration tests.

use threadlet_runtime::{Runtime, Scheduler};

/// A runtime of `workers` workers under each scheduler in turn (work stealing, then the two
/// baselines), with that scheduler for failure messages. Each is built only when the loop
/// reaches it, so the one before has been dropped by then (unless the loop kept it).
pub fn under_each_scheduler(workers: usize) -> impl Iterator<Item = (Scheduler, Runtime)> {
    [
        Scheduler::WorkStealing,
        Scheduler::GlobalQueue,
        Scheduler::Gil,
    ]
    .into_iter()
    .map(move |scheduler| {
        let rt = Runtime::builder()
            .workers(workers)
            .scheduler(scheduler)
            .build()
            .unwrap();
        (scheduler, rt)
    })
}
