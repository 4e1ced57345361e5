//! Per-URL request history and the definitions of `spec/estimator.md` §2. Pure: the
//! stage, the benches and the offline tools call the same code.

use serde::{Deserialize, Serialize};

/// One request's outcome as the estimator sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub downloaded: bool,
    /// For a download: whether the content differs from the previous download
    /// (`None` when there was no previous download).
    pub changed: Option<bool>,
}

/// Counters of one URL's requests. `crawl` numbers are scheduler periods.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageHistory {
    pub first_request: Option<u64>,
    pub last_request: Option<u64>,
    pub requests: u64,
    pub successes: u64,
    pub failures: u64,
    pub changes: u64,
}

/// The rates of §2 for a URL in a group that has had `crawls` (K) crawls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub request_rate: f64,
    pub download_rate: f64,
    pub download_recall: f64,
    pub modification_rate: Option<f64>,
    pub change_recall: Option<f64>,
}

impl PageHistory {
    /// Records a request in `crawl`. Requests must arrive in crawl order; a crawl at or
    /// before the last recorded one is a replay and is ignored (returns false).
    pub fn record(&mut self, crawl: u64, observation: Observation) -> bool {
        if self.last_request.is_some_and(|last| crawl <= last) {
            return false;
        }
        self.first_request.get_or_insert(crawl);
        self.last_request = Some(crawl);
        self.requests += 1;
        if observation.downloaded {
            self.successes += 1;
            if observation.changed == Some(true) {
                self.changes += 1;
            }
        } else {
            self.failures += 1;
        }
        true
    }

    /// Rates given K = `crawls` of the URL's group so far (K ≥ 1).
    pub fn rates(&self, crawls: u64) -> Rates {
        let requests = self.requests as f64;
        let span = match (self.first_request, self.last_request) {
            (Some(first), Some(last)) => (last - first) as f64 + 1.0,
            _ => 0.0,
        };
        let crawls = crawls.max(1);
        Rates {
            request_rate: ratio(requests, span),
            download_rate: ratio(self.successes as f64, requests),
            download_recall: requests / crawls as f64,
            modification_rate: (self.successes >= 2)
                .then(|| self.changes as f64 / (self.successes - 1) as f64),
            change_recall: (self.successes >= 1 && crawls >= 2)
                .then(|| (self.successes - 1) as f64 / (crawls - 1) as f64),
        }
    }
}

fn ratio(numerator: f64, denominator: f64) -> f64 {
    if denominator > 0.0 {
        numerator / denominator
    } else {
        0.0
    }
}

/// Replays a history written as in the paper's Figure 1 (`.` not requested, `!` failed,
/// any other character a download whose content is that character), crawls numbered
/// from 1. Used by the tests and the offline tools.
pub fn replay_figure(history: &str) -> PageHistory {
    let mut page = PageHistory::default();
    let mut previous: Option<char> = None;
    for (index, symbol) in history.chars().enumerate() {
        let crawl = index as u64 + 1;
        match symbol {
            '.' => {}
            '!' => {
                page.record(crawl, Observation { downloaded: false, changed: None });
            }
            content => {
                let changed = previous.map(|p| p != content);
                page.record(crawl, Observation { downloaded: true, changed });
                previous = Some(content);
            }
        }
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 16;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn figure_1_url_a_changes_every_crawl() {
        let a = replay_figure("abcdefghijklmnop");
        let rates = a.rates(K);
        assert_eq!((a.requests, a.successes, a.changes), (16, 16, 15));
        assert!(close(rates.download_rate, 1.0));
        assert!(close(rates.modification_rate.unwrap(), 1.0));
    }

    #[test]
    fn figure_1_url_b_request_rate() {
        let b = replay_figure("....q!r.!.......");
        assert_eq!((b.first_request, b.last_request, b.requests), (Some(5), Some(9), 4));
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
        assert!(close(rates.modification_rate.unwrap(), 0.25));
        assert!(close(rates.change_recall.unwrap(), 8.0 / 15.0));
    }

    #[test]
    fn undefined_rates_are_none_not_nan() {
        let failing = replay_figure("!!!!");
        let rates = failing.rates(4);
        assert_eq!(rates.download_rate, 0.0);
        assert_eq!(rates.modification_rate, None);
        assert_eq!(rates.change_recall, None);
        let once = replay_figure("a");
        assert_eq!(once.rates(1).change_recall, None, "K = 1 has no comparison");
        assert_eq!(PageHistory::default().rates(3).request_rate, 0.0);
    }

    #[test]
    fn extreme_periods_do_not_overflow() {
        let mut page = PageHistory::default();
        page.record(0, Observation { downloaded: true, changed: None });
        page.record(u64::MAX, Observation { downloaded: true, changed: Some(true) });
        let rates = page.rates(u64::MAX);
        assert!(rates.request_rate > 0.0 && rates.request_rate < 1e-18);
    }

    #[test]
    fn replays_are_ignored() {
        let mut page = PageHistory::default();
        assert!(page.record(3, Observation { downloaded: true, changed: None }));
        assert!(!page.record(3, Observation { downloaded: true, changed: Some(true) }));
        assert!(!page.record(2, Observation { downloaded: false, changed: None }));
        assert_eq!((page.requests, page.changes), (1, 0));
    }
}
