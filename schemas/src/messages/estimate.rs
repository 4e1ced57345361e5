//! The estimator's per-page predictions: topic `estimates`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bounds;
use super::fetch::FetchOutcome;
use super::page::PageRef;
use crate::envelope::{decode_as, EnvelopeError, Format, Framed, Framing, Message, HEADER_LEN};
use crate::frequency::FrequencyGroup;
use crate::time::UtcTime;
use crate::v1;
use crate::validation::ValidationError;

/// The latest request of a page, forwarded so the scheduler can update staleness,
/// size and server response time without reading the change-event topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LastRequest {
    /// Period of the request.
    pub period: u64,
    /// Whether it was a download.
    pub downloaded: bool,
    /// How the request ended, as the fetch result says (since schema 3): the scheduler
    /// lets a URL refused for its address go for good.
    pub outcome: FetchOutcome,
    /// Whether the content changed (null when not compared).
    pub changed: Option<bool>,
    /// Body size in bytes.
    pub size_bytes: u64,
    /// Body size minus the previous download's (null without both).
    pub size_change_bytes: Option<i64>,
    /// Fetch wall time in milliseconds.
    pub latency_ms: f64,
    /// When the fetch finished.
    pub fetched_at: UtcTime,
    /// `fetched_at` in Unix milliseconds.
    pub fetched_at_ms: i64,
    /// The final HTTP status, when the server answered (429 and 503 back the host off).
    pub http_status: Option<u16>,
    /// The host's robots.txt Crawl-delay, when the fetcher knows one.
    pub crawl_delay_ms: Option<u64>,
    /// The answer's `ETag`, kept by the scheduler for the next pick's conditional request.
    pub etag: Option<String>,
    /// The answer's `Last-Modified`, as `etag`.
    pub last_modified: Option<String>,
}

/// The model that produced a forecast (`docs/algorithms/estimator.md` §4 and §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ForecastModel {
    /// The paper's formula over the group's 12-bin distribution.
    Paper,
    /// Empirical Bayes over the group's 101-bin distribution.
    BetaBinomial,
    /// The URL's own Poisson rate (Cho & Garcia-Molina's estimator).
    Poisson,
}

/// What a forecast's prior was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ForecastPrior {
    /// The group's running distribution, summed over all estimator instances.
    Group,
    /// No usable group data (or no history): every outcome equally likely.
    Uniform,
    /// The URL's own history only (the Poisson model).
    None,
}

/// The predicted number of successes (downloads) or changes over the next requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Forecast {
    /// Successes (or changes) among the URL's latest `window` requests (or comparisons).
    pub yes: u32,
    /// Failures (or unchanged downloads) among the same.
    pub no: u32,
    /// `probabilities[c]`: probability of exactly c successes (changes) in the next
    /// `probabilities.len() − 1` requests (comparisons); sums to 1.
    pub probabilities: Vec<f64>,
    /// Probability of a success (a change) at the very next request (comparison).
    pub next: f64,
    /// The prior the forecast used.
    pub prior: ForecastPrior,
}

/// The refresh plan of `docs/algorithms/refresh-groups.md` from the URL's change history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RefreshPlan {
    /// Changes in the learning window per week observed.
    pub weekly_change_rate: f64,
    /// The 16-group frequency class: G1…G14, 2G1 or 4G1.
    pub group16: FrequencyGroup,
    /// The deployed 6-group class: G14, G7, G3, G1, 2G1 or 4G1.
    pub group6: FrequencyGroup,
    /// Crawls per week of `group6`.
    pub crawls_per_week: f64,
    /// The paper's crawl hour (0 when changes fall in the day, 12 at night); null
    /// without changes.
    pub paper_hour: Option<u8>,
    /// Weekdays to crawl on (0 = Monday).
    pub weekdays: Vec<u8>,
    /// The hour of day a daily crawl waits least for the observed changes.
    pub min_wait_hour: Option<u8>,
    /// The weekly slot (weekday × 24 + hour) a weekly crawl waits least for them.
    pub min_wait_slot: Option<u8>,
}

