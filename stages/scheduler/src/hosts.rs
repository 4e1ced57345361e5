//! What the scheduler knows about each host, shared by an instance's partitions: names
//! interned once ([`Hosts`]), each host's response time, back-off, crawl delay and day
//! profile ([`HostStats`]), and what the `freshness` policy scores the profiles with
//! ([`DayState`]).

use std::sync::Mutex;

use hashbrown::HashTable;
use recrawl_model::claims::ClaimTally;
use recrawl_model::day::DayProfile;
use recrawl_model::periodic::{shows_the_day, DayTables};
use recrawl_schemas::LastRequest;
use xxhash_rust::xxh3::xxh3_64;

use crate::documents::Announced;

/// Per-host knowledge, shared by an instance's partitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostStats {
    /// Moving average of a request's milliseconds, answered or not; NaN before a sample.
    pub latency_ms: f64,
    /// g_i: moving average of download milliseconds per byte; NaN before a sample.
    pub ms_per_byte: f64,
    /// Consecutive 429/503 answers; the back-off doubles with each.
    pub backoff_level: u8,
    /// The host gets no picks before this period.
    pub backoff_until: u64,
    /// robots.txt Crawl-delay, 0 when none is known.
    pub crawl_delay_ms: u64,
    /// URLs of the host this instance tracks or has in its frontier.
    pub urls: u32,
    /// When in the day the host's pages change, from their comparisons and dated changes.
    pub day: DayProfile,
    /// How the host's sitemap and feed claims were judged (`docs/algorithms/sitemaps.md`).
    pub claims: ClaimTally,
    /// A partition's share of `claims` changed, or the partitions owned did, since the
    /// host's shares were last published on `host-trust`.
    pub trust_unpublished: bool,
    /// What its sitemaps and feeds announced: when they are read again
    /// ([`Announced::due`]).
    pub announced: Announced,
}

impl HostStats {
    /// Counts one more URL of the host.
    pub(crate) fn count_url(&mut self) {
        self.urls = self.urls.saturating_add(1);
    }

    /// Folds a download's milliseconds per byte into g_i, weighting it by `smoothing`.
    pub(crate) fn add_sample(&mut self, ms_per_byte: f64, smoothing: f64) {
        self.ms_per_byte = moving_average(self.ms_per_byte, ms_per_byte, smoothing);
    }

    /// Folds a request's milliseconds into the host's response time.
    pub(crate) fn add_latency(&mut self, latency_ms: f64, smoothing: f64) {
        if latency_ms.is_finite() && latency_ms > 0.0 {
            self.latency_ms = moving_average(self.latency_ms, latency_ms, smoothing);
        }
    }

    /// Requests the fetch stage can make to the host in a period of `period_ms`, one at a
    /// time, each starting `min_delay_ms` (or the host's Crawl-delay, if longer) after the
    /// previous one ended: 1 + (period − latency) / (delay + latency), at least 1.
    pub fn requests_per_period(&self, period_ms: u64, min_delay_ms: u64) -> u64 {
        let latency = if self.latency_ms.is_finite() { self.latency_ms.max(0.0) } else { 0.0 };
        let delay = min_delay_ms.max(self.crawl_delay_ms) as f64;
        let each = delay + latency;
        if each <= 0.0 {
            return u64::MAX;
        }
        let more = ((period_ms as f64 - latency).max(0.0) / each).floor();
        // Saturating: a float past u64 converts to its largest.
        (more as u64).saturating_add(1)
    }
}

/// An exponentially weighted moving average: `sample` weighed by `smoothing`; the sample
/// alone before any (NaN).
fn moving_average(average: f64, sample: f64, smoothing: f64) -> f64 {
    if average.is_nan() {
        sample
    } else {
        (1.0 - smoothing) * average + smoothing * sample
    }
}

impl Default for HostStats {
    fn default() -> Self {
        Self {
            latency_ms: f64::NAN,
            ms_per_byte: f64::NAN,
            backoff_level: 0,
            backoff_until: 0,
            crawl_delay_ms: 0,
            urls: 0,
            day: DayProfile::default(),
            claims: ClaimTally::default(),
            trust_unpublished: false,
            announced: Announced::default(),
        }
    }
}

/// What the `freshness` policy keeps between periods to score the pages of hosts with a
/// day profile: the tables of the index for a periodic rate, and the budget's multiplier.
#[derive(Debug, Default)]
pub struct DayState {
    pub tables: DayTables,
    /// The score of the last refresh pick of the last period whose quota was filled: the
    /// score a fetch must reach, ν; 0 before one.
    pub cutoff: f64,
}

/// Host names interned once per instance.
#[derive(Debug, Default)]
pub struct Hosts {
    names: Vec<Box<str>>,
    index: HashTable<u32>,
    pub stats: Vec<HostStats>,
    /// Locked by a period's choice only.
    pub day: Mutex<DayState>,
}

impl Hosts {
    /// Hosts whose day profile the `freshness` policy scores by the periodic index.
    pub fn with_day_profile(&self) -> usize {
        let placed =
            |stats: &&HostStats| stats.day.shape().is_some_and(|(amplitude, _)| shows_the_day(amplitude));
        self.stats.iter().filter(placed).count()
    }

    pub fn find(&self, name: &str) -> Option<u32> {
        self.index.find(xxh3_64(name.as_bytes()), |&id| &*self.names[id as usize] == name).copied()
    }

    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.find(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.into());
        self.stats.push(HostStats::default());
        let names = &self.names;
        self.index.insert_unique(xxh3_64(name.as_bytes()), id, |&id| xxh3_64(names[id as usize].as_bytes()));
        id
    }

    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// Bytes the table takes, for the memory figures: each name's text and box, its
    /// statistics, and a slot and a control byte per index bucket.
    pub fn bytes(&self) -> usize {
        let names: usize = self.names.iter().map(|name| name.len().saturating_add(16)).sum();
        names
            .saturating_add(self.stats.capacity().saturating_mul(std::mem::size_of::<HostStats>()))
            .saturating_add(self.index.capacity().saturating_mul(5))
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Folds one request's outcome into the host's response time (`smoothing` weighs the
    /// newest sample) and back-off (at most `max_backoff_periods`).
    pub(crate) fn observe(
        &mut self,
        id: u32,
        request: &LastRequest,
        smoothing: f64,
        max_backoff_periods: u64,
    ) {
        let stats = &mut self.stats[id as usize];
        if request.downloaded && request.size_bytes > 0 && request.latency_ms > 0.0 {
            stats.add_sample(request.latency_ms / request.size_bytes as f64, smoothing);
        }
        stats.add_latency(request.latency_ms, smoothing);
        if let Some(delay) = request.crawl_delay_ms {
            stats.crawl_delay_ms = delay;
        }
        if matches!(request.http_status, Some(429 | 503)) {
            stats.backoff_level = stats.backoff_level.saturating_add(1).min(63);
            let wait = (1u64 << stats.backoff_level).min(max_backoff_periods.max(1));
            stats.backoff_until =
                stats.backoff_until.max(request.period.saturating_add(wait).saturating_add(1));
        } else if request.downloaded {
            stats.backoff_level = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_s_name_and_statistics_count_in_the_table_s_bytes() {
        let mut hosts = Hosts::default();
        let empty = hosts.bytes();
        let name = "a-rather-long-host-name.example";
        hosts.intern(name);
        let one = hosts.bytes();
        assert!(one >= empty + name.len() + std::mem::size_of::<HostStats>(), "{empty} then {one}");
        hosts.intern(name);
        assert_eq!(hosts.bytes(), one, "a name seen again takes nothing more");
    }
}
