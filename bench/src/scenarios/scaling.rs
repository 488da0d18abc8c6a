//! scaling: sweeps `--workers` for each runtime of `--runtime` and writes SVG plots into
//! `--plot-dir`.
//!
//! - `count` and `factorial`: speedup over the sequential version (the same work on the main
//!   thread, measured first) against workers, with the ideal line `min(workers, actors)`;
//!   `scaling_count.svg`, `scaling_factorial.svg`.
//! - `hackysack`: kicks per second of the game (not counting setup) against players, at the
//!   largest worker count of the sweep; `hackysack_players.svg` (when `--players` has two or
//!   more sizes).
//!
//! Every measurement is also printed as usual (count and factorial records get a `speedup`
//! field). OS threads have no worker count to sweep: count and factorial skip them, hackysack
//! includes them when asked.

use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use crate::Opts;
use crate::measure::{Record, Spec, measure};
use crate::output::Out;
use crate::plot::{self, Field, Plot, Series, Style, Sweep};
use crate::runtimes::Rt;

use super::{count, factorial, hackysack};

/// What `scaling` can sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Swept {
    /// count: speedup vs workers.
    Count,
    /// factorial: speedup vs workers.
    Factorial,
    /// hackysack: kicks per second vs players.
    Hackysack,
    /// All three.
    All,
}

/// scaling's options.
#[derive(Args, Clone, Debug)]
pub struct Params {
    /// Scenarios to sweep, a comma list of: count, factorial, hackysack, all.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "count")]
    pub scenario: Vec<Swept>,
    /// count: what each actor counts down from.
    #[arg(long, default_value_t = 100_000_000)]
    pub n: u64,
    /// count: actors [default: the largest worker count of the sweep].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub actors: Option<u64>,
    /// factorial: actors.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    pub factorial_actors: u64,
    /// factorial: whose factorial each computes.
    #[arg(long, default_value_t = 1024)]
    pub factorial_n: u64,
    /// factorial: how many times over.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub times: u64,
    /// hackysack: the players of the sweep, a comma list.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10,100,1000,10000,100000"
    )]
    pub players: Vec<u64>,
    /// hackysack: kicks per game.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub kicks: u64,
}

/// The sweep, then the plots.
pub fn main(out: &mut Out, opts: &Opts, p: &Params) -> Result<(), String> {
    let dir = opts.plot_dir.as_path();
    let mut swept: Vec<Swept> = Vec::new();
    for &s in &p.scenario {
        let add = if s == Swept::All {
            vec![Swept::Count, Swept::Factorial, Swept::Hackysack]
        } else {
            vec![s]
        };
        for a in add {
            if !swept.contains(&a) {
                swept.push(a);
            }
        }
    }
    if p.players.contains(&0) {
        return Err("--players must be at least 1".into());
    }
    let mut workers = opts.workers.clone();
    workers.sort_unstable();
    let max_workers = *workers.last().ok_or("no worker counts to sweep")?;
    let cpu_runtimes: Vec<Rt> = opts
        .runtimes
        .iter()
        .copied()
        .filter(|rt| rt.has_workers())
        .collect();
    let game_runtimes: Vec<Rt> = opts
        .runtimes
        .iter()
        .copied()
        .filter(|&rt| hackysack::supports(rt))
        .collect();
    for &rt in &opts.runtimes {
        if rt == Rt::OsThreads && swept.iter().any(|&s| s != Swept::Hackysack) {
            out.line("skip: scaling of count and factorial has no os-threads version (no worker count to sweep)");
        }
        if rt == Rt::Sequential {
            out.line(
                "note: sequential is the baseline of count and factorial; it is always measured",
            );
        }
    }

    let total: usize = swept
        .iter()
        .map(|s| match s {
            Swept::Hackysack => game_runtimes.len() * p.players.len(),
            _ => 1 + cpu_runtimes.len() * workers.len(),
        })
        .sum();
    out.sweep(Some(total));
    std::fs::create_dir_all(dir).map_err(|e| format!("could not create {}: {e}", dir.display()))?;

    for s in swept {
        match s {
            Swept::Count => {
                let params = count::Params {
                    n: p.n,
                    actors: p.actors.unwrap_or(max_workers as u64),
                    ticks: 0,
                };
                let (actors, params) = (params.actors, &params);
                let series = speedups(out, opts, &cpu_runtimes, &workers, actors, |rt, w| {
                    (
                        count::spec(rt, w, opts.migrate, params),
                        Box::new(move || count::run(rt, w, opts.migrate, params)),
                    )
                });
                let title = format!("count({}) in {actors} actors: speedup over sequential", p.n);
                write(out, dir, "scaling_count.svg", &title, series)?;
            }
            Swept::Factorial => {
                let params = factorial::Params {
                    actors: p.factorial_actors,
                    n: p.factorial_n,
                    times: p.times,
                    ticks: 0,
                };
                let (actors, params) = (params.actors, &params);
                let series = speedups(out, opts, &cpu_runtimes, &workers, actors, |rt, w| {
                    (
                        factorial::spec(rt, w, opts.migrate, params),
                        Box::new(move || factorial::run(rt, w, opts.migrate, params)),
                    )
                });
                let title = format!(
                    "factorial({}) x {} in {actors} actors: speedup over sequential",
                    p.factorial_n, p.times
                );
                write(out, dir, "scaling_factorial.svg", &title, series)?;
            }
            Swept::Hackysack => {
                let mut records = Vec::new();
                for &rt in &game_runtimes {
                    let w = rt.has_workers().then_some(max_workers);
                    for &players in &p.players {
                        let spec = hackysack::spec(rt, w, opts.migrate, players, p.kicks);
                        records.extend(measure(out, spec, opts.repeat, || {
                            hackysack::run(rt, w, opts.migrate, players as usize, p.kicks)
                        }));
                    }
                }
                let plot = Sweep {
                    file: "hackysack_players.svg".into(),
                    title: format!("hackysack: kicks per second ({} kicks per game)", p.kicks),
                    x: Field {
                        key: "players",
                        scale: 1.0,
                        desc: "players",
                    },
                    y: Field {
                        key: "kicks_per_s",
                        scale: 1.0,
                        desc: "kicks per second",
                    },
                };
                plot::sweep(out, dir, &plot, &records)?;
            }
            Swept::All => unreachable!("expanded above"),
        }
    }
    Ok(())
}

