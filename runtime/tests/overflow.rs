//! A stack overflow in an actor is reported with the actor's name and stack size, not as a bare
//! segmentation fault. The overflow kills the process, so each test re-runs its own binary in a
//! child process and reads the child's stderr.

use std::process::Command;

use threadlet_runtime::{Activation, Completion, Runtime, SpawnOptions, Step};

const CHILD_ENV: &str = "THREADLET_OVERFLOW_CHILD";

#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let buf = [depth as u8; 1024];
    let r = if depth == 0 { 0 } else { recurse(depth - 1) };
    std::hint::black_box(&buf);
    r + buf[7] as u64
}

/// Runs `test` of this binary in a child process (where `CHILD_ENV` makes it overflow), checks
/// that the child died of `SIGSEGV`, and returns its stderr.
fn overflow_in_child(test: &str) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the child must die");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc_sigsegv()),
        "status {:?}",
        out.status
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
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
    let stderr = overflow_in_child("overflow_names_the_actor");
    assert!(
        stderr.contains("'deep-diver' overflowed its stack of 32 KiB"),
        "stderr was: {stderr}"
    );
}

/// A process actor that suspended before it dives, while another actor with a stack of another
/// size ran and ended on the same worker: the report names the diver and its own stack.
#[test]
fn overflow_after_a_process_actor_suspended_names_its_own_stack() {
    if std::env::var_os(CHILD_ENV).is_some() {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let opts = SpawnOptions::new().name("late-diver").stack_size(32 * 1024);
        let h = rt
            .spawn_with(opts, || {
                threadlet_runtime::sleep(std::time::Duration::from_millis(20));
                recurse(1 << 20)
            })
            .unwrap();
        let other = SpawnOptions::new().name("other").stack_size(128 * 1024);
        rt.spawn_with(other, || recurse(4)).unwrap().join().unwrap();
        let _ = h.join();
        unreachable!("the overflow kills the process");
    }
    let stderr = overflow_in_child("overflow_after_a_process_actor_suspended_names_its_own_stack");
    assert!(
        stderr.contains("'late-diver' overflowed its stack of 32 KiB"),
        "stderr was: {stderr}"
    );
}

/// Overflows its stack when dropped: a destructor that a forced unwind runs.
struct DeepDrop;

impl Drop for DeepDrop {
    fn drop(&mut self) {
        std::hint::black_box(recurse(1 << 20));
    }
}

/// In the child: an actor parks holding a `DeepDrop`, and `end` unwinds it (a kill, or the
/// runtime's shutdown), running the destructor on the actor's stack.
fn overflow_while_unwound(end: impl FnOnce(Runtime, threadlet_runtime::JoinHandle<()>)) {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (parked, is_parked) = std::sync::mpsc::channel();
    let opts = SpawnOptions::new()
        .name("deep-dropper")
        .stack_size(32 * 1024);
    let h = rt
        .spawn_with(opts, move || {
            let _deep = DeepDrop;
            parked.send(()).unwrap();
            while threadlet_runtime::park().is_ok() {}
        })
        .unwrap();
    is_parked.recv().unwrap();
    // Let it reach its park.
    std::thread::sleep(std::time::Duration::from_millis(50));
    end(rt, h);
    unreachable!("the overflow kills the process");
}

/// A destructor that overflows while shutdown unwinds the actor is reported as the actor's
/// overflow too (its stack's size is not known then: no frame is current during the unwind).
#[test]
fn overflow_in_a_destructor_during_shutdown_names_the_actor() {
    if std::env::var_os(CHILD_ENV).is_some() {
        overflow_while_unwound(|rt, _h| drop(rt));
    }
    let stderr = overflow_in_child("overflow_in_a_destructor_during_shutdown_names_the_actor");
    assert!(
        stderr.contains("'deep-dropper' overflowed its stack;"),
        "stderr was: {stderr}"
    );
}

/// The same during a kill.
#[test]
fn overflow_in_a_destructor_during_a_kill_names_the_actor() {
    if std::env::var_os(CHILD_ENV).is_some() {
        overflow_while_unwound(|rt, h| {
            h.abort();
            let _ = h.join();
            drop(rt);
        });
    }
    let stderr = overflow_in_child("overflow_in_a_destructor_during_a_kill_names_the_actor");
    assert!(
        stderr.contains("'deep-dropper' overflowed its stack;"),
        "stderr was: {stderr}"
    );
}

