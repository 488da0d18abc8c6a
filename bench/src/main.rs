//! `threadlet-bench`: the scenario CLI (the contract every scenario keeps is below).
//!
//! ```text
//! cargo run --release -p threadlet-bench -- SCENARIO [options]
//! ```
//!
//! Every scenario runs on each runtime of `--runtime` and each worker count of `--workers`,
//! `--repeat` times, and reports the median run (ranked by time per operation, the figure a
//! scenario is about, where it defines one): a readable table, or with `--json` one JSON
//! object per measurement on its own line. A runtime a scenario has no version for is skipped
//! with one line (`skip: <scenario> has no <runtime> version`), never faked. A scenario run at
//! two or more worker counts also draws `<scenario>_workers.svg` into `--plot-dir`
//! (`scaling` draws its own plots there); a measurement that runs long says how far it got on
//! stderr every few seconds.
//!
//! | module | what it holds |
//! |---|---|
//! | `allocator` | with `--features mimalloc`, the global allocator: mimalloc, plain calls where they suffice |
//! | `runtimes` | the `--runtime` names, building threadlet and tokio runtimes, the `--migrate` spawn helpers |
//! | `measure` | repeating a run, the median, peak RSS |
//! | `progress` | a line on stderr every few seconds while a long measurement runs |
//! | `output` | the table and the JSON lines |
//! | `plot` | the SVG plots: records of a sweep to lines, lines to an SVG file |
//! | `scenarios::*` | one file per scenario, with its threadlet, OS-thread, tokio and sequential versions |

#[cfg(feature = "mimalloc")]
mod allocator;
mod measure;
mod output;
mod plot;
mod progress;
mod runtimes;
mod scenarios;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::output::Out;
use crate::runtimes::Rt;

/// With `--features mimalloc`, every runtime in this binary (threadlet, its baselines, tokio,
/// the OS-thread versions) allocates through mimalloc instead of the system allocator, so that
/// comparisons stay like for like. A record of such a run says so (`alloc=mimalloc`, in
/// `measure.rs`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: allocator::MiMalloc = allocator::MiMalloc;

/// Benchmarks of the threadlet actor runtime against its baselines, OS threads and tokio.
#[derive(Parser)]
#[command(name = "threadlet-bench", version)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
    #[command(flatten)]
    common: Common,
}

/// Options every scenario takes.
#[derive(Args, Clone, Debug)]
pub struct Common {
    /// Runtimes to measure, a comma list of: work-stealing, global-queue, gil, os-threads,
    /// tokio, sequential [default: work-stealing; scaling: work-stealing,global-queue,gil;
    /// seeds: its own choice per experiment]
    #[arg(long, global = true, value_delimiter = ',', value_enum)]
    runtime: Vec<Rt>,
    /// Worker threads: a number or a comma list [default: number of CPUs; scaling: 1,2,...,ncpu]
    #[arg(long, global = true, value_delimiter = ',')]
    workers: Vec<usize>,
    /// Runs per measurement; the median is reported.
    #[arg(long, global = true, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// One JSON object per measurement per line instead of a table.
    #[arg(long, global = true)]
    json: bool,
    /// Spawn the scenario's actors with the unsafe migration opt-in, so that they may change
    /// workers while suspended (threadlet runtimes only).
    #[arg(long, global = true)]
    migrate: bool,
    /// Where sweeps write their SVG plots: `scaling`'s, and `<scenario>_workers.svg` of any
    /// other scenario run at two or more worker counts (`--out` is an older name).
    #[arg(long, global = true, alias = "out", default_value = "docs/benchmarks")]
    plot_dir: PathBuf,
}

