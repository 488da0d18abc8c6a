//! `JoinHandle::abort` (kill): a killed actor ends at its next suspension or safe point with
//! its stack unwound on its own worker, whatever it was doing; `join` reports `Killed`.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{until, within_watchdog};
use parking_lot::Mutex;
use threadlet::{
    Actor, ActorBuilder, Context, JoinError, JoinHandle, Mailbox, Runtime, RuntimeExt, Scheduler,
    channel,
};

/// Records the worker its destructor ran on.
struct WhereDropped(Arc<Mutex<Option<Option<usize>>>>);

impl Drop for WhereDropped {
    fn drop(&mut self) {
        *self.0.lock() = Some(threadlet::worker_index());
    }
}

/// Where a `WhereDropped` ran its destructor: `None` until it has.
type DroppedOn = Arc<Mutex<Option<Option<usize>>>>;

fn probe() -> (WhereDropped, DroppedOn) {
    let cell = Arc::new(Mutex::new(None));
    (WhereDropped(cell.clone()), cell)
}

#[test]
fn a_process_actor_parked_in_recv_is_killed_and_unwound_on_its_own_worker() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (guard, dropped_on) = probe();
    let (ran_on_tx, ran_on) = channel::bounded(1);
    let (addr, h) = rt.spawn_actor(move |mb: Mailbox<u32>| {
        let _guard = guard;
        ran_on_tx.send(threadlet::worker_index()).unwrap();
        mb.recv()
    });
    let worker = ran_on.recv().unwrap();
    std::thread::sleep(Duration::from_millis(10)); // parked in `recv` by now, most likely
    assert!(h.abort());
    let r = within_watchdog("kill a parked actor", move || h.join());
    assert!(r.as_ref().is_err_and(JoinError::is_killed), "{r:?}");
    assert_eq!(*dropped_on.lock(), Some(worker));
    // Its mailbox went with it: sends hand their message back.
    assert_eq!(addr.send(1).unwrap_err().into_inner(), 1);
}

#[test]
fn a_spinning_actor_is_killed_at_its_next_safe_point() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (guard, dropped_on) = probe();
    let (ran_on_tx, ran_on) = channel::bounded(1);
    let h = rt.spawn(move || {
        let _guard = guard;
        ran_on_tx.send(threadlet::worker_index()).unwrap();
        let mut n = 0u64;
        loop {
            n = n.wrapping_add(1);
            threadlet::checkpoint();
        }
    });
    let worker = ran_on.recv().unwrap();
    assert!(h.abort());
    let r = within_watchdog("kill a spinner", move || h.join());
    assert!(r.as_ref().is_err_and(JoinError::is_killed));
    assert_eq!(*dropped_on.lock(), Some(worker));
}

/// A message that counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Holder {
    _guard: WhereDropped,
    seen: usize,
}

impl Actor for Holder {
    type Msg = Counted;
    fn handle(&mut self, _m: Counted, _ctx: &mut Context<Self>) {
        self.seen += 1;
    }
}

#[test]
fn a_handler_actor_between_messages_is_killed_with_its_state_and_queued_messages() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (guard, dropped) = probe();
    let drops = Arc::new(AtomicUsize::new(0));
    let (addr, h) = rt.start(Holder {
        _guard: guard,
        seen: 0,
    });
    addr.send(Counted(drops.clone())).unwrap();
    while drops.load(Ordering::SeqCst) < 1 {
        std::thread::yield_now(); // handled (and dropped) by now
    }
    assert!(h.abort());
    let r = within_watchdog("kill an idle handler actor", move || h.join().err());
    assert!(r.as_ref().is_some_and(JoinError::is_killed), "{r:?}");
    assert!(dropped.lock().is_some(), "the actor's state was dropped");
    // Later sends hand their message back (and it drops with the error, not in a mailbox).
    let back = addr.send(Counted(drops.clone())).unwrap_err().into_inner();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(back);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

struct Sleeper {
    _guard: WhereDropped,
    worker: channel::Sender<Option<usize>>,
}

impl Actor for Sleeper {
    type Msg = ();
    fn handle(&mut self, _: (), _ctx: &mut Context<Self>) {
        self.worker.send(threadlet::worker_index()).unwrap();
        threadlet::sleep(Duration::from_secs(3600)); // suspended inside `handle`
    }
}

