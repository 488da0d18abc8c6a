//! One module per scenario. Each has `Params` (its clap options), `run` (one run on one
//! runtime, returning a [`Sample`](crate::measure::Sample) or the one line that says why it
//! could not complete) and `main` (every runtime and worker count of the options).

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
use crate::output::Out;
use crate::runtimes::Rt;

/// Calls `f` for every runtime of `opts` that `supports` allows (and says `skip:` for the
/// others), once per worker count for runtimes that have workers, once otherwise. Turns
/// progress lines on when there is more than one measurement.
pub fn for_each(
    out: &mut Out,
    opts: &Opts,
    scenario: &str,
    supports: impl Fn(Rt) -> bool,
    mut f: impl FnMut(&mut Out, Rt, Option<usize>),
) {
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
    for &rt in &opts.runtimes {
        if !supports(rt) {
            out.skip(scenario, rt.name());
            continue;
        }
        if rt.has_workers() {
            for &w in &opts.workers {
                f(out, rt, Some(w));
            }
        } else {
            f(out, rt, None);
        }
    }
}

/// The worker count of a runtime that has workers (always `Some` there; see [`for_each`]).
pub fn workers(w: Option<usize>) -> usize {
    w.expect("runtimes with workers get a worker count")
}
