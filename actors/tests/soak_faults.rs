//! Fault-injection soak: many rounds in which actors panic in their bodies, in the destructors
//! of their results, panic payloads and messages; timers fire (`send_after`, `sleep`) and get
//! cancelled (`recv_timeout` that gets its message first); and each round's runtime is dropped
//! mid-flight, sometimes from inside one of its own actors, while plain threads keep sending.
//!
//! Messages go to actors' mailboxes (from actors and from plain threads, directly and through
//! `send_after`) and through a bounded channel shared by a few consumers (whose senders and
//! receivers park, and get unwound while parked when the runtime drops).
//!
//! The invariant is message conservation: every message that anyone tried to send was
//! delivered (received by an actor), handed back to its sender, or dropped with the end of
//! everything that could receive it. Each message counts itself exactly once, where it is
//! received or handed back, or in its own destructor. A destructor tells a legitimate drop from
//! a lost message: it is legitimate while a panic unwinds (an actor ending by panic or by
//! shutdown drops its mailbox, a cancelled sender drops its value), or once no receiver of its
//! destination is alive any more (each consumer counts itself live for as long as it runs, and
//! stops counting before its mailbox or receiver drops). A message dropped while a receiver of
//! its destination still runs, with no unwind under way, is counted as *lost*, and the test
//! requires none. The process must not abort (a runtime thread that died would abort it, see
//! `fault::AbortOnUnwind`), and every join must return.
//!
//! `#[ignore]`d: run it in release, with a time budget in seconds (it runs at least until 1M
//! messages have been accounted for, and no longer than three budgets):
//!
//! ```text
//! THREADLET_SOAK_SECS=60 cargo test --release -p threadlet --test soak_faults -- --ignored
//! ```
//!
//! Each round's runtime has 1 or 2 workers, sized for a 2-core machine; on a larger one,
//! `THREADLET_SOAK_WORKERS=16` draws each round's worker count from 1 to 16 instead.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use threadlet::channel::{self, Receiver};
use threadlet::{Addr, JoinHandle, Mailbox, Runtime, RuntimeExt, Scheduler};

const MIN_MESSAGES: u64 = 1_000_000;
const ACTORS: usize = 64;
const PLAIN_PRODUCERS: usize = 3;
const PLAIN_SENDS: u64 = 20_000;
const ACTOR_PRODUCERS: usize = 8;
const ACTOR_SENDS: u64 = 4_000;
const CHANNEL_CONSUMERS: usize = 4;

#[derive(Default)]
struct Counters {
    attempts: AtomicU64,
    delivered: AtomicU64,
    handed_back: AtomicU64,
    dropped: AtomicU64,
    /// Dropped undelivered while a receiver of its destination still ran: must stay 0.
    lost: AtomicU64,
    /// Panics injected (bodies, results, payloads, messages), for the report.
    panics: AtomicU64,
}

impl Counters {
    fn accounted(&self) -> u64 {
        self.delivered.load(SeqCst)
            + self.handed_back.load(SeqCst)
            + self.dropped.load(SeqCst)
            + self.lost.load(SeqCst)
    }
}

/// Where a message goes: a mailbox (one consumer) or the shared channel (several); `live`
/// counts the consumers running now.
#[derive(Default)]
struct Dest {
    live: AtomicU64,
}

/// A consumer counts itself live while it runs. Created first in the consumer's body, so it is
/// dropped before the mailbox or receiver that the body was given (locals drop before
/// parameters), on a normal return and on an unwind alike.
struct Live(Arc<Dest>);
impl Live {
    fn new(dest: &Arc<Dest>) -> Live {
        dest.live.fetch_add(1, SeqCst);
        Live(dest.clone())
    }
}
impl Drop for Live {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, SeqCst);
    }
}

/// A message that accounts for itself; a `bomb` panics when dropped (unless a panic is already
/// unwinding, where a second panic would abort the process, as Rust always does).
struct Msg {
    counters: Arc<Counters>,
    dest: Arc<Dest>,
    accounted: bool,
    bomb: bool,
    roll: u64,
}

impl Msg {
    fn new(counters: &Arc<Counters>, dest: &Arc<Dest>, roll: u64) -> Msg {
        counters.attempts.fetch_add(1, SeqCst);
        Msg {
            counters: counters.clone(),
            dest: dest.clone(),
            accounted: false,
            bomb: roll.is_multiple_of(97),
            roll,
        }
    }

    /// Delivered: a received message is defused, so its bomb goes off only when it is dropped
    /// undelivered (with an ended actor's mailbox, an unfired timer, a handed-back value).
    fn receive(mut self) -> u64 {
        self.accounted = true;
        self.bomb = false;
        self.counters.delivered.fetch_add(1, SeqCst);
        self.roll
    }
}

