//! Worker handoff: an actor that blocks its worker without `threadlet::blocking` (here
//! `std::thread::sleep`) gets a spare worker brought in, which runs the actors that may move
//! (handler actors between messages, actors not started yet) until the stuck worker is back.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::within_watchdog;
use threadlet::{Actor, Addr, Context, Runtime, RuntimeExt};

enum Msg {
    Next(Addr<Msg>),
    /// A token with this many hops left.
    Token(u32),
}

/// One member of a ring of handler actors: forwards every token to the next while it has hops
/// left.
struct Member {
    next: Option<Addr<Msg>>,
    passed: Arc<AtomicU64>,
    /// Tokens passed on a spare (a worker index at or after the runtime's worker count).
    on_spare: Arc<AtomicU64>,
    workers: usize,
    stop: Arc<AtomicBool>,
}

impl Actor for Member {
    type Msg = Msg;
    fn handle(&mut self, msg: Msg, ctx: &mut Context<Self>) {
        match msg {
            Msg::Next(a) => self.next = Some(a),
            Msg::Token(hops) => {
                self.passed.fetch_add(1, Ordering::Relaxed);
                if threadlet::worker_index().is_some_and(|w| w >= self.workers) {
                    self.on_spare.fetch_add(1, Ordering::Relaxed);
                }
                if self.stop.load(Ordering::Relaxed) {
                    ctx.stop();
                } else if let Some(n) = &self.next
                    && hops > 0
                {
                    let _ = n.send(Msg::Token(hops - 1));
                }
            }
        }
    }
}

