//! When the kernel refuses what the runtime asks for: a stack, a thread. The refusal is an
//! error where it happens, and the runtime works as before once the shortage is over. Each test
//! runs in a child process, whose address space (`RLIMIT_AS`) or thread count it caps.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use common::{in_child, passes_in_child, until, within_watchdog};
use threadlet::{Actor, Context, JoinErrorKind, JoinHandle, Runtime, RuntimeExt, channel};

/// Set in the child half of each test: the test's name.
const CHILD: &str = "THREADLET_NO_STACK_CHILD";

fn is_child(test: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(test)
}

fn set_address_space_limit(bytes: libc::rlim_t) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: `setrlimit` reads one valid `rlimit`; lowering and raising the soft limit back
    // under an infinite hard limit is allowed to any process.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
}

/// Caps this process's address space a little above what it maps now: no new chunk of stacks
/// can be mapped.
fn cap_address_space() {
    set_address_space_limit((common::proc_status_kib("VmSize") + 1024) * 1024);
}

fn uncap_address_space() {
    set_address_space_limit(libc::RLIM_INFINITY);
}

/// Spawns process actors that wait on `release` until one cannot get a stack (the address
/// space capped): the runtime's stacks are all in use. Returns those that run.
fn use_up_stacks(rt: &Runtime, release: &channel::Receiver<()>) -> Vec<JoinHandle<()>> {
    let mut waiting = Vec::new();
    loop {
        let release = release.clone();
        let h = rt.spawn(move || {
            let _ = release.recv();
        });
        std::thread::sleep(Duration::from_millis(2));
        if h.is_finished() {
            let e = h.join().unwrap_err();
            assert!(matches!(e.kind(), JoinErrorKind::Spawn(_)), "{e}");
            return waiting;
        }
        waiting.push(h);
    }
}

/// Counts its messages; one that carries a receiver waits on it inside `handle`, keeping the
/// stack it was lent.
struct Counter(Arc<AtomicUsize>);

impl Actor for Counter {
    type Msg = Option<channel::Receiver<()>>;
    fn handle(&mut self, wait: Self::Msg, _ctx: &mut Context<Self>) {
        self.0.fetch_add(1, SeqCst);
        if let Some(wait) = wait {
            let _ = wait.recv();
        }
    }
}

/// A started handler actor whose next message finds no stack to run on (its worker's one
/// carrier held by another actor's suspended `handle`, none to be mapped) ends, as a process
/// actor that cannot start does: its join reports the error (`Spawn`), not a shutdown that
/// never happened (it said "cancelled by runtime shutdown"), and the runtime serves new actors
/// once the shortage is over.
#[test]
fn a_handler_actor_that_finds_no_stack_ends_with_the_error() {
    const TEST: &str = "a_handler_actor_that_finds_no_stack_ends_with_the_error";
    if !is_child(TEST) {
        return within_watchdog(TEST, || passes_in_child(TEST, &[(CHILD, TEST)]));
    }
    let rt = Runtime::builder().workers(1).build().unwrap();
    let handled = Arc::new(AtomicUsize::new(0));
    let (a, a_end) = rt.start(Counter(handled.clone()));
    a.send(None).unwrap();
    until("a handled its first message", || handled.load(SeqCst) == 1);
    let holding = Arc::new(AtomicUsize::new(0));
    let (b, _b_end) = rt.start(Counter(holding.clone()));
    let (release, released) = channel::unbounded::<()>();
    b.send(Some(released.clone())).unwrap();
    until("b suspended inside handle", || holding.load(SeqCst) == 1);
    cap_address_space();
    let waiting = use_up_stacks(&rt, &released);
    a.send(None).unwrap(); // accepted: a needs a carrier, which cannot be had
    let ended = a_end.join();
    uncap_address_space();
    let Err(e) = ended else {
        panic!("a had no stack to handle its message on, yet ended well")
    };
    assert!(matches!(e.kind(), JoinErrorKind::Spawn(_)), "{e}");
    assert!(
        e.to_string().contains("no stack for its next message"),
        "{e}"
    );
    assert_eq!(handled.load(SeqCst), 1);
    assert!(a.send(None).is_err(), "its mailbox closed with it");
    drop(release);
    for h in waiting {
        h.join().unwrap();
    }
    let (c, c_end) = rt.start(Counter(Arc::new(AtomicUsize::new(0))));
    c.send(None).unwrap();
    drop(c);
    c_end.join().unwrap();
}

