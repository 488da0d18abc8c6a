//! Latency of an echo actor while CPU hogs occupy every worker: the fairness that time-slice
//! preemption buys. Each hog spins on `checkpoint()`; a plain thread sends the echo actor a
//! request every few milliseconds and measures the round trip.
//!
//! ```text
//! cargo run --release --example echo_latency -- --hogs-per-worker 2 --requests 200
//! ```

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use threadlet::{Mailbox, Runtime, RuntimeExt, channel};

/// Echo latency under CPU hogs.
#[derive(Parser)]
struct Args {
    /// CPU-bound actors per worker.
    #[arg(long, default_value_t = 2)]
    hogs_per_worker: usize,
    /// Requests to time (at least 1).
    #[arg(long, default_value_t = NonZeroUsize::new(200).unwrap())]
    requests: NonZeroUsize,
    /// Time slice in milliseconds (at least 1: without time slices the hogs never let the echo
    /// actor run, which is what this measures).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    slice_ms: u64,
    /// Worker threads (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
}

fn main() {
    let args = Args::parse();
    let mut b = Runtime::builder().time_slice(Duration::from_millis(args.slice_ms));
    if let Some(w) = args.workers {
        b = b.workers(w);
    }
    let rt = b.build().unwrap_or_else(|e| {
        eprintln!("echo_latency: {e}");
        std::process::exit(2)
    });
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..rt.workers() * args.hogs_per_worker)
        .map(|_| {
            let stop = stop.clone();
            rt.spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n = n.wrapping_add(1);
                    threadlet::checkpoint();
                }
                n
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let (echo, echo_done) = rt.spawn_actor(|mb: Mailbox<channel::Sender<Instant>>| {
        for reply in &mb {
            let _ = reply.send(Instant::now());
        }
    });
    let (tx, rx) = channel::bounded(1);
    let mut lat = Vec::with_capacity(args.requests.get());
    for i in 0..args.requests.get() {
        // Spread requests over the slices, not in step with them.
        std::thread::sleep(Duration::from_micros(1000 + (i as u64 * 7919) % 5000));
        let t = Instant::now();
        echo.send(tx.clone()).unwrap();
        rx.recv().unwrap();
        lat.push(t.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    drop(echo);
    echo_done.join().unwrap();
    let spins: Vec<u64> = hogs.into_iter().map(|h| h.join().unwrap()).collect();
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    println!(
        "echo latency with {} hogs on {} workers, time slice {} ms, {} requests",
        spins.len(),
        rt.workers(),
        args.slice_ms,
        lat.len()
    );
    println!(
        "  median {:.2} ms   p99 {:.2} ms   max {:.2} ms",
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        lat[lat.len() - 1].as_secs_f64() * 1e3
    );
    println!(
        "  preemptions {}; every hog made progress: {}",
        rt.stats().total().preemptions,
        spins.iter().all(|&n| n > 0)
    );
}
