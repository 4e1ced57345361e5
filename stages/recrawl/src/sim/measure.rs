//! Freshness measures from ground truth, the closed forms and known-rate optima they are
//! compared with (`docs/algorithms/freshness-limits.md`), a credit scheduler that turns optimal rates
//! into per-period picks, and a reader for Bing's `urlid_offset_history.txt` replay format.
//! Time is in periods (f64); period p covers [p, p+1).

use recrawl_model::freshness::d_of_x;
use serde::Serialize;
use std::fmt;

/// Totals of the measures over pages and time, from ground truth. Times are integrals over
/// pages × time, so totals of different page sets can simply be added ([`Measures::merge`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Measures {
    pub pages: u64,
    pub horizon: f64,
    pub fresh_time: f64,
    pub age_time: f64,
    pub harmonic_time: f64,
    pub requests: u64,
    pub downloads: u64,
    pub unchanged_downloads: u64,
    pub failures: u64,
}

impl Measures {
    /// Divides a time integral by pages × horizon; 0 when nothing was observed.
    fn per_page_time(&self, total: f64) -> f64 {
        let denom = self.pages as f64 * self.horizon;
        if denom > 0.0 {
            total / denom
        } else {
            0.0
        }
    }
    /// Time-average share of fresh pages: fresh_time / (pages · horizon).
    pub fn freshness(&self) -> f64 {
        self.per_page_time(self.fresh_time)
    }
    /// Time-average age in periods: age_time / (pages · horizon).
    pub fn age(&self) -> f64 {
        self.per_page_time(self.age_time)
    }
    /// Time-average harmonic staleness cost H_N per page.
    pub fn harmonic_cost(&self) -> f64 {
        self.per_page_time(self.harmonic_time)
    }
    /// Requests that brought nothing new: downloads of an unchanged page plus failures.
    pub fn wasted_requests(&self) -> u64 {
        self.unchanged_downloads + self.failures
    }
    /// Adds another set of pages. The averages assume one common horizon, so the larger is kept.
    pub fn merge(&mut self, other: &Measures) {
        self.pages += other.pages;
        self.horizon = self.horizon.max(other.horizon);
        self.fresh_time += other.fresh_time;
        self.age_time += other.age_time;
        self.harmonic_time += other.harmonic_time;
        self.requests += other.requests;
        self.downloads += other.downloads;
        self.unchanged_downloads += other.unchanged_downloads;
        self.failures += other.failures;
    }
}

/// One page's stored copy followed against its true change times. The store starts with the
/// copy live at time 0 (an initial crawl), i.e. fresh. Each call integrates the measures
/// exactly since the previous event (constant freshness and H_N, linear age), so it is O(1).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CopyTracker {
    /// Time up to which the measures have been integrated.
    last: f64,
    /// Time of the first change the stored copy missed (meaningful while `missed > 0`).
    first_missed: f64,
    /// H_N for N = `missed`.
    harmonic: f64,
    missed: u32,
}

