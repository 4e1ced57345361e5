//! A page's change rate from few, unevenly spaced visits, shrunk toward its group
//! (`docs/algorithms/freshness-limits.md`, "Learning the rates").
//!
//! A visit after an interval t finds the page changed with probability 1 − e^{−λt}
//! (changes arrive as a Poisson process of rate λ). The likelihood of X changes in n
//! comparisons at a spacing s is (1 − e^{−λs})^X·e^{−λs(n−X)}; its maximum is Cho &
//! Garcia-Molina's estimate, which is 0 after no change and infinite after all changed.
//! The posterior over a grid of rates, with the prior fitted to the comparisons of the
//! group's pages (empirical Bayes), stays finite and moves toward the group when a page
//! has been seen only a few times. A page whose `Last-Modified` dates are believed is
//! judged by the changes they date instead, λ^K·e^{−λQ} (`crate::modified`).

use std::collections::btree_map::{BTreeMap, Entry};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use crate::small_keys::SmallKeys;

/// Grid points, log-spaced from [`LOWEST_RATE`] to [`HIGHEST_RATE`] per period.
const RATE_BINS: usize = 24;
/// Below it a page counts as static: one change in 10,000 periods, 14 months of hourly
/// ones (the simulator's), a week of the stage's default minute-long ones.
pub const LOWEST_RATE: f64 = 1e-4;
/// Above it a page changes between any two visits of any scheduler.
pub const HIGHEST_RATE: f64 = 20.0;

/// The grid's spacing in ln λ.
fn log_step() -> f64 {
    (HIGHEST_RATE / LOWEST_RATE).ln() / (RATE_BINS - 1) as f64
}

/// The grid's rates, computed once: the posterior visits every one per estimate.
fn grid() -> &'static [f64; RATE_BINS] {
    static GRID: LazyLock<[f64; RATE_BINS]> =
        LazyLock::new(|| std::array::from_fn(|bin| LOWEST_RATE * (log_step() * bin as f64).exp()));
    &GRID
}

/// ln of each grid rate, for the dated likelihood.
fn log_grid() -> &'static [f64; RATE_BINS] {
    static LOG_GRID: LazyLock<[f64; RATE_BINS]> = LazyLock::new(|| grid().map(f64::ln));
    &LOG_GRID
}

/// EM steps from a flat prior when a group's prior is fitted: 20, 50 and 200 gave the
/// simulator the same freshness, and a fit of a few hundred distinct evidences takes well
/// under a millisecond.
const FIT_STEPS: usize = 20;

/// The most comparisons an evidence keeps: a page seen more often counts as seen this
/// often, at its share of changes. Its likelihood is then already narrower than the
/// grid's step, and with the spacing's buckets this bounds the distinct evidences a group
/// can have (33·34/2 change counts times the buckets), hence a fit's cost.
const EVIDENCE_COMPARISONS: u32 = 32;
/// Spacing buckets per doubling: 19 % apart, finer than the rate grid's 70 %.
const SPACING_STEPS_PER_DOUBLING: f64 = 4.0;

/// What a page's visits say of its rate, as its group's prior is fitted to them. Pages
/// with the same evidence are counted together, so a fit costs the distinct evidences,
/// not the pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RateEvidence {
    /// Its changes in its comparisons (at most `EVIDENCE_COMPARISONS`) and their
    /// spacing, in buckets of `SPACING_STEPS_PER_DOUBLING` a doubling.
    Compared { comparisons: u32, changes: u32, spacing_step: i32 },
    /// Changes its `Last-Modified` dates gave (at most `EVIDENCE_COMPARISONS`) and the
    /// periods known quiet, in the same buckets (`crate::modified`).
    Dated { changes: u32, quiet_step: i32 },
}

/// A spacing or a span in periods as a bucket of [`SPACING_STEPS_PER_DOUBLING`] a
/// doubling, from a sixteenth of a period to `most`; anything else is taken as one.
fn period_step(periods: f64, most: f64) -> i32 {
    let periods = if periods.is_finite() && periods > 0.0 { periods.clamp(1.0 / 16.0, most) } else { 1.0 };
    (periods.log2() * SPACING_STEPS_PER_DOUBLING).round() as i32
}

