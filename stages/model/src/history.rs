//! Per-URL request history and the definitions of `docs/algorithms/estimator.md` §2. Pure: the
//! stage, the benches and the offline tools call the same code.

use serde::{Deserialize, Serialize};

/// One request's outcome as the estimator sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub downloaded: bool,
    /// For a download: whether the content differs from the previous download
    /// (`None` when there was no previous download to compare with).
    pub changed: Option<bool>,
}

/// The latest outcomes of a sequence (requests or comparisons), newest in bit 0, above
/// them a marker bit whose position is the count: one word per window. Holds up to 63,
/// which bounds the configurable prediction window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcomes(u64);

impl Default for Outcomes {
    fn default() -> Self {
        Self(1)
    }
}

impl Outcomes {
    pub const CAPACITY: u32 = 63;

    pub fn len(&self) -> u32 {
        63u32.saturating_sub(self.0.leading_zeros())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn push(&mut self, yes: bool) {
        let full = self.len() == Self::CAPACITY;
        // A zero word (never written by this type) is taken as empty.
        let shifted = (self.0.max(1) << 1) | u64::from(yes);
        // When full, the oldest outcome is shifted into the marker's place.
        self.0 = if full { shifted | 1 << 63 } else { shifted };
    }

    /// (yes, no) among the latest `window` outcomes (fewer when fewer were seen).
    pub fn counts(&self, window: u32) -> (u32, u32) {
        let seen = self.len().min(window);
        // The low `seen` bits; `checked_shl` fails only for all 64.
        let latest = !u64::MAX.checked_shl(seen).unwrap_or(0);
        ((self.0 & latest).count_ones(), (!self.0 & latest).count_ones())
    }
}

/// Counters of one URL's requests. Crawl numbers are scheduler periods; `first_request`
/// and `last_request` are meaningful once `requests > 0`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageHistory {
    pub first_request: u64,
    pub last_request: u64,
    pub requests: u32,
    pub successes: u32,
    pub failures: u32,
    /// Downloads compared with a previous download.
    pub comparisons: u32,
    pub changes: u32,
    /// Latest requests: downloaded or not.
    pub recent_requests: Outcomes,
    /// Latest comparisons: changed or not.
    pub recent_comparisons: Outcomes,
}

/// The rates of §2 for a URL in a group that has had K crawls; `None` where the
/// definition divides by zero.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rates {
    pub request_rate: Option<f64>,
    pub download_rate: Option<f64>,
    pub download_recall: Option<f64>,
    pub modification_rate: Option<f64>,
    pub change_recall: Option<f64>,
}

impl PageHistory {
    /// Records a request in `crawl`. Requests arrive in crawl order; a crawl at or before
    /// the last recorded one is a replay and is ignored (returns false).
    pub fn record(&mut self, crawl: u64, observation: Observation) -> bool {
        if self.requests > 0 && crawl <= self.last_request {
            return false;
        }
        if self.requests == 0 {
            self.first_request = crawl;
        }
        self.last_request = crawl;
        self.requests = self.requests.saturating_add(1);
        self.recent_requests.push(observation.downloaded);
        if !observation.downloaded {
            self.failures = self.failures.saturating_add(1);
            return true;
        }
        self.successes = self.successes.saturating_add(1);
        if let Some(changed) = observation.changed {
            self.comparisons = self.comparisons.saturating_add(1);
            self.changes = self.changes.saturating_add(u32::from(changed));
            self.recent_comparisons.push(changed);
        }
        true
    }

    /// Periods from the first request to `crawl`, saturating at `u32::MAX`.
    pub fn since_first_request(&self, crawl: u64) -> u32 {
        u32::try_from(crawl.saturating_sub(self.first_request)).unwrap_or(u32::MAX)
    }

    /// The first request once one in `crawl`, not a replay, is recorded.
    pub fn first_request_with(&self, crawl: u64) -> u64 {
        if self.requests == 0 {
            crawl
        } else {
            self.first_request
        }
    }

    pub fn first_and_last(&self) -> Option<(u64, u64)> {
        (self.requests > 0).then_some((self.first_request, self.last_request))
    }

    /// Rates given K = `crawls` of the URL's group so far.
    pub fn rates(&self, crawls: u64) -> Rates {
        let requests = f64::from(self.requests);
        // Saturating: a history restored from a damaged changelog may have first > last.
        let span = self.first_and_last().map(|(first, last)| last.saturating_sub(first) as f64 + 1.0);
        Rates {
            request_rate: span.map(|span| requests / span),
            download_rate: ratio(self.successes, self.requests),
            download_recall: (crawls > 0).then(|| requests / crawls as f64),
            modification_rate: ratio(self.changes, self.comparisons),
            change_recall: match (self.successes.checked_sub(1), crawls.checked_sub(1)) {
                (Some(later_successes), Some(later_crawls)) if later_crawls > 0 => {
                    Some(f64::from(later_successes) / later_crawls as f64)
                }
                _ => None,
            },
        }
    }
}

fn ratio(numerator: u32, denominator: u32) -> Option<f64> {
    (denominator > 0).then(|| f64::from(numerator) / f64::from(denominator))
}

/// One crawl of a history written as in the paper's Figure 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symbol {
    /// `.`: not requested.
    Skipped,
    /// `!`: requested, failed.
    Failed,
    /// Any other character: downloaded, with that content.
    Downloaded(char),
}

