//! Handler actors: semantics (start, stop, panics, the last address), movement between
//! workers, blocking inside `handle`, shutdown, and message conservation under every scheduler.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use common::{under_each_scheduler, within_watchdog};
use threadlet::channel;
use threadlet::{Actor, Addr, Context, Mailbox, Runtime, RuntimeExt, Scheduler};

fn runtime(workers: usize) -> Runtime {
    Runtime::builder().workers(workers).build().unwrap()
}

/// Records every hook call and message, in order.
#[derive(Default, Debug)]
struct Recorder {
    log: Vec<String>,
    stop_on: Option<u32>,
    panic_on: Option<u32>,
    panic_in_stopped: bool,
    stopped: Arc<AtomicUsize>,
}

impl Actor for Recorder {
    type Msg = u32;

    fn started(&mut self, _ctx: &mut Context<Self>) {
        self.log.push("started".into());
    }

    fn handle(&mut self, n: u32, ctx: &mut Context<Self>) {
        self.log.push(n.to_string());
        if Some(n) == self.panic_on {
            panic!("handle panics on {n}");
        }
        if Some(n) == self.stop_on {
            ctx.stop();
        }
    }

    fn stopped(&mut self) {
        self.stopped.fetch_add(1, SeqCst);
        if self.panic_in_stopped {
            panic!("stopped panics");
        }
    }
}

#[test]
fn started_then_messages_in_order_then_stopped_when_every_addr_is_gone() {
    let rt = runtime(2);
    let stopped = Arc::new(AtomicUsize::new(0));
    let (addr, h) = rt.start(Recorder {
        stopped: stopped.clone(),
        ..Recorder::default()
    });
    for n in 0..200 {
        addr.send(n).unwrap();
    }
    let other = addr.clone();
    drop(addr);
    other.send(200).unwrap(); // one address is still alive
    drop(other);
    let r = h.join().unwrap();
    let expected: Vec<String> = std::iter::once("started".to_string())
        .chain((0..=200).map(|n| n.to_string()))
        .collect();
    assert_eq!(r.log, expected);
    assert_eq!(stopped.load(SeqCst), 1);
}

#[test]
fn stop_ends_after_the_current_message_and_later_sends_come_back() {
    let rt = runtime(1);
    let stopped = Arc::new(AtomicUsize::new(0));
    let (addr, h) = rt.start(Recorder {
        stop_on: Some(3),
        stopped: stopped.clone(),
        ..Recorder::default()
    });
    for n in 0..10 {
        // Messages after the stop are either handed back, or accepted before the close and
        // dropped with the mailbox: never handled.
        let _ = addr.send(n);
    }
    let r = h.join().unwrap();
    assert_eq!(r.log, ["started", "0", "1", "2", "3"]);
    assert_eq!(stopped.load(SeqCst), 1);
    assert!(addr.is_closed());
    assert_eq!(addr.send(99).unwrap_err().into_inner(), 99);
}

#[test]
fn a_panic_in_handle_ends_the_actor_like_a_process_actors() {
    let rt = runtime(2);
    let stopped = Arc::new(AtomicUsize::new(0));
    let (addr, h) = rt.start(Recorder {
        panic_on: Some(2),
        stopped: stopped.clone(),
        ..Recorder::default()
    });
    for n in 0..3 {
        addr.send(n).unwrap();
    }
    let err = h.join().unwrap_err();
    assert_eq!(err.panic_message(), Some("handle panics on 2"));
    assert_eq!(
        stopped.load(SeqCst),
        0,
        "stopped does not run after a panic"
    );
    assert_eq!(addr.send(7).unwrap_err().into_inner(), 7);
    // The worker carries on.
    assert_eq!(rt.block_on(|| 6 * 7), 42);
}

#[test]
fn a_panic_in_stopped_is_reported_by_join() {
    let rt = runtime(1);
    let (addr, h) = rt.start(Recorder {
        stop_on: Some(0),
        panic_in_stopped: true,
        ..Recorder::default()
    });
    addr.send(0).unwrap();
    let err = h.join().unwrap_err();
    assert!(err.is_panic());
    assert_eq!(err.panic_message(), Some("stopped panics"));
}

/// Records the worker that handled each message, and acknowledges it.
struct WhereAmI(HashSet<usize>);

impl Actor for WhereAmI {
    type Msg = Addr<()>;
    fn handle(&mut self, ack: Addr<()>, _ctx: &mut Context<Self>) {
        self.0
            .insert(threadlet::worker_index().expect("on a worker"));
        let _ = ack.send(());
    }
}

#[test]
fn a_handler_actor_runs_on_both_workers_over_its_life() {
    let rt = runtime(2);
    let (target, h) = rt.start(WhereAmI(HashSet::new()));
    // Two process actors, one started on each worker (they stay there: pinned). A message
    // from one makes the handler actor run next on that one's worker.
    let mut on = [None, None];
    let mut spare = Vec::new();
    // Which worker starts a spawn depends on which one wakes first: try for a while (other
    // tests may keep one worker's thread off the CPU for a time).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if on.iter().all(Option::is_some) {
            break;
        }
        let (tx, rx) = mpsc::channel();
        let (go, h) = rt.spawn_actor(move |mb: Mailbox<(Addr<Addr<()>>, u32)>| {
            tx.send(threadlet::worker_index().unwrap()).unwrap();
            let Some((target, rounds)) = mb.recv() else {
                return 0; // a spare, not needed
            };
            let (ack, acks) = threadlet::spawn_actor(|mb: Mailbox<()>| mb.iter().count());
            for _ in 0..rounds {
                target.send(ack.clone()).unwrap();
                threadlet::sleep(Duration::from_micros(100));
            }
            drop(ack);
            acks.join().unwrap()
        });
        let w = rx.recv().unwrap();
        if on[w].is_none() {
            on[w] = Some((go, h));
        } else {
            spare.push((go, h));
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let [Some(a), Some(b)] = on else {
        panic!("no actor started on one of the two workers in 20 s");
    };
    for (go, h) in [a, b] {
        go.send((target.clone(), 20)).unwrap();
        assert_eq!(h.join().unwrap(), 20);
    }
    drop(spare);
    drop(target);
    let seen = h.join().unwrap().0;
    assert_eq!(seen, HashSet::from([0, 1]), "ran on workers {seen:?}");
}

/// On its first message, says so, then blocks in `handle` on a channel until released.
#[derive(Debug)]
struct Blocker(channel::Receiver<()>, mpsc::Sender<()>);

