//! Helpers shared by the integration tests that guard against hangs.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// Long enough for anything these tests do on a loaded 2-core machine; only a hang takes this
/// long.
pub const WATCHDOG: Duration = Duration::from_secs(30);

/// Runs `f` on a helper thread; fails the test if it does not finish within [`WATCHDOG`], so
/// that a hang is a failure that names what hung, not a stuck test binary.
pub fn within_watchdog<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| panic!("{what}: did not finish within {WATCHDOG:?} (hang)"))
}
