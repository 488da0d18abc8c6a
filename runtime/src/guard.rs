//! The stack overflow reporter.
//!
//! An actor that overflows its stack touches the guard page below it and the kernel sends
//! `SIGSEGV`. A bare "Segmentation fault" would leave the user guessing, so the runtime installs
//! a handler (once per process) that checks whether the faulting address lies in the guard page
//! of the actor running on the faulting thread. If it does, it writes one line naming the actor
//! and its stack size and how to raise it, restores the default action and returns, so the
//! access faults again and the process dies with `SIGSEGV` as before. Any other fault goes to the
//! handler that was installed before ours (Rust's own stack-overflow reporter, usually).
//!
//! The handler runs on the thread's alternate signal stack, which the standard library sets up
//! for every thread it spawns (worker threads included); it only reads a thread-local pointer
//! and the actor's id, and the span of its stack's guard page and size (`GuardSpan`), which
//! the frame at the root of the coroutine running on the thread keeps (`ActorFrame`, pointed
//! at by the worker context from the moment that coroutine gains control: when a process
//! actor starts or is resumed, and at each activation of a handler actor; during a forced unwind,
//! a kill's or shutdown's, no frame is current, and a fault near the interrupted stack pointer,
//! when that lies in the unwound coroutine's stack, is taken for the overflow, reported without
//! the stack's size),
//! looks a named actor's name up in the runtime's table of names if that table's lock is free (a
//! compare-and-swap; the lock is then left held, since the process dies right after and
//! unlocking could wake a waiter), formats into a fixed buffer and calls `write(2)`, all of
//! which are async-signal-safe.

use std::mem::MaybeUninit;
use std::sync::Once;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::context;

static INSTALL: Once = Once::new();
/// The `sigaction` that was in place before ours, for chaining (one per signal).
static PREVIOUS_SEGV: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
static PREVIOUS_BUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());

/// Installs the handler for `SIGSEGV` and `SIGBUS`, once per process.
pub(crate) fn install_overflow_reporter() {
    INSTALL.call_once(|| {
        for (sig, slot) in [
            (libc::SIGSEGV, &PREVIOUS_SEGV),
            (libc::SIGBUS, &PREVIOUS_BUS),
        ] {
            // SAFETY: plain `sigaction` calls with fully initialised structures. The previous
            // action is leaked into a static so the handler can chain to it at any time.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_fault as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old = MaybeUninit::<libc::sigaction>::zeroed();
                if libc::sigaction(sig, &action, old.as_mut_ptr()) == 0 {
                    slot.store(
                        Box::into_raw(Box::new(old.assume_init())),
                        Ordering::Release,
                    );
                }
            }
        }
    });
}

/// How far from the interrupted stack pointer a fault may lie to be taken for an overflow of
/// the stack of a coroutine being force-unwound (a kill's or shutdown's unwinder and
/// destructors run with no frame current, `context::suspend`), when that stack pointer lies
/// within the coroutine's stack. Code touches the stack at or near its stack pointer (a large
/// frame probes it page by page as it grows), so an overflow faults within a page or two of
/// it; a wild pointer seldom lands this close.
const NEAR_STACK_POINTER: usize = 64 * 1024;

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let actor = context::current_actor_raw();
    // SAFETY: a non-null pointer is the actor this worker is resuming; the worker holds an
    // `Arc` to it for the whole resume, and the fault happened during that resume.
    if let Some(actor) = unsafe { actor.as_ref() } {
        let (frame, unwinding) = context::current_frame_raw();
        let overflowed = if frame.is_null() {
            // A forced unwind: its coroutine's stack, by its bounds (guard page included).
            let overflow = |sp: usize| {
                unwinding.is_some_and(|stack| stack.stack_ptr_in_bounds(sp))
                    && addr.abs_diff(sp) <= NEAR_STACK_POINTER
            };
            interrupted_stack_pointer(uctx)
                .is_some_and(overflow)
                .then_some(None)
        } else {
            // SAFETY: a non-null frame, during a resume, is the root frame of the coroutine
            // running on this thread now (`ActorFrame`: set by that coroutine when it gains
            // control, cleared when its resume returns), which an overflow leaves intact (it
            // faults at the stack's other end, in the guard page). In the moment between the
            // entry function's return and the worker's clearing, it names a popped slot of a
            // stack that is still mapped: only the plain guard word is read, through the raw
            // pointer, making no reference to the frame and its yielder.
            let guard = unsafe { std::ptr::addr_of!((*frame).guard).read() };
            guard.guards(addr).then(|| Some(guard.usable_size()))
        };
        if let Some(size) = overflowed {
            report(actor, size);
            // SAFETY: resetting to the default action is async-signal-safe; returning then
            // re-runs the faulting access, which now kills the process with SIGSEGV.
            unsafe { libc::signal(sig, libc::SIG_DFL) };
            return;
        }
    }
    chain(sig, info, uctx);
}

