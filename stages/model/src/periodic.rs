//! The freshness index of a page whose change rate follows the day
//! (`docs/algorithms/freshness-limits.md`, "Time of day"), λ·w(t) with
//! w(t) = 1 + a·cos(ω(t − peak)), ω = 2π a day: the `freshness` policy's index for the
//! hosts whose [`DayProfile`](crate::day::DayProfile) has learned a day.
//!
//! The constant-rate index comes from relaxing the budget with a multiplier ν per fetch:
//! each page then maximises its fresh time less ν per fetch on its own. With a periodic
//! rate, let g be the page's gain per hour under its best policy and h(φ) the relative
//! value of a download at phase φ of the day. A copy taken at d is fresh at d + s with
//! probability F_d(s) = exp(−λ∫_d^{d+s} w). The best next download comes at t = d + τ
//! where F_d(τ) + h′(t) = g, and the cycle's value gives h(d) = ∫₀^τ F_d − ν − gτ + h(t).
//! Eliminating g:
//!
//!   ν = ∫₀^τ (F_d(s) − F_d(τ)) ds + h(t) − h(d) − τ·h′(t),
//!
//! so the right-hand side is the index: fetch when it reaches ν. On a flat day h is
//! constant and it is the constant index D(λτ)/λ.
//!
//! h comes from a one-page dynamic programme on a grid of half-hour phases, by backward
//! induction over intervals of whole half-hours; its tables are kept per rate, amplitude
//! and ν rounded to fifths of their logarithms (the amplitude to fifths), so a period
//! solves a table only where those move. Whole half-hour intervals leave a ripple in h
//! with the period of the best interval, up to a few percent of the index, the same on a
//! flat day, where h is constant: each table takes off the flat day's.

use std::collections::HashMap;
use std::f64::consts::{PI, TAU};

use crate::small_keys::SmallKeys;

use crate::freshness::{d_of_x, PEAK_INDEX_PER_AGE};

/// A day in hours.
pub const DAY_HOURS: f64 = 24.0;

/// Phases of the day the dynamic programme and its tables use.
const STEPS: usize = 48;
const STEP_HOURS: f64 = DAY_HOURS / STEPS as f64;

/// Steps of the first term's integration: the rate is taken as constant within each at
/// its mean, and a page's score costs an exponential a step. Steps span at most a
/// quarter of the page's time between changes, and a quarter to 3 hours: within 0.2 %
/// of the integral (a test).
const INTEGRATION_STEP_HOURS: (f64, f64) = (0.25, 3.0);
const INTEGRATION_STEP_CHANGES: f64 = 0.25;

/// Buckets per unit of ln λ, of the amplitude and of ln ν: tables are solved at the
/// buckets' centres (twentieths gave the same freshness to ±0.0001 on the simulated web,
/// and solved 16 times as many tables).
const BUCKETS_PER_UNIT: f64 = 5.0;

/// Tables kept before the cache starts over (about 400 B each).
pub const MAX_TABLES: usize = 16_384;

/// A page whose constant-rate interval is longer than this keeps the constant index: over
/// so many days its day averages out.
const LONGEST_INTERVAL_HOURS: f64 = 4.0 * DAY_HOURS;

/// Largest amplitude the index takes, as the profile's.
const MAX_AMPLITUDE: f64 = 0.95;

/// Below this amplitude a page keeps the constant index: its tables' bucket is a flat
/// day's, and the day would move its first term by a few percent at most.
const LEAST_AMPLITUDE: f64 = 0.5 / BUCKETS_PER_UNIT;

/// Whether a day profile of this amplitude is strong enough for the periodic index, as
/// opposed to the constant one (NaN is not).
pub fn shows_the_day(amplitude: f64) -> bool {
    amplitude >= LEAST_AMPLITUDE
}

/// A page as the periodic index sees it. Times are in hours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeriodicPage {
    /// λ, changes per hour on the day's average.
    pub rate: f64,
    /// a of w(t) = 1 + a·cos(ω(t − peak)).
    pub amplitude: f64,
    /// τ: hours since the copy was downloaded.
    pub age: f64,
    /// Hours from the profile's peak to now, of any day: only the phase matters.
    pub since_peak: f64,
    /// ν, in freshness·hours: the index a fetch must reach.
    pub multiplier: f64,
}

