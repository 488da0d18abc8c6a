//! One module per scenario. Each has `Params` (its clap options), `run` (one run on one
//! runtime, returning a [`Sample`](crate::measure::Sample) or the one line that says why it
//! could not complete) and `main` (every runtime and worker count of the options, through
//! [`for_each`], which also draws the plot against workers).

pub mod ask;
pub mod count;
pub mod factorial;
pub mod hackysack;
pub mod http;
pub mod pingpong;
pub mod pool;
pub mod ring;
pub mod scaling;
pub mod seeds;
pub mod select;
pub mod skynet;
pub mod spawn;

use crate::Opts;
use crate::measure::Record;
use crate::output::Out;
use crate::plot::{self, Field, Sweep};
use crate::runtimes::Rt;

/// What a scenario's plot against workers shows.
pub struct Figure {
    /// Caption: the scenario and its parameters.
    pub title: String,
    /// The figure drawn against workers.
    pub y: Field<'static>,
}

/// Calls `f` for every runtime of `opts` that `supports` allows (and says `skip:` for the
/// others), once per worker count for runtimes that have workers, once otherwise. Turns
/// progress lines on when there is more than one measurement. With two or more worker counts
/// measured, draws `figure` from the records `f` returned into `<scenario>_workers.svg` in the
/// plot directory, one line per runtime (runtimes without workers flat across).
pub fn for_each(
    out: &mut Out,
    opts: &Opts,
    scenario: &str,
    supports: impl Fn(Rt) -> bool,
    figure: Figure,
    mut f: impl FnMut(&mut Out, Rt, Option<usize>) -> Option<Record>,
) -> Result<(), String> {
    let total: usize = opts
        .runtimes
        .iter()
        .filter(|&&rt| supports(rt))
        .map(|rt| {
            if rt.has_workers() {
                opts.workers.len()
            } else {
                1
            }
        })
        .sum();
    if total > 1 {
        out.sweep(Some(total));
    }
    let mut records = Vec::new();
    for &rt in &opts.runtimes {
        if !supports(rt) {
            out.skip(scenario, rt.name());
            continue;
        }
        if rt.has_workers() {
            for &w in &opts.workers {
                records.extend(f(out, rt, Some(w)));
            }
        } else {
            records.extend(f(out, rt, None));
        }
    }
    let mut title = figure.title;
    if opts.migrate {
        title += ", --migrate";
    }
    let plot = Sweep {
        file: format!("{scenario}_workers.svg"),
        title,
        x: plot::WORKERS,
        y: figure.y,
    };
    plot::sweep(out, &opts.plot_dir, &plot, &records).map(|_| ())
}

/// What a plot's caption says of `--ticks`: nothing where it is off.
pub fn ticks_caption(ticks: u32) -> String {
    match ticks {
        0 => String::new(),
        t => format!(", preempted every {t} ticks"),
    }
}

/// The worker count of a runtime that has workers (always `Some` there; see [`for_each`]).
pub fn workers(w: Option<usize>) -> usize {
    w.expect("runtimes with workers get a worker count")
}
