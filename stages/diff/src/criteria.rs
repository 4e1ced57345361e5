//! The paper's effectiveness experiments (`docs/algorithms/change-degree.md` §1, §4): documents
//! changed by one kind of change at a time, each metric's degree against the kind's
//! reference degree. Experiment 2 varies the share of changed words in a 1,000-word
//! document (Figure 7); experiment 3 varies the document size with a quarter changed
//! (Figure 8).
//!
//! Documents are sequences of distinct words except where a kind needs repeats, so that
//! each change is exactly its kind: a shrink deletes words that occur elsewhere, a copy
//! inserts words that already occur. The changed words form one cluster, as the paper
//! arranged them. A moved cluster trades places with as many words after it, so exactly
//! its words move; when it is more than half the document that is impossible and the
//! cluster is reversed instead (every word but one changes position: x − 1 moves).

use recrawl_schemas::ChangeDegrees;
use xxhash_rust::xxh3::xxh3_64;

use crate::change::Differ;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ChangeKind {
    Add,
    Copy,
    Drop,
    Shrink,
    Replace,
    Move,
}

impl ChangeKind {
    pub const ALL: [Self; 6] = [Self::Add, Self::Copy, Self::Drop, Self::Shrink, Self::Replace, Self::Move];

    pub fn name(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Copy => "copy",
            Self::Drop => "drop",
            Self::Shrink => "shrink",
            Self::Replace => "replace",
            Self::Move => "move",
        }
    }

    /// The reference degree of changing `x` words of an `n`-word document (§1); α weights
    /// copies and shrinks, β moves.
    pub fn reference(self, n: usize, x: usize, alpha: f64, beta: f64) -> f64 {
        let (n, x) = (n as f64, x as f64);
        match self {
            Self::Add => x / (n + x),
            Self::Copy => alpha * x / (n + x),
            Self::Drop | Self::Replace => x / n,
            Self::Shrink => alpha * x / n,
            Self::Move => beta * x.min(n - 1.0) / n,
        }
    }
}

fn word(tag: &str, index: usize) -> u64 {
    xxh3_64(format!("{tag}{index}").as_bytes())
}

/// SplitMix64: a seeded, dependency-free choice of which existing words a copy repeats.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The old and new word sequences (word hashes) for `x` words of an `n`-word document
/// changed by `kind`.
pub fn change_pair(kind: ChangeKind, n: usize, x: usize) -> (Vec<u64>, Vec<u64>) {
    change_pair_of(kind, n, x, word)
}

/// [`change_pair`] with words made by `word(tag, index)`: distinct (tag, index) pairs
/// must give distinct words.
pub fn change_pair_of<T: Clone>(
    kind: ChangeKind,
    n: usize,
    x: usize,
    word: impl Fn(&str, usize) -> T,
) -> (Vec<T>, Vec<T>) {
    let x = x.min(n);
    let distinct: Vec<T> = (0..n).map(|i| word("w", i)).collect();
    // Deleted, replaced and moved clusters sit in the middle; insertions go there too.
    let start = (n - x) / 2;
    let cluster = start..start + x;
    match kind {
        ChangeKind::Add => {
            let mut new = distinct.clone();
            new.splice(n / 2..n / 2, (0..x).map(|i| word("new", i)));
            (distinct, new)
        }
        ChangeKind::Copy => {
            let mut state = n as u64 ^ (x as u64) << 32;
            let copies: Vec<T> =
                (0..x).map(|_| distinct[(splitmix(&mut state) % n as u64) as usize].clone()).collect();
            let mut new = distinct.clone();
            new.splice(n / 2..n / 2, copies);
            (distinct, new)
        }
        ChangeKind::Drop => {
            let mut new = distinct.clone();
            new.drain(cluster);
            (distinct, new)
        }
        ChangeKind::Shrink => {
            // The cluster repeats words from around it, so deleting it leaves each word; in
            // random order, so its word windows are not the surrounding ones.
            let outside = (n - x).max(1);
            let mut old: Vec<T> = (0..n - x).map(|i| word("w", i)).collect();
            let mut state = n as u64 ^ (x as u64) << 32;
            let repeats = (0..x).map(|_| word("w", (splitmix(&mut state) % outside as u64) as usize));
            old.splice(start..start, repeats);
            let mut new = old.clone();
            new.drain(cluster);
            (old, new)
        }
        ChangeKind::Replace => {
            let mut new = distinct.clone();
            new.splice(cluster, (0..x).map(|i| word("new", i)));
            (distinct, new)
        }
        ChangeKind::Move => {
            let mut new = distinct.clone();
            if 2 * x <= n {
                // The cluster trades places with the x words after it.
                let start = (n - 2 * x) / 2;
                new[start..start + 2 * x].rotate_left(x);
            } else {
                new[cluster].reverse();
            }
            (distinct, new)
        }
    }
}

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

/// Reads one metric's degree (null when the metric was off).
pub type MetricReader = fn(&ChangeDegrees) -> Option<f64>;

/// The metrics compared, in report order, with how to read each from the degrees.
pub const METRICS: [(&str, MetricReader); 6] = [
    ("bw", |d| Some(d.bw)),
    ("cos", |d| d.cos),
    ("wd", |d| d.wd),
    ("ed", |d| d.ed),
    ("sh", |d| d.sh),
    ("ied", |d| Some(d.ied)),
];

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
    use crate::change::DiffSettings;

    fn metric(name: &str) -> MetricReader {
        METRICS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f).expect("metric")
    }

    #[test]
    fn each_pair_changes_exactly_what_its_kind_says() {
        let n = 40;
        for kind in ChangeKind::ALL {
            let (old, new) = change_pair(kind, n, 10);
            let expected_len = match kind {
                ChangeKind::Add | ChangeKind::Copy => n + 10,
                ChangeKind::Drop | ChangeKind::Shrink => n - 10,
                ChangeKind::Replace | ChangeKind::Move => n,
            };
            assert_eq!((old.len(), new.len()), (n, expected_len), "{}", kind.name());
            let mut sorted_old = old.clone();
            let mut sorted_new = new.clone();
            sorted_old.sort_unstable();
            sorted_new.sort_unstable();
            let same_bag = sorted_old == sorted_new;
            assert_eq!(
                same_bag,
                kind == ChangeKind::Move,
                "{}: only a move keeps the bag of words",
                kind.name()
            );
        }
        let (old, new) = change_pair(ChangeKind::Shrink, n, 10);
        assert!(
            new.iter().all(|w| old.contains(w)) && old.iter().all(|w| new.contains(w)),
            "shrink keeps every word"
        );
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
