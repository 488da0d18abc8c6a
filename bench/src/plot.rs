//! SVG line plots, drawn with plotters' SVG backend: `scaling`'s, and the plot against workers
//! that every other scenario draws when it measured two or more worker counts. [`series`] turns
//! the records of a sweep into one line per runtime, [`sweep`] draws them, [`write`](fn@write)
//! writes any [`Plot`] into the plot directory.
//!
//! plotters is built without its font features: the SVG backend writes text as `<text>`
//! elements that the viewer renders with its own fonts, and plotters only estimates label sizes
//! for layout, so no font library or font file is needed at build or run time.

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use serde_json::Value;

use crate::measure::Record;
use crate::output::Out;

/// Values that span more than this ratio go on a logarithmic axis: on a linear one the smaller
/// points of a sweep over decades (players 10 to 100,000; os-threads at 100x the others'
/// per-op time) crowd into the bottom corner. Worker counts up to 16 and speedups stay linear.
const LOG_SPAN: f64 = 30.0;

/// How a line is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Measured points joined by a line, in the next palette colour.
    Measured,
    /// One measurement that has no x value of the sweep (a runtime without workers on a workers
    /// axis): dashed across the whole plot, in the next palette colour.
    Flat,
    /// A reference that was not measured (the ideal speedup): dashed grey.
    Ideal,
}

/// One line of a plot.
pub struct Series {
    /// Legend text.
    pub label: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
    /// How it is drawn.
    pub style: Style,
}

/// A plot to write.
pub struct Plot<'a> {
    /// Caption.
    pub title: &'a str,
    /// X axis description.
    pub x_desc: &'a str,
    /// Y axis description.
    pub y_desc: &'a str,
    /// Logarithmic axes (x, y).
    pub log: (bool, bool),
    /// The lines.
    pub series: Vec<Series>,
}

/// Writes `plot` as an SVG file at `path`.
pub fn write_svg(path: &Path, plot: &Plot<'_>) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("could not draw {}: {e}", path.display());
    let points = || plot.series.iter().flat_map(|s| s.points.iter().copied());
    if points().next().is_none() {
        return Err(err(&"nothing to plot"));
    }
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in points() {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    let x = axis(x0, x1, plot.log.0, false);
    let y = axis(y0, y1, plot.log.1, true);

    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    match plot.log {
        (false, false) => draw(&root, plot, x, y),
        (true, false) => draw(&root, plot, x.log_scale(), y),
        (false, true) => draw(&root, plot, x, y.log_scale()),
        (true, true) => draw(&root, plot, x.log_scale(), y.log_scale()),
    }
    .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// An axis range around `lo..=hi` with a margin; a linear one that can start at zero does.
/// `headroom` leaves the top third of a y axis free for the legend.
fn axis(lo: f64, hi: f64, log: bool, headroom: bool) -> std::ops::Range<f64> {
    if log {
        let lo = lo.max(1e-12) / 1.5;
        let hi = hi.max(lo) * 1.5;
        let top = if headroom {
            hi * (hi / lo).powf(0.5)
        } else {
            hi
        };
        return lo..top;
    }
    let span = (hi - lo).max(1e-9);
    let start = if headroom && lo >= 0.0 {
        0.0
    } else {
        lo - span.max(1.0) * 0.05
    };
    let end = if headroom {
        hi + (hi - start) * 0.5
    } else {
        hi + span.max(1.0) * 0.05
    };
    start..end
}

/// A whole number with thousands separators, for captions: 10,000,000.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut s = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            s.push(',');
        }
        s.push(c);
    }
    s
}

/// `n` of `noun`, for captions: "1 pair", "10,000 players".
pub fn quantity(n: u64, noun: &str) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{} {noun}{s}", thousands(n))
}

/// A tick label: integers plainly, thousands and millions with k and M, fractions with at
/// most two decimals.
fn label(v: &f64) -> String {
    let trim = |x: f64| {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(*v)
    }
}

/// A tick label on an axis of whole numbers (workers): fractional ticks stay unlabelled.
fn whole(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round())
    } else {
        String::new()
    }
}

