//! What a fetch is worth to the store's freshness (`docs/algorithms/freshness-limits.md`):
//! the marginal freshness of crawling a Poisson-changing page, shared by the scheduler's
//! `freshness` policy and the simulator's known-rate optimum.

/// D(x) = 1 − (1+x)e^{−x} = ∫₀ˣ s e^{−s} ds, increasing from 0 to 1. For x < 1 its series
/// Σ_{k≥2} (−1)^k (k−1) x^k/k! avoids the cancellation of the closed form.
pub fn d_of_x(x: f64) -> f64 {
    if x.is_infinite() {
        1.0
    } else if x < 1.0 {
        let (mut p, mut sum) = (x * x / 2.0, 0.0); // p = (−x)^k / k!
        for k in (2u8..=30).map(f64::from) {
            sum += (k - 1.0) * p;
            p *= -x / (k + 1.0);
            if p.abs() * k <= 1e-17 * sum {
                break;
            }
        }
        sum
    } else {
        1.0 - (1.0 + x) * (-x).exp()
    }
}

/// The freshness index of a page of change rate `rate` whose stored copy is `age` old (both
/// in periods): D(λτ)/λ, the derivative of fixed-interval freshness (f/λ)(1 − e^{−λ/f}) in
/// the crawl frequency f at f = 1/τ. The optimum crawls each page when this reaches the
/// budget's Lagrange multiplier, so picking the largest indices each period reproduces
/// its intervals. It grows with the age towards 1/λ: a page that changes faster than the
/// budget can follow is worth little. 0 for a page that never changes or a new copy.
pub fn freshness_index(rate: f64, age: f64) -> f64 {
    if !(rate > 0.0 && rate.is_finite() && age > 0.0) {
        return 0.0;
    }
    d_of_x(rate * age) / rate
}

/// x* where D(x)/x peaks (the root of e^x = 1 + x + x²): for a copy `age` old, the index
/// is largest at the rate x*/age, rising below it and falling above.
pub const PEAK_INDEX_RATE_TIMES_AGE: f64 = 1.793_282_132_900_760_4;

/// The largest freshness index of a copy `age` old over the rates in [`low`, `high`]: the
/// index at x*/age clamped into the range. The `freshness` policy scores a learned page so
/// over the lower part of its credible interval, so that a page that only looks too fast
/// to follow regains its place as its copy ages and is fetched again; a wrong rate is then
/// corrected instead of abandoned. 0 where [`freshness_index`] is, at `high`.
pub fn best_freshness_index(low: f64, high: f64, age: f64) -> f64 {
    if !(low > 0.0 && low < high && age > 0.0) {
        return freshness_index(high, age);
    }
    freshness_index((PEAK_INDEX_RATE_TIMES_AGE / age).clamp(low, high), age)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_is_the_derivative_of_fixed_interval_freshness() {
        let freshness = |rate: f64, f: f64| f / rate * -(-rate / f).exp_m1();
        for (rate, age) in [(0.5, 2.0), (0.01, 30.0), (3.0, 0.2), (1e-3, 5.0), (0.2, 0.05)] {
            let f = 1.0 / age;
            let h = f * 1e-5;
            let numeric = (freshness(rate, f + h) - freshness(rate, f - h)) / (2.0 * h);
            let index = freshness_index(rate, age);
            assert!((index - numeric).abs() <= 1e-6 * index.max(1e-12), "{rate} {age}: {index} vs {numeric}");
        }
    }

    #[test]
    fn the_index_grows_with_age_towards_one_over_the_rate() {
        let ages = [0.1, 1.0, 5.0, 20.0, 100.0];
        let indices: Vec<f64> = ages.iter().map(|&age| freshness_index(0.3, age)).collect();
        assert!(indices.windows(2).all(|pair| pair[0] < pair[1]), "{indices:?}");
        assert!((freshness_index(0.3, 1e6) - 1.0 / 0.3).abs() < 1e-9);
        assert_eq!(freshness_index(0.0, 5.0), 0.0);
        assert_eq!(freshness_index(0.3, 0.0), 0.0);
        assert_eq!(freshness_index(f64::NAN, 5.0), 0.0);
        // The series and the closed form meet at x = 1.
        let below = d_of_x(1.0 - 1e-12);
        assert!((below - d_of_x(1.0)).abs() < 1e-11);
    }
    #[test]
    fn the_index_of_a_copy_peaks_at_the_rate_x_star_over_its_age() {
        let x = PEAK_INDEX_RATE_TIMES_AGE;
        assert!((x.exp() - (1.0 + x + x * x)).abs() < 1e-12);
        for age in [0.5, 3.0, 40.0] {
            let peak = freshness_index(x / age, age);
            for factor in [0.9, 0.99, 1.01, 1.1] {
                assert!(freshness_index(factor * x / age, age) < peak, "{age} {factor}");
            }
        }
    }

    #[test]
    fn the_best_index_over_a_range_is_the_greatest_of_its_rates() {
        let age = 10.0;
        // Below, around and above the peak rate 0.179.
        for (low, high) in [(0.01f64, 0.05f64), (0.05, 1.0), (0.5, 2.0), (0.3, 0.3)] {
            let steps: u32 = 1000;
            let greatest = (0..=steps)
                .map(|k: u32| low * (high / low).powf(f64::from(k) / f64::from(steps)))
                .map(|rate| freshness_index(rate, age))
                .fold(0.0, f64::max);
            let best = best_freshness_index(low, high, age);
            assert!(
                best >= greatest - 1e-12 && best <= greatest * (1.0 + 1e-4),
                "{low} {high}: {best} {greatest}"
            );
        }
        assert_eq!(best_freshness_index(0.0, 0.4, age), freshness_index(0.4, age));
        assert_eq!(best_freshness_index(0.5, 0.4, age), freshness_index(0.4, age));
        assert_eq!(best_freshness_index(0.1, 0.4, 0.0), 0.0);
    }
}
