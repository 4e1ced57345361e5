//! Group rate distributions and the three prediction models of `docs/algorithms/estimator.md`
//! §3–4 and §6. Pure: the stage, the offline commands and the benches share this code.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::history::Rates;

/// `{0}`, `0.01–0.09`, `0.10–0.19`, …, `0.90–0.99`, `{1}`.
pub const COARSE_BINS: usize = 12;
/// `0.00`, `0.01`, …, `1.00`.
pub const FINE_BINS: usize = 101;

/// Longest forecast the models support: beyond it the binomial coefficients overflow `f64`.
pub const MAX_FUTURE: u32 = 1000;

/// The fine bin of a rate, as `docs/algorithms/estimator.md` §3 places it: rounded down to two
/// decimals after adding 1e-9, so that ratios such as 3/10 (29.999999999999996 %) stay in
/// their own bin, except that a rate in (0, 0.01) goes to 0.01: {0} is for rates of exactly
/// 0. NaN counts as 0.
pub fn fine_bin(rate: f64) -> usize {
    if rate.is_nan() || rate <= 0.0 {
        return 0;
    }
    ((rate * 100.0 + 1e-9).floor() as usize).clamp(1, FINE_BINS - 1)
}

/// The coarse bin holding a fine bin (indices past 100 count as 100).
pub fn coarse_of_fine(fine: usize) -> usize {
    match fine {
        0 => 0,
        1..=99 => (fine / 10).saturating_add(1),
        _ => COARSE_BINS - 1,
    }
}

/// How many fine bins (0.01 steps) each coarse bin spans: 1, 9, then 10 for each of the nine
/// tenths, 1.
fn fine_bins_per_coarse() -> [u32; COARSE_BINS] {
    let mut steps = [0u32; COARSE_BINS];
    for fine in 0..FINE_BINS {
        let step = &mut steps[coarse_of_fine(fine)];
        *step = step.saturating_add(1);
    }
    steps
}

fn theta_of(fine: usize) -> f64 {
    fine as f64 / 100.0
}

#[derive(Debug, Clone, PartialEq, Error)]
pub enum BinsError {
    #[error("a fine histogram has {FINE_BINS} bins, not {found}")]
    FineLength { found: usize },
    #[error("a coarse distribution has {COARSE_BINS} shares, not {found}")]
    CoarseLength { found: usize },
    #[error("share {value} of coarse bin {bin} is not a finite non-negative number")]
    InvalidShare { bin: usize, value: f64 },
}

/// Counts of eligible URLs per fine bin; the 12 coarse bins are derived from them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateHistogram {
    counts: [u64; FINE_BINS],
}

impl Default for RateHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl RateHistogram {
    pub fn new() -> Self {
        Self { counts: [0; FINE_BINS] }
    }

    pub fn from_counts(counts: [u64; FINE_BINS]) -> Self {
        Self { counts }
    }

    /// From counts read from elsewhere (a message, a file), which must have 101 bins.
    pub fn from_fine(counts: &[u64]) -> Result<Self, BinsError> {
        let counts = counts.try_into().map_err(|_| BinsError::FineLength { found: counts.len() })?;
        Ok(Self { counts })
    }

    /// # Panics
    /// When `fine` is not a fine bin (≥ [`FINE_BINS`]).
    pub fn add(&mut self, fine: usize) {
        self.counts[fine] = self.counts[fine].saturating_add(1);
    }

    /// # Panics
    /// When `fine` is not a fine bin (≥ [`FINE_BINS`]).
    pub fn remove(&mut self, fine: usize) {
        self.counts[fine] = self.counts[fine].saturating_sub(1);
    }

    pub fn merge(&mut self, other: &Self) {
        for (count, more) in self.counts.iter_mut().zip(other.counts) {
            *count = count.saturating_add(more);
        }
    }

    pub fn counts(&self) -> &[u64; FINE_BINS] {
        &self.counts
    }

    pub fn coarse(&self) -> [u64; COARSE_BINS] {
        let mut coarse = [0u64; COARSE_BINS];
        for (fine, count) in self.counts.iter().enumerate() {
            coarse[coarse_of_fine(fine)] = coarse[coarse_of_fine(fine)].saturating_add(*count);
        }
        coarse
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0, |total, count| total.saturating_add(*count))
    }
}

/// The share of URLs in each coarse bin, in any common unit (percent or fractions): the
/// models use only ratios of shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoarseShares([f64; COARSE_BINS]);

impl CoarseShares {
    pub fn new(shares: &[f64]) -> Result<Self, BinsError> {
        let shares: [f64; COARSE_BINS] =
            shares.try_into().map_err(|_| BinsError::CoarseLength { found: shares.len() })?;
        match shares.iter().position(|share| !share.is_finite() || *share < 0.0) {
            Some(bin) => Err(BinsError::InvalidShare { bin, value: shares[bin] }),
            None => Ok(Self(shares)),
        }
    }

    pub fn values(&self) -> &[f64; COARSE_BINS] {
        &self.0
    }

    pub fn total(&self) -> f64 {
        self.0.iter().sum()
    }

    /// No URL in any bin: the models fall back to a uniform prior.
    pub fn is_empty(&self) -> bool {
        self.total() == 0.0
    }

