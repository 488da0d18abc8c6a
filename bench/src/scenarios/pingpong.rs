//! pingpong: message round trips between `pairs` pairs of actors. In each pair a pinger sends
//! a number to its ponger's mailbox and waits for it to come back in its own, `round_trips`
//! times.
//!
//! Setup is not timed: the pairs are spawned, each makes one warm-up round trip (so both actors
//! have started, wherever the scheduler put them) and reports ready. The clock starts when the
//! driver tells every pinger to go and stops when every actor is joined. `per_op_ns` is wall
//! time per round trip over all pairs (`total / (pairs * round_trips)`): with one pair, the
//! round-trip latency.

use std::sync::mpsc;
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

/// pingpong's options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// Pinger/ponger pairs playing at the same time.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub pairs: u64,
    /// Round trips each pair makes.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub round_trips: u64,
    /// Which kind of threadlet actor plays both sides.
    #[arg(long, value_enum, default_value_t = ActorKind::Process)]
    pub actor: ActorKind,
}

/// Whether pingpong has a version for `rt`.
pub fn supports(rt: Rt) -> bool {
    rt != Rt::Sequential
}

/// Every runtime and worker count of `opts`.
pub fn main(out: &mut Out, opts: &Opts, p: &Params) -> Result<(), String> {
    let supported = |rt: Rt| supports(rt) && p.actor.runs_on(rt);
    let figure = figure(p);
    super::for_each(out, opts, "pingpong", supported, figure, |out, rt, w| {
        let mut params = vec![
            ("pairs", json!(p.pairs)),
            ("round_trips", json!(p.round_trips)),
        ];
        if rt.scheduler().is_some() {
            params.push(("actor", json!(p.actor.name())));
        }
        let spec = Spec {
            scenario: "pingpong",
            runtime: rt,
            workers: w,
            migrate: opts.migrate,
            params,
        };
        measure(out, spec, opts.repeat, || run(rt, w, opts.migrate, p))
    })
}

/// The plot against workers: time per round trip.
fn figure(p: &Params) -> Figure {
    Figure {
        title: format!(
            "pingpong: {} of {} actors, {} each",
            quantity(p.pairs, "pair"),
            p.actor.name(),
            quantity(p.round_trips, "round trip")
        ),
        y: Field::per_op_ns("ns per round trip (all pairs)"),
    }
}

/// What one run found: its time, wrong replies, and messages the pongers echoed.
struct Outcome {
    took: Duration,
    wrong: u64,
    echoed: u64,
}

/// One run on `rt`.
pub fn run(rt: Rt, workers: Option<usize>, migrate: bool, p: &Params) -> Result<Sample, String> {
    let (pairs, rts) = (p.pairs as usize, p.round_trips);
    let mut stats = None;
    let o = match rt {
        Rt::WorkStealing | Rt::GlobalQueue | Rt::Gil => {
            let sched = rt.scheduler().expect("a threadlet runtime");
            let runtime = runtimes::threadlet(sched, super::workers(workers), RtConfig::default());
            let actor = p.actor;
            let o = runtime.block_on(move || match actor {
                ActorKind::Process => threadlet_pairs(pairs, rts, migrate),
                ActorKind::Handler => handler_pairs(pairs, rts),
            });
            stats = Some(runtimes::stats_json(&runtime.stats()));
            o
        }
        Rt::OsThreads => os_pairs(pairs, rts)?,
        Rt::Tokio => {
            let runtime = runtimes::tokio(super::workers(workers));
            runtime
                .block_on(runtime.spawn(tokio_pairs(pairs, rts)))
                .expect("the tokio pingpong driver does not panic")
        }
        Rt::Sequential => unreachable!("pingpong has no sequential version"),
    };
    check(o.wrong == 0, || {
        format!("{} replies were not the number sent", o.wrong)
    });
    let want = pairs as u64 * (rts + 1);
    check(o.echoed == want, || {
        format!("the pongers echoed {} messages, not {want}", o.echoed)
    });
    let s = Sample::new(o.took).per_op(pairs as u64 * rts, o.took);
    Ok(match stats {
        Some(st) => s.with("stats", st),
        None => s,
    })
}

