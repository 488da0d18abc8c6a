//! select: one consumer waits on three sources at once, its mailbox, a `bounded(64)` channel
//! and an unbounded channel, each fed by a producer of its own that sends the numbers
//! `0..messages`. The consumer loops over a select of the three until it has received
//! `3 * messages` numbers.
//!
//! Setup is not timed: the consumer and the three producers are spawned and report ready. The
//! clock starts when the driver tells the producers to go and stops when the consumer is
//! joined. `per_op_ns` is wall time per number received (`total / (3 * messages)`). Checked:
//! each source delivered `messages` numbers summing to `0 + 1 + ... + (messages - 1)`.
//!
//! The driver keeps a sender of every source until the consumer is joined: a closed source is
//! always ready, so a producer that finished first must not close its source while the
//! consumer still selects on it.
//!
//! Versions: threadlet (`threadlet::select!` in a process actor, producers as actors) and tokio
//! (`tokio::select!` in a task with its default random branch order, over two unbounded tokio
//! channels and a `channel(64)`, producers as tasks). std has no select, so there is no
//! os-threads version.

use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use threadlet::{Addr, JoinHandle, Mailbox, channel};

use super::Figure;
use crate::Opts;
use crate::measure::{Sample, Spec, check, measure};
use crate::output::Out;
use crate::plot::{Field, quantity};
use crate::runtimes::{self, Rt, RtConfig};

/// select's options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// Numbers each of the three producers sends.
    #[arg(long, default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub messages: u64,
}

/// Whether select has a version for `rt`.
pub fn supports(rt: Rt) -> bool {
    rt.scheduler().is_some() || rt == Rt::Tokio
}

/// Every runtime and worker count of `opts`.
pub fn main(out: &mut Out, opts: &Opts, p: &Params) -> Result<(), String> {
    let figure = figure(p);
    super::for_each(out, opts, "select", supports, figure, |out, rt, w| {
        let spec = Spec {
            scenario: "select",
            runtime: rt,
            workers: w,
            migrate: opts.migrate,
            params: vec![("messages", json!(p.messages))],
        };
        measure(out, spec, opts.repeat, || run(rt, w, opts.migrate, p))
    })
}

/// The plot against workers: time per number received.
fn figure(p: &Params) -> Figure {
    Figure {
        title: format!(
            "select: one consumer, 3 producers of {} each",
            quantity(p.messages, "message")
        ),
        y: Field::per_op_ns("ns per message received"),
    }
}

/// The three sources, by index in a [`Tally`]; tokio's "mailbox" is an unbounded channel.
const SOURCES: [&str; 3] = ["mailbox", "bounded(64) channel", "unbounded channel"];
/// [`SOURCES`] index of the mailbox.
const MAILBOX: usize = 0;
/// [`SOURCES`] index of the bounded channel.
const BOUNDED: usize = 1;
/// [`SOURCES`] index of the unbounded channel.
const UNBOUNDED: usize = 2;

/// What the consumer received, per source.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    received: [u64; 3],
    sums: [u128; 3],
}

impl Tally {
    /// Counts `n`, received from source `source`.
    fn add(&mut self, source: usize, n: u64) {
        self.received[source] += 1;
        self.sums[source] += u128::from(n);
    }

    /// Numbers received from every source together.
    fn total(&self) -> u64 {
        self.received.iter().sum()
    }
}

/// What one run found: its time and what the consumer received.
struct Outcome {
    took: Duration,
    tally: Tally,
}

/// One run on `rt`.
pub fn run(rt: Rt, workers: Option<usize>, migrate: bool, p: &Params) -> Result<Sample, String> {
    let messages = p.messages;
    let mut stats = None;
    let o = match rt {
        Rt::WorkStealing | Rt::GlobalQueue | Rt::Gil => {
            let sched = rt.scheduler().expect("a threadlet runtime");
            let runtime = runtimes::threadlet(sched, super::workers(workers), RtConfig::default());
            let o = runtime.block_on(move || threadlet_select(messages, migrate));
            stats = Some(runtimes::stats_json(&runtime.stats()));
            o
        }
        Rt::Tokio => {
            let runtime = runtimes::tokio(super::workers(workers));
            runtime
                .block_on(runtime.spawn(tokio_select(messages)))
                .expect("the tokio select driver does not panic")
        }
        Rt::OsThreads | Rt::Sequential => unreachable!("select has no {rt} version"),
    };
    let want_sum = u128::from(messages) * u128::from(messages - 1) / 2;
    for (source, name) in SOURCES.iter().enumerate() {
        let (received, sum) = (o.tally.received[source], o.tally.sums[source]);
        check(received == messages, || {
            format!("the consumer received {received} numbers from its {name}, not {messages}")
        });
        check(sum == want_sum, || {
            format!("the numbers from the consumer's {name} summed to {sum}, not {want_sum}")
        });
    }
    let s = Sample::new(o.took).per_op(3 * messages, o.took);
    Ok(match stats {
        Some(st) => s.with("stats", st),
        None => s,
    })
}