impl CopyTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Integrates the measures up to `at`; an earlier (or NaN) time counts as "now".
    fn advance(&mut self, at: f64, m: &mut Measures) {
        let t = if at > self.last { at } else { self.last };
        let dt = t - self.last;
        if self.missed == 0 {
            m.fresh_time += dt;
        } else {
            // Age grows linearly: trapezoid of (last − first_missed) and (t − first_missed).
            m.age_time += 0.5 * ((self.last - self.first_missed) + (t - self.first_missed)) * dt;
            m.harmonic_time += self.harmonic * dt;
        }
        self.last = t;
    }

    /// The live page changed at time `at` (calls come in non-decreasing time order per page,
    /// interleaved with `fetched`).
    pub fn changed(&mut self, at: f64, m: &mut Measures) {
        self.advance(at, m);
        if self.missed == 0 {
            self.first_missed = self.last;
        }
        self.missed = self.missed.saturating_add(1);
        self.harmonic += 1.0 / f64::from(self.missed);
    }

    /// A request at time `at`; `downloaded` false = failure (the stored copy stays as it was).
    /// A download stores the live version and counts as unchanged if nothing was missed.
    pub fn fetched(&mut self, at: f64, downloaded: bool, m: &mut Measures) {
        self.advance(at, m);
        m.requests += 1;
        if downloaded {
            m.downloads += 1;
            if self.missed == 0 {
                m.unchanged_downloads += 1;
            }
            self.missed = 0;
            self.harmonic = 0.0;
        } else {
            m.failures += 1;
        }
    }

    /// Closes the page's accounting at `horizon`: integrates the rest, counts the page and
    /// records the horizon. Call once per page.
    pub fn finish(&mut self, horizon: f64, m: &mut Measures) {
        self.advance(horizon, m);
        m.pages += 1;
        m.horizon = m.horizon.max(horizon);
    }

    pub fn is_fresh(&self) -> bool {
        self.missed == 0
    }

    /// Changes the stored copy has missed.
    pub fn missed(&self) -> u32 {
        self.missed
    }
}

/// Cho & Garcia-Molina, fixed interval I, r = λ·I: F = (1 − e^{−r})/r (1 when r = 0).
/// `expm1` keeps small r exact.
pub fn fixed_interval_freshness(rate: f64, interval: f64) -> f64 {
    let r = rate * interval;
    if r.is_nan() || r <= 0.0 {
        return 1.0; // no change (or no wait) ever makes the copy stale; also NaN products
    }
    if r.is_infinite() {
        return 0.0;
    }
    -(-r).exp_m1() / r
}

/// Solves D(x) = t for t in (0, 1): bracket from D(x) ≤ x²/2, then safeguarded Newton.
fn d_inverse(t: f64) -> f64 {
    let s = (2.0 * t).sqrt();
    let (mut lo, mut hi) = (s, s);
    while d_of_x(hi) < t && hi < 1e4 {
        lo = hi;
        hi *= 2.0;
    }
    // D(x) = x²/2 − x³/3 + …, so x ≈ s + s²/3 starts Newton close for small t.
    let guess = s + s * s / 3.0;
    let mut x = if guess > lo && guess < hi { guess } else { hi };
    for _ in 0..200 {
        let fx = d_of_x(x) - t;
        if fx == 0.0 {
            return x;
        } else if fx < 0.0 {
            lo = x;
        } else {
            hi = x;
        }
        let mut next = x - fx / (x * (-x).exp());
        if !(next > lo && next < hi) {
            next = 0.5 * (lo + hi);
        }
        if (next - x).abs() <= 1e-12 * x {
            // Newton converges quadratically: the remaining error is far below 1e-15·x.
            return next;
        }
        x = next;
    }
    x
}

/// The frequency whose marginal value is κ (0 if even the first crawl is worth less), and its
/// slope κ·∂f/∂κ = −f·t·eˣ/x² (from f = λ/x, t = κλ = D(x), D'(x) = x·e^{−x}).
fn fixed_frequency(rate: f64, kappa: f64) -> (f64, f64) {
    let t = kappa * rate;
    if !positive_finite(rate) || t.is_nan() || t >= 1.0 {
        return (0.0, 0.0);
    }
    let x = d_inverse(t);
    if x > 0.0 {
        let f = rate / x;
        (f, -f * t * x.exp() / (x * x))
    } else {
        let f = (rate / (2.0 * kappa)).sqrt(); // t underflowed: x ≈ √(2t)
        (f, -0.5 * f)
    }
}

/// Usable rates and budgets are positive and finite; anything else counts as 0.
fn positive_finite(x: f64) -> bool {
    x > 0.0 && x.is_finite()
}

