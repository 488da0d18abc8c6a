//! ask: request/reply round trips. In each of `pairs` pairs a client asks its server
//! (`Addr::ask`) for the successor of a number, `round_trips` times: every request carries a
//! reply channel of its own, and the client waits on it for the answer.
//!
//! Setup is not timed: the pairs are spawned, each client makes one warm-up ask (so both
//! actors have started, wherever the scheduler put them) and reports ready. The clock starts
//! when the driver tells every client to go and stops when every client is joined. `per_op_ns`
//! is wall time per round trip over all pairs (`total / (pairs * round_trips)`): with one pair,
//! the latency of one ask. Checked: every answer is the number asked plus one, and the servers
//! handled every request, warm-ups included.
//!
//! Clients are process actors (an ask blocks until its answer comes); `--actor` picks the kind
//! of server. The os-threads version makes a `sync_channel(1)` per request for the reply, the
//! tokio version a `oneshot` per request, as `ask` makes a oneshot channel per request.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use threadlet::{Actor, Addr, Context, JoinHandle, Mailbox, Reply, channel};

use super::Figure;
use crate::Opts;
use crate::measure::{Sample, Spec, check, measure};
use crate::output::Out;
use crate::plot::{Field, quantity};
use crate::runtimes::{self, ActorKind, Rt, RtConfig};

/// ask's options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// Client/server pairs asking at the same time.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub pairs: u64,
    /// Asks each client makes.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub round_trips: u64,
    /// Which kind of threadlet actor serves the requests (clients are process actors).
    #[arg(long, value_enum, default_value_t = ActorKind::Process)]
    pub actor: ActorKind,
}

/// Whether ask has a version for `rt`.
pub fn supports(rt: Rt) -> bool {
    rt != Rt::Sequential
}

/// Every runtime and worker count of `opts`.
pub fn main(out: &mut Out, opts: &Opts, p: &Params) -> Result<(), String> {
    let supported = |rt: Rt| supports(rt) && p.actor.runs_on(rt);
    let figure = figure(p);
    super::for_each(out, opts, "ask", supported, figure, |out, rt, w| {
        let mut params = vec![
            ("pairs", json!(p.pairs)),
            ("round_trips", json!(p.round_trips)),
        ];
        if rt.scheduler().is_some() {
            params.push(("actor", json!(p.actor.name())));
        }
        let spec = Spec {
            scenario: "ask",
            runtime: rt,
            workers: w,
            migrate: opts.migrate,
            params,
        };
        measure(out, spec, opts.repeat, || run(rt, w, opts.migrate, p))
    })
}

/// The plot against workers: time per ask.
fn figure(p: &Params) -> Figure {
    Figure {
        title: format!(
            "ask: {} of {} servers, {} each",
            quantity(p.pairs, "client"),
            p.actor.name(),
            quantity(p.round_trips, "ask")
        ),
        y: Field::per_op_ns("ns per ask (all pairs)"),
    }
}

/// What one run found: its time, wrong answers, and requests the servers handled.
struct Outcome {
    took: Duration,
    wrong: u64,
    handled: u64,
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
            let o = runtime.block_on(move || threadlet_pairs(pairs, rts, migrate, actor));
            stats = Some(runtimes::stats_json(&runtime.stats()));
            o
        }
        Rt::OsThreads => os_pairs(pairs, rts)?,
        Rt::Tokio => {
            let runtime = runtimes::tokio(super::workers(workers));
            runtime
                .block_on(runtime.spawn(tokio_pairs(pairs, rts)))
                .expect("the tokio ask driver does not panic")
        }
        Rt::Sequential => unreachable!("ask has no sequential version"),
    };
    check(o.wrong == 0, || {
        format!("{} answers were not the number asked plus one", o.wrong)
    });
    let want = pairs as u64 * (rts + 1);
    check(o.handled == want, || {
        format!("the servers handled {} requests, not {want}", o.handled)
    });
    let s = Sample::new(o.took).per_op(pairs as u64 * rts, o.took);
    Ok(match stats {
        Some(st) => s.with("stats", st),
        None => s,
    })
}