impl Drop for Msg {
    fn drop(&mut self) {
        if !self.accounted {
            if thread::panicking() || self.dest.live.load(SeqCst) == 0 {
                self.counters.dropped.fetch_add(1, SeqCst);
            } else {
                self.counters.lost.fetch_add(1, SeqCst);
            }
        }
        if self.bomb && !thread::panicking() {
            self.counters.panics.fetch_add(1, SeqCst);
            panic!("injected: a message destructor panics");
        }
    }
}

/// Sends to a mailbox, accounting for a message handed back.
fn send(addr: &Addr<Msg>, msg: Msg) {
    if let Err(e) = addr.send(msg) {
        defuse_handed_back(e.into_inner());
    }
}

/// A message handed back to its sender: counted, and defused (we drop it ourselves).
fn defuse_handed_back(mut m: Msg) {
    m.accounted = true;
    m.bomb = false;
    m.counters.handed_back.fetch_add(1, SeqCst);
}

/// Panics when dropped (as a result or a payload).
struct Bomb(Arc<Counters>);
impl Drop for Bomb {
    fn drop(&mut self) {
        if !thread::panicking() {
            self.0.panics.fetch_add(1, SeqCst);
            panic!("injected: a result or payload destructor panics");
        }
    }
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// What a consumer does with a message it received: mostly nothing; now and then it panics
/// (with a plain message or a bomb payload), returns a bomb, or sleeps (a timer that fires).
/// `Some` ends the consumer with that result.
fn handle(m: Msg, counters: &Arc<Counters>) -> Option<Option<Bomb>> {
    match m.receive() % 20_000 {
        0 => {
            counters.panics.fetch_add(1, SeqCst);
            panic!("injected: a body panics");
        }
        1 => {
            counters.panics.fetch_add(1, SeqCst);
            std::panic::panic_any(Bomb(counters.clone()));
        }
        2 => Some(Some(Bomb(counters.clone()))),
        3..=20 => {
            threadlet::sleep(Duration::from_micros(300));
            None
        }
        _ => None,
    }
}

/// A mailbox consumer. It waits with a timeout, so its timers fire (or are cancelled when a
/// message comes first).
fn consumer(mb: Mailbox<Msg>, dest: Arc<Dest>, counters: Arc<Counters>) -> Option<Bomb> {
    let _live = Live::new(&dest);
    loop {
        let m = match mb.recv_timeout(Duration::from_micros(200)) {
            Ok(m) => m,
            Err(threadlet::channel::RecvTimeoutError::Timeout) => continue,
            Err(_) => return None,
        };
        if let Some(end) = handle(m, &counters) {
            return end;
        }
    }
}

/// A consumer of the shared bounded channel: parks in `recv` (and is unwound there when the
/// runtime drops, maybe with a value already handed to it).
fn channel_consumer(rx: Receiver<Msg>, dest: Arc<Dest>, counters: Arc<Counters>) -> Option<Bomb> {
    let _live = Live::new(&dest);
    while let Ok(m) = rx.recv() {
        if let Some(end) = handle(m, &counters) {
            return end;
        }
    }
    None
}

struct Round {
    seed: u64,
    workers: usize,
    scheduler: Scheduler,
    drop_inside: bool,
}

fn run_round(round: &Round, counters: &Arc<Counters>) {
    let rt = Arc::new(
        Runtime::builder()
            .workers(round.workers)
            .scheduler(round.scheduler)
            .build()
            .unwrap(),
    );
    let mut addrs = Vec::new();
    let mut kept: Vec<JoinHandle<Option<Bomb>>> = Vec::new();
    for i in 0..ACTORS {
        let (c, dest) = (counters.clone(), Arc::new(Dest::default()));
        let d = dest.clone();
        let (addr, h) = rt.spawn_actor(move |mb: Mailbox<Msg>| consumer(mb, d, c));
        addrs.push((addr, dest));
        // Half are detached: their results and payloads are dropped by the runtime.
        if i % 2 == 0 {
            kept.push(h);
        }
    }
    // The shared channel: small, so that senders park too.
    let (tx, rx) = channel::bounded::<Msg>(4);
    let chan_dest = Arc::new(Dest::default());
    for _ in 0..CHANNEL_CONSUMERS {
        let (rx, d, c) = (rx.clone(), chan_dest.clone(), counters.clone());
        drop(rt.spawn(move || channel_consumer(rx, d, c)));
    }
    drop(rx);
    // Actor producers: send to mailboxes and the channel, and schedule delayed sends (timers
    // that fire, or are dropped with the runtime).
    for p in 0..ACTOR_PRODUCERS {
        let (addrs, c, tx, chan_dest) = (
            addrs.clone(),
            counters.clone(),
            tx.clone(),
            chan_dest.clone(),
        );
        let mut rng = round.seed ^ ((p as u64 + 1) * 0x9E37_79B9);
        drop(rt.spawn(move || {
            for _ in 0..ACTOR_SENDS {
                let r = xorshift(&mut rng);
                let (to, dest) = &addrs[r as usize % addrs.len()];
                match r % 16 {
                    0 => {
                        drop(to.send_after(Duration::from_micros(r % 2_000), Msg::new(&c, dest, r)))
                    }
                    1..=3 => {
                        if let Err(e) = tx.send(Msg::new(&c, &chan_dest, r)) {
                            defuse_handed_back(e.into_inner());
                        }
                    }
                    _ => send(to, Msg::new(&c, dest, r)),
                }
            }
        }));
    }
    // Plain-thread producers keep sending through and after the runtime's drop.
    let halfway = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..PLAIN_PRODUCERS)
        .map(|p| {
            let (addrs, c, halfway) = (addrs.clone(), counters.clone(), halfway.clone());
            let mut rng = round.seed ^ ((p as u64 + 101) * 0x2545_F491);
            thread::spawn(move || {
                for i in 0..PLAIN_SENDS {
                    let r = xorshift(&mut rng);
                    let (to, dest) = &addrs[r as usize % addrs.len()];
                    send(to, Msg::new(&c, dest, r));
                    if i == PLAIN_SENDS / 2 {
                        halfway.store(true, SeqCst);
                    }
                }
            })
        })
        .collect();
    drop((addrs, tx));
    while !halfway.load(SeqCst) {
        thread::yield_now();
    }
    // The runtime still serves while actors panic around it.
    assert_eq!(rt.block_on(|| 6 * 7), 42);
    if round.drop_inside {
        // The last handle goes away inside one of its own actors.
        let inner = rt.clone();
        let (go, wait) = mpsc::channel::<()>();
        let dropper = rt.spawn(move || {
            wait.recv().unwrap();
            drop(inner);
        });
        drop(rt);
        go.send(()).unwrap();
        dropper.join().unwrap();
    } else {
        drop(rt);
    }
    for p in producers {
        p.join().expect("a producer thread died");
    }
    for h in kept {
        match h.join() {
            Ok(Some(bomb)) => std::mem::forget(bomb), // defused: we know it panics
            Ok(None) => {}
            Err(e) if e.is_panic() => std::mem::forget(e), // its payload may be a bomb
            Err(e) => assert!(e.is_cancelled(), "{e}"),
        }
    }
}

