//! The scheduler's picks: topic `fetch`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bounds;
use crate::envelope::{Format, Message};
use crate::validation::ValidationError;

/// Why the scheduler picked a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PickReason {
    /// The URL was fetched before; picked to refresh the stored copy.
    Refresh,
    /// The URL has never been fetched; picked from the discovery frontier.
    Discovery,
}

/// A URL the scheduler chose for one period. Topic `fetch`, keyed by host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PagePick {
    /// The normalised absolute URL to fetch.
    pub url: String,
    /// xxh3-64 of `url`, 16 hex digits.
    pub url_key: String,
    /// Host (with port when not the default) of `url`; the topic key.
    pub host: String,
    /// The host again: schema 1's seed label, read by no stage since schema 2 of the
    /// public messages.
    pub group: String,
    /// The scheduling period this pick belongs to.
    pub period: u64,
    /// Refresh of a known page, or discovery of a new one.
    pub reason: PickReason,
    /// Links followed from a seed to reach the URL (0 for a seed).
    pub depth: u32,
    /// The score that ranked the pick under the scheduler's policy (higher first); for
    /// `paper`, (T − t)·s − W·p·g in periods; for a discovery, the URL's in-degree (0
    /// breadth first).
    pub score: f64,
    /// The stored copy's `ETag`, sent as `If-None-Match` so an unchanged page costs a 304.
    pub etag: Option<String>,
    /// The stored copy's `Last-Modified`, sent as `If-Modified-Since`.
    pub last_modified: Option<String>,
    /// When the pick's period ends, Unix milliseconds: a pick the fetcher cannot start by
    /// then (politeness, Retry-After) is reported `deferred`. Null: no deadline.
    pub deadline_ms: Option<i64>,
}

impl PagePick {
    /// A first pick of `url` (normalised) for `period`: no validators, no deadline.
    pub fn discovery(url: &str, period: u64) -> Result<Self, crate::UrlError> {
        Ok(Self {
            url_key: crate::url_key(url),
            host: crate::host_of(url)?,
            group: String::new(),
            period,
            reason: PickReason::Discovery,
            depth: 0,
            score: 0.0,
            etag: None,
            last_modified: None,
            deadline_ms: None,
            url: url.to_owned(),
        })
    }
}

impl Message for PagePick {
    const NAME: &'static str = "PagePick";
    const FORMAT: Format = Format::Bincode;

    fn validate(&self) -> Result<(), ValidationError> {
        bounds::identity(&self.url, &self.url_key, &self.host, self.period)?;
        bounds::header("etag", self.etag.as_deref())?;
        bounds::header("last_modified", self.last_modified.as_deref())?;
        bounds::finite("score", self.score)
    }
}
