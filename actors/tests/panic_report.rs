//! The panic line of an actor names the actor and its worker. Checked in a child process
//! (this test binary again, running only `child_panics`), whose stderr the parent reads.

use std::process::Command;

const CHILD: &str = "THREADLET_PANIC_REPORT_CHILD";

/// In the child only: a named actor and an unnamed one panic, and a plain thread panics.
#[test]
fn child_panics() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let rt = threadlet::Runtime::builder().workers(1).build().unwrap();
    let named = threadlet::ActorBuilder::new()
        .name("mapper")
        .spawn_on(&rt, || -> u8 { panic!("bad record 17") })
        .unwrap();
    assert!(named.join().is_err());
    assert!(rt.spawn(|| -> u8 { panic!("anonymous") }).join().is_err());
    let _ = std::thread::spawn(|| panic!("plain thread")).join();
}

#[test]
fn panic_lines_name_the_actor_and_its_worker() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_panics", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stderr}");
    let named = stderr
        .lines()
        .find(|l| l.contains("\"mapper\""))
        .unwrap_or_else(|| panic!("no line names the actor:\n{stderr}"));
    assert!(named.starts_with("actor #"), "{named}");
    assert!(
        named.contains("\"mapper\" on worker 0 panicked at"),
        "{named}"
    );
    assert!(named.contains("panic_report.rs"), "{named}");
    assert!(stderr.contains("bad record 17"));
    assert!(
        stderr.lines().any(|l| l.starts_with("actor #")
            && l.contains("on worker 0 panicked at")
            && !l.contains('"')),
        "{stderr}"
    );
    // Other panics keep the standard report.
    assert!(stderr.contains("panicked at") && stderr.contains("plain thread"));
    assert!(stderr.contains("thread '"), "{stderr}");
}