/// Under `mprotect` guards the slots of a chunk count against a cap before the chunk is
/// mapped: a mapping the kernel refuses gives its count back. (Each refusal kept 64 slots of
/// the cap for good: after a shortage of a few hundred refused starts, every new chunk was
/// refused as past the cap, naming `vm.max_map_count`.)
#[test]
fn refused_chunks_give_back_their_place_under_the_mapping_cap() {
    const TEST: &str = "refused_chunks_give_back_their_place_under_the_mapping_cap";
    if !is_child(TEST) {
        let env = [(CHILD, TEST), ("THREADLET_FORCE_MPROTECT_GUARDS", "1")];
        return within_watchdog(TEST, move || passes_in_child(TEST, &env));
    }
    let rt = Runtime::builder().workers(1).build().unwrap();
    assert!(
        !rt.stats().madvise_guards,
        "the environment forces mprotect guards"
    );
    let start_waiting = |n: usize| {
        let (release, released) = channel::unbounded::<()>();
        let running = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (released, running) = (released.clone(), running.clone());
                rt.spawn(move || {
                    running.fetch_add(1, SeqCst);
                    let _ = released.recv();
                })
            })
            .collect();
        (release, running, handles)
    };
    let (release, running, handles) = start_waiting(64); // one chunk, every slot in use
    until("64 running", || running.load(SeqCst) == 64);
    cap_address_space();
    for _ in 0..500 {
        let e = rt.spawn(|| ()).join().unwrap_err(); // each one a refused chunk
        assert!(matches!(e.kind(), JoinErrorKind::Spawn(_)), "{e}");
    }
    uncap_address_space();
    drop(release);
    for h in handles {
        h.join().unwrap();
    }
    let (release, running, handles) = start_waiting(128); // a second chunk's worth
    until("128 running, or some refused", || {
        running.load(SeqCst) + handles.iter().filter(|h| h.is_finished()).count() == 128
    });
    drop(release);
    let refused: Vec<String> = handles
        .into_iter()
        .filter_map(|h| h.join().err().map(|e| e.to_string()))
        .collect();
    assert!(
        refused.is_empty(),
        "{} refused: {}",
        refused.len(),
        refused[0]
    );
}

/// A runtime whose build fails after taking its dump signal (no thread for the dump) gives the
/// signal back: `SIGUSR1` still ends the process. (Its default action was gone for good.)
#[test]
fn a_build_that_fails_gives_its_dump_signal_back() {
    const TEST: &str = "a_build_that_fails_gives_its_dump_signal_back";
    if !is_child(TEST) {
        use std::os::unix::process::ExitStatusExt;
        let out = within_watchdog(TEST, || in_child(TEST, &[(CHILD, TEST)]));
        let stdout = String::from_utf8_lossy(&out.stdout);
        if stdout.contains("skipped:") {
            return;
        }
        assert!(!stdout.contains("survived"), "{stdout}");
        assert_eq!(out.status.signal(), Some(libc::SIGUSR1), "{:?}", out.status);
        return;
    }
    if !refuse_new_threads() {
        println!("skipped: no thread can be refused here");
        return;
    }
    let built = Runtime::builder()
        .workers(1)
        .dump_on_signal(libc::SIGUSR1)
        .build();
    assert!(built.is_err(), "no thread could be had");
    // SAFETY: `raise` sends a signal to this thread; with no runtime dumping on it, its
    // default action ends the process.
    unsafe { libc::raise(libc::SIGUSR1) };
    std::thread::sleep(Duration::from_millis(300));
    println!("survived the signal");
}

/// Sets the soft limit on this user's threads, under the hard limit as it is.
fn set_thread_limit(limit: libc::rlim_t) {
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes one `rlimit` through a valid pointer; `setrlimit` reads one.
    // A soft limit under the hard one may be lowered and raised again by any process.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NPROC, &mut now), 0);
        now.rlim_cur = limit.min(now.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NPROC, &now), 0);
    }
}

/// Refuses this process any new thread from now on: the thread limit at 0, as user `nobody`
/// where this runs as root (root is exempt from the limit; `nobody`'s threads are then this
/// process's). `false` where privileges cannot be dropped (no such capability here): the
/// caller cannot make the kernel refuse a thread then.
fn refuse_new_threads() -> bool {
    set_thread_limit(0);
    // SAFETY: plain integer ids; dropping privileges in this child process affects nothing
    // else.
    unsafe {
        libc::geteuid() != 0
            || (libc::setresgid(65534, 65534, 65534) == 0
                && libc::setresuid(65534, 65534, 65534) == 0)
    }
}

/// A spare worker whose thread the kernel refuses when a worker is first stuck is tried again
/// the next time one is: it runs the actors that may move once threads can be had. (It was
/// lost for good, its parts gone with the refused thread's closure.)
#[test]
fn a_spare_whose_thread_was_refused_starts_later() {
    const TEST: &str = "a_spare_whose_thread_was_refused_starts_later";
    if !is_child(TEST) {
        return within_watchdog(TEST, || passes_in_child(TEST, &[(CHILD, TEST)]));
    }
    let rt = Runtime::builder()
        .workers(1)
        .spare_workers(1)
        .build()
        .unwrap();
    if !refuse_new_threads() {
        println!("skipped: no thread can be refused here");
        return;
    }
    // The only worker stuck in a plain blocking call: the monitor brings the spare in, whose
    // thread is refused.
    let stuck = rt.spawn(|| std::thread::sleep(Duration::from_millis(300)));
    stuck.join().unwrap();
    set_thread_limit(libc::RLIM_INFINITY);
    // Stuck again, with threads to be had: an actor spawned meanwhile runs on the spare.
    let stuck = rt.spawn(|| std::thread::sleep(Duration::from_millis(500)));
    std::thread::sleep(Duration::from_millis(100));
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(move || tx.send(threadlet::worker_index()).unwrap());
    assert_eq!(
        rx.recv().unwrap(),
        Some(1),
        "run by the spare (index 1), not after the stuck worker"
    );
    stuck.join().unwrap();
}