/// Runs a ring of 1,000 handler actors on one worker, fed with tokens (100 hops each) by a plain
/// thread, one every millisecond, as a server's actors are fed by their clients; then blocks
/// that worker for a second with `std::thread::sleep` and counts the tokens passed (and how
/// many on a spare) in 500 ms of that second.
///
/// What a spare can reach is what may move and sits where other threads can take it: actors
/// woken from outside (the injector), those in the stuck worker's stealable deque and free
/// FIFO. Only the one actor in its next slot, if any, waits for it.
///
/// With `feed` false, one token (with hops enough for the whole test) goes round a closed
/// ring instead: nothing comes from outside, so only what the spare takes from the stuck
/// worker's own queues can move.
fn tokens_passed_while_the_worker_is_stuck(spares: usize, feed: bool) -> (u64, u64) {
    const RING: usize = 1000;
    let rt = Runtime::builder()
        .workers(1)
        .spare_workers(spares)
        .build()
        .unwrap();
    let passed = Arc::new(AtomicU64::new(0));
    let on_spare = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let ring: Vec<Addr<Msg>> = (0..RING)
        .map(|_| {
            rt.start(Member {
                next: None,
                passed: passed.clone(),
                on_spare: on_spare.clone(),
                workers: 1,
                stop: stop.clone(),
            })
            .0
        })
        .collect();
    for (i, a) in ring.iter().enumerate() {
        a.send(Msg::Next(ring[(i + 1) % RING].clone())).unwrap();
    }
    let feeder = {
        let (ring, stop) = (ring.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) && feed {
                let _ = ring[i % RING].send(Msg::Token(100));
                i += 7;
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    if !feed {
        ring[0].send(Msg::Token(u32::MAX)).unwrap();
    }
    while passed.load(Ordering::Relaxed) < 5_000 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let sleeper = stick(&rt, 1000); // blocks the worker: no `blocking`
    // The spare comes after two time slices (20 ms): leave it that, then count.
    std::thread::sleep(Duration::from_millis(100));
    let (before, spare_before) = (
        passed.load(Ordering::Relaxed),
        on_spare.load(Ordering::Relaxed),
    );
    std::thread::sleep(Duration::from_millis(500));
    let during = passed.load(Ordering::Relaxed) - before;
    let on_spare_during = on_spare.load(Ordering::Relaxed) - spare_before;
    sleeper.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    drop(ring);
    drop(rt); // the members still holding each other's addresses are dropped here
    (during, on_spare_during)
}

#[test]
fn handler_actors_keep_going_on_a_spare_while_the_only_worker_is_stuck() {
    let (during, on_spare) = within_watchdog("handoff", || {
        tokens_passed_while_the_worker_is_stuck(1, true)
    });
    println!(
        "tokens passed while the worker was stuck (500 ms): {during}, on the spare: {on_spare}"
    );
    assert!(during > 1000, "only {during} tokens moved");
    assert!(on_spare > 0, "no token moved on the spare");
}

/// The control: without spares, nothing moves while the only worker is stuck. (So the test
/// above can fail.)
#[test]
fn without_spares_nothing_moves_while_the_only_worker_is_stuck() {
    let (during, _) = within_watchdog("no handoff", || {
        tokens_passed_while_the_worker_is_stuck(0, true)
    });
    assert_eq!(during, 0);
}

/// A closed ring: the token's holder, between two runs, waits for its turn in the stuck
/// worker's free FIFO (a chain of wakes through the next slot is cut after a few runs, and the
/// blocking actor, spawned from outside, starts only from an empty next slot), where the spare
/// takes it; from there the chain runs on the spare.
#[test]
fn a_closed_ring_keeps_going_on_a_spare() {
    let (during, on_spare) = within_watchdog("closed ring", || {
        tokens_passed_while_the_worker_is_stuck(1, false)
    });
    println!("hops while the worker was stuck (500 ms): {during}, on the spare: {on_spare}");
    assert!(
        during > 1000 && on_spare > 1000,
        "{during} hops, {on_spare} on the spare"
    );
}

/// Its control: the closed ring stands still without a spare.
#[test]
fn without_spares_a_closed_ring_stands_still() {
    let (during, _) = within_watchdog("closed ring, no spare", || {
        tokens_passed_while_the_worker_is_stuck(0, false)
    });
    assert_eq!(during, 0);
}

/// An actor spawned while the worker is stuck starts on the spare (it had not started, so it
/// may), and stays there: it is pinned to the spare, which keeps running it after the stuck
/// worker is back, and retires only once it has ended.
#[test]
fn an_actor_started_on_a_spare_stays_on_it_until_it_ends() {
    within_watchdog("pinned to a spare", || {
        let rt = Runtime::builder()
            .workers(1)
            .spare_workers(1)
            .build()
            .unwrap();
        let sleeper = stick(&rt, 300);
        std::thread::sleep(Duration::from_millis(50));
        let (tx, rx) = threadlet::channel::unbounded::<u32>();
        let h = rt.spawn(move || {
            let first = threadlet::worker_index();
            let mut seen = vec![first];
            // Waits across the stuck worker's return: it resumes where it started.
            while let Ok(n) = rx.recv() {
                seen.push(threadlet::worker_index());
                if n == 0 {
                    break;
                }
            }
            seen
        });
        tx.send(1).unwrap();
        sleeper.join().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        tx.send(0).unwrap();
        let seen = h.join().unwrap();
        assert!(seen.iter().all(|w| *w == Some(1)), "{seen:?}");
        // The runtime goes on: the worker is back, and new work runs.
        assert_eq!(rt.block_on(|| 5), 5);
    });
}

/// The last reference to the runtime dropped by an actor running on a spare: the shutdown goes
/// to a thread of its own, as when a worker drops it, instead of joining the spare's own thread.
#[test]
fn dropping_the_runtime_on_a_spare_does_not_join_itself() {
    within_watchdog("drop on a spare", || {
        let rt = Arc::new(
            Runtime::builder()
                .workers(1)
                .spare_workers(1)
                .build()
                .unwrap(),
        );
        let sleeper = stick(&rt, 200);
        std::thread::sleep(Duration::from_millis(50));
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let last = rt.clone();
        let h = rt.spawn(move || {
            go_rx.recv().unwrap(); // main has dropped its reference
            let on = threadlet::worker_index();
            drop(last);
            on
        });
        drop(rt);
        go_tx.send(()).unwrap();
        assert_eq!(h.join().unwrap(), Some(1));
        let _ = sleeper.join();
    });
}

/// Blocks the only worker of `rt` in `std::thread::sleep` for `ms`; returns once it runs.
fn stick(rt: &Runtime, ms: u64) -> threadlet::JoinHandle<()> {
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let h = rt.spawn(move || {
        started_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(ms));
    });
    started_rx.recv().unwrap();
    h
}

/// The same spare comes back for a second stuck spell, though an actor it started in the first
/// still lives, pinned to it.
#[test]
fn a_spare_with_a_pinned_actor_can_cover_again() {
    within_watchdog("second spell", || {
        let rt = Runtime::builder()
            .workers(1)
            .spare_workers(1)
            .build()
            .unwrap();
        let first = stick(&rt, 200);
        std::thread::sleep(Duration::from_millis(60));
        let (tx, rx) = threadlet::channel::unbounded::<()>();
        let resident = rt.spawn(move || {
            let on = threadlet::worker_index();
            let _ = rx.recv(); // lives on, pinned to where it started
            on
        });
        first.join().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let second = stick(&rt, 200);
        std::thread::sleep(Duration::from_millis(60));
        let probe = rt.spawn(threadlet::worker_index);
        assert_eq!(
            probe.join().unwrap(),
            Some(1),
            "no spare in the second spell"
        );
        second.join().unwrap();
        drop(tx);
        assert_eq!(resident.join().unwrap(), Some(1));
    });
}

/// A worker busy computing (on the CPU, no safe point) gets no spare: one more thread on the
/// same cores would not help it. What waits, waits for it.
#[test]
fn a_busy_worker_gets_no_spare() {
    within_watchdog("busy worker", || {
        let rt = Runtime::builder()
            .workers(1)
            .spare_workers(1)
            .build()
            .unwrap();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let busy = rt.spawn(move || {
            started_tx.send(()).unwrap();
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_millis(300) {
                std::hint::spin_loop();
            }
        });
        started_rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(60));
        let probe = rt.spawn(threadlet::worker_index);
        assert_eq!(probe.join().unwrap(), Some(0));
        busy.join().unwrap();
    });
}