fn step_periods(step: i32) -> f64 {
    (f64::from(step) / SPACING_STEPS_PER_DOUBLING).exp2()
}

impl RateEvidence {
    pub fn new(comparisons: u32, changes: u32, spacing: f64) -> Self {
        let changes = changes.min(comparisons);
        let (comparisons, changes) = if comparisons > EVIDENCE_COMPARISONS {
            let share = f64::from(changes) / f64::from(comparisons);
            (EVIDENCE_COMPARISONS, (share * f64::from(EVIDENCE_COMPARISONS)).round() as u32)
        } else {
            (comparisons, changes)
        };
        Self::Compared { comparisons, changes, spacing_step: period_step(spacing, 1e6) }
    }

    /// `changes` dated over `quiet` periods; more changes count as
    /// `EVIDENCE_COMPARISONS` over the quiet time in the same ratio, which keeps the
    /// likelihood's peak, K / Q.
    pub fn dated(changes: u32, quiet: f64) -> Self {
        let (changes, quiet) = if changes > EVIDENCE_COMPARISONS {
            (EVIDENCE_COMPARISONS, quiet * f64::from(EVIDENCE_COMPARISONS) / f64::from(changes))
        } else {
            (changes, quiet)
        };
        // Up to a hundred million periods: 11,000 years of hourly ones.
        Self::Dated { changes, quiet_step: period_step(quiet, 1e8) }
    }

    fn likelihood(&self) -> RateLikelihood {
        match *self {
            Self::Compared { comparisons, changes, spacing_step } => {
                RateLikelihood::new(comparisons, changes, step_periods(spacing_step))
            }
            Self::Dated { changes, quiet_step } => RateLikelihood::dated(changes, step_periods(quiet_step)),
        }
    }
}

/// The group's pages counted by their rate evidence, each evidence with its likelihood
/// relative to the largest, computed when it is first counted: a fit then costs only its
/// EM steps, which matters when a partition holds thousands of groups.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateCounts(BTreeMap<RateEvidence, Counted>);

#[derive(Debug, Clone, PartialEq)]
struct Counted {
    pages: u64,
    /// Boxed: the map's nodes shift their values as entries come and go.
    relative_likelihood: Box<[f64; RATE_BINS]>,
}

impl RateCounts {
    fn add(&mut self, evidence: RateEvidence) {
        let counted = self.0.entry(evidence).or_insert_with(|| Counted {
            pages: 0,
            relative_likelihood: Box::new(evidence.likelihood().relative()),
        });
        counted.pages = counted.pages.saturating_add(1);
    }

    fn remove(&mut self, evidence: RateEvidence) {
        if let Entry::Occupied(mut entry) = self.0.entry(evidence) {
            match entry.get().pages.checked_sub(1) {
                Some(left) if left > 0 => entry.get_mut().pages = left,
                _ => {
                    entry.remove();
                }
            }
        }
    }

    /// A URL's evidence changed from `before` to `after` (either absent).
    pub fn replace(&mut self, before: Option<RateEvidence>, after: Option<RateEvidence>) {
        // A failure leaves the evidence as it was; removing its last page would drop the
        // cached likelihood only to compute it again.
        if before == after {
            return;
        }
        before.into_iter().for_each(|evidence| self.remove(evidence));
        after.into_iter().for_each(|evidence| self.add(evidence));
    }

    pub fn total(&self) -> u64 {
        self.0.values().fold(0, |total, counted| total.saturating_add(counted.pages))
    }
}

/// The prior over the grid: the mixing distribution under which the group's evidence is
/// most likely (each EM step gives every grid rate the mean over the pages of its
/// posterior weight under the previous step's prior), as many pages' worth as the group
/// has, plus one page's worth spread evenly, so no rate is ruled out and an empty group
/// gives a flat prior in log λ.
#[derive(Debug, Clone, PartialEq)]
pub struct RatePrior {
    log_weights: [f64; RATE_BINS],
    /// The prior's mean rate per period.
    pub mean: f64,
    /// The pages it was learned from (0: the flat prior).
    pub pages: u64,
    compared: PosteriorMemo,
}

/// Entries a memo keeps: past them it starts over, so a group whose pages all differ
/// holds at most this many (about 50 B each).
const MEMO_CAPACITY: usize = 4096;

