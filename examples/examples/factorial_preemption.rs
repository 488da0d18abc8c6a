//! The Stackless preemption demo: two actors compute factorial(512) and
//! factorial(1024) with a safe point per multiplication, on a runtime that preempts every
//! `--ticks` safe points, like `stackless.run(100)`. Prints how often each was forced to switch.
//!
//! ```text
//! cargo run --release --example factorial_preemption -- --ticks 100
//! ```

use clap::Parser;
use threadlet::Runtime;
use threadlet_examples::cpu::factorial;

/// Two CPU-bound actors under deterministic tick preemption.
#[derive(Parser)]
struct Args {
    /// Safe points an actor may pass in one run before it must yield (at least 1).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    ticks: u32,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
}

fn main() {
    let args = Args::parse();
    let rt = match Runtime::builder()
        .workers(args.workers)
        .preempt_ticks(args.ticks)
        .time_slice(std::time::Duration::ZERO)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("factorial_preemption: {e}");
            std::process::exit(2);
        }
    };
    let switches = rt.block_on(|| {
        let a = threadlet::spawn(|| {
            factorial(512);
            threadlet::preemptions()
        });
        let b = threadlet::spawn(|| {
            factorial(1024);
            threadlet::preemptions()
        });
        [a.join().unwrap(), b.join().unwrap()]
    });
    println!("{switches:?}");
    println!(
        "factorial(512) and factorial(1024) were forced to switch {} and {} times at {} ticks \
         (one tick per multiplication; Stackless printed [13, 26] at 100 ticks, counting \
         bytecodes)",
        switches[0], switches[1], args.ticks
    );
}