#[test]
fn a_handler_actor_suspended_inside_handle_is_unwound_on_its_worker() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (guard, dropped_on) = probe();
    let (tx, rx) = channel::bounded(1);
    let (addr, h) = rt.start(Sleeper {
        _guard: guard,
        worker: tx,
    });
    addr.send(()).unwrap();
    let worker = rx.recv().unwrap();
    assert!(h.abort());
    let r = within_watchdog("kill a suspended handler", move || h.join().err());
    assert!(r.as_ref().is_some_and(JoinError::is_killed), "{r:?}");
    assert_eq!(*dropped_on.lock(), Some(worker));
    assert!(addr.send(()).is_err());
}

/// Never suspends inside `handle` (only safe points): its activation stays on the carrier lent
/// to it until a preemption or a kill takes it off.
struct BusyHandler {
    _guard: WhereDropped,
    running: channel::Sender<()>,
}

impl Actor for BusyHandler {
    type Msg = ();
    fn handle(&mut self, _: (), _ctx: &mut Context<Self>) {
        self.running.send(()).unwrap();
        loop {
            threadlet::checkpoint();
        }
    }
}

/// A plain handler actor's round trip on `rt`: the worker's carriers still serve.
fn a_handler_still_runs(rt: &Runtime) {
    struct Double;
    impl Actor for Double {
        type Msg = (u32, channel::Sender<u32>);
        fn handle(&mut self, (n, reply): (u32, channel::Sender<u32>), _ctx: &mut Context<Self>) {
            reply.send(2 * n).unwrap();
        }
    }
    let (addr, h) = rt.start(Double);
    let (tx, rx) = channel::bounded(1);
    addr.send((21, tx)).unwrap();
    assert_eq!(rx.recv().unwrap(), 42);
    drop(addr);
    within_watchdog("a handler after the kill", move || h.join().unwrap());
}

/// Every scheduler, each with one worker (no spare): what a busy activation shares its
/// carriers with.
fn one_worker_runtimes() -> impl Iterator<Item = (Scheduler, Runtime)> {
    [
        Scheduler::WorkStealing,
        Scheduler::GlobalQueue,
        Scheduler::Gil,
    ]
    .into_iter()
    .map(|scheduler| {
        let rt = Runtime::builder()
            .workers(1)
            .spare_workers(0)
            .scheduler(scheduler)
            .build()
            .unwrap();
        (scheduler, rt)
    })
}

/// Starts a `BusyHandler` on `rt` and returns once it is inside `handle`: its join handle,
/// and where its state was dropped (once it is).
fn busy_handler_on(rt: &Runtime) -> (JoinHandle<BusyHandler>, DroppedOn) {
    let (guard, dropped_on) = probe();
    let (tx, rx) = channel::bounded(1);
    let (addr, h) = rt.start(BusyHandler {
        _guard: guard,
        running: tx,
    });
    addr.send(()).unwrap();
    rx.recv().unwrap();
    (h, dropped_on)
}

#[test]
fn a_handler_actor_busy_inside_handle_is_killed_and_its_worker_goes_on() {
    // One worker: the killed activation, and the ones after it, share its carriers.
    for (scheduler, rt) in one_worker_runtimes() {
        for _ in 0..10 {
            let (h, dropped_on) = busy_handler_on(&rt);
            assert!(h.abort());
            let r = within_watchdog("kill a busy handler", move || h.join().err());
            assert!(
                r.as_ref().is_some_and(JoinError::is_killed),
                "{scheduler:?}: {r:?}"
            );
            assert_eq!(*dropped_on.lock(), Some(Some(0)), "{scheduler:?}");
            a_handler_still_runs(&rt);
        }
    }
}

#[test]
fn shutdown_cancels_a_handler_actor_busy_inside_handle() {
    for (scheduler, rt) in one_worker_runtimes() {
        let (h, dropped_on) = busy_handler_on(&rt);
        within_watchdog("shut down beside a busy handler", move || drop(rt));
        // Unwound on its worker before the runtime was gone.
        assert_eq!(*dropped_on.lock(), Some(Some(0)), "{scheduler:?}");
        let r = h.join().err();
        assert!(
            r.as_ref().is_some_and(JoinError::is_cancelled),
            "{scheduler:?}: {r:?}"
        );
    }
}