fn draw<X, Y>(root: &DrawingArea<SVGBackend<'_>, Shift>, plot: &Plot<'_>, x: X, y: Y) -> DrawResult
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(plot.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(x, y)?;
    let whole_x = !plot.log.0
        && plot
            .series
            .iter()
            .all(|s| s.points.iter().all(|p| p.0.fract() == 0.0));
    let x_label: &dyn Fn(&f64) -> String = if whole_x { &whole } else { &label };
    chart
        .configure_mesh()
        .x_label_formatter(x_label)
        .y_label_formatter(&label)
        .x_desc(plot.x_desc)
        .y_desc(plot.y_desc)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    let mut color_index = 0;
    for s in &plot.series {
        if s.style == Style::Ideal {
            let style = BLACK.mix(0.45).stroke_width(2);
            chart
                .draw_series(DashedLineSeries::new(s.points.iter().copied(), 8, 6, style))?
                .label(s.label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
            continue;
        }
        let color = Palette99::pick(color_index).to_rgba();
        color_index += 1;
        let style = color.stroke_width(2);
        if s.style == Style::Flat {
            chart
                .draw_series(DashedLineSeries::new(s.points.iter().copied(), 8, 6, style))?
                .label(s.label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
            continue;
        }
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), style))?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 14))
        .border_style(BLACK.mix(0.5))
        .background_style(WHITE.mix(0.85))
        .draw()?;
    Ok(())
}

/// Where a coordinate of a sweep plot comes from: a numeric field of the records, times `scale`
/// (1e3 draws `total_s` in ms).
#[derive(Clone, Copy, Debug)]
pub struct Field<'a> {
    /// The record field.
    pub key: &'a str,
    /// Factor from the field's unit to the axis's.
    pub scale: f64,
    /// The axis description, with its unit.
    pub desc: &'a str,
}

/// The worker count, the x axis of most sweeps.
pub const WORKERS: Field<'static> = Field {
    key: "workers",
    scale: 1.0,
    desc: "worker threads",
};

impl<'a> Field<'a> {
    /// `per_op_ns` as it is, described as `desc` ("ns per hop").
    pub const fn per_op_ns(desc: &'a str) -> Field<'a> {
        Field {
            key: "per_op_ns",
            scale: 1.0,
            desc,
        }
    }

    /// `total_s` in milliseconds, described as `desc` (with "(ms)").
    pub const fn total_ms(desc: &'a str) -> Field<'a> {
        Field {
            key: "total_s",
            scale: 1e3,
            desc,
        }
    }

    fn of(&self, rec: &Record) -> Option<f64> {
        rec.get(self.key)
            .and_then(Value::as_f64)
            .map(|v| v * self.scale)
    }
}

/// The lines of a sweep: one per runtime, or per runtime and worker count where `x` is not the
/// worker count, in the order the records came. A record without `x` (a runtime without
/// workers on a workers axis) becomes a [`Style::Flat`] line across the others' x range; a
/// record without `y` (a failed or baseline measurement) is left out.
pub fn series(records: &[Record], x: &Field<'_>, y: &Field<'_>) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for rec in records {
        let Some(yv) = y.of(rec) else { continue };
        let runtime = rec.get("runtime").and_then(Value::as_str).unwrap_or("?");
        let workers = rec.get("workers").and_then(Value::as_u64);
        let (label, point, style) = match (x.of(rec), workers) {
            (Some(xv), Some(w)) if x.key != "workers" => {
                (format!("{runtime}, {w} workers"), (xv, yv), Style::Measured)
            }
            (Some(xv), _) => (runtime.to_string(), (xv, yv), Style::Measured),
            (None, _) => (
                format!("{runtime} (no {})", x.key),
                (f64::NAN, yv),
                Style::Flat,
            ),
        };
        match series.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push(point),
            None => series.push(Series {
                label,
                points: vec![point],
                style,
            }),
        }
    }
    let xs = || {
        series
            .iter()
            .filter(|s| s.style == Style::Measured)
            .flat_map(|s| s.points.iter().map(|p| p.0))
    };
    let (x0, x1) = (xs().fold(f64::MAX, f64::min), xs().fold(f64::MIN, f64::max));
    series.retain(|s| s.style == Style::Measured || x0 <= x1);
    for s in &mut series {
        if s.style == Style::Flat {
            let y = s.points[0].1;
            s.points = vec![(x0, y), (x1, y)];
        } else {
            s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
    }
    series
}

/// A plot of a sweep: what [`sweep`] draws from its records.
pub struct Sweep<'a> {
    /// File name in the plot directory.
    pub file: String,
    /// Caption.
    pub title: String,
    /// The swept thing.
    pub x: Field<'a>,
    /// The measured figure.
    pub y: Field<'a>,
}

