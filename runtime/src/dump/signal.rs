//! The dump on a signal ([`Builder::dump_on_signal`](crate::Builder::dump_on_signal),
//! `THREADLET_DUMP_SIGNAL`): which signals may carry it, the `threadlet-dump` thread that
//! waits for one, and what the signal does once no runtime dumps on it any more.
//!
//! # The signal's action after the last runtime
//!
//! signal-hook installs its handler for a signal the first time anything in the process
//! registers for it, and keeps it installed: dropping a registration removes an action, not
//! the handler, and the handler chains only to an earlier handler that was a function. So a
//! signal whose action was the default one (`SIGUSR1` ends the process, `SIGQUIT` dumps core)
//! would be ignored for the rest of the process once the runtimes that dumped on it were gone.
//! A process-wide table ([`TABLE`]) keeps, for each signal, how many runtimes dump on it:
//!
//! 1. the first registration for a signal in the process reads the signal's action before
//!    signal-hook's handler goes in; if it is the default action, it registers signal-hook's
//!    emulation of that action, behind a flag, raised (no runtime dumps on the signal yet: a
//!    registration that fails after this, its thread refused, leaves the signal as it was);
//! 2. each runtime that dumps on the signal counts itself in, and lowers the flag;
//! 3. its [`DumpSignal`] dropped (`Runtime::drop`, or a build that failed after it), it counts
//!    itself out; the last one out raises the flag.
//!
//! All three under the table's lock, so the count and the flag never disagree: a signal that
//! comes while a runtime is counted in prints dumps only, and one after the last is out does
//! what the signal did before any runtime took it. A signal that had a handler of its own
//! keeps it throughout (signal-hook chains to it); one that was ignored stays ignored. Left
//! as signal-hook leaves them: a signal whose default action signal-hook cannot emulate (the
//! real-time signals, `SIGPWR`, `SIGSTKFLT`) is ignored after the last runtime; and code that
//! registers its own signal-hook action for the same signal after a runtime dumped on it sees
//! the default action run after its own while no runtime dumps on it (for `SIGUSR1`: the
//! process ends).

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::runtime::Shared;

/// The signal named by `THREADLET_DUMP_SIGNAL` (a number, or `USR1`, `USR2`, `QUIT`, with or
/// without `SIG`), if it is set; anything else set there is reported once and ignored.
fn signal_from_env() -> Option<c_int> {
    let value = std::env::var("THREADLET_DUMP_SIGNAL").ok()?;
    let name = value.trim().trim_start_matches("SIG");
    let signal = match name {
        "USR1" => Some(libc::SIGUSR1),
        "USR2" => Some(libc::SIGUSR2),
        "QUIT" => Some(libc::SIGQUIT),
        n => n.parse().ok(),
    }
    .filter(|&s| check_signal(s).is_ok());
    if signal.is_none() {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!(
                "threadlet: THREADLET_DUMP_SIGNAL={value:?} is not a signal that can be caught; \
                 ignored"
            )
        });
    }
    signal
}

/// Refuses what signal-hook would panic on or the kernel would refuse: a number that is no
/// signal, the signals signal-hook forbids (`SIGKILL`, `SIGSTOP`, `SIGSEGV`, `SIGILL`,
/// `SIGFPE`; the runtime's overflow reporter also owns `SIGSEGV` and `SIGBUS`), and the
/// numbers between the standard signals and `SIGRTMIN`, which the C library keeps for itself
/// (32 and 33 with glibc: a handler for them is refused with `EINVAL`).
pub(crate) fn check_signal(signal: c_int) -> std::io::Result<()> {
    if signal <= 0
        || signal > libc::SIGRTMAX()
        || (signal > libc::SIGSYS && signal < libc::SIGRTMIN())
        || signal == libc::SIGBUS
        || signal_hook::consts::FORBIDDEN.contains(&signal)
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "signal {signal} cannot be used for the dump: it is not one a handler may catch"
            ),
        ));
    }
    Ok(())
}