/// The posteriors a prior has given for comparisons, by (comparisons, changes, the
/// spacing's bits): a group's pages share few of them, and a prior lives a period, so most
/// requests find theirs here instead of evaluating the likelihood and the posterior over
/// the grid (about 70 exponentials and logarithms).
/// Not part of the prior's value: a clone starts empty and equality ignores it. Behind a
/// lock, uncontended, as a stage's state is shared across its tasks' awaits.
#[derive(Debug, Default)]
struct PosteriorMemo(Mutex<HashMap<(u32, u32, u64), RateEstimate, SmallKeys>>);

impl PosteriorMemo {
    /// The entries; a panic while they were held left them whole (one insert or clear).
    fn entries(&self) -> MutexGuard<'_, HashMap<(u32, u32, u64), RateEstimate, SmallKeys>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Clone for PosteriorMemo {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for PosteriorMemo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl RatePrior {
    pub fn new(counts: &RateCounts) -> Self {
        let pages = counts.total();
        let evidence: Vec<(f64, &[f64; RATE_BINS])> =
            counts.0.values().map(|counted| (counted.pages as f64, &*counted.relative_likelihood)).collect();
        let mut mixing = [1.0 / RATE_BINS as f64; RATE_BINS];
        for _ in 0..if evidence.is_empty() { 0 } else { FIT_STEPS } {
            let mut next = [0.0; RATE_BINS];
            for &(count, likelihood) in &evidence {
                let joint: [f64; RATE_BINS] = std::array::from_fn(|bin| mixing[bin] * likelihood[bin]);
                let total: f64 = joint.iter().sum();
                if total > 0.0 {
                    let share = count / total;
                    next.iter_mut().zip(joint).for_each(|(next, joint)| *next += share * joint);
                }
            }
            let sum: f64 = next.iter().sum();
            if sum > 0.0 {
                mixing = next.map(|share| share / sum);
            }
        }
        let spread = 1.0 / RATE_BINS as f64;
        let mut log_weights = [0.0; RATE_BINS];
        let (mut weighted, mut total) = (0.0, 0.0);
        for ((log_weight, share), rate) in log_weights.iter_mut().zip(mixing).zip(grid()) {
            let weight = pages as f64 * share + spread;
            *log_weight = weight.ln();
            weighted += weight * rate;
            total += weight;
        }
        Self { log_weights, mean: weighted / total, pages, compared: PosteriorMemo::default() }
    }

    /// [`posterior_rate`]: the posterior after `changes` changes in `comparisons`
    /// comparisons `spacing` periods apart, computed once per prior.
    pub fn compared_posterior(&self, comparisons: u32, changes: u32, spacing: f64) -> RateEstimate {
        let key = (comparisons, changes, spacing.to_bits());
        let mut memo = self.compared.entries();
        if let Some(estimate) = memo.get(&key) {
            return *estimate;
        }
        let estimate = posterior_rate(self, comparisons, changes, spacing);
        if memo.len() >= MEMO_CAPACITY {
            memo.clear();
        }
        memo.insert(key, estimate);
        estimate
    }
}

impl Default for RatePrior {
    fn default() -> Self {
        Self::new(&RateCounts::default())
    }
}

/// A page's posterior change rate per period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateEstimate {
    /// Posterior mean.
    pub rate: f64,
    /// The 80 % credible interval: the posterior's 10th and 90th percentiles, each grid
    /// point's mass spread over its cell in ln λ.
    pub low: f64,
    pub high: f64,
}

/// The centre of a rate's 80 % credible interval on the log scale, √(low·high), where the
/// `freshness` index scores a page. On the log-spaced grid the posterior of a page seen a
/// few times has a long upper tail that pulls its mean far above most of its mass, and
/// the index punishes that: it rises as λτ²/2 for slow pages, so a page seen unchanged
/// looks overdue, and falls as 1/λ for fast ones, so a page seen changed is abandoned.
/// `None` unless both ends are finite positive rates.
pub fn central_rate(low: f64, high: f64) -> Option<f64> {
    let valid = |rate: f64| rate.is_finite() && rate > 0.0;
    (valid(low) && valid(high)).then(|| low.sqrt() * high.sqrt())
}