/// A boxed run of one measurement.
type Run<'a> = Box<dyn FnMut() -> Result<crate::measure::Sample, String> + 'a>;

/// Measures the sequential baseline, then every runtime at every worker count, adding
/// `speedup` to each record; returns the plot's series (the ideal line first).
fn speedups<'a>(
    out: &mut Out,
    opts: &Opts,
    runtimes: &[Rt],
    workers: &[usize],
    actors: u64,
    mut make: impl FnMut(Rt, Option<usize>) -> (Spec<'static>, Run<'a>),
) -> Vec<Series> {
    let (spec, mut run) = make(Rt::Sequential, None);
    let baseline = measure(out, spec, opts.repeat, &mut run).and_then(|r| field(&r, "total_s"));
    let mut series = vec![Series {
        label: format!("ideal: min(workers, {actors} actors)"),
        points: workers
            .iter()
            .map(|&w| (w as f64, w.min(actors as usize) as f64))
            .collect(),
        style: Style::Ideal,
    }];
    let Some(baseline) = baseline else {
        return series;
    };
    let mut records = Vec::new();
    for &rt in runtimes {
        for &w in workers {
            let (spec, run) = make(rt, Some(w));
            let speedup = |rec: &mut Record| {
                if let Some(t) = field(rec, "total_s") {
                    rec.insert("speedup".into(), json!(baseline / t));
                }
            };
            records.extend(crate::measure::measure_then(
                out,
                spec,
                opts.repeat,
                run,
                speedup,
            ));
        }
    }
    let speedup = Field {
        key: "speedup",
        scale: 1.0,
        desc: "speedup",
    };
    series.extend(plot::series(&records, &plot::WORKERS, &speedup));
    series
}

fn field(rec: &Record, key: &str) -> Option<f64> {
    rec.get(key).and_then(Value::as_f64)
}

/// Writes a speedup plot (linear axes: workers against speedup).
fn write(
    out: &Out,
    dir: &std::path::Path,
    file: &str,
    title: &str,
    series: Vec<Series>,
) -> Result<(), String> {
    let plot = Plot {
        title,
        x_desc: plot::WORKERS.desc,
        y_desc: "speedup",
        log: (false, false),
        series,
    };
    plot::write(out, dir, file, &plot)
}
