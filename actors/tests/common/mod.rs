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
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("{what}: did not finish within {limit:?} (hang)"))
}
