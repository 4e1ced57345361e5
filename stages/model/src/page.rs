//! The estimator's step for one URL: what is kept per URL, how a request updates it, where
//! the URL then stands in its group's DR and MR distributions
//! (`docs/algorithms/estimator.md` §1–3) and its refresh plan (`refresh-groups.md` §1–3).
//! The estimator stage and the simulator both learn through it.

use serde::{Deserialize, Serialize};

use crate::history::{Observation, PageHistory};
use crate::modified::{DateTally, DateTrust, DateVerdict, DatedChanges};
use crate::prediction::{fine_bin, Eligibility, Kind, RateHistogram};
use crate::rate::{RateCounts, RateEvidence, RateLikelihood, RatePrior};
use crate::refresh::{ChangeCalendar, Refresh, RefreshSettings};

/// One request's outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub period: u64,
    pub fetched_at_ms: i64,
    pub downloaded: bool,
    /// For a download compared with an earlier one: whether the content changed.
    pub changed: Option<bool>,
    pub size_bytes: u64,
    /// Bytes the size moved by since the previous download.
    pub update_size: Option<i64>,
    pub latency_ms: f64,
    /// A download's `Last-Modified`, Unix ms, where the server sent a valid one.
    pub last_modified_ms: Option<i64>,
}

/// What is kept per URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageState {
    pub history: PageHistory,
    /// When the URL was first requested (Unix ms): bounds the weeks its rate is over.
    pub first_seen_ms: i64,
    pub last_fetched_at_ms: i64,
    pub last_size_bytes: u64,
    pub last_update_size: Option<i64>,
    pub last_latency_ms: f32,
    /// The fine bins the URL is counted in in its group's DR and MR histograms.
    pub download_bin: Option<u8>,
    pub change_bin: Option<u8>,
    pub calendar: ChangeCalendar,
    /// The periods the URL's comparisons span. Optional and at the end, as `dated`,
    /// because changelog records written before they were kept end before them (they
    /// read as `None`).
    pub compared: Option<ComparedDownloads>,
    /// What its `Last-Modified` headers said (`crate::modified`).
    pub dated: Option<DatedChanges>,
}

/// Where a URL's compared downloads lie. Failed requests between, before or after them
/// take no part: a comparison spans the periods from one download to the next. 32 bits
/// each (saturating: 490,000 years of hourly periods, 8,000 of minute-long ones) keep a
/// tracked URL's counters within 200 B.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComparedDownloads {
    /// The crawl of the latest download, counted from the URL's first request.
    pub last_download: u32,
    /// The periods between compared downloads, summed over the comparisons.
    pub periods: u32,
}

/// A URL's change rate and the prior it was estimated under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageRate {
    /// Posterior mean per period.
    pub rate: f64,
    /// The posterior's 80 % credible interval, per period.
    pub low: f64,
    pub high: f64,
    /// The prior's mean rate, and the pages it was learned from (0: flat).
    pub prior_mean: f64,
    pub prior_pages: u64,
    pub source: RateSource,
}

/// What a URL's change rate rests on besides its group's prior: the estimate says it.
pub use recrawl_schemas::ChangeRateSource as RateSource;

/// A URL's move in one of its group's histograms: out of `from`, into `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinMove {
    pub from: Option<u8>,
    pub to: Option<u8>,
}

impl BinMove {
    /// Moves the URL in `counts`, its group's histogram.
    pub fn apply(self, counts: &mut impl FineBinCounts) {
        self.from.into_iter().for_each(|bin| counts.remove_bin(bin));
        self.to.into_iter().for_each(|bin| counts.add_bin(bin));
    }
}

/// A group's count of its URLs in each fine DR or MR bin, however it is stored.
pub trait FineBinCounts {
    fn add_bin(&mut self, bin: u8);
    fn remove_bin(&mut self, bin: u8);
}