/// A request to a threadlet server: answer `n + 1`.
struct Next {
    n: u64,
    reply: Reply<u64>,
}

/// The server as a handler actor: answers every request, counting them.
struct Server {
    handled: u64,
}

impl Actor for Server {
    type Msg = Next;
    fn handle(&mut self, req: Next, _ctx: &mut Context<Self>) {
        req.reply.send(req.n + 1);
        self.handled += 1;
    }
}

/// A threadlet server's join handle, of either kind.
enum ServerHandle {
    Process(JoinHandle<u64>),
    Handler(JoinHandle<Server>),
}

impl ServerHandle {
    /// Waits for the server to end (once every address is gone): the requests it handled.
    fn join(self) -> u64 {
        match self {
            ServerHandle::Process(h) => h.join().expect("servers do not panic"),
            ServerHandle::Handler(h) => h.join().expect("servers do not panic").handled,
        }
    }
}

/// Starts one server of `kind`; runs inside an actor.
fn start_server(kind: ActorKind, migrate: bool) -> (Addr<Next>, ServerHandle) {
    match kind {
        ActorKind::Process => {
            let (addr, h) = runtimes::actor(migrate, |mb: Mailbox<Next>| {
                let mut handled = 0u64;
                for req in &mb {
                    req.reply.send(req.n + 1);
                    handled += 1;
                }
                handled
            });
            (addr, ServerHandle::Process(h))
        }
        ActorKind::Handler => {
            let (addr, h) = threadlet::start(Server { handled: 0 });
            (addr, ServerHandle::Handler(h))
        }
    }
}

/// The threadlet version, with servers of `kind`; runs inside an actor.
fn threadlet_pairs(pairs: usize, rts: u64, migrate: bool, kind: ActorKind) -> Outcome {
    let (ready_tx, ready_rx) = channel::unbounded::<()>();
    let (go_tx, go_rx) = channel::unbounded::<()>();
    let mut clients: Vec<JoinHandle<u64>> = Vec::with_capacity(pairs);
    let mut servers = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        let (server, server_handle) = start_server(kind, migrate);
        let (ready_tx, go_rx) = (ready_tx.clone(), go_rx.clone());
        // The client holds the only address: when it ends, its server's mailbox closes.
        clients.push(runtimes::spawn(migrate, move || {
            let answer = |n: u64| {
                server
                    .ask(|reply| Next { n, reply })
                    .expect("the server answers")
            };
            let mut wrong = u64::from(answer(0) != 1);
            ready_tx.send(()).expect("the driver waits");
            go_rx.recv().expect("the driver says go");
            for n in 1..=rts {
                wrong += u64::from(answer(n) != n + 1);
            }
            wrong
        }));
        servers.push(server_handle);
    }
    drop(ready_tx);
    for _ in 0..pairs {
        ready_rx.recv().expect("every client gets ready");
    }
    let start = Instant::now();
    for _ in 0..pairs {
        go_tx.send(()).expect("the clients wait");
    }
    let wrong = clients
        .into_iter()
        .map(|h| h.join().expect("clients do not panic"))
        .sum();
    let took = start.elapsed();
    let handled = servers.into_iter().map(ServerHandle::join).sum();
    Outcome {
        took,
        wrong,
        handled,
    }
}

/// A request to an OS-thread server: the number and where its successor goes.
type OsRequest = (u64, mpsc::SyncSender<u64>);