#[test]
fn an_actor_killed_before_it_starts_never_runs() {
    // No time slices: the busy actor keeps the only worker until told, after the abort (a
    // slice's end would let the queued actor run first on a crowded machine), and no spare
    // comes to run it either.
    let rt = Runtime::builder()
        .workers(1)
        .time_slice(Duration::ZERO)
        .build()
        .unwrap();
    let (hold_tx, hold_rx) = channel::bounded::<()>(0);
    // Keeps the only worker busy (spinning through safe points) until told.
    let busy = rt.spawn(move || {
        while hold_rx.try_recv().is_err() {
            threadlet::checkpoint();
        }
    });
    let ran = Arc::new(AtomicUsize::new(0));
    let (guard, dropped) = probe();
    let r = ran.clone();
    let queued = rt.spawn(move || {
        let _guard = guard;
        r.fetch_add(1, Ordering::SeqCst);
    });
    assert!(queued.abort());
    // The kill is in before the worker is free: the queued actor never got to start. (Its
    // join waits for the worker, which finishes the kill.)
    hold_tx.send(()).unwrap();
    busy.join().unwrap();
    let r = within_watchdog("join the killed actor", move || queued.join());
    assert!(r.is_err_and(|e| e.is_killed()));
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert!(dropped.lock().is_some(), "the closure was dropped");
}

#[test]
fn aborting_an_ended_actor_reports_false_and_keeps_its_result() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let h = rt.spawn(|| 7);
    while !h.is_finished() {
        std::thread::yield_now();
    }
    assert!(!h.abort());
    assert_eq!(h.join().unwrap(), 7);
}

/// An actor killed while it waits in a channel's `send` leaves no trace in the channel: its
/// value is dropped, never received, and the channel keeps working.
#[test]
fn a_kill_inside_a_channel_wait_leaves_the_channel_consistent() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (tx, rx) = channel::bounded::<u32>(0);
    let stuck = {
        let tx = tx.clone();
        rt.spawn(move || tx.send(1))
    };
    std::thread::sleep(Duration::from_millis(10));
    assert!(stuck.abort());
    assert!(stuck.join().is_err_and(|e| e.is_killed()));
    let ok = rt.spawn(move || tx.send(2));
    assert_eq!(rx.recv(), Ok(2));
    ok.join().unwrap().unwrap();
}

/// Actors of every kind, in every state, killed at random moments: every join returns, with
/// the value or `Killed`, and every destructor runs once.
#[test]
fn kills_at_random_moments_always_end_the_actor() {
    within_watchdog("random kills", || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        for i in 0..400u64 {
            let d = Counted(dropped.clone());
            let h = match i % 4 {
                0 => rt.spawn(move || {
                    let _d = d;
                    threadlet::sleep(Duration::from_micros(i * 3));
                }),
                1 => rt.spawn(move || {
                    let _d = d;
                    for _ in 0..(i * 50) {
                        threadlet::checkpoint();
                    }
                }),
                2 => rt.spawn(move || {
                    let _d = d;
                    let (tx, rx) = channel::unbounded::<u8>();
                    threadlet::spawn(move || {
                        threadlet::sleep(Duration::from_micros(100));
                        let _ = tx.send(1);
                    });
                    let _ = rx.recv();
                }),
                _ => rt.spawn(move || {
                    let _d = d;
                    threadlet::yield_now();
                }),
            };
            handles.push(h);
        }
        let mut killed = 0;
        for (i, h) in handles.iter().enumerate() {
            if i % 2 == 0 && h.abort() {
                killed += 1;
            }
        }
        let mut reported_killed = 0;
        for h in handles {
            match h.join() {
                Ok(()) => {}
                Err(e) if e.is_killed() => reported_killed += 1,
                Err(e) => panic!("unexpected: {e}"),
            }
        }
        assert!(reported_killed <= killed);
        // Spawned helpers of kind 2 finish on their own; give them a moment, then count.
        drop(rt);
        assert_eq!(dropped.load(Ordering::SeqCst), 400);
    });
}