/// The low end of the middle half of a rate's 80 % credible interval on the log scale, a
/// quarter of its log-width above its low end: √(low·central). The high end is
/// central²/this. Within that half the `freshness` index scores a page at the rate that
/// values a fetch most: a page seen changed at each of a few visits, which looks too fast
/// to follow, is fetched again as its copy ages, and a slow page a little earlier, so
/// wrong rates are corrected. Over the whole interval the optimism re-fetched static
/// pages (the figures in BENCHMARKS.md). `None` as [`central_rate`].
pub fn middle_half_low(low: f64, high: f64) -> Option<f64> {
    central_rate(low, central_rate(low, high)?)
}

/// The middle half around `central` from its low end as [`middle_half_low`] gave it: the
/// high end is as far above the centre on the log scale, central²/low. Just the centre
/// when there is no low end below it (no interval, or one rounded to a point).
pub fn middle_half(central: f64, low_end: Option<f64>) -> (f64, f64) {
    match low_end {
        Some(low) if low < central => (low, central * (central / low)),
        _ => (central, central),
    }
}

/// The log-likelihood of each grid rate given `changes` changes in `comparisons`
/// comparisons of downloads `spacing` periods apart; one evaluation serves every prior.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLikelihood([f64; RATE_BINS]);

impl RateLikelihood {
    /// `changes` changes dated over `quiet` periods known without one: λ^K·e^{−λQ}.
    pub fn dated(changes: u32, quiet: f64) -> Self {
        let changes = f64::from(changes);
        let quiet = if quiet.is_finite() && quiet > 0.0 { quiet } else { 0.0 };
        Self(std::array::from_fn(|bin| changes * log_grid()[bin] - grid()[bin] * quiet))
    }

    pub fn new(comparisons: u32, changes: u32, spacing: f64) -> Self {
        let changes = changes.min(comparisons);
        let (changed, unchanged) = (f64::from(changes), f64::from(comparisons.saturating_sub(changes)));
        let spacing = if spacing.is_finite() && spacing > 0.0 { spacing } else { 1.0 };
        Self(grid().map(|rate| {
            let x = rate * spacing;
            // ln(1 − e^{−x}) without cancellation for small x.
            let log_changed = if changed > 0.0 { changed * (-(-x).exp_m1()).ln() } else { 0.0 };
            log_changed - unchanged * x
        }))
    }

    /// Each grid rate's likelihood relative to the largest.
    fn relative(&self) -> [f64; RATE_BINS] {
        relative_to_largest(self.0)
    }

    /// The posterior under `prior`: its mean and 80 % credible interval.
    pub fn posterior(&self, prior: &RatePrior) -> RateEstimate {
        let mut log_posterior = self.0;
        log_posterior.iter_mut().zip(&prior.log_weights).for_each(|(log_p, log_prior)| *log_p += log_prior);
        let weights = relative_to_largest(log_posterior);
        let total: f64 = weights.iter().sum();
        let (mut mean, mut cumulative) = (0.0, 0.0);
        // The interval's ends: each grid point's mass spread evenly in ln λ over its cell,
        // half a step either side, so a posterior on one point still has a width.
        let (mut low, mut high) = (None, None);
        for (weight, rate) in weights.iter().zip(grid()) {
            let p = weight / total;
            mean += p * rate;
            let before = cumulative;
            cumulative += p;
            for (quantile, end) in [(0.1, &mut low), (0.9, &mut high)] {
                if end.is_none() && cumulative >= quantile && p > 0.0 {
                    let into_cell = (quantile - before) / p - 0.5;
                    *end = Some(rate * (into_cell * log_step()).exp());
                }
            }
        }
        RateEstimate { rate: mean, low: low.unwrap_or(HIGHEST_RATE), high: high.unwrap_or(HIGHEST_RATE) }
    }
}

/// e^{x − max x} for each log weight x: the weights scaled so the largest is 1, which
/// keeps likelihoods of many comparisons from underflowing to 0 together.
fn relative_to_largest(log_weights: [f64; RATE_BINS]) -> [f64; RATE_BINS] {
    let top = log_weights.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    log_weights.map(|log_weight| (log_weight - top).exp())
}

