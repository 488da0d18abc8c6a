//! What the loom models of this crate share: a worker's parker.

use loom::sync::{Condvar, Mutex};

/// A worker's parker, like `crossbeam_utils::sync::Parker`: one token; `unpark` before `park`
/// makes `park` return at once.
#[derive(Default)]
pub struct Parker {
    token: Mutex<bool>,
    cv: Condvar,
}

impl Parker {
    pub fn park(&self) {
        let mut token = self.token.lock().unwrap();
        while !*token {
            token = self.cv.wait(token).unwrap();
        }
        *token = false;
    }

    /// Takes the token if an unpark left one: `true` if so. (A timed sleep's early return.)
    #[allow(
        dead_code,
        reason = "used by the sleep model of `loom_idle.rs` and by `loom_linger.rs` only"
    )]
    pub fn try_park(&self) -> bool {
        std::mem::take(&mut *self.token.lock().unwrap())
    }

    pub fn unpark(&self) {
        *self.token.lock().unwrap() = true;
        self.cv.notify_one();
    }
}
