//! Helpers shared by the integration tests that guard against hangs.

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

/// Long enough for anything these tests do on a loaded 2-core machine; only a hang takes this
/// long.
pub const WATCHDOG: Duration = Duration::from_secs(30);

/// Runs `f` on a helper thread; fails the test if it does not finish within [`WATCHDOG`], so
/// that a hang is a failure that names what hung, not a stuck test binary. A panic in `f` is
/// passed on as it is (its message was printed where it happened), not taken for a hang.
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