/// The known-rate optimum for fixed-interval crawling (Cho & Garcia-Molina): per-page crawl
/// frequencies (crawls per period) for each (rate, page count) pair maximising Σ F_i(f_i)
/// subject to Σ count·f = budget. Lagrange: ∂F_i/∂f_i = κ where f_i > 0, and f_i = 0 where
/// 1/λ_i (the marginal at f → 0+) ≤ κ, so the fastest pages are never crawled. Each f_i(κ)
/// comes from inverting the marginal; κ from a bracketed Newton search on ln κ. Pages with
/// λ = 0 get 0 (always fresh); a non-positive or non-finite budget gives all zeros.
pub fn optimal_frequencies(rates: &[(f64, u64)], budget: f64) -> Vec<f64> {
    let kappa_max = rates
        .iter()
        .filter(|&&(l, c)| c > 0 && positive_finite(l))
        .map(|&(l, _)| (1.0 / l).min(f64::MAX))
        .fold(0.0, f64::max);
    if !positive_finite(budget) || kappa_max <= 0.0 {
        return vec![0.0; rates.len()];
    }
    // Σ count·f − budget and its slope in u = ln κ (both decreasing).
    let excess = |u: f64| {
        let kappa = u.exp();
        rates.iter().fold((-budget, 0.0), |(sum, slope), &(l, c)| {
            let (f, df) = fixed_frequency(l, kappa);
            (sum + c as f64 * f, slope + c as f64 * df)
        })
    };
    // At ln κ_max nothing is crawled; step down until the budget is met, then Newton within
    // the bracket, bisecting whenever a step would leave it.
    let (mut lo, mut hi) = (kappa_max.ln() - 1.0, kappa_max.ln());
    let mut step = 1.0;
    let (mut g, mut slope) = excess(lo);
    while g < 0.0 && lo > -740.0 {
        (hi, step) = (lo, step * 2.0);
        lo -= step;
        (g, slope) = excess(lo);
    }
    let mut u = lo;
    for _ in 0..200 {
        if g.abs() <= 1e-13 * budget || hi - lo <= 1e-15 * (1.0 + u.abs()) {
            break;
        }
        if g > 0.0 {
            lo = u;
        } else {
            hi = u;
        }
        let next = u - g / slope;
        u = if next > lo && next < hi { next } else { 0.5 * (lo + hi) };
        (g, slope) = excess(u);
    }
    let kappa = u.exp();
    rates.iter().map(|&(l, _)| fixed_frequency(l, kappa).0).collect()
}

/// [`optimal_frequencies`] for one rate per page: equal rates are solved together.
pub fn optimal_frequencies_per_page(rates: &[f64], budget: f64) -> Vec<f64> {
    let mut sorted = rates.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut groups: Vec<(f64, u64)> = Vec::new();
    for r in sorted {
        match groups.last_mut() {
            Some(g) if g.0.total_cmp(&r).is_eq() => g.1 += 1,
            _ => groups.push((r, 1)),
        }
    }
    let solved = optimal_frequencies(&groups, budget);
    rates
        .iter()
        .map(|r| match groups.binary_search_by(|g| g.0.total_cmp(r)) {
            Ok(i) => solved[i],
            Err(_) => 0.0, // unreachable: every rate is in its own group
        })
        .collect()
}

/// Turns per-page frequencies into per-period picks deterministically: each period every page's
/// credit grows by f_i, the `m` pages with the largest credit (ties: lower index) are picked and
/// their credit drops by 1, so over T periods page i is picked ≈ f_i·T times.
#[derive(Debug, Clone)]
pub struct CreditSchedule {
    frequencies: Vec<f64>,
    credit: Vec<f64>,
    /// Reused index buffer for the partial selection.
    order: Vec<u32>,
}

impl CreditSchedule {
    /// Negative or non-finite frequencies count as 0. Picks are u32 indices, so at most
    /// u32::MAX pages are kept.
    pub fn new(mut frequencies: Vec<f64>) -> Self {
        frequencies.truncate(u32::MAX as usize);
        for f in &mut frequencies {
            if !positive_finite(*f) {
                *f = 0.0;
            }
        }
        let n = frequencies.len();
        Self { credit: vec![0.0; n], order: (0..=u32::MAX).take(n).collect(), frequencies }
    }

