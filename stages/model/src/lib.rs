//! The vocabulary the estimator, the scheduler and the simulator share, with no Kafka and
//! no I/O: a page's request history and its rates, rate bins, group priors and the
//! prediction models, the refresh groups with their crawl times, and what a fetch is
//! worth to freshness.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects))]

pub mod freshness;
pub mod history;
pub mod modified;
pub mod page;
pub mod prediction;
pub mod rate;
pub mod refresh;

/// A scheduler period when none is configured: one minute. The estimator's change rates
/// and the scheduler's plans are per period, so both stages take the same `--period-ms`.
pub const DEFAULT_PERIOD_MS: u64 = 60_000;
/// The longest period either stage accepts: a week.
pub const MAX_PERIOD_MS: u64 = 7 * 86_400_000;
/// The shortest: a tenth of a second.
pub const MIN_PERIOD_MS: u64 = 100;
