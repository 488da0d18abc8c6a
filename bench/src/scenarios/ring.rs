//! ring: the thread-ring benchmark. `actors` actors stand in a ring, each knowing the next. The
//! driver gives actor 0 a token worth `hops`; an actor that gets a token worth `t > 0` passes
//! `t - 1` to the next, and the one that gets 0 tells the driver, which sends every actor exit
//! and joins them all.
//!
//! `total_s` = setup (spawning the ring) + hops (first token until every actor is joined);
//! `per_op_ns` is relay time (`relay_s`) per hop. Checked: exactly `hops` passes were made and the token
//! stopped at actor `hops % actors`.

use std::sync::{Arc, OnceLock, mpsc};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use threadlet::{Actor, Addr, Context, Mailbox, channel};

use super::Figure;
use crate::Opts;
use crate::measure::{Sample, Spec, check, measure};
use crate::output::Out;
use crate::plot::{Field, quantity};
use crate::runtimes::{self, ActorKind, Rt, RtConfig};

/// ring's options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// Actors in the ring.
    #[arg(long, default_value_t = 503, value_parser = clap::value_parser!(u64).range(1..))]
    pub actors: u64,
    /// Times the token is passed on.
    #[arg(long, default_value_t = 10_000_000)]
    pub hops: u64,
    /// Which kind of threadlet actor makes up the ring.
    #[arg(long, value_enum, default_value_t = ActorKind::Process)]
    pub actor: ActorKind,
}

/// Whether ring has a version for `rt`.
pub fn supports(rt: Rt) -> bool {
    rt != Rt::Sequential
}

/// Every runtime and worker count of `opts`.
pub fn main(out: &mut Out, opts: &Opts, p: &Params) -> Result<(), String> {
    let supported = |rt: Rt| supports(rt) && p.actor.runs_on(rt);
    let figure = figure(p);
    super::for_each(out, opts, "ring", supported, figure, |out, rt, w| {
        let mut params = vec![("actors", json!(p.actors)), ("hops", json!(p.hops))];
        if rt.scheduler().is_some() {
            params.push(("actor", json!(p.actor.name())));
        }
        let spec = Spec {
            scenario: "ring",
            runtime: rt,
            workers: w,
            migrate: opts.migrate,
            params,
        };
        measure(out, spec, opts.repeat, || run(rt, w, opts.migrate, p))
    })
}

/// The plot against workers: time per hop.
fn figure(p: &Params) -> Figure {
    Figure {
        title: format!(
            "ring: {}, {}",
            quantity(p.actors, &format!("{} actor", p.actor.name())),
            quantity(p.hops, "hop")
        ),
        y: Field::per_op_ns("ns per hop"),
    }
}

/// What a ring member gets.
enum Msg {
    Token(u64),
    Exit,
}

/// What one run found.
struct Outcome {
    setup: Duration,
    hops: Duration,
    /// Passes made, summed over the actors.
    passed: u64,
    /// Who got the token worth 0.
    winner: usize,
    /// How many claimed it.
    winners: usize,
}

/// One run on `rt`.
pub fn run(rt: Rt, workers: Option<usize>, migrate: bool, p: &Params) -> Result<Sample, String> {
    let (n, hops) = (p.actors as usize, p.hops);
    let mut stats = None;
    let o = match rt {
        Rt::WorkStealing | Rt::GlobalQueue | Rt::Gil => {
            let sched = rt.scheduler().expect("a threadlet runtime");
            let runtime = runtimes::threadlet(sched, super::workers(workers), RtConfig::default());
            let actor = p.actor;
            let o = runtime.block_on(move || actor_ring(n, hops, migrate, actor));
            stats = Some(runtimes::stats_json(&runtime.stats()));
            o
        }
        Rt::OsThreads => thread_ring(n, hops)?,
        Rt::Tokio => {
            let runtime = runtimes::tokio(super::workers(workers));
            runtime
                .block_on(runtime.spawn(task_ring(n, hops)))
                .expect("the tokio ring driver does not panic")
        }
        Rt::Sequential => unreachable!("ring has no sequential version"),
    };
    check(o.passed == hops, || {
        format!("the token was passed {} times, not {hops}", o.passed)
    });
    check(o.winners == 1, || {
        format!("{} actors got the last token", o.winners)
    });
    let want = (hops % n as u64) as usize;
    check(o.winner == want, || {
        format!("the token stopped at actor {}, not {want}", o.winner)
    });
    let s = Sample::new(o.setup + o.hops)
        .per_op(hops, o.hops)
        .with_secs("setup_s", o.setup)
        .with_secs("relay_s", o.hops);
    Ok(match stats {
        Some(st) => s.with("stats", st),
        None => s,
    })
}

