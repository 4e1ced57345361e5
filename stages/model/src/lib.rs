//! The vocabulary the estimator, the scheduler and the simulator share, with no Kafka and
//! no I/O: a page's request history and its rates, rate bins, group priors and the
//! prediction models, the refresh groups with their crawl times, and what a fetch is
//! worth to freshness.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects))]

pub mod freshness;
pub mod history;
pub mod page;
pub mod prediction;
pub mod rate;
pub mod refresh;
