//! Under `mprotect` guards every stack costs two kernel mappings, and the process has at most
//! `vm.max_map_count` of them. The runtime caps the stacks it guards below that, so that an
//! actor past the cap fails to spawn with an error that names the limit, and the rest of the
//! process (a thread, a large allocation) still gets its mappings. Stacks of a custom size
//! were held only to the cap on reservations, which actors give back when they end, while the
//! slots of a burst of default-size actors stay mapped: after a burst, custom stacks ran the
//! process out of mappings (a bare "Cannot allocate memory", and no thread could be made).
//!
//! Its own test binary: it forces `mprotect` guards for the whole process.

use std::time::Duration;

use threadlet_runtime::{Runtime, SpawnOptions};

#[test]
fn custom_stacks_after_a_burst_stay_under_the_cap_on_mappings() {
    // SAFETY: set before any thread of this binary reads the environment (the only test
    // here, and before its first runtime).
    unsafe { std::env::set_var("THREADLET_FORCE_MPROTECT_GUARDS", "1") };
    let limit: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65_530);
    if limit > 200_000 {
        // Reaching the cap would take too many actors for a test; the default is 65,530.
        eprintln!("vm.max_map_count is {limit}: too high to reach here, not checked");
        return;
    }
    let rt = Runtime::builder().workers(1).build().unwrap();
    // A burst of default-size actors, alive at once: their slots stay carved after they end.
    let burst = (limit / 2) * 2 / 3;
    let hs: Vec<_> = (0..burst)
        .map(|_| rt.spawn(|| threadlet_runtime::sleep(Duration::from_millis(1500))))
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    // Custom-size stacks, until the runtime refuses one (or more than the limit allows).
    let mut alive = Vec::new();
    let mut refused = None;
    for _ in 0..limit / 2 {
        let opts = SpawnOptions::new().stack_size(32 * 1024);
        match rt.spawn_with(opts, || threadlet_runtime::sleep(Duration::from_secs(3))) {
            Ok(h) => alive.push(h),
            Err(e) => {
                refused = Some(e.to_string());
                break;
            }
        }
    }
    // The process still has mappings to spare: a thread can be made.
    let thread = std::thread::Builder::new().spawn(|| ()).map(|t| t.join());
    for h in alive {
        let _ = h.join();
    }
    let refused = refused.expect("the cap was never reached");
    assert!(refused.contains("vm.max_map_count"), "{refused}");
    assert!(thread.is_ok(), "no thread could be made");
}
