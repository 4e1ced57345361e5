//! What changed between two versions of a page: topic `change-events`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bounds;
use super::fetch::FetchOutcome;
use super::page::PageRef;
use crate::envelope::{decode_as, EnvelopeError, Format, Framed, Message};
use crate::time::UtcTime;
use crate::v1;
use crate::validation::ValidationError;

/// How many of each IED edit operation turned the old word sequence into the new one
/// (`docs/algorithms/change-degree.md` §3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IedOps {
    /// Words inserted that did not occur in the old version (cost 1 each).
    pub add: u64,
    /// Words inserted that already occurred (cost s each).
    pub copy: u64,
    /// Words deleted that no longer occur (cost 1 each).
    pub drop: u64,
    /// Words deleted that still occur elsewhere (cost s each).
    pub shrink: u64,
    /// Words replaced by another at the same position (cost 1 each).
    pub replace: u64,
    /// Words that changed position (cost t each).
    #[serde(rename = "move")]
    pub moves: u64,
}

/// Degrees of change between the previous and the current download, each in [0, 1]
/// (0 identical, 1 completely different), as `docs/algorithms/change-degree.md` defines them. All but
/// BW compare the word sequences of the visible text; a metric switched off in the stage's
/// configuration is null.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChangeDegrees {
    /// Byte-wise: 0 when the raw bodies are identical (equal xxh3-128), else 1.
    pub bw: f64,
    /// TF·IDF cosine distance, IDF from the documents the diff instance holds.
    pub cos: Option<f64>,
    /// Word distance: 1 − 2·|common words| / (m + n), a multiset intersection.
    pub wd: Option<f64>,
    /// Edit distance on words: insertions plus deletions over m + n.
    pub ed: Option<f64>,
    /// k-word shingling: Jaccard distance of the sets of k-word windows (wrapping).
    pub sh: Option<f64>,
    /// The window length k of `sh`.
    pub sh_k: Option<u32>,
    /// The improved edit distance: `ied_cost` / max(m, n), capped at 1 (the steps can cost
    /// more than max(m, n) on short, heavily rewritten documents).
    pub ied: f64,
    /// δ_E, the weighted cost of `ied_ops`.
    pub ied_cost: f64,
    /// The operations IED found.
    pub ied_ops: IedOps,
    /// IED's copy and shrink cost s.
    pub ied_s: f64,
    /// IED's move cost t.
    pub ied_t: f64,
    /// True when a version had more words than the stage compares and only part of them
    /// were: the first `--max-words`, sampled past `--max-kept-words`.
    pub truncated: bool,
}

/// One request's effect on a page's stored copy. Topic `change-events` (JSON), keyed by
/// URL. Every request produces one, including failed ones (`downloaded: false`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChangeEvent {
    /// The requested page.
    pub page: PageRef,
    /// The period of the request.
    pub period: u64,
    /// True when the request returned a usable body (2xx, or 304 Not Modified).
    pub downloaded: bool,
    /// What came of the request.
    pub outcome: FetchOutcome,
    /// The final HTTP status, when the server answered.
    pub http_status: Option<u16>,
    /// Fetch wall time in milliseconds, for the scheduler's server response times.
    pub latency_ms: f64,
    /// Body size in bytes of this download (a 304's is the stored copy's); 0 when not
    /// downloaded.
    pub size_bytes: u64,
    /// Body size in bytes of the previous download; null when there is none.
    pub previous_size_bytes: Option<u64>,
    /// `size_bytes` − `previous_size_bytes` when this request is a download compared with
    /// a previous one; else null.
    pub size_change_bytes: Option<i64>,
    /// True on the first download of the URL the diff stage has seen: nothing to compare
    /// with, so `changed` and `degrees` are null.
    pub first_seen: bool,
    /// Whether the raw body differs from the previous download; null when this request is
    /// not a download or there is no previous download to compare with.
    pub changed: Option<bool>,
    /// Whether the visible text differs (markup-only edits leave it false); null as
    /// `changed`.
    pub text_changed: Option<bool>,
    /// xxh3-128 of the body, 32 hex digits; null when not downloaded.
    pub content_hash: Option<String>,
    /// xxh3-128 of the previous download's body; null when there is none.
    pub previous_content_hash: Option<String>,
    /// xxh3-64 of the visible text with whitespace normalised, 16 hex digits; null when
    /// not downloaded.
    pub text_hash: Option<String>,
    /// The character encoding the body was decoded with (WHATWG name); null when not
    /// downloaded or unchanged since the previous download (304).
    pub encoding: Option<String>,
    /// Words in the visible text of this download (a 304's: the stored copy's); null when
    /// not downloaded.
    pub words: Option<u64>,
    /// Words in the previous download's visible text; null when there is none.
    pub previous_words: Option<u64>,
    /// Degrees of change; null unless `changed` is non-null.
    pub degrees: Option<ChangeDegrees>,
    /// When the request finished.
    pub fetched_at: UtcTime,
    /// `fetched_at` in Unix milliseconds.
    pub fetched_at_ms: i64,
    /// The host's robots.txt Crawl-delay, when the fetcher knew one.
    pub crawl_delay_ms: Option<u64>,
    /// The `ETag` of this answer (a 304 may omit it; then the stored copy's still holds).
    pub etag: Option<String>,
    /// The `Last-Modified` of this answer, as `etag`.
    pub last_modified: Option<String>,
}

