//! The scoring rules of the scheduling policies and the selection they feed. Pure: the
//! stage, the `plan` command, the benches and the simulator call the same code.
//!
//! Every policy turns a page into a score (higher is picked first) or rules it out this
//! period; [`TopK`] keeps the best k of a stream of scores without sorting them all.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::num::{NonZeroU32, NonZeroU64};
use std::str::FromStr;

use serde::Serialize;
use thiserror::Error;

/// The policy the scheduler runs unless told otherwise: the best learned one on the
/// simulated web at every budget (BENCHMARKS-LOG.md, "The freshness index").
pub const DEFAULT_POLICY: Policy = Policy::Freshness;

/// How the scheduler chooses which known pages to refresh. Every list of the policies
/// (`--policy`'s values, the simulator's runs and tables) is this enum's, in this order:
/// round robin first, as the baseline, the default last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Round robin: the page visited longest ago first.
    Uniform,
    /// The paper's rule: (T − t)·s − W·p·g, s counting periods since the download.
    Paper,
    /// The paper's rule with s replaced by the expected periods the stored copy has been
    /// out of date, weighted by the chance the fetch succeeds.
    ChangeAware,
    /// Nutch's adaptive interval: shorter after a change, longer after none.
    NutchAdaptive,
    /// LambdaCrawl's optimal rates for the harmonic staleness cost, from the estimated
    /// change rates.
    LambdaCrawl,
    /// Refresh groups: each page at its group's weekdays and hour.
    Groups,
    /// The marginal freshness a fetch buys now (the known-rate optimum's index, at the
    /// rate in the middle half of the estimate's credible interval that values the fetch
    /// most), weighted by the chance the fetch downloads.
    Freshness,
}

impl Policy {
    /// Every policy, in the enum's order.
    pub fn all() -> &'static [Policy] {
        <Policy as clap::ValueEnum>::value_variants()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Paper => "paper",
            Policy::ChangeAware => "change-aware",
            Policy::Groups => "groups",
            Policy::Uniform => "uniform",
            Policy::NutchAdaptive => "nutch-adaptive",
            Policy::LambdaCrawl => "lambda-crawl",
            Policy::Freshness => "freshness",
        }
    }
}

/// How the discovery share of the picks is filled from the frontier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Discovery {
    /// In-degree first: the most linked-to URL first, the earliest discovered on a tie.
    Ifs,
    /// Breadth first: the earliest discovered first.
    Bfs,
}

/// The `--horizon` flag's help, the same for the stage and the offline `plan`.
pub const HORIZON_HELP: &str = "T − t in the paper's score, in periods: rolling:W (a constant window W) or fixed:T (horizons of T + 1 periods that restart, T − t shrinking to 0; a bare T means fixed:T)";

/// How T − t is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Horizon {
    /// T − t replaced by a constant window W.
    Rolling(u64),
    /// Horizons of T + 1 periods (t = 0..T) that restart; T − t shrinks to 0 at the end.
    Fixed(u64),
}

#[derive(Debug, Error, PartialEq, Eq)]
#[error("horizon {0:?}: expected rolling:W, fixed:T or T with a positive whole number")]
pub struct HorizonError(String);

impl FromStr for Horizon {
    type Err = HorizonError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let error = || HorizonError(raw.to_owned());
        let (kind, n) = raw.split_once(':').unwrap_or(("fixed", raw));
        let n: u64 = n.parse().map_err(|_| error())?;
        match kind {
            "rolling" if n > 0 => Ok(Self::Rolling(n)),
            "fixed" if n > 0 => Ok(Self::Fixed(n)),
            _ => Err(error()),
        }
    }
}

impl Horizon {
    /// T − t for `period`.
    pub fn remaining(self, period: u64) -> f64 {
        match self {
            Self::Rolling(window) => window as f64,
            Self::Fixed(horizon) => {
                let length = NonZeroU64::MIN.saturating_add(horizon);
                horizon.saturating_sub(period % length) as f64
            }
        }
    }
}