/// Draws `records` as [`series`] into `dir`, when they hold at least two x values (a sweep of
/// one point says nothing a table does not); an axis is logarithmic where its values span more
/// than [`LOG_SPAN`]. Returns whether it wrote the file.
pub fn sweep(out: &Out, dir: &Path, plot: &Sweep<'_>, records: &[Record]) -> Result<bool, String> {
    let mut xs: Vec<f64> = records
        .iter()
        .filter(|r| plot.y.of(r).is_some())
        .filter_map(|r| plot.x.of(r))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    if xs.len() < 2 {
        return Ok(false);
    }
    let series = series(records, &plot.x, &plot.y);
    let spans = |values: &mut dyn Iterator<Item = f64>| {
        let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
        lo > 0.0 && hi / lo > LOG_SPAN
    };
    let points = || series.iter().flat_map(|s| s.points.iter().copied());
    let log = (
        spans(&mut points().map(|p| p.0)),
        spans(&mut points().map(|p| p.1)),
    );
    let drawn = Plot {
        title: &plot.title,
        x_desc: plot.x.desc,
        y_desc: plot.y.desc,
        log,
        series,
    };
    write(out, dir, &plot.file, &drawn).map(|()| true)
}

/// Writes `plot` as `dir/file`, creating `dir`, and says so in one line.
pub fn write(out: &Out, dir: &Path, file: &str, plot: &Plot<'_>) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("could not create {}: {e}", dir.display()))?;
    let path = dir.join(file);
    write_svg(&path, plot)?;
    out.line(&format!("wrote {}", path.display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rec(runtime: &str, workers: Option<u64>, per_op_ns: f64) -> Record {
        let v = json!({"scenario": "ring", "runtime": runtime, "workers": workers, "per_op_ns": per_op_ns});
        v.as_object().expect("an object").clone()
    }

    const NS: Field<'static> = Field::per_op_ns("ns per hop");

    #[test]
    fn a_sweep_is_one_line_per_runtime_and_a_runtime_without_workers_lies_flat_across() {
        let records = [
            rec("work-stealing", Some(2), 120.0),
            rec("work-stealing", Some(1), 100.0),
            rec("tokio", Some(1), 130.0),
            rec("os-threads", None, 9000.0),
            rec("tokio", Some(2), 150.0),
        ];
        let series = series(&records, &WORKERS, &NS);
        let got: Vec<_> = series
            .iter()
            .map(|s| (s.label.as_str(), s.style, s.points.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "work-stealing",
                    Style::Measured,
                    vec![(1.0, 100.0), (2.0, 120.0)]
                ),
                ("tokio", Style::Measured, vec![(1.0, 130.0), (2.0, 150.0)]),
                (
                    "os-threads (no workers)",
                    Style::Flat,
                    vec![(1.0, 9000.0), (2.0, 9000.0)]
                ),
            ]
        );
    }

    #[test]
    fn along_another_axis_a_line_names_its_worker_count_and_records_without_the_figure_are_left_out()
     {
        let mut a = rec("gil", Some(2), 50.0);
        a.insert("players".into(), json!(10));
        let mut b = rec("gil", Some(2), 60.0);
        b.insert("players".into(), json!(1000));
        let mut failed = rec("gil", Some(2), 0.0);
        failed.remove("per_op_ns");
        failed.insert("players".into(), json!(100));
        let players = Field {
            key: "players",
            scale: 1.0,
            desc: "players",
        };
        let series = series(&[a, failed, b], &players, &NS);
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].label, "gil, 2 workers");
        assert_eq!(series[0].points, vec![(10.0, 50.0), (1000.0, 60.0)]);
    }

    #[test]
    fn a_sweep_of_two_or_more_points_is_drawn_and_one_of_a_single_point_is_not() {
        let dir = std::env::temp_dir().join(format!("threadlet-bench-plot-{}", std::process::id()));
        let out = Out::new(true);
        let plot = Sweep {
            file: "ring_workers.svg".into(),
            title: "ring".into(),
            x: WORKERS,
            y: NS,
        };
        let one = [
            rec("work-stealing", Some(2), 120.0),
            rec("os-threads", None, 9000.0),
        ];
        assert_eq!(sweep(&out, &dir, &plot, &one), Ok(false));
        assert!(!dir.join("ring_workers.svg").exists());
        let two = [
            rec("work-stealing", Some(1), 100.0),
            rec("work-stealing", Some(2), 120.0),
        ];
        assert_eq!(sweep(&out, &dir, &plot, &two), Ok(true));
        let svg = std::fs::read_to_string(dir.join("ring_workers.svg")).expect("the plot");
        assert!(
            svg.contains("<svg") && svg.contains("work-stealing"),
            "{svg}"
        );
        std::fs::remove_dir_all(&dir).expect("the test's own directory");
    }

    #[test]
    fn thousands_are_separated_and_one_thing_is_singular() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(10_000_000), "10,000,000");
        assert_eq!(quantity(1, "pair"), "1 pair");
        assert_eq!(quantity(1000, "round trip"), "1,000 round trips");
    }
}
