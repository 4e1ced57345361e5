//! The `criteria` command's files: a CSV and an SVG chart per kind of change, and a
//! summary of each metric's deviation from the reference degree (the paper's Table 1 in
//! numbers).

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

use recrawl_diff::criteria::ChangeKind;

use recrawl_diff::change::METRICS;

use super::trials::{deviation, Trial};
use crate::chart::PALETTE;
use crate::report::{write, ReportError};

/// What the x axis of an experiment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Experiment 2: share of the words changed, percent.
    ShareChanged,
    /// Experiment 3: words in the document (log scale), a quarter changed.
    Words,
}

impl Axis {
    fn x(self, trial: &Trial) -> f64 {
        match self {
            Self::ShareChanged => (100.0 * trial.changed as f64 / trial.words as f64).round(),
            Self::Words => trial.words as f64,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::ShareChanged => "words changed (%)",
            Self::Words => "words in the document (a quarter changed)",
        }
    }
}

fn format_degree(value: Option<f64>) -> String {
    value.map_or_else(String::new, |v| format!("{v:.4}"))
}

/// One kind's trials as CSV: x, changed words, words, reference, then each metric.
pub fn kind_csv(trials: &[Trial], kind: ChangeKind, axis: Axis) -> String {
    let x_name = match axis {
        Axis::ShareChanged => "changed_percent",
        Axis::Words => "words",
    };
    let mut csv = format!("{x_name},changed_words,words,reference");
    for (name, _) in METRICS {
        csv.push(',');
        csv.push_str(name);
    }
    csv.push('\n');
    for trial in trials.iter().filter(|t| t.kind == kind) {
        let _ = write!(csv, "{},{},{},{:.4}", axis.x(trial), trial.changed, trial.words, trial.reference);
        for (_, read) in METRICS {
            let _ = write!(csv, ",{}", format_degree(read(&trial.degrees)));
        }
        csv.push('\n');
    }
    csv
}

/// Mean absolute deviation from the reference per metric (rows) and kind (columns).
pub fn summary_csv(trials: &[Trial]) -> String {
    let mut csv = String::from("metric");
    for kind in ChangeKind::ALL {
        let _ = write!(csv, ",{}", kind.name());
    }
    csv.push('\n');
    for (name, read) in METRICS {
        csv.push_str(name);
        for kind in ChangeKind::ALL {
            let _ = write!(csv, ",{}", format_degree(deviation(trials, kind, read).map(|d| d.mean_absolute)));
        }
        csv.push('\n');
    }
    csv
}

/// The summary as a Markdown table: deviation and verdict per metric and kind.
pub fn summary_markdown(trials: &[Trial], title: &str) -> String {
    let mut md = format!("# {title}\n\nMean absolute deviation from the reference degree, and the verdict \
        (effective within {}; otherwise too sensitive or too insensitive by the sign of the mean deviation).\n\n",
        super::trials::Deviation::EFFECTIVE);
    md.push_str("| metric |");
    for kind in ChangeKind::ALL {
        let _ = write!(md, " {} |", kind.name());
    }
    md.push_str("\n|---|");
    md.push_str(&"---|".repeat(ChangeKind::ALL.len()));
    md.push('\n');
    for (name, read) in METRICS {
        let _ = write!(md, "| {name} |");
        for kind in ChangeKind::ALL {
            match deviation(trials, kind, read) {
                Some(d) => {
                    let _ = write!(md, " {:.3} {} |", d.mean_absolute, d.verdict());
                }
                None => md.push_str(" – |"),
            }
        }
        md.push('\n');
    }
    md
}

/// One colour per metric of [`METRICS`], from the charts' palette (BW in grey).
const COLOURS: [RGBColor; 6] =
    [RGBColor(150, 150, 150), PALETTE[0], PALETTE[2], PALETTE[1], PALETTE[4], PALETTE[3]];

