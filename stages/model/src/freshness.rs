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
}
