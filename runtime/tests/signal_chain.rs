//! The overflow reporter passes signals that are not actor overflows on as the kernel would
//! have delivered them without it: a previous `SIG_IGN` still ignores a sent `SIGSEGV`, and a
//! previous handler runs with its own `sa_mask` blocked. Each case installs process-wide signal
//! dispositions, so it runs in a child process (this test binary, re-run with an env var).

use std::process::Command;

use threadlet_runtime::Runtime;

const CHILD_ENV: &str = "THREADLET_SIGNAL_CHAIN_CHILD";

fn run_child(test: &str, case: &str) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, case)
        .output()
        .unwrap()
}

fn child_case() -> Option<String> {
    std::env::var(CHILD_ENV).ok()
}

/// Installs `action` for SIGSEGV.
fn install(action: &libc::sigaction) {
    // SAFETY: a plain `sigaction` call with an initialised structure.
    assert_eq!(
        unsafe { libc::sigaction(libc::SIGSEGV, action, std::ptr::null_mut()) },
        0
    );
}

#[test]
fn a_previously_ignored_sent_sigsegv_stays_ignored() {
    if child_case().is_some() {
        // SAFETY: zeroed is a valid `sigaction`; SIG_IGN with an empty mask.
        let mut ign: libc::sigaction = unsafe { std::mem::zeroed() };
        ign.sa_sigaction = libc::SIG_IGN;
        install(&ign);
        let rt = Runtime::builder().workers(1).build().unwrap(); // installs the reporter
        // SAFETY: raising a signal whose disposition (through the reporter) is to ignore it;
        // twice, since the reporter once reset it to the default after the first.
        unsafe {
            libc::raise(libc::SIGSEGV);
            libc::raise(libc::SIGSEGV);
        }
        assert_eq!(rt.block_on(|| 2 + 2), 4);
        println!("CHILD SURVIVED");
        return;
    }
    let out = run_child("a_previously_ignored_sent_sigsegv_stays_ignored", "ign");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("CHILD SURVIVED"),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

extern "C" fn report_mask(_sig: libc::c_int, _info: *mut libc::siginfo_t, _uc: *mut libc::c_void) {
    // SAFETY: async-signal-safe calls only: read the mask, write(2), _exit.
    unsafe {
        let mut now = std::mem::MaybeUninit::<libc::sigset_t>::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), now.as_mut_ptr());
        let blocked = libc::sigismember(now.as_ptr(), libc::SIGUSR2) == 1;
        let msg: &[u8] = if blocked {
            b"handler ran with SIGUSR2 blocked\n"
        } else {
            b"handler ran with SIGUSR2 NOT blocked\n"
        };
        libc::write(1, msg.as_ptr().cast(), msg.len());
        libc::_exit(42);
    }
}

#[test]
fn a_previous_handler_runs_with_its_own_mask() {
    if child_case().is_some() {
        // SAFETY: zeroed is a valid `sigaction`; then a handler with SIGUSR2 in its mask.
        let mut a: libc::sigaction = unsafe { std::mem::zeroed() };
        a.sa_sigaction = report_mask as *const () as usize;
        a.sa_flags = libc::SA_SIGINFO;
        // SAFETY: sigset operations on an initialised set.
        unsafe {
            libc::sigemptyset(&mut a.sa_mask);
            libc::sigaddset(&mut a.sa_mask, libc::SIGUSR2);
        }
        install(&a);
        let _rt = Runtime::builder().workers(1).build().unwrap(); // installs the reporter
        // SAFETY: the previous handler exits the process.
        unsafe { libc::raise(libc::SIGSEGV) };
        unreachable!("the previous handler exits");
    }
    let out = run_child("a_previous_handler_runs_with_its_own_mask", "mask");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(42), "{stdout}");
    assert!(
        stdout.contains("handler ran with SIGUSR2 blocked"),
        "{stdout}"
    );
}

#[test]
fn a_sent_sigsegv_with_the_default_action_kills() {
    if child_case().is_some() {
        // SAFETY: zeroed is a valid `sigaction`; SIG_DFL with an empty mask.
        let dfl: libc::sigaction = unsafe { std::mem::zeroed() };
        install(&dfl);
        let _rt = Runtime::builder().workers(1).build().unwrap(); // installs the reporter
        // SAFETY: raising SIGSEGV, whose default action ends the process.
        unsafe { libc::raise(libc::SIGSEGV) };
        println!("CHILD SURVIVED");
        return;
    }
    let out = run_child("a_sent_sigsegv_with_the_default_action_kills", "dfl");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSEGV),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

extern "C" fn report_segv_blocked(
    _sig: libc::c_int,
    _info: *mut libc::siginfo_t,
    _uc: *mut libc::c_void,
) {
    // SAFETY: async-signal-safe calls only: read the mask, write(2), _exit.
    unsafe {
        let mut now = std::mem::MaybeUninit::<libc::sigset_t>::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), now.as_mut_ptr());
        let msg: &[u8] = if libc::sigismember(now.as_ptr(), libc::SIGSEGV) == 1 {
            b"SIGSEGV blocked in the handler\n"
        } else {
            b"SIGSEGV not blocked in the handler\n"
        };
        libc::write(1, msg.as_ptr().cast(), msg.len());
        libc::_exit(42);
    }
}

#[test]
fn a_previous_sa_nodefer_handler_runs_with_the_signal_unblocked() {
    if child_case().is_some() {
        // SAFETY: zeroed is a valid `sigaction`; a handler that asked for SA_NODEFER.
        let mut a: libc::sigaction = unsafe { std::mem::zeroed() };
        a.sa_sigaction = report_segv_blocked as *const () as usize;
        a.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
        // SAFETY: sigset operation on an initialised set.
        unsafe { libc::sigemptyset(&mut a.sa_mask) };
        install(&a);
        let _rt = Runtime::builder().workers(1).build().unwrap(); // installs the reporter
        // SAFETY: the previous handler exits the process.
        unsafe { libc::raise(libc::SIGSEGV) };
        unreachable!("the previous handler exits");
    }
    let out = run_child(
        "a_previous_sa_nodefer_handler_runs_with_the_signal_unblocked",
        "nodefer",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(42), "{stdout}");
    assert!(stdout.contains("SIGSEGV not blocked"), "{stdout}");
}
