//! When in the day a host's pages change, learned from its pages' comparisons and the
//! times its `Last-Modified` headers date (`docs/algorithms/freshness-limits.md`, "Time of
//! day").
//!
//! A host's change intensity over the day is taken as its first harmonic,
//! w(t) = 1 + x·cos ωt + y·sin ωt with ω = 2π a day, mean 1 (a site busiest at one time
//! and quietest twelve hours later). Each comparison and each dated change adds its score
//! at a flat day and its information ([`DayProfile::observe_comparison`],
//! [`DayProfile::observe`]). A comparison says whether an interval saw a change: more
//! often when the interval covers busy hours. A dated change is the page's latest in the interval
//! (a, f] between two downloads, so even on a flat day its time is not spread evenly: with
//! the page's rate λ it falls at d with density q(d) ∝ e^{−λ(f−d)}, just before the fetch
//! for a fast page. Under w its density is ∝ λw(d)·e^{−λ∫_d^f w}: likelier where the hours
//! after it are quiet. Its log's derivative in x at x = y = 0 is
//! cos ωd − λ∫_d^f cos ωs ds = cos ωd − k·(sin ωf − sin ωd), k = λ/ω, and in y likewise;
//! so each dated change adds to the score that statistic less its mean under q, and to
//! the information its covariance under q; [`DayProfile::harmonic`] is
//! the one Newton step from a flat day, shrunk by [`PRIOR_CHANGES`] flat pseudo-changes
//! of a whole day's information (½ on each axis). Were every interval whole days and the
//! pages slow, that is twice the dated changes' mean cosine and sine, as for changes drawn
//! from w itself (E[cos ωd] = x/2).
//!
//! The scheduler's `freshness` policy turns the profile into an index for a rate that
//! follows the day (`recrawl_scheduler::periodic`): a fetch is best placed as the quiet
//! hours begin, when the busy hours' changes are in and the next change is longest away.

use serde::{Deserialize, Serialize};

/// A day in milliseconds.
pub const DAY_MS: i64 = 86_400_000;

/// Flat pseudo-changes a host's profile starts from.
pub const PRIOR_CHANGES: f64 = 20.0;

/// Fastest change rate a dated change is weighed at, per ms (one a minute): the latest of
/// many changes says little more of the day.
const MAX_RATE_PER_MS: f64 = 1.0 / 60_000.0;

/// The least ratio of the information's eigenvalues ([`DayProfile::covers_the_day`]):
/// observations spread evenly over a stretch of the day give about 0.22 over six hours, 1
/// over twelve or more, 0.006 over one.
const MIN_DAY_COVERAGE: f64 = 0.2;

/// Largest amplitude a learned profile takes, so the intensity stays positive.
const MAX_AMPLITUDE: f64 = 0.95;

/// The comparisons and dated changes of one host, as the sums their first harmonic needs.
/// Sums add: a host's profile is the sum of its URLs' partitions' profiles, each of which
/// the scheduler's changelog keeps ([`DayProfile::is_sound`] checks one read back).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DayProfile {
    /// Σ of the score's two components.
    score: [f64; 2],
    /// Σ of the information: cos·cos, cos·sin, sin·sin.
    information: [f64; 3],
    changes: f64,
    comparisons: f64,
}

impl DayProfile {
    /// Counts a change dated at `dated_ms`, the latest of a page with change rate
    /// `rate_per_ms` between downloads at `previous_ms` and `fetched_ms` (Unix ms; the
    /// time of day is UTC's). An interval that is not forward is skipped.
    pub fn observe(&mut self, dated_ms: i64, previous_ms: i64, fetched_ms: i64, rate_per_ms: f64) {
        let Some(length_ms) = fetched_ms.checked_sub(previous_ms).filter(|&length| length > 0) else {
            return;
        };
        let rate = if rate_per_ms.is_finite() { rate_per_ms.clamp(0.0, MAX_RATE_PER_MS) } else { 0.0 };
        let fetch_angle = angle_of(fetched_ms);
        let (cos_mean, sin_mean) = latest_change_moment(rate, length_ms, fetch_angle, 1.0);
        let second = latest_change_moment(rate, length_ms, 2.0 * fetch_angle, 2.0);
        let cos_cos = (1.0 + second.0) / 2.0 - cos_mean * cos_mean;
        let sin_sin = (1.0 - second.0) / 2.0 - sin_mean * sin_mean;
        let cos_sin = second.1 / 2.0 - cos_mean * sin_mean;
        // The score of (x, y) is (c + k·s, s − k·c) for c, s the change's cosine and sine
        // less their means under q, k = λ/ω: w at the change, and the quiet after it.
        let k = rate * DAY_MS as f64 / std::f64::consts::TAU;
        let angle = angle_of(dated_ms);
        let (c, s) = (angle.cos() - cos_mean, angle.sin() - sin_mean);
        self.score[0] += c + k * s;
        self.score[1] += s - k * c;
        self.information[0] += cos_cos + 2.0 * k * cos_sin + k * k * sin_sin;
        self.information[1] += (1.0 - k * k) * cos_sin + k * (sin_sin - cos_cos);
        self.information[2] += k * k * cos_cos - 2.0 * k * cos_sin + sin_sin;
        self.changes += 1.0;
    }