/// The relative values h of the pages' (rate, amplitude, ν) buckets solved so far; `None`
/// where the bucket's interval spans too many days.
#[derive(Debug, Default)]
pub struct DayTables {
    /// At most [`MAX_TABLES`] buckets of rounded rates.
    tables: HashMap<Bucket, Option<Box<DayTable>>, SmallKeys>,
}

/// One bucket's h, and the longest interval its programme weighed: h′ says nothing about
/// a copy older than that.
#[derive(Debug)]
struct DayTable {
    relative: [f64; STEPS],
    longest_hours: f64,
}

/// A table's rounded (ln λ, amplitude, ln ν), in buckets.
type Bucket = (i32, i32, i32);

impl PeriodicPage {
    /// The index in freshness·hours, given its [`DayTables::correction`]: the fresh time
    /// the copy kept, ∫₀^τ (F_d(s) − F_d(τ)) ds, plus the correction. Never negative: a
    /// fetch buys no less than nothing, and a negative index ending a full quota would
    /// become the next period's ν.
    pub fn index(&self, correction: f64) -> f64 {
        let since_download = (self.since_peak - self.age).rem_euclid(DAY_HOURS);
        let (area, left) = accrued(self.rate, self.amplitude(), since_download, self.age);
        ((area - self.age * left).max(0.0) + correction).max(0.0)
    }

    /// At least [`Self::index`], with the first term bounded by one exponential rather
    /// than a day's: F_d(s) − F_d(τ) ≤ Λ(τ) − Λ(s) ≤ λ(1 + a)(τ − s) gives λ(1 + a)τ²/2;
    /// it is at most τ; and by parts it is ∫₀^τ s·λw·F_d ds, where w ≤ 1 + a and
    /// Λ(s) ≥ λs − 2λa/ω give (1 + a)·e^{2λa/ω}·D(λτ)/λ, with D(x)/λ at most 1/λ and
    /// D(x*)/x*·τ. Raised by a billionth against rounding.
    pub fn bound(&self, correction: f64) -> f64 {
        let (rate, age, amplitude) = (self.rate, self.age, self.amplitude());
        let lift = (rate * amplitude * DAY_HOURS / PI).exp();
        let first = (rate * (1.0 + amplitude) * age * age / 2.0)
            .min(age)
            .min(lift / rate)
            .min((1.0 + amplitude) * lift * PEAK_INDEX_PER_AGE * age);
        (first * (1.0 + 1e-9) + correction.abs() * 1e-9 + correction).max(0.0)
    }

    fn amplitude(&self) -> f64 {
        self.amplitude.min(MAX_AMPLITUDE)
    }
}

impl DayTables {
    /// The page's correction h(t) − h(d) − τ·h′(t) for [`PeriodicPage::index`]; `None`
    /// where the constant index applies: a day too flat to show ([`shows_the_day`]), inputs
    /// that are not positive and finite, an interval of days, or a copy older than any
    /// interval the table's programme weighed. The last is a page left overdue (a
    /// back-off, an outage, a shrunk budget): τ·h′(t) would grow with its age and swing
    /// its index with the hour without bound, while its day no longer matters to when it
    /// should be fetched: as soon as it can.
    pub fn correction(&mut self, page: &PeriodicPage) -> Option<f64> {
        let usable = |x: f64| x.is_finite() && x > 0.0;
        if !(usable(page.rate) && usable(page.age) && usable(page.multiplier) && page.since_peak.is_finite())
        {
            return None;
        }
        if !shows_the_day(page.amplitude) {
            return None;
        }
        let amplitude = page.amplitude();
        let (table, solved_amplitude) = self.table(page.rate, amplitude, page.multiplier)?;
        if page.age > table.longest_hours {
            return None;
        }
        let (h_now, slope) = interpolate(&table.relative, page.since_peak);
        let (h_download, _) = interpolate(&table.relative, page.since_peak - page.age);
        // h is about linear in the amplitude: scaled from the bucket's centre.
        Some((h_now - h_download - page.age * slope) * amplitude / solved_amplitude)
    }