/// One signal's entry in [`TABLE`].
struct Entry {
    /// Runtimes that dump on the signal now.
    runtimes: usize,
    /// The flag of the default action's emulation (step 1), if the signal had the default
    /// action before the first registration: raised while no runtime dumps on it.
    restore_default: Option<Arc<AtomicBool>>,
}

/// Every signal a runtime has dumped on in this process (module docs).
static TABLE: Mutex<Option<HashMap<c_int, Entry>>> = Mutex::new(None);

/// Whether `signal`'s action is the default one now.
fn has_default_action(signal: c_int) -> bool {
    // SAFETY: all-zero bytes are a valid `sigaction` (a plain C struct of integers, a
    // function pointer stored as an integer, and a signal set).
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: with a null new action, `sigaction` only writes the current one through a valid
    // pointer to a `sigaction` we own; it changes nothing.
    let read = unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) };
    read == 0 && old.sa_sigaction == libc::SIG_DFL
}

/// A runtime's registration for the dump signal: the `threadlet-dump` thread runs until it is
/// dropped, and the signal's action comes back after the last one (module docs, step 3).
pub(crate) struct DumpSignal {
    signal: c_int,
    handle: signal_hook::iterator::Handle,
}

impl DumpSignal {
    /// The registration `THREADLET_DUMP_SIGNAL` asks of every runtime the program builds, if
    /// it is set: one that cannot be had is reported once, not a reason to refuse the runtime.
    pub(crate) fn from_env(shared: Weak<Shared>) -> Option<DumpSignal> {
        let signal = signal_from_env()?;
        DumpSignal::register(signal, shared)
            .inspect_err(|e| {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    eprintln!("threadlet: no dump on THREADLET_DUMP_SIGNAL's signal {signal}: {e}")
                });
            })
            .ok()
    }

    /// Starts the `threadlet-dump` thread: it prints the runtime's dump on stderr each time
    /// `signal` arrives, until the registration is dropped or the runtime is gone. The handler
    /// itself is signal-hook's: it only wakes the thread.
    pub(crate) fn register(signal: c_int, shared: Weak<Shared>) -> std::io::Result<DumpSignal> {
        check_signal(signal)?;
        let mut table = TABLE.lock();
        let table = table.get_or_insert_with(HashMap::new);
        // Step 1, before signal-hook's handler goes in. The emulation is not registered where
        // signal-hook cannot emulate the signal's action (module docs).
        table.entry(signal).or_insert_with(|| Entry {
            runtimes: 0,
            restore_default: has_default_action(signal)
                .then(|| Arc::new(AtomicBool::new(true)))
                .filter(|flag| {
                    signal_hook::flag::register_conditional_default(signal, flag.clone()).is_ok()
                }),
        });
        let mut signals = signal_hook::iterator::Signals::new([signal])?;
        let handle = signals.handle();
        std::thread::Builder::new()
            .name("threadlet-dump".into())
            .spawn(move || {
                for _ in signals.forever() {
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    let text = super::dump(&shared).to_string();
                    drop(shared);
                    eprint!("{text}");
                }
            })
            .inspect_err(|_| handle.close())?;
        // Step 2.
        let entry = table.get_mut(&signal).expect("inserted above");
        entry.runtimes += 1;
        if let Some(flag) = &entry.restore_default {
            // SeqCst, as signal-hook's emulation loads it; the table's lock orders the
            // stores among runtimes.
            flag.store(false, Ordering::SeqCst);
        }
        Ok(DumpSignal { signal, handle })
    }
}

impl Drop for DumpSignal {
    fn drop(&mut self) {
        // Ends the `threadlet-dump` thread's wait; it exits on its own.
        self.handle.close();
        // Step 3.
        let mut table = TABLE.lock();
        let entry = table
            .as_mut()
            .and_then(|t| t.get_mut(&self.signal))
            .expect("counted in at registration");
        entry.runtimes -= 1;
        if entry.runtimes == 0
            && let Some(flag) = &entry.restore_default
        {
            flag.store(true, Ordering::SeqCst);
        }
    }
}