impl FineBinCounts for RateHistogram {
    fn add_bin(&mut self, bin: u8) {
        self.add(usize::from(bin));
    }

    fn remove_bin(&mut self, bin: u8) {
        self.remove(usize::from(bin));
    }
}

/// The URL's moves in its group's DR and MR histograms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebinned {
    pub download: BinMove,
    pub change: BinMove,
}

/// What a URL's group keeps that the URL's requests move: its fine bin in the DR and MR
/// histograms (`C`, however the group stores them), its rate evidence, and its dates'
/// verdict on their server.
#[derive(Debug)]
pub struct GroupTallies<'a, C> {
    pub download: &'a mut C,
    pub change: &'a mut C,
    pub rates: &'a mut RateCounts,
    pub dates: &'a mut DateTally,
}

/// The settings a request's update ([`PageState::update`]) takes.
#[derive(Debug, Clone, Copy)]
pub struct UpdateSettings<'a> {
    pub refresh: &'a RefreshSettings,
    pub eligibility: &'a Eligibility,
    pub period_ms: u64,
}

impl PageState {
    pub fn new(first_seen_ms: i64) -> PageState {
        PageState {
            history: PageHistory::default(),
            first_seen_ms,
            last_fetched_at_ms: first_seen_ms,
            last_size_bytes: 0,
            last_update_size: None,
            last_latency_ms: 0.0,
            download_bin: None,
            change_bin: None,
            calendar: ChangeCalendar::default(),
            compared: None,
            dated: None,
        }
    }

    /// Records `request`. A period at or before the latest recorded one is a replay:
    /// nothing changes and it returns false.
    pub fn record(&mut self, request: &Request, settings: &RefreshSettings) -> bool {
        let observation = Observation { downloaded: request.downloaded, changed: request.changed };
        let before = self.compared_downloads();
        if !self.history.record(request.period, observation) {
            return false;
        }
        if request.downloaded {
            let crawl = self.history.since_first_request(request.period);
            let periods = match (before, request.changed) {
                (Some(compared), Some(_)) => {
                    compared.periods.saturating_add(crawl.saturating_sub(compared.last_download))
                }
                (Some(compared), None) => compared.periods,
                // Compared with a download this history never recorded (the diff stage
                // kept a copy the estimator lost): since the first request, the most it
                // can have spanned that is known.
                (None, Some(_)) => crawl,
                (None, None) => 0,
            };
            self.compared = Some(ComparedDownloads { last_download: crawl, periods });
            self.dated = DatedChanges::observe(
                self.dated,
                request.fetched_at_ms,
                request.last_modified_ms,
                request.changed,
            );
            self.last_size_bytes = request.size_bytes;
            self.last_update_size = request.update_size;
        }
        self.last_fetched_at_ms = request.fetched_at_ms;
        self.last_latency_ms = request.latency_ms as f32;
        if request.changed == Some(true) {
            let update_size = request.update_size.unwrap_or(0).unsigned_abs();
            self.calendar.record(self.changed_at_ms(request.fetched_at_ms), update_size, settings);
        }
        true
    }

    /// When the change a download found happened: its proven `Last-Modified` date (which
    /// then lies after the previous download; a date up to a minute ahead of the fetch is
    /// taken as the fetch), else the fetch, up to the revisit interval after the change.
    fn changed_at_ms(&self, fetched_at_ms: i64) -> i64 {
        match self.dated {
            Some(dated) if dated.trust == DateTrust::Proven => dated.last_modified_ms.min(fetched_at_ms),
            _ => fetched_at_ms,
        }
    }