/// One kind's chart: the reference and every metric against the x axis.
pub fn kind_chart(trials: &[Trial], kind: ChangeKind, axis: Axis, path: &Path) -> Result<(), ReportError> {
    let chart_error = |reason: String| ReportError::Chart { path: path.to_owned(), reason };
    let points: Vec<&Trial> = trials.iter().filter(|t| t.kind == kind).collect();
    let root = SVGBackend::new(path, (720, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| chart_error(e.to_string()))?;
    let x_max = points.iter().map(|t| axis.x(t)).fold(1.0, f64::max);
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(format!("{}: degree of change by metric", kind.name()), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50);
    let series = |read: &dyn Fn(&Trial) -> Option<f64>| -> Vec<(f64, f64)> {
        points.iter().filter_map(|t| read(t).map(|y| (axis.x(t), y))).collect()
    };
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart.map_err(|e| chart_error(e.to_string()))?;
            chart
                .configure_mesh()
                .x_desc(axis.label())
                .y_desc("degree")
                .draw()
                .map_err(|e| chart_error(e.to_string()))?;
            chart
                .draw_series(LineSeries::new(series(&|t| Some(t.reference)), BLACK.stroke_width(3)))
                .map_err(|e| chart_error(e.to_string()))?
                .label("reference")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(3)));
            for ((name, read), colour) in METRICS.iter().zip(COLOURS) {
                let line = series(&|t| read(&t.degrees));
                chart
                    .draw_series(LineSeries::new(line, colour.stroke_width(2)))
                    .map_err(|e| chart_error(e.to_string()))?
                    .label(*name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                    });
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|e| chart_error(e.to_string()))?;
        }};
    }
    match axis {
        Axis::ShareChanged => draw!(builder.build_cartesian_2d(0.0..x_max, 0.0..1.05)),
        Axis::Words => draw!(builder.build_cartesian_2d((2.0..x_max * 1.2).log_scale(), 0.0..1.05)),
    }
    root.present().map_err(|e| chart_error(e.to_string()))
}

/// Writes `<kind>.csv` and `<kind>.svg` for every kind, `summary.csv` and `summary.md`
/// into `dir`; returns the Markdown summary.
pub fn write_report(trials: &[Trial], axis: Axis, title: &str, dir: &Path) -> Result<String, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io { path: dir.to_owned(), source })?;
    for kind in ChangeKind::ALL {
        write(dir.join(format!("{}.csv", kind.name())), &kind_csv(trials, kind, axis))?;
        kind_chart(trials, kind, axis, &dir.join(format!("{}.svg", kind.name())))?;
    }
    write(dir.join("summary.csv"), &summary_csv(trials))?;
    let markdown = summary_markdown(trials, title);
    write(dir.join("summary.md"), &markdown)?;
    Ok(markdown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::criteria::trials::{by_share_changed, by_size};
    use recrawl_diff::change::{DiffSettings, Differ};

    /// The committed reports (`reports/`) are what the code computes now.
    #[test]
    fn the_committed_summaries_are_current() {
        let differ = Differ::new(DiffSettings::default());
        let regenerate = "cargo run --release --bin recrawl-lab -- criteria [--sizes] --out reports/…";
        assert_eq!(
            summary_csv(&by_share_changed(&differ, 1000, 0.75, 0.75)),
            include_str!("../../../../reports/criteria/summary.csv"),
            "stale: {regenerate}"
        );
        assert_eq!(
            summary_csv(&by_size(&differ, 0.75, 0.75)),
            include_str!("../../../../reports/criteria-sizes/summary.csv"),
            "stale: {regenerate}"
        );
    }

    #[test]
    fn writes_a_csv_and_a_chart_per_kind_and_the_summary() {
        let trials = by_share_changed(&Differ::new(DiffSettings::default()), 200, 0.75, 0.75);
        let dir = tempfile::tempdir().expect("tempdir");
        let markdown = write_report(&trials, Axis::ShareChanged, "test", dir.path()).expect("report");
        for kind in ChangeKind::ALL {
            let csv = std::fs::read_to_string(dir.path().join(format!("{}.csv", kind.name()))).expect("csv");
            assert_eq!(csv.lines().count(), 20, "a header and 19 shares");
            assert!(csv
                .starts_with("changed_percent,changed_words,words,reference,bw,cos,wd,ed,sh,ied\n5,10,200,"));
            let svg = std::fs::read_to_string(dir.path().join(format!("{}.svg", kind.name()))).expect("svg");
            assert!(svg.contains("<svg") && svg.contains("reference") && svg.contains("ied"));
        }
        let summary = std::fs::read_to_string(dir.path().join("summary.csv")).expect("summary");
        assert_eq!(summary.lines().next(), Some("metric,add,copy,drop,shrink,replace,move"));
        assert!(summary.lines().any(|l| l.starts_with("ied,")));
        assert!(markdown.contains("| ied | ") && markdown.contains("effective"));
    }
}