    /// The rate at quantiles `bin_quantile` and `within_quantile` (each in [0, 1)): a coarse
    /// bin chosen by its share (which must have some weight), then a point spread uniformly
    /// within it; exactly 0 or 1 for the end bins. Two uniform draws give a random rate.
    pub fn rate_at(&self, bin_quantile: f64, within_quantile: f64) -> f64 {
        let mut remaining = bin_quantile * self.total();
        let weighted = self.0.iter().enumerate().filter(|(_, share)| **share > 0.0);
        // Rounding can leave a sliver past the last bin: it belongs to the last bin with weight.
        let mut bin = COARSE_BINS - 1;
        for (index, share) in weighted {
            bin = index;
            if remaining < *share {
                break;
            }
            remaining -= share;
        }
        match bin {
            0 => 0.0,
            1 => 0.01 + 0.09 * within_quantile,
            _ if bin == COARSE_BINS - 1 => 1.0,
            _ => (bin as f64 - 1.0) / 10.0 + 0.1 * within_quantile,
        }
    }
}

/// The paper's Table 1, DR of the popular group (sums to 100.01 % as printed).
pub const PAPER_POPULAR: CoarseShares = CoarseShares([
    0.2201, 0.0006, 0.0004, 0.0006, 0.0004, 0.0005, 0.0007, 0.0007, 0.0009, 0.0033, 0.0953, 0.6766,
]);

/// The paper's Table 1, DR of the random group.
pub const PAPER_RANDOM: CoarseShares = CoarseShares([
    0.1592, 0.0020, 0.0002, 0.0003, 0.0028, 0.0003, 0.0003, 0.0008, 0.0007, 0.0035, 0.0734, 0.7565,
]);

/// An assumed MR distribution for synthetic histories: 50 % never change, 20 % change at
/// every download, 30 % spread evenly over the ten bins between. The paper published no
/// MR distribution (its Table 2 repeats Table 1), so MR figures computed from histories
/// generated with it are not comparable with the paper's.
pub const SYNTHETIC_MR: CoarseShares =
    CoarseShares([0.50, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.20]);

/// The distributions known by name: `paper-popular`, `paper-random` and `synthetic`.
pub fn named_distribution(name: &str) -> Option<CoarseShares> {
    match name {
        "paper-popular" => Some(PAPER_POPULAR),
        "paper-random" => Some(PAPER_RANDOM),
        "synthetic" => Some(SYNTHETIC_MR),
        _ => None,
    }
}

pub const DISTRIBUTION_NAMES: [&str; 3] = ["paper-popular", "paper-random", "synthetic"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// `docs/algorithms/estimator.md` §3–4: the point density of the final ratio, 12 coarse bins.
    Paper,
    /// The fine histogram as the prior of the rate; binomial likelihood. The default: on
    /// the paper's protocol it mispredicts about a tenth as often as the paper's formula
    /// (BENCHMARKS.md), and a history the group's histogram leaves no room for gets the
    /// uniform prior, never a forecast of 0 from an empty bin.
    #[default]
    BetaBinomial,
    /// The URL's own Poisson change rate (Cho & Garcia-Molina); no group prior.
    Poisson,
}

/// What is predicted: successes among requests, or changes among comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Download rate.
    Dr,
    /// Modification rate.
    Mr,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Dr => "DR",
            Self::Mr => "MR",
        })
    }
}

/// What a prediction was conditioned on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Prior {
    /// The group's distribution.
    Group,
    /// A uniform prior: the group had no usable data.
    Uniform,
    /// Only the URL's own history (poisson).
    None,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// `future + 1` probabilities summing to 1; index c is the number of successes (DR)
    /// or changes (MR).
    pub probabilities: Vec<f64>,
    pub prior: Prior,
}

impl Prediction {
    fn uniform(future: u32) -> Self {
        let probability = 1.0 / (f64::from(future) + 1.0);
        Self { probabilities: (0..=future).map(|_| probability).collect(), prior: Prior::Uniform }
    }
}

/// The probability of at least one success (change) in the forecast.
pub fn at_least_one(prediction: &Prediction) -> f64 {
    1.0 - prediction.probabilities.first().copied().unwrap_or(1.0)
}

/// Thresholds for a URL to count in its group's distributions (§2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Eligibility {
    pub min_request_rate: f64,
    /// Least download recall (DR) or change recall (MR).
    pub min_recall: f64,
}

impl Eligibility {
    /// The paper's thresholds, for crawls that request every URL every time (§5's
    /// protocol).
    pub const PAPER: Self = Self { min_request_rate: 0.9, min_recall: 0.2 };
}

impl Default for Eligibility {
    /// Every URL with a defined rate counts. A scheduler requests a URL in a few of many
    /// crawls, so the paper's request rate would leave nearly every URL out; and pages that
    /// fail, once a policy requests them only to probe, would fall below its recall and
    /// leave the DR distribution, whose forecasts would then forget that pages fail.
    fn default() -> Self {
        Self { min_request_rate: 0.0, min_recall: 0.0 }
    }
}

impl Eligibility {
    /// Counts in the DR distribution (which needs a defined DR).
    pub fn dr_eligible(&self, rates: &Rates) -> bool {
        self.regular(rates)
            && rates.download_recall.is_some_and(|recall| recall >= self.min_recall)
            && rates.download_rate.is_some()
    }

    /// Counts in the MR distribution (which needs a defined MR).
    pub fn mr_eligible(&self, rates: &Rates) -> bool {
        self.regular(rates)
            && rates.change_recall.is_some_and(|recall| recall >= self.min_recall)
            && rates.modification_rate.is_some()
    }

    /// The DR or MR to count in the group distribution, when eligible.
    pub fn eligible_rate(&self, kind: Kind, rates: &Rates) -> Option<f64> {
        match kind {
            Kind::Dr if self.dr_eligible(rates) => rates.download_rate,
            Kind::Mr if self.mr_eligible(rates) => rates.modification_rate,
            _ => None,
        }
    }