    /// Tables solved and kept.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// The table of the bucket of (`rate`, `amplitude`, `multiplier`), and the amplitude it
    /// was solved at.
    fn table(&mut self, rate: f64, amplitude: f64, multiplier: f64) -> Option<(&DayTable, f64)> {
        // Saturating casts: the rounded logarithms of positive finite numbers fit an i32.
        let bucket = |x: f64| (x * BUCKETS_PER_UNIT).round() as i32;
        let key = (bucket(rate.ln()), bucket(amplitude), bucket(multiplier.ln()));
        if !self.tables.contains_key(&key) && self.tables.len() >= MAX_TABLES {
            self.tables.clear();
        }
        let centre = |b: i32| f64::from(b) / BUCKETS_PER_UNIT;
        self.tables
            .entry(key)
            .or_insert_with(|| solve(centre(key.0).exp(), centre(key.1), centre(key.2).exp()).map(Box::new))
            .as_deref()
            .map(|table| (table, centre(key.1)))
    }
}

/// ∫₀^φ w, with the peak at 0.
fn cumulative(amplitude: f64, phase: f64) -> f64 {
    phase + amplitude * DAY_HOURS / TAU * (TAU * phase / DAY_HOURS).sin()
}

/// Freshness·hours accrued over `length` hours by a copy taken at `from` hours after the
/// peak, and the freshness left at the end. F(s + day) = F(s)·e^{−λ·day}: whole days are
/// a geometric series, so at most two days are integrated.
fn accrued(rate: f64, amplitude: f64, from: f64, length: f64) -> (f64, f64) {
    if length <= DAY_HOURS {
        return accrued_within_a_day(rate, amplitude, from, length);
    }
    let days = (length / DAY_HOURS).floor();
    let rest = length - days * DAY_HOURS;
    // The day from `from` in two parts, the first the rest: a day's integration in all.
    let (rest_area, rest_left) = accrued_within_a_day(rate, amplitude, from, rest);
    let (after_area, after_left) = accrued_within_a_day(rate, amplitude, from + rest, DAY_HOURS - rest);
    let (day_area, day_left) = (rest_area + rest_left * after_area, rest_left * after_left);
    let kept = day_left.powf(days);
    let series = if day_left < 1.0 { (1.0 - kept) / (1.0 - day_left) } else { days };
    (day_area * series + kept * rest_area, kept * rest_left)
}

/// [`accrued`] over at most a day, in steps of [`INTEGRATION_STEP_HOURS`], the rate taken
/// as constant within each at its mean.
fn accrued_within_a_day(rate: f64, amplitude: f64, from: f64, length: f64) -> (f64, f64) {
    if length.is_nan() || length <= 0.0 {
        return (0.0, 1.0);
    }
    // `length` is at most a day.
    let (shortest, longest) = INTEGRATION_STEP_HOURS;
    let longest_step = (INTEGRATION_STEP_CHANGES / rate).clamp(shortest, longest);
    let steps = (length / longest_step).ceil().clamp(1.0, DAY_HOURS / shortest);
    let step = length / steps;
    // ∫ w over a step is step + a·day/2π·(sin ωφ′ − sin ωφ); the sines by rotation, so a
    // page costs one exponential a step.
    let swing = amplitude * DAY_HOURS / TAU;
    let (turn_sin, turn_cos) = (TAU * step / DAY_HOURS).sin_cos();
    let (mut sin, mut cos) = (TAU * from / DAY_HOURS).sin_cos();
    let (mut area, mut left) = (0.0f64, 1.0f64);
    for _ in 0..(steps as usize) {
        let next_sin = sin * turn_cos + cos * turn_sin;
        cos = cos * turn_cos - sin * turn_sin;
        let hazard = rate * (step + swing * (next_sin - sin));
        sin = next_sin;
        let lost = (-hazard).exp_m1();
        area += left * if hazard > 1e-9 { -lost * step / hazard } else { step };
        left *= 1.0 + lost;
        if left < 1e-17 {
            // Nothing measurable is left to accrue.
            return (area, 0.0);
        }
    }
    (area, left)
}

/// ∫₀^step e^{−hazard·s/step} ds: the fresh time a step adds per unit of freshness at
/// its start.
fn fresh_time(hazard: f64, step: f64) -> f64 {
    if hazard > 1e-9 {
        -(-hazard).exp_m1() * step / hazard
    } else {
        step
    }
}