#[test]
fn a_kill_of_a_named_actor_built_with_options_works_the_same() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (addr, h) = ActorBuilder::new()
        .name("victim")
        .mailbox_capacity(1)
        .spawn_actor_on(&rt, |mb: Mailbox<u8>| mb.iter().count())
        .unwrap();
    addr.send(1).unwrap();
    let kill = h.abort_handle();
    assert_eq!(kill.id(), h.id());
    assert!(kill.abort());
    assert!(h.join().is_err_and(|e| e.is_killed()));
    // The abort handle reads the end its exit hooks record, a moment after the join's slot.
    common::until("the abort handle sees the end", || kill.is_finished());
}

struct Idle;

impl Actor for Idle {
    type Msg = ();
    fn handle(&mut self, _: (), _ctx: &mut Context<Self>) {}
}

#[test]
fn kill_and_monitor_by_bare_id_reach_every_kind_of_actor() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let handle = rt.handle();
    let (_handler, hh) = rt.start(Idle);
    let (_process, hp) = rt.spawn_actor(|mb: Mailbox<()>| mb.recv());
    let plain = rt.spawn(|| threadlet::sleep(Duration::from_secs(3600)));
    let ids = [hh.id(), hp.id(), plain.id()];
    // From inside an actor: the free functions, on the current runtime.
    let reasons = rt.block_on(move || {
        ids.map(|id| {
            let m = threadlet::monitor(id);
            assert!(threadlet::kill(id));
            m.recv().reason
        })
    });
    assert!(reasons.iter().all(|r| *r == threadlet::ExitReason::Killed));
    assert!(hh.join().is_err_and(|e| e.is_killed()));
    assert!(hp.join().is_err_and(|e| e.is_killed()));
    assert!(plain.join().is_err_and(|e| e.is_killed()));
    // Ended: no longer in the table. From a plain thread: through the handle.
    for id in ids {
        assert!(!handle.kill(id));
        // The real reason while the worker still tidies up after the actor, then `NoProc`.
        let late = threadlet::Monitor::of_id(&handle, id).recv().reason;
        assert!(matches!(
            late,
            threadlet::ExitReason::Killed | threadlet::ExitReason::NoProc
        ));
    }
    // Outside any runtime the free functions find nothing.
    assert!(!threadlet::kill(ids[0]));
}

/// A kill unwinds as a panic does, as far as destructors can tell: a `std::sync::Mutex` guard
/// held by the killed actor poisons its lock (docs/actors.md, "Kill"), and is released on the
/// actor's own thread (the lock is free again afterwards).
#[test]
fn a_kill_poisons_a_std_mutex_the_actor_holds_as_a_panic_would() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let lock = Arc::new(std::sync::Mutex::new(0u32));
    let held = lock.clone();
    let (addr, h) = rt.spawn_actor(move |mb: Mailbox<()>| {
        let mut guard = held.lock().unwrap();
        *guard += 1;
        mb.recv(); // killed while waiting here, the guard held
        *guard += 1;
    });
    within_watchdog("a kill with a mutex held", move || {
        while !lock.is_poisoned() && lock.try_lock().is_ok() {
            std::thread::yield_now(); // until the actor holds it
        }
        assert!(addr.kill());
        assert!(h.join().unwrap_err().is_killed());
        assert!(lock.is_poisoned());
        let value = *lock.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(value, 1);
    });
}

/// A runtime of two workers under the GIL baseline, one of them held by an actor that keeps the
/// global lock until the returned flag is raised (`hold_the_lock`).
fn gil_runtime_with_the_lock_held() -> (Runtime, Arc<AtomicBool>, JoinHandle<()>) {
    let rt = Runtime::builder()
        .workers(2)
        .scheduler(Scheduler::Gil)
        .build()
        .unwrap();
    let (release, holder) = hold_the_lock(&rt);
    (rt, release, holder)
}

/// Starts an actor on `rt` that spins with no safe point, holding its worker (and under the GIL
/// baseline the global lock) until the returned flag is raised; returns once it runs.
fn hold_the_lock(rt: &Runtime) -> (Arc<AtomicBool>, JoinHandle<()>) {
    let release = Arc::new(AtomicBool::new(false));
    let (inside_tx, inside) = std::sync::mpsc::channel();
    let flag = release.clone();
    let holder = rt.spawn(move || {
        inside_tx.send(()).unwrap();
        while !flag.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
    });
    inside.recv().unwrap();
    (release, holder)
}

