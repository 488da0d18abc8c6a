//! factorial: the Stackless seed's 500 tasklets computing factorial(1024). Each of
//! `actors` actors computes `n!` in wrapping `u64` arithmetic `times` times over, with a safe
//! point per multiplication (`threadlet_examples::cpu::factorial`), and checks every product.
//!
//! `total_s` runs from the first spawn until every actor is joined; `per_op_ns` is wall time per
//! multiplication (`total / (actors * n * times)`); `preemptions` is the sum over the actors.

use std::time::Instant;

use clap::Args;
use serde_json::json;
use threadlet_examples::cpu::factorial;

use super::Figure;
use crate::Opts;
use crate::measure::{Sample, Spec, check, measure};
use crate::output::Out;
use crate::plot::{Field, quantity, thousands};
use crate::runtimes::{self, Rt, RtConfig};

/// factorial's options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// Actors computing at the same time.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    pub actors: u64,
    /// Whose factorial each computes.
    #[arg(long, default_value_t = 1024)]
    pub n: u64,
    /// How many times over each actor computes n! (the seed computed it once, in Python).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub times: u64,
    /// threadlet only: deterministic preemption every this many safe points (0: off; time
    /// slices of 10 ms stay on).
    #[arg(long, default_value_t = 0)]
    pub ticks: u32,
}

/// Every runtime has a factorial.
pub fn supports(_: Rt) -> bool {
    true
}

/// The record's identifying fields.
pub fn spec(rt: Rt, workers: Option<usize>, migrate: bool, p: &Params) -> Spec<'static> {
    let mut params = vec![
        ("actors", json!(p.actors)),
        ("n", json!(p.n)),
        ("times", json!(p.times)),
    ];
    if rt.scheduler().is_some() {
        params.push(("ticks", json!(p.ticks)));
    }
    Spec {
        scenario: "factorial",
        runtime: rt,
        workers: if rt == Rt::Sequential {
            Some(1)
        } else {
            workers
        },
        migrate,
        params,
    }
}

/// Every runtime and worker count of `opts`.
pub fn main(out: &mut Out, opts: &Opts, p: &Params) -> Result<(), String> {
    let figure = figure(p);
    super::for_each(out, opts, "factorial", supports, figure, |out, rt, w| {
        measure(out, spec(rt, w, opts.migrate, p), opts.repeat, || {
            run(rt, w, opts.migrate, p)
        })
    })
}

/// The plot against workers: the time to compute.
fn figure(p: &Params) -> Figure {
    let ticks = super::ticks_caption(p.ticks);
    Figure {
        title: format!(
            "factorial: {}, each computing {}! {} times{ticks}",
            quantity(p.actors, "actor"),
            p.n,
            thousands(p.times)
        ),
        y: Field::total_ms("wall time (ms)"),
    }
}

/// What one actor does: n! `times` times over; returns how many products were wrong. Called
/// through an opaque function pointer so that every runtime runs the same machine code.
fn work(n: u64, times: u64, expected: u64) -> u64 {
    std::hint::black_box(work_inner as fn(u64, u64, u64) -> u64)(n, times, expected)
}

fn work_inner(n: u64, times: u64, expected: u64) -> u64 {
    let mut wrong = 0;
    for _ in 0..times {
        if factorial(n) != expected {
            wrong += 1;
        }
    }
    wrong
}

/// One run on `rt`.
pub fn run(rt: Rt, workers: Option<usize>, migrate: bool, p: &Params) -> Result<Sample, String> {
    let (n, times, actors) = (p.n, p.times, p.actors as usize);
    // The reference product, on the main thread before the clock starts (the safe points do
    // nothing outside a runtime).
    let expected = factorial(n);
    let mults = actors as u64 * n * times;
    let checked = |wrong: u64| {
        check(wrong == 0, || {
            format!("{wrong} of the factorial({n}) products were wrong")
        });
    };
    match rt {
        Rt::Sequential => {
            let start = Instant::now();
            let wrong: u64 = (0..actors).map(|_| work(n, times, expected)).sum();
            let t = start.elapsed();
            checked(wrong);
            Ok(Sample::new(t).per_op(mults, t))
        }
        Rt::WorkStealing | Rt::GlobalQueue | Rt::Gil => {
            let cfg = RtConfig {
                ticks: p.ticks,
                no_time_slice: false,
            };
            let sched = rt.scheduler().expect("a threadlet runtime");
            let runtime = runtimes::threadlet(sched, super::workers(workers), cfg);
            let start = Instant::now();
            let handles: Vec<_> = (0..actors)
                .map(|_| {
                    runtimes::spawn_on(&runtime, migrate, move || {
                        (work(n, times, expected), threadlet::preemptions())
                    })
                })
                .collect();
            let (wrong, preemptions) = handles
                .into_iter()
                .map(|h| h.join().expect("factorial does not panic"))
                .fold((0, 0), |(w, p), (w1, p1)| (w + w1, p + p1));
            let t = start.elapsed();
            checked(wrong);
            Ok(Sample::new(t)
                .per_op(mults, t)
                .with("preemptions", preemptions)
                .with("stats", runtimes::stats_json(&runtime.stats())))
        }
        Rt::OsThreads => {
            let start = Instant::now();
            let mut handles = Vec::with_capacity(actors);
            for i in 0..actors {
                match runtimes::os_thread("factorial", i, actors, move || work(n, times, expected))
                {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        for h in handles {
                            let _ = h.join();
                        }
                        return Err(e);
                    }
                }
            }
            let wrong: u64 = handles
                .into_iter()
                .map(|h| h.join().expect("factorial does not panic"))
                .sum();
            let t = start.elapsed();
            checked(wrong);
            Ok(Sample::new(t).per_op(mults, t))
        }
        Rt::Tokio => {
            let runtime = runtimes::tokio(super::workers(workers));
            let start = Instant::now();
            let handles: Vec<_> = (0..actors)
                .map(|_| runtime.spawn(async move { work(n, times, expected) }))
                .collect();
            let wrong = runtime.block_on(async {
                let mut wrong = 0;
                for h in handles {
                    wrong += h.await.expect("factorial does not panic");
                }
                wrong
            });
            let t = start.elapsed();
            checked(wrong);
            Ok(Sample::new(t).per_op(mults, t))
        }
    }
}