/// What a ring member returns: passes made, and whether it got the last token.
type Member = (u64, bool);

/// A threadlet ring member, of either kind: passes the token on, once the ring is formed.
struct RingMember {
    i: usize,
    n: usize,
    ring: Arc<OnceLock<Vec<Addr<Msg>>>>,
    next: Option<Addr<Msg>>,
    done: channel::Sender<usize>,
    passed: u64,
    won: bool,
}

impl RingMember {
    /// Handles one message; `false` on `Exit`.
    fn take(&mut self, m: Msg) -> bool {
        let (ring, i, n) = (&self.ring, self.i, self.n);
        // The ring is formed before the first token, not necessarily before we start.
        let next = self.next.get_or_insert_with(|| {
            ring.get().expect("the ring is formed first")[(i + 1) % n].clone()
        });
        match m {
            Msg::Token(0) => {
                self.won = true;
                self.done.send(self.i).expect("the driver waits");
            }
            Msg::Token(t) => {
                next.send(Msg::Token(t - 1))
                    .expect("ring members stay until exit");
                self.passed += 1;
            }
            Msg::Exit => return false,
        }
        true
    }
}

impl Actor for RingMember {
    type Msg = Msg;
    fn handle(&mut self, m: Msg, ctx: &mut Context<Self>) {
        if !self.take(m) {
            ctx.stop();
        }
    }
}

/// The threadlet ring, of process actors (`migrate`: with the opt-in) or handler actors; runs
/// inside an actor.
fn actor_ring(n: usize, hops: u64, migrate: bool, kind: ActorKind) -> Outcome {
    let start = Instant::now();
    let ring: Arc<OnceLock<Vec<Addr<Msg>>>> = Arc::new(OnceLock::new());
    let (done_tx, done_rx) = channel::unbounded::<usize>();
    let mut addrs = Vec::with_capacity(n);
    let mut handles: Vec<Box<dyn FnOnce() -> Member + Send>> = Vec::with_capacity(n);
    for i in 0..n {
        let mut member = RingMember {
            i,
            n,
            ring: ring.clone(),
            next: None,
            done: done_tx.clone(),
            passed: 0,
            won: false,
        };
        let addr = match kind {
            ActorKind::Process => {
                let (addr, h) = runtimes::actor(migrate, move |mb: Mailbox<Msg>| -> Member {
                    while let Some(m) = mb.recv() {
                        if !member.take(m) {
                            break;
                        }
                    }
                    (member.passed, member.won)
                });
                handles.push(Box::new(move || {
                    h.join().expect("ring members do not panic")
                }));
                addr
            }
            ActorKind::Handler => {
                let (addr, h) = threadlet::start(member);
                handles.push(Box::new(move || {
                    let m = h.join().expect("ring members do not panic");
                    (m.passed, m.won)
                }));
                addr
            }
        };
        addrs.push(addr);
    }
    drop(done_tx);
    let first = addrs[0].clone();
    ring.set(addrs).unwrap_or_else(|_| unreachable!("set once"));
    let setup = start.elapsed();
    let t = Instant::now();
    first.send(Msg::Token(hops)).expect("actor 0 waits");
    let winner = done_rx.recv().expect("an actor gets the last token");
    for a in ring.get().expect("formed") {
        a.send(Msg::Exit).expect("ring members stay until exit");
    }
    let (passed, winners) = handles
        .into_iter()
        .map(|join| join())
        .fold((0, 0), |(p, w), (p1, w1)| (p + p1, w + usize::from(w1)));
    Outcome {
        setup,
        hops: t.elapsed(),
        passed,
        winner,
        winners,
    }
}