    /// Counts a comparison: whether a page with change rate `rate_per_ms` changed between
    /// downloads at `previous_ms` and `fetched_ms`. Its log-likelihood is −Λ unchanged and
    /// ln(1 − e^{−Λ}) changed, Λ = λ∫w over the interval; at a flat day its gradient in
    /// (x, y) is λ·(∫cos ωt, ∫sin ωt) times −1 or 1/(e^{Λ} − 1), and its expected
    /// information that gradient's square over e^{Λ} − 1.
    pub fn observe_comparison(&mut self, changed: bool, previous_ms: i64, fetched_ms: i64, rate_per_ms: f64) {
        let Some(length_ms) = fetched_ms.checked_sub(previous_ms).filter(|&length| length > 0) else {
            return;
        };
        let rate = if rate_per_ms.is_finite() { rate_per_ms.clamp(0.0, MAX_RATE_PER_MS) } else { 0.0 };
        let omega = std::f64::consts::TAU / DAY_MS as f64;
        let (from, to) = (angle_of(previous_ms), angle_of(previous_ms) + length_ms as f64 * omega);
        let gradient = [rate * (to.sin() - from.sin()) / omega, rate * (from.cos() - to.cos()) / omega];
        let surprise = (rate * length_ms as f64).exp_m1();
        // A subnormal one (from a rate no estimator gives) would make 1/surprise infinite.
        if !(surprise > 0.0 && surprise.is_normal()) {
            return;
        }
        let sign = if changed { 1.0 / surprise } else { -1.0 };
        self.score[0] += sign * gradient[0];
        self.score[1] += sign * gradient[1];
        self.information[0] += gradient[0] * gradient[0] / surprise;
        self.information[1] += gradient[0] * gradient[1] / surprise;
        self.information[2] += gradient[1] * gradient[1] / surprise;
        self.comparisons += 1.0;
    }

    /// Changes counted.
    pub fn changes(&self) -> f64 {
        self.changes
    }

    /// Changes and comparisons counted: a profile only gains them, so of two snapshots of
    /// one the later has more.
    pub fn observations(&self) -> f64 {
        self.changes + self.comparisons
    }

    /// Adds another profile's observations, as if they had been made on this one.
    pub fn merge(&mut self, other: &DayProfile) {
        self.apply(other, 1.0);
    }

    /// Takes away observations [`merge`](Self::merge)d in before.
    pub fn remove(&mut self, other: &DayProfile) {
        self.apply(other, -1.0);
    }

    fn apply(&mut self, other: &DayProfile, sign: f64) {
        self.score.iter_mut().zip(other.score).for_each(|(sum, x)| *sum += sign * x);
        self.information.iter_mut().zip(other.information).for_each(|(sum, x)| *sum += sign * x);
        self.changes += sign * other.changes;
        self.comparisons += sign * other.comparisons;
    }

    /// Whether the sums could have come from observations: finite, the counts whole and
    /// not negative, the information positive semi-definite. A profile read from a topic
    /// that is not would turn every harmonic of its host.
    pub fn is_sound(&self) -> bool {
        let finite = self.score.iter().chain(&self.information).all(|x| x.is_finite());
        let count = |n: f64| n >= 0.0 && n.fract() == 0.0 && n.is_finite();
        let [a, b, d] = self.information;
        // Rounding may leave a determinant a hair below 0.
        let semi_definite = a >= 0.0 && d >= 0.0 && a * d - b * b >= -1e-9 * (a * d).max(1.0);
        finite && count(self.changes) && count(self.comparisons) && semi_definite
    }

