//! The experiments' trials: document pairs changed by one kind of change, each metric's
//! degree against the kind's reference, and how far each metric deviates from it.

use recrawl_diff::change::{Differ, MetricReader};
use recrawl_diff::criteria::{change_pair, ChangeKind};
use recrawl_schemas::ChangeDegrees;

/// One document pair's degrees against its reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub kind: ChangeKind,
    /// Words in the old document.
    pub words: usize,
    /// Words changed.
    pub changed: usize,
    pub reference: f64,
    pub degrees: ChangeDegrees,
}

impl Trial {
    pub fn run(differ: &Differ, kind: ChangeKind, n: usize, x: usize, alpha: f64, beta: f64) -> Self {
        let (old, new) = change_pair(kind, n, x);
        let degrees = differ.degrees(&old, &new, old != new, false);
        Self { kind, words: n, changed: x, reference: kind.reference(n, x, alpha, beta), degrees }
    }
}

/// Experiment 2: 5 %, 10 % … 95 % of `n` words changed, every kind.
pub fn by_share_changed(differ: &Differ, n: usize, alpha: f64, beta: f64) -> Vec<Trial> {
    ChangeKind::ALL
        .iter()
        .flat_map(|&kind| (1..=19).map(move |step| (kind, (n * step * 5).div_ceil(100))))
        .map(|(kind, x)| Trial::run(differ, kind, n, x, alpha, beta))
        .collect()
}

/// Experiment 3: documents of 2², 2³ … 2¹³ words, a quarter changed, every kind.
pub fn by_size(differ: &Differ, alpha: f64, beta: f64) -> Vec<Trial> {
    ChangeKind::ALL
        .iter()
        .flat_map(|&kind| (2..=13).map(move |power| (kind, 1usize << power)))
        .map(|(kind, n)| Trial::run(differ, kind, n, n / 4, alpha, beta))
        .collect()
}

/// How far one metric is from the reference over one kind's trials.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Deviation {
    /// Mean |degree − reference|.
    pub mean_absolute: f64,
    /// Mean (degree − reference): positive means too sensitive.
    pub mean_signed: f64,
}

impl Deviation {
    /// Within this mean absolute deviation a metric counts as effective for a kind.
    pub const EFFECTIVE: f64 = 0.05;

    pub fn verdict(&self) -> &'static str {
        if self.mean_absolute <= Self::EFFECTIVE {
            "effective"
        } else if self.mean_signed > 0.0 {
            "too sensitive"
        } else {
            "too insensitive"
        }
    }
}

/// Each metric's deviation from the reference over the trials of `kind`; `None` for a
/// metric that was not computed.
pub fn deviation(trials: &[Trial], kind: ChangeKind, metric: MetricReader) -> Option<Deviation> {
    let errors: Vec<f64> = trials
        .iter()
        .filter(|t| t.kind == kind)
        .map(|t| metric(&t.degrees).map(|d| d - t.reference))
        .collect::<Option<_>>()?;
    if errors.is_empty() {
        return None;
    }
    let count = errors.len() as f64;
    Some(Deviation {
        mean_absolute: errors.iter().map(|e| e.abs()).sum::<f64>() / count,
        mean_signed: errors.iter().sum::<f64>() / count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use recrawl_diff::change::{DiffSettings, METRICS};

    fn metric(name: &str) -> MetricReader {
        METRICS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f).expect("metric")
    }

    #[test]
    fn ied_is_effective_for_every_kind_and_the_baselines_behave_as_table_1() {
        let differ = Differ::new(DiffSettings::default());
        let trials = by_share_changed(&differ, 1000, 0.75, 0.75);
        assert_eq!(trials.len(), 6 * 19);
        for kind in ChangeKind::ALL {
            let ied = deviation(&trials, kind, metric("ied")).expect("ied");
            assert!(ied.mean_absolute < Deviation::EFFECTIVE, "{}: {ied:?}", kind.name());
        }
        assert!(trials.iter().all(|t| t.degrees.bw == 1.0), "BW is always 1");
        for trial in trials.iter().filter(|t| t.kind == ChangeKind::Move) {
            assert_eq!((trial.degrees.cos, trial.degrees.wd), (Some(0.0), Some(0.0)), "order-blind on moves");
        }
        let ed_on_moves = deviation(&trials, ChangeKind::Move, metric("ed")).expect("ed");
        assert_eq!(ed_on_moves.verdict(), "too sensitive", "ED counts a move as a replace");
        let wd_on_replace = deviation(&trials, ChangeKind::Replace, metric("wd")).expect("wd");
        assert_eq!(wd_on_replace.verdict(), "effective");
        let cos_on_copy = deviation(&trials, ChangeKind::Copy, metric("cos")).expect("cos");
        assert_eq!(cos_on_copy.verdict(), "too insensitive");
    }

    #[test]
    fn shingling_is_too_sensitive_on_small_documents() {
        let differ = Differ::new(DiffSettings::default());
        let trials = by_size(&differ, 0.75, 0.75);
        let replace = |n: usize| {
            trials.iter().find(|t| t.kind == ChangeKind::Replace && t.words == n).expect("trial").degrees.sh
        };
        assert_eq!(replace(4), Some(1.0), "one word of four changes every 10-word window");
        assert!(replace(8192).is_some_and(|d| d < 0.5));
        for trial in trials.iter().filter(|t| t.kind == ChangeKind::Replace) {
            assert!((trial.degrees.ied - trial.reference).abs() < 1e-9, "{} words", trial.words);
        }
    }
}