impl Symbol {
    pub fn parse(symbol: char) -> Self {
        match symbol {
            '.' => Self::Skipped,
            '!' => Self::Failed,
            content => Self::Downloaded(content),
        }
    }
}

/// The observations of a Figure 1 history, crawls numbered from 1; skipped crawls give
/// none. A download is compared with the latest earlier download.
pub fn observations(history: &str) -> impl Iterator<Item = (u64, Observation)> + '_ {
    let mut previous: Option<char> = None;
    history.chars().zip(1u64..).filter_map(move |(symbol, crawl)| match Symbol::parse(symbol) {
        Symbol::Skipped => None,
        Symbol::Failed => Some((crawl, Observation { downloaded: false, changed: None })),
        Symbol::Downloaded(content) => {
            let changed = previous.map(|p| p != content);
            previous = Some(content);
            Some((crawl, Observation { downloaded: true, changed }))
        }
    })
}

/// Replays a Figure 1 history into counters.
pub fn replay_figure(history: &str) -> PageHistory {
    let mut page = PageHistory::default();
    for (crawl, observation) in observations(history) {
        page.record(crawl, observation);
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 16;

    /// State comes back from a changelog on a topic; a damaged record must not panic.
    #[test]
    fn a_history_with_its_first_request_after_its_last_gives_rates_not_a_panic() {
        let history = PageHistory {
            first_request: 10,
            last_request: 3,
            requests: 2,
            comparisons: 1,
            ..Default::default()
        };
        assert_eq!(history.rates(K).request_rate, Some(2.0));
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    #[test]
    fn figure_1_url_a_changes_every_crawl() {
        let a = replay_figure("abcdefghijklmnop");
        let rates = a.rates(K);
        assert_eq!((a.requests, a.successes, a.changes, a.comparisons), (16, 16, 15, 15));
        assert!(close(rates.download_rate, 1.0));
        assert!(close(rates.modification_rate, 1.0));
    }

    #[test]
    fn figure_1_url_b_request_rate() {
        let b = replay_figure("....q!r.!.......");
        assert_eq!((b.first_and_last(), b.requests), (Some((5, 9)), 4));
        assert!(close(b.rates(K).request_rate, 0.8));
    }

    #[test]
    fn figure_1_url_c_download_rate_and_recall() {
        let c = replay_figure("..ss.!tt!.!!....");
        let rates = c.rates(K);
        assert_eq!((c.requests, c.successes, c.failures), (8, 4, 4));
        assert!(close(rates.download_rate, 0.5));
        assert!(close(rates.download_recall, 0.5));
    }

    #[test]
    fn figure_1_url_d_modification_rate_and_change_recall() {
        let d = replay_figure("!u.!uuvv.w!ww..w");
        let rates = d.rates(K);
        assert_eq!((d.requests, d.successes, d.changes), (12, 9, 2));
        assert!(close(rates.download_rate, 0.75));
        assert!(close(rates.modification_rate, 0.25));
        assert!(close(rates.change_recall, 8.0 / 15.0));
    }

    #[test]
    fn undefined_rates_are_none_not_nan() {
        let failing = replay_figure("!!!!");
        let rates = failing.rates(4);
        assert_eq!(rates.download_rate, Some(0.0));
        assert_eq!(rates.modification_rate, None);
        assert_eq!(rates.change_recall, None);
        assert_eq!(replay_figure("a").rates(1).change_recall, None, "K = 1 has no comparison");
        let never = PageHistory::default().rates(0);
        assert_eq!((never.request_rate, never.download_rate, never.download_recall), (None, None, None));
    }

    #[test]
    fn extreme_periods_do_not_overflow() {
        let mut page = PageHistory::default();
        page.record(0, Observation { downloaded: true, changed: None });
        page.record(u64::MAX, Observation { downloaded: true, changed: Some(true) });
        let rate = page.rates(u64::MAX).request_rate.unwrap();
        assert!(rate > 0.0 && rate < 1e-18);
    }

    #[test]
    fn replays_are_ignored() {
        let mut page = PageHistory::default();
        assert!(page.record(3, Observation { downloaded: true, changed: None }));
        assert!(!page.record(3, Observation { downloaded: true, changed: Some(true) }));
        assert!(!page.record(2, Observation { downloaded: false, changed: None }));
        assert_eq!((page.requests, page.changes), (1, 0));
    }

    #[test]
    fn the_windows_hold_the_latest_outcomes() {
        let d = replay_figure("!u.!uuvv.w!ww..w");
        // Requests: ! u ! u u v v w ! w w w → the last five: w ! w w w.
        assert_eq!(d.recent_requests.counts(5), (4, 1));
        // Comparisons (u u u v v w w w w after the first u): changes at v and w.
        assert_eq!(d.recent_comparisons.counts(8), (2, 6));
        assert_eq!(d.recent_comparisons.counts(3), (0, 3));
        assert_eq!(d.recent_requests.counts(100), (9, 3), "a window beyond the history takes all of it");
        let mut long = Outcomes::default();
        (0..100).for_each(|i| long.push(i % 2 == 0));
        assert_eq!(long.len(), 63);
        // The latest 63 of 0..100 are 37..=99: 31 even, 32 odd.
        assert_eq!(long.counts(64), (31, 32));
        assert_eq!(long.counts(2), (1, 1));
        assert_eq!(Outcomes::default().counts(5), (0, 0));
    }
}
