//! Schema 1's shapes of the messages people read, kept so that a reader of schema 2 still
//! reads the records already on a topic (plain JSON, or schema 1's envelope before a JSON
//! or bincode body). Their JSON Schemas are frozen under `schemas/json/v1/`; each type
//! becomes its schema 2 counterpart in that type's `Message::read_earlier`. Do not change
//! them: bincode bodies are positional. The nested types both schemas share
//! (`ChangeDegrees`, `FetchOutcome`, `Forecast`, `ForecastModel`) are imported, not
//! copied: a change to one of them is a change to schema 1 too, which the golden v1
//! fixtures (`catalogue::tests::golden_fixtures_decode`) catch.

use serde::{Deserialize, Serialize};

use crate::envelope::{Format, Message};
use crate::messages::change::ChangeDegrees;
use crate::messages::estimate::{Forecast, ForecastModel};
use crate::messages::fetch::FetchOutcome;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DiscoveredLinks {
    pub url: String,
    pub url_key: String,
    pub host: String,
    pub source_url: Option<String>,
    pub source_key: Option<String>,
    pub occurrences: u32,
    pub period: u64,
    pub depth: u32,
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChangeEvent {
    pub url: String,
    pub url_key: String,
    pub host: String,
    pub group: String,
    pub period: u64,
    pub downloaded: bool,
    pub outcome: FetchOutcome,
    pub http_status: Option<u16>,
    pub latency_ms: f64,
    pub size_bytes: u64,
    pub previous_size_bytes: Option<u64>,
    pub update_size: Option<i64>,
    pub first_seen: bool,
    pub changed: Option<bool>,
    pub text_changed: Option<bool>,
    pub content_hash: Option<String>,
    pub previous_content_hash: Option<String>,
    pub text_hash: Option<String>,
    pub encoding: Option<String>,
    pub words: Option<u64>,
    pub previous_words: Option<u64>,
    pub degrees: Option<ChangeDegrees>,
    pub fetched_at_ms: i64,
    pub crawl_delay_ms: Option<u64>,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LastRequest {
    pub period: u64,
    pub downloaded: bool,
    pub changed: Option<bool>,
    pub size_bytes: u64,
    pub update_size: Option<i64>,
    pub latency_ms: f64,
    pub fetched_at_ms: i64,
    pub http_status: Option<u16>,
    pub crawl_delay_ms: Option<u64>,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RefreshPlan {
    pub weekly_change_rate: f64,
    pub group16: String,
    pub group6: String,
    pub crawls_per_week: f64,
    pub paper_hour: Option<u8>,
    pub weekdays: Vec<u8>,
    pub min_wait_hour: Option<u8>,
    pub min_wait_slot: Option<u8>,
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PageEstimate {
    pub url: String,
    pub url_key: String,
    pub host: String,
    pub group: String,
    pub period: u64,
    pub last_request: LastRequest,
    pub crawls: u64,
    pub first_request_period: u64,
    pub requests: u64,
    pub successes: u64,
    pub failures: u64,
    pub comparisons: u64,
    pub changes: u64,
    pub request_rate: Option<f64>,
    pub download_rate: Option<f64>,
    pub download_recall: Option<f64>,
    pub modification_rate: Option<f64>,
    pub change_recall: Option<f64>,
    pub download_eligible: bool,
    pub change_eligible: bool,
    pub model: ForecastModel,
    pub downloads: Forecast,
    pub changes_forecast: Forecast,
    pub change_rate: Option<f64>,
    pub refresh: RefreshPlan,
    pub change_rate_low: Option<f64>,
    pub change_rate_high: Option<f64>,
    pub change_rate_prior_mean: Option<f64>,
    pub change_rate_prior_urls: Option<u64>,
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GroupDistribution {
    pub group: String,
    pub partition: i32,
    pub period: u64,
    pub first_period: u64,
    pub urls: u64,
    pub requests: u64,
    pub download_rate_bins: [u64; 12],
    pub modification_rate_bins: [u64; 12],
    pub download_rate_fine: Vec<u64>,
    pub modification_rate_fine: Vec<u64>,
    pub published_at_ms: i64,
}

macro_rules! schema_1 {
    ($($name:ident),* $(,)?) => {$(
        impl Message for $name {
            const NAME: &'static str = stringify!($name);
            const FORMAT: Format = Format::Json;
        }
    )*};
}

schema_1!(DiscoveredLinks, ChangeEvent, GroupDistribution);

impl Message for PageEstimate {
    const NAME: &'static str = "PageEstimate";
    const FORMAT: Format = Format::Json;
    /// `change_rate_low` … `change_rate_prior_urls`, added at the end of schema 1.
    const ADDED_TRAILING_OPTIONS: usize = 4;
}