/// s_j(t): 0 in the period after a download, +1 for every period without one. A page
/// never downloaded counts from the period it was discovered, as if downloaded just
/// before it.
pub fn staleness(period: u64, last_download: Option<u64>, discovered: u64) -> f64 {
    match last_download {
        // Periods come from input: saturate rather than overflow on a garbled one.
        Some(downloaded) => period.saturating_sub(downloaded.saturating_add(1)) as f64,
        None => period.saturating_sub(discovered) as f64 + 1.0,
    }
}

/// (T − t)·s − cost, with the cost p·g already converted to periods and weighted.
pub fn paper_score(remaining: f64, staleness: f64, cost_periods: f64) -> f64 {
    remaining * staleness - cost_periods
}

/// The change rate per period a policy uses: the estimator's rate when it is positive,
/// else the rate whose chance of at least one change per period is `p_change`. Estimates
/// of schema 1 carry no rate, and a page the book has no estimate of has none; the
/// forecast, drawn towards its group's distribution, still ranks it.
pub fn change_rate(estimated: Option<f64>, p_change: f64) -> f64 {
    match estimated {
        Some(rate) if rate.is_finite() && rate > 0.0 => rate,
        // Capped below 1 so a certain change gives a large finite rate, not infinity.
        _ => -(1.0 - p_change.clamp(0.0, 0.999)).ln(),
    }
}

/// Expected periods, out of the `age` since the stored copy was fetched, that the live
/// page has differed from it, for changes arriving as a Poisson process of `rate` per
/// period: ∫₀^age (1 − e^{−rate·u}) du = age − (1 − e^{−rate·age}) / rate.
pub fn expected_out_of_date(age: f64, rate: f64) -> f64 {
    if age <= 0.0 || rate <= 0.0 {
        return 0.0;
    }
    let x = rate * age;
    // For small x the difference cancels catastrophically; the series x/2 − x²/6 + x³/24
    // is exact to double precision there.
    if x < 1e-4 {
        age * x * (0.5 - x / 6.0 + x * x / 24.0)
    } else {
        age + (-x).exp_m1() / rate
    }
}

/// Nutch's adaptive fetch interval: × (1 − 0.2) after a change, × (1 + 0.4) after none,
/// clamped to `[min, max]` periods.
pub fn nutch_interval(interval: f64, changed: bool, min: f64, max: f64) -> f64 {
    let next = if changed { interval * 0.8 } else { interval * 1.4 };
    next.clamp(min, max)
}

/// LambdaCrawl's crawl rate for a page of change rate λ and importance 1 under the
/// harmonic staleness cost: ρ = (−λ + √(λ² + 4λ/κ)) / 2, computed as the equal
/// (2λ/κ) / (λ + √(λ² + 4λ/κ)), which does not cancel: for λ ≫ 1/κ the first form loses
/// every digit (0 at λ = 10¹⁶, κ = 100) where ρ approaches its largest, 1/κ.
pub fn lambda_crawl_rate(rate: f64, kappa: f64) -> f64 {
    if rate <= 0.0 {
        return 0.0;
    }
    let twice_over_kappa = 2.0 * rate / kappa;
    twice_over_kappa / (rate + (rate * rate + 2.0 * twice_over_kappa).sqrt())
}

/// The κ for which the LambdaCrawl rates of `rates` (change rate → number of pages with
/// it) sum to `budget` picks per period, by bisection on log κ. `None` when no page
/// changes or the budget is not positive.
///
/// Pages are grouped by rate so the bisection costs the distinct rates, not the pages.
pub fn lambda_crawl_kappa(rates: &HashMap<u64, u64>, budget: f64) -> Option<f64> {
    let rates: Vec<(f64, f64)> = rates
        .iter()
        .map(|(&bits, &count)| (f64::from_bits(bits), count as f64))
        .filter(|&(rate, _)| rate > 0.0 && rate.is_finite())
        .collect();
    if rates.is_empty() || budget <= 0.0 || !budget.is_finite() {
        return None;
    }
    let total = |kappa: f64| rates.iter().map(|&(rate, n)| n * lambda_crawl_rate(rate, kappa)).sum::<f64>();
    // Σρ falls as κ grows: widen the bracket until it holds the budget.
    let (mut low, mut high) = (1e-12f64, 1.0f64);
    while total(high) > budget && high < 1e300 {
        high *= 1e3;
    }
    while total(low) < budget && low > 1e-300 {
        low /= 1e3;
    }
    for _ in 0..100 {
        let mid = (low * high).sqrt();
        if total(mid) > budget {
            low = mid;
        } else {
            high = mid;
        }
        if high / low < 1.0 + 1e-12 {
            break;
        }
    }
    Some((low * high).sqrt())
}

