//! Repeating a run and reporting its median, and reading the process's resident memory. Every
//! measurement of every scenario goes through [`measure_then`], which keeps a
//! [`progress::Ticker`] running beside a measurement's runs.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::output::Out;
use crate::progress;
use crate::runtimes::Rt;

/// What one run of a scenario measured.
#[derive(Clone, Debug)]
pub struct Sample {
    /// The scenario's whole measured time.
    pub total: Duration,
    /// Operations done and the time they took, for `per_op_ns` (none: no operation defined).
    ops: Option<(u64, Duration)>,
    /// Scenario-specific fields, in order.
    extra: Vec<(&'static str, Value)>,
}

impl Sample {
    /// A sample of `total` with no operation defined.
    pub fn new(total: Duration) -> Sample {
        Sample {
            total,
            ops: None,
            extra: Vec::new(),
        }
    }

    /// `ops` operations took `over` (part of `total`, or all of it).
    pub fn per_op(mut self, ops: u64, over: Duration) -> Sample {
        self.ops = Some((ops, over));
        self
    }

    /// Adds a field.
    pub fn with(mut self, key: &'static str, value: impl Into<Value>) -> Sample {
        self.extra.push((key, value.into()));
        self
    }

    /// Adds a duration field in seconds.
    pub fn with_secs(self, key: &'static str, d: Duration) -> Sample {
        self.with(key, d.as_secs_f64())
    }

    /// `per_op_ns` of this sample.
    pub fn per_op_ns(&self) -> Option<f64> {
        self.ops
            .filter(|&(n, _)| n > 0)
            .map(|(n, d)| d.as_secs_f64() * 1e9 / n as f64)
    }
}

/// What is being measured: the identifying fields of its record.
pub struct Spec<'a> {
    /// Scenario name.
    pub scenario: &'a str,
    /// Runtime.
    pub runtime: Rt,
    /// Worker count; `None` where the runtime has none (os-threads).
    pub workers: Option<usize>,
    /// `--migrate`, recorded for the threadlet runtimes only.
    pub migrate: bool,
    /// The scenario's parameters.
    pub params: Vec<(&'static str, Value)>,
}

impl Spec<'_> {
    /// A short label for progress and failure lines.
    pub fn label(&self) -> String {
        let mut s = format!("{} {}", self.scenario, self.runtime);
        if let Some(w) = self.workers {
            s += &format!(" workers={w}");
        }
        for (k, v) in &self.params {
            s += &format!(" {k}={v}");
        }
        if self.migrate && self.runtime.scheduler().is_some() {
            s += " migrate";
        }
        s
    }
}

/// A finished measurement: the JSON object that is printed.
pub type Record = Map<String, Value>;

/// Runs `run` `repeat` times and reports the median run (with an even count the lower of the
/// two middle runs, so that every field comes from one real run). Runs are ranked by the
/// figure a scenario is about: the time per operation where one is defined (`per_op_ns`: a
/// hackysack game's kicks, not its setup too; an HTTP load of fixed length by its requests, whose
/// total time hardly varies), else the total time. The record says which (`median_by`). A run that
/// fails prints one line and ends the measurement; `None` is returned. A measurement that takes
/// longer than [`progress::INTERVAL`] says how far it got on stderr, once per interval.
pub fn measure(
    out: &mut Out,
    spec: Spec<'_>,
    repeat: usize,
    run: impl FnMut() -> Result<Sample, String>,
) -> Option<Record> {
    measure_then(out, spec, repeat, run, |_| {})
}

/// [`measure`], letting `edit` add fields to the record before it is printed.
pub fn measure_then(
    out: &mut Out,
    spec: Spec<'_>,
    repeat: usize,
    mut run: impl FnMut() -> Result<Sample, String>,
    edit: impl FnOnce(&mut Record),
) -> Option<Record> {
    out.progress(&spec.label());
    let repeats = repeat.max(1);
    let ticker = progress::Ticker::start(spec.label(), repeats);
    let mut samples = Vec::with_capacity(repeats);
    for n in 1..=repeats {
        ticker.repeat(n);
        match run() {
            Ok(s) => samples.push(s),
            Err(e) => {
                out.fail(&format!("fail: {}: {e}", spec.label()));
                return None;
            }
        }
    }
    drop(ticker);
    let (min, max) = (
        samples
            .iter()
            .map(|s| s.total)
            .min()
            .expect("one run at least"),
        samples
            .iter()
            .map(|s| s.total)
            .max()
            .expect("one run at least"),
    );
    let (median, median_by) = median_run(samples);

    let mut rec = Map::new();
    rec.insert("scenario".into(), json!(spec.scenario));
    rec.insert("runtime".into(), json!(spec.runtime.name()));
    rec.insert("workers".into(), json!(spec.workers));
    if cfg!(feature = "mimalloc") {
        // Absent: the system allocator (see `ALLOCATOR` in main.rs).
        rec.insert("alloc".into(), json!("mimalloc"));
    }
    for (k, v) in spec.params {
        rec.insert(k.into(), v);
    }
    if spec.runtime.scheduler().is_some() {
        rec.insert("migrate".into(), json!(spec.migrate));
    }
    rec.insert("total_s".into(), json!(median.total.as_secs_f64()));
    if let Some(ns) = median.per_op_ns() {
        rec.insert("per_op_ns".into(), json!(ns));
    }
    for (k, v) in median.extra {
        rec.insert(k.into(), v);
    }
    rec.insert("repeat".into(), json!(repeat));
    rec.insert("median_by".into(), json!(median_by));
    rec.insert("min_s".into(), json!(min.as_secs_f64()));
    rec.insert("max_s".into(), json!(max.as_secs_f64()));
    edit(&mut rec);
    out.record(&rec);
    Some(rec)
}

