//! What a fetch is worth to the store's freshness (`docs/algorithms/freshness-limits.md`):
//! the marginal freshness of crawling a Poisson-changing page, shared by the scheduler's
//! `freshness` policy and the simulator's known-rate optimum.

/// Below this x, [`d_of_x`] sums its series: the closed form loses about ε/D of relative
/// precision to cancellation (4·10⁻¹³ at 0.05), the series' first omitted term is under
/// 10⁻¹³ of the sum there.
const SERIES_BELOW: f64 = 0.05;

/// D(x) = 1 − (1+x)e^{−x} = ∫₀ˣ s e^{−s} ds, increasing from 0 to 1. For small x its series
/// Σ_{k≥2} (−1)^k (k−1) x^k/k!, to k = 8, avoids the cancellation of the closed form; one
/// exponential otherwise.
pub fn d_of_x(x: f64) -> f64 {
    if x.is_infinite() {
        1.0
    } else if x < SERIES_BELOW {
        // (k−1)/k! for k = 2 … 8, by Horner in x from x².
        const C: [f64; 7] =
            [1.0 / 2.0, -1.0 / 3.0, 1.0 / 8.0, -1.0 / 30.0, 1.0 / 144.0, -1.0 / 840.0, 1.0 / 5760.0];
        x * x * C.iter().rev().fold(0.0, |sum, &c| sum * x + c)
    } else {
        let decay = (-x).exp();
        (1.0 - decay) - x * decay
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
/// over the middle half of its rate's credible interval, so that a page that only looks
/// too fast to follow regains its place as its copy ages and is fetched again; a wrong
/// rate is then corrected instead of abandoned. 0 where [`freshness_index`] is, at `high`.
pub fn best_freshness_index(low: f64, high: f64, age: f64) -> f64 {
    freshness_index(best_index_rate(low, high, age), age)
}

/// The rate of [`low`, `high`] at which a copy `age` old has its largest index: x*/age
/// clamped into the range, or `high` where the range or the age is empty.
pub fn best_index_rate(low: f64, high: f64, age: f64) -> f64 {
    if !(low > 0.0 && low < high && age > 0.0) {
        return high;
    }
    (PEAK_INDEX_RATE_TIMES_AGE / age).clamp(low, high)
}

/// D(x*)/x*: the most a copy can be worth per period of its age, whatever its rate.
pub const PEAK_INDEX_PER_AGE: f64 = 0.298_425_607_525_639_2;

/// An upper bound of [`best_freshness_index`]`(low, high, age)` without an exponential, so
/// that a pick can pass over most pages cheaply: D(x) ≤ x²/2, D ≤ 1 and D(x)/x ≤ D(x*)/x*
/// make the index at most min(λτ²/2, 1/λ, τ·D(x*)/x*) at any rate λ of the range. Raised
/// by a billionth so that rounding cannot put the index above it; infinite where the
/// index is not defined by the rates.
pub fn freshness_index_bound(low: f64, high: f64, age: f64) -> f64 {
    if !(high > 0.0 && high.is_finite() && age > 0.0 && age.is_finite()) {
        return f64::INFINITY;
    }
    let least = if low > 0.0 && low < high { low } else { high };
    let bound = (high * age * age / 2.0).min(1.0 / least).min(PEAK_INDEX_PER_AGE * age);
    bound * (1.0 + 1e-9)
}

/// Whether `weight` × [`freshness_index_bound`] over the middle half of a rate's credible
/// interval (`central` and the half's low end, as [`middle_half`](crate::rate::middle_half)
/// widens them) at `age` is below `floor`, decided with products alone: a period's pick
/// passes over every page and skips most of them here, where the bound's two divisions
/// cost more than the rest of the test. `false` where in doubt, so that the caller
/// computes the bound itself.
pub fn weighted_index_bound_below(
    weight: f64,
    central: f64,
    low_end: Option<f64>,
    age: f64,
    floor: f64,
) -> bool {
    // Rates in this range keep the half's high end, central²/low, finite as the bound
    // needs it.
    // Within 1e±50 the products stay far from subnormals, where rounding would pass the
    // bound's slack.
    const RATES: std::ops::RangeInclusive<f64> = 1e-50..=1e50;
    if !(weight >= 0.0 && floor > 0.0 && age > 0.0 && age.is_finite() && RATES.contains(&central)) {
        return false;
    }
    // The bound's slack, so that what this finds below is below the bound too.
    let slack = weight * (1.0 + 1e-9);
    // A minimum is below the floor when one of its terms is: τ·D(x*)/x*, then 1/least
    // and high·τ²/2 multiplied out.
    if slack * (PEAK_INDEX_PER_AGE * age) < floor {
        return true;
    }
    // high = central²/least: at the centre itself when the half has no low end below it.
    let least = match low_end {
        Some(low) if low < central => low,
        _ => central,
    };
    RATES.contains(&least)
        && (slack < floor * least || slack * central * central * age * age < 2.0 * floor * least)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// What the products find below the floor, the bound finds below it and so does
        /// the index; what the bound finds clearly below, the products find too.
        #[test]
        fn the_bound_s_test_without_divisions_agrees_with_the_bound(
            weight in 0.0f64..=1.0,
            central_log in -12.0f64..4.0,
            low_share in proptest::option::of(0.001f64..1.5),
            age in 0.5f64..5_000.0,
            floor_log in -8.0f64..4.0,
        ) {
            let central = 10f64.powf(central_log);
            let low_end = low_share.map(|share| central * share);
            let floor = 10f64.powf(floor_log);
            let (least, high) = crate::rate::middle_half(central, low_end);
            let bound = weight * freshness_index_bound(least, high, age);
            let below = weighted_index_bound_below(weight, central, low_end, age, floor);
            if below {
                proptest::prop_assert!(bound < floor * (1.0 + 1e-12), "{bound} {floor}");
                proptest::prop_assert!(weight * best_freshness_index(least, high, age) < floor);
            } else {
                proptest::prop_assert!(bound >= floor * (1.0 - 1e-12), "{bound} {floor}");
            }
        }
    }

    #[test]
    fn the_bound_s_test_without_divisions_leaves_what_it_cannot_decide_to_the_bound() {
        for (weight, central, age, floor) in [
            (f64::NAN, 0.1, 5.0, 1.0),
            (0.5, f64::NAN, 5.0, 1.0),
            (0.5, 0.0, 5.0, 1.0),
            (0.5, 1e200, 5.0, 1.0),
            (0.5, 0.1, f64::INFINITY, 1.0),
            (0.5, 0.1, 5.0, 0.0),
        ] {
            assert!(
                !weighted_index_bound_below(weight, central, None, age, floor),
                "{weight} {central} {age} {floor}"
            );
        }
        assert!(!weighted_index_bound_below(0.5, 1.0, Some(1e-200), 1e6, 1.0), "a low end out of range");
    }

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
    }

    #[test]
    fn d_is_its_series_to_twelve_digits_on_both_sides_of_the_switch() {
        // The full series, every term, as the reference: no cancellation below x = 3.
        let series = |x: f64| {
            let (mut term, mut sum) = (x * x / 2.0, 0.0); // (−x)^k / k!
            for k in (2u8..=60).map(f64::from) {
                sum += (k - 1.0) * term;
                term *= -x / (k + 1.0);
            }
            sum
        };
        let xs =
            (0..=90).map(|i| 1e-6 * 10f64.powf(f64::from(i) / 15.0)).chain([SERIES_BELOW, 0.049_999_999]);
        for x in xs.filter(|&x| x <= 3.0) {
            let (d, reference) = (d_of_x(x), series(x));
            assert!((d / reference - 1.0).abs() < 1e-12, "{x}: {d} vs {reference}");
        }
        assert_eq!(d_of_x(f64::INFINITY), 1.0);
        assert!((d_of_x(40.0) - 1.0).abs() < 1e-15);
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

    #[test]
    fn the_bound_holds_every_index_and_is_tight_at_its_limits() {
        let x = PEAK_INDEX_RATE_TIMES_AGE;
        assert!((d_of_x(x) / x - PEAK_INDEX_PER_AGE).abs() < 1e-15);
        let rates = [1e-6, 1e-4, 0.003, 0.05, 0.3, 1.0, 4.0, 20.0];
        let ages = [0.01, 0.5, 1.0, 3.0, 17.0, 200.0, 1e5];
        for &low in &rates {
            for &high in rates.iter().filter(|&&high| high >= low) {
                for &age in &ages {
                    let (index, bound) =
                        (best_freshness_index(low, high, age), freshness_index_bound(low, high, age));
                    assert!(index <= bound, "{low} {high} {age}: {index} > {bound}");
                }
            }
        }
        // Slow pages, fast ones, and the peak: within a tenth of the index.
        for (low, high, age) in [(1e-4, 1e-4, 1.0), (5.0, 5.0, 100.0), (0.01, 1.0, x / 0.1)] {
            let (index, bound) =
                (best_freshness_index(low, high, age), freshness_index_bound(low, high, age));
            assert!(bound < 1.1 * index, "{low} {high} {age}: {bound} vs {index}");
        }
        assert_eq!(freshness_index_bound(0.1, 0.0, 3.0), f64::INFINITY);
        assert_eq!(freshness_index_bound(0.1, 0.2, f64::NAN), f64::INFINITY);
    }
}