impl Actor for Blocker {
    type Msg = ();
    fn handle(&mut self, _: (), ctx: &mut Context<Self>) {
        let _ = self.1.send(());
        self.0.recv().unwrap();
        ctx.stop();
    }
}

#[derive(Debug)]
struct Tally(u32);

impl Actor for Tally {
    type Msg = u32;
    fn handle(&mut self, n: u32, _ctx: &mut Context<Self>) {
        self.0 += n;
    }
}

#[test]
fn a_handler_blocked_inside_handle_does_not_block_its_worker() {
    let rt = runtime(1); // one worker: everything below shares it
    let (release, released) = channel::bounded::<()>(0);
    let (blocking, is_blocking) = mpsc::channel();
    let (blocker, b) = rt.start(Blocker(released, blocking));
    blocker.send(()).unwrap();
    is_blocking.recv().unwrap(); // it is inside `handle`, about to wait in `recv`
    // While the blocker holds its lent stack, waiting in `recv`, others run on the same worker.
    let (tally, t) = rt.start(Tally(0));
    for n in 1..=100 {
        tally.send(n).unwrap();
    }
    drop(tally);
    let total = within_watchdog("the tally beside a blocked handler", move || t.join());
    assert_eq!(total.unwrap().0, 5050);
    assert!(!b.is_finished(), "the blocker still waits");
    release.send(()).unwrap();
    within_watchdog("the blocker ends", move || b.join().map(|_| ())).expect("the blocker ends");
}