/// The threadlet version; runs inside an actor.
fn threadlet_select(messages: u64, migrate: bool) -> Outcome {
    let (ready_tx, ready_rx) = channel::unbounded::<()>();
    let (go_tx, go_rx) = channel::unbounded::<()>();
    let (bounded_tx, bounded_rx) = channel::bounded::<u64>(64);
    let (unbounded_tx, unbounded_rx) = channel::unbounded::<u64>();
    let consumer_ready = ready_tx.clone();
    let (mailbox_addr, consumer) = runtimes::actor(migrate, move |mb: Mailbox<u64>| {
        consumer_ready.send(()).expect("the driver waits");
        let mut tally = Tally::default();
        // Every source stays open (the driver holds a sender of each), so a closed one means
        // the run went wrong: stop, and let the checks say what is missing.
        while tally.total() < 3 * messages {
            threadlet::select! {
                recv(mb) -> m => match m {
                    Some(n) => tally.add(MAILBOX, n),
                    None => break,
                },
                recv(bounded_rx) -> v => match v {
                    Ok(n) => tally.add(BOUNDED, n),
                    Err(_) => break,
                },
                recv(unbounded_rx) -> v => match v {
                    Ok(n) => tally.add(UNBOUNDED, n),
                    Err(_) => break,
                },
            }
        }
        tally
    });
    let producer = |send| spawn_producer(migrate, messages, &ready_tx, &go_rx, send);
    let producers = [
        producer(Sink::Mailbox(mailbox_addr.clone())),
        producer(Sink::Channel(bounded_tx.clone())),
        producer(Sink::Channel(unbounded_tx.clone())),
    ];
    drop(ready_tx);
    for _ in 0..1 + producers.len() {
        ready_rx
            .recv()
            .expect("the consumer and every producer get ready");
    }
    let start = Instant::now();
    for _ in 0..producers.len() {
        go_tx.send(()).expect("the producers wait");
    }
    let tally = consumer.join().expect("the consumer does not panic");
    let took = start.elapsed();
    for h in producers {
        h.join().expect("producers do not panic");
    }
    drop((mailbox_addr, bounded_tx, unbounded_tx));
    Outcome { took, tally }
}

/// Where a threadlet producer sends its numbers.
enum Sink {
    Mailbox(Addr<u64>),
    Channel(channel::Sender<u64>),
}

/// Spawns a threadlet producer: it reports ready, waits for go, then sends `0..messages` to
/// `sink`.
fn spawn_producer(
    migrate: bool,
    messages: u64,
    ready_tx: &channel::Sender<()>,
    go_rx: &channel::Receiver<()>,
    sink: Sink,
) -> JoinHandle<()> {
    let (ready_tx, go_rx) = (ready_tx.clone(), go_rx.clone());
    runtimes::spawn(migrate, move || {
        ready_tx.send(()).expect("the driver waits");
        go_rx.recv().expect("the driver says go");
        match sink {
            Sink::Mailbox(addr) => {
                for n in 0..messages {
                    addr.send(n).expect("the consumer waits");
                }
            }
            Sink::Channel(tx) => {
                for n in 0..messages {
                    tx.send(n).expect("the consumer waits");
                }
            }
        }
    })
}

/// The tokio version: one consumer task over three tokio channels, three producer tasks; run
/// it as a task.
async fn tokio_select(messages: u64) -> Outcome {
    use tokio::sync::{mpsc, oneshot};
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<()>();
    let (mailbox_tx, mut mailbox_rx) = mpsc::unbounded_channel::<u64>();
    let (bounded_tx, mut bounded_rx) = mpsc::channel::<u64>(64);
    let (unbounded_tx, mut unbounded_rx) = mpsc::unbounded_channel::<u64>();
    let consumer_ready = ready_tx.clone();
    let consumer = tokio::spawn(async move {
        consumer_ready.send(()).expect("the driver waits");
        let mut tally = Tally::default();
        // As in the threadlet version, a closed source means the run went wrong.
        while tally.total() < 3 * messages {
            tokio::select! {
                m = mailbox_rx.recv() => match m {
                    Some(n) => tally.add(MAILBOX, n),
                    None => break,
                },
                v = bounded_rx.recv() => match v {
                    Some(n) => tally.add(BOUNDED, n),
                    None => break,
                },
                v = unbounded_rx.recv() => match v {
                    Some(n) => tally.add(UNBOUNDED, n),
                    None => break,
                },
            }
        }
        tally
    });
    let mut gos = Vec::with_capacity(3);
    let mut producers = Vec::with_capacity(3);
    let mut ready_and_go = || {
        let (go_tx, go_rx) = oneshot::channel::<()>();
        gos.push(go_tx);
        (ready_tx.clone(), go_rx)
    };
    let (ready, go_rx) = ready_and_go();
    let to_mailbox = mailbox_tx.clone();
    producers.push(tokio::spawn(async move {
        ready.send(()).expect("the driver waits");
        go_rx.await.expect("the driver says go");
        for n in 0..messages {
            to_mailbox.send(n).expect("the consumer waits");
        }
    }));
    let (ready, go_rx) = ready_and_go();
    let to_bounded = bounded_tx.clone();
    producers.push(tokio::spawn(async move {
        ready.send(()).expect("the driver waits");
        go_rx.await.expect("the driver says go");
        for n in 0..messages {
            to_bounded.send(n).await.expect("the consumer waits");
        }
    }));
    let (ready, go_rx) = ready_and_go();
    let to_unbounded = unbounded_tx.clone();
    producers.push(tokio::spawn(async move {
        ready.send(()).expect("the driver waits");
        go_rx.await.expect("the driver says go");
        for n in 0..messages {
            to_unbounded.send(n).expect("the consumer waits");
        }
    }));
    drop(ready_tx);
    for _ in 0..1 + producers.len() {
        ready_rx
            .recv()
            .await
            .expect("the consumer and every producer get ready");
    }
    let start = Instant::now();
    for go_tx in gos {
        go_tx.send(()).expect("the producers wait");
    }
    let tally = consumer.await.expect("the consumer does not panic");
    let took = start.elapsed();
    for h in producers {
        h.await.expect("producers do not panic");
    }
    drop((mailbox_tx, bounded_tx, unbounded_tx));
    Outcome { took, tally }
}