/// A ring of OS threads with `std::sync::mpsc` channels.
fn thread_ring(n: usize, hops: u64) -> Result<Outcome, String> {
    let start = Instant::now();
    let ring: Arc<OnceLock<Vec<mpsc::Sender<Msg>>>> = Arc::new(OnceLock::new());
    let (done_tx, done_rx) = mpsc::channel::<usize>();
    let mut senders = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let (tx, rx) = mpsc::channel::<Msg>();
        let (ring, done_tx) = (ring.clone(), done_tx.clone());
        let spawned = runtimes::os_thread("ring member", i, n, move || -> Member {
            let (mut passed, mut won) = (0, false);
            // Until the ring is formed, a closed channel means the driver gave up.
            let mut next = None;
            while let Ok(m) = rx.recv() {
                let next = next.get_or_insert_with(|| {
                    ring.get().expect("the ring is formed first")[(i + 1) % n].clone()
                });
                match m {
                    Msg::Token(0) => {
                        won = true;
                        done_tx.send(i).expect("the driver waits");
                    }
                    Msg::Token(t) => {
                        next.send(Msg::Token(t - 1))
                            .expect("ring members stay until exit");
                        passed += 1;
                    }
                    Msg::Exit => break,
                }
            }
            (passed, won)
        });
        match spawned {
            Ok(h) => {
                senders.push(tx);
                handles.push(h);
            }
            Err(e) => {
                drop(senders);
                for h in handles {
                    let _ = h.join();
                }
                return Err(e);
            }
        }
    }
    drop(done_tx);
    let first = senders[0].clone();
    ring.set(senders)
        .unwrap_or_else(|_| unreachable!("set once"));
    let setup = start.elapsed();
    let t = Instant::now();
    first.send(Msg::Token(hops)).expect("thread 0 waits");
    let winner = done_rx.recv().expect("a thread gets the last token");
    for s in ring.get().expect("formed") {
        s.send(Msg::Exit).expect("ring members stay until exit");
    }
    let (passed, winners) = handles
        .into_iter()
        .map(|h| h.join().expect("ring members do not panic"))
        .fold((0, 0), |(p, w), (p1, w1)| (p + p1, w + usize::from(w1)));
    Ok(Outcome {
        setup,
        hops: t.elapsed(),
        passed,
        winner,
        winners,
    })
}

/// A ring of tokio tasks with unbounded tokio channels; run it as a task.
async fn task_ring(n: usize, hops: u64) -> Outcome {
    use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
    let start = Instant::now();
    let ring: Arc<OnceLock<Vec<UnboundedSender<Msg>>>> = Arc::new(OnceLock::new());
    let (done_tx, mut done_rx) = unbounded_channel::<usize>();
    let mut senders = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let (tx, mut rx) = unbounded_channel::<Msg>();
        let (ring, done_tx) = (ring.clone(), done_tx.clone());
        handles.push(tokio::spawn(async move {
            let (mut passed, mut won) = (0u64, false);
            let mut next = None;
            while let Some(m) = rx.recv().await {
                let next = next.get_or_insert_with(|| {
                    ring.get().expect("the ring is formed first")[(i + 1) % n].clone()
                });
                match m {
                    Msg::Token(0) => {
                        won = true;
                        done_tx.send(i).expect("the driver waits");
                    }
                    Msg::Token(t) => {
                        next.send(Msg::Token(t - 1))
                            .expect("ring members stay until exit");
                        passed += 1;
                    }
                    Msg::Exit => break,
                }
            }
            (passed, won)
        }));
        senders.push(tx);
    }
    drop(done_tx);
    let first = senders[0].clone();
    ring.set(senders)
        .unwrap_or_else(|_| unreachable!("set once"));
    let setup = start.elapsed();
    let t = Instant::now();
    first.send(Msg::Token(hops)).expect("task 0 waits");
    let winner = done_rx.recv().await.expect("a task gets the last token");
    for s in ring.get().expect("formed") {
        s.send(Msg::Exit).expect("ring members stay until exit");
    }
    let (mut passed, mut winners) = (0, 0);
    for h in handles {
        let (p, w) = h.await.expect("ring members do not panic");
        passed += p;
        winners += usize::from(w);
    }
    Outcome {
        setup,
        hops: t.elapsed(),
        passed,
        winner,
        winners,
    }
}