/// Waits until the other worker has taken actor `id` from its queue and waits for the global
/// lock to run it: the dump shows it running, on no worker yet (a worker says which actor it
/// runs only once it holds the lock).
fn wait_until_it_waits_for_the_lock(rt: &Runtime, id: threadlet::ActorId) {
    until("an actor taken by a worker waiting for the GIL", || {
        rt.dump().actor(id).map(|a| a.state)
            == Some(threadlet::ActorState::Running { worker: None })
    });
}

#[test]
fn under_the_gil_a_kill_while_the_worker_waits_for_the_lock_stops_the_run() {
    struct Counter(Arc<AtomicUsize>);
    impl Actor for Counter {
        type Msg = ();
        fn started(&mut self, _ctx: &mut Context<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn handle(&mut self, _: (), _ctx: &mut Context<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    // A process actor that has not started: its closure must never run.
    let (rt, release, holder) = gil_runtime_with_the_lock_held();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let h = rt.spawn(move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    wait_until_it_waits_for_the_lock(&rt, h.id());
    assert!(h.abort());
    release.store(true, Ordering::SeqCst);
    holder.join().unwrap();
    let r = within_watchdog("join a process actor killed before it ran", move || {
        h.join()
    });
    assert!(r.as_ref().is_err_and(JoinError::is_killed), "{r:?}");
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "the closure ran after the kill"
    );

    // A handler actor that has not started: neither `started` nor `handle` runs.
    let (rt, release, holder) = gil_runtime_with_the_lock_held();
    let calls = Arc::new(AtomicUsize::new(0));
    let (addr, h) = rt.start(Counter(calls.clone()));
    addr.send(()).unwrap();
    wait_until_it_waits_for_the_lock(&rt, h.id());
    assert!(h.abort());
    release.store(true, Ordering::SeqCst);
    holder.join().unwrap();
    let r = within_watchdog("join a handler actor killed before it ran", move || {
        h.join()
    });
    assert!(r.as_ref().err().is_some_and(JoinError::is_killed));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "started or handle ran after the kill"
    );

    // A handler actor between messages, woken by one: the message is not handled.
    let (rt, release, holder) = gil_runtime_with_the_lock_held();
    release.store(true, Ordering::SeqCst);
    holder.join().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let (addr, h) = rt.start(Counter(calls.clone()));
    addr.send(()).unwrap();
    until("the first message", || calls.load(Ordering::SeqCst) == 2);
    let (release, holder) = hold_the_lock(&rt);
    addr.send(()).unwrap();
    wait_until_it_waits_for_the_lock(&rt, h.id());
    assert!(addr.kill());
    release.store(true, Ordering::SeqCst);
    holder.join().unwrap();
    let r = within_watchdog("join a handler actor killed while woken", move || h.join());
    assert!(r.as_ref().err().is_some_and(JoinError::is_killed));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "a message was handled after the kill"
    );
}

/// `activation_preempted` and `activation_killed` speak of a handler actor's activation only: a
/// killed process actor, still running up to its next safe point, is in none.
#[test]
fn a_killed_process_actor_is_not_a_killed_activation() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (go_tx, go) = std::sync::mpsc::channel::<()>();
    let (inside_tx, inside) = std::sync::mpsc::channel();
    let (seen_tx, seen) = std::sync::mpsc::channel();
    let h = rt.spawn(move || {
        inside_tx.send(()).unwrap();
        // A plain wait, not a safe point: the kill lands after it.
        go.recv().unwrap();
        seen_tx
            .send((
                threadlet_runtime::activation_preempted(),
                threadlet_runtime::activation_killed(),
            ))
            .unwrap();
        threadlet::checkpoint();
    });
    inside.recv().unwrap();
    assert!(h.abort());
    go_tx.send(()).unwrap();
    let r = within_watchdog("join the killed process actor", move || h.join());
    assert!(r.is_err_and(|e| e.is_killed()));
    assert_eq!(seen.recv().unwrap(), (false, false), "(preempted, killed)");
}
