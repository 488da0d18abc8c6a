//! Actor lifecycle: panics, ended actors, closed mailboxes, builder errors, names and ids,
//! shutdown (destructors of suspended and unstarted actors, cancelled joins) and big stacks.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use threadlet::channel::{self, RecvError};
use threadlet::{
    Actor, ActorBuilder, BuildError, Context, JoinErrorKind, JoinHandle, MIN_STACK_SIZE, Mailbox,
    Runtime, RuntimeExt,
};

fn runtime(workers: usize) -> Runtime {
    Runtime::builder().workers(workers).build().unwrap()
}

/// Counts its drops.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Waits (on a plain thread) until `counter` reaches `n`, failing after a generous deadline
/// instead of hanging.
fn wait_for(counter: &AtomicUsize, n: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while counter.load(SeqCst) < n {
        assert!(
            Instant::now() < deadline,
            "{what}: only {} of {n} after 60 s",
            counter.load(SeqCst)
        );
        thread::sleep(Duration::from_millis(1));
    }
}

// ---------------------------------------------------------------------------------------------
// Panics
// ---------------------------------------------------------------------------------------------

#[test]
fn a_panic_is_isolated_and_reported_by_join() {
    let rt = runtime(2);
    rt.block_on(|| {
        // A ping-pong pair that keeps going across the panics below.
        let (pong, pong_h) = threadlet::spawn_actor(|mb: Mailbox<(u32, threadlet::Addr<u32>)>| {
            let mut n = 0;
            for (v, reply) in &mb {
                n += 1;
                reply.send(v + 1).unwrap();
            }
            n
        });
        let pinger = threadlet::spawn_actor(move |mb: Mailbox<u32>| {
            let me = mb.addr();
            let mut v = 0;
            for _ in 0..2_000 {
                pong.send((v, me.clone())).unwrap();
                v = mb.recv().unwrap();
                if v % 100 == 0 {
                    threadlet::yield_now();
                }
            }
            v
        })
        .1;

        // A formatted message: a `String` payload.
        let h = threadlet::spawn(|| -> u32 { panic!("boom {}", std::hint::black_box(7)) });
        let err = h.join().unwrap_err();
        assert!(err.is_panic());
        assert!(!err.is_cancelled());
        assert_eq!(err.panic_message(), Some("boom 7"));
        assert!(err.to_string().contains("boom 7"), "{err}");
        let payload = err.into_panic();
        assert_eq!(payload.downcast_ref::<String>().unwrap(), "boom 7");

        // A literal message: a `&'static str` payload.
        let err = threadlet::spawn(|| panic!("static boom"))
            .join()
            .unwrap_err();
        assert_eq!(err.panic_message(), Some("static boom"));

        // A non-string payload.
        let err = threadlet::spawn(|| std::panic::panic_any(42u64))
            .join()
            .unwrap_err();
        assert!(err.is_panic());
        assert_eq!(err.panic_message(), None);
        assert_eq!(*err.into_panic().downcast::<u64>().unwrap(), 42);

        // A panic after the actor suspended, with values on its stack.
        let drops = Arc::new(AtomicUsize::new(0));
        let d = drops.clone();
        let err = threadlet::spawn(move || {
            let _guard = DropCount(d);
            threadlet::yield_now();
            panic!("after a yield");
        })
        .join()
        .unwrap_err();
        assert_eq!(err.panic_message(), Some("after a yield"));
        assert_eq!(
            drops.load(SeqCst),
            1,
            "the panicking actor's stack was unwound"
        );

        assert_eq!(pinger.join().unwrap(), 2_000);
        assert_eq!(pong_h.join().unwrap(), 2_000);
    });
    // The runtime is still fine after all that.
    assert_eq!(rt.block_on(|| 6 * 7), 42);
}

#[test]
fn block_on_resumes_a_panic_on_the_caller() {
    let rt = runtime(1);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(|| panic!("inside block_on"));
    }));
    let payload = r.unwrap_err();
    assert_eq!(*payload.downcast_ref::<&str>().unwrap(), "inside block_on");
    assert_eq!(rt.block_on(|| 1), 1);
}

