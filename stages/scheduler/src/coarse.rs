//! Rates and probabilities kept in few bits: the scheduler's page records hold a URL's
//! latency, rates and probabilities in two bytes each, and lambda-crawl groups the
//! period's rates by the same rounding.

/// Mantissa bits a kept or grouped rate has: 0.2 % apart at most, 256 rates a doubling.
pub const RATE_MANTISSA_BITS: u32 = 8;
const DROPPED_MANTISSA_BITS: u32 = f32::MANTISSA_DIGITS - 1 - RATE_MANTISSA_BITS;

/// `rate` rounded to [`RATE_MANTISSA_BITS`] bits of mantissa (to nearest: the rounding adds
/// half the dropped unit before masking, carrying into the exponent when it must).
pub fn coarse(rate: f32) -> f32 {
    const HALF: u32 = 1 << (DROPPED_MANTISSA_BITS - 1);
    const KEPT: u32 = !((1 << DROPPED_MANTISSA_BITS) - 1);
    if !rate.is_finite() {
        return rate;
    }
    f32::from_bits(rate.to_bits().saturating_add(HALF) & KEPT)
}

/// A positive number in two bytes: the exponent and [`RATE_MANTISSA_BITS`] bits of mantissa
/// of its [`coarse`] `f32`. The sign bit (always 0) and the bits `coarse` zeroes are not
/// kept, so it reads back with a shift. 0 holds no rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoarseF32(u16);

impl CoarseF32 {
    pub fn new(value: Option<f64>) -> Self {
        match value.map(|value| coarse(value as f32)) {
            Some(value) if value.is_finite() && value > 0.0 => {
                Self(u16::try_from(value.to_bits() >> DROPPED_MANTISSA_BITS).unwrap_or(0))
            }
            _ => Self(0),
        }
    }

    pub fn get(self) -> Option<f64> {
        (self.0 != 0).then(|| f64::from(f32::from_bits(u32::from(self.0) << DROPPED_MANTISSA_BITS)))
    }
}

/// A probability in two bytes, in steps of 1/65,535: an estimator's forecast is not known
/// to five digits. NaN reads as 0, values outside [0, 1] as the nearer end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Probability(u16);

impl Probability {
    pub fn new(probability: f64) -> Self {
        let steps = (probability.clamp(0.0, 1.0) * f64::from(u16::MAX)).round();
        // NaN fails the clamp's ordering and reads as 0.
        Self(if steps.is_nan() { 0 } else { steps as u16 })
    }

    pub fn get(self) -> f64 {
        // A product, not a quotient: the picks read it for every page.
        const STEP: f64 = 1.0 / u16::MAX as f64;
        f64::from(self.0) * STEP
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_keep_five_digits_and_their_ends() {
        for p in [0.0, 1e-6, 0.1, 0.25, 0.333_333, 0.875, 0.999_99, 1.0] {
            let kept = Probability::new(p).get();
            assert!((kept - p).abs() <= 0.5 / 65_535.0 + 1e-15, "{p} → {kept}");
            assert_eq!(Probability::new(kept), Probability::new(p), "{p} is kept as it reads back");
        }
        assert_eq!(Probability::new(0.0).get(), 0.0);
        assert_eq!(Probability::new(1.0).get(), 1.0);
        assert_eq!(Probability::new(f64::NAN).get(), 0.0);
        assert_eq!(Probability::new(-3.0).get(), 0.0);
        assert_eq!(Probability::new(7.0).get(), 1.0);
    }

    #[test]
    fn rates_kept_or_grouped_stay_within_a_fifth_of_a_percent() {
        for rate in [1e-7f32, 3.3e-4, 0.0123, 0.5, 0.999_99, 1.0, 7.77, 20.0] {
            let grouped = coarse(rate);
            assert!((grouped / rate - 1.0).abs() <= 1.0 / 512.0, "{rate} → {grouped}");
            assert_eq!(CoarseF32::new(Some(f64::from(rate))).get(), Some(f64::from(grouped)));
        }
        assert_eq!(coarse(0.0), 0.0);
        assert_eq!(coarse(0.0123), coarse(0.0123 * (1.0 + 1e-5)), "neighbours share a group");
        let distinct: std::collections::HashSet<u32> =
            (0..100_000).map(|i| coarse(0.01 + i as f32 * 1e-7).to_bits()).collect();
        assert!(distinct.len() <= 257, "{}", distinct.len());
        for none in [None, Some(0.0), Some(-1.0), Some(f64::NAN), Some(f64::INFINITY), Some(1e300)] {
            assert_eq!(CoarseF32::new(none).get(), None, "{none:?}");
        }
    }
}
