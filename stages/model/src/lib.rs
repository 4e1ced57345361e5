//! The vocabulary the estimator, the scheduler and the simulator share, with no Kafka and
//! no I/O: a page's request history and its rates, rate bins, group priors and the
//! prediction models, the refresh groups with their crawl times, and what a fetch is
//! worth to freshness.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects))]

pub mod claims;
pub mod day;
pub mod freshness;
pub mod history;
pub mod modified;
pub mod page;
pub mod periodic;
pub mod prediction;
pub mod rate;
pub mod refresh;
pub mod small_keys;

/// A scheduler period when none is configured: one minute. The estimator's change rates
/// and the scheduler's plans are per period, so both stages take the same `--period-ms`.
pub const DEFAULT_PERIOD_MS: u64 = 60_000;
/// The longest period either stage accepts: a week.
pub const MAX_PERIOD_MS: u64 = 7 * 86_400_000;
/// The shortest: a tenth of a second.
pub const MIN_PERIOD_MS: u64 = 100;
/// Start of period 0 when none is configured (2026-01-01T00:00:00Z). The scheduler numbers
/// its picks by it, so every stage that checks a record's period takes the same one.
pub const DEFAULT_EPOCH_UNIX_MS: i64 = 1_767_225_600_000;
/// How far apart two instances' clocks may be.
pub const MAX_CLOCK_SKEW_MS: i64 = 5 * 60_000;

/// When `period` starts, Unix milliseconds, with period 0 at `epoch_unix_ms` (saturating
/// far in the future).
pub fn period_start_ms(epoch_unix_ms: i64, period_ms: u64, period: u64) -> i64 {
    let offset = period.saturating_mul(period_ms);
    epoch_unix_ms.saturating_add(i64::try_from(offset).unwrap_or(i64::MAX))
}

/// The latest a document read in `period` can have been read, by `now_ms`: the period's
/// end, or now if earlier, with the clocks' skew. A sitemap or feed claim said to be read
/// later is not believed: it could keep a copy current into the future.
pub fn latest_read_ms(epoch_unix_ms: i64, period_ms: u64, period: u64, now_ms: i64) -> i64 {
    period_start_ms(epoch_unix_ms, period_ms, period.saturating_add(1))
        .min(now_ms)
        .saturating_add(MAX_CLOCK_SKEW_MS)
}

/// Why a record of `period` cannot have come from a pick by `now_ms`: the period starts
/// later than that by more than [`MAX_CLOCK_SKEW_MS`]. Applied, such a record would make
/// every real one of its URL (or its group's partition) look stale, for good.
pub fn period_ahead(epoch_unix_ms: i64, period_ms: u64, period: u64, now_ms: i64) -> Option<String> {
    let starts_ms = period_start_ms(epoch_unix_ms, period_ms, period);
    (starts_ms > now_ms.saturating_add(MAX_CLOCK_SKEW_MS)).then(|| {
        format!(
            "period {period} starts at {starts_ms} (Unix ms), after this instance's clock ({now_ms}); \
             do --epoch-unix-ms and --period-ms match the scheduler's?"
        )
    })
}

/// The scheduler's period clock as another stage reads it (its `--period-ms` and
/// `--epoch-unix-ms`, from the same variables): a record of a period that has not begun
/// is refused, as the estimator and the scheduler refuse one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct PeriodClock {
    /// Length of the scheduler's period, milliseconds (its --period-ms).
    #[arg(long = "period-ms", env = "RECRAWL_PERIOD_MS", default_value_t = DEFAULT_PERIOD_MS,
          value_parser = clap::value_parser!(u64).range(MIN_PERIOD_MS..=MAX_PERIOD_MS))]
    pub period_ms: u64,
    /// Start of the scheduler's period 0, Unix milliseconds (its --epoch-unix-ms): a record
    /// of a period that has not begun goes to the dead-letter topic.
    #[arg(long = "epoch-unix-ms", env = "RECRAWL_EPOCH_UNIX_MS", default_value_t = DEFAULT_EPOCH_UNIX_MS,
          value_parser = clap::value_parser!(i64).range(0..=recrawl_schemas::bounds::MAX_TIME_MS))]
    pub epoch_unix_ms: i64,
}

impl Default for PeriodClock {
    fn default() -> Self {
        Self { period_ms: DEFAULT_PERIOD_MS, epoch_unix_ms: DEFAULT_EPOCH_UNIX_MS }
    }
}

impl PeriodClock {
    /// [`period_ahead`] by this clock.
    pub fn ahead(&self, period: u64, now_ms: i64) -> Option<String> {
        period_ahead(self.epoch_unix_ms, self.period_ms, period, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_is_ahead_only_past_the_clock_and_its_skew() {
        let (epoch, period_ms) = (1_000_000, 60_000);
        // Period 10 starts at 1,600,000.
        assert_eq!(period_start_ms(epoch, period_ms, 10), 1_600_000);
        assert_eq!(period_ahead(epoch, period_ms, 10, 1_600_000), None, "begun");
        assert_eq!(
            period_ahead(epoch, period_ms, 10, 1_600_000 - MAX_CLOCK_SKEW_MS),
            None,
            "within the skew"
        );
        let ahead = period_ahead(epoch, period_ms, 10, 1_600_000 - MAX_CLOCK_SKEW_MS - 1);
        assert!(ahead.is_some_and(|why| why.contains("period 10 starts at 1600000")));
        assert!(
            period_ahead(epoch, period_ms, u64::MAX, 1_800_000_000_000).is_some(),
            "saturating, not wrapping"
        );
        assert_eq!(period_ahead(0, period_ms, 0, 0), None);
    }
}
