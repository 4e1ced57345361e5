//! Real change histories as a world for the simulator: the `urlid_offset_history.txt`
//! format of `freshness-limits.md` (URL id, first-crawl day, then per crawl the days since
//! the previous crawl and whether the page had changed).
//!
//! One period is one day. A page's history only says a change happened between two
//! crawls, so the change is placed midway between them; each page's known rate is its
//! changes over the days it was followed. Every request downloads and all pages share
//! one host of equal response times: the format carries neither failures nor hosts.

use super::measure::{parse_replay, ReplayError};
use super::simulate::World;
use super::web::Truth;

#[derive(Debug)]
pub struct ReplayWorld {
    pub truth: Truth,
    pub url_ids: Vec<u64>,
}

/// Size the simulator's cost model assumes for a replayed page.
const REPLAY_BYTES: u64 = 10_000;

impl ReplayWorld {
    pub fn parse(text: &str) -> Result<Self, ReplayError> {
        let pages = parse_replay(text)?;
        let mut horizon: f64 = 1.0;
        let mut changes = Vec::with_capacity(pages.len());
        let mut rates = Vec::with_capacity(pages.len());
        let mut url_ids = Vec::with_capacity(pages.len());
        for page in pages {
            let mut previous = page.first_crawl_day;
            let mut times = Vec::new();
            for &(day, changed) in &page.crawls {
                if changed {
                    times.push((previous + day) / 2.0);
                }
                previous = day;
            }
            let followed = previous - page.first_crawl_day;
            rates.push(if followed > 0.0 { times.len() as f64 / followed } else { 0.0 });
            horizon = horizon.max(previous.ceil() + 1.0);
            changes.push(times);
            url_ids.push(page.url_id);
        }
        Ok(Self { truth: Truth::from_changes(horizon, changes, rates), url_ids })
    }
}

impl World for ReplayWorld {
    fn truth(&self) -> &Truth {
        &self.truth
    }
    fn host(&self, _page: u32) -> u32 {
        0
    }
    fn group(&self, _page: u32) -> usize {
        0
    }
    fn bytes(&self, _page: u32) -> u64 {
        REPLAY_BYTES
    }
    fn downloads(&self, _page: u32, _period: u64) -> bool {
        true
    }
    fn response_ms(&self, _page: u32, _t: f64) -> f64 {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::simulate::{simulate, SimConfig, SimPolicy};
    use recrawl_scheduler::policy::Policy;

    #[test]
    fn changes_sit_between_the_crawls_that_saw_them() {
        let world = ReplayWorld::parse("7\t0\t[[1,0],[1,1],[2,1]]\n9\t2\t[[3,0]]\n").expect("parses");
        assert_eq!(world.url_ids, [7, 9]);
        // Crawls on days 1, 2, 4: changes seen on day 2 (between 1 and 2) and 4 (2–4).
        assert_eq!(world.truth.changes(0), [1.5, 3.0]);
        assert!(world.truth.changes(1).is_empty());
        assert_eq!(world.truth.rates()[0], 0.5);
        assert_eq!(world.truth.horizon(), 6.0);
    }

    #[test]
    fn a_replayed_history_runs_through_the_simulator() {
        let lines: String = (0..50)
            .map(|id| {
                let pairs: Vec<String> =
                    (0..20).map(|day| format!("[1,{}]", u8::from((day + id) % (id % 5 + 1) == 0))).collect();
                format!("{id}\t0\t[{}]\n", pairs.join(","))
            })
            .collect();
        let world = ReplayWorld::parse(&lines).expect("parses");
        let config = SimConfig { periods: 20, budget: 0.3, threads: 1, ..SimConfig::default() };
        let policies = [SimPolicy::Optimum, SimPolicy::Clairvoyant, SimPolicy::Scheduler(Policy::Uniform)];
        let results = simulate(&world, &policies, &config);
        assert_eq!(results.len(), 3);
        for result in &results {
            assert!(result.freshness > 0.0 && result.freshness < 1.0, "{result:?}");
        }
        assert_eq!((results[0].requests, results[2].requests), (20 * 15, 20 * 15));
        // The clairvoyant spends picks only on stale pages, so it never fetches an
        // unchanged one, and is the freshest.
        assert!(results[1].requests <= 20 * 15);
        assert_eq!(results[1].unchanged_downloads, 0);
        assert!(results[1].freshness >= results[0].freshness.max(results[2].freshness));
    }
}
