//! SVG line plots for `scaling`, drawn with plotters' SVG backend.
//!
//! plotters is built without its font features: the SVG backend writes text as `<text>`
//! elements that the viewer renders with its own fonts, and plotters only estimates label sizes
//! for layout, so no font library or font file is needed at build or run time.

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

/// One line of a plot.
pub struct Series {
    /// Legend text.
    pub label: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
    /// Drawn as a dashed grey reference line (the ideal speedup).
    pub reference: bool,
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
        if s.reference {
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