#[test]
fn handler_actors_are_stolen_by_idle_workers() {
    let rt = runtime(2);
    let workers = Arc::new(Mutex::new(HashSet::new()));
    struct Note(Arc<Mutex<HashSet<usize>>>);
    impl Actor for Note {
        type Msg = ();
        fn handle(&mut self, _: (), ctx: &mut Context<Self>) {
            // Long enough that the other worker wakes up and steals the queued ones.
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_micros(200) {
                threadlet::checkpoint();
            }
            self.0
                .lock()
                .unwrap()
                .insert(threadlet::worker_index().unwrap());
            ctx.stop();
        }
    }
    for _ in 0..20 {
        workers.lock().unwrap().clear();
        let w = workers.clone();
        rt.block_on(move || {
            // All started from one actor, on one worker: the other must steal to help.
            let handles: Vec<_> = (0..64)
                .map(|_| {
                    let (addr, h) = threadlet::start(Note(w.clone()));
                    addr.send(()).unwrap();
                    h
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        });
        if workers.lock().unwrap().len() == 2 {
            return;
        }
    }
    panic!("handler actors never ran on the second worker");
}

#[test]
fn shutdown_cancels_idle_and_blocked_handler_actors() {
    let idle = within_watchdog("drop(rt)", || {
        let rt = runtime(2);
        let (keep, idle) = rt.start(Tally(0)); // waits for messages that never come
        keep.send(1).unwrap(); // it ran at least once before, and is idle (or about to be)
        let (_release, released) = channel::bounded::<()>(0);
        let (blocking, is_blocking) = mpsc::channel();
        let (blocker, blocked) = rt.start(Blocker(released, blocking));
        blocker.send(()).unwrap();
        is_blocking.recv().unwrap(); // suspended in `recv` inside `handle`
        drop(rt);
        (keep, idle, blocked)
    });
    let (keep, idle, blocked) = (idle.0, idle.1, idle.2);
    assert!(
        within_watchdog("join idle", move || idle.join())
            .unwrap_err()
            .is_cancelled()
    );
    assert!(
        within_watchdog("join blocked", move || blocked.join())
            .unwrap_err()
            .is_cancelled()
    );
    drop(keep);
}

/// Counts what it receives into a shared total.
struct Counter(Arc<AtomicUsize>);

impl Actor for Counter {
    type Msg = u64;
    fn handle(&mut self, _: u64, _ctx: &mut Context<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn message_conservation_with_handler_actors_under_every_scheduler() {
    const ACTORS: usize = 1_000;
    const PRODUCERS: u64 = 4;
    const PER_PRODUCER: u64 = 250_000;
    for (scheduler, rt) in under_each_scheduler(2) {
        let received = Arc::new(AtomicUsize::new(0));
        let (addrs, handles): (Vec<_>, Vec<_>) = (0..ACTORS)
            .map(|_| rt.start(Counter(received.clone())))
            .unzip();
        let addrs = Arc::new(addrs);
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let addrs = addrs.clone();
                rt.spawn(move || {
                    let mut x = p + 1;
                    for i in 0..PER_PRODUCER {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        addrs[(x >> 33) as usize % addrs.len()].send(i).unwrap();
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        drop(addrs); // the last addresses: each actor stops once its mailbox is empty
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(
            received.load(SeqCst) as u64,
            PRODUCERS * PER_PRODUCER,
            "{scheduler:?}"
        );
    }
}

/// Waits inside `handle` for a release, after saying so; then stops.
struct Waits(channel::Receiver<()>, channel::Sender<()>);

impl Actor for Waits {
    type Msg = ();
    fn handle(&mut self, _: (), ctx: &mut Context<Self>) {
        let _ = self.1.send(());
        self.0.recv().unwrap();
        ctx.stop();
    }
}

#[test]
fn handler_actors_block_yield_and_stop_under_every_scheduler() {
    const WAITERS: usize = 4;
    for workers in [1, 2] {
        for (scheduler, rt) in under_each_scheduler(workers) {
            let what = format!("handler actors under {scheduler:?}, {workers} workers");
            let total = within_watchdog(&what, move || {
                let total = rt.block_on(|| {
                    // Started from inside an actor: the spawn path of a worker.
                    let (spin, _s) = threadlet::start(Spinner(0));
                    spin.send(()).unwrap(); // always has a message left: yields every batch
                    let (release, released) = channel::unbounded::<()>();
                    let (inside, is_inside) = channel::unbounded::<()>();
                    let waiters: Vec<_> = (0..WAITERS)
                        .map(|_| {
                            let (addr, h) =
                                threadlet::start(Waits(released.clone(), inside.clone()));
                            addr.send(()).unwrap();
                            (addr, h)
                        })
                        .collect();
                    for _ in 0..WAITERS {
                        is_inside.recv().unwrap(); // each blocks inside `handle`, on a carrier
                    }
                    let (tally, t) = threadlet::start(Tally(0));
                    for n in 1..=100 {
                        tally.send(n).unwrap();
                    }
                    drop(tally);
                    let total = t.join().unwrap().0;
                    for _ in 0..WAITERS {
                        release.send(()).unwrap();
                    }
                    for (addr, h) in waiters {
                        h.join().unwrap();
                        drop(addr);
                    }
                    total
                });
                drop(rt); // shutdown cancels the spinner
                total
            });
            assert_eq!(total, 5050, "{scheduler:?}, {workers} workers");
        }
    }
}

/// Sends itself a message for every one it handles, forever: its batches always end with
/// messages left.
struct Spinner(u64);

impl Actor for Spinner {
    type Msg = ();
    fn handle(&mut self, _: (), ctx: &mut Context<Self>) {
        self.0 += 1;
        let _ = ctx.addr().send(());
    }
}

#[test]
fn a_busy_handler_actor_does_not_starve_others_on_its_worker() {
    let rt = runtime(1);
    let (spin, _s) = rt.start(Spinner(0));
    spin.send(()).unwrap();
    // The spinner always has a message waiting; a tally on the same worker must still run.
    let (tally, t) = rt.start(Tally(0));
    tally.send(7).unwrap();
    drop(tally);
    let total = within_watchdog("a tally beside a busy handler", move || t.join());
    assert_eq!(total.unwrap().0, 7);
    drop(spin);
}

/// Counts its drops.
struct Dropped(Arc<AtomicUsize>);
impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

struct StopsAtOnce;

impl Actor for StopsAtOnce {
    type Msg = Dropped;
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.stop(); // before any message
    }
    fn handle(&mut self, _: Dropped, _ctx: &mut Context<Self>) {
        unreachable!("stopped in `started`");
    }
}

#[test]
fn what_a_stopped_actor_leaves_is_dropped_before_join_returns() {
    let rt = runtime(2);
    for _ in 0..50 {
        let drops = Arc::new(AtomicUsize::new(0));
        let (addr, h) = rt.start(StopsAtOnce);
        for _ in 0..10 {
            // Accepted before the stop closes the mailbox (then dropped with the actor), or
            // handed back after it (and dropped here).
            if let Err(e) = addr.send(Dropped(drops.clone())) {
                drop(e.into_inner());
            }
        }
        h.join().unwrap();
        assert_eq!(
            drops.load(SeqCst),
            10,
            "every message was dropped when join returned"
        );
    }
}

/// Counts its drop, slowly: widens the window in which a join completed before the drop would
/// return before it.
struct SlowToDrop(Arc<AtomicUsize>);

impl Drop for SlowToDrop {
    fn drop(&mut self) {
        std::thread::sleep(Duration::from_millis(20));
        self.0.fetch_add(1, SeqCst);
    }
}

/// As an actor (the value whose drop `join` must wait for), its `handle` panics.
impl Actor for SlowToDrop {
    type Msg = ();
    fn handle(&mut self, (): (), _ctx: &mut Context<Self>) {
        panic!("handle fails");
    }
}

/// Its value, too, when the actor panicked: `join` returns after the value's destructor has
/// run (it ran after the join was completed before; a slow destructor showed it).
#[test]
fn a_panicked_actors_value_is_dropped_before_join_returns() {
    let rt = runtime(1);
    for _ in 0..3 {
        let drops = Arc::new(AtomicUsize::new(0));
        let (addr, h) = rt.start(SlowToDrop(drops.clone()));
        addr.send(()).unwrap();
        assert!(h.join().err().is_some_and(|e| e.is_panic()));
        assert_eq!(
            drops.load(SeqCst),
            1,
            "the value was dropped when join returned"
        );
    }
}

/// What a `handle` that caught the forced unwind of a kill or shutdown does next.
#[derive(Clone, Copy, Debug)]
enum AfterCatch {
    Returns,
    Stops,
    PanicsAnew,
}

/// Its `handle` blocks, catches the unwind that ends the block, then does as told.
struct Stubborn(mpsc::Sender<()>, Arc<AtomicUsize>, AfterCatch);

impl Drop for Stubborn {
    fn drop(&mut self) {
        self.1.fetch_add(1, SeqCst);
    }
}

impl Actor for Stubborn {
    type Msg = ();
    fn handle(&mut self, (): (), ctx: &mut Context<Self>) {
        self.0.send(()).unwrap();
        let long = || threadlet::sleep(Duration::from_secs(3600));
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(long));
        match self.2 {
            AfterCatch::Returns => {}
            AfterCatch::Stops => ctx.stop(),
            AfterCatch::PanicsAnew => panic!("caught the unwind, then panicked"),
        }
    }
}

/// A `handle` that catches the forced unwind of a kill, or of shutdown, and then returns,
/// stops the actor or panics anew: its value is dropped once, under every scheduler. (One that
/// stopped was dropped twice, a crash, once the program was kept in the actor's cell: the
/// carrier dropped it inside the unwind, and the unwinder dropped it again.)
#[test]
fn a_handler_that_catches_its_kill_or_shutdown_is_dropped_once() {
    for after in [
        AfterCatch::Returns,
        AfterCatch::Stops,
        AfterCatch::PanicsAnew,
    ] {
        for by_kill in [true, false] {
            for (scheduler, rt) in under_each_scheduler(1) {
                let (inside, is_inside) = mpsc::channel();
                let drops = Arc::new(AtomicUsize::new(0));
                let (addr, h) = rt.start(Stubborn(inside, drops.clone(), after));
                addr.send(()).unwrap();
                is_inside.recv().unwrap();
                // Most likely asleep by now; a kill or shutdown that comes before the sleep
                // ends the actor too.
                std::thread::sleep(Duration::from_millis(20));
                if by_kill {
                    assert!(rt.handle().kill(h.id()));
                    let _ = h.join(); // the value, or why there is none
                    drop(rt);
                } else {
                    drop(rt);
                    drop(h);
                }
                drop(addr);
                let what = format!("{after:?}, by kill: {by_kill}, {scheduler:?}");
                assert_eq!(drops.load(SeqCst), 1, "{what}");
            }
        }
    }
}

/// A program whose destructor blocks: its activation suspends inside the drop, and a kill or
/// shutdown unwinds it there. The drop must not be made a second time (it was, once the
/// program was kept in the actor's cell).
#[test]
fn a_program_whose_drop_blocks_is_dropped_once_when_killed_or_shut_down() {
    use threadlet_runtime::{Activation, Completion, SpawnOptions, Step};
    // The completion is dropped after `drop` returns: until then the actor counts as live,
    // so a kill reaches it.
    struct BlocksInDrop(
        Arc<AtomicUsize>,
        Option<mpsc::Sender<()>>,
        #[allow(dead_code)] Completion<()>,
    );
    impl Activation for BlocksInDrop {
        fn run(&mut self) -> Step {
            Step::Stop
        }
    }
    impl Drop for BlocksInDrop {
        fn drop(&mut self) {
            if self.0.fetch_add(1, SeqCst) == 0 {
                drop(self.1.take()); // tells the test it is in here
                threadlet::sleep(Duration::from_secs(3600));
            }
        }
    }
    for by_kill in [true, false] {
        for (scheduler, rt) in under_each_scheduler(1) {
            let drops = Arc::new(AtomicUsize::new(0));
            let (inside, is_inside) = mpsc::channel::<()>();
            let drops_in = drops.clone();
            let h = rt
                .start_handler(SpawnOptions::new(), move |_, done: Completion<()>| {
                    BlocksInDrop(drops_in, Some(inside), done)
                })
                .unwrap();
            assert!(is_inside.recv().is_err()); // the sender was dropped inside the destructor
            std::thread::sleep(Duration::from_millis(20));
            if by_kill {
                assert!(rt.handle().kill(h.id()));
                let _ = h.join();
            }
            drop(rt);
            assert_eq!(drops.load(SeqCst), 1, "by kill: {by_kill}, {scheduler:?}");
        }
    }
}

/// A killed handler actor, as a killed process actor: its queued messages are dropped, and
/// its mailbox refuses sends, by the time `join` returns (the join came first for a while: the
/// program's completion was dropped with the value, before the mailbox).
#[test]
fn a_killed_handlers_queue_is_dropped_before_join_returns() {
    struct Waits(channel::Receiver<()>, mpsc::Sender<()>);
    impl Actor for Waits {
        type Msg = SlowToDrop;
        fn handle(&mut self, _: SlowToDrop, _ctx: &mut Context<Self>) {
            self.1.send(()).unwrap();
            let _ = self.0.recv(); // until killed
        }
    }
    for (scheduler, rt) in under_each_scheduler(1) {
        let (_keep, never) = channel::unbounded::<()>();
        let (inside, is_inside) = mpsc::channel();
        let drops = Arc::new(AtomicUsize::new(0));
        let (addr, h) = rt.start(Waits(never, inside));
        addr.send(SlowToDrop(drops.clone())).unwrap();
        is_inside.recv().unwrap();
        for _ in 0..3 {
            addr.send(SlowToDrop(drops.clone())).unwrap(); // queued behind the one in `handle`
        }
        assert!(rt.handle().kill(h.id()));
        assert!(
            h.join().err().is_some_and(|e| e.is_killed()),
            "{scheduler:?}"
        );
        // The one in `handle` was dropped by the kill's unwind, the three queued with the
        // mailbox.
        assert_eq!(drops.load(SeqCst), 4, "{scheduler:?}");
        assert!(
            addr.send(SlowToDrop(drops.clone())).is_err(),
            "{scheduler:?}"
        );
    }
}

#[test]
fn many_handlers_blocked_inside_handle_at_once_each_keep_their_stack() {
    // Every one of them holds a carrier at the same time; once released, they hand their
    // carriers back, more than a worker keeps idle (the rest are retired).
    let rt = runtime(1);
    let (release, released) = channel::unbounded::<()>();
    let (blocking, is_blocking) = mpsc::channel();
    let blockers: Vec<_> = (0..12)
        .map(|_| {
            let (addr, h) = rt.start(Blocker(released.clone(), blocking.clone()));
            addr.send(()).unwrap();
            (addr, h)
        })
        .collect();
    for _ in 0..12 {
        is_blocking.recv().unwrap(); // each is inside `handle`, waiting
    }
    for _ in 0..12 {
        release.send(()).unwrap();
    }
    for (addr, h) in blockers {
        within_watchdog("a released blocker ends", move || h.join()).unwrap();
        drop(addr);
    }
    // The worker still runs handler actors on the carriers it kept.
    let (tally, t) = rt.start(Tally(0));
    tally.send(3).unwrap();
    drop(tally);
    assert_eq!(t.join().unwrap().0, 3);
}

/// Yields inside `handle` a few times per message, then records which worker it ended on.
struct YieldsInHandle(usize);

impl Actor for YieldsInHandle {
    type Msg = ();

    fn handle(&mut self, _: (), _ctx: &mut Context<Self>) {
        for _ in 0..4 {
            threadlet::yield_now();
        }
        self.0 += 1;
    }
}

/// The migration opt-in does not apply to handler actors: an activation suspended inside
/// `handle` (here, yielding) stays on its carrier's worker. Before, a migratable handler actor
/// that yielded went to the shared injector, another worker resumed the carrier stack, and the
/// end of the activation left the wrong worker's registry (a debug assertion, or another actor
/// dropped from it).
#[test]
fn a_migratable_handler_actor_still_keeps_its_carrier_while_suspended() {
    let rt = runtime(2);
    let total = within_watchdog("migratable handler yielding in handle", move || {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                // SAFETY: nothing on the actor's stack is tied to its thread.
                let builder = unsafe { threadlet::ActorBuilder::new().migratable() };
                let (addr, h) = builder.start_on(&rt, YieldsInHandle(0)).unwrap();
                for _ in 0..50 {
                    addr.send(()).unwrap();
                }
                h
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().0)
            .sum::<usize>()
    });
    assert_eq!(total, 8 * 50);
}

/// Counts its messages; sends itself the next one until told to stop (so its mailbox is never
/// empty: every batch ends with messages left).
struct SelfFeeder {
    handled: Arc<AtomicUsize>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Actor for SelfFeeder {
    type Msg = ();
    fn handle(&mut self, _: (), ctx: &mut Context<Self>) {
        self.handled.fetch_add(1, SeqCst);
        if self.stop.load(SeqCst) {
            ctx.stop();
        } else {
            let _ = ctx.addr().send(());
        }
    }
}

/// Pinned actors that yield and a handler actor whose batches keep running out share one
/// worker turn by turn, each in the order it became runnable: a yielder gets about as many
/// turns as the handler actor gets batches (not a share of half the turns split among all the
/// yielders, as when the two queues simply alternated).
#[test]
fn pinned_and_free_actors_get_a_turn_each() {
    const YIELDERS: usize = 4;
    const BATCHES: usize = 200;
    let rt = runtime(1);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handled = Arc::new(AtomicUsize::new(0));
    let yielders: Vec<_> = (0..YIELDERS)
        .map(|_| {
            let stop = stop.clone();
            rt.spawn(move || {
                let mut turns = 0usize;
                while !stop.load(SeqCst) {
                    threadlet::yield_now();
                    turns += 1;
                }
                turns
            })
        })
        .collect();
    let (feeder, f) = rt.start(SelfFeeder {
        handled: handled.clone(),
        stop: stop.clone(),
    });
    feeder.send(()).unwrap();
    drop(feeder);
    let h = handled.clone();
    within_watchdog("turns", move || {
        while h.load(SeqCst) < BATCHES * threadlet::BATCH {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    stop.store(true, SeqCst);
    f.join().unwrap();
    let batches = handled.load(SeqCst) / threadlet::BATCH;
    for y in yielders {
        let turns = y.join().unwrap();
        assert!(
            turns >= batches / 2,
            "{turns} turns for a yielder, {batches} batches"
        );
    }
}

enum Pass {
    Peer(Addr<Pass>),
    Ball,
}

/// One of two handler actors that pass a ball back and forth until told to stop (a chain of
/// wakes through the next slot), counting the passes.
struct Passer {
    peer: Option<Addr<Pass>>,
    passes: Arc<std::sync::atomic::AtomicU64>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Actor for Passer {
    type Msg = Pass;
    fn handle(&mut self, msg: Pass, ctx: &mut Context<Self>) {
        match msg {
            Pass::Peer(p) => self.peer = Some(p),
            Pass::Ball if self.stop.load(SeqCst) => {
                self.peer = None; // the peer's last address: it stops too, once idle
                ctx.stop();
            }
            Pass::Ball => {
                self.passes.fetch_add(1, SeqCst);
                if let Some(p) = &self.peer {
                    let _ = p.send(Pass::Ball);
                }
            }
        }
    }
}

/// A pinned actor woken from outside (its wake goes through its worker's inbox) runs within a
/// few passes of a chain that keeps its only worker busy: a chain cut by `MAX_NEXT_RUNS` goes
/// through the queues whenever the inbox holds something, instead of running again at once
/// until the next look at the injector, 61 cuts (about 180 passes) later.
#[test]
fn a_wake_from_outside_does_not_wait_behind_a_chain() {
    use std::sync::atomic::{AtomicBool, AtomicU64};
    // No spare: one could carry the chain on while the pinned waiter waits for its worker.
    let rt = Runtime::builder()
        .workers(1)
        .spare_workers(0)
        .build()
        .unwrap();
    let passes = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let passer = || Passer {
        peer: None,
        passes: passes.clone(),
        stop: stop.clone(),
    };
    let (a, ha) = rt.start(passer());
    let (b, hb) = rt.start(passer());
    a.send(Pass::Peer(b.clone())).unwrap();
    b.send(Pass::Peer(a.clone())).unwrap();
    a.send(Pass::Ball).unwrap();
    drop((a, b));
    // A pinned actor that waits on a channel fed by this (plain) thread, and reports the pass
    // count when it wakes.
    let (tx, rx) = channel::unbounded::<()>();
    let (seen_tx, seen_rx) = mpsc::channel::<u64>();
    let p = passes.clone();
    let waiter = rt.spawn(move || {
        while rx.recv().is_ok() {
            let _ = seen_tx.send(p.load(SeqCst));
        }
    });
    let worst = within_watchdog("wakes beside a chain", move || {
        let mut worst = 0;
        for _ in 0..50 {
            while passes.load(SeqCst) < 1000 {
                std::thread::yield_now(); // the chain is going
            }
            tx.send(()).unwrap();
            // Read once the wake is queued: the passes counted are those after it, never the
            // ones that went by while this thread waited for a CPU before or during the send
            // (on a crowded machine, many). The waiter may even have run before this read:
            // then none went by (saturating).
            let sent_at = passes.load(SeqCst);
            worst = worst.max(seen_rx.recv().unwrap().saturating_sub(sent_at));
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(tx);
        worst
    });
    stop.store(true, SeqCst);
    waiter.join().unwrap();
    ha.join().unwrap();
    hb.join().unwrap();
    assert!(
        worst <= 40,
        "{worst} passes between a send and the wake it caused"
    );
}

/// A log of who ran, in order, shared by the actors of one test.
type RunLog = Arc<Mutex<Vec<&'static str>>>;

/// Each message is a job of `CHECKPOINTS` safe points, logged at its start and end.
struct Jobs(RunLog);

/// Safe points per job of `Jobs`: with a tick budget of `JOB_TICKS`, a job is preempted twice
/// and ends in the middle of its third run.
const CHECKPOINTS: usize = 25;
const JOB_TICKS: u32 = 10;

impl Actor for Jobs {
    type Msg = &'static str;
    fn handle(&mut self, job: &'static str, _ctx: &mut Context<Self>) {
        self.0.lock().unwrap().push(job);
        for _ in 0..CHECKPOINTS {
            threadlet::checkpoint();
        }
        self.0.lock().unwrap().push("end");
    }
}

/// A batch that has been preempted ends at the next message, so that the actor's next
/// messages can run elsewhere: on one worker, a process actor queued behind the batch gets its
/// turn between the two jobs. (Before, the second job ran at once, on the rest of the first
/// one's time slice.) Tick-based preemption makes the interleaving exact.
#[test]
fn a_preempted_batch_ends_at_the_next_message() {
    let rt = Runtime::builder()
        .workers(1)
        .time_slice(Duration::ZERO)
        .preempt_ticks(JOB_TICKS)
        .build()
        .unwrap();
    let log: RunLog = Arc::default();
    let entries = within_watchdog("a preempted batch", {
        let log = log.clone();
        move || {
            let in_rt = log.clone();
            rt.block_on(move || {
                let log = in_rt;
                let (jobs, done) = threadlet::start(Jobs(log.clone()));
                jobs.send("first").unwrap();
                jobs.send("second").unwrap();
                drop(jobs);
                let busy = threadlet::spawn({
                    let log = log.clone();
                    move || {
                        // Runnable throughout: at each of its turns it logs once.
                        while log.lock().unwrap().iter().filter(|e| **e == "end").count() < 2 {
                            log.lock().unwrap().push("other");
                            threadlet::checkpoint();
                        }
                    }
                });
                done.join().unwrap();
                busy.join().unwrap();
            });
            log.lock().unwrap().clone()
        }
    });
    let first_end = entries.iter().position(|e| *e == "end").unwrap();
    let second = entries.iter().position(|e| *e == "second").unwrap();
    assert!(
        entries[first_end..second].contains(&"other"),
        "the second job ran at once after the first: {entries:?}"
    );
}

/// How long `Grind` computes at most, waiting for the flag.
const GRIND_FOR: Duration = Duration::from_secs(3);

/// A handler actor whose one message is a long computation (safe points, no suspension
/// otherwise): it publishes its worker's index plus one in `at`, then computes until `flag`
/// is up, or for `GRIND_FOR`; `ended_by_flag` says which.
struct Grind {
    up: Arc<AtomicUsize>,
    at: Arc<AtomicUsize>,
    flag: Arc<AtomicUsize>,
    ended_by_flag: Arc<std::sync::atomic::AtomicBool>,
}

impl Actor for Grind {
    type Msg = ();
    fn started(&mut self, _ctx: &mut Context<Self>) {
        self.up.fetch_add(1, SeqCst);
    }
    fn handle(&mut self, (): (), _ctx: &mut Context<Self>) {
        self.at
            .store(threadlet::worker_index().unwrap() + 1, SeqCst);
        let until = std::time::Instant::now() + GRIND_FOR;
        while self.flag.load(SeqCst) == 0 && std::time::Instant::now() < until {
            threadlet::checkpoint();
        }
        self.ended_by_flag
            .store(self.flag.load(SeqCst) != 0, SeqCst);
    }
}

/// Raises its flag (to its worker's index plus one) for each message; counts itself in `up`
/// when it starts.
struct Raise {
    up: Arc<AtomicUsize>,
    flag: Arc<AtomicUsize>,
}

impl Actor for Raise {
    type Msg = ();
    fn started(&mut self, _ctx: &mut Context<Self>) {
        self.up.fetch_add(1, SeqCst);
    }
    fn handle(&mut self, (): (), _ctx: &mut Context<Self>) {
        self.flag
            .store(threadlet::worker_index().unwrap() + 1, SeqCst);
    }
}

/// Spins (no safe point) until `value` is not 0, for `GRIND_FOR` twice at most; the value.
fn spin_for(value: &AtomicUsize) -> usize {
    let until = std::time::Instant::now() + GRIND_FOR * 2;
    while value.load(SeqCst) == 0 && std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
    value.load(SeqCst)
}

/// A worker busy with one CPU-bound handler actor still takes a handler actor queued on a
/// busier worker, at its next preemption (`worker.rs`, `next_local_stealable`): CPU-bound work
/// spreads by its number, not only when a worker runs dry. Here the other worker is held by
/// its actor, which spins without a safe point, with a handler actor queued behind it only
/// once the grinder has started elsewhere (so no idle worker's steal takes both); before,
/// that one waited until the grinder's job ended.
#[test]
fn a_preempted_worker_takes_handler_work_queued_elsewhere() {
    let rt = Runtime::builder()
        .workers(2)
        .time_slice(Duration::ZERO)
        .preempt_ticks(1000)
        .build()
        .unwrap();
    let (grinder_at, raised_at, ended_by_flag) =
        within_watchdog("a preempted worker's steal", move || {
            rt.block_on(|| {
                let up = Arc::new(AtomicUsize::new(0));
                let at = Arc::new(AtomicUsize::new(0));
                let flag = Arc::new(AtomicUsize::new(0));
                let ended_by_flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
                let (grind, g) = threadlet::start(Grind {
                    up: up.clone(),
                    at: at.clone(),
                    flag: flag.clone(),
                    ended_by_flag: ended_by_flag.clone(),
                });
                let raiser = |flag| Raise {
                    up: up.clone(),
                    flag,
                };
                let (raise, r) = threadlet::start(raiser(flag.clone()));
                let others: Vec<_> = (0..2)
                    .map(|_| threadlet::start(raiser(Arc::default())))
                    .collect();
                // All four started and idle first, so that each wake below schedules one. An
                // actor counts itself in `up` in `started`, before its first activation parks:
                // until it has parked, a wake only leaves it notified and schedules nothing.
                // Then the actor woken before it is not pushed out of this worker's next slot
                // (which no thief takes) into the deque: the grinder would stay there. So wait
                // for the dump to show all four waiting on their mailboxes.
                let ids = [g.id(), r.id(), others[0].1.id(), others[1].1.id()];
                let handle = threadlet::Handle::current();
                let parked = |id| {
                    handle.dump().actor(id).is_some_and(|a| {
                        matches!(
                            a.state,
                            threadlet::ActorState::Waiting {
                                on: threadlet::Wait::Message,
                                ..
                            }
                        )
                    })
                };
                while up.load(SeqCst) < 4 || !ids.iter().all(|&id| parked(id)) {
                    threadlet::yield_now();
                }
                // Each wake of an idle actor takes this worker's next slot and pushes the one
                // before into its stealable deque, where the idle worker takes it: the
                // grinder first.
                grind.send(()).unwrap();
                others[0].0.send(()).unwrap();
                // Hold this worker, with no safe point, from here on.
                let grinder_at = spin_for(&at);
                // Now the raiser, pushed into the deque by the next wake.
                raise.send(()).unwrap();
                others[1].0.send(()).unwrap();
                let raised_at = spin_for(&flag);
                drop((grind, raise));
                g.join().unwrap();
                r.join().unwrap();
                for (addr, h) in others {
                    drop(addr);
                    h.join().unwrap();
                }
                (grinder_at, raised_at, ended_by_flag.load(SeqCst))
            })
        });
    assert_ne!(grinder_at, 0, "the grinder never started");
    assert_eq!(
        raised_at, grinder_at,
        "the queued handler actor did not run on the grinding worker"
    );
    assert!(
        ended_by_flag,
        "the queued handler actor ran only after the grinder's job ended"
    );
}

/// A kill that comes while `handle` runs with no safe point lands as `handle` returns: the
/// actor takes no further message, under every scheduler. Before, the rest of its batch ran
/// (nine more messages here, one sent after the kill was accepted), and `join` said `Killed`.
#[test]
fn a_handler_actor_killed_inside_handle_takes_no_further_message() {
    struct Gate {
        hold: Hold,
        handled_after: Arc<AtomicUsize>,
    }
    impl Actor for Gate {
        type Msg = u32;
        fn handle(&mut self, n: u32, _: &mut Context<Self>) {
            if n == 0 {
                self.hold.here();
            } else {
                self.handled_after.fetch_add(1, SeqCst);
            }
        }
    }
    within_watchdog("a kill inside handle", || {
        for (case, rt) in every_runtime(&[1, 2]) {
            let (hold, inside, release) = Hold::new();
            let handled_after = Arc::new(AtomicUsize::new(0));
            let (addr, h) = rt.start(Gate {
                hold,
                handled_after: handled_after.clone(),
            });
            for n in 0..9 {
                addr.send(n).unwrap();
            }
            inside.recv().unwrap();
            assert!(addr.kill());
            let _ = addr.send(9); // accepted or handed back; never handled
            release.send(()).unwrap();
            assert!(h.join().err().is_some_and(|e| e.is_killed()), "{case}");
            assert_eq!(handled_after.load(SeqCst), 0, "{case}");
        }
    });
}

/// A queued message whose destructor panics when the actor stops (and its mailbox drops what
/// is left) is a panic of the actor's, as for a process actor whose mailbox drops it: `join`
/// says `Panicked` (before, the panic was swallowed and `join` returned the actor's value,
/// and its monitors heard a normal end).
#[test]
fn a_message_whose_drop_panics_at_the_stop_is_the_actors_panic() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("a message's destructor");
        }
    }
    struct StopAtOnce(Arc<AtomicUsize>);
    impl Actor for StopAtOnce {
        type Msg = Option<Bomb>;
        fn handle(&mut self, msg: Option<Bomb>, ctx: &mut Context<Self>) {
            std::mem::forget(msg);
            ctx.stop(); // the queued `Some(Bomb)` is dropped now
        }
        fn stopped(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (hold, holding) = mpsc::channel::<()>();
    // Holds the one worker until both messages are queued.
    let holder = rt.spawn(move || {
        let _ = holding.recv();
    });
    let stopped = Arc::new(AtomicUsize::new(0));
    let (addr, h) = rt.start(StopAtOnce(stopped.clone()));
    addr.send(None).unwrap();
    addr.send(Some(Bomb)).unwrap();
    drop(hold);
    holder.join().unwrap();
    let err = within_watchdog("a panicking message at the stop", move || h.join().err())
        .expect("the actor's value, not a panic");
    assert_eq!(err.panic_message(), Some("a message's destructor"));
    assert_eq!(stopped.load(SeqCst), 0, "`stopped` ran after the panic");
}

/// The same for a kill that comes while `started` runs: the actor takes none of the messages
/// queued behind it.
#[test]
fn a_handler_actor_killed_inside_started_takes_no_message() {
    struct SlowStart {
        hold: Hold,
        handled: Arc<AtomicUsize>,
    }
    impl Actor for SlowStart {
        type Msg = u32;
        fn started(&mut self, _: &mut Context<Self>) {
            self.hold.here();
        }
        fn handle(&mut self, _: u32, _: &mut Context<Self>) {
            self.handled.fetch_add(1, SeqCst);
        }
    }
    let rt = Runtime::builder().workers(1).build().unwrap();
    let (hold, inside, release) = Hold::new();
    let handled = Arc::new(AtomicUsize::new(0));
    let (addr, h) = rt.start(SlowStart {
        hold,
        handled: handled.clone(),
    });
    for n in 0..5 {
        addr.send(n).unwrap();
    }
    within_watchdog("a kill inside started", move || {
        inside.recv().unwrap();
        assert!(addr.kill());
        release.send(()).unwrap();
        assert!(h.join().err().is_some_and(|e| e.is_killed()));
    });
    assert_eq!(handled.load(SeqCst), 0);
}

/// A handler actor killed inside `handle` that would then end normally (its last address
/// gone, or `ctx.stop()` called) ends killed: `join` says `Killed` and `stopped` does not run,
/// as for a process actor killed the same way (before, it ended as if never killed).
#[test]
fn a_handler_actor_killed_inside_handle_ends_killed_though_its_mailbox_ends() {
    struct Gate {
        hold: Hold,
        stop_after: bool,
        stopped: Arc<AtomicUsize>,
    }
    impl Actor for Gate {
        type Msg = u32;
        fn handle(&mut self, _: u32, ctx: &mut Context<Self>) {
            self.hold.here();
            if self.stop_after {
                ctx.stop();
            }
        }
        fn stopped(&mut self) {
            self.stopped.fetch_add(1, SeqCst);
        }
    }
    within_watchdog("a kill inside handle, then a normal end", || {
        for stop_after in [false, true] {
            for (case, rt) in every_runtime(&[1]) {
                let (hold, inside, release) = Hold::new();
                let stopped = Arc::new(AtomicUsize::new(0));
                let (addr, h) = rt.start(Gate {
                    hold,
                    stop_after,
                    stopped: stopped.clone(),
                });
                addr.send(0).unwrap();
                inside.recv().unwrap();
                assert!(addr.kill());
                drop(addr); // the mailbox ends as `handle` returns
                release.send(()).unwrap();
                let case = format!("{case}, stop_after {stop_after}");
                assert!(h.join().err().is_some_and(|e| e.is_killed()), "{case}");
                assert_eq!(stopped.load(SeqCst), 0, "{case}");
            }
        }
    });
}

/// A runtime of every scheduler for each worker count, with a name for assertion messages.
fn every_runtime(workers: &[usize]) -> Vec<(String, Runtime)> {
    let mut all = Vec::new();
    for &n in workers {
        for (scheduler, rt) in under_each_scheduler(n) {
            all.push((format!("{scheduler:?}, {n} worker(s)"), rt));
        }
    }
    all
}

/// Holds an actor inside one of its callbacks with no safe point (a plain thread's channel):
/// [`Hold::here`] says it is inside, then waits to be released.
struct Hold {
    inside: mpsc::Sender<()>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl Hold {
    /// The hold, where it says it is inside, and how to release it.
    fn new() -> (Hold, mpsc::Receiver<()>, mpsc::Sender<()>) {
        let (inside, is_inside) = mpsc::channel();
        let (release, released) = mpsc::channel();
        let hold = Hold {
            inside,
            release: Mutex::new(released),
        };
        (hold, is_inside, release)
    }

    fn here(&self) {
        self.inside.send(()).unwrap();
        self.release.lock().unwrap().recv().unwrap();
    }
}

/// `Context::close`: the mailbox refuses new sends and the actor drains what it had accepted,
/// then stops, `stopped` running after the last message; senders racing the close from
/// several threads see each message either handled once or handed back, under every scheduler.
#[test]
fn close_then_drain_handles_every_accepted_message() {
    struct Drains {
        handled: Vec<u64>,
        stopped_after: Arc<Mutex<Option<usize>>>,
    }
    impl Actor for Drains {
        type Msg = u64;
        fn handle(&mut self, msg: u64, ctx: &mut Context<Self>) {
            if msg == u64::MAX {
                ctx.close();
            } else {
                self.handled.push(msg);
            }
        }
        fn stopped(&mut self) {
            *self.stopped_after.lock().unwrap() = Some(self.handled.len());
        }
    }
    for scheduler in [
        Scheduler::WorkStealing,
        Scheduler::GlobalQueue,
        Scheduler::Gil,
    ] {
        for round in 0..20 {
            within_watchdog("close, then drain", move || {
                let rt = Runtime::builder()
                    .workers(2)
                    .scheduler(scheduler)
                    .build()
                    .unwrap();
                let stopped_after = Arc::new(Mutex::new(None));
                let (addr, h) = rt.start(Drains {
                    handled: Vec::new(),
                    stopped_after: stopped_after.clone(),
                });
                let senders: Vec<_> = (0..3u64)
                    .map(|t| {
                        let addr = addr.clone();
                        std::thread::spawn(move || {
                            let mut accepted = Vec::new();
                            for i in 0..500u64 {
                                let msg = t * 1_000 + i;
                                if t == 0 && i == 250 {
                                    addr.send(u64::MAX).unwrap(); // accepted: the first close
                                }
                                match addr.send(msg) {
                                    Ok(()) => accepted.push(msg),
                                    Err(e) => assert_eq!(e.into_inner(), msg),
                                }
                            }
                            accepted
                        })
                    })
                    .collect();
                let mut accepted: Vec<u64> = senders
                    .into_iter()
                    .flat_map(|s| s.join().unwrap())
                    .collect();
                let mut handled = h.join().unwrap().handled;
                assert_eq!(*stopped_after.lock().unwrap(), Some(handled.len()));
                accepted.sort_unstable();
                handled.sort_unstable();
                assert_eq!(handled, accepted, "{scheduler:?}, round {round}");
                assert!(addr.send(7).is_err(), "closed for good");
            });
        }
    }
}

/// `Context::close` on the last queued message, with addresses still held: the actor stops
/// once `handle` returns, though no send or address drop wakes it (its batch must look at the
/// mailbox again rather than end parked on a waiter published before the message).
#[test]
fn close_on_the_last_message_stops_the_actor() {
    struct Closes;
    impl Actor for Closes {
        type Msg = ();
        fn handle(&mut self, (): (), ctx: &mut Context<Self>) {
            ctx.close();
        }
    }
    for (scheduler, rt) in under_each_scheduler(1) {
        within_watchdog("close on the last message", move || {
            let (addr, h) = rt.start(Closes);
            addr.send(()).unwrap();
            h.join().unwrap_or_else(|e| panic!("{scheduler:?}: {e}"));
            drop(addr);
        });
    }
}

/// A wake spent inside `handle` without a suspension: the batch published the actor as its
/// mailbox's waiter with the last message, `handle` sends to itself (which takes that waiter
/// and wakes the running actor), then a bare `park` returns at once on that very wake. The
/// batch must look at the mailbox again rather than end parked on a waiter that is gone: the
/// message sent is handled.
#[test]
fn a_wake_spent_by_a_park_inside_handle_does_not_lose_the_message_it_was_for() {
    // The notification the send left is pending: this returns at once.
    self_send_then(|| _ = threadlet_runtime::park());
}

/// A handler actor that, on its message `0`, sends `1` to itself (taking the waiter its batch
/// published with the `0` and waking itself) and then runs `spend`, which consumes that wake
/// without a suspension; `1` must be handled all the same, under every scheduler.
fn self_send_then(spend: fn()) {
    struct SelfSender(std::sync::mpsc::Sender<u32>, fn());
    impl Actor for SelfSender {
        type Msg = u32;
        fn handle(&mut self, n: u32, ctx: &mut Context<Self>) {
            if n == 0 {
                ctx.addr().send(1).unwrap();
                (self.1)();
            } else {
                self.0.send(n).unwrap();
            }
        }
    }
    for (scheduler, rt) in under_each_scheduler(1) {
        within_watchdog("the message sent to itself", move || {
            let (tx, rx) = std::sync::mpsc::channel();
            let (addr, h) = rt.start(SelfSender(tx, spend));
            addr.send(0).unwrap();
            assert_eq!(
                rx.recv_timeout(Duration::from_secs(20)),
                Ok(1),
                "{scheduler:?}"
            );
            drop(addr);
            h.join().unwrap();
        });
    }
}

/// A wake spent on resuming `handle` from a suspension: the batch published the actor as its
/// mailbox's waiter with the last message, `handle` waits on a channel, and a message sent
/// meanwhile takes that waiter and wakes the actor inside its wait (a spurious wake there).
/// Once `handle` returns, the batch must look at the mailbox again: the message is handled.
#[test]
fn a_message_sent_while_handle_is_suspended_is_handled_after_it() {
    struct Waits {
        gate: threadlet::channel::Receiver<()>,
        waiting: std::sync::mpsc::Sender<()>,
        handled: std::sync::mpsc::Sender<u32>,
    }
    impl Actor for Waits {
        type Msg = u32;
        fn handle(&mut self, n: u32, _: &mut Context<Self>) {
            if n == 0 {
                self.waiting.send(()).unwrap();
                self.gate.recv().unwrap();
            }
            self.handled.send(n).unwrap();
        }
    }
    for (scheduler, rt) in under_each_scheduler(1) {
        within_watchdog("the message sent during the wait", move || {
            let (gate_tx, gate) = threadlet::channel::unbounded();
            let (waiting_tx, waiting) = std::sync::mpsc::channel();
            let (handled_tx, handled) = std::sync::mpsc::channel();
            let (addr, h) = rt.start(Waits {
                gate,
                waiting: waiting_tx,
                handled: handled_tx,
            });
            addr.send(0).unwrap();
            waiting.recv().unwrap();
            addr.send(1).unwrap();
            // Let the wake land inside the wait before the gate opens.
            std::thread::sleep(Duration::from_millis(20));
            gate_tx.send(()).unwrap();
            let got: Vec<u32> = (0..2)
                .map(|_| handled.recv_timeout(Duration::from_secs(20)).unwrap_or(99))
                .collect();
            assert_eq!(got, [0, 1], "{scheduler:?}");
            drop(addr);
            h.join().unwrap();
        });
    }
}

/// `threadlet_runtime::activation_may_park` is public: called from `handle` after a send to
/// the actor itself, it consumes the wake that send left. The batch's own call must still see
/// that a wake was spent, and look at the mailbox again: the message is handled.
#[test]
fn a_wake_spent_by_a_users_activation_may_park_does_not_lose_the_message() {
    self_send_then(|| assert!(!threadlet_runtime::activation_may_park()));
}