/// This instance's share of `m` for `period`: partition p of `total` carries m / total,
/// plus one when (p + period) mod total < m mod total. Instances that own disjoint
/// partitions take exactly m together without talking, and the remainder rotates so a
/// small m (a per-host cap of 1) reaches every partition's URLs over time.
pub fn quota(m: usize, assigned: &[i32], total: i32, period: u64) -> usize {
    let Some(total) = u32::try_from(total).ok().and_then(NonZeroU32::new).map(NonZeroU64::from) else {
        return 0;
    };
    let m = m as u64;
    let (share, remainder, rotation) = (m / total, m % total, period % total);
    let shares: u64 = assigned
        .iter()
        .filter_map(|&p| u64::try_from(p).ok().filter(|&p| p < total.get()))
        // p and the rotation are below `total` ≤ i32::MAX: their sum cannot saturate.
        .map(|p| share.saturating_add(u64::from(p.saturating_add(rotation) % total < remainder)))
        .sum();
    usize::try_from(shares).unwrap_or(usize::MAX)
}

/// A scored candidate; the larger score wins, the smaller key on a tie.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored<K> {
    pub score: f64,
    pub key: K,
}

impl<K: Ord> Scored<K> {
    /// `Less` when `self` ranks before `other`.
    pub fn rank(&self, other: &Self) -> Ordering {
        other.score.total_cmp(&self.score).then_with(|| self.key.cmp(&other.key))
    }
}

/// The best `k` of a stream of candidates in O(n + k log k) time and O(k) memory. Kept
/// candidates collect in a buffer; when it holds 2k, the best k are selected and the rest
/// dropped, and the worst of those k becomes the threshold that turns most later candidates
/// away with one comparison. Cheaper than a heap of k when k is a large share of n (a
/// simulated period picks a fifth of the web): a heap pays log k on every candidate that
/// beats its worst, and its sifts miss the cache.
#[derive(Debug)]
pub struct TopK<K> {
    k: usize,
    kept: Vec<Scored<K>>,
    /// The worst of the best k at the last selection: a candidate ranked after it cannot
    /// be among the best k.
    threshold: Option<Scored<K>>,
    offered: usize,
}

impl<K: Ord + Copy> TopK<K> {
    pub fn new(k: usize) -> Self {
        Self { k, kept: Vec::with_capacity(k.saturating_mul(2).min(1 << 21)), threshold: None, offered: 0 }
    }

    pub fn offer(&mut self, score: f64, key: K) {
        self.offered = self.offered.saturating_add(1);
        let candidate = Scored { score, key };
        if self.k == 0 || self.threshold.is_some_and(|threshold| candidate.rank(&threshold) != Ordering::Less)
        {
            return;
        }
        self.kept.push(candidate);
        // The first selection as soon as k are held, so a floor exists from then on.
        if self.kept.len() == self.k || self.kept.len() >= self.k.saturating_mul(2) {
            self.select_best_k();
        }
    }

    /// Keeps the best k of the buffer (it holds at least k) and their worst as the threshold.
    fn select_best_k(&mut self) {
        let Some(worst) = self.k.checked_sub(1) else { return };
        self.kept.select_nth_unstable_by(worst, Scored::rank);
        self.kept.truncate(self.k);
        self.threshold = Some(self.kept[worst]);
    }

    /// A score the k-th best is known to reach, once k are held: a candidate whose score
    /// cannot reach it need not be scored exactly.
    pub fn floor(&self) -> Option<f64> {
        self.threshold.map(|threshold| threshold.score)
    }