/// A migratable actor that has moved to another worker's thread (when the scheduler moves it
/// within a few seconds; the report is checked either way) and then overflows is reported
/// with its own stack: the thread it resumed on points at its frame.
#[test]
fn overflow_after_a_migratable_actor_moved_names_its_own_stack() {
    if std::env::var_os(CHILD_ENV).is_some() {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let opts = SpawnOptions::new().name("mover").stack_size(32 * 1024);
        // SAFETY: the actor keeps nothing tied to its thread across a suspension (a thread id,
        // a number, is only compared).
        let opts = unsafe { opts.migratable() };
        let h = rt
            .spawn_with(opts, || {
                let first = std::thread::current().id();
                let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
                while std::thread::current().id() == first && std::time::Instant::now() < until {
                    threadlet_runtime::sleep(std::time::Duration::from_millis(1));
                }
                eprintln!("moved: {}", std::thread::current().id() != first);
                recurse(1 << 20)
            })
            .unwrap();
        let _ = h.join();
        unreachable!("the overflow kills the process");
    }
    let stderr = overflow_in_child("overflow_after_a_migratable_actor_moved_names_its_own_stack");
    assert!(
        stderr.contains("'mover' overflowed its stack of 32 KiB"),
        "stderr was: {stderr}"
    );
}

/// A handler actor killed while its activation is suspended inside `run`: a destructor that
/// overflows during the carrier's unwind is reported as the actor's.
#[test]
fn overflow_in_a_destructor_while_a_suspended_activation_is_killed() {
    struct Holder {
        parked: Option<std::sync::mpsc::Sender<()>>,
        _done: Completion<()>,
    }
    impl Activation for Holder {
        fn run(&mut self) -> Step {
            let _deep = DeepDrop;
            if let Some(p) = self.parked.take() {
                p.send(()).unwrap();
            }
            while threadlet_runtime::park().is_ok() {}
            Step::Stop
        }
    }
    if std::env::var_os(CHILD_ENV).is_some() {
        let rt = Runtime::builder()
            .workers(1)
            .stack_size(48 * 1024)
            .build()
            .unwrap();
        let (parked, is_parked) = std::sync::mpsc::channel();
        let h = rt
            .start_handler(SpawnOptions::new().name("held-down"), move |_, done| {
                Holder {
                    parked: Some(parked),
                    _done: done,
                }
            })
            .unwrap();
        is_parked.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        h.abort();
        let _ = h.join();
        unreachable!("the overflow kills the process");
    }
    let stderr =
        overflow_in_child("overflow_in_a_destructor_while_a_suspended_activation_is_killed");
    assert!(
        stderr.contains("'held-down' overflowed its stack;"),
        "stderr was: {stderr}"
    );
}

/// A handler actor's program that overflows the stack its activation was lent; with
/// `sleep_first`, after suspending inside the activation (its carrier then becomes its own).
struct Diver {
    sleep_first: bool,
    _done: Completion<()>,
}

impl Activation for Diver {
    fn run(&mut self) -> Step {
        if self.sleep_first {
            threadlet_runtime::sleep(std::time::Duration::from_millis(20));
        }
        std::hint::black_box(recurse(1 << 20));
        Step::Stop
    }
}

/// Ends at once: runs on the worker's next carrier while a sleeping `Diver` holds its own.
struct Quick(Option<Completion<()>>);

impl Activation for Quick {
    fn run(&mut self) -> Step {
        if let Some(done) = self.0.take() {
            done.complete(Ok(()));
        }
        Step::Stop
    }
}

/// In the child: a handler actor named `name` dives on a one-worker runtime with 48 KiB
/// stacks; `meanwhile` runs before it is joined.
fn dive_in_a_handler_actor(name: &str, sleep_first: bool, meanwhile: impl FnOnce(&Runtime)) {
    let rt = Runtime::builder()
        .workers(1)
        .stack_size(48 * 1024)
        .build()
        .unwrap();
    let opts = SpawnOptions::new().name(name);
    let h = rt
        .start_handler(opts, |_, done| Diver {
            sleep_first,
            _done: done,
        })
        .unwrap();
    meanwhile(&rt);
    let _ = h.join();
    unreachable!("the overflow kills the process");
}

#[test]
fn overflow_in_a_handler_actor_names_it_and_the_runtime_stack_size() {
    if std::env::var_os(CHILD_ENV).is_some() {
        dive_in_a_handler_actor("deep-handler", false, |_| ());
    }
    let stderr =
        overflow_in_child("overflow_in_a_handler_actor_names_it_and_the_runtime_stack_size");
    assert!(
        stderr.contains("'deep-handler' overflowed its stack of 48 KiB"),
        "stderr was: {stderr}"
    );
}

#[test]
fn overflow_after_a_handler_actor_suspended_in_its_activation() {
    if std::env::var_os(CHILD_ENV).is_some() {
        dive_in_a_handler_actor("resumer", true, |rt| {
            let quick = rt.start_handler(SpawnOptions::new(), |_, done| Quick(Some(done)));
            quick.unwrap().join().unwrap();
        });
    }
    let stderr = overflow_in_child("overflow_after_a_handler_actor_suspended_in_its_activation");
    assert!(
        stderr.contains("'resumer' overflowed its stack of 48 KiB"),
        "stderr was: {stderr}"
    );
}

fn libc_sigsegv() -> i32 {
    11
}