/// h at the grid's phases (the peak at 0), or `None` where the constant-rate interval at
/// ν is longer than [`LONGEST_INTERVAL_HOURS`] or ν is out of reach.
// Grid indices, bounded by the constants above and the interval's bound.
#[allow(clippy::arithmetic_side_effects)]
fn solve(rate: f64, amplitude: f64, multiplier: f64) -> Option<DayTable> {
    // The constant-rate interval: D(λτ) = λν.
    let target = multiplier * rate;
    let longest_x = rate * LONGEST_INTERVAL_HOURS;
    if !(target > 0.0 && target < 0.999 && d_of_x(longest_x) >= target) {
        return None;
    }
    let (mut low, mut high) = (0.0f64, longest_x);
    for _ in 0..60 {
        let middle = (low + high) / 2.0;
        if d_of_x(middle) < target {
            low = middle;
        } else {
            high = middle;
        }
    }
    let interval = low / rate;
    // Intervals up to three constant-rate ones and a day, at most 8 days.
    let longest = (((3.0 * interval + DAY_HOURS) / STEP_HOURS).ceil() as usize).clamp(2, 8 * STEPS);
    // Long enough for the values at the first day to have forgotten the end.
    let horizon = longest + (6.0 * interval.max(DAY_HOURS) / STEP_HOURS) as usize + 4 * STEPS;
    // Whole half-hour intervals leave a ripple with the best interval's period, the same
    // on a flat day, where h is constant: it is taken off.
    let periodic = relative_values_on_the_grid(rate, amplitude, multiplier, longest, horizon);
    let flat = relative_values_on_the_grid(rate, 0.0, multiplier, longest, horizon);
    let mut relative = [0.0; STEPS];
    for ((h, periodic), flat) in relative.iter_mut().zip(periodic).zip(flat) {
        *h = periodic - flat;
    }
    Some(DayTable { relative, longest_hours: longest as f64 * STEP_HOURS })
}

/// h at the grid's phases from backward induction over `horizon` steps, with intervals of
/// up to `longest` steps.
// Grid indices, bounded by the caller's.
#[allow(clippy::arithmetic_side_effects)]
fn relative_values_on_the_grid(
    rate: f64,
    amplitude: f64,
    multiplier: f64,
    longest: usize,
    horizon: usize,
) -> [f64; STEPS] {
    // Per phase of the day: the fresh time its step adds per unit of freshness at its
    // start, and the freshness it leaves.
    let (fresh, decay): (Vec<f64>, Vec<f64>) = (0..STEPS)
        .map(|q| {
            let from = q as f64 * STEP_HOURS;
            let hazard = rate * (cumulative(amplitude, from + STEP_HOURS) - cumulative(amplitude, from));
            (fresh_time(hazard, STEP_HOURS), (-hazard).exp())
        })
        .unzip();
    // reward[p][k]: freshness·hours over k steps after a download at phase p.
    let mut reward = vec![vec![0.0; longest + 1]; STEPS];
    for (p, row) in reward.iter_mut().enumerate() {
        let (mut area, mut left) = (0.0, 1.0);
        for k in 0..longest {
            let q = (p + k) % STEPS;
            area += left * fresh[q];
            left *= decay[q];
            row[k + 1] = area;
        }
    }
    let mut value = vec![0.0; horizon + 1];
    for t in (0..horizon).rev() {
        let reach = longest.min(horizon - t);
        let (rewards, values) = (&reward[t % STEPS][1..=reach], &value[t + 1..=t + reach]);
        // Four running maxima, so that each does not wait on the one before.
        let mut best = [f64::NEG_INFINITY; 4];
        let (reward_chunks, value_chunks) = (rewards.chunks_exact(4), values.chunks_exact(4));
        let tail = reward_chunks.remainder().iter().zip(value_chunks.remainder());
        for (rewards, values) in reward_chunks.zip(value_chunks) {
            for lane in 0..4 {
                best[lane] = best[lane].max(rewards[lane] + values[lane]);
            }
        }
        for (reward, value) in tail {
            best[0] = best[0].max(reward + value);
        }
        value[t] = best[0].max(best[1]).max(best[2].max(best[3])) - multiplier;
    }
    let gain = (value[0] - value[STEPS]) / DAY_HOURS;
    let mut relative = [0.0; STEPS];
    for (p, h) in relative.iter_mut().enumerate() {
        *h = value[p] + gain * p as f64 * STEP_HOURS - value[0];
    }
    relative
}