    /// Places the URL in its group's DR and MR bins, where eligible, given K = `crawls` of
    /// its group so far; returns the moves for the group's histograms.
    pub fn rebin(&mut self, crawls: u64, eligibility: &Eligibility) -> Rebinned {
        let rates = self.history.rates(crawls);
        let download =
            eligibility.dr_eligible(&rates).then(|| fine_bin(rates.download_rate.unwrap_or(0.0)) as u8);
        let change =
            eligibility.mr_eligible(&rates).then(|| fine_bin(rates.modification_rate.unwrap_or(0.0)) as u8);
        let moves = Rebinned {
            download: BinMove { from: self.download_bin, to: download },
            change: BinMove { from: self.change_bin, to: change },
        };
        self.download_bin = download;
        self.change_bin = change;
        moves
    }

    /// Learns one request of the URL, the estimator's step for it (the simulator takes
    /// the same): records it, moves the URL in its group's histograms given K = `crawls`
    /// of the group so far (the request's period included), takes its change rate under
    /// `prior` and its server's trust as of the tally's last settle, and moves its rate
    /// evidence and date verdict in the group's tallies. `counted`: whether the tallies
    /// hold the URL's evidence from before (not when it has just moved group). A replay
    /// must not come here: [`PageState::record`] would ignore it, and the tallies would
    /// count it again.
    pub fn update<C: FineBinCounts>(
        &mut self,
        request: &Request,
        settings: UpdateSettings<'_>,
        prior: &RatePrior,
        counted: bool,
        crawls: u64,
        tallies: GroupTallies<'_, C>,
    ) -> PageRate {
        let evidence_before = if counted { self.rate_evidence(settings.period_ms) } else { None };
        let verdict_before = if counted { self.date_verdict() } else { None };
        self.record(request, settings.refresh);
        let moves = self.rebin(crawls, settings.eligibility);
        moves.download.apply(tallies.download);
        moves.change.apply(tallies.change);
        let rate = self.change_rate(prior, settings.period_ms, tallies.dates.trusted());
        tallies.rates.replace(evidence_before, self.rate_evidence(settings.period_ms));
        tallies.dates.replace(verdict_before, self.date_verdict());
        rate
    }

    /// (yes, no) among the latest `window` requests (DR) or comparisons (MR): what a
    /// forecast of `kind` conditions on.
    pub fn recent(&self, kind: Kind, window: u32) -> (u32, u32) {
        match kind {
            Kind::Dr => self.history.recent_requests.counts(window),
            Kind::Mr => self.history.recent_comparisons.counts(window),
        }
    }

    /// The URL's change rate per period under `prior`: from the changes its
    /// `Last-Modified` headers dated where they are believed
    /// ([`DatedChanges::believed`]; `server_trusted`: its group's dates are), else from
    /// its comparisons (the prior alone before the first). `period_ms` turns the dates
    /// into periods.
    pub fn change_rate(&self, prior: &RatePrior, period_ms: u64, server_trusted: bool) -> PageRate {
        let history = &self.history;
        let (posterior, source) = match self.believed_dates(period_ms, server_trusted) {
            Some((changes, quiet)) => {
                (RateLikelihood::dated(changes, quiet).posterior(prior), RateSource::Dates)
            }
            None => (
                prior.compared_posterior(
                    history.comparisons,
                    history.changes,
                    self.comparison_spacing().unwrap_or(1.0),
                ),
                if history.comparisons > 0 { RateSource::Comparisons } else { RateSource::Prior },
            ),
        };
        PageRate {
            rate: posterior.rate,
            low: posterior.low,
            high: posterior.high,
            prior_mean: prior.mean,
            prior_pages: prior.pages,
            source,
        }
    }

    /// What the URL adds to its group's rate counts: a function of its history alone, so
    /// the counts move exactly when it is observed again (its dates count only once
    /// confirmed on the URL itself); `None` before the first comparison or confirmed date.
    pub fn rate_evidence(&self, period_ms: u64) -> Option<RateEvidence> {
        if let Some((changes, quiet)) = self.believed_dates(period_ms, false) {
            return Some(RateEvidence::dated(changes, quiet));
        }
        let spacing = self.comparison_spacing()?;
        Some(RateEvidence::new(self.history.comparisons, self.history.changes, spacing))
    }