/// Per-URL counters, rates and predictions (`docs/algorithms/estimator.md`). Topic `estimates`,
/// keyed by URL; one after every request the estimator applies, and again for the same
/// request (same `period`) with a revised change rate whenever the URL's proven
/// `Last-Modified` dates come to count, or stop counting, as the verdict on its group's
/// server turns: the latest of a request's estimates holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PageEstimate {
    /// The page.
    pub page: PageRef,
    /// The page's group in the estimator, whose distributions are its prior: `page.host`
    /// or `page.site`, as the estimator's `--group-by` says.
    pub group: String,
    /// The period of the request this estimate includes last.
    pub period: u64,
    /// The latest request.
    pub last_request: LastRequest,
    /// K: crawls (periods) of the group so far, counted from the group's first request.
    pub crawls: u64,
    /// Period of the URL's first request.
    pub first_request_period: u64,
    /// Requests (downloads and failures).
    pub requests: u64,
    /// Downloads.
    pub successes: u64,
    /// Failed requests.
    pub failures: u64,
    /// Downloads compared with a previous download.
    pub comparisons: u64,
    /// Downloads whose content differed from the previous download.
    pub changes: u64,
    /// requests / (last − first + 1).
    pub request_rate: Option<f64>,
    /// DR: successes / requests.
    pub download_rate: Option<f64>,
    /// requests / K.
    pub download_recall: Option<f64>,
    /// MR: changes / comparisons; null before the first comparison.
    pub modification_rate: Option<f64>,
    /// (successes − 1) / (K − 1); null with no download or K = 1.
    pub change_recall: Option<f64>,
    /// Whether the URL counts in its group's DR distribution.
    pub download_eligible: bool,
    /// Whether the URL counts in its group's MR distribution.
    pub change_eligible: bool,
    /// The model of both forecasts.
    pub model: ForecastModel,
    /// Successes over the next requests.
    pub downloads: Forecast,
    /// Changes over the next comparisons.
    pub changes_forecast: Forecast,
    /// Change rate per period: the posterior mean given the URL's comparisons (or, once
    /// its `Last-Modified` dates are believed, the changes they date and the time they show
    /// passed without one), with its partition's URLs of the group as the prior
    /// (`docs/algorithms/freshness-limits.md`, learning the rates, dated changes); the
    /// prior's mean before the first comparison. Null only in records read from schema 1.
    pub change_rate: Option<f64>,
    /// Refresh group and crawl time.
    pub refresh: RefreshPlan,
    /// The lower end of `change_rate`'s 80 % credible interval: the posterior's 10th
    /// percentile on the estimator's grid of rates. Null only in records read from schema 1.
    pub change_rate_low: Option<f64>,
    /// The upper end: the posterior's 90th percentile.
    pub change_rate_high: Option<f64>,
    /// The prior `change_rate` was computed with: its mean rate per period. Null only in
    /// records read from schema 1.
    pub change_rate_prior_mean: Option<f64>,
    /// URLs of the group (those of this estimate's partition) the prior was learned from;
    /// 0 means the flat prior (no URL of the group compared yet).
    pub change_rate_prior_urls: Option<u64>,
    /// What the change rate rests on besides the prior, and so what the page is scheduled
    /// by (since schema 3): nothing yet, its comparisons, or its believed `Last-Modified`
    /// dates.
    pub change_rate_source: ChangeRateSource,
}

/// What a page's change rate rests on besides its group's prior
/// (`docs/algorithms/freshness-limits.md`, learning the rates, dated changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeRateSource {
    /// No comparison yet: the group's prior alone.
    Prior,
    /// The page's comparisons of its downloads.
    Comparisons,
    /// The changes its believed `Last-Modified` dates placed.
    Dates,
    /// The changes its site's sitemap dated, once the site's claims are trusted (since
    /// schema 4; `docs/algorithms/sitemaps.md`).
    Claims,
}

impl ChangeRateSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prior => "prior",
            Self::Comparisons => "comparisons",
            Self::Dates => "dates",
            Self::Claims => "claims",
        }
    }
}

impl Message for PageEstimate {
    const NAME: &'static str = "PageEstimate";
    const FORMAT: Format = Format::Json;
    /// 3: `last_request.outcome` and `change_rate_source`. 4: `change_rate_source` may
    /// be `claims`.
    const VERSION: u16 = 4;

    fn validate(&self) -> Result<(), ValidationError> {
        self.page.validate("page")?;
        bounds::period(self.period)?;
        bounds::text("group", &self.group, bounds::MAX_HOST_BYTES)?;
        let last = &self.last_request;
        bounds::period(last.period)?;
        if last.changed.is_some() && !last.downloaded {
            return Err(ValidationError::Contradiction(
                "last_request.changed is set on a request that did not download",
            ));
        }
        if last.downloaded != matches!(last.outcome, FetchOutcome::Downloaded | FetchOutcome::NotModified) {
            return Err(ValidationError::OutcomeDisagrees {
                outcome: last.outcome.as_str(),
                downloaded: last.downloaded,
            });
        }
        bounds::header("last_request.etag", last.etag.as_deref())?;
        bounds::header("last_request.last_modified", last.last_modified.as_deref())?;
        bounds::instant("last_request.fetched_at", last.fetched_at, last.fetched_at_ms)?;
        bounds::duration_ms("last_request.latency_ms", last.latency_ms)?;
        bounds::size_bytes("last_request.size_bytes", last.size_bytes)?;
        for (name, value) in [
            ("request_rate", self.request_rate),
            ("download_rate", self.download_rate),
            ("download_recall", self.download_recall),
            ("modification_rate", self.modification_rate),
            ("change_recall", self.change_recall),
            ("change_rate", self.change_rate),
            ("change_rate_low", self.change_rate_low),
            ("change_rate_high", self.change_rate_high),
            ("change_rate_prior_mean", self.change_rate_prior_mean),
        ] {
            value.map_or(Ok(()), |value| bounds::non_negative(name, value))?;
        }
        for (name, forecast) in [("downloads", &self.downloads), ("changes_forecast", &self.changes_forecast)]
        {
            bounds::probability(&format!("{name}.next"), forecast.next)?;
            for &probability in &forecast.probabilities {
                bounds::probability(&format!("{name}.probabilities"), probability)?;
            }
        }
        bounds::non_negative("refresh.crawls_per_week", self.refresh.crawls_per_week)?;
        bounds::non_negative("refresh.weekly_change_rate", self.refresh.weekly_change_rate)
    }