/// A thousand actors panic at the same moment; both workers survive.
#[test]
fn many_simultaneous_panics_do_not_take_down_workers() {
    const N: usize = 1_000;
    let rt = runtime(2);
    let (gate_tx, gate_rx) = channel::bounded::<()>(0);
    let waiting = Arc::new(AtomicUsize::new(0));
    let handles: Vec<JoinHandle<()>> = (0..N)
        .map(|i| {
            let (gate, w) = (gate_rx.clone(), waiting.clone());
            rt.spawn(move || {
                w.fetch_add(1, SeqCst);
                // Everyone waits here until the gate closes, then they all panic.
                assert_eq!(gate.recv(), Err(RecvError));
                panic!("actor {i} fails");
            })
        })
        .collect();
    drop(gate_rx);
    wait_for(&waiting, N, "actors at the gate");
    drop(gate_tx);
    for (i, h) in handles.into_iter().enumerate() {
        let err = h.join().unwrap_err();
        assert!(err.is_panic());
        assert_eq!(
            err.panic_message(),
            Some(format!("actor {i} fails").as_str())
        );
    }

    // Two actors that each hold their worker's OS thread until the other has arrived: this only
    // completes if both worker threads are still alive.
    let arrived = Arc::new(AtomicUsize::new(0));
    let both: Vec<_> = (0..2)
        .map(|_| {
            let arrived = arrived.clone();
            rt.spawn(move || {
                arrived.fetch_add(1, SeqCst);
                let deadline = Instant::now() + Duration::from_secs(30);
                while arrived.load(SeqCst) < 2 {
                    if Instant::now() > deadline {
                        return false;
                    }
                    thread::yield_now();
                }
                true
            })
        })
        .collect();
    for h in both {
        assert!(h.join().unwrap(), "a worker thread is gone");
    }
    // And ordinary work still runs.
    let sum = rt.block_on(|| {
        let hs: Vec<_> = (0..1_000u64).map(|i| threadlet::spawn(move || i)).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(sum, 999 * 1_000 / 2);
}

// ---------------------------------------------------------------------------------------------
// Ended actors and closed mailboxes
// ---------------------------------------------------------------------------------------------

#[test]
fn send_to_an_ended_actor_returns_the_message() {
    let rt = runtime(2);
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<String>| mb.recv());
    assert_eq!(addr.actor_id(), Some(h.id()));
    // The actor waits for its message: it cannot have ended.
    assert!(!addr.is_closed());
    addr.send("first".to_string()).unwrap();
    assert_eq!(h.join().unwrap().as_deref(), Some("first"));
    assert!(addr.is_closed());
    let err = addr.send("late".to_string()).unwrap_err();
    assert_eq!(err.into_inner(), "late");
    // Every clone sees the same.
    let other = addr.clone();
    assert!(other.same_mailbox(&addr));
    assert!(other.is_closed());
    assert_eq!(other.send("later".into()).unwrap_err().0, "later");
}

#[test]
fn messages_left_in_an_ended_actors_mailbox_are_dropped() {
    let rt = runtime(1);
    let drops = Arc::new(AtomicUsize::new(0));
    let (all_sent, wait_for_all) = std::sync::mpsc::channel::<()>();
    let (addr, h) = rt.spawn_actor(move |mb: Mailbox<DropCount>| {
        // Take one message once all five are in, leave the rest.
        wait_for_all.recv().unwrap();
        drop(mb.recv());
    });
    for _ in 0..5 {
        addr.send(DropCount(drops.clone())).unwrap();
    }
    all_sent.send(()).unwrap();
    h.join().unwrap();
    assert_eq!(drops.load(SeqCst), 5);
    // A late message comes back intact and is dropped by us, once.
    let back = addr
        .send(DropCount(drops.clone()))
        .unwrap_err()
        .into_inner();
    assert_eq!(drops.load(SeqCst), 5);
    drop(back);
    assert_eq!(drops.load(SeqCst), 6);
}

#[test]
fn a_panicking_actor_closes_its_mailbox() {
    let rt = runtime(2);
    let (addr, h) = rt.spawn_actor(|mb: Mailbox<u32>| {
        let v = mb.recv().unwrap();
        panic!("got {v}");
    });
    addr.send(3).unwrap();
    assert_eq!(h.join().unwrap_err().panic_message(), Some("got 3"));
    assert!(addr.is_closed());
    assert_eq!(addr.send(4).unwrap_err().into_inner(), 4);
}

#[test]
fn mailbox_recv_returns_none_after_every_addr_is_dropped() {
    let rt = runtime(2);
    rt.block_on(|| {
        let (addr, h) = threadlet::spawn_actor(|mb: Mailbox<u32>| {
            // An address of our own, dropped again, does not keep the mailbox open.
            let me = mb.addr();
            me.send(1000).unwrap();
            drop(me);
            let got: Vec<u32> = mb.iter().collect();
            (got, mb.try_recv(), mb.recv().is_none())
        });
        // Senders on actors and a plain thread, each with its own address.
        let actors: Vec<_> = (0..3u32)
            .map(|k| {
                let addr = addr.clone();
                threadlet::spawn(move || {
                    for i in 0..10 {
                        addr.send(k * 10 + i).unwrap();
                    }
                })
            })
            .collect();
        let a = addr.clone();
        let plain = thread::spawn(move || {
            for i in 30..40 {
                a.send(i).unwrap();
            }
        });
        drop(addr);
        for s in actors {
            s.join().unwrap();
        }
        plain.join().unwrap();
        let (mut got, try_after, none_again) = h.join().unwrap();
        got.sort_unstable();
        let mut want: Vec<u32> = (0..40).collect();
        want.push(1000);
        assert_eq!(got, want);
        assert_eq!(try_after, Err(channel::TryRecvError::Disconnected));
        assert!(none_again);
    });
}

/// An actor parked in `recv` wakes with `None` when the last address goes, even if that
/// address was dropped by a plain thread.
#[test]
fn parked_mailbox_wakes_with_none_when_the_last_addr_drops() {
    let rt = runtime(1);
    let parked = Arc::new(AtomicBool::new(false));
    let p = parked.clone();
    let (addr, h) = rt.spawn_actor(move |mb: Mailbox<u8>| {
        p.store(true, SeqCst);
        mb.recv()
    });
    while !parked.load(SeqCst) {
        thread::yield_now();
    }
    thread::sleep(Duration::from_millis(10));
    assert!(!h.is_finished());
    let addr2 = addr.clone();
    drop(addr);
    thread::sleep(Duration::from_millis(5));
    assert!(!h.is_finished(), "one address is left");
    thread::spawn(move || drop(addr2)).join().unwrap();
    assert_eq!(h.join().unwrap(), None);
}

// ---------------------------------------------------------------------------------------------
// Build errors and actor options
// ---------------------------------------------------------------------------------------------

#[test]
fn build_rejects_zero_workers() {
    let err = Runtime::builder().workers(0).build().unwrap_err();
    assert!(matches!(err, BuildError::ZeroWorkers), "{err:?}");
    assert!(!err.to_string().is_empty());
}

#[test]
fn build_rejects_a_stack_below_the_minimum() {
    let small = MIN_STACK_SIZE - 4096;
    let err = Runtime::builder()
        .workers(1)
        .stack_size(small)
        .build()
        .unwrap_err();
    match err {
        BuildError::StackTooSmall { requested, minimum } => {
            assert_eq!(requested, small);
            assert_eq!(minimum, MIN_STACK_SIZE);
        }
        ref other => panic!("expected StackTooSmall, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains(&small.to_string()), "{msg}");
    assert!(msg.contains(&MIN_STACK_SIZE.to_string()), "{msg}");

    // Zero and one page are too small as well.
    for size in [0, 4096] {
        let err = Runtime::builder().stack_size(size).build().unwrap_err();
        assert!(matches!(err, BuildError::StackTooSmall { .. }), "{err:?}");
    }
}

#[test]
fn build_rejects_a_stack_that_is_not_page_aligned() {
    let odd = MIN_STACK_SIZE + 100;
    let err = Runtime::builder()
        .workers(1)
        .stack_size(odd)
        .build()
        .unwrap_err();
    match err {
        BuildError::StackNotPageAligned {
            requested,
            page_size,
        } => {
            assert_eq!(requested, odd);
            assert_eq!(page_size, 4096);
        }
        ref other => panic!("expected StackNotPageAligned, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains(&odd.to_string()), "{msg}");
    assert!(msg.contains("4096"), "{msg}");
}

#[test]
fn build_accepts_valid_stack_sizes() {
    for size in [MIN_STACK_SIZE, MIN_STACK_SIZE + 4096, 1 << 20] {
        let rt = Runtime::builder()
            .workers(1)
            .stack_size(size)
            .build()
            .unwrap();
        assert_eq!(rt.stack_size(), size);
        assert_eq!(rt.workers(), 1);
        assert_eq!(rt.block_on(|| 5), 5);
    }
}

#[test]
fn actor_builder_rejects_invalid_stack_sizes() {
    let rt = runtime(1);
    rt.block_on(|| {
        for bad in [0, 1000, MIN_STACK_SIZE - 4096, MIN_STACK_SIZE + 1] {
            let err = ActorBuilder::new()
                .stack_size(bad)
                .spawn(|| ())
                .unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
            assert!(err.to_string().contains(&bad.to_string()), "{err}");
            assert!(
                ActorBuilder::new()
                    .stack_size(bad)
                    .spawn_actor(|_: Mailbox<()>| ())
                    .is_err()
            );
        }
        let h = ActorBuilder::new()
            .stack_size(MIN_STACK_SIZE)
            .spawn(|| 1)
            .unwrap();
        assert_eq!(h.join().unwrap(), 1);
    });
    // From outside the runtime too.
    assert!(
        ActorBuilder::new()
            .stack_size(1000)
            .spawn_on(&rt, || ())
            .is_err()
    );
    let h = ActorBuilder::new()
        .name("outside")
        .spawn_on(&rt, threadlet::current_name)
        .unwrap();
    assert_eq!(h.join().unwrap().as_deref(), Some("outside"));
}

#[test]
fn actor_builder_spawn_outside_a_runtime_is_an_error() {
    assert!(ActorBuilder::new().spawn(|| ()).is_err());
    assert!(
        ActorBuilder::new()
            .spawn_actor(|_: Mailbox<()>| ())
            .is_err()
    );
}

#[test]
fn actor_names_are_visible_through_current_name() {
    let rt = runtime(2);
    rt.block_on(|| {
        let named = ActorBuilder::new()
            .name("worker-bee")
            .spawn(|| {
                // Still named after a suspension.
                threadlet::yield_now();
                threadlet::current_name()
            })
            .unwrap();
        assert_eq!(named.join().unwrap().as_deref(), Some("worker-bee"));

        let (addr, h) = ActorBuilder::new()
            .name("inbox")
            .spawn_actor(|mb: Mailbox<()>| {
                mb.recv();
                threadlet::current_name()
            })
            .unwrap();
        addr.send(()).unwrap();
        assert_eq!(h.join().unwrap().as_deref(), Some("inbox"));

        let unnamed = threadlet::spawn(threadlet::current_name);
        assert_eq!(unnamed.join().unwrap(), None);
    });
    assert_eq!(threadlet::current_name(), None);
}

#[test]
fn current_is_some_inside_an_actor_and_none_outside() {
    let rt = runtime(2);
    assert_eq!(threadlet::current(), None);
    let h = rt.spawn(threadlet::current);
    let id = h.id();
    assert_eq!(h.join().unwrap(), Some(id));
    rt.block_on(|| {
        let me = threadlet::current().expect("inside an actor");
        let hs: Vec<_> = (0..10)
            .map(|_| threadlet::spawn(threadlet::current))
            .collect();
        let mut ids = vec![me];
        for h in hs {
            let id = h.id();
            assert_eq!(h.join().unwrap(), Some(id));
            ids.push(id);
        }
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 11, "ids are unique");
    });
    thread::spawn(|| assert_eq!(threadlet::current(), None))
        .join()
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Shutdown
// ---------------------------------------------------------------------------------------------

/// 100,000 actors, suspended in `Mailbox::recv` or in a channel `recv`, each with a value on its
/// stack: dropping the runtime runs every one of those destructors.
#[test]
fn shutdown_runs_the_destructors_of_100k_suspended_actors() {
    const N: usize = 100_000;
    let rt = runtime(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let parked = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = channel::bounded::<()>(0);
    let mut addrs = Vec::with_capacity(N / 2);
    let mut handles: Vec<JoinHandle<bool>> = Vec::with_capacity(N);
    for i in 0..N {
        let (d, p) = (drops.clone(), parked.clone());
        if i % 2 == 0 {
            let (addr, h) = rt.spawn_actor(move |mb: Mailbox<()>| {
                let _on_stack = DropCount(d);
                p.fetch_add(1, SeqCst);
                mb.recv().is_some()
            });
            addrs.push(addr);
            handles.push(h);
        } else {
            let rx = rx.clone();
            handles.push(rt.spawn(move || {
                let _on_stack = DropCount(d);
                p.fetch_add(1, SeqCst);
                rx.recv().is_ok()
            }));
        }
    }
    // Wait for all of them to suspend. An actor that could not start (no stack: with mprotect
    // guards, before Linux 6.13, `vm.max_map_count` caps the number of stacks) ends at once;
    // report its error rather than waiting for it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut next_scan = Instant::now();
    while parked.load(SeqCst) < N {
        if Instant::now() >= next_scan {
            if let Some(i) = handles.iter().position(|h| h.is_finished()) {
                let err = handles.swap_remove(i).join().unwrap_err();
                panic!("an actor ended before shutdown: {err}");
            }
            next_scan = Instant::now() + Duration::from_millis(200);
        }
        assert!(
            Instant::now() < deadline,
            "only {} of {N} actors suspended after 60 s",
            parked.load(SeqCst)
        );
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(drops.load(SeqCst), 0);
    drop(rt);
    assert_eq!(
        drops.load(SeqCst),
        N,
        "every suspended actor's stack was unwound"
    );
    // Every mailbox closed with its actor; every join reports the cancellation.
    assert!(addrs.iter().all(|a| a.is_closed()));
    for h in handles {
        let err = h.join().unwrap_err();
        assert!(err.is_cancelled(), "{err:?}");
    }
    // The channel's receivers all went with their actors: a send hands its value back.
    drop(rx);
    assert_eq!(tx.send(()).unwrap_err().into_inner(), ());
}

/// Actors spawned while shutdown unwinds (here, by a destructor on a suspended actor's stack)
/// are never started; their closures are dropped and their joins report `Cancelled`.
#[test]
fn shutdown_drops_closures_of_actors_that_never_started() {
    const N: usize = 1_000;
    struct SpawnOnDrop {
        drops: Arc<AtomicUsize>,
        started: Arc<AtomicUsize>,
        handles: Arc<Mutex<Vec<JoinHandle<()>>>>,
    }
    impl Drop for SpawnOnDrop {
        fn drop(&mut self) {
            for _ in 0..N {
                let token = DropCount(self.drops.clone());
                let started = self.started.clone();
                let h = threadlet::spawn(move || {
                    started.fetch_add(1, SeqCst);
                    drop(token);
                });
                self.handles.lock().unwrap().push(h);
            }
        }
    }

    let rt = runtime(1);
    let drops = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let handles = Arc::new(Mutex::new(Vec::new()));
    let parked = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = channel::bounded::<()>(0);
    let spawner = {
        let s = SpawnOnDrop {
            drops: drops.clone(),
            started: started.clone(),
            handles: handles.clone(),
        };
        let p = parked.clone();
        rt.spawn(move || {
            let _s = s;
            p.fetch_add(1, SeqCst);
            let _ = rx.recv();
        })
    };
    wait_for(&parked, 1, "spawner suspended");
    drop(rt);
    assert_eq!(started.load(SeqCst), 0, "nothing starts during shutdown");
    assert_eq!(drops.load(SeqCst), N, "every unstarted closure was dropped");
    assert!(spawner.join().unwrap_err().is_cancelled());
    let handles = std::mem::take(&mut *handles.lock().unwrap());
    assert_eq!(handles.len(), N);
    for h in handles {
        assert!(h.is_finished());
        assert!(h.join().unwrap_err().is_cancelled());
    }
    drop(tx);
}

/// A burst of spawns right before the runtime drops: each actor's captured value is dropped
/// exactly once, whether the actor was dropped unstarted (with its closure) or had started and
/// was unwound; every join reports `Cancelled`.
fn burst_then_shutdown(workers: usize) {
    const N: usize = 20_000;
    let rt = runtime(workers);
    let drops = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = channel::bounded::<()>(0);
    let handles: Vec<JoinHandle<()>> = (0..N)
        .map(|_| {
            let token = DropCount(drops.clone());
            let (started, rx) = (started.clone(), rx.clone());
            rt.spawn(move || {
                let _token = token;
                started.fetch_add(1, SeqCst);
                let _ = rx.recv();
                unreachable!("nobody sends");
            })
        })
        .collect();
    drop(rt);
    assert_eq!(drops.load(SeqCst), N);
    assert!(started.load(SeqCst) <= N);
    for h in handles {
        assert!(h.join().unwrap_err().is_cancelled());
    }
    drop(tx);
}

#[test]
fn burst_of_spawns_then_shutdown_one_worker() {
    burst_then_shutdown(1);
}

#[test]
fn burst_of_spawns_then_shutdown_two_workers() {
    burst_then_shutdown(2);
}

/// A handler actor that panics on its first message.
struct PanicsOnMessage;

impl Actor for PanicsOnMessage {
    type Msg = ();
    fn handle(&mut self, _: (), _ctx: &mut Context<Self>) {
        panic!("handler boom");
    }
}

/// A `JoinError` names its actor (id and name) whichever way it ended, and `Display` and
/// `Debug` say so.
#[test]
fn join_errors_carry_the_actors_id_and_name() {
    let rt = runtime(2);

    // Panicked (a process actor).
    let h = ActorBuilder::new()
        .name("mapper")
        .spawn_on(&rt, || -> u32 { panic!("boom") })
        .unwrap();
    let id = h.id();
    let err = h.join().unwrap_err();
    assert_eq!(err.id(), id);
    assert_eq!(err.name(), Some("mapper"));
    assert!(matches!(err.kind(), JoinErrorKind::Panicked(_)));
    assert_eq!(
        err.to_string(),
        format!("actor {id} \"mapper\" panicked: boom")
    );
    let debug = format!("{err:?}");
    assert!(
        debug.contains(&format!("{id:?}"))
            && debug.contains("\"mapper\"")
            && debug.contains("Panicked(\"boom\")"),
        "{debug}"
    );
    // `try_into_panic` hands back the payload; given back, the error still names the actor.
    let payload = err.try_into_panic().unwrap();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));

    // Panicked (a handler actor: its outcome goes through `Completion`).
    let (addr, h) = ActorBuilder::new()
        .name("handler")
        .start_on(&rt, PanicsOnMessage)
        .unwrap();
    let id = h.id();
    addr.send(()).unwrap();
    let err = h.join().err().expect("it panicked");
    assert_eq!((err.id(), err.name()), (id, Some("handler")));
    assert!(err.is_panic());
    assert_eq!(
        err.to_string(),
        format!("actor {id} \"handler\" panicked: handler boom")
    );

    // Killed.
    let h = ActorBuilder::new()
        .name("sleeper")
        .spawn_on(&rt, || threadlet::sleep(Duration::from_secs(3600)))
        .unwrap();
    let id = h.id();
    assert!(h.abort());
    let err = h.join().unwrap_err();
    assert_eq!((err.id(), err.name()), (id, Some("sleeper")));
    assert!(err.is_killed());
    assert_eq!(
        err.to_string(),
        format!("actor {id} \"sleeper\" was killed")
    );
    // Not a panic: `try_into_panic` gives the error back whole, `into_panic` panics.
    let err = err.try_into_panic().unwrap_err();
    assert_eq!((err.id(), err.name()), (id, Some("sleeper")));
    let not_a_panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| err.into_panic()));
    assert!(not_a_panic.is_err());

    // Unnamed: Display leaves the name out.
    let h = rt.spawn(|| -> u32 { panic!("anonymous") });
    let id = h.id();
    let err = h.join().unwrap_err();
    assert_eq!((err.id(), err.name()), (id, None));
    assert_eq!(err.to_string(), format!("actor {id} panicked: anonymous"));

    // Cancelled by shutdown.
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (never_tx, never_rx) = channel::bounded::<()>(0);
    let h = ActorBuilder::new()
        .name("parked")
        .spawn_on(&rt, move || {
            started_tx.send(()).unwrap();
            let _ = never_rx.recv(); // nothing is ever sent: shutdown unwinds it here
        })
        .unwrap();
    let id = h.id();
    started_rx.recv().unwrap();
    drop(rt);
    let err = h.join().unwrap_err();
    assert_eq!((err.id(), err.name()), (id, Some("parked")));
    assert!(matches!(err.into_kind(), JoinErrorKind::Cancelled));
    drop(never_tx);
}

/// Joining from a plain thread: one thread already blocked in `join` while the runtime drops,
/// and one join after the drop. Both get `Cancelled`.
#[test]
fn join_of_an_actor_cancelled_by_shutdown() {
    let rt = runtime(2);
    let (tx, rx) = channel::bounded::<()>(0);
    let parked = Arc::new(AtomicUsize::new(0));
    let spawn_blocked = |rx: channel::Receiver<()>| {
        let p = parked.clone();
        rt.spawn(move || {
            p.fetch_add(1, SeqCst);
            rx.recv().unwrap();
            "finished"
        })
    };
    let joined_during = spawn_blocked(rx.clone());
    let joined_after = spawn_blocked(rx);
    wait_for(&parked, 2, "actors suspended");
    let joiner = thread::spawn(move || joined_during.join());
    thread::sleep(Duration::from_millis(10));
    assert!(!joiner.is_finished());
    drop(rt);
    let err = joiner.join().unwrap().unwrap_err();
    assert!(err.is_cancelled(), "{err:?}");
    assert!(!err.is_panic());
    assert_eq!(err.panic_message(), None);
    assert!(!err.to_string().is_empty());
    assert!(joined_after.is_finished());
    let err = joined_after.join().unwrap_err();
    assert!(err.is_cancelled(), "{err:?}");
    drop(tx);
}

/// An actor that finished before shutdown keeps its value.
#[test]
fn finished_actors_keep_their_results_across_shutdown() {
    let rt = runtime(2);
    let h = rt.spawn(|| String::from("done"));
    while !h.is_finished() {
        thread::yield_now();
    }
    drop(rt);
    assert_eq!(h.join().unwrap(), "done");
}

// ---------------------------------------------------------------------------------------------
// Stacks
// ---------------------------------------------------------------------------------------------

/// Recurses `depth` frames of at least 1 KiB each; returns the stack span used, in bytes.
#[inline(never)]
fn recurse(depth: usize, top: usize) -> usize {
    let mut buf = [0u8; 1024];
    buf[depth % 1024] = 1;
    let buf = std::hint::black_box(buf);
    let here = buf.as_ptr() as usize;
    let span = if depth == 0 {
        top.abs_diff(here)
    } else {
        recurse(depth - 1, top)
    };
    std::hint::black_box(&buf);
    span
}

#[test]
fn deep_recursion_fits_in_a_one_mib_stack() {
    let rt = runtime(2);
    let used = rt.block_on(|| {
        let h = ActorBuilder::new()
            .name("deep")
            .stack_size(1 << 20)
            .spawn(|| {
                let top = 0u8;
                let top = &top as *const u8 as usize;
                // Also across a suspension in the middle of it.
                threadlet::yield_now();
                recurse(200, top)
            })
            .unwrap();
        h.join().unwrap()
    });
    assert!(used >= 200 * 1024, "used only {used} bytes of stack");
    assert!(used < 1 << 20);
}

/// Records the running actor's name when dropped.
struct NameAtDrop(std::sync::mpsc::Sender<Option<String>>);

impl Drop for NameAtDrop {
    fn drop(&mut self) {
        let _ = self.0.send(threadlet::current_name());
    }
}

/// A named actor unwound at shutdown still has its name while its destructors run (they run
/// as that actor: a panic or an overflow there is reported under its name).
#[test]
fn a_named_actor_keeps_its_name_while_shutdown_unwinds_it() {
    let rt = runtime(1);
    let (tx, rx) = std::sync::mpsc::channel();
    let (stay_tx, stay_rx) = channel::unbounded::<()>();
    let h = ActorBuilder::new()
        .name("named")
        .spawn_on(&rt, move || {
            let _guard = NameAtDrop(tx.clone());
            let _ = tx.send(threadlet::current_name());
            let _ = stay_rx.recv(); // until shutdown unwinds it
        })
        .unwrap();
    assert_eq!(rx.recv().unwrap().as_deref(), Some("named"));
    drop(rt);
    assert_eq!(rx.recv().unwrap().as_deref(), Some("named"));
    assert!(h.join().unwrap_err().is_cancelled());
    drop(stay_tx);
}