/// Counts its messages, and those it handled on a spare.
struct Tally {
    handled: Arc<AtomicU64>,
    on_spare: Arc<AtomicU64>,
}

impl Actor for Tally {
    type Msg = u32;
    fn handle(&mut self, _: u32, _: &mut Context<Self>) {
        self.handled.fetch_add(1, Ordering::Relaxed);
        if threadlet::worker_index().is_some_and(|w| w >= 1) {
            self.on_spare.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A handler actor with a long mailbox runs it a batch at a time; between batches it waits for
/// its turn in its worker's free FIFO. The actor that then blocks the only worker (here the one
/// that filled the mailbox, in `std::thread::sleep`) leaves it there, where a spare can take it.
/// Returns the messages handled while the worker was stuck, and how many of all on a spare.
fn handled_while_stuck_after_a_batch(spares: usize) -> (u64, u64) {
    const MESSAGES: u32 = 200_000;
    let rt = Runtime::builder()
        .workers(1)
        .spare_workers(spares)
        .build()
        .unwrap();
    let handled = Arc::new(AtomicU64::new(0));
    let on_spare = Arc::new(AtomicU64::new(0));
    let (h, o) = (handled.clone(), on_spare.clone());
    let during = rt.block_on(move || {
        let (tally, _) = threadlet::start(Tally {
            handled: h.clone(),
            on_spare: o,
        });
        for i in 0..MESSAGES {
            tally.send(i).unwrap();
        }
        // Lets the tally run a few batches: when this actor runs again, the tally is between
        // two batches (far from done), waiting for its turn.
        threadlet::sleep(Duration::from_millis(1));
        let before = h.load(Ordering::Relaxed);
        assert!(
            before < u64::from(MESSAGES),
            "the tally ran out of messages"
        );
        std::thread::sleep(Duration::from_millis(500)); // blocks the worker: no `blocking`
        h.load(Ordering::Relaxed) - before
    });
    (during, on_spare.load(Ordering::Relaxed))
}

#[test]
fn a_handler_actor_between_batches_moves_to_the_spare() {
    let (during, on_spare) =
        within_watchdog("between batches", || handled_while_stuck_after_a_batch(1));
    assert!(
        during > 0 && on_spare > 0,
        "{during} handled, {on_spare} on the spare"
    );
}

/// The control: without a spare, the tally waits for its worker.
#[test]
fn without_a_spare_a_handler_actor_between_batches_waits() {
    let (during, on_spare) = within_watchdog("between batches, no spare", || {
        handled_while_stuck_after_a_batch(0)
    });
    assert_eq!((during, on_spare), (0, 0));
}