/// The stack pointer the fault interrupted, read from the signal's context.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn interrupted_stack_pointer(uctx: *mut libc::c_void) -> Option<usize> {
    let uctx = uctx.cast::<libc::ucontext_t>();
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the kernel passes a valid `ucontext_t` as the third argument of an `SA_SIGINFO`
    // handler; its saved registers are plain integers.
    let sp = unsafe { (*uctx).uc_mcontext.gregs[libc::REG_RSP as usize] } as usize;
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above.
    let sp = unsafe { (*uctx).uc_mcontext.sp } as usize;
    Some(sp)
}

/// Elsewhere the interrupted stack pointer is not read: no fault is taken for an overflow
/// without a frame.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn interrupted_stack_pointer(_uctx: *mut libc::c_void) -> Option<usize> {
    None
}

/// Passes a fault that is not ours on as the kernel would have delivered it without us:
///
/// * to a previous handler, with its `sa_mask` (and the signal itself, unless `SA_NODEFER`)
///   blocked while it runs, and with `SA_RESETHAND` honoured (later signals get the default
///   action);
/// * for a previous `SIG_IGN`: a signal sent by a process (`kill`, `raise`) is ignored; a real
///   fault cannot be ignored (the kernel forces the default action for it), so it gets the
///   default;
/// * for a previous `SIG_DFL` (or none recorded): the default action, by resetting the
///   disposition and returning, so that the fault repeats, or for a sent signal, re-raising.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    let slot = if sig == libc::SIGBUS {
        &PREVIOUS_BUS
    } else {
        &PREVIOUS_SEGV
    };
    // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler.
    let sent = unsafe { (*info).si_code } <= 0;
    let prev = slot.load(Ordering::Acquire);
    // SAFETY: `prev` is null or a leaked, never-freed `sigaction` (see
    // `install_overflow_reporter`); the only other store is this function's null for
    // `SA_RESETHAND`, which frees nothing.
    let Some(prev) = (unsafe { prev.as_ref() }) else {
        default_action(sig, sent);
        return;
    };
    let h = prev.sa_sigaction;
    if h == libc::SIG_IGN && sent {
        return;
    }
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        default_action(sig, sent);
        return;
    }
    if prev.sa_flags & libc::SA_RESETHAND != 0 {
        // One delivery only: later ones see the default action.
        slot.store(std::ptr::null_mut(), Ordering::Release);
    }
    // SAFETY: sigset operations on local, initialised sets, and `pthread_sigmask`, which is
    // async-signal-safe. Calling the previous handler with the kernel's arguments, under the
    // mask the kernel would have set for it, is what the kernel would have done.
    unsafe {
        // Our own handler runs with `sig` blocked (no `SA_NODEFER`); the kernel would have
        // blocked it for the previous handler too, unless it asked for `SA_NODEFER`.
        let mut saved = MaybeUninit::<libc::sigset_t>::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &prev.sa_mask, saved.as_mut_ptr());
        if prev.sa_flags & libc::SA_NODEFER != 0 {
            let mut only = MaybeUninit::<libc::sigset_t>::zeroed();
            libc::sigemptyset(only.as_mut_ptr());
            libc::sigaddset(only.as_mut_ptr(), sig);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, only.as_ptr(), std::ptr::null_mut());
        }
        if prev.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(h);
            f(sig, info, uctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
            f(sig);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, saved.as_ptr(), std::ptr::null_mut());
    }
}

/// The default action for `sig`: a fault repeats once the handler returns and now kills the
/// process; a sent signal has to be sent again.
fn default_action(sig: libc::c_int, sent: bool) {
    // SAFETY: `signal` and `raise` are async-signal-safe. The signal is blocked while its
    // handler runs, so the raised one is delivered (with the default action) on return.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        if sent {
            libc::raise(sig);
        }
    }
}

/// Writes "threadlet: actor #N 'name' overflowed its stack of K KiB; ..." to stderr without
/// allocating; "of K KiB" only when the stack's size (`usable`) is known, which it is not
/// during a forced unwind.
fn report(actor: &crate::actor::ActorCell, usable: Option<usize>) {
    let mut buf = Buffer::new();
    buf.push(b"\nthreadlet: actor #");
    buf.push_num(actor.id.as_u64());
    if actor.is_named() {
        // Without waiting: the overflow may have interrupted the holder of the names' lock
        // (a spawn of a named actor), and then the report goes without the name.
        actor.shared.names.read_while_dying(actor.id, |name| {
            buf.push(b" '");
            buf.push(name.as_bytes());
            buf.push(b"'");
        });
    }
    buf.push(b" overflowed its stack");
    if let Some(usable) = usable {
        buf.push(b" of ");
        buf.push_num((usable / 1024) as u64);
        buf.push(b" KiB");
    }
    buf.push(
        b"; give it more with Builder::stack_size (whole runtime) or \
          ActorBuilder::stack_size (one actor)\n",
    );
    // SAFETY: `write(2)` on fd 2 with a pointer and length into our own buffer.
    unsafe { libc::write(2, buf.bytes.as_ptr().cast(), buf.len) };
}

struct Buffer {
    bytes: [u8; 512],
    len: usize,
}

impl Buffer {
    fn new() -> Buffer {
        Buffer {
            bytes: [0; 512],
            len: 0,
        }
    }

    fn push(&mut self, s: &[u8]) {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn push_num(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}