    fn regular(&self, rates: &Rates) -> bool {
        rates.request_rate.is_some_and(|rate| rate >= self.min_request_rate)
    }
}

/// Exponents tabulated at most; larger ones are computed with `powf`.
const TABULATED_EXPONENT_LIMIT: u32 = 256;

/// One value per fine bin.
type ByBin = [f64; FINE_BINS];

/// θᵢʲ and (1 − θᵢ)ʲ for θᵢ = i/100, one row per exponent j up to the tabulated one.
#[derive(Debug)]
struct PowerTable {
    theta: Vec<ByBin>,
    complement: Vec<ByBin>,
}

impl PowerTable {
    fn new(max_exponent: u32) -> Self {
        let rows = |base: fn(usize) -> f64| {
            let rows = std::iter::successors(Some([1.0; FINE_BINS]), |row| {
                Some(std::array::from_fn(|fine| row[fine] * base(fine)))
            });
            (0..=max_exponent).zip(rows).map(|(_, row)| row).collect()
        };
        Self { theta: rows(theta_of), complement: rows(|fine| 1.0 - theta_of(fine)) }
    }

    /// The table for `max_exponent`, built once per process: every group's prior uses
    /// the same numbers, and there may be many groups.
    fn shared(max_exponent: u32) -> Arc<Self> {
        static TABLES: Mutex<BTreeMap<u32, Arc<PowerTable>>> = Mutex::new(BTreeMap::new());
        let max_exponent = max_exponent.min(TABULATED_EXPONENT_LIMIT);
        // A panic elsewhere while holding the lock cannot leave a half-built table behind.
        let mut tables = TABLES.lock().unwrap_or_else(PoisonError::into_inner);
        tables.entry(max_exponent).or_insert_with(|| Arc::new(Self::new(max_exponent))).clone()
    }

    fn theta(&self, exponent: u32) -> Cow<'_, ByBin> {
        Self::row(&self.theta, exponent, theta_of)
    }

    fn complement(&self, exponent: u32) -> Cow<'_, ByBin> {
        Self::row(&self.complement, exponent, |fine| 1.0 - theta_of(fine))
    }

    fn row(table: &[ByBin], exponent: u32, base: fn(usize) -> f64) -> Cow<'_, ByBin> {
        match table.get(exponent as usize) {
            Some(row) => Cow::Borrowed(row),
            None => Cow::Owned(std::array::from_fn(|fine| base(fine).powf(f64::from(exponent)))),
        }
    }
}

/// Σᵢ aᵢ bᵢ cᵢ, summed in four lanes: independent additions the compiler can interleave.
fn triple_dot(a: &ByBin, b: &ByBin, c: &ByBin) -> f64 {
    let mut lanes = [0.0; 4];
    let (a_chunks, b_chunks, c_chunks) = (a.chunks_exact(4), b.chunks_exact(4), c.chunks_exact(4));
    let rest: f64 = (a_chunks.remainder().iter().zip(b_chunks.remainder()).zip(c_chunks.remainder()))
        .map(|((a, b), c)| a * b * c)
        .sum();
    for ((a, b), c) in a_chunks.zip(b_chunks).zip(c_chunks) {
        for lane in 0..4 {
            lanes[lane] += a[lane] * b[lane] * c[lane];
        }
    }
    lanes.iter().sum::<f64>() + rest
}

/// x⁰ … xⁿ.
fn powers(x: f64, n: u32) -> Vec<f64> {
    (0..=n).zip(std::iter::successors(Some(1.0), |power| Some(power * x))).map(|(_, power)| power).collect()
}

/// Weights of a uniform prior over the fine θ grid.
const UNIFORM_WEIGHTS: [f64; FINE_BINS] = [1.0; FINE_BINS];

/// A group's distribution prepared once and reused for many predictions.
#[derive(Debug, Clone)]
pub struct PreparedPrior {
    /// The paper's point value P(x) for x in each fine bin.
    point_densities: [f64; FINE_BINS],
    /// Beta-binomial prior weight of θ = i/100 (any scale).
    theta_weights: [f64; FINE_BINS],
    empty: bool,
    powers: Arc<PowerTable>,
    forecasts: ForecastMemo,
}

/// Bytes of forecasts a memo keeps: past them it starts over. A prior serves one kind and
/// the estimator one horizon, so its entries are the window's histories its group's URLs
/// have: at most 21 for the default window of 5 outcomes (about 2.3 KB at the default
/// horizon), 2,080 for the longest. A group per host makes priors as many as hosts, so
/// each memo is small: a group whose URLs hold more histories than fit computes the
/// rest, as without a memo.
pub const FORECAST_MEMO_BYTES: usize = 4096;

/// What a memo entry is for: the model, the kind, yes, no, the horizon.
type ForecastKey = (Model, Kind, u32, u32, u32);

/// The forecasts a prior has given, by [`ForecastKey`]: a window holds few histories, so
/// a group's URLs share them, and a prior lives at least a batch, so most events find
/// theirs here instead of summing over the 101 bins (`forecast`). Not part of the prior's
/// value: a clone starts empty. Behind a lock, uncontended, as a stage's state is shared
/// across its tasks' awaits.
#[derive(Debug, Default)]
struct ForecastMemo(Mutex<MemoEntries>);

