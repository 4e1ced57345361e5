//! SVG charts of the experiments: lines over an axis and grouped bars.

use std::path::Path;

use plotters::prelude::*;

/// The series colours, in order.
pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// A chart's caption and axis labels.
#[derive(Debug)]
pub struct Labels<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
}

fn failed(path: &Path, error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("chart {}: {error}", path.display()))
}

fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (low, high) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !low.is_finite() || !high.is_finite() {
        return (0.0, 1.0);
    }
    let low = low.min(0.0);
    (low, if high > low { high * 1.05 } else { low + 1.0 })
}

/// One line per named series of (x, y) points; the series named in `dashed` (references,
/// not contenders) are drawn dashed.
pub fn lines(
    path: &Path,
    labels: &Labels<'_>,
    series: &[(String, Vec<(f64, f64)>)],
    dashed: &[&str],
) -> std::io::Result<()> {
    let root = SVGBackend::new(path, (760, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(path, e))?;
    let points = || series.iter().flat_map(|(_, points)| points.iter());
    let (x_low, x_high) = range(points().map(|p| p.0));
    let (y_low, y_high) = range(points().map(|p| p.1));
    let mut chart = ChartBuilder::on(&root)
        .caption(labels.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_low..x_high, y_low..y_high)
        .map_err(|e| failed(path, e))?;
    chart.configure_mesh().x_desc(labels.x).y_desc(labels.y).draw().map_err(|e| failed(path, e))?;
    for ((name, points), colour) in series.iter().zip(PALETTE.iter().cycle()) {
        let drawn = if dashed.contains(&name.as_str()) {
            chart.draw_series(DashedLineSeries::new(points.iter().copied(), 6, 4, colour.stroke_width(2)))
        } else {
            chart.draw_series(LineSeries::new(points.iter().copied(), colour.stroke_width(2)))
        };
        drawn
            .map_err(|e| failed(path, e))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| failed(path, e))?;
    root.present().map_err(|e| failed(path, e))
}

/// Grouped bars: for each category, one bar per named series (values in category order).
pub fn bars(
    path: &Path,
    labels: &Labels<'_>,
    categories: &[String],
    series: &[(String, Vec<f64>)],
) -> std::io::Result<()> {
    let root = SVGBackend::new(path, (760, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(path, e))?;
    let (_, y_high) = range(series.iter().flat_map(|(_, values)| values.iter().copied()));
    let width = categories.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(labels.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..width, 0.0..y_high)
        .map_err(|e| failed(path, e))?;
    let names = categories.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(categories.len().max(1) * 2 + 1)
        .x_label_formatter(&move |x| {
            let index = x.floor() as usize;
            let centred = (x - x.floor() - 0.5).abs() < 1e-6;
            if centred {
                names.get(index).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_desc(labels.x)
        .y_desc(labels.y)
        .draw()
        .map_err(|e| failed(path, e))?;
    let slot = 0.8 / series.len().max(1) as f64;
    for (index, ((name, values), colour)) in series.iter().zip(PALETTE.iter().cycle()).enumerate() {
        let bars = values.iter().enumerate().map(|(category, &value)| {
            let left = category as f64 + 0.1 + index as f64 * slot;
            Rectangle::new([(left, 0.0), (left + slot * 0.9, value)], colour.filled())
        });
        chart
            .draw_series(bars)
            .map_err(|e| failed(path, e))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| failed(path, e))?;
    root.present().map_err(|e| failed(path, e))
}
