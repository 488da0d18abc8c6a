//! http: the NSPR experiment. An HTTP/1.1 server with keep-alive serves a generated 6 KB body;
//! `clients` keep-alive clients on OS threads of this process send GETs back to back for
//! `seconds` and time every response.
//!
//! Versions: threadlet (one actor per connection, `threadlet::net`), os-threads (one OS thread
//! per connection, blocking `std::net`: the seed's pthreads server), tokio (one task per
//! connection; the same `httparse` request loop, written async). The threadlet and os-threads
//! servers run the very same connection loop (`threadlet_examples::http`).
//!
//! Setup is not timed: the server starts and answers one request first. The figure is
//! requests per second over the run (`per_op_ns` is its inverse: wall time per response over
//! all clients), with latency percentiles. Checked: every response was a 200 with the whole
//! body, and no connection failed.
//!
//! The load generator shares the machine with the server: on few cores the clients take CPU
//! time that the server could have used, the same for every version. Its clients are OS
//! threads (`--load threads`, the default) or one thread multiplexing every connection
//! (`--load multiplexed`: the seed's `zeusbench` multiplexed its 10 clients with `select`).
//! `--cpus N` runs the whole measurement on N CPUs (the seed ran on one).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use threadlet_examples::http::{self, BODY_BYTES, Content, Load};

use super::Figure;
use crate::Opts;
use crate::measure::{Sample, Spec, check, measure};
use crate::output::Out;
use crate::plot::{Field, quantity};
use crate::runtimes::{self, Rt, RtConfig};

/// http's options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// Keep-alive clients.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub clients: u64,
    /// How long the load runs, in seconds (fractions allowed).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// How the load generator runs its clients.
    #[arg(long, value_enum, default_value_t = LoadShape::Threads)]
    pub load: LoadShape,
    /// Runs each measurement (server, runtime and load generator) on the first N CPUs that
    /// the process may use, as the seed ran on one; pair it with `--workers`.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub cpus: Option<u64>,
}

/// How the load generator runs its clients.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadShape {
    /// An OS thread per client, blocking I/O.
    Threads,
    /// Every client on one OS thread, non-blocking connections multiplexed with epoll.
    Multiplexed,
}

impl LoadShape {
    fn name(self) -> &'static str {
        match self {
            LoadShape::Threads => "threads",
            LoadShape::Multiplexed => "multiplexed",
        }
    }
}

/// Whether http has a version for `rt`.
pub fn supports(rt: Rt) -> bool {
    rt != Rt::Sequential
}

/// Every runtime and worker count of `opts`.
pub fn main(out: &mut Out, opts: &Opts, p: &Params) -> Result<(), String> {
    if !(p.seconds > 0.0 && p.seconds.is_finite()) {
        return Err("--seconds must be a positive number".into());
    }
    let figure = figure(p);
    super::for_each(out, opts, "http", supports, figure, |out, rt, w| {
        measure(out, spec(rt, w, p), opts.repeat, || run(rt, w, p))
    })
}

/// The plot against workers: requests per second.
fn figure(p: &Params) -> Figure {
    Figure {
        title: format!(
            "http: {}, {} s per run",
            quantity(p.clients, "keep-alive client"),
            p.seconds
        ),
        y: Field {
            key: "req_per_s",
            scale: 1.0,
            desc: "requests per second",
        },
    }
}

/// The measurement's description.
pub fn spec(rt: Rt, workers: Option<usize>, p: &Params) -> Spec<'static> {
    Spec {
        scenario: "http",
        runtime: rt,
        workers,
        migrate: false,
        params: vec![
            ("clients", json!(p.clients)),
            ("seconds", json!(p.seconds)),
            ("body_kib", json!(BODY_BYTES / 1024)),
            ("load", json!(p.load.name())),
            ("cpus", json!(p.cpus)),
        ],
    }
}

/// One run on `rt`, on `p.cpus` CPUs if given.
pub fn run(rt: Rt, workers: Option<usize>, p: &Params) -> Result<Sample, String> {
    match p.cpus {
        None => run_here(rt, workers, p),
        Some(n) => on_cpus(n as usize, || run_here(rt, workers, p))?,
    }
}