#[derive(Subcommand)]
enum Scenario {
    /// The Stackless hackysack game: spawn the circle, play K kicks, send every player exit, wait.
    Hackysack(scenarios::hackysack::Params),
    /// Each actor counts n down to zero with a safe point per step (Beazley's count).
    Count(scenarios::count::Params),
    /// Each actor computes n! (wrapping u64) many times over, with a safe point per
    /// multiplication, and reports its preemptions.
    Factorial(scenarios::factorial::Params),
    /// Message round trips between actor pairs.
    Pingpong(scenarios::pingpong::Params),
    /// Request/reply round trips: clients ask servers (`Addr::ask`), a reply channel per request.
    Ask(scenarios::ask::Params),
    /// A consumer selects over its mailbox and two channels, each fed by a producer.
    Select(scenarios::select::Params),
    /// Spawn N empty actors and join them all.
    Spawn(scenarios::spawn::Params),
    /// The skynet tree of actors, summing leaf indices.
    Skynet(scenarios::skynet::Params),
    /// Thread-ring: pass a token around a ring of actors.
    Ring(scenarios::ring::Params),
    /// A pool of actors that wait, then compute: how running work spreads over the workers.
    Pool(scenarios::pool::Params),
    /// The NSPR experiment: an HTTP/1.1 keep-alive server under N clients for a while.
    Http(scenarios::http::Params),
    /// Sweep worker counts for each runtime and write SVG plots.
    Scaling(scenarios::scaling::Params),
    /// Every seed experiment at its seed size, beside the seed's own figure.
    Seeds(scenarios::seeds::Params),
}

/// The resolved common options.
#[derive(Clone, Debug)]
pub struct Opts {
    /// Runtimes to measure, in order.
    pub runtimes: Vec<Rt>,
    /// Worker counts to measure, in order.
    pub workers: Vec<usize>,
    /// Runs per measurement.
    pub repeat: usize,
    /// Whether `--migrate` was given.
    pub migrate: bool,
    /// Where SVG plots go.
    pub plot_dir: PathBuf,
}

impl Opts {
    fn resolve(c: &Common, default_runtimes: &[Rt], default_workers: Vec<usize>) -> Opts {
        let mut runtimes = if c.runtime.is_empty() {
            default_runtimes.to_vec()
        } else {
            c.runtime.clone()
        };
        dedup(&mut runtimes);
        let mut workers = if c.workers.is_empty() {
            default_workers
        } else {
            c.workers.clone()
        };
        dedup(&mut workers);
        Opts {
            runtimes,
            workers,
            repeat: c.repeat as usize,
            migrate: c.migrate,
            plot_dir: c.plot_dir.clone(),
        }
    }
}

/// Removes repeated entries, keeping the first of each.
fn dedup<T: PartialEq + Clone>(v: &mut Vec<T>) {
    let mut seen = Vec::with_capacity(v.len());
    v.retain(|x| {
        if seen.contains(x) {
            false
        } else {
            seen.push(x.clone());
            true
        }
    });
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.common.workers.contains(&0) {
        eprintln!("threadlet-bench: --workers must be at least 1");
        return ExitCode::from(2);
    }
    let ncpu = num_cpus::get().max(1);
    let mut out = Out::new(cli.common.json);
    let single = |c: &Common| Opts::resolve(c, &[Rt::WorkStealing], vec![ncpu]);
    let result = match &cli.scenario {
        Scenario::Hackysack(p) => scenarios::hackysack::main(&mut out, &single(&cli.common), p),
        Scenario::Count(p) => scenarios::count::main(&mut out, &single(&cli.common), p),
        Scenario::Factorial(p) => scenarios::factorial::main(&mut out, &single(&cli.common), p),
        Scenario::Pingpong(p) => scenarios::pingpong::main(&mut out, &single(&cli.common), p),
        Scenario::Ask(p) => scenarios::ask::main(&mut out, &single(&cli.common), p),
        Scenario::Select(p) => scenarios::select::main(&mut out, &single(&cli.common), p),
        Scenario::Spawn(p) => scenarios::spawn::main(&mut out, &single(&cli.common), p),
        Scenario::Skynet(p) => scenarios::skynet::main(&mut out, &single(&cli.common), p),
        Scenario::Ring(p) => scenarios::ring::main(&mut out, &single(&cli.common), p),
        Scenario::Pool(p) => scenarios::pool::main(&mut out, &single(&cli.common), p),
        Scenario::Http(p) => scenarios::http::main(&mut out, &single(&cli.common), p),
        Scenario::Scaling(p) => {
            let opts = Opts::resolve(
                &cli.common,
                &[Rt::WorkStealing, Rt::GlobalQueue, Rt::Gil],
                (1..=ncpu).collect(),
            );
            scenarios::scaling::main(&mut out, &opts, p)
        }
        Scenario::Seeds(p) => scenarios::seeds::main(&mut out, &cli.common, p),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("threadlet-bench: {e}");
            ExitCode::from(2)
        }
    }
}