    /// What the URL's dates showed of its server, for its group's
    /// [`DateTally`].
    pub fn date_verdict(&self) -> Option<DateVerdict> {
        self.dated.as_ref().and_then(DatedChanges::verdict)
    }

    /// Whether the URL's rate rests on whether its group's server is trusted
    /// ([`DatedChanges::await_trust`]).
    pub fn dates_await_trust(&self) -> bool {
        self.dated.as_ref().is_some_and(DatedChanges::await_trust)
    }

    fn believed_dates(&self, period_ms: u64, server_trusted: bool) -> Option<(u32, f64)> {
        self.dated.as_ref().and_then(|dated| dated.believed(period_ms, server_trusted))
    }

    /// Mean periods between the URL's compared downloads, at least 1 (`None` before the
    /// first comparison).
    pub fn comparison_spacing(&self) -> Option<f64> {
        let comparisons = self.history.comparisons;
        let compared = self.compared_downloads()?;
        (comparisons > 0).then(|| (compared.periods as f64 / f64::from(comparisons)).max(1.0))
    }

    /// [`Self::compared`], or for a state restored from a record that predates it, what
    /// the rate was estimated from then: the comparisons spanning every request, up to
    /// the latest taken as a download, or before the first comparison the one download
    /// at the first request. `None` before the first download.
    fn compared_downloads(&self) -> Option<ComparedDownloads> {
        let history = &self.history;
        self.compared.or_else(|| {
            let (_, last) = history.first_and_last().filter(|_| history.successes > 0)?;
            let last = if history.comparisons > 0 { history.since_first_request(last) } else { 0 };
            Some(ComparedDownloads { last_download: last, periods: last })
        })
    }

