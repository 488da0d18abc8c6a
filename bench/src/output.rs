//! The readable table and the JSON lines.
//!
//! With `--json`, stdout carries only JSON objects, one per measurement per line; `skip:`,
//! `fail:` and note lines go to stderr there, so that the stream stays parseable. In table mode
//! they go to stdout between the rows. Progress lines always go to stderr.

use std::io::Write;

use serde_json::Value;

use crate::measure::Record;

/// Where results go.
pub struct Out {
    json: bool,
    header: bool,
    progress: bool,
    done: usize,
    total: Option<usize>,
}

impl Out {
    /// Table or JSON output.
    pub fn new(json: bool) -> Out {
        Out {
            json,
            header: false,
            progress: false,
            done: 0,
            total: None,
        }
    }

    /// Whether records are printed as JSON.
    pub fn is_json(&self) -> bool {
        self.json
    }

    /// Turns progress lines on stderr on, for a sweep of `total` measurements (if known).
    pub fn sweep(&mut self, total: Option<usize>) {
        self.progress = true;
        self.done = 0;
        self.total = total;
    }

    /// A progress line on stderr as a measurement starts (only during sweeps).
    pub fn progress(&mut self, label: &str) {
        self.done += 1;
        if !self.progress {
            return;
        }
        match self.total {
            Some(t) => eprintln!("[{}/{t}] {label}", self.done),
            None => eprintln!("[{}] {label}", self.done),
        }
    }

    /// Prints one measurement.
    pub fn record(&mut self, rec: &Record) {
        if self.json {
            let line = serde_json::to_string(rec).expect("a record is plain JSON");
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{line}");
            let _ = stdout.flush();
            return;
        }
        if !self.header {
            self.header = true;
            println!(
                "{:<10} {:<14} {:>7} {:>12} {:>11}  details",
                "scenario", "runtime", "workers", "total", "per op"
            );
        }
        let s = |k: &str| rec.get(k).and_then(Value::as_str).unwrap_or("");
        let workers = match rec.get("workers").and_then(Value::as_u64) {
            Some(w) => w.to_string(),
            None => "-".into(),
        };
        let total = rec
            .get("total_s")
            .and_then(Value::as_f64)
            .map(secs)
            .unwrap_or_default();
        let per_op = rec
            .get("per_op_ns")
            .and_then(Value::as_f64)
            .map(|ns| format!("{ns:.1} ns"))
            .unwrap_or_else(|| "-".into());
        let details = details(rec);
        println!(
            "{:<10} {:<14} {:>7} {:>12} {:>11}  {details}",
            s("scenario"),
            s("runtime"),
            workers,
            total,
            per_op
        );
    }

    /// A line that is not a measurement: `skip:`, `fail:`, a note.
    pub fn line(&self, line: &str) {
        if self.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }

    /// "skip: `<scenario>` has no `<runtime>` version".
    pub fn skip(&self, scenario: &str, runtime: &str) {
        self.line(&format!("skip: {scenario} has no {runtime} version"));
    }

    /// A run that could not complete (an OS thread that could not be created).
    pub fn fail(&self, line: &str) {
        self.line(line);
    }
}

/// Every field of a record that the fixed columns do not show, as `key=value`.
fn details(rec: &Record) -> String {
    const SHOWN: &[&str] = &[
        "scenario",
        "runtime",
        "workers",
        "total_s",
        "per_op_ns",
        "repeat",
        "min_s",
        "max_s",
        "median_by",
        "stats",
        "rss_base_bytes",
        "migrate",
        // seeds: shown in its closing summary
        "experiment",
        "seed",
        "seed_total_s",
    ];
    let mut parts = Vec::new();
    if rec.get("migrate").and_then(Value::as_bool) == Some(true) {
        parts.push("migrate".to_string());
    }
    for (k, v) in rec {
        if SHOWN.contains(&k.as_str()) {
            continue;
        }
        let shown = if let (Some(key), Some(x)) = (k.strip_suffix("_per_s"), v.as_f64()) {
            format!("{key}/s={}", sig(x))
        } else if let (Some(key), Some(x)) = (k.strip_suffix("_s"), v.as_f64()) {
            format!("{key}={}", secs(x))
        } else if let (Some(key), Some(x)) = (k.strip_suffix("_bytes"), v.as_f64()) {
            format!("{key}={:.1} MiB", x / (1024.0 * 1024.0))
        } else {
            match v {
                Value::String(s) => format!("{k}={s}"),
                Value::Number(n) if n.is_f64() => format!("{k}={}", sig(n.as_f64().unwrap_or(0.0))),
                other => format!("{k}={other}"),
            }
        };
        parts.push(shown);
    }
    parts.join(" ")
}

/// A duration in seconds, in a readable unit.
pub fn secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}

/// A float with about four significant digits.
fn sig(x: f64) -> String {
    if x.abs() >= 1e4 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}