#[derive(Debug, Default)]
struct MemoEntries {
    /// Searched in turn: a few dozen entries fit in [`FORECAST_MEMO_BYTES`], fewer
    /// comparisons of five small fields than hashing the key takes.
    forecasts: Vec<(ForecastKey, (Prediction, f64))>,
    /// What the entries take: each its key, value and probabilities, and a byte to spare.
    bytes: usize,
}

fn memo_entry_bytes(prediction: &Prediction) -> usize {
    std::mem::size_of::<(ForecastKey, (Prediction, f64))>()
        .saturating_add(std::mem::size_of_val(prediction.probabilities.as_slice()))
        .saturating_add(1)
}

impl Clone for ForecastMemo {
    fn clone(&self) -> Self {
        Self::default()
    }
}

/// [`predict`] over `future` and [`predict_next`] of one history, each computed once per
/// prior: what the estimator asks at every event.
pub fn forecast(
    model: Model,
    kind: Kind,
    prior: &PreparedPrior,
    yes: u32,
    no: u32,
    future: u32,
) -> (Prediction, f64) {
    let key = (model, kind, yes, no, future);
    // A panic while the entries were held left them whole (one insert or clear).
    let mut memo = prior.forecasts.0.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, known)) = memo.forecasts.iter().find(|(entry, _)| *entry == key) {
        return known.clone();
    }
    let computed = (predict(model, kind, prior, yes, no, future), predict_next(model, kind, prior, yes, no));
    let bytes = memo_entry_bytes(&computed.0);
    if memo.bytes.saturating_add(bytes) > FORECAST_MEMO_BYTES {
        memo.forecasts.clear();
        memo.bytes = 0;
    }
    if bytes <= FORECAST_MEMO_BYTES {
        memo.bytes = memo.bytes.saturating_add(bytes);
        memo.forecasts.push((key, computed.clone()));
    }
    computed
}

impl PreparedPrior {
    /// Bytes its memo of forecasts holds, at most [`FORECAST_MEMO_BYTES`].
    pub fn memo_bytes(&self) -> usize {
        self.forecasts.0.lock().unwrap_or_else(PoisonError::into_inner).bytes
    }

    /// `max_exponent`: the largest yes + no + future expected, for the power tables (up to
    /// 256; larger exponents are computed, slower).
    pub fn new(histogram: &RateHistogram, max_exponent: u32) -> Self {
        let coarse = histogram.coarse();
        let total = histogram.total() as f64;
        let steps = fine_bins_per_coarse();
        let point_densities = std::array::from_fn(|fine| {
            let bin = coarse_of_fine(fine);
            if total == 0.0 {
                0.0
            } else {
                coarse[bin] as f64 / total / f64::from(steps[bin])
            }
        });
        Self {
            point_densities,
            theta_weights: histogram.counts().map(|count| count as f64),
            empty: total == 0.0,
            powers: PowerTable::shared(max_exponent),
            forecasts: ForecastMemo::default(),
        }
    }

    /// From published coarse shares (Table 1, a file): the beta-binomial prior spreads
    /// each bin's share evenly over its fine bins, which is the paper's point value.
    pub fn from_coarse_shares(shares: &CoarseShares, max_exponent: u32) -> Self {
        let steps = fine_bins_per_coarse();
        let point_densities = std::array::from_fn(|fine| {
            let bin = coarse_of_fine(fine);
            shares.values()[bin] / f64::from(steps[bin])
        });
        Self {
            point_densities,
            theta_weights: point_densities,
            empty: shares.is_empty(),
            powers: PowerTable::shared(max_exponent),
            forecasts: ForecastMemo::default(),
        }
    }

    /// No eligible URL: the group models fall back to a uniform prior.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// The paper's P(DR(x)) (or P(MR(x))) for the group.
    pub fn point_density(&self, rate: f64) -> f64 {
        self.point_densities[fine_bin(rate)]
    }
}

/// The distribution of successes (DR) or changes (MR) over the next `future` requests
/// (comparisons) of a URL whose latest ones had `yes` successes (changes) and `no` not.
/// `future` must not exceed [`MAX_FUTURE`].
pub fn predict(
    model: Model,
    kind: Kind,
    prior: &PreparedPrior,
    yes: u32,
    no: u32,
    future: u32,
) -> Prediction {
    let prediction = match model {
        Model::Paper => paper(prior, yes, no, future).map(|probabilities| (probabilities, Prior::Group)),
        Model::BetaBinomial => (!prior.is_empty())
            .then(|| beta_binomial(prior, &prior.theta_weights, yes, no, future))
            .flatten()
            .map(|probabilities| (probabilities, Prior::Group))
            .or_else(|| {
                beta_binomial(prior, &UNIFORM_WEIGHTS, yes, no, future)
                    .map(|probabilities| (probabilities, Prior::Uniform))
            }),
        Model::Poisson => poisson(kind, yes, no, future).map(|probabilities| (probabilities, Prior::None)),
    };
    match prediction {
        Some((probabilities, prior)) => Prediction { probabilities, prior },
        None => Prediction::uniform(future),
    }
}

/// The chance of a success (change) at the next request (comparison): what
/// `predict(model, kind, prior, yes, no, 1).probabilities[1]` gives, to the bit, in one
/// pass for the beta-binomial model: the estimator asks it at every event.
pub fn predict_next(model: Model, kind: Kind, prior: &PreparedPrior, yes: u32, no: u32) -> f64 {
    let next = match model {
        Model::BetaBinomial => (!prior.is_empty())
            .then(|| beta_binomial_next(prior, &prior.theta_weights, yes, no))
            .flatten()
            .or_else(|| beta_binomial_next(prior, &UNIFORM_WEIGHTS, yes, no)),
        Model::Paper | Model::Poisson => {
            return predict(model, kind, prior, yes, no, 1).probabilities.get(1).copied().unwrap_or(0.0)
        }
    };
    next.unwrap_or_else(|| Prediction::uniform(1).probabilities[1])
}