/// Two OS threads per pair: requests over a `std::sync::mpsc` channel, each answered over a
/// `sync_channel(1)` made for it.
fn os_pairs(pairs: usize, rts: u64) -> Result<Outcome, String> {
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let mut gos = Vec::with_capacity(pairs);
    let mut clients = Vec::with_capacity(pairs);
    let mut servers = Vec::with_capacity(pairs);
    let mut failed = None;
    for i in 0..pairs {
        let (request_tx, request_rx) = mpsc::channel::<OsRequest>();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let ready_tx = ready_tx.clone();
        let server = runtimes::os_thread("server", 2 * i + 1, 2 * pairs, move || {
            let mut handled = 0u64;
            for (n, reply) in request_rx.iter() {
                // A client gone is the driver giving up; nothing to tell it.
                let _ = reply.send(n + 1);
                handled += 1;
            }
            handled
        });
        match server {
            Ok(h) => servers.push(h),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
        let client = runtimes::os_thread("client", 2 * i, 2 * pairs, move || {
            let answer = |n: u64| {
                let (reply_tx, reply_rx) = mpsc::sync_channel(1);
                request_tx.send((n, reply_tx)).expect("the server waits");
                reply_rx.recv().expect("the server answers")
            };
            let mut wrong = u64::from(answer(0) != 1);
            ready_tx.send(()).expect("the driver waits");
            if go_rx.recv().is_err() {
                // The driver gave up (a thread could not be created): go home.
                return wrong;
            }
            for n in 1..=rts {
                wrong += u64::from(answer(n) != n + 1);
            }
            wrong
        });
        match client {
            Ok(h) => clients.push(h),
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
        for t in clients {
            let _ = t.join();
        }
        for t in servers {
            let _ = t.join();
        }
        return Err(e);
    }
    for _ in 0..pairs {
        ready_rx.recv().expect("every client gets ready");
    }
    let start = Instant::now();
    for go in &gos {
        go.send(()).expect("the clients wait");
    }
    let wrong = clients
        .into_iter()
        .map(|t| t.join().expect("clients do not panic"))
        .sum();
    let took = start.elapsed();
    let handled = servers
        .into_iter()
        .map(|t| t.join().expect("servers do not panic"))
        .sum();
    Ok(Outcome {
        took,
        wrong,
        handled,
    })
}

/// Two tokio tasks per pair: requests over an unbounded tokio channel, each answered over a
/// `oneshot` made for it; run it as a task.
async fn tokio_pairs(pairs: usize, rts: u64) -> Outcome {
    use tokio::sync::{mpsc::unbounded_channel, oneshot};
    let (ready_tx, mut ready_rx) = unbounded_channel::<()>();
    let mut gos = Vec::with_capacity(pairs);
    let mut clients = Vec::with_capacity(pairs);
    let mut servers = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        let (request_tx, mut request_rx) = unbounded_channel::<(u64, oneshot::Sender<u64>)>();
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let ready_tx = ready_tx.clone();
        clients.push(tokio::spawn(async move {
            let answer = |n: u64| {
                let (reply_tx, reply_rx) = oneshot::channel();
                request_tx.send((n, reply_tx)).expect("the server waits");
                async move { reply_rx.await.expect("the server answers") }
            };
            let mut wrong = u64::from(answer(0).await != 1);
            ready_tx.send(()).expect("the driver waits");
            go_rx.await.expect("the driver says go");
            for n in 1..=rts {
                wrong += u64::from(answer(n).await != n + 1);
            }
            wrong
        }));
        servers.push(tokio::spawn(async move {
            let mut handled = 0u64;
            while let Some((n, reply)) = request_rx.recv().await {
                reply.send(n + 1).expect("the client waits for its answer");
                handled += 1;
            }
            handled
        }));
        gos.push(go_tx);
    }
    drop(ready_tx);
    for _ in 0..pairs {
        ready_rx.recv().await.expect("every client gets ready");
    }
    let start = Instant::now();
    for go in gos {
        go.send(()).expect("the clients wait");
    }
    let mut wrong = 0;
    for t in clients {
        wrong += t.await.expect("clients do not panic");
    }
    let took = start.elapsed();
    let mut handled = 0;
    for t in servers {
        handled += t.await.expect("servers do not panic");
    }
    Outcome {
        took,
        wrong,
        handled,
    }
}