/// The median of `samples` (at least one; with an even count the lower middle) by the figure
/// a scenario is about (see [`measure`]), and that figure's field name. By time per operation
/// only where every run has one: a run with none would rank by seconds among nanoseconds.
fn median_run(mut samples: Vec<Sample>) -> (Sample, &'static str) {
    let per_op = samples.iter().all(|s| s.per_op_ns().is_some());
    let key = |s: &Sample| match s.per_op_ns() {
        Some(ns) if per_op => ns,
        _ => s.total.as_secs_f64(),
    };
    samples.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let median = samples.swap_remove((samples.len() - 1) / 2);
    (median, if per_op { "per_op_ns" } else { "total_s" })
}

/// Fails a run loudly on a wrong result: a benchmark that computed the wrong thing measured
/// nothing.
#[track_caller]
pub fn check(ok: bool, what: impl FnOnce() -> String) {
    if !ok {
        panic!("wrong result: {}", what());
    }
}

/// Resident memory of this process, from `/proc/self/status` (Linux).
pub mod rss {
    use serde_json::json;

    use super::Sample;

    fn status_kib(field: &str) -> Option<u64> {
        let s = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = s.lines().find(|l| l.starts_with(field))?;
        line[field.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    }

    /// Peak resident memory over one run: start it before the run, outside the timed region.
    pub struct Window {
        base: Option<u64>,
        reset: bool,
    }

    impl Window {
        /// Resets the kernel's peak-RSS mark (`/proc/self/clear_refs`, "5") and notes the
        /// current RSS.
        pub fn start() -> Window {
            let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
            Window {
                base: status_kib("VmRSS:"),
                reset,
            }
        }

        /// Adds `rss_bytes` (the peak during the run) and `rss_base_bytes` (before it) to the
        /// sample; nothing where the peak could not be reset or read.
        pub fn finish(self, s: Sample) -> Sample {
            match (self.reset, status_kib("VmHWM:"), self.base) {
                (true, Some(peak), Some(base)) => s
                    .with("rss_bytes", json!(peak * 1024))
                    .with("rss_base_bytes", json!(base * 1024)),
                _ => s,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Sample, median_run};
    use std::time::Duration;

    /// The median run is the median of the figure a scenario is about: for a load of fixed
    /// length, the time per request, not the total time (nearly the same in every run).
    #[test]
    fn runs_rank_by_time_per_operation_where_one_is_defined() {
        let ms = Duration::from_millis;
        // Totals ranked 1, 2, 3; requests ranked the other way round.
        let runs = vec![
            Sample::new(ms(10_001)).per_op(300, ms(10_001)),
            Sample::new(ms(10_002)).per_op(100, ms(10_002)),
            Sample::new(ms(10_003)).per_op(200, ms(10_003)),
        ];
        let (median, by) = median_run(runs);
        assert_eq!(
            (median.total, by),
            (ms(10_003), "per_op_ns"),
            "the median of 300, 200, 100 requests"
        );
        // Without operations, or where one run has none, the total time.
        let (median, by) = median_run([ms(3), ms(1), ms(2)].map(Sample::new).to_vec());
        assert_eq!((median.total, by), (ms(2), "total_s"));
        // (Ranked by the keys mixed, the run with none, 0.002 "ns", would come first.)
        let mixed = vec![
            Sample::new(ms(1)).per_op(1, ms(1)),
            Sample::new(ms(2)),
            Sample::new(ms(3)).per_op(1, ms(3)),
        ];
        assert_eq!(median_run(mixed).0.total, ms(2));
    }
}
