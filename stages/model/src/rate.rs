//! A page's change rate from few, unevenly spaced visits, shrunk toward its group
//! (`docs/algorithms/freshness-limits.md`, "Learning the rates").
//!
//! A visit after an interval t finds the page changed with probability 1 − e^{−λt}
//! (changes arrive as a Poisson process of rate λ). The likelihood of X changes in n
//! comparisons at a spacing s is (1 − e^{−λs})^X·e^{−λs(n−X)}; its maximum is Cho &
//! Garcia-Molina's estimate, which is 0 after no change and infinite after all changed.
//! The posterior over a grid of rates, with the group's distribution of its pages'
//! estimates as the prior (empirical Bayes), stays finite and moves toward the group
//! when a page has been seen only a few times.

use std::sync::LazyLock;

/// Grid points, log-spaced from [`LOWEST_RATE`] to [`HIGHEST_RATE`] per period.
pub const RATE_BINS: usize = 24;
/// Below it a page counts as static: about one change in 30 years of hourly periods.
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

/// The group's pages counted by the grid point of their estimate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateCounts([u64; RATE_BINS]);

impl Default for RateCounts {
    fn default() -> Self {
        Self([0; RATE_BINS])
    }
}

impl RateCounts {
    pub fn add(&mut self, bin: usize) {
        let count = &mut self.0[bin.min(RATE_BINS - 1)];
        *count = count.saturating_add(1);
    }

    pub fn remove(&mut self, bin: usize) {
        let count = &mut self.0[bin.min(RATE_BINS - 1)];
        *count = count.saturating_sub(1);
    }

    pub fn total(&self) -> u64 {
        self.0.iter().fold(0, |total, count| total.saturating_add(*count))
    }
}

/// The prior over the grid: the group's counts with one page's worth spread evenly over
/// the grid, so no rate is ruled out and an empty group gives a flat prior in log λ.
#[derive(Debug, Clone, PartialEq)]
pub struct RatePrior {
    log_weights: [f64; RATE_BINS],
    /// The prior's mean rate per period.
    pub mean: f64,
    /// The pages it was learned from (0: the flat prior).
    pub pages: u64,
}

impl RatePrior {
    pub fn new(counts: &RateCounts) -> Self {
        let spread = 1.0 / RATE_BINS as f64;
        let mut log_weights = [0.0; RATE_BINS];
        let (mut weighted, mut total) = (0.0, 0.0);
        for ((log_weight, &count), rate) in log_weights.iter_mut().zip(&counts.0).zip(grid()) {
            let weight = count as f64 + spread;
            *log_weight = weight.ln();
            weighted += weight * rate;
            total += weight;
        }
        Self { log_weights, mean: weighted / total, pages: counts.total() }
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
    /// The grid point of the posterior median.
    pub bin: usize,
    /// The 80 % credible interval: the posterior's 10th and 90th percentiles, each grid
    /// point's mass spread over its cell in ln λ.
    pub low: f64,
    pub high: f64,
}

/// The log-likelihood of each grid rate given `changes` changes in `comparisons`
/// comparisons of downloads `spacing` periods apart; one evaluation serves every prior.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLikelihood([f64; RATE_BINS]);

impl RateLikelihood {
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

    /// The posterior under `prior`: its mean, median and 80 % credible interval.
    pub fn posterior(&self, prior: &RatePrior) -> RateEstimate {
        let mut log_posterior = self.0;
        log_posterior.iter_mut().zip(&prior.log_weights).for_each(|(log_p, log_prior)| *log_p += log_prior);
        let top = log_posterior.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights = log_posterior.map(|log_p| (log_p - top).exp());
        let total: f64 = weights.iter().sum();
        let (mut mean, mut cumulative, mut median) = (0.0, 0.0, None);
        // The interval's ends: each grid point's mass spread evenly in ln λ over its cell,
        // half a step either side, so a posterior on one point still has a width.
        let (mut low, mut high) = (None, None);
        for ((bin, weight), rate) in weights.iter().enumerate().zip(grid()) {
            let p = weight / total;
            mean += p * rate;
            let before = cumulative;
            cumulative += p;
            if median.is_none() && cumulative >= 0.5 {
                median = Some(bin);
            }
            for (quantile, end) in [(0.1, &mut low), (0.9, &mut high)] {
                if end.is_none() && cumulative >= quantile && p > 0.0 {
                    let into_cell = (quantile - before) / p - 0.5;
                    *end = Some(rate * (into_cell * log_step()).exp());
                }
            }
        }
        RateEstimate {
            rate: mean,
            bin: median.unwrap_or(RATE_BINS - 1),
            low: low.unwrap_or(HIGHEST_RATE),
            high: high.unwrap_or(HIGHEST_RATE),
        }
    }
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
        let mut counts = RateCounts::default();
        (0..1000).for_each(|_| counts.add(bin_of_rate(0.05)));
        let prior = RatePrior::new(&counts);
        assert_eq!(prior.pages, 1000);
        let point = rate_of_bin(bin_of_rate(0.05));
        assert!((prior.mean / point - 1.0).abs() < 0.05, "{} vs the grid point {point}", prior.mean);
    }

    #[test]
    fn many_visits_find_the_rate_and_few_stay_near_the_prior() {
        // 400 comparisons one period apart, 1 − e^{−0.2} of them changed: λ = 0.2.
        let flat = RatePrior::default();
        let n = 400u32;
        let changes = (f64::from(n) * -(-0.2f64).exp_m1()).round() as u32;
        let estimate = posterior_rate(&flat, n, changes, 1.0);
        assert!((estimate.rate - 0.2).abs() < 0.03, "{estimate:?}");
        assert_eq!(estimate.bin, bin_of_rate(0.2));
        // No change seen: finite and small, not 0; all changed: finite, not infinite.
        let none = posterior_rate(&flat, 3, 0, 1.0);
        assert!(none.rate > 0.0 && none.rate < 1.0, "{none:?}");
        let all = posterior_rate(&flat, 3, 3, 1.0);
        assert!(all.rate.is_finite() && all.rate > 1.0, "{all:?}");
        // A group whose pages all change about 0.05 a period pulls one unchanged visit there.
        let mut counts = RateCounts::default();
        (0..1000).for_each(|_| counts.add(bin_of_rate(0.05)));
        let grouped = posterior_rate(&RatePrior::new(&counts), 1, 0, 1.0);
        assert!((grouped.rate - 0.05).abs() < 0.01, "{grouped:?}");
        assert_eq!(grouped.bin, bin_of_rate(0.05));
    }

    #[test]
    fn more_unchanged_visits_lower_the_rate() {
        let prior = RatePrior::default();
        let rates: Vec<f64> = (0..6).map(|n| posterior_rate(&prior, n, 0, 2.0).rate).collect();
        assert!(rates.windows(2).all(|pair| pair[1] < pair[0]), "{rates:?}");
    }
}