/// What a request did, for [`ChangeEvent::request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestOutcome {
    pub period: u64,
    pub downloaded: bool,
    /// Whether the body changed since the previous download; `None` for none to compare.
    pub changed: Option<bool>,
    pub fetched_at_ms: i64,
}

impl ChangeEvent {
    /// An event with a request's outcome and nothing of the content (no hashes, words or
    /// degrees): all the estimator reads, and how tests and benches build its input.
    pub fn request(url: &str, host: &str, outcome: RequestOutcome) -> Self {
        let RequestOutcome { period, downloaded, changed, fetched_at_ms } = outcome;
        Self {
            page: PageRef::new(url, host),
            period,
            downloaded,
            outcome: if downloaded { FetchOutcome::Downloaded } else { FetchOutcome::HttpStatus },
            http_status: Some(if downloaded { 200 } else { 503 }),
            latency_ms: 0.0,
            size_bytes: 0,
            previous_size_bytes: None,
            size_change_bytes: None,
            first_seen: downloaded && changed.is_none(),
            changed,
            text_changed: changed,
            content_hash: None,
            previous_content_hash: None,
            text_hash: None,
            encoding: None,
            words: None,
            previous_words: None,
            degrees: None,
            fetched_at: UtcTime::from_ms(fetched_at_ms),
            fetched_at_ms,
            crawl_delay_ms: None,
            etag: None,
            last_modified: None,
        }
    }
}

impl Message for ChangeEvent {
    const NAME: &'static str = "ChangeEvent";
    const FORMAT: Format = Format::Json;
    const VERSION: u16 = 2;

    fn validate(&self) -> Result<(), ValidationError> {
        self.page.validate("page")?;
        bounds::period(self.period)?;
        // Only a download is compared, and a first one with nothing: a comparison on
        // anything else would be learned as a change, or a quiet spell, never seen.
        let compared = self.changed.is_some();
        if (compared || self.first_seen) && !self.downloaded {
            return Err(ValidationError::Contradiction(
                "changed or first_seen is set on a request that did not download",
            ));
        }
        if compared && self.first_seen {
            return Err(ValidationError::Contradiction(
                "changed is set on a first download, which has nothing to compare with",
            ));
        }
        if !compared && (self.text_changed.is_some() || self.degrees.is_some()) {
            return Err(ValidationError::Contradiction(
                "text_changed or degrees is set where changed is null",
            ));
        }
        bounds::instant("fetched_at", self.fetched_at, self.fetched_at_ms)?;
        bounds::duration_ms("latency_ms", self.latency_ms)?;
        bounds::size_bytes("size_bytes", self.size_bytes)?;
        self.previous_size_bytes.map_or(Ok(()), |size| bounds::size_bytes("previous_size_bytes", size))?;
        if let Some(d) = &self.degrees {
            // JSON has no NaN: every number must be finite to be written as it was read.
            for (name, value) in [
                ("bw", d.bw),
                ("ied", d.ied),
                ("ied_cost", d.ied_cost),
                ("ied_s", d.ied_s),
                ("ied_t", d.ied_t),
            ]
            .into_iter()
            .chain(
                [("cos", d.cos), ("wd", d.wd), ("ed", d.ed), ("sh", d.sh)]
                    .into_iter()
                    .filter_map(|(n, v)| Some((n, v?))),
            ) {
                bounds::non_negative(&format!("degrees.{name}"), value)?;
            }
        }
        bounds::header("etag", self.etag.as_deref())?;
        bounds::header("last_modified", self.last_modified.as_deref())
    }

    fn read_earlier(framed: &Framed<'_>, bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let v1::ChangeEvent {
            url,
            url_key,
            host,
            group: _,
            period,
            downloaded,
            outcome,
            http_status,
            latency_ms,
            size_bytes,
            previous_size_bytes,
            update_size,
            first_seen,
            changed,
            text_changed,
            content_hash,
            previous_content_hash,
            text_hash,
            encoding,
            words,
            previous_words,
            degrees,
            fetched_at_ms,
            crawl_delay_ms,
            etag,
            last_modified,
        } = decode_as(framed, bytes)?;
        Ok(Self {
            page: PageRef::from_v1(url, url_key, host),
            period,
            downloaded,
            outcome,
            http_status,
            latency_ms,
            size_bytes,
            previous_size_bytes,
            size_change_bytes: update_size,
            first_seen,
            changed,
            text_changed,
            content_hash,
            previous_content_hash,
            text_hash,
            encoding,
            words,
            previous_words,
            degrees,
            fetched_at: UtcTime::from_ms(fetched_at_ms),
            fetched_at_ms,
            crawl_delay_ms,
            etag,
            last_modified,
        })
    }
}
