//! Beazley's GIL experiment: `count(n)` twice, sequentially and in two
//! actors. Under CPython's GIL the two threads took 3x longer than running sequentially; here
//! the two actors run on two workers in parallel.
//!
//! ```text
//! cargo run --release --example gil_count -- --n 100000000
//! ```

use std::time::Instant;

use clap::Parser;
use threadlet::Runtime;
use threadlet_examples::cpu::count;

/// count(n) twice: sequential vs two actors.
#[derive(Parser)]
struct Args {
    /// What each count starts from (at least 1: the ratios divide by its time).
    #[arg(long, default_value_t = 100_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    n: u64,
    /// Worker threads (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
}

fn main() {
    let args = Args::parse();
    let n = args.n;
    let t = Instant::now();
    count(n);
    count(n);
    let sequential = t.elapsed();

    let mut builder = Runtime::builder();
    if let Some(w) = args.workers {
        builder = builder.workers(w);
    }
    let rt = match builder.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gil_count: {e}");
            std::process::exit(2);
        }
    };
    let t = Instant::now();
    let a = rt.spawn(move || count(n));
    let b = rt.spawn(move || count(n));
    a.join().unwrap();
    b.join().unwrap();
    let actors = t.elapsed();
    let preempted = rt.stats().total().preemptions;

    println!("count({n}) twice");
    println!("  sequential          {:>9.3} s", sequential.as_secs_f64());
    println!(
        "  two actors          {:>9.3} s  ({} workers, {} preemptions)",
        actors.as_secs_f64(),
        rt.workers(),
        preempted
    );
    println!(
        "  ratio actors/sequential {:.2} (CPython with the GIL: 53.2 s / 17.4 s = 3.06)",
        actors.as_secs_f64() / sequential.as_secs_f64()
    );
}