#[test]
#[ignore = "soak: run in release with THREADLET_SOAK_SECS (CI does)"]
fn fault_injection_conserves_every_message() {
    let budget = Duration::from_secs(
        std::env::var("THREADLET_SOAK_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(30),
    );
    let max_workers: u64 = std::env::var("THREADLET_SOAK_WORKERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(2);
    // The injected panics are expected: keep the default hook's report for any other one.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str));
        let injected = msg.is_some_and(|m| m.starts_with("injected:"))
            || info.payload().downcast_ref::<Bomb>().is_some();
        if !injected {
            default_hook(info);
        }
    }));
    let counters = Arc::new(Counters::default());
    let start = Instant::now();
    let schedulers = [
        Scheduler::WorkStealing,
        Scheduler::GlobalQueue,
        Scheduler::Gil,
    ];
    let mut rounds = 0u64;
    let mut seed = 0x5EED_u64;
    while counters.attempts.load(SeqCst) < MIN_MESSAGES || start.elapsed() < budget {
        assert!(
            start.elapsed() < 3 * budget + Duration::from_secs(60),
            "too slow: {} messages after {:?}",
            counters.attempts.load(SeqCst),
            start.elapsed()
        );
        let r = xorshift(&mut seed);
        let round = Round {
            seed: r,
            workers: 1 + (r % max_workers) as usize,
            scheduler: schedulers[(r / max_workers % 3) as usize],
            drop_inside: r.is_multiple_of(5),
        };
        run_round(&round, &counters);
        // A handed-off shutdown finishes on a thread of its own: wait for it to account.
        let deadline = Instant::now() + Duration::from_secs(30);
        while counters.accounted() != counters.attempts.load(SeqCst) {
            assert!(
                Instant::now() < deadline,
                "round {rounds}: {} messages tried, {} delivered + {} handed back + {} dropped \
                 + {} lost",
                counters.attempts.load(SeqCst),
                counters.delivered.load(SeqCst),
                counters.handed_back.load(SeqCst),
                counters.dropped.load(SeqCst),
                counters.lost.load(SeqCst)
            );
            thread::sleep(Duration::from_millis(1));
        }
        rounds += 1;
    }
    let attempts = counters.attempts.load(SeqCst);
    assert!(attempts >= MIN_MESSAGES);
    assert_eq!(counters.accounted(), attempts);
    assert_eq!(
        counters.lost.load(SeqCst),
        0,
        "messages dropped while a receiver of their destination still ran"
    );
    println!(
        "soak: {rounds} rounds in {:.1?}: {attempts} messages: {} delivered, {} handed back, \
         {} dropped with ended receivers, 0 lost; {} panics injected and contained",
        start.elapsed(),
        counters.delivered.load(SeqCst),
        counters.handed_back.load(SeqCst),
        counters.dropped.load(SeqCst),
        counters.panics.load(SeqCst)
    );
}
