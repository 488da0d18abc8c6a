//! One million blocked process actors fit on this (24 GiB) machine with guard pages on, and one
//! million idle handler actors in a fraction of that.
//!
//! Ignored by default: it takes seconds in release and much longer in debug, and needs several
//! GiB of memory. Run it with (one test at a time: each measures the process's RSS)
//! `cargo test --release -p threadlet --test million -- --ignored --nocapture --test-threads=1`.

#[allow(dead_code)] // only `proc_status_kib` and `alone` are used here
mod common;

// One test at a time: each reads the process's RSS, which another one running beside it would
// move (and could shrink, between a test's two readings).
use common::alone;

use threadlet::{Mailbox, Runtime, RuntimeExt};

/// Gives the heap's free pages back to the kernel, so that a test run after another in the same
/// process counts its own actors, not pages the one before freed and the allocator kept.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only returns free memory of glibc's arenas to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn rss_bytes() -> usize {
    common::proc_status_kib("VmRSS") as usize * 1024
}

/// RSS growth from `before` to `during`, in MiB and in bytes per actor (negative if it shrank).
fn growth(before: usize, during: usize, n: usize) -> (f64, f64) {
    let grew = during as f64 - before as f64;
    (grew / (1 << 20) as f64, grew / n as f64)
}

fn blocked_actors(n: usize) {
    let _alone = alone();
    let rt = Runtime::builder().build().unwrap();
    trim_heap();
    let before = rss_bytes();
    let mut addrs = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    for _ in 0..n {
        let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| mb.recv());
        addrs.push(addr);
        handles.push(h);
    }
    // Wait until every actor has started (and so blocked in `recv`): each start is one run.
    while rt.stats().total().actors_run < n as u64 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (mib, per_actor) = growth(before, rss_bytes(), n);
    let stats = rt.stats();
    println!(
        "{n} blocked actors: RSS grew {mib:.1} MiB, {per_actor:.0} bytes per actor (madvise guards: {})",
        stats.madvise_guards
    );
    for (i, a) in addrs.iter().enumerate() {
        a.send(i as u32).unwrap();
    }
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), Some(i as u32));
    }
}

#[test]
#[ignore = "needs several GiB and seconds in release; see the module docs"]
fn one_million_blocked_actors() {
    blocked_actors(1_000_000);
}

#[test]
fn ten_thousand_blocked_actors() {
    blocked_actors(10_000);
}

/// Holds one number; ends on its first message, returning it.
struct Holder(Option<u32>);

impl threadlet::Actor for Holder {
    type Msg = u32;
    fn handle(&mut self, n: u32, ctx: &mut threadlet::Context<Self>) {
        self.0 = Some(n);
        ctx.stop();
    }
}

/// `n` idle handler actors (each started, parked on its empty mailbox, holding no stack).
fn idle_handler_actors(n: usize) {
    let _alone = alone();
    let rt = Runtime::builder().build().unwrap();
    trim_heap();
    let before = rss_bytes();
    let runs_before = rt.stats().total().actors_run;
    let (addrs, handles): (Vec<_>, Vec<_>) = (0..n).map(|_| rt.start(Holder(None))).unzip();
    // Each actor's first activation (its `started` hook) is one run; then it is idle.
    while rt.stats().total().actors_run < runs_before + n as u64 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (mib, per_actor) = growth(before, rss_bytes(), n);
    println!("{n} idle handler actors: RSS grew {mib:.1} MiB, {per_actor:.0} bytes per actor");
    for (i, a) in addrs.iter().enumerate() {
        a.send(i as u32).unwrap();
    }
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap().0, Some(i as u32));
    }
}

#[test]
#[ignore = "needs seconds in release; see the module docs"]
fn one_million_idle_handler_actors() {
    idle_handler_actors(1_000_000);
}

#[test]
fn ten_thousand_idle_handler_actors() {
    idle_handler_actors(10_000);
}