/// h at `phase` hours after the peak, linearly between the grid's points, and its slope.
// Grid indices below STEPS.
#[allow(clippy::arithmetic_side_effects)]
fn interpolate(values: &[f64; STEPS], phase: f64) -> (f64, f64) {
    let x = phase.rem_euclid(DAY_HOURS) / STEP_HOURS;
    // In [0, STEPS]: rem_euclid can round up to the day itself.
    let i = (x.floor() as usize) % STEPS;
    let j = (i + 1) % STEPS;
    let within = x - x.floor();
    (values[i] * (1.0 - within) + values[j] * within, (values[j] - values[i]) / STEP_HOURS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(rate: f64, amplitude: f64, age: f64, since_peak: f64, multiplier: f64) -> PeriodicPage {
        PeriodicPage { rate, amplitude, age, since_peak, multiplier }
    }

    fn index(tables: &mut DayTables, page: &PeriodicPage) -> Option<f64> {
        tables.correction(page).map(|correction| page.index(correction))
    }

    #[test]
    fn the_grid_s_ripple_is_taken_off_so_a_small_amplitude_makes_a_small_correction() {
        let spread = |values: [f64; STEPS]| {
            values.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b))
                - values.iter().fold(f64::INFINITY, |a, &b| a.min(b))
        };
        // A bucket's centre whose best interval is no whole number of half-hours: on a
        // flat day the grid alone varies h, by 2.5 % of what an amplitude of 0.8 does.
        let (rate, multiplier) = ((-12.0 / BUCKETS_PER_UNIT).exp(), (3.5 / BUCKETS_PER_UNIT).exp());
        let ripple = spread(relative_values_on_the_grid(rate, 0.0, multiplier, 80, 2000));
        let large = spread(solve(rate, 0.8, multiplier).unwrap().relative);
        assert!(ripple > 0.02 * large, "{ripple} {large}");
        // Taken off, what is left is about linear in the amplitude: 0.01 / 0.8 of it.
        let small = spread(solve(rate, 0.01, multiplier).unwrap().relative);
        assert!(small < 0.015 * large, "{small} {large}");
    }

    #[test]
    fn a_flat_day_keeps_the_constant_index_and_a_nearly_flat_one_comes_close() {
        let mut tables = DayTables::default();
        for (rate, age) in [(0.1, 5.0), (0.3, 2.0), (0.05, 30.0)] {
            for amplitude in [0.0, LEAST_AMPLITUDE / 2.0, f64::NAN] {
                assert_eq!(index(&mut tables, &page(rate, amplitude, age, 10.0 + age, 2.0)), None);
            }
            let constant = d_of_x(rate * age) / rate;
            let mut departure = |amplitude: f64| {
                (0..24)
                    .map(|hour| {
                        index(&mut tables, &page(rate, amplitude, age, f64::from(hour), 2.0)).unwrap()
                    })
                    .fold(0.0f64, |most, index| most.max((index - constant).abs()))
            };
            let (least, more) = (departure(LEAST_AMPLITUDE), departure(4.0 * LEAST_AMPLITUDE));
            assert!(least > 0.0 && least < 0.4 * more, "{rate} {age}: {least} {more}");
        }
    }

    #[test]
    fn the_first_term_is_the_integral_of_the_fresh_time() {
        // Copies taken 5 hours after the peak: ∫ F by fine midpoints.
        for (rate, length) in [(0.005, 200.0), (0.03, 60.0), (0.2, 30.0), (1.0, 7.0)] {
            let (amplitude, from) = (0.9, 5.0);
            let steps = 300_000;
            let step = length / steps as f64;
            let numeric: f64 = (0..steps)
                .map(|i| {
                    let s = (i as f64 + 0.5) * step;
                    (-rate * (cumulative(amplitude, from + s) - cumulative(amplitude, from))).exp() * step
                })
                .sum();
            let (area, left) = accrued(rate, amplitude, from, length);
            assert!((area - numeric).abs() < 2e-3 * numeric, "{rate}: {area} {numeric}");
            let exact_left =
                (-rate * (cumulative(amplitude, from + length) - cumulative(amplitude, from))).exp();
            assert!((left - exact_left).abs() < 1e-12, "{rate}: {left} {exact_left}");
        }
    }

    #[test]
    fn a_fetch_after_the_busy_hours_outbids_one_before_them() {
        // Peak at 0 h: a copy taken at 21 h meets the busy hours, one taken at 3 h has
        // them behind it; for the same age, fetching at 3 h is worth more.
        let mut tables = DayTables::default();
        let before = index(&mut tables, &page(0.2, 0.8, 6.0, 21.0, 1.0)).unwrap();
        let after = index(&mut tables, &page(0.2, 0.8, 6.0, 27.0, 1.0)).unwrap();
        assert!(after > before, "{after} {before}");
    }

    #[test]
    fn the_bound_is_at_least_the_index() {
        let mut tables = DayTables::default();
        for rate in [0.01, 0.05, 0.2, 1.0, 4.0] {
            for amplitude in [LEAST_AMPLITUDE, 0.4, 0.9] {
                for age in [0.5, 3.0, 12.0, 40.0, 200.0] {
                    for since_peak in [0.0, 5.5, 13.0, 20.25] {
                        for multiplier in [0.3, 1.0, 4.0] {
                            let page = page(rate, amplitude, age, since_peak, multiplier);
                            if let Some(correction) = tables.correction(&page) {
                                let (index, bound) = (page.index(correction), page.bound(correction));
                                assert!(index <= bound, "{page:?}: {index} > {bound}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn long_intervals_and_hostile_inputs_fall_back_to_the_constant_index() {
        let mut tables = DayTables::default();
        // D(λτ) = λν has no root past 1, and a slow page's interval spans weeks.
        assert_eq!(index(&mut tables, &page(2.0, 0.5, 3.0, 1.0, 10.0)), None);
        assert_eq!(index(&mut tables, &page(0.001, 0.5, 3.0, 1.0, 20.0)), None);
        for hostile in [f64::NAN, f64::INFINITY, -1.0, 0.0] {
            assert_eq!(index(&mut tables, &page(hostile, 0.5, 3.0, 1.0, 1.0)), None);
            assert_eq!(index(&mut tables, &page(0.2, 0.5, hostile, 1.0, 1.0)), None);
            assert_eq!(index(&mut tables, &page(0.2, 0.5, 3.0, 1.0, hostile)), None);
        }
        assert_eq!(index(&mut tables, &page(0.2, 0.5, 3.0, f64::NAN, 1.0)), None);
        // An amplitude out of range is clamped, a huge rate or ν rounds into a bucket.
        for (rate, amplitude, multiplier) in [(0.2, 7.0, 1.0), (1e300, 0.5, 1e-300), (1e-300, 0.5, 1e300)] {
            if let Some(index) = index(&mut tables, &page(rate, amplitude, 3.0, 1.0, multiplier)) {
                assert!(index.is_finite(), "{rate} {amplitude} {multiplier}");
            }
        }
    }

    #[test]
    fn an_overdue_copy_keeps_the_constant_index_and_no_index_is_negative() {
        // λ = 0.05/h at ν = 1 h: an interval of about 7 h, whose programme weighs
        // intervals up to three of them and a day. Before, at 240 h the index swung over
        // [−39, 77] with the hour, where the constant index is 20.
        let mut tables = DayTables::default();
        let (rate, multiplier) = (0.05, 1.0);
        let mut weighed = 0.0f64;
        for tenths in 1..4000 {
            let age = f64::from(tenths) / 10.0;
            for half_hours in 0..48 {
                let page = page(rate, 0.9, age, f64::from(half_hours) / 2.0, multiplier);
                let Some(correction) = tables.correction(&page) else {
                    continue;
                };
                weighed = weighed.max(age);
                let index = page.index(correction);
                assert!(index >= 0.0 && index <= page.bound(correction), "{page:?}: {index}");
            }
        }
        assert!(weighed > 24.0 && weighed < 240.0, "{weighed}");
        for half_hours in 0..48 {
            let overdue = page(rate, 0.9, 240.0, f64::from(half_hours) / 2.0, multiplier);
            assert_eq!(tables.correction(&overdue), None);
        }
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut tables = DayTables::default();
        for i in 0..MAX_TABLES + 10 {
            // A new (rate, ν) bucket each time, slow enough that no table is solved.
            let rate = (-((i % 1000) as f64) / BUCKETS_PER_UNIT - 20.0).exp();
            let multiplier = ((i / 1000) as f64 / BUCKETS_PER_UNIT).exp();
            assert_eq!(index(&mut tables, &page(rate, 0.5, 3.0, 1.0, multiplier)), None);
        }
        assert!(tables.len() <= MAX_TABLES && !tables.is_empty(), "{}", tables.len());
    }
}
