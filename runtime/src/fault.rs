//! Fault containment: running user code where a panic must not escape.
//!
//! The runtime calls user code in places where no user frame is there to catch a panic: the
//! destructor of an actor's result or panic payload when nobody joins it, the closure of an
//! actor that never started, a timer's callback or message, the long-run hook. A panic that
//! escaped from there would unwind a runtime thread (a worker or the monitor) and kill it,
//! taking every actor pinned to it along. So each such place runs the code through
//! [`contain`]:
//!
//! 1. the code runs under `catch_unwind`;
//! 2. a panic is reported once, as one line on stderr that says where it was contained (the
//!    standard panic hook has already printed the panic itself);
//! 3. the payload is dropped under `catch_unwind` too, since a payload's destructor may panic
//!    in turn; a payload that panics while being dropped is leaked (`mem::forget`), which is
//!    safe, rather than dropped a third time.
//!
//! What `contain` cannot catch is a destructor that panics *while* a panic already unwinds the
//! same stack: Rust aborts the process then ("panic in a destructor during cleanup"), in an
//! actor exactly as in any thread. The runtime keeps that rule (see `docs/safety.md`).
//!
//! # Naming the actor that panicked
//!
//! The standard panic hook names the thread, and every actor on a worker shares its thread's
//! name. So the first `Runtime` built installs, once per process, a hook of its own
//! ([`install_panic_hook`]): a panic raised while an actor runs is reported as
//! `actor #42 "mapper" on worker 1 panicked at src/map.rs:10:5:` and the message (with a
//! backtrace when `RUST_BACKTRACE` asks for one); any other panic goes to the hook that was
//! installed before. A hook the program installs later replaces it, as usual.

use std::any::Any;
use std::fmt;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use crate::context;

/// Runs `f` under `catch_unwind` and returns its panic, if any, except the one unwind that is
/// not a panic of the code's own: shutdown or a kill force-unwinding an actor suspended inside
/// `f` (a result's destructor that waits on a mailbox, say), which goes on to the coroutine's
/// root, as `join::entry` lets it. Outside any actor nothing is unwound that way, so a real
/// panic there is always caught. (Public as [`crate::catch_actor_panic`].)
#[inline]
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, Box<dyn Any + Send>> {
    // Already unwinding (the code runs in a destructor on the way): whatever is caught below
    // is a new panic of the code's own, never the unwind in progress, and must be caught,
    // since letting it out of a destructor during an unwind aborts the process.
    // Asked only once something is caught: the catch has taken its own panic off the thread's
    // count by then, so `panicking` says what it would have said before the call (and the
    // common case, nothing caught, does not ask).
    match catch_unwind(AssertUnwindSafe(f)) {
        Err(payload)
            if !std::thread::panicking()
                && context::is_cancelling()
                && context::current().is_some() =>
        {
            resume_unwind(payload)
        }
        r => r,
    }
}

/// Runs `f`; a panic in it is reported (naming `what`) and swallowed. Returns `f`'s value, or
/// `None` if it panicked. A forced unwind of the actor passes through ([`catch`]).
pub(crate) fn contain<R>(what: impl fmt::Display, f: impl FnOnce() -> R) -> Option<R> {
    match catch(f) {
        Ok(v) => Some(v),
        Err(payload) => {
            report(&what, &payload);
            drop_payload(payload);
            None
        }
    }
}

/// Installs the actor-naming panic hook (module docs), once per process.
pub(crate) fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| match context::running_actor_label() {
            Some(label) => report_actor_panic(&label, info),
            None => previous(info),
        }));
    });
}

/// The panic line of an actor: its label, where, and the message.
fn report_actor_panic(label: &str, info: &std::panic::PanicHookInfo<'_>) {
    let message = panic_message(info.payload()).unwrap_or("Box<dyn Any>");
    crate::trace::panicked(label, message);
    let location = info
        .location()
        .map_or_else(String::new, |l| format!(" at {l}"));
    // Captured here (the frames are this stack's), formatted on a thread of its own: the
    // symbols' lookup takes more stack than an actor's smallest (`MIN_STACK_SIZE`) has left
    // under a panic, and this hook runs on the actor's stack.
    let backtrace = std::backtrace::Backtrace::capture();
    let backtrace = match backtrace.status() {
        std::backtrace::BacktraceStatus::Captured => std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("threadlet-backtrace".into())
                .spawn_scoped(s, || format!("stack backtrace:\n{backtrace}\n"))
                .ok()
                .and_then(|t| t.join().ok())
        })
        .unwrap_or_else(|| "(no thread to format its backtrace on)\n".to_owned()),
        _ => String::new(),
    };
    // One write, ignoring errors: a hook must not panic (stderr may be closed).
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{label} panicked{location}:\n{message}\n{backtrace}").as_bytes());
}

/// Drops a panic payload whose destructor may itself panic; such a payload is leaked.
pub(crate) fn drop_payload(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        // The payload of the destructor's own panic may panic too: stop here and leak it.
        std::mem::forget(again);
    }
}

/// The message of a panic payload, when it is a string.
pub fn panic_message(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

fn report(what: &dyn fmt::Display, payload: &Box<dyn Any + Send>) {
    let msg = panic_message(&**payload).unwrap_or("<non-string payload>");
    // Not `eprintln!`: it panics when stderr is gone (a closed pipe), outside the containment.
    let _ = writeln!(
        std::io::stderr(),
        "threadlet: contained a panic in {what}: {msg}; the runtime carries on"
    );
}

/// Aborts the process if its thread unwinds while this guard lives. Runtime threads (workers,
/// the monitor, the timer thread) hold one: the user code they run is contained, so a panic
/// that unwinds their own frames is a bug in the runtime, and letting the thread die would
/// silently break what it is there for (the `consequence`).
pub(crate) struct AbortOnUnwind {
    thread: String,
    consequence: &'static str,
}

impl AbortOnUnwind {
    pub(crate) fn new(thread: impl Into<String>, consequence: &'static str) -> AbortOnUnwind {
        AbortOnUnwind {
            thread: thread.into(),
            consequence,
        }
    }
}

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = writeln!(
                std::io::stderr(),
                "threadlet: {} panicked outside any user code: this is a bug in threadlet, not \
                 in your code (the panic is above). Aborting: {}.",
                self.thread,
                self.consequence
            );
            std::process::abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct PanicOnDrop;
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            panic!("PanicOnDrop");
        }
    }

    #[test]
    fn returns_the_value_or_none() {
        assert_eq!(contain("a test", || 5), Some(5));
        assert_eq!(contain("a test", || -> u32 { panic!("boom") }), None);
    }

    /// Panics when dropped, with a payload that panics when dropped.
    struct Nested;
    impl Drop for Nested {
        fn drop(&mut self) {
            std::panic::panic_any(PanicOnDrop);
        }
    }

    #[test]
    fn payloads_that_panic_when_dropped_are_contained() {
        assert_eq!(contain("a test", || drop(PanicOnDrop)), None);
        assert_eq!(
            contain("a test", || std::panic::panic_any(PanicOnDrop)),
            None
        );
        // The payload's destructor panics, and so does its own payload's: leaked, not lost.
        let r: Option<()> = contain("a test", || std::panic::panic_any(Nested));
        assert_eq!(r, None);
    }
}