/// The threadlet version; runs inside an actor.
fn threadlet_pairs(pairs: usize, rts: u64, migrate: bool) -> Outcome {
    let (ready_tx, ready_rx) = channel::unbounded::<()>();
    let (go_tx, go_rx) = channel::unbounded::<()>();
    let mut pingers = Vec::with_capacity(pairs);
    let mut pongers = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        // The ponger's address reaches the pinger through a one-slot channel.
        let (to_pinger, from_driver) = channel::bounded::<Addr<u64>>(1);
        let (ready_tx, go_rx) = (ready_tx.clone(), go_rx.clone());
        let (pinger, ping_h) = runtimes::actor(migrate, move |mb: Mailbox<u64>| {
            let ponger = from_driver
                .recv()
                .expect("the driver sends the ponger's address");
            ponger.send(0).expect("the ponger waits");
            let mut wrong = u64::from(mb.recv() != Some(0));
            ready_tx.send(()).expect("the driver waits");
            go_rx.recv().expect("the driver says go");
            for i in 1..=rts {
                ponger.send(i).expect("the ponger waits");
                wrong += u64::from(mb.recv() != Some(i));
            }
            wrong
        });
        let (ponger, pong_h) = runtimes::actor(migrate, move |mb: Mailbox<u64>| {
            let mut echoed = 0u64;
            for n in &mb {
                pinger.send(n).expect("the pinger waits for its reply");
                echoed += 1;
            }
            echoed
        });
        to_pinger.send(ponger).expect("the pinger waits");
        pingers.push(ping_h);
        pongers.push(pong_h);
    }
    drop(ready_tx);
    for _ in 0..pairs {
        ready_rx.recv().expect("every pinger gets ready");
    }
    let start = Instant::now();
    for _ in 0..pairs {
        go_tx.send(()).expect("the pingers wait");
    }
    let wrong = pingers
        .into_iter()
        .map(|h| h.join().expect("pingers do not panic"))
        .sum();
    let echoed = pongers
        .into_iter()
        .map(|h| h.join().expect("pongers do not panic"))
        .sum();
    Outcome {
        took: start.elapsed(),
        wrong,
        echoed,
    }
}

/// The ponger as a handler actor: told where to reply, then echoes every number.
struct Ponger {
    pinger: Option<Addr<PingMsg>>,
    echoed: u64,
}

/// What a handler ponger is sent.
enum PongMsg {
    ReplyTo(Addr<PingMsg>),
    Ping(u64),
}

impl Actor for Ponger {
    type Msg = PongMsg;
    fn handle(&mut self, msg: PongMsg, _ctx: &mut Context<Self>) {
        match msg {
            PongMsg::ReplyTo(a) => self.pinger = Some(a),
            PongMsg::Ping(n) => {
                let pinger = self.pinger.as_ref().expect("told first");
                pinger
                    .send(PingMsg::Reply(n))
                    .expect("the pinger waits for its reply");
                self.echoed += 1;
            }
        }
    }
}

/// What a handler pinger is sent.
enum PingMsg {
    /// The ponger's echo of a number.
    Reply(u64),
    /// The driver's start, after the warm-up round trip.
    Go,
}

/// The pinger as a handler actor: one warm-up round trip (number 0), then, told to go, each
/// reply triggers the next ping, until the last.
struct Pinger {
    ponger: Addr<PongMsg>,
    rts: u64,
    wrong: u64,
    expect: u64,
    ready: channel::Sender<()>,
}

impl Pinger {
    fn ping(&mut self, n: u64, ctx: &mut Context<Self>) {
        if n > self.rts {
            ctx.stop();
            return;
        }
        self.expect = n;
        self.ponger
            .send(PongMsg::Ping(n))
            .expect("the ponger waits");
    }
}

impl Actor for Pinger {
    type Msg = PingMsg;
    fn handle(&mut self, msg: PingMsg, ctx: &mut Context<Self>) {
        match msg {
            PingMsg::Reply(n) => {
                self.wrong += u64::from(n != self.expect);
                if n == 0 {
                    // Warmed up: wait for the driver's go.
                    let _ = self.ready.send(());
                } else {
                    self.ping(n + 1, ctx);
                }
            }
            PingMsg::Go => self.ping(1, ctx),
        }
    }
}

/// Both sides as handler actors; runs inside an actor. As for process actors: each pair makes
/// one warm-up round trip and reports ready, and the clock runs from the driver's go to the
/// last join.
fn handler_pairs(pairs: usize, rts: u64) -> Outcome {
    let (ready_tx, ready_rx) = channel::unbounded::<()>();
    let mut sides = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        let (ponger, pong_h) = threadlet::start(Ponger {
            pinger: None,
            echoed: 0,
        });
        let (pinger, ping_h) = threadlet::start(Pinger {
            ponger: ponger.clone(),
            rts,
            wrong: 0,
            expect: 0,
            ready: ready_tx.clone(),
        });
        // In order, from one sender: where to reply, then the warm-up ping.
        ponger
            .send(PongMsg::ReplyTo(pinger.clone()))
            .expect("the ponger waits");
        ponger.send(PongMsg::Ping(0)).expect("the ponger waits");
        sides.push((pinger, ponger, ping_h, pong_h));
    }
    drop(ready_tx);
    for _ in 0..pairs {
        ready_rx.recv().expect("every pair warms up");
    }
    let start = Instant::now();
    for (pinger, _, _, _) in &sides {
        pinger.send(PingMsg::Go).expect("the pinger waits");
    }
    let (mut wrong, mut echoed) = (0, 0);
    for (pinger, ponger, ping_h, pong_h) in sides {
        drop(pinger);
        wrong += ping_h.join().expect("pingers do not panic").wrong;
        drop(ponger);
        echoed += pong_h.join().expect("pongers do not panic").echoed;
    }
    Outcome {
        took: start.elapsed(),
        wrong,
        echoed,
    }
}

