//! Helpers shared by the integration tests that guard against hangs.

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use threadlet::{Runtime, Scheduler};

/// Long enough for anything these tests do on a loaded 2-core machine; only a hang takes this
/// long.
pub const WATCHDOG: Duration = Duration::from_secs(30);

/// Runs `f` on a helper thread; fails the test if it does not finish within [`WATCHDOG`], so
/// that a hang is a failure that names what hung, not a stuck test binary. A panic in `f` is
/// passed on as it is (its message was printed where it happened), not taken for a hang.
#[allow(dead_code)] // not every test file that includes this module uses it
pub fn within_watchdog<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    within(WATCHDOG, what, f)
}

/// [`within_watchdog`] with a limit of its own, for the few tests whose work alone takes a
/// good part of [`WATCHDOG`] on a loaded 2-core machine.
#[allow(dead_code)] // not every test file that includes this module uses it
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(panic::catch_unwind(AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(done)) => done,
        // The panic hook has printed the message (and where) on the helper thread already.
        Ok(Err(payload)) => {
            eprintln!("{what}: panicked (not a hang)");
            panic::resume_unwind(payload)
        }
        Err(RecvTimeoutError::Timeout) => panic!("{what}: did not finish within {limit:?} (hang)"),
        Err(RecvTimeoutError::Disconnected) => {
            panic!("{what}: its thread ended without a result (a panic while panicking?)")
        }
    }
}

/// Runs test `name` of this binary again in a child process, with `env` set (which the test
/// reads to play the child's part), and returns what the child did: for tests that change
/// what is process-wide (a resource limit, a choice made once per process) or may abort it.
#[allow(dead_code)] // not every test file that includes this module uses it
pub fn in_child(name: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// [`in_child`], for a child that must pass: it exited cleanly, and ran the test (a filter
/// that matched nothing would pass too).
#[allow(dead_code)] // not every test file that includes this module uses it
pub fn passes_in_child(name: &str, env: &[(&str, &str)]) {
    let out = in_child(name, env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

/// A figure of `/proc/self/status` in KiB, by its field's name (`"VmRSS"`, `"VmSize"`).
#[allow(dead_code)] // not every test file that includes this module uses it
pub fn proc_status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// Runs the tests of a binary that take it one at a time (those that measure or use what is
/// process-wide): each holds the guard for its whole run. A test that failed while holding it
/// poisons it; the next one still runs alone.
#[allow(dead_code)] // not every test file that includes this module uses it
pub fn alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits until `done` holds, polling; panics with `what` after 20 s, a bound only a defect
/// reaches. For what an actor's end leads to (an exit hook's effect), which a `join` that
/// comes while the hooks run may return before.
#[allow(dead_code)] // not every test file that includes this module uses it
pub fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A runtime of `workers` workers under each scheduler in turn (work stealing, then the two
/// baselines), with that scheduler for failure messages. Each is built only when the loop
/// reaches it, so the one before has been dropped by then (unless the loop kept it).
#[allow(dead_code)] // not every test file that includes this module uses it
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