    /// The harmonic's (x, y): one Newton step from a flat day, with [`PRIOR_CHANGES`]
    /// pseudo-changes' information, at most `MAX_AMPLITUDE` long.
    pub fn harmonic(&self) -> (f64, f64) {
        let prior = PRIOR_CHANGES / 2.0;
        let (a, b, d) = (self.information[0] + prior, self.information[1], self.information[2] + prior);
        let determinant = a * d - b * b;
        let (x, y) = (
            (d * self.score[0] - b * self.score[1]) / determinant,
            (a * self.score[1] - b * self.score[0]) / determinant,
        );
        // Information is a sum of covariances, positive definite with the prior's; only
        // rounding could make it otherwise.
        if !(x.is_finite() && y.is_finite()) || determinant <= 0.0 {
            return (0.0, 0.0);
        }
        let amplitude = x.hypot(y);
        if amplitude > MAX_AMPLITUDE {
            (x * MAX_AMPLITUDE / amplitude, y * MAX_AMPLITUDE / amplitude)
        } else {
            (x, y)
        }
    }

    /// Whether the observations cover enough of the day to tell its hours apart: each adds
    /// information along the direction of its time of day, so observations from one stretch
    /// of it (a pipeline run of minutes, hours of one day's evening) inform only that
    /// direction. The smaller eigenvalue of the information must be at least
    /// `MIN_DAY_COVERAGE` of the larger, as for observations spread over a quarter of the
    /// day or more; a profile from less would place every host's busy hour at the time
    /// it was watched.
    pub fn covers_the_day(&self) -> bool {
        let [a, b, d] = self.information;
        let (mean, spread) = ((a + d) / 2.0, ((a - d) / 2.0).hypot(b));
        let (least, most) = (mean - spread, mean + spread);
        most > 0.0 && least >= MIN_DAY_COVERAGE * most
    }

    /// The profile as w(t) = 1 + amplitude·cos(ω(t − peak)): (amplitude, the peak's
    /// milliseconds into the UTC day); `None` before the observations cover the day
    /// ([`Self::covers_the_day`]).
    pub fn shape(&self) -> Option<(f64, i64)> {
        if !self.covers_the_day() {
            return None;
        }
        let (x, y) = self.harmonic();
        let peak = y.atan2(x).rem_euclid(std::f64::consts::TAU) / std::f64::consts::TAU * DAY_MS as f64;
        // In [0, DAY_MS]: the cast cannot overflow.
        Some((x.hypot(y), (peak as i64).rem_euclid(DAY_MS)))
    }
}

/// E[cos kωd], E[sin kωd] for the latest change d of a Poisson process of `rate` (per ms)
/// in the `length_ms` before a fetch at angle `fetch_angle` = kω·f: with u = f − d,
/// e^{ikωf}·∫₀ᴸ λe^{−(λ+ikω)u} du / (1 − e^{−λL}), which is the even spread over the
/// interval as λL → 0.
fn latest_change_moment(rate: f64, length_ms: i64, fetch_angle: f64, harmonic: f64) -> (f64, f64) {
    let length = length_ms as f64;
    let frequency = harmonic * std::f64::consts::TAU / DAY_MS as f64;
    // 1 / ∫₀ᴸ λe^{−λu} du ×  λ: λ / (1 − e^{−λL}), or 1/L for a page that barely changes.
    let normaliser = if rate * length > 1e-9 { rate / -(-rate * length).exp_m1() } else { 1.0 / length };
    // ∫₀ᴸ e^{−(λ+ikω)u} du = (1 − e^{−(λ+ikω)L}) / (λ + ikω).
    let decay = (-rate * length).exp();
    let (turn_cos, turn_sin) = ((frequency * length).cos(), (frequency * length).sin());
    let numerator = (1.0 - decay * turn_cos, decay * turn_sin);
    let denominator_norm = rate * rate + frequency * frequency;
    let integral = (
        (numerator.0 * rate + numerator.1 * frequency) / denominator_norm,
        (numerator.1 * rate - numerator.0 * frequency) / denominator_norm,
    );
    let (fetch_cos, fetch_sin) = (fetch_angle.cos(), fetch_angle.sin());
    (
        normaliser * (fetch_cos * integral.0 - fetch_sin * integral.1),
        normaliser * (fetch_sin * integral.0 + fetch_cos * integral.1),
    )
}