/// [`beta_binomial`]'s P(1) for `future` = 1: Σᵢ pᵢθᵢ / (Σᵢ pᵢ(1 − θᵢ) + Σᵢ pᵢθᵢ) with
/// pᵢ = wᵢ θᵢ^a (1 − θᵢ)^b, each sum in [`triple_dot`]'s lanes and order, so the result is
/// the same number.
fn beta_binomial_next(prior: &PreparedPrior, weights: &[f64; FINE_BINS], yes: u32, no: u32) -> Option<f64> {
    let table = &prior.powers;
    let (theta, complement) = (table.theta(yes), table.complement(no));
    let (theta_1, complement_1) = (table.theta(1), table.complement(1));
    let (mut unchanged, mut changed) = ([0.0; 4], [0.0; 4]);
    let rows = [weights, &*theta, &*complement, &*theta_1, &*complement_1].map(|row| row.chunks_exact(4));
    let [w, t, c, t1, c1] = rows;
    let (rest_w, rest_t, rest_c, rest_t1, rest_c1) =
        (w.remainder(), t.remainder(), c.remainder(), t1.remainder(), c1.remainder());
    for ((((w, t), c), t1), c1) in w.zip(t).zip(c).zip(t1).zip(c1) {
        for lane in 0..4 {
            let posterior = w[lane] * t[lane] * c[lane];
            unchanged[lane] += posterior * c1[lane];
            changed[lane] += posterior * t1[lane];
        }
    }
    let (mut unchanged_rest, mut changed_rest) = (0.0, 0.0);
    for i in 0..rest_w.len() {
        let posterior = rest_w[i] * rest_t[i] * rest_c[i];
        unchanged_rest += posterior * rest_c1[i];
        changed_rest += posterior * rest_t1[i];
    }
    let unchanged = unchanged.iter().sum::<f64>() + unchanged_rest;
    let changed = changed.iter().sum::<f64>() + changed_rest;
    let total = [unchanged, changed].iter().sum::<f64>();
    (total > 0.0 && total.is_finite()).then(|| changed / total)
}

/// §4: P(c) ∝ P(x = (a + c) / (a + b + future)).
fn paper(prior: &PreparedPrior, yes: u32, no: u32, future: u32) -> Option<Vec<f64>> {
    // Sums of u32s are exact in f64.
    let requests = f64::from(yes) + f64::from(no) + f64::from(future);
    if requests == 0.0 {
        return None;
    }
    let densities = (0..=future).map(|c| prior.point_density((f64::from(yes) + f64::from(c)) / requests));
    normalised(densities.collect())
}

/// P(c) ∝ C(k, c) Σᵢ wᵢ θᵢ^(a+c) (1 − θᵢ)^(b+k−c); `None` when no θ with weight can have
/// produced the history (the posterior is 0).
fn beta_binomial(
    prior: &PreparedPrior,
    weights: &[f64; FINE_BINS],
    yes: u32,
    no: u32,
    future: u32,
) -> Option<Vec<f64>> {
    let table = &prior.powers;
    let (theta, complement) = (table.theta(yes), table.complement(no));
    let posterior: ByBin = std::array::from_fn(|fine| weights[fine] * theta[fine] * complement[fine]);
    let mut sums: Vec<f64> = (0..=future)
        .zip((0..=future).rev())
        .map(|(c, rest)| triple_dot(&posterior, &table.theta(c), &table.complement(rest)))
        .collect();
    sums.iter_mut().zip(binomial_coefficients(future)).for_each(|(sum, coefficient)| *sum *= coefficient);
    normalised(sums)
}

/// Cho & Garcia-Molina: λ̂ = −ln((n − X + 0.5) / (n + 0.5)) per interval, so the chance
/// of an event in the next interval, 1 − e^{−λ̂}, is X / (n + 0.5). MR: the events are
/// changes; DR: the events are failures.
fn poisson(kind: Kind, yes: u32, no: u32, future: u32) -> Option<Vec<f64>> {
    let observations = f64::from(yes) + f64::from(no);
    if observations == 0.0 {
        return None;
    }
    let success = match kind {
        Kind::Mr => f64::from(yes) / (observations + 0.5),
        Kind::Dr => 1.0 - f64::from(no) / (observations + 0.5),
    };
    Some(binomial(future, success))
}

fn binomial(trials: u32, success: f64) -> Vec<f64> {
    let failures = powers(1.0 - success, trials);
    powers(success, trials)
        .iter()
        .zip(failures.iter().rev())
        .zip(binomial_coefficients(trials))
        .map(|((successes, failures), coefficient)| coefficient * successes * failures)
        .collect()
}

fn binomial_coefficients(n: u32) -> impl Iterator<Item = f64> {
    (0..=n).zip((0..=n).rev()).scan(1.0, |coefficient, (k, rest)| {
        let current = *coefficient;
        *coefficient = current * f64::from(rest) / (f64::from(k) + 1.0);
        Some(current)
    })
}