    /// The refresh as of the latest request.
    pub fn refresh(&self, settings: &RefreshSettings) -> Refresh {
        self.calendar.refresh(self.last_fetched_at_ms, self.first_seen_ms, settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refresh::{slot_of, FrequencyGroup, DAY_MS};

    fn request(period: u64, downloaded: bool, changed: Option<bool>) -> Request {
        Request {
            period,
            fetched_at_ms: period as i64 * DAY_MS,
            downloaded,
            changed,
            size_bytes: 1_000 + period,
            update_size: Some(10),
            latency_ms: 5.0,
            last_modified_ms: None,
        }
    }

    /// One request's update moves the URL in its group's tallies: it leaves its old bin
    /// and evidence when they are counted there, and only adds its new ones when not (a
    /// URL that has just moved group).
    #[test]
    fn an_update_moves_the_url_in_its_group_s_tallies() {
        let refresh = RefreshSettings::default();
        let eligibility = Eligibility::default();
        let settings =
            UpdateSettings { refresh: &refresh, eligibility: &eligibility, period_ms: DAY_MS as u64 };
        let (mut download, mut change) = (RateHistogram::new(), RateHistogram::new());
        let (mut rates, mut dates) = (RateCounts::default(), DateTally::default());
        let mut page = PageState::new(0);
        let prior = RatePrior::default();
        for (period, changed) in [(1, None), (2, Some(true)), (3, Some(false))] {
            let tallies = GroupTallies {
                download: &mut download,
                change: &mut change,
                rates: &mut rates,
                dates: &mut dates,
            };
            let rate = page.update(&request(period, true, changed), settings, &prior, true, period, tallies);
            assert_eq!(rate, page.change_rate(&prior, DAY_MS as u64, false));
            assert_eq!(rates.total(), u64::from(page.rate_evidence(DAY_MS as u64).is_some()));
            assert_eq!(download.total(), u64::from(page.download_bin.is_some()));
            assert_eq!(change.total(), u64::from(page.change_bin.is_some()));
        }
        assert_eq!(page.history.requests, 3);
        assert_eq!(rates.total(), 1, "two comparisons: evidence, counted once");
        // Not counted: the evidence it had is not taken out, so it is counted twice.
        let tallies = GroupTallies {
            download: &mut download,
            change: &mut change,
            rates: &mut rates,
            dates: &mut dates,
        };
        page.update(&request(4, true, Some(true)), settings, &prior, false, 4, tallies);
        assert_eq!(rates.total(), 2);
    }

    #[test]
    fn a_replayed_request_changes_nothing() {
        let settings = RefreshSettings::default();
        let mut page = PageState::new(0);
        assert!(page.record(&request(1, true, None), &settings));
        assert!(page.record(&request(2, true, Some(true)), &settings));
        let before = page.clone();
        assert!(!page.record(&request(2, true, Some(true)), &settings));
        assert!(!page.record(&request(1, false, None), &settings));
        assert_eq!(page, before);
        assert_eq!(page.calendar.hours.total_changes(), 1);
        assert_eq!((page.last_size_bytes, page.last_update_size), (1_002, Some(10)));
    }

    #[test]
    fn a_change_is_recorded_at_its_proven_date_else_at_its_fetch() {
        let settings = RefreshSettings::default();
        const HOUR: i64 = 3_600_000;
        // Fetched at 10:00 on days 1, 2 and 3; dated 03:00 on day 0 until the change
        // found on day 3, dated 07:00 that day.
        let downloads = |dated: bool| {
            let mut page = PageState::new(0);
            for (day, changed, modified) in [(1, None, 3), (2, Some(false), 3), (3, Some(true), 3 * 24 + 7)] {
                let request = Request {
                    fetched_at_ms: day * DAY_MS + 10 * HOUR,
                    last_modified_ms: dated.then_some(modified * HOUR),
                    ..request(day as u64, true, changed)
                };
                assert!(page.record(&request, &settings));
            }
            page
        };
        let hour_of = |page: &PageState| {
            let slots = page.calendar.hours.slots();
            assert_eq!(slots.len(), 1, "{slots:?}");
            slots[0].slot
        };
        let dated = downloads(true);
        assert_eq!(dated.dated.map(|d| d.trust), Some(DateTrust::Proven));
        assert_eq!(hour_of(&dated), slot_of(3 * DAY_MS + 7 * HOUR, 0));
        assert_eq!(hour_of(&downloads(false)), slot_of(3 * DAY_MS + 10 * HOUR, 0));
        // Refuted dates are not believed: the same date kept through the change.
        let mut refuted = downloads(false);
        for (day, changed) in [(4, Some(false)), (5, Some(true))] {
            let request = Request {
                fetched_at_ms: day * DAY_MS + 10 * HOUR,
                last_modified_ms: Some(3 * HOUR),
                ..request(day as u64, true, changed)
            };
            refuted.record(&request, &settings);
        }
        assert_eq!(refuted.dated.map(|d| d.trust), Some(DateTrust::Refuted));
        assert!(refuted
            .calendar
            .hours
            .slots()
            .iter()
            .any(|slot| slot.slot == slot_of(5 * DAY_MS + 10 * HOUR, 0)));
    }

    #[test]
    fn a_failed_request_keeps_the_last_download_and_counts_no_change() {
        let settings = RefreshSettings::default();
        let mut page = PageState::new(0);
        page.record(&request(1, true, None), &settings);
        page.record(&request(2, false, None), &settings);
        assert_eq!((page.last_size_bytes, page.last_fetched_at_ms), (1_001, 2 * DAY_MS));
        assert_eq!(page.recent(Kind::Dr, 5), (1, 1));
        assert_eq!(page.recent(Kind::Mr, 5), (0, 0));
    }

    #[test]
    fn comparisons_are_spaced_over_the_compared_downloads_only() {
        let settings = RefreshSettings::default();
        let mut page = PageState::new(0);
        assert_eq!(page.comparison_spacing(), None);
        // Failures before, between and after downloads in 2, 6 and 12: two comparisons
        // over 10 periods, not the 20 the requests span.
        for (crawl, downloaded, changed) in [
            (0, false, None),
            (2, true, None),
            (6, true, Some(true)),
            (8, false, None),
            (12, true, Some(false)),
            (20, false, None),
        ] {
            page.record(&request(crawl, downloaded, changed), &settings);
        }
        assert_eq!(page.compared, Some(ComparedDownloads { last_download: 12, periods: 10 }));
        assert_eq!(page.comparison_spacing(), Some(5.0));
        assert_eq!(page.rate_evidence(DAY_MS as u64), Some(RateEvidence::new(2, 1, 5.0)));
        // A download compared with nothing (the diff had lost the previous one) moves the
        // span's end but adds no periods.
        page.record(&request(30, true, None), &settings);
        page.record(&request(33, true, Some(true)), &settings);
        assert_eq!(page.compared, Some(ComparedDownloads { last_download: 33, periods: 13 }));
        assert_eq!(page.comparison_spacing(), Some(13.0 / 3.0));
    }

    #[test]
    fn a_state_from_before_the_span_keeps_its_spacing_and_counts_exactly_from_then() {
        let settings = RefreshSettings::default();
        let mut page = PageState::new(0);
        for (crawl, downloaded, changed) in [(0, true, None), (4, true, Some(true)), (8, false, None)] {
            page.record(&request(crawl, downloaded, changed), &settings);
        }
        // As a changelog record written before the span was kept reads back.
        page.compared = None;
        assert_eq!(page.comparison_spacing(), Some(8.0), "the comparison spans every request, as then");
        page.record(&request(10, true, Some(false)), &settings);
        // From the latest request then (8), taken as a download: 8 + 2 periods.
        assert_eq!(page.compared, Some(ComparedDownloads { last_download: 10, periods: 10 }));
        assert_eq!(page.comparison_spacing(), Some(5.0));
        // Before its first comparison: from its one download, taken as at the first
        // request (download in 0, failures in 3 and 6), as the span of requests had it.
        let mut once = PageState::new(0);
        for (crawl, downloaded) in [(0, true), (3, false), (6, false)] {
            once.record(&request(crawl, downloaded, None), &settings);
        }
        once.compared = None;
        once.record(&request(9, true, Some(true)), &settings);
        assert_eq!(once.comparison_spacing(), Some(9.0));
        // Only failed requests, or none: no span.
        let mut failing = PageState::new(0);
        failing.record(&request(1, false, None), &settings);
        assert_eq!((failing.compared, failing.comparison_spacing()), (None, None));
        // Then a download compared with one the history never recorded: it spans at most
        // the periods since the first request.
        failing.record(&request(6, true, Some(true)), &settings);
        assert_eq!(failing.compared, Some(ComparedDownloads { last_download: 5, periods: 5 }));
    }

    #[test]
    fn a_damaged_or_vast_span_gives_a_spacing_not_a_panic() {
        let settings = RefreshSettings::default();
        let mut page = PageState::new(0);
        page.record(&request(1, true, None), &settings);
        page.compared = Some(ComparedDownloads { last_download: u32::MAX, periods: u32::MAX });
        page.record(&request(2, true, Some(true)), &settings);
        assert_eq!(page.compared, Some(ComparedDownloads { last_download: 1, periods: u32::MAX }));
        assert!(page.comparison_spacing().is_some_and(f64::is_finite));
        // Periods past 32 bits from the first request saturate.
        page.record(&Request { period: u64::MAX, ..request(3, true, Some(false)) }, &settings);
        assert_eq!(page.compared, Some(ComparedDownloads { last_download: u32::MAX, periods: u32::MAX }));
    }

    #[test]
    fn proven_dates_tell_a_static_page_from_a_fast_one_where_comparisons_cannot() {
        let settings = RefreshSettings::default();
        let flat = RatePrior::default();
        let day = DAY_MS as u64;
        // Two downloads a day apart, unchanged: comparisons alone say little.
        let visits = |last_modified_ms: Option<i64>| {
            let mut page = PageState::new(0);
            for (crawl, changed) in [(1, None), (2, Some(false))] {
                page.record(&Request { last_modified_ms, ..request(crawl, true, changed) }, &settings);
            }
            page
        };
        let compared = visits(None);
        // The same, its server dating the content a thousand days before the first.
        let dated = visits(Some(-999 * DAY_MS));
        // Kept by an unchanged download, its date counts where the group's server is
        // trusted, and, as it could be a date that never moves, not in the group's counts.
        let (slow, unsure) = (dated.change_rate(&flat, day, true), compared.change_rate(&flat, day, true));
        assert_eq!((slow.source, unsure.source), (RateSource::Dates, RateSource::Comparisons));
        assert_eq!(dated.change_rate(&flat, day, false), compared.change_rate(&flat, day, false));
        assert_eq!(dated.rate_evidence(day), compared.rate_evidence(day));
        assert_eq!(PageState::new(0).change_rate(&flat, day, true).source, RateSource::Prior);
        assert!(slow.high < 0.01 && unsure.rate > 10.0 * slow.rate, "{slow:?} against {unsure:?}");
        // A page changed at each of three daily visits, each time dated a tenth of a day
        // before it: comparisons say only "more than about one a day".
        let mut fast = PageState::new(0);
        for crawl in 1..=4u64 {
            let at = crawl as i64 * DAY_MS;
            let changed = (crawl > 1).then_some(true);
            fast.record(
                &Request { last_modified_ms: Some(at - DAY_MS / 10), ..request(crawl, true, changed) },
                &settings,
            );
        }
        // Proven by an unchanged visit the next day, its date kept: 4 changes dated over
        // 4 × 0.1 + 1 days known quiet: λ^4·e^{−1.4λ}, times the flat prior in ln λ (1/λ),
        // a gamma posterior of mean 4 / 1.4 a day.
        fast.record(
            &Request { last_modified_ms: Some(4 * DAY_MS - DAY_MS / 10), ..request(5, true, Some(false)) },
            &settings,
        );
        assert_eq!(fast.rate_evidence(day), Some(RateEvidence::dated(4, 1.4)));
        let estimate = fast.change_rate(&flat, day, false);
        assert!((estimate.rate / (4.0 / 1.4) - 1.0).abs() < 0.05, "{estimate:?}");
    }

    #[test]
    fn rebinning_moves_the_url_between_its_groups_bins() {
        let settings = RefreshSettings::default();
        let eligibility = Eligibility::PAPER;
        let mut page = PageState::new(0);
        page.record(&request(1, true, None), &settings);
        let first = page.rebin(1, &eligibility);
        // One request in one crawl: request rate 1, download recall 1, DR 1 (bin 100).
        assert_eq!(first.download, BinMove { from: None, to: Some(100) });
        assert_eq!(first.change, BinMove { from: None, to: None });
        page.record(&request(2, false, None), &settings);
        let second = page.rebin(2, &eligibility);
        assert_eq!(second.download, BinMove { from: Some(100), to: Some(50) });
        assert_eq!(page.download_bin, Some(50));
    }

    #[test]
    fn the_refresh_plan_follows_the_changes_seen() {
        let settings = RefreshSettings::default();
        let mut page = PageState::new(0);
        for day in 1..=28 {
            page.record(&request(day, true, Some(true)), &settings);
        }
        let plan = page.refresh(&settings);
        assert!((plan.weekly_change_rate - 7.0).abs() < 1e-9, "{}", plan.weekly_change_rate);
        assert_eq!((plan.group16, plan.group6), (FrequencyGroup::Weekly(7), FrequencyGroup::Weekly(7)));
    }
}