/// Two OS threads per pair with `std::sync::mpsc` channels.
fn os_pairs(pairs: usize, rts: u64) -> Result<Outcome, String> {
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let mut gos = Vec::with_capacity(pairs);
    let mut threads = Vec::with_capacity(pairs);
    let mut failed = None;
    for i in 0..pairs {
        let (ping_tx, ping_rx) = mpsc::channel::<u64>();
        let (pong_tx, pong_rx) = mpsc::channel::<u64>();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let ready_tx = ready_tx.clone();
        let ponger = runtimes::os_thread("ponger", 2 * i + 1, 2 * pairs, move || {
            let mut echoed = 0u64;
            for n in pong_rx.iter() {
                if ping_tx.send(n).is_err() {
                    break;
                }
                echoed += 1;
            }
            (0, echoed)
        });
        let ponger = match ponger {
            Ok(h) => h,
            Err(e) => {
                failed = Some(e);
                break;
            }
        };
        threads.push(ponger);
        let pinger = runtimes::os_thread("pinger", 2 * i, 2 * pairs, move || {
            pong_tx.send(0).expect("the ponger waits");
            let mut wrong = u64::from(ping_rx.recv() != Ok(0));
            ready_tx.send(()).expect("the driver waits");
            if go_rx.recv().is_err() {
                // The driver gave up (a thread could not be created): go home.
                return (wrong, 0);
            }
            for i in 1..=rts {
                pong_tx.send(i).expect("the ponger waits");
                wrong += u64::from(ping_rx.recv() != Ok(i));
            }
            (wrong, 0)
        });
        match pinger {
            Ok(h) => threads.push(h),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
        gos.push(go_tx);
    }
    drop(ready_tx);
    if let Some(e) = failed {
        drop(gos);
        for t in threads {
            let _ = t.join();
        }
        return Err(e);
    }
    for _ in 0..pairs {
        ready_rx.recv().expect("every pinger gets ready");
    }
    let start = Instant::now();
    for go in &gos {
        go.send(()).expect("the pingers wait");
    }
    let (mut wrong, mut echoed) = (0, 0);
    for t in threads {
        let (w, e) = t.join().expect("pingers and pongers do not panic");
        wrong += w;
        echoed += e;
    }
    Ok(Outcome {
        took: start.elapsed(),
        wrong,
        echoed,
    })
}

/// Two tokio tasks per pair with unbounded tokio channels; run it as a task.
async fn tokio_pairs(pairs: usize, rts: u64) -> Outcome {
    use tokio::sync::{mpsc::unbounded_channel, oneshot};
    let (ready_tx, mut ready_rx) = unbounded_channel::<()>();
    let mut gos = Vec::with_capacity(pairs);
    let mut tasks = Vec::with_capacity(2 * pairs);
    for _ in 0..pairs {
        let (ping_tx, mut ping_rx) = unbounded_channel::<u64>();
        let (pong_tx, mut pong_rx) = unbounded_channel::<u64>();
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let ready_tx = ready_tx.clone();
        tasks.push(tokio::spawn(async move {
            pong_tx.send(0).expect("the ponger waits");
            let mut wrong = u64::from(ping_rx.recv().await != Some(0));
            ready_tx.send(()).expect("the driver waits");
            go_rx.await.expect("the driver says go");
            for i in 1..=rts {
                pong_tx.send(i).expect("the ponger waits");
                wrong += u64::from(ping_rx.recv().await != Some(i));
            }
            (wrong, 0)
        }));
        tasks.push(tokio::spawn(async move {
            let mut echoed = 0u64;
            while let Some(n) = pong_rx.recv().await {
                ping_tx.send(n).expect("the pinger waits for its reply");
                echoed += 1;
            }
            (0, echoed)
        }));
        gos.push(go_tx);
    }
    drop(ready_tx);
    for _ in 0..pairs {
        ready_rx.recv().await.expect("every pinger gets ready");
    }
    let start = Instant::now();
    for go in gos {
        go.send(()).expect("the pingers wait");
    }
    let (mut wrong, mut echoed) = (0, 0);
    for t in tasks {
        let (w, e) = t.await.expect("pingers and pongers do not panic");
        wrong += w;
        echoed += e;
    }
    Outcome {
        took: start.elapsed(),
        wrong,
        echoed,
    }
}