fn normalised(mut values: Vec<f64>) -> Option<Vec<f64>> {
    let total: f64 = values.iter().sum();
    if !(total > 0.0 && total.is_finite()) {
        return None;
    }
    values.iter_mut().for_each(|value| *value /= total);
    Some(values)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::history::replay_figure;

    fn popular() -> PreparedPrior {
        PreparedPrior::from_coarse_shares(&PAPER_POPULAR, 10)
    }

    fn sum(prediction: &Prediction) -> f64 {
        prediction.probabilities.iter().sum()
    }

    /// The default window's 21 histories at the default horizon are all remembered; the
    /// longest window's at the longest horizon start the memo over, within its bytes.
    #[test]
    fn a_memo_keeps_the_default_window_s_histories_within_its_bytes() {
        let prior = popular();
        let histories =
            |window: u32| (0..=window).flat_map(move |yes| (0..=window - yes).map(move |no| (yes, no)));
        for (yes, no) in histories(5) {
            forecast(Model::BetaBinomial, Kind::Dr, &prior, yes, no, 5);
        }
        let entry = memo_entry_bytes(&predict(Model::BetaBinomial, Kind::Dr, &prior, 0, 0, 5));
        assert_eq!(prior.memo_bytes(), 21 * entry);
        let longest = popular();
        for (yes, no) in histories(63) {
            forecast(Model::BetaBinomial, Kind::Mr, &longest, yes, no, 64);
            assert!(longest.memo_bytes() <= FORECAST_MEMO_BYTES, "{}", longest.memo_bytes());
        }
        assert!(longest.memo_bytes() > 0);
    }

    #[test]
    fn figure_2_a_url_that_failed_twice() {
        let prediction = predict(Model::Paper, Kind::Dr, &popular(), 0, 2, 3);
        let expected = 22.01 / (22.01 + 0.006 + 0.005 + 0.007);
        assert!((prediction.probabilities[0] - expected).abs() < 1e-12);
        assert_eq!((prediction.probabilities[0] * 1e4).round(), 9992.0);
        assert_eq!(prediction.prior, Prior::Group);
        assert_eq!(prediction.probabilities.len(), 4);
        assert!((at_least_one(&prediction) - 0.0008).abs() < 0.0001, "0.1 % as the paper rounds it");
    }

    /// 0 downloads in 100 requests, 2 ahead: 1/102 and 2/102 are in 0.01–0.09, so both
    /// get 0.06 % / 9 against {0}'s 22.01 % (rounding 1/102 down to {0} gave
    /// [0.49992, 0.49992, 0.00015]).
    #[test]
    fn ratios_under_one_percent_are_not_zero() {
        let prediction = predict(Model::Paper, Kind::Dr, &popular(), 0, 100, 2);
        let step = 0.0006 / 9.0;
        let total = 0.2201 + 2.0 * step;
        let expected = [0.2201 / total, step / total, step / total];
        for (got, want) in prediction.probabilities.iter().zip(expected) {
            assert!((got - want).abs() < 1e-12, "{:?}", prediction.probabilities);
        }
        assert_eq!((prediction.probabilities[0] * 1e5).round(), 99939.0);
    }

    #[test]
    fn point_values_divide_a_bin_by_its_steps() {
        let prior = popular();
        assert!((prior.point_density(0.5) - 0.0007 / 10.0).abs() < 1e-15);
        assert!((prior.point_density(0.05) - 0.0006 / 9.0).abs() < 1e-15);
        assert_eq!((prior.point_density(0.0), prior.point_density(1.0)), (0.2201, 0.6766));
    }

    #[test]
    fn bins_of_rates() {
        assert_eq!(fine_bin(3.0 / 10.0), 30, "3/10 × 100 is 29.999999999999996");
        assert_eq!(fine_bin(0.999), 99);
        assert_eq!(fine_bin(1.0), 100);
        assert_eq!(fine_bin(0.0), 0);
        assert_eq!(fine_bin(f64::NAN), 0);
        assert_eq!(fine_bin(0.004), 1, "above 0: in 0.01–0.09, not {{0}}");
        assert_eq!(fine_bin(1.0 / 200.0), 1, "one download in 200 requests");
        assert_eq!(fine_bin(0.9999), 99);
        assert_eq!(fine_bin(1.5), 100);
        let coarse: Vec<usize> = [0, 1, 9, 10, 19, 90, 99, 100].into_iter().map(coarse_of_fine).collect();
        assert_eq!(coarse, [0, 1, 1, 2, 2, 10, 10, 11]);
        assert_eq!(fine_bins_per_coarse(), [1, 9, 10, 10, 10, 10, 10, 10, 10, 10, 10, 1]);
    }

    #[test]
    fn histograms_count_and_derive_coarse_bins() {
        let mut histogram = RateHistogram::new();
        [0, 5, 30, 30, 100].into_iter().for_each(|fine| histogram.add(fine));
        histogram.remove(30);
        histogram.remove(77);
        assert_eq!(histogram.total(), 4);
        assert_eq!(histogram.coarse(), [1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1]);
        let mut merged = RateHistogram::from_fine(histogram.counts()).unwrap();
        merged.merge(&histogram);
        assert_eq!(merged.counts()[30], 2);
        assert_eq!(RateHistogram::from_fine(&[1; 12]), Err(BinsError::FineLength { found: 12 }));
    }

    #[test]
    fn a_histogram_gives_the_paper_its_coarse_shares() {
        let mut histogram = RateHistogram::new();
        [0, 0, 100, 55].into_iter().for_each(|fine| histogram.add(fine));
        let prior = PreparedPrior::new(&histogram, 10);
        assert_eq!(prior.point_density(0.0), 0.5);
        assert_eq!(prior.point_density(0.51), 0.25 / 10.0, "the 0.50–0.59 bin's share spread over it");
    }

    #[test]
    fn shares_are_validated() {
        assert!(CoarseShares::new(&[1.0; 12]).is_ok());
        assert_eq!(CoarseShares::new(&[1.0; 11]), Err(BinsError::CoarseLength { found: 11 }));
        let mut negative = [1.0; 12];
        negative[3] = -1.0;
        assert_eq!(CoarseShares::new(&negative), Err(BinsError::InvalidShare { bin: 3, value: -1.0 }));
        assert!(CoarseShares::new(&[f64::NAN; 12]).is_err());
        assert!((PAPER_RANDOM.total() - 1.0).abs() < 1e-9);
        assert!((SYNTHETIC_MR.total() - 1.0).abs() < 1e-9);
        assert_eq!(named_distribution("paper-random"), Some(PAPER_RANDOM));
        assert_eq!(named_distribution("table-2"), None);
    }

    #[test]
    fn an_empty_group_gives_a_uniform_prior() {
        let empty = PreparedPrior::new(&RateHistogram::new(), 10);
        assert!(empty.is_empty());
        let paper = predict(Model::Paper, Kind::Dr, &empty, 3, 2, 4);
        assert_eq!(paper, Prediction { probabilities: vec![0.2; 5], prior: Prior::Uniform });
        let beta = predict(Model::BetaBinomial, Kind::Dr, &empty, 0, 0, 4);
        assert_eq!(beta.prior, Prior::Uniform);
        assert!(beta.probabilities.iter().all(|p| (p - 0.2).abs() < 0.01), "{beta:?}");
        let zero_shares = CoarseShares::new(&[0.0; 12]).unwrap();
        let from_shares = PreparedPrior::from_coarse_shares(&zero_shares, 10);
        assert_eq!(predict(Model::Paper, Kind::Mr, &from_shares, 1, 1, 1).prior, Prior::Uniform);
    }

    #[test]
    fn a_uniform_theta_prior_is_beta_1_1() {
        let empty = PreparedPrior::new(&RateHistogram::new(), 10);
        for future in 1..=6 {
            let prediction = predict(Model::BetaBinomial, Kind::Mr, &empty, 0, 0, future);
            let uniform = 1.0 / f64::from(future + 1);
            // The 101-point grid approximates the integral to about 1 %.
            assert!(prediction.probabilities.iter().all(|p| (p - uniform).abs() < 0.01 * uniform + 0.003));
        }
        // Beta(1, 1) after 3 successes and 1 failure is Beta(4, 2): P(next succeeds) = 4/6.
        let next = predict(Model::BetaBinomial, Kind::Dr, &empty, 3, 1, 1);
        assert!((next.probabilities[1] - 4.0 / 6.0).abs() < 0.005);
    }

    #[test]
    fn beta_binomial_follows_the_group() {
        let mut histogram = RateHistogram::new();
        (0..10).for_each(|_| histogram.add(100));
        histogram.add(50);
        let prior = PreparedPrior::new(&histogram, 10);
        let perfect = predict(Model::BetaBinomial, Kind::Dr, &prior, 5, 0, 2);
        // Posterior: weight 10 at θ = 1, 1 × 0.5⁵ at θ = 0.5.
        let at_half = 0.5f64.powi(5);
        let expected_all = (10.0 + at_half * 0.25) / (10.0 + at_half);
        assert!((perfect.probabilities[2] - expected_all).abs() < 1e-12);
        assert_eq!(perfect.prior, Prior::Group);
        // A failure rules out θ = 1; only θ = 0.5 is left.
        let failed = predict(Model::BetaBinomial, Kind::Dr, &prior, 4, 1, 2);
        assert!((failed.probabilities[1] - 0.5).abs() < 1e-12);
    }

    #[test]
    fn the_next_request_s_chance_falls_back_as_the_forecast_does() {
        // A group prior at θ = 0 and 1 only: a success and a failure leave it no weight,
        // and the uniform prior answers.
        let mut histogram = RateHistogram::new();
        [0, 100, 100].into_iter().for_each(|fine| histogram.add(fine));
        let prior = PreparedPrior::new(&histogram, 10);
        for model in [Model::BetaBinomial, Model::Paper, Model::Poisson] {
            let forecast = predict(model, Kind::Dr, &prior, 1, 1, 1);
            let next = predict_next(model, Kind::Dr, &prior, 1, 1);
            assert_eq!(next.to_bits(), forecast.probabilities[1].to_bits(), "{model:?}");
        }
        assert_eq!(predict(Model::BetaBinomial, Kind::Dr, &prior, 1, 1, 1).prior, Prior::Uniform);
    }

    #[test]
    fn beta_binomial_falls_back_when_no_theta_fits() {
        let mut histogram = RateHistogram::new();
        histogram.add(100);
        let prior = PreparedPrior::new(&histogram, 10);
        let prediction = predict(Model::BetaBinomial, Kind::Dr, &prior, 3, 2, 2);
        assert_eq!(prediction.prior, Prior::Uniform);
        assert!((sum(&prediction) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn powers_beyond_the_table_are_computed() {
        let small = PreparedPrior::from_coarse_shares(&PAPER_RANDOM, 2);
        let large = PreparedPrior::from_coarse_shares(&PAPER_RANDOM, 20);
        let from_small = predict(Model::BetaBinomial, Kind::Dr, &small, 7, 3, 5);
        let from_large = predict(Model::BetaBinomial, Kind::Dr, &large, 7, 3, 5);
        for (s, l) in from_small.probabilities.iter().zip(&from_large.probabilities) {
            assert!((s - l).abs() < 1e-12);
        }
    }

    #[test]
    fn poisson_uses_the_url_alone() {
        let prior = popular();
        let never_changed = predict(Model::Poisson, Kind::Mr, &prior, 0, 5, 3);
        assert_eq!(never_changed.probabilities, [1.0, 0.0, 0.0, 0.0]);
        assert_eq!(never_changed.prior, Prior::None);
        // 2 failures in 4: p(fail) = 2 / 4.5, so P(3 successes of 3) = (2.5 / 4.5)³.
        let dr = predict(Model::Poisson, Kind::Dr, &prior, 2, 2, 3);
        assert!((dr.probabilities[3] - (2.5f64 / 4.5).powi(3)).abs() < 1e-12);
        assert_eq!(predict(Model::Poisson, Kind::Dr, &prior, 0, 0, 2).prior, Prior::Uniform);
    }

    #[test]
    fn the_poisson_forecast_follows_the_bias_reduced_rate() {
        // Cho & Garcia-Molina: λ̂ = −ln((n − X + 0.5)/(n + 0.5)) per interval; the chance of a
        // change next time is 1 − e^{−λ̂}.
        let rate = -((8.0f64 - 2.0 + 0.5) / (8.0 + 0.5)).ln();
        let next = predict(Model::Poisson, Kind::Mr, &popular(), 2, 6, 1);
        assert!((next.probabilities[1] - (1.0 - (-rate).exp())).abs() < 1e-12);
    }

    #[test]
    fn eligibility_thresholds() {
        let eligibility = Eligibility::PAPER;
        // Figure 1's D, K = 16: request rate 12/16 = 0.75 < 0.9.
        let d = replay_figure("!u.!uuvv.w!ww..w").rates(16);
        assert!(!eligibility.dr_eligible(&d));
        let lenient = Eligibility { min_request_rate: 0.75, min_recall: 0.2 };
        assert!(lenient.dr_eligible(&d) && lenient.mr_eligible(&d));
        assert_eq!(lenient.eligible_rate(Kind::Mr, &d), Some(0.25));
        // One download in 10 crawls: DR defined, MR not.
        let once = replay_figure("!a!!!!!!!!").rates(10);
        assert!(eligibility.dr_eligible(&once));
        assert!(!Eligibility { min_request_rate: 0.9, min_recall: 0.0 }.mr_eligible(&once));
        // A failing URL a scheduler only probes, 3 requests in 21 crawls: out of the paper's
        // DR distribution, in the default's at DR 0.
        let probed = replay_figure("!.........!.........!").rates(21);
        assert!(!eligibility.dr_eligible(&probed));
        assert_eq!(Eligibility::default().eligible_rate(Kind::Dr, &probed), Some(0.0));
    }

    fn histograms() -> impl Strategy<Value = RateHistogram> {
        let count = prop_oneof![3 => Just(0u64), 1 => 0u64..1000];
        proptest::collection::vec(count, FINE_BINS)
            .prop_map(|counts| RateHistogram::from_fine(&counts).unwrap())
    }

    fn models() -> impl Strategy<Value = Model> {
        prop_oneof![Just(Model::Paper), Just(Model::BetaBinomial), Just(Model::Poisson)]
    }

    proptest! {
        #[test]
        fn the_next_request_s_chance_is_the_one_step_forecast_s_to_the_bit(
            histogram in histograms(),
            model in models(),
            dr in any::<bool>(),
            yes in 0u32..=300,
            no in 0u32..=300,
        ) {
            let kind = if dr { Kind::Dr } else { Kind::Mr };
            for prior in [PreparedPrior::new(&histogram, 20), PreparedPrior::new(&RateHistogram::new(), 20)] {
                let forecast = predict(model, kind, &prior, yes, no, 1).probabilities[1];
                let next = predict_next(model, kind, &prior, yes, no);
                prop_assert_eq!(next.to_bits(), forecast.to_bits(), "{} against {}", next, forecast);
            }
        }

        /// The memo gives what the two functions compute, whichever history, model, kind
        /// and horizon came first; a clone of the prior gives the same.
        #[test]
        fn a_remembered_forecast_is_the_computed_one(
            histogram in histograms(),
            model in models(),
            asks in proptest::collection::vec((any::<bool>(), 0u32..=8, 0u32..=8, 0u32..=6), 1..40),
        ) {
            let prior = PreparedPrior::new(&histogram, 20);
            let copy = prior.clone();
            for (dr, yes, no, future) in asks {
                let kind = if dr { Kind::Dr } else { Kind::Mr };
                let computed = (predict(model, kind, &prior, yes, no, future), predict_next(model, kind, &prior, yes, no));
                prop_assert_eq!(&forecast(model, kind, &prior, yes, no, future), &computed);
                prop_assert_eq!(&forecast(model, kind, &copy, yes, no, future), &computed);
                prop_assert!(prior.memo_bytes() <= FORECAST_MEMO_BYTES);
            }
        }

        #[test]
        fn predictions_are_distributions(
            histogram in histograms(),
            model in models(),
            dr in any::<bool>(),
            yes in 0u32..=64,
            no in 0u32..=64,
            future in 0u32..=16,
        ) {
            let prior = PreparedPrior::new(&histogram, 20);
            let kind = if dr { Kind::Dr } else { Kind::Mr };
            let prediction = predict(model, kind, &prior, yes, no, future);
            prop_assert_eq!(prediction.probabilities.len(), future as usize + 1);
            prop_assert!(prediction.probabilities.iter().all(|p| p.is_finite() && *p >= 0.0));
            prop_assert!((sum(&prediction) - 1.0).abs() < 1e-9, "{:?}", prediction);
        }
    }
}