    /// Schema 3 reads as it is: schema 4 only allows one more source. Schema 2 reads with
    /// the fields it lacks inferred: the outcome from the download and the status, the
    /// rate's source from the comparisons (a rate from dates reads as from comparisons).
    /// Schema 1 reads into schema 2's fields likewise.
    fn read_earlier(framed: &Framed<'_>, bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let payload_error = |reason: String| EnvelopeError::Payload { name: Self::NAME, reason };
        if framed.version == 3 {
            return decode_as(framed, bytes);
        }
        if framed.version == 2 {
            let body = match framed.framing {
                Framing::PlainJson => bytes,
                Framing::Envelope(_) => bytes.get(HEADER_LEN..).unwrap_or_default(),
            };
            let mut value: serde_json::Value =
                serde_json::from_slice(body).map_err(|e| payload_error(e.to_string()))?;
            let object = value.as_object_mut().ok_or_else(|| payload_error("not an object".to_owned()))?;
            let comparisons = object.get("comparisons").and_then(serde_json::Value::as_u64).unwrap_or(0);
            let source =
                if comparisons > 0 { ChangeRateSource::Comparisons } else { ChangeRateSource::Prior };
            object.insert("change_rate_source".to_owned(), serde_json::json!(source));
            if let Some(last) = object.get_mut("last_request").and_then(serde_json::Value::as_object_mut) {
                let downloaded = last.get("downloaded").and_then(serde_json::Value::as_bool).unwrap_or(false);
                let status = last.get("http_status").and_then(serde_json::Value::as_u64);
                let status = status.and_then(|status| u16::try_from(status).ok());
                last.insert(
                    "outcome".to_owned(),
                    serde_json::json!(FetchOutcome::inferred(downloaded, status)),
                );
            }
            return serde_json::from_value(value).map_err(|e| payload_error(e.to_string()));
        }
        let old: v1::PageEstimate = decode_as(framed, bytes)?;
        let group = |name: &str| name.parse::<FrequencyGroup>().map_err(|e| payload_error(e.to_string()));
        let (last, plan) = (old.last_request, old.refresh);
        Ok(Self {
            page: PageRef::from_v1(old.url, old.url_key, old.host),
            group: old.group,
            period: old.period,
            last_request: LastRequest {
                period: last.period,
                downloaded: last.downloaded,
                changed: last.changed,
                size_bytes: last.size_bytes,
                size_change_bytes: last.update_size,
                latency_ms: last.latency_ms,
                fetched_at: UtcTime::from_ms(last.fetched_at_ms),
                fetched_at_ms: last.fetched_at_ms,
                outcome: FetchOutcome::inferred(last.downloaded, last.http_status),
                http_status: last.http_status,
                crawl_delay_ms: last.crawl_delay_ms,
                etag: last.etag,
                last_modified: last.last_modified,
            },
            crawls: old.crawls,
            first_request_period: old.first_request_period,
            requests: old.requests,
            successes: old.successes,
            failures: old.failures,
            comparisons: old.comparisons,
            changes: old.changes,
            request_rate: old.request_rate,
            download_rate: old.download_rate,
            download_recall: old.download_recall,
            modification_rate: old.modification_rate,
            change_recall: old.change_recall,
            download_eligible: old.download_eligible,
            change_eligible: old.change_eligible,
            model: old.model,
            downloads: old.downloads,
            changes_forecast: old.changes_forecast,
            change_rate: old.change_rate,
            refresh: RefreshPlan {
                weekly_change_rate: plan.weekly_change_rate,
                group16: group(&plan.group16)?,
                group6: group(&plan.group6)?,
                crawls_per_week: plan.crawls_per_week,
                paper_hour: plan.paper_hour,
                weekdays: plan.weekdays,
                min_wait_hour: plan.min_wait_hour,
                min_wait_slot: plan.min_wait_slot,
            },
            change_rate_low: old.change_rate_low,
            change_rate_high: old.change_rate_high,
            change_rate_prior_mean: old.change_rate_prior_mean,
            change_rate_prior_urls: old.change_rate_prior_urls,
            change_rate_source: if old.comparisons > 0 {
                ChangeRateSource::Comparisons
            } else {
                ChangeRateSource::Prior
            },
        })
    }
}
