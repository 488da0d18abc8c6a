//! `JoinSet`: completion order, abort, and kill-on-drop.

mod common;

use std::time::Duration;

use common::within_watchdog;
use threadlet::{Actor, Context, ExitReason, JoinError, JoinSet, Monitor, Runtime, RuntimeExt};

#[test]
fn join_next_follows_completion_order_from_a_plain_thread() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let handle = rt.handle();
    let mut set = JoinSet::new();
    // Each actor ends when its gate opens; the gates open one at a time, in an order other than
    // the spawn order (not by sleeps, which a crowded machine can reorder).
    let mut gates = std::collections::HashMap::new();
    for key in [40u64, 0, 20, 10, 30] {
        let (open, gate) = threadlet::channel::unbounded::<()>();
        gates.insert(key, open);
        set.spawn_on(&handle, move || {
            gate.recv().unwrap();
            key
        });
    }
    assert_eq!(set.len(), 5);
    let order: Vec<u64> = within_watchdog("join set order", move || {
        let mut order = Vec::new();
        for key in [0u64, 10, 20, 30, 40] {
            gates[&key].send(()).unwrap();
            order.push(set.join_next().unwrap().unwrap());
        }
        assert!(set.is_empty());
        assert!(set.join_next().is_none());
        order
    });
    assert_eq!(order, [0, 10, 20, 30, 40]);
}

#[test]
fn abort_all_kills_the_running_and_keeps_finished_results() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let mut set = JoinSet::new();
    set.spawn_on(&rt.handle(), || 1u32);
    while set.try_join_next().is_none() {
        std::thread::yield_now();
    }
    for _ in 0..3 {
        set.spawn_on(&rt.handle(), || {
            threadlet::sleep(Duration::from_secs(3600));
            2
        });
    }
    set.abort_all();
    let results = within_watchdog("abort_all", move || {
        let mut results = Vec::new();
        while let Some(r) = set.join_next() {
            results.push(r);
        }
        results
    });
    assert_eq!(results.len(), 3);
    assert!(
        results
            .iter()
            .all(|r| r.as_ref().is_err_and(JoinError::is_killed))
    );
}

#[test]
fn dropping_the_set_kills_what_is_still_running() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let mut set = JoinSet::new();
    let mut monitors = Vec::new();
    for _ in 0..4 {
        let h = rt.spawn(|| threadlet::sleep(Duration::from_secs(3600)));
        monitors.push(Monitor::of(&h));
        set.insert(h);
    }
    drop(set);
    let reasons: Vec<ExitReason> = within_watchdog("drop kills", move || {
        monitors.iter().map(|m| m.recv().reason).collect()
    });
    assert_eq!(reasons, vec![ExitReason::Killed; 4]);
}

struct Counter(u64);

impl Actor for Counter {
    type Msg = u64;
    fn handle(&mut self, n: u64, ctx: &mut Context<Self>) {
        self.0 += n;
        if n == 0 {
            ctx.stop();
        }
    }
}

#[test]
fn handler_actors_join_the_set_too() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let mut set = JoinSet::new();
    let addrs: Vec<_> = (0..3)
        .map(|_| {
            let (addr, h) = rt.start(Counter(0));
            set.insert(h);
            addr
        })
        .collect();
    for (i, a) in addrs.iter().enumerate() {
        a.send(i as u64 + 1).unwrap();
        a.send(0).unwrap();
    }
    let mut totals: Vec<u64> = within_watchdog("handler join set", move || {
        std::iter::from_fn(|| set.join_next())
            .map(|r| r.unwrap().0)
            .collect()
    });
    totals.sort_unstable();
    assert_eq!(totals, [1, 2, 3]);
}

/// A set drained where its owner may not wait (a destructor on the stack of a killed actor)
/// gives back the result of an actor that has finished, though the set's own exit hook, which
/// names the actor on the set's channel, has not run yet: here an earlier hook of the actor
/// holds the set's back until the drain is over. (The set gave it up as `Cancelled` before,
/// and dropped the value.)
#[test]
fn a_set_drained_during_its_owners_unwind_keeps_a_finished_actors_result() {
    within_watchdog("draining a set in an unwind", || {
        struct DrainOnDrop(
            Option<JoinSet<u32>>,
            std::sync::mpsc::Sender<Vec<Result<u32, String>>>,
        );
        impl Drop for DrainOnDrop {
            fn drop(&mut self) {
                let mut set = self.0.take().unwrap();
                let mut out = Vec::new();
                while let Some(r) = set.join_next() {
                    out.push(r.map_err(|e| e.to_string()));
                }
                self.1.send(out).unwrap();
            }
        }
        let rt = Runtime::builder().workers(1).build().unwrap();
        // The entry runs on a runtime of its own, whose worker the held hook occupies.
        let other = Runtime::builder().workers(1).build().unwrap();
        let other_handle = other.handle();
        let (drained_tx, drained) = std::sync::mpsc::channel();
        let (in_hook_tx, in_hook) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let owner = rt.spawn(move || {
            let mut set = JoinSet::new();
            let (go, wait_for_go) = threadlet::channel::bounded::<()>(1);
            let entry = other_handle.spawn(move || {
                wait_for_go.recv().unwrap();
                42u32
            });
            // Registered before the set's own hook, so it runs first, and holds it back.
            entry.exit_watch().on_exit(move |_| {
                in_hook_tx.send(()).unwrap();
                released.recv().unwrap();
            });
            set.insert(entry);
            let _drain = DrainOnDrop(Some(set), drained_tx);
            go.send(()).unwrap();
            ready_tx.send(()).unwrap();
            threadlet::sleep(Duration::from_secs(3600));
        });
        ready.recv().unwrap();
        // The entry has returned 42 and its hooks have begun: the set has not heard yet.
        in_hook.recv().unwrap();
        owner.abort();
        let out = drained.recv().unwrap();
        release.send(()).unwrap();
        assert!(owner.join().unwrap_err().is_killed());
        assert_eq!(out, vec![Ok(42)]);
    });
}