    /// Whether candidates were turned away (more than k were offered).
    pub fn overflowed(&self) -> bool {
        self.offered > self.k
    }

    /// The kept candidates, best first.
    pub fn into_sorted(mut self) -> Vec<Scored<K>> {
        // Up to 2k − 1 are buffered: select the best k before sorting, not after.
        if self.kept.len() > self.k {
            self.select_best_k();
        }
        self.kept.sort_unstable_by(Scored::rank);
        self.kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn staleness_follows_the_paper_recurrence() {
        // s(t+1) = (s(t) + 1)(1 − x(t)): downloaded in 4 → 0 in 5, 1 in 6.
        assert_eq!(staleness(5, Some(4), 0), 0.0);
        assert_eq!(staleness(6, Some(4), 0), 1.0);
        assert_eq!(staleness(4, Some(4), 0), 0.0);
        assert_eq!(staleness(7, None, 7), 1.0);
        assert_eq!(staleness(9, None, 7), 3.0);
    }

    #[test]
    fn extreme_periods_do_not_overflow() {
        assert_eq!(staleness(u64::MAX, Some(u64::MAX), 0), 0.0);
        assert_eq!(staleness(u64::MAX, None, 0), u64::MAX as f64 + 1.0);
        assert_eq!(Horizon::Fixed(u64::MAX).remaining(u64::MAX), u64::MAX as f64);
    }

    #[test]
    fn fixed_horizon_counts_down_and_restarts() {
        let fixed = Horizon::Fixed(3);
        let remaining: Vec<f64> = (0..6).map(|t| fixed.remaining(t)).collect();
        assert_eq!(remaining, vec![3.0, 2.0, 1.0, 0.0, 3.0, 2.0]);
        assert_eq!("rolling:7".parse(), Ok(Horizon::Rolling(7)));
        assert_eq!("fixed:9".parse(), Ok(Horizon::Fixed(9)));
        assert_eq!("9".parse(), Ok(Horizon::Fixed(9)));
        assert!("fixed:0".parse::<Horizon>().is_err());
        assert!("weekly".parse::<Horizon>().is_err());
    }

    #[test]
    fn quotas_of_disjoint_owners_sum_to_m_and_the_remainder_rotates() {
        for period in 0..7 {
            for (m, total) in [(10, 7), (3, 7), (7, 7), (100, 7), (1, 7)] {
                let split: usize = [vec![0, 2, 4], vec![1], vec![3, 5, 6]]
                    .iter()
                    .map(|owned| quota(m, owned, total, period))
                    .sum();
                let all: Vec<i32> = (0..total).collect();
                assert_eq!(quota(m, &all, total, period), m, "m = {m}, total = {total}");
                assert_eq!(split, m, "m = {m}, period = {period}");
            }
        }
        // A cap of 1 over 4 partitions reaches each partition once in 4 periods.
        let turns: Vec<usize> = (0..4).map(|p| (0..4).map(|t| quota(1, &[p], 4, t)).sum()).collect();
        assert_eq!(turns, [1, 1, 1, 1]);
        assert_eq!(quota(5, &[], 6, 0), 0);
    }

    #[test]
    fn out_of_date_time_matches_its_integral() {
        for (age, rate) in [(1.0, 0.5), (10.0, 0.01), (3.0, 2.0), (5.0, 1e-9)] {
            let steps = 100_000;
            let du = age / steps as f64;
            let integral: f64 =
                (0..steps).map(|i| 1.0 - (-rate * (i as f64 + 0.5) * du).exp()).sum::<f64>() * du;
            let closed = expected_out_of_date(age, rate);
            assert!((closed - integral).abs() <= 1e-9 * age.max(1.0), "{age} {rate}: {closed} vs {integral}");
        }
        // A page that changes all the time is out of date for (almost) the whole age.
        assert!((expected_out_of_date(4.0, 1e6) - 4.0).abs() < 1e-5);
        assert_eq!(expected_out_of_date(0.0, 1.0), 0.0);
        assert_eq!(expected_out_of_date(3.0, 0.0), 0.0);
    }

    #[test]
    fn a_certain_change_gives_a_finite_rate() {
        assert!(change_rate(None, 1.0).is_finite());
        assert_eq!(change_rate(None, 0.0), 0.0);
        assert_eq!(change_rate(Some(0.25), 0.9), 0.25);
        assert!((change_rate(Some(0.0), 0.5) - std::f64::consts::LN_2).abs() < 1e-12);
        assert!((change_rate(None, 0.5) - std::f64::consts::LN_2).abs() < 1e-12);
    }

    #[test]
    fn nutch_intervals_shrink_on_change_and_grow_otherwise_within_bounds() {
        assert!((nutch_interval(10.0, true, 1.0, 100.0) - 8.0).abs() < 1e-12);
        assert!((nutch_interval(10.0, false, 1.0, 100.0) - 14.0).abs() < 1e-12);
        assert_eq!(nutch_interval(1.1, true, 1.0, 100.0), 1.0);
        assert_eq!(nutch_interval(90.0, false, 1.0, 100.0), 100.0);
    }

    #[test]
    fn lambda_crawl_rates_spend_the_budget() {
        let mut rates = HashMap::new();
        rates.insert(0.5f64.to_bits(), 10);
        rates.insert(0.05f64.to_bits(), 100);
        rates.insert(0.0f64.to_bits(), 50);
        let kappa = lambda_crawl_kappa(&rates, 20.0).unwrap();
        let spent = 10.0 * lambda_crawl_rate(0.5, kappa) + 100.0 * lambda_crawl_rate(0.05, kappa);
        assert!((spent - 20.0).abs() < 1e-6, "{spent}");
        // Every changing page gets crawled, the faster-changing more often.
        assert!(lambda_crawl_rate(0.5, kappa) > lambda_crawl_rate(0.05, kappa));
        assert!(lambda_crawl_rate(0.05, kappa) > 0.0);
        assert_eq!(lambda_crawl_rate(0.0, kappa), 0.0);
        // When μ/λ is constant (one rate for all), ρ = R / n.
        let one: HashMap<u64, u64> = HashMap::from([(0.3f64.to_bits(), 40)]);
        let kappa = lambda_crawl_kappa(&one, 8.0).unwrap();
        assert!((lambda_crawl_rate(0.3, kappa) - 0.2).abs() < 1e-9);
        assert_eq!(lambda_crawl_kappa(&HashMap::from([(0.0f64.to_bits(), 3)]), 1.0), None);
        // A page changing far faster than any crawl rate gets the most there is, 1/κ.
        for kappa in [1.0, 100.0] {
            let fastest = lambda_crawl_rate(1e20, kappa);
            assert!((fastest * kappa - 1.0).abs() < 1e-9, "κ = {kappa}: {fastest}");
        }
    }

    proptest! {
        #[test]
        fn top_k_matches_a_full_sort(scores in proptest::collection::vec(0u8..8, 0..300), k in 0usize..60) {
            let mut top = TopK::new(k);
            for (key, &score) in scores.iter().enumerate() {
                top.offer(f64::from(score), key);
            }
            let floor = top.floor();
            prop_assert_eq!(floor.is_some(), k > 0 && scores.len() >= k);
            let overflowed = top.overflowed();
            let kept: Vec<(f64, usize)> = top.into_sorted().iter().map(|s| (s.score, s.key)).collect();
            let mut all: Vec<(f64, usize)> =
                scores.iter().enumerate().map(|(key, &score)| (f64::from(score), key)).collect();
            all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            all.truncate(k);
            // The floor may lag the k-th best (it is the k-th best at the last selection)
            // but never passes it, nor falls below the worst of the first k offered.
            if let Some(floor) = floor {
                prop_assert!(all.last().is_some_and(|a| floor <= a.0), "{} above {:?}", floor, all.last());
                let first_k_worst = scores[..k].iter().min().map(|&score| f64::from(score));
                prop_assert!(first_k_worst.is_some_and(|worst| floor >= worst), "{} below {:?}", floor, first_k_worst);
            }
            prop_assert_eq!(kept, all);
            prop_assert_eq!(overflowed, scores.len() > k);
        }
    }
}