/// The posterior of a page's rate after `changes` changes in `comparisons` comparisons of
/// downloads `spacing` periods apart, under `prior`.
pub fn posterior_rate(prior: &RatePrior, comparisons: u32, changes: u32, spacing: f64) -> RateEstimate {
    RateLikelihood::new(comparisons, changes, spacing).posterior(prior)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate_of_bin(bin: usize) -> f64 {
        grid()[bin]
    }

    /// The grid point nearest (in log scale) to `rate`; non-positive and NaN rates go to
    /// the lowest.
    fn bin_of_rate(rate: f64) -> usize {
        if rate.is_nan() || rate <= LOWEST_RATE {
            return 0;
        }
        (((rate / LOWEST_RATE).ln() / log_step()).round() as usize).min(RATE_BINS - 1)
    }

    #[test]
    fn the_grid_round_trips_and_clamps() {
        for bin in 0..RATE_BINS {
            assert_eq!(bin_of_rate(rate_of_bin(bin)), bin);
        }
        assert!((rate_of_bin(0) - LOWEST_RATE).abs() < 1e-15);
        assert!((rate_of_bin(RATE_BINS - 1) - HIGHEST_RATE).abs() < 1e-9);
        assert_eq!(bin_of_rate(0.0), 0);
        assert_eq!(bin_of_rate(f64::NAN), 0);
        assert_eq!(bin_of_rate(1e9), RATE_BINS - 1);
    }

    #[test]
    fn the_credible_interval_holds_the_mean_and_narrows_with_visits() {
        let flat = RatePrior::default();
        assert_eq!(flat.pages, 0);
        let width = |n: u32| {
            let changes = (f64::from(n) * -(-0.2f64).exp_m1()).round() as u32;
            let estimate = posterior_rate(&flat, n, changes, 1.0);
            assert!(estimate.low <= estimate.rate && estimate.rate <= estimate.high, "{estimate:?}");
            estimate.high / estimate.low
        };
        assert!(width(400) < width(20) && width(20) < width(2), "{} {} {}", width(400), width(20), width(2));
    }

    #[test]
    fn the_central_rate_sits_inside_the_interval_below_the_long_tailed_mean() {
        let flat = RatePrior::default();
        // Seen changed at each of 3 visits 10 periods apart, and unchanged at each.
        for (changes, spacing) in [(3, 10.0), (0, 10.0)] {
            let estimate = posterior_rate(&flat, 3, changes, spacing);
            let central = central_rate(estimate.low, estimate.high).expect("a central rate");
            assert!(estimate.low < central && central < estimate.high, "{central} in {estimate:?}");
            assert!(central < estimate.rate / 2.0, "the tail lifts the mean: {central} against {estimate:?}");
        }
        assert!((central_rate(0.04, 0.04).expect("valid") - 0.04).abs() < 1e-15);
        for (low, high) in [(0.0, 1.0), (-1.0, 1.0), (0.1, f64::INFINITY), (f64::NAN, 0.1)] {
            assert_eq!(central_rate(low, high), None, "{low} {high}");
        }
    }

    #[test]
    fn the_middle_half_starts_a_quarter_of_the_log_interval_above_its_low_end() {
        let low = middle_half_low(0.01, 1.0).expect("valid");
        assert!((low.ln() - (0.75 * 0.01f64.ln())).abs() < 1e-12, "{low}");
        assert_eq!(middle_half_low(0.0, 1.0), None);
        assert_eq!(middle_half_low(0.1, f64::NAN), None);

        let central = central_rate(0.01, 1.0).expect("valid");
        let (from, to) = middle_half(central, Some(low));
        assert_eq!(from, low);
        assert!((to.ln() - (0.25 * 0.01f64.ln())).abs() < 1e-12, "{to}");
        assert_eq!(middle_half(central, None), (central, central));
        assert_eq!(middle_half(0.1, Some(0.2)), (0.1, 0.1), "a low end above the centre");
    }

    /// `count` pages, each seen changed in `changes` of `comparisons` comparisons.
    fn add_pages(counts: &mut RateCounts, count: usize, comparisons: u32, changes: u32, spacing: f64) {
        (0..count).for_each(|_| counts.add(RateEvidence::new(comparisons, changes, spacing)));
    }

    #[test]
    fn a_prior_computes_each_posterior_of_comparisons_once_and_answers_the_same() {
        let mut counts = RateCounts::default();
        for (comparisons, changes) in [(4, 1), (6, 0), (3, 3), (8, 2)] {
            counts.replace(None, Some(RateEvidence::new(comparisons, changes, 4.0)));
        }
        let prior = RatePrior::new(&counts);
        // Keys that differ in one part only, each asked twice.
        let asked = [(3, 1, 2.5), (3, 2, 2.5), (3, 1, 2.25), (4, 1, 2.5), (0, 0, 1.0)];
        for (comparisons, changes, spacing) in asked.into_iter().chain(asked) {
            let computed = posterior_rate(&prior, comparisons, changes, spacing);
            assert_eq!(prior.compared_posterior(comparisons, changes, spacing), computed);
        }
        assert_eq!(prior.compared.entries().len(), asked.len());
        // Full, it starts over and still answers the same.
        for comparisons in 0..MEMO_CAPACITY as u32 + 10 {
            let computed = posterior_rate(&prior, comparisons, 0, 1.0);
            assert_eq!(prior.compared_posterior(comparisons, 0, 1.0), computed);
        }
        assert!(prior.compared.entries().len() <= MEMO_CAPACITY);
        // Not part of the prior's value.
        let copy = prior.clone();
        assert!(copy.compared.entries().is_empty());
        assert_eq!(copy, prior);
    }

    /// The prior's probability of the grid rates in [low, high].
    fn prior_share(prior: &RatePrior, low: f64, high: f64) -> f64 {
        let weights = prior.log_weights.map(f64::exp);
        let inside: f64 =
            weights.iter().zip(grid()).filter(|(_, &r)| low <= r && r <= high).map(|(w, _)| w).sum();
        inside / weights.iter().sum::<f64>()
    }

    #[test]
    fn evidence_keeps_at_most_32_comparisons_and_buckets_the_spacing() {
        assert_eq!(RateEvidence::new(320, 160, 20.0), RateEvidence::new(32, 16, 20.0));
        assert_eq!(RateEvidence::new(5, 2, 20.0), RateEvidence::new(5, 2, 20.5));
        assert_ne!(RateEvidence::new(5, 2, 20.0), RateEvidence::new(5, 2, 25.0));
        assert_eq!(RateEvidence::new(5, 9, f64::NAN), RateEvidence::new(5, 5, 1.0));
        // However many comparisons and changes the pages have, a group holds at most the
        // 561 (comparisons, changes) pairs per spacing bucket.
        let mut distinct = std::collections::BTreeSet::new();
        for comparisons in 1..=2000u32 {
            for changes in (0..=comparisons).step_by(7) {
                for spacing in [1.0, 3.7, 20.0, 333.0, 1e5] {
                    distinct.insert(RateEvidence::new(comparisons, changes, spacing));
                }
            }
        }
        assert!(distinct.len() <= 33 * 34 / 2 * 5, "{}", distinct.len());
    }

    #[test]
    fn dated_evidence_keeps_its_peak_and_places_static_pages_low() {
        // More than 32 dated changes count as 32 over the quiet time in the same ratio.
        assert_eq!(RateEvidence::dated(64, 200.0), RateEvidence::dated(32, 100.0));
        assert_ne!(RateEvidence::dated(2, 100.0), RateEvidence::new(2, 2, 100.0));
        assert_eq!(RateEvidence::dated(1, f64::NAN), RateEvidence::dated(1, 1.0));
        // The likelihood λ^K·e^{−λQ} peaks at K / Q.
        let peak = |changes: u32, quiet: f64| {
            let likelihood = RateLikelihood::dated(changes, quiet).relative();
            grid()[likelihood.iter().position(|&l| l == 1.0).unwrap()]
        };
        for (changes, quiet) in [(1, 5000.0), (3, 60.0), (20, 4.0)] {
            let ratio = peak(changes, quiet) / (f64::from(changes) / quiet);
            assert!((1.0 / 1.8..1.8).contains(&ratio), "{changes} over {quiet}: {ratio}");
        }
        // A group where half the pages were dated a year back and half change every 20
        // periods: the prior has both.
        let mut counts = RateCounts::default();
        (0..500).for_each(|_| counts.add(RateEvidence::dated(1, 8760.0)));
        (0..500).for_each(|_| counts.add(RateEvidence::dated(5, 100.0)));
        let prior = RatePrior::new(&counts);
        assert!(prior_share(&prior, 0.0, 1e-3) > 0.3 && prior_share(&prior, 0.02, 0.2) > 0.3);
    }

    #[test]
    fn the_prior_is_fitted_to_the_groups_evidence() {
        // 1,000 pages seen 400 times a period apart, changed as a rate of 0.05 would.
        let mut counts = RateCounts::default();
        let changes = (400.0 * -(-0.05f64).exp_m1()).round() as u32;
        add_pages(&mut counts, 1000, 400, changes, 1.0);
        let prior = RatePrior::new(&counts);
        assert_eq!(prior.pages, 1000);
        // All of it on the likeliest grid point, plus the spread.
        let point = rate_of_bin(bin_of_rate(0.05));
        assert!((prior.mean / point - 1.0).abs() < 0.05, "{} vs the grid point {point}", prior.mean);

        // A fifth of the pages static, the rest changing 0.05 a period; each seen 4 times
        // 20 periods apart. Changed in k of 4 with p = 1 − e^{−1}: 800·C(4, k)·p^k·(1 − p)^(4 − k).
        let mut counts = RateCounts::default();
        add_pages(&mut counts, 200 + 15, 4, 0, 20.0);
        for (changes, count) in [(1, 101), (2, 260), (3, 298), (4, 128)] {
            add_pages(&mut counts, count, 4, changes, 20.0);
        }
        let prior = RatePrior::new(&counts);
        // The static fifth sits at the slowest rates, which no visit so far can tell
        // apart; the rest about 0.05.
        let slow = prior_share(&prior, 0.0, 0.003);
        assert!((0.12..0.3).contains(&slow), "{slow}");
        let near = prior_share(&prior, 0.05 / 3.0, 0.05 * 3.0);
        assert!(near > 0.6, "{near}");
        // A page seen changed in 2 of its 4 comparisons is then judged a typical one.
        let typical = posterior_rate(&prior, 4, 2, 20.0).rate;
        assert!((0.035..0.07).contains(&typical), "{typical}");
        // Removing what was added leaves the empty group's flat prior.
        for (changes, count) in [(0, 215), (1, 101), (2, 260), (3, 298), (4, 128)] {
            (0..count).for_each(|_| counts.remove(RateEvidence::new(4, changes, 20.0)));
        }
        assert_eq!(counts, RateCounts::default());
        assert_eq!(RatePrior::new(&counts), RatePrior::default());
    }

    #[test]
    fn many_visits_find_the_rate_and_few_stay_near_the_prior() {
        // 400 comparisons one period apart, 1 − e^{−0.2} of them changed: λ = 0.2.
        let flat = RatePrior::default();
        let n = 400u32;
        let changes = (f64::from(n) * -(-0.2f64).exp_m1()).round() as u32;
        let estimate = posterior_rate(&flat, n, changes, 1.0);
        assert!((estimate.rate - 0.2).abs() < 0.03, "{estimate:?}");
        // No change seen: finite and small, not 0; all changed: finite, not infinite.
        let none = posterior_rate(&flat, 3, 0, 1.0);
        assert!(none.rate > 0.0 && none.rate < 1.0, "{none:?}");
        let all = posterior_rate(&flat, 3, 3, 1.0);
        assert!(all.rate.is_finite() && all.rate > 1.0, "{all:?}");
        // A group whose pages all change about 0.05 a period pulls one unchanged visit there.
        let mut counts = RateCounts::default();
        add_pages(&mut counts, 1000, 400, (400.0 * -(-0.05f64).exp_m1()).round() as u32, 1.0);
        let grouped = posterior_rate(&RatePrior::new(&counts), 1, 0, 1.0);
        assert!((grouped.rate - 0.05).abs() < 0.01, "{grouped:?}");
    }

    #[test]
    fn more_unchanged_visits_lower_the_rate() {
        let prior = RatePrior::default();
        let rates: Vec<f64> = (0..6).map(|n| posterior_rate(&prior, n, 0, 2.0).rate).collect();
        assert!(rates.windows(2).all(|pair| pair[1] < pair[0]), "{rates:?}");
    }
}