/// ωt for the time of day of `at_ms`, in [0, 2π).
fn angle_of(at_ms: i64) -> f64 {
    at_ms.rem_euclid(DAY_MS) as f64 / DAY_MS as f64 * std::f64::consts::TAU
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR_MS: i64 = 3_600_000;
    /// 2026-01-11T00:00:00Z: ten days into 2026, so the day's position does not start at 0.
    const MIDNIGHT: i64 = 1_768_089_600_000;

    /// `count` times in (from, to] at even quantiles of the density `density` (of the time
    /// in ms), by inverting its distribution function on a fine grid.
    fn quantiles(from: i64, to: i64, count: usize, density: impl Fn(f64) -> f64) -> Vec<i64> {
        let steps = 20_000;
        let width = (to - from) as f64 / steps as f64;
        let mut cumulative = vec![0.0];
        for step in 0..steps {
            let t = from as f64 + (step as f64 + 0.5) * width;
            cumulative.push(cumulative[step] + density(t));
        }
        let total = cumulative[steps];
        (0..count)
            .map(|i| {
                let target = (i as f64 + 0.5) / count as f64 * total;
                let step = cumulative.partition_point(|&c| c < target).clamp(1, steps);
                let within = (target - cumulative[step - 1]) / (cumulative[step] - cumulative[step - 1]);
                from + ((step as f64 - 1.0 + within) * width) as i64
            })
            .collect()
    }

    /// The intensity 1 + a·cos(ω(t − peak)) at Unix ms `t`.
    fn intensity(amplitude: f64, peak_hour: f64) -> impl Fn(f64) -> f64 {
        move |t: f64| {
            let hour = t.rem_euclid(DAY_MS as f64) / HOUR_MS as f64;
            1.0 + amplitude * (std::f64::consts::TAU * (hour - peak_hour) / 24.0).cos()
        }
    }

    /// A profile of `count` changes drawn from the intensity, each the only change of a
    /// slow page over a whole day's interval.
    fn profile_of(amplitude: f64, peak_hour: f64, count: usize) -> DayProfile {
        let mut profile = DayProfile::default();
        for at in quantiles(MIDNIGHT, MIDNIGHT + DAY_MS, count, intensity(amplitude, peak_hour)) {
            profile.observe(at, MIDNIGHT, MIDNIGHT + DAY_MS, 0.0);
        }
        profile
    }

    fn peak_hour((x, y): (f64, f64)) -> f64 {
        y.atan2(x).rem_euclid(std::f64::consts::TAU) / std::f64::consts::TAU * 24.0
    }

    #[test]
    fn a_profile_learned_from_dated_changes_recovers_their_peak_and_amplitude() {
        let (x, y) = profile_of(0.8, 14.0, 2000).harmonic();
        // Shrunk by 20 pseudo-changes in 2,020: 0.8 × 2000 / 2020.
        let amplitude = x.hypot(y);
        assert!((amplitude - 0.8 * 2000.0 / 2020.0).abs() < 0.005, "{amplitude}");
        assert!((peak_hour((x, y)) - 14.0).abs() < 0.05, "{}", peak_hour((x, y)));
    }

    /// A fast page's latest change falls just before the fetch, whenever in the day its
    /// changes come: fetched every day at 18:00, a flat day's pages must not look busy at
    /// 18:00, and a busy morning must still show.
    #[test]
    fn the_latest_change_before_a_fetch_does_not_pull_the_profile_to_the_fetch_hour() {
        let rate_per_ms = 0.5 / HOUR_MS as f64;
        let fetched = MIDNIGHT + 18 * HOUR_MS;
        let (previous, length) = (fetched - DAY_MS, DAY_MS as f64);
        let latest = |amplitude: f64, peak: f64| {
            let w = intensity(amplitude, peak);
            let omega = std::f64::consts::TAU / DAY_MS as f64;
            let phase = |t: f64| (omega * (t - peak * HOUR_MS as f64)).sin();
            // ∫_t^f w, for the latest change of a Poisson process of rate λ·w: at d with
            // density λw(d)·e^{−λ∫_d^f w}.
            let after =
                move |t: f64| (fetched as f64 - t) + amplitude / omega * (phase(fetched as f64) - phase(t));
            quantiles(previous, fetched, 3000, move |t| w(t) * (-rate_per_ms * after(t)).exp())
        };
        let mut flat = DayProfile::default();
        latest(0.0, 0.0).iter().for_each(|&at| flat.observe(at, previous, fetched, rate_per_ms));
        let (x, y) = flat.harmonic();
        assert!(x.hypot(y) < 0.01, "{x} {y}");
        // Counted as if spread over the day, the same dates put the peak at about 16:00.
        let mut naive = DayProfile::default();
        latest(0.0, 0.0).iter().for_each(|&at| naive.observe(at, MIDNIGHT, MIDNIGHT + DAY_MS, 0.0));
        let (x, y) = naive.harmonic();
        assert!(x.hypot(y) > 0.5 && (peak_hour((x, y)) - 16.0).abs() < 1.0, "{x} {y}");

        let mut busy_morning = DayProfile::default();
        latest(0.6, 9.0).iter().for_each(|&at| busy_morning.observe(at, previous, fetched, rate_per_ms));
        let harmonic = busy_morning.harmonic();
        assert!((peak_hour(harmonic) - 9.0).abs() < 1.5, "{harmonic:?}");
        assert!(harmonic.0.hypot(harmonic.1) > 0.3, "{harmonic:?} {length}");
    }

    /// Pages of `rate_per_ms` compared over intervals of `length_ms` starting at every
    /// half hour of the day, under the intensity: of 40 comparisons of each interval, as
    /// many changed as its chance of a change says.
    fn compared(amplitude: f64, peak_hour: f64, rate_per_ms: f64, length_ms: i64) -> DayProfile {
        let w = intensity(amplitude, peak_hour);
        let mut profile = DayProfile::default();
        for start in (0..48).map(|half_hour| MIDNIGHT + half_hour * HOUR_MS / 2) {
            let steps = 1000;
            let exposure: f64 = (0..steps)
                .map(|i| w(start as f64 + (i as f64 + 0.5) * length_ms as f64 / steps as f64))
                .sum::<f64>()
                * length_ms as f64
                / steps as f64;
            let changed = ((1.0 - (-rate_per_ms * exposure).exp()) * 40.0).round() as usize;
            for i in 0..40 {
                profile.observe_comparison(i < changed, start, start + length_ms, rate_per_ms);
            }
        }
        profile
    }

    #[test]
    fn comparisons_alone_find_the_busy_hours() {
        // Pages changing about every 10 hours, compared every 6: busiest at 20:00.
        let rate = 0.1 / HOUR_MS as f64;
        let (amplitude, peak_ms) = compared(0.8, 20.0, rate, 6 * HOUR_MS).shape().unwrap();
        assert!((peak_ms as f64 / HOUR_MS as f64 - 20.0).abs() < 1.0, "{peak_ms}");
        assert!(amplitude > 0.4, "{amplitude}");
        // A flat day shows none; intervals of whole days say nothing of the hour.
        let (flat, _) = compared(0.0, 20.0, rate, 6 * HOUR_MS).shape().unwrap();
        assert!(flat < 0.02, "{flat}");
        let (days, _) = compared(0.8, 20.0, rate, DAY_MS).shape().unwrap();
        assert!(days < 1e-6, "{days}");
        // Hostile intervals and rates are skipped.
        let mut profile = DayProfile::default();
        profile.observe_comparison(true, MIDNIGHT, MIDNIGHT, rate);
        profile.observe_comparison(true, i64::MAX, i64::MIN, rate);
        for hostile in [f64::NAN, f64::INFINITY, -1.0, 0.0] {
            profile.observe_comparison(true, MIDNIGHT, MIDNIGHT + HOUR_MS, hostile);
        }
        assert_eq!(profile.shape(), None);
    }

    /// A pipeline of 2-second periods watched for minutes sees its hosts' pages change at
    /// the time it watched them: no profile from that, one from the same watched all day.
    #[test]
    fn a_profile_needs_observations_from_across_the_day() {
        let rate = 0.05 / 2_000.0;
        let watched = |span_ms: i64| {
            let mut profile = DayProfile::default();
            for i in 0..500i64 {
                let at = MIDNIGHT + 13 * HOUR_MS + span_ms * i / 500;
                profile.observe_comparison(i % 3 == 0, at - 4_000, at, rate);
            }
            profile
        };
        let minutes = watched(10 * 60_000);
        assert!(!minutes.covers_the_day() && minutes.shape().is_none());
        assert!(!watched(2 * HOUR_MS).covers_the_day());
        let day = watched(DAY_MS);
        assert!(day.covers_the_day() && day.shape().is_some());
        assert!(watched(8 * HOUR_MS).covers_the_day());
    }

    #[test]
    fn the_shape_is_the_harmonic_as_an_amplitude_and_a_peak() {
        assert_eq!(DayProfile::default().shape(), None);
        let profile = profile_of(0.6, 21.5, 1000);
        let (amplitude, peak_ms) = profile.shape().unwrap();
        let (x, y) = profile.harmonic();
        assert!((amplitude - x.hypot(y)).abs() < 1e-12);
        assert!((peak_ms as f64 / HOUR_MS as f64 - 21.5).abs() < 0.05, "{peak_ms}");
        let even = profile_of(0.0, 0.0, 240).shape().unwrap();
        assert!(even.0 < 1e-3, "{even:?}");
    }

    #[test]
    fn a_few_dates_move_the_profile_little_and_it_never_turns_negative() {
        let mut few = DayProfile::default();
        few.observe(MIDNIGHT + 9 * HOUR_MS, MIDNIGHT, MIDNIGHT + DAY_MS, 0.0);
        let (x, y) = few.harmonic();
        assert!((x.hypot(y) - 2.0 / 21.0).abs() < 1e-12);
        let mut all_at_once = DayProfile::default();
        (0..10_000).for_each(|_| all_at_once.observe(MIDNIGHT, MIDNIGHT - DAY_MS, MIDNIGHT, 0.0));
        let (x, y) = all_at_once.harmonic();
        assert!((x.hypot(y) - MAX_AMPLITUDE).abs() < 1e-12);
        // The intensity 1 + amplitude·cos stays positive.
        assert!(all_at_once.shape().unwrap().0 < 1.0);
    }

    #[test]
    fn intervals_that_are_not_forward_and_rates_out_of_range_are_harmless() {
        let mut profile = DayProfile::default();
        profile.observe(MIDNIGHT, MIDNIGHT, MIDNIGHT, 0.0);
        profile.observe(MIDNIGHT, MIDNIGHT + HOUR_MS, MIDNIGHT, 0.0);
        profile.observe(i64::MIN, i64::MIN, i64::MAX, 0.0);
        assert_eq!(profile.changes(), 0.0);
        for rate in [f64::NAN, f64::INFINITY, -1.0, 1e300] {
            profile.observe(MIDNIGHT - HOUR_MS, MIDNIGHT - DAY_MS, MIDNIGHT, rate);
        }
        for changed in [true, false] {
            profile.observe_comparison(changed, MIDNIGHT - DAY_MS, MIDNIGHT, 1e-320);
        }
        assert!(profile.is_sound());
        let (x, y) = profile.harmonic();
        assert!(x.is_finite() && y.is_finite());
        let (amplitude, peak_ms) = profile.shape().unwrap();
        assert!(amplitude.is_finite() && (0..DAY_MS).contains(&peak_ms));
    }

    #[test]
    fn profiles_add_and_take_back_as_their_observations_do() {
        let same = |a: &DayProfile, b: &DayProfile| {
            let ((ax, ay), (bx, by)) = (a.harmonic(), b.harmonic());
            a.observations() == b.observations() && (ax - bx).abs() < 1e-12 && (ay - by).abs() < 1e-12
        };
        let (morning, evening) = (profile_of(0.6, 8.0, 30), compared(0.4, 20.0, 1e-7, 4 * HOUR_MS));
        let mut observed = morning;
        for at in quantiles(MIDNIGHT, MIDNIGHT + DAY_MS, 30, intensity(0.6, 8.0)) {
            observed.observe(at, MIDNIGHT, MIDNIGHT + DAY_MS, 0.0);
        }
        let mut doubled = morning;
        doubled.merge(&morning);
        assert!(same(&doubled, &observed), "merging is observing again");
        assert!(!same(&doubled, &morning));
        let mut both = morning;
        both.merge(&evening);
        assert_eq!(both.observations(), morning.observations() + evening.observations());
        both.remove(&evening);
        assert!(same(&both, &morning));
    }

    #[test]
    fn sums_no_observations_could_give_are_told_apart() {
        let learned = compared(0.4, 20.0, 1e-7, 4 * HOUR_MS);
        assert!(learned.is_sound() && DayProfile::default().is_sound());
        let forged = [
            DayProfile { score: [f64::NAN, 0.0], ..learned },
            DayProfile { information: [f64::INFINITY, 0.0, 1.0], ..learned },
            DayProfile { information: [-1.0, 0.0, 1.0], ..learned },
            DayProfile { information: [1.0, 2.0, 1.0], ..learned },
            DayProfile { changes: 0.5, ..learned },
            DayProfile { comparisons: -3.0, ..learned },
        ];
        assert!(forged.iter().all(|day| !day.is_sound()));
        let mut taken_twice = learned;
        taken_twice.remove(&learned);
        taken_twice.remove(&learned);
        assert!(!taken_twice.is_sound());
    }
}
