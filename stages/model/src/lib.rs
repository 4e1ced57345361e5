//! The vocabulary the estimator, the scheduler and the simulator share, with no Kafka and
//! no I/O: a page's request history and its rates, rate bins, group priors and the
//! prediction models, the refresh groups with their crawl times, and what a fetch is
//! worth to freshness.

pub mod freshness;
pub mod history;
pub mod page;
pub mod prediction;
pub mod rate;
pub mod refresh;