    /// The pages picked this period, largest credit first. O(n + m log m).
    pub fn next_period(&mut self, m: usize) -> Vec<u32> {
        let Self { frequencies, credit, order } = self;
        for (c, f) in credit.iter_mut().zip(frequencies.iter()) {
            *c += f;
        }
        let m = m.min(order.len());
        if m == 0 {
            return Vec::new();
        }
        let cmp = |a: &u32, b: &u32| credit[*b as usize].total_cmp(&credit[*a as usize]).then(a.cmp(b));
        order.select_nth_unstable_by(m - 1, cmp);
        let mut picks = order[..m].to_vec();
        picks.sort_unstable_by(cmp);
        for &i in &picks {
            credit[i as usize] -= 1.0;
        }
        picks
    }
}

/// One URL of a replay: the first crawl (the initial stored copy) and the later crawls with
/// whether the page had changed since the crawl before.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayPage {
    pub url_id: u64,
    pub first_crawl_day: f64,
    /// (absolute day of the crawl, changed since the previous crawl).
    pub crawls: Vec<(f64, bool)>,
}

/// A malformed replay line: its 1-based number and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayError {
    pub line: usize,
    pub what: String,
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "replay line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for ReplayError {}

/// Reads Bing's `urlid_offset_history.txt`: URL id, first-crawl offset in days, then
/// [days since previous crawl, changed 0/1] pairs. The layout is undocumented, so whitespace,
/// commas, semicolons, brackets and parentheses all separate numbers; blank lines and lines
/// starting with '#' are skipped. Day gaps must be finite and ≥ 0.
pub fn parse_replay(text: &str) -> Result<Vec<ReplayPage>, ReplayError> {
    let mut pages = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |what: String| ReplayError { line: index + 1, what };
        let tokens: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || ",;[]()".contains(c))
            .filter(|t| !t.is_empty())
            .collect();
        let day = |token: &str, name: &str| match token.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(err(format!("{name} {token:?} is not a finite number ≥ 0"))),
        };
        let (id, offset, rest) = match tokens.as_slice() {
            [id, offset, rest @ ..] => (id, offset, rest),
            _ => return Err(err("expected a URL id and a first-crawl offset".into())),
        };
        let url_id =
            id.parse::<u64>().map_err(|_| err(format!("URL id {id:?} is not a non-negative integer")))?;
        let first_crawl_day = day(offset, "first-crawl offset")?;
        if rest.len() % 2 != 0 {
            return Err(err(format!(
                "{} values after the first two fields; they must come in [days, changed] pairs",
                rest.len()
            )));
        }
        let mut at = first_crawl_day;
        let mut crawls = Vec::with_capacity(rest.len() / 2);
        for pair in rest.chunks_exact(2) {
            at += day(pair[0], "days since previous crawl")?;
            let changed = match pair[1].parse::<f64>() {
                Ok(v) if v == 0.0 || v == 1.0 => v == 1.0,
                _ => return Err(err(format!("changed flag {:?} is not 0 or 1", pair[1]))),
            };
            crawls.push((at, changed));
        }
        pages.push(ReplayPage { url_id, first_crawl_day, crawls });
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64;
    use recrawl_model::freshness::freshness_index;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn fetched_right_after_each_change_is_always_fresh() {
        let (mut p, mut m) = (CopyTracker::new(), Measures::default());
        for t in [0.5, 1.5, 2.5] {
            p.changed(t, &mut m);
            p.fetched(t, true, &mut m);
        }
        p.finish(3.0, &mut m);
        // Stale only for zero-length instants: freshness 3/3, no age, no harmonic cost.
        assert_eq!((m.freshness(), m.age(), m.harmonic_cost()), (1.0, 0.0, 0.0));
        assert_eq!((m.requests, m.downloads, m.unchanged_downloads, m.wasted_requests()), (3, 3, 0, 0));
    }

    #[test]
    fn one_missed_change() {
        let (mut p, mut m) = (CopyTracker::new(), Measures::default());
        p.changed(1.0, &mut m);
        p.finish(4.0, &mut m);
        // Fresh on [0,1): 1/4. Age ∫_1^4 (t−1) dt = 4.5 → 4.5/4. H_1 = 1 on [1,4): 3/4.
        assert!(close(m.freshness(), 0.25, 1e-15));
        assert!(close(m.age(), 4.5 / 4.0, 1e-15));
        assert!(close(m.harmonic_cost(), 0.75, 1e-15));
        assert_eq!((m.pages, m.horizon, p.missed(), p.is_fresh()), (1, 4.0, 1, false));
    }

    #[test]
    fn two_missed_changes() {
        let (mut p, mut m) = (CopyTracker::new(), Measures::default());
        p.changed(1.0, &mut m);
        p.changed(2.0, &mut m);
        p.finish(4.0, &mut m);
        // H_1 = 1 on [1,2), H_2 = 1.5 on [2,4): (1 + 3)/4 = 1. Age still counts from the
        // first missed change: ∫_1^4 (t−1) dt / 4 = 1.125.
        assert!(close(m.harmonic_cost(), 1.0, 1e-15));
        assert!(close(m.age(), 1.125, 1e-15));
        assert_eq!(p.missed(), 2);
    }

    #[test]
    fn wasted_requests() {
        let (mut p, mut m) = (CopyTracker::new(), Measures::default());
        p.fetched(1.0, true, &mut m); // nothing changed since the initial crawl
        assert_eq!((m.unchanged_downloads, m.wasted_requests()), (1, 1));
        p.changed(2.0, &mut m);
        p.fetched(3.0, false, &mut m); // failure: copy stays stale
        assert!(!p.is_fresh());
        assert_eq!((m.failures, m.downloads, m.requests, m.wasted_requests()), (1, 1, 2, 2));
        p.fetched(3.5, true, &mut m); // a real change picked up: not wasted
        p.finish(4.0, &mut m);
        // Fresh on [0,2) and [3.5,4): 2.5/4.
        assert!(p.is_fresh() && close(m.freshness(), 2.5 / 4.0, 1e-15));
        assert_eq!((m.unchanged_downloads, m.wasted_requests()), (1, 2));
    }

    /// Cho & Garcia-Molina, fixed interval I, r = λ·I: A = I·(1/2 − 1/r + (1 − e^{−r})/r²)
    /// (0 when r = 0). For r < 1/2 the bracket is summed as its series Σ_{k≥3} (−1)^{k+1} r^{k−2}/k!
    /// because the closed form cancels to ≈ r/6.
    pub fn fixed_interval_age(rate: f64, interval: f64) -> f64 {
        let r = rate * interval;
        if r.is_nan() || r <= 0.0 {
            return 0.0;
        }
        if r.is_infinite() {
            return 0.5 * interval; // changes immediately: age rises from 0 to I
        }
        let g = if r < 0.5 {
            let (mut term, mut sum) = (r / 6.0, 0.0);
            for k in 4..=30 {
                sum += term;
                term *= -r / f64::from(k);
                if term.abs() <= 1e-17 * sum {
                    break;
                }
            }
            sum
        } else {
            0.5 - 1.0 / r + (-(-r).exp_m1()) / (r * r)
        };
        interval * g
    }

    /// ∂F/∂f of fixed-interval freshness at crawl frequency f: the freshness index at the
    /// interval 1/f; its limit at f → 0+ is 1/λ, 0 for λ = 0: what the optimum's KKT
    /// condition is checked with.
    pub fn fixed_interval_marginal(rate: f64, frequency: f64) -> f64 {
        if !positive_finite(rate) {
            0.0
        } else if frequency.is_nan() || frequency <= 0.0 {
            1.0 / rate
        } else {
            freshness_index(rate, 1.0 / frequency)
        }
    }

    #[test]
    fn closed_forms() {
        assert_eq!(fixed_interval_freshness(0.0, 5.0), 1.0);
        assert!(close(fixed_interval_freshness(1e-12, 1.0), 1.0, 1e-11));
        // r = 1: F = 1 − e^{−1} = 0.6321205588; A = 1/2 − 1 + 0.6321205588 = 0.1321205588.
        assert!(close(fixed_interval_freshness(1.0, 1.0), 1.0 - (-1.0f64).exp(), 1e-15));
        assert!(close(fixed_interval_age(1.0, 1.0), 0.132_120_558_8, 1e-10));
        assert_eq!(fixed_interval_age(0.0, 1.0), 0.0);
        // Small r = 2e-6: A = I·(r/6 − r²/24 + …), next term I·r³/120 ≈ 1e-19 (and the series
        // branch agrees with the closed form at r = 1/2).
        assert!(close(fixed_interval_age(1e-6, 2.0), 2.0 * (2e-6 / 6.0 - 4e-12 / 24.0), 1e-18));
        let r = 0.49f64; // series branch vs the closed form, accurate enough here
        assert!(close(fixed_interval_age(r, 1.0), 0.5 - 1.0 / r - (-r).exp_m1() / (r * r), 1e-15));
        // Numeric check: age over one interval with the first change at T ~ Exp(λ) is
        // (I−T)²/2 for T < I; A = E[that]/I. Midpoint rule over T, λ = 0.7, I = 3.
        let (lambda, interval, n) = (0.7f64, 3.0f64, 100_000);
        let h = interval / f64::from(n);
        let numeric: f64 = (0..n)
            .map(|k| {
                let t = (f64::from(k) + 0.5) * h;
                lambda * (-lambda * t).exp() * (interval - t).powi(2) / 2.0 * h
            })
            .sum::<f64>()
            / interval;
        assert!(close(fixed_interval_age(lambda, interval), numeric, 1e-8));
    }

    #[test]
    fn fixed_interval_optimum_and_kkt() {
        let f = optimal_frequencies_per_page(&[2.0, 2.0, 2.0], 1.5);
        assert!(f.iter().all(|&x| close(x, 0.5, 1e-9)));
        // Rates 1 and 4, budget 1. If only page 1 is crawled, f₁ = 1, x = λ/f = 1 and
        // κ = ∂F₁/∂f = (1 − 2/e)/1 = 0.2642 ≥ 1/4 = ∂F₂/∂f at 0+, so f = (1, 0) is optimal.
        let f = optimal_frequencies(&[(1.0, 1), (4.0, 1)], 1.0);
        assert!(close(f[0] + f[1], 1.0, 1e-9) && f[1] == 0.0);
        let kappa = fixed_interval_marginal(1.0, f[0]);
        assert!(close(kappa, 1.0 - 2.0 / std::f64::consts::E, 1e-9));
        assert!(fixed_interval_marginal(4.0, 0.0) <= kappa);
        // Both crawled: equal marginal values and the budget met (with counts and λ = 0 pages).
        let pairs = [(0.5, 3), (1.0, 2), (0.0, 5), (50.0, 1)];
        let f = optimal_frequencies(&pairs, 4.0);
        let spent: f64 = pairs.iter().zip(&f).map(|(p, x)| p.1 as f64 * x).sum();
        assert!(close(spent, 4.0, 1e-9) && f[2] == 0.0 && f[3] == 0.0 && f[0] > 0.0);
        let (m0, m1) = (fixed_interval_marginal(0.5, f[0]), fixed_interval_marginal(1.0, f[1]));
        assert!(close(m0, m1, 1e-9) && fixed_interval_marginal(50.0, 0.0) <= m0);
        assert_eq!(optimal_frequencies(&[(1.0, 1)], 0.0), vec![0.0]);
        assert_eq!(optimal_frequencies(&[(0.0, 4)], 1.0), vec![0.0]);
    }

    #[test]
    fn credit_schedule_follows_frequencies() {
        // Credits: (.5,.25,.25)→pick 0; (0,.5,.5)→1; (.5,−.25,.75)→2; (1,0,0)→0; back to 0s.
        // A 4-period cycle 0,1,2,0: over 400 periods exactly 200, 100, 100.
        let mut s = CreditSchedule::new(vec![0.5, 0.25, 0.25]);
        let mut counts = [0i64; 3];
        for _ in 0..400 {
            for i in s.next_period(1) {
                counts[i as usize] += 1;
            }
        }
        assert!((counts[0] - 200).abs() <= 1 && (counts[1] - 100).abs() <= 1);
        assert!((counts[2] - 100).abs() <= 1);
        let mut s = CreditSchedule::new(vec![0.1, 0.9, 0.9]);
        assert_eq!(s.next_period(2), vec![1, 2]); // largest credit first, ties by index
        assert_eq!(s.next_period(9).len(), 3);
    }

    #[test]
    fn monte_carlo_matches_closed_forms() {
        // 10 independent pages (merged), each: Poisson changes λ = 0.3, crawled every 2
        // periods for 20,000 periods. One page gives 10,000 intervals, where the age mean
        // has σ ≈ 1.4% (per-interval age sd ≈ 0.245, mean 0.173); ten make 2% a 4σ margin.
        let (rate, interval, horizon) = (0.3, 2.0, 20_000.0);
        let mut rng = Pcg64::seed_from_u64(0x9E37_79B9_7F4A_7C15);
        let mut gap = move || -(1.0 - rng.random::<f64>()).ln() / rate;
        let mut total = Measures::default();
        for _ in 0..10 {
            let (mut p, mut m) = (CopyTracker::new(), Measures::default());
            let mut next_change = gap();
            let mut crawl = interval;
            while crawl <= horizon {
                while next_change < crawl {
                    p.changed(next_change, &mut m);
                    next_change += gap();
                }
                p.fetched(crawl, true, &mut m);
                crawl += interval;
            }
            p.finish(horizon, &mut m);
            total.merge(&m);
        }
        // F(0.6) = (1 − e^{−0.6})/0.6 = 0.7520; A = 2·(1/2 − 1/0.6 + 0.4512/0.36) = 0.1733.
        assert_eq!((total.pages, total.horizon), (10, horizon));
        assert!(close(total.freshness(), fixed_interval_freshness(rate, interval), 0.01));
        let age = fixed_interval_age(rate, interval);
        assert!((total.age() / age - 1.0).abs() < 0.02, "{} vs {age}", total.age());
    }

    #[test]
    fn replay_layouts_and_errors() {
        let text = "# urlid offset history\n\n12345\t3\t[[1,0],[1,1],[2,0]]\n\
                    12346 3 [1,0] [1,1] [2,0]\n12347,3,1,0,1,1,2,0\n12348 0.5\n";
        let pages = parse_replay(text).expect("valid replay");
        let crawls = vec![(4.0, false), (5.0, true), (7.0, false)];
        assert_eq!(pages.len(), 4);
        for (page, id) in pages[..3].iter().zip(12345..) {
            assert_eq!(*page, ReplayPage { url_id: id, first_crawl_day: 3.0, crawls: crawls.clone() });
        }
        assert!(pages[3].crawls.is_empty());
        let err = parse_replay("1 0 [1,0]\n\n2 0 [1,0] [1]\n").expect_err("odd pair count");
        assert_eq!(err.line, 3);
        assert!(err.to_string().starts_with("replay line 3:"));
        let err = parse_replay("# h\n1 0 [x,0]\n").expect_err("not a number");
        assert_eq!(err.line, 2);
        assert_eq!(parse_replay("7 0 [1,2]").map_err(|e| e.line), Err(1)); // flag not 0/1
        assert_eq!(parse_replay("abc 0 1 0").map_err(|e| e.line), Err(1)); // bad URL id
        assert_eq!(parse_replay("9").map_err(|e| e.line), Err(1)); // no offset
    }
}
