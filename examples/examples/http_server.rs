//! The NSPR experiment's server: HTTP/1.1 with keep-alive, one actor per connection (or, with
//! `--threads`, one OS thread per connection: the pthreads baseline), serving a directory or
//! a generated 6 KB body.
//!
//! ```text
//! cargo run --release --example http_server -- --port 8080 --workers 2 [--root DIR] [--threads]
//! ```
//!
//! With `--load N` it also runs the load generator against itself (N keep-alive clients for
//! `--seconds`) and prints requests per second and latency percentiles, then exits.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use threadlet::Runtime;
use threadlet_examples::http::{self, Content};

/// An HTTP/1.1 file server on threadlet actors (or OS threads).
#[derive(Parser)]
struct Args {
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Worker threads (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
    /// Serve the files under this directory instead of the generated 6 KB body.
    #[arg(long)]
    root: Option<PathBuf>,
    /// One OS thread per connection instead of one actor.
    #[arg(long)]
    threads: bool,
    /// Run this many load-generator clients against the server, print the figures, exit.
    #[arg(long)]
    load: Option<usize>,
    /// How long the load runs.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
}

fn main() {
    let args = Args::parse();
    let content = match &args.root {
        Some(dir) if !dir.is_dir() => {
            eprintln!("http_server: --root {}: not a directory", dir.display());
            std::process::exit(2)
        }
        Some(dir) => Content::Directory(dir.clone()),
        None => Content::generated(),
    };
    // Built before the port is taken, so that a bad `--workers` is said before anything else.
    let runtime = (!args.threads).then(|| {
        let mut b = Runtime::builder();
        if let Some(w) = args.workers {
            b = b.workers(w);
        }
        b.build().unwrap_or_else(|e| {
            eprintln!("http_server: {e}");
            std::process::exit(2)
        })
    });
    let std_listener = std::net::TcpListener::bind(("127.0.0.1", args.port)).unwrap_or_else(|e| {
        eprintln!("http_server: cannot listen on port {}: {e}", args.port);
        std::process::exit(2)
    });
    let addr = std_listener
        .local_addr()
        .expect("a bound listener has an address");
    let kind = if args.threads {
        "thread per connection"
    } else {
        "threadlet actor per connection"
    };
    eprintln!("http_server: {kind}, listening on http://{addr}/");
    // The runtime is kept alive until main returns: dropping it would shut the actors down.
    match &runtime {
        None => {
            std::thread::spawn(move || http::threads_server(std_listener, content));
        }
        Some(rt) => {
            let listener = threadlet::net::TcpListener::from_std(std_listener)
                .expect("a listener can be made non-blocking");
            rt.spawn(move || http::threadlet_server(listener, content));
        }
    }
    match args.load {
        None => loop {
            std::thread::park();
        },
        Some(clients) => {
            let body = args.root.is_none().then_some(http::BODY_BYTES);
            let l = http::load(addr, clients, Duration::from_secs(args.seconds), "/", body);
            println!(
                "{clients} clients, {:.1} s: {} requests, {:.0} req/s, p50 {:?}, p99 {:?}, {} errors",
                l.elapsed.as_secs_f64(),
                l.requests,
                l.per_second(),
                l.percentile(0.50),
                l.percentile(0.99),
                l.errors
            );
        }
    }
}
