//! A stack overflow in an actor is reported with the actor's name and stack size, not as a bare
//! segmentation fault. The overflow kills the process, so the test re-runs its own binary in a
//! child process and reads the child's stderr.

use std::process::Command;

use threadlet_runtime::{Runtime, SpawnOptions};

const CHILD_ENV: &str = "THREADLET_OVERFLOW_CHILD";

#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let buf = [depth as u8; 1024];
    let r = if depth == 0 { 0 } else { recurse(depth - 1) };
    std::hint::black_box(&buf);
    r + buf[7] as u64
}

#[test]
fn overflow_names_the_actor() {
    if std::env::var_os(CHILD_ENV).is_some() {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let opts = SpawnOptions::new().name("deep-diver").stack_size(32 * 1024);
        let h = rt.spawn_with(opts, || recurse(1 << 20)).unwrap();
        let _ = h.join();
        unreachable!("the overflow kills the process");
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "overflow_names_the_actor",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the child must die");
    assert!(
        stderr.contains("'deep-diver' overflowed its stack of 32 KiB"),
        "stderr was: {stderr}"
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc_sigsegv()),
        "status {:?}",
        out.status
    );
}

fn libc_sigsegv() -> i32 {
    11
}