/// Runs `f` with the calling thread, and so every thread started meanwhile (a new thread
/// inherits its creator's affinity), on the first `n` CPUs of the calling thread's affinity;
/// then gives the thread its affinity back.
fn on_cpus<T>(n: usize, f: impl FnOnce() -> T) -> Result<T, String> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: an all-zero `cpu_set_t` is the empty set; `sched_getaffinity` writes at most
    // `size` bytes, the set's own size, into it.
    let mut all: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::sched_getaffinity(0, size, &mut all) } != 0 {
        return Err(format!("--cpus: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: as above.
    let mut first: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let mut taken = 0;
    for cpu in 0..libc::CPU_SETSIZE as usize {
        // SAFETY: `cpu` is below `CPU_SETSIZE`, the sets' capacity.
        if taken < n && unsafe { libc::CPU_ISSET(cpu, &all) } {
            // SAFETY: as above.
            unsafe { libc::CPU_SET(cpu, &mut first) };
            taken += 1;
        }
    }
    if taken < n {
        return Err(format!("--cpus {n}: the process may use only {taken}"));
    }
    // SAFETY: `first` is a valid set of `size` bytes, read by the call.
    if unsafe { libc::sched_setaffinity(0, size, &first) } != 0 {
        return Err(format!("--cpus: {}", std::io::Error::last_os_error()));
    }
    let out = f();
    // SAFETY: `all` is the valid set read above. A failure would leave this thread on fewer
    // CPUs, which later measurements report through their own `--cpus`-less figures; it is
    // not expected for a set the thread had.
    unsafe { libc::sched_setaffinity(0, size, &all) };
    Ok(out)
}

fn run_here(rt: Rt, workers: Option<usize>, p: &Params) -> Result<Sample, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let duration = Duration::from_secs_f64(p.seconds);
    let clients = p.clients as usize;
    let load = match rt {
        Rt::WorkStealing | Rt::GlobalQueue | Rt::Gil => {
            let sched = rt.scheduler().expect("a threadlet runtime");
            let runtime = runtimes::threadlet(sched, super::workers(workers), RtConfig::default());
            let listener = threadlet::net::TcpListener::from_std(listener)
                .map_err(|e| format!("a non-blocking listener: {e}"))?;
            // Ends when the runtime drops, after the load.
            let _server =
                runtime.spawn(move || http::threadlet_server(listener, Content::generated()));
            warm_up_and_load(addr, clients, duration, p.load)
        }
        Rt::OsThreads => {
            // The accepting thread and its connection threads end when the process does.
            std::thread::spawn(move || http::threads_server(listener, Content::generated()));
            warm_up_and_load(addr, clients, duration, p.load)
        }
        Rt::Tokio => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(super::workers(workers))
                .enable_io()
                .build()
                .map_err(|e| format!("a tokio runtime: {e}"))?;
            listener.set_nonblocking(true).map_err(|e| e.to_string())?;
            runtime.spawn(async move {
                let listener = tokio::net::TcpListener::from_std(listener)
                    .expect("a tokio listener from a non-blocking std one");
                tokio_server(listener, http::generated_response()).await;
            });
            let load = warm_up_and_load(addr, clients, duration, p.load);
            runtime.shutdown_background();
            load
        }
        Rt::Sequential => unreachable!("http has no sequential version"),
    }?;
    check(load.errors == 0, || {
        format!("{} connections failed or got a bad response", load.errors)
    });
    Ok(Sample::new(load.elapsed)
        .per_op(load.requests, load.elapsed)
        .with("requests", load.requests)
        .with("req_per_s", load.per_second().round())
        .with("p50_us", micros(load.percentile(0.50)))
        .with("p99_us", micros(load.percentile(0.99)))
        .with("p999_us", micros(load.percentile(0.999))))
}

fn micros(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e7).round() / 10.0
}

/// How long the warm-up keeps trying for its one answer: only a server that never answers
/// takes this long.
const WARM_UP_DEADLINE: Duration = Duration::from_secs(10);

/// One request first (the server is up, its first connection made), then the load.
fn warm_up_and_load(
    addr: SocketAddr,
    clients: usize,
    duration: Duration,
    shape: LoadShape,
) -> Result<Load, String> {
    warm_up(addr)?;
    let load = match shape {
        LoadShape::Threads => http::load,
        LoadShape::Multiplexed => http::load_multiplexed,
    };
    Ok(load(addr, clients, duration, "/", Some(BODY_BYTES)))
}

/// Sends one GET, retried (a refused or failed connection, a bad answer) until it gets a 200
/// with the whole body or [`WARM_UP_DEADLINE`] passes. Not `http::load` for a short while:
/// on a crowded machine its client thread (at the least priority) may get no CPU time in that
/// while and send nothing at all.
fn warm_up(addr: SocketAddr) -> Result<(), String> {
    let deadline = std::time::Instant::now() + WARM_UP_DEADLINE;
    let mut tries = 0u32;
    loop {
        tries += 1;
        let error = match http::get_once(addr, "/", WARM_UP_DEADLINE) {
            Ok(BODY_BYTES) => return Ok(()),
            Ok(n) => format!("{n} bytes of body ({BODY_BYTES} expected)"),
            Err(e) => e.to_string(),
        };
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "the server did not answer in warm-up ({tries} tries in {WARM_UP_DEADLINE:?}; \
                 the last: {error})"
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// tokio's version of the server: a task per connection, the same request loop as
/// `threadlet_examples::http::serve_connection` (answering the generated body), async.
async fn tokio_server(listener: tokio::net::TcpListener, response: std::sync::Arc<[u8]>) {
    while let Ok((conn, _)) = listener.accept().await {
        let _ = conn.set_nodelay(true);
        let response = response.clone();
        tokio::spawn(async move { tokio_connection(conn, &response).await });
    }
}

async fn tokio_connection(mut conn: tokio::net::TcpStream, response: &[u8]) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 4096];
    let mut filled = 0;
    loop {
        let (head_len, keep_alive) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf[..filled]) {
                Ok(httparse::Status::Complete(n)) => {
                    let close = req.headers.iter().any(|h| {
                        h.name.eq_ignore_ascii_case("connection")
                            && h.value.eq_ignore_ascii_case(b"close")
                    });
                    break (n, !close && req.version == Some(1));
                }
                Ok(httparse::Status::Partial) if filled < buf.len() => {
                    match conn.read(&mut buf[filled..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => filled += n,
                    }
                }
                _ => return,
            }
        };
        if conn.write_all(response).await.is_err() {
            return;
        }
        buf.copy_within(head_len..filled, 0);
        filled -= head_len;
        if !keep_alive {
            return;
        }
    }
}
