//! One type per Kafka message. Field documentation here becomes the `description` of the
//! generated JSON Schemas, so it is written for the analysts who read those.
//!
//! Internal messages (bincode) are positional: never reorder their fields, and bump their
//! [`Message::VERSION`] on any change. The messages people read (JSON) are at schema 2;
//! The private module `v1` keeps schema 1's shapes so that records already on a topic stay readable.
//! No `skip_serializing_if` or `flatten`: every field is always written.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::envelope::{decode_as, EnvelopeError, Format, Framed, Framing, Message, HEADER_LEN};
use crate::frequency::FrequencyGroup;
use crate::time::UtcTime;
use crate::v1;
use crate::validation::ValidationError;

/// Which page a message is about: its identity, carried once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PageRef {
    /// The normalised absolute URL.
    pub url: String,
    /// xxh3-64 of `url`, 16 hex digits: the key to join topics on.
    pub key: String,
    /// Host of `url`, with the port when it is not the scheme's default.
    pub host: String,
    /// The registered domain of `host` (public suffix + 1: `news.example.co.kr` →
    /// `example.co.kr`); the address itself for an IP host.
    pub site: String,
}

impl PageRef {
    /// The identity of `url` (normalised), whose host is `host`.
    pub fn new(url: &str, host: &str) -> Self {
        Self {
            url: url.to_owned(),
            key: crate::url_key(url),
            host: host.to_owned(),
            site: crate::site_of(host).to_owned(),
        }
    }

    /// The identity of `url` (normalised), its host read from it.
    pub fn of_url(url: &str) -> Result<Self, crate::UrlError> {
        Ok(Self::new(url, &crate::host_of(url)?))
    }

    /// From schema 1's fields, keeping the key it carried.
    pub(crate) fn from_v1(url: String, key: String, host: String) -> Self {
        let site = crate::site_of(&host).to_owned();
        Self { url, key, host, site }
    }

    /// Checks the identity `name` (`page`, `source`) holds; the error names the field.
    pub fn validate(&self, name: &str) -> Result<(), ValidationError> {
        bounds::text(&format!("{name}.url"), &self.url, bounds::MAX_URL_BYTES)?;
        bounds::text(&format!("{name}.key"), &self.key, bounds::MAX_URL_BYTES)?;
        if self.host.is_empty() {
            return Err(ValidationError::Empty { field: format!("{name}.host") });
        }
        bounds::text(&format!("{name}.host"), &self.host, bounds::MAX_HOST_BYTES)?;
        // The scheduler caps and spaces requests per host: a page filed under another
        // host than its URL's would escape its own host's, and be filed elsewhere again
        // when the state is restored from the URLs.
        match crate::host_of(&self.url) {
            Ok(host) if host == self.host => {}
            Ok(host) => {
                return Err(ValidationError::HostMismatch {
                    field: format!("{name}.host"),
                    host: self.host.clone(),
                    url_field: format!("{name}.url"),
                    url_host: host,
                })
            }
            Err(source) => return Err(ValidationError::Url { field: format!("{name}.url"), source }),
        }
        // Readers group by the site: it must be the host's, whoever produced the record.
        let site = crate::site_of(&self.host);
        if self.site != site {
            return Err(ValidationError::SiteMismatch {
                field: format!("{name}.site"),
                site: self.site.clone(),
                host: self.host.clone(),
                host_site: site.to_owned(),
            });
        }
        Ok(())
    }
}

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

/// What came of one pick. Every outcome but `robots_denied` and `deferred` counts as a
/// request to the site (`docs/algorithms/estimator.md` §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FetchOutcome {
    /// HTTP 2xx with a body within the size cap.
    Downloaded,
    /// HTTP 304 to a conditional request: a download whose content equals the stored copy.
    NotModified,
    /// HTTP 2xx whose content type is outside the fetcher's allow-list: a download whose
    /// body was not transferred, so its content cannot be compared.
    UnsupportedType,
    /// The server answered with a status that is not 2xx or 304 (`http_status` says which).
    HttpStatus,
    /// No complete answer within the request timeout.
    Timeout,
    /// The host name could not be resolved.
    Dns,
    /// No connection could be made (refused, unreachable, connect timeout).
    Connect,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
    /// More redirects than the fetcher follows, or a redirect loop.
    TooManyRedirects,
    /// The body exceeded the fetcher's size cap; `size_bytes` says how far it got.
    BodyTooLarge,
    /// The host, or a redirect target, resolves to an address the fetcher refuses
    /// (loopback, private, link-local, metadata, …) and the allow-list does not name.
    BlockedAddress,
    /// Any other failure; `error` says what.
    Other,
    /// robots.txt disallows the URL or a redirect target of it (or is unavailable). Not
    /// counted as a request, even where a redirect before it had reached the site.
    RobotsDenied,
    /// The fetcher could not make the request, or follow one of its redirects, in time
    /// (politeness delay, Crawl-delay, Retry-After, or the stage stopping). The delay was
    /// the fetcher's, so the pick does not count as a request, even where a redirect
    /// before it had reached the site.
    Deferred,
}

impl FetchOutcome {
    pub const ALL: [Self; 14] = [
        Self::Downloaded,
        Self::NotModified,
        Self::UnsupportedType,
        Self::HttpStatus,
        Self::Timeout,
        Self::Dns,
        Self::Connect,
        Self::Tls,
        Self::TooManyRedirects,
        Self::BodyTooLarge,
        Self::BlockedAddress,
        Self::Other,
        Self::RobotsDenied,
        Self::Deferred,
    ];

    /// A download in the sense of the estimator: the server delivered the page (2xx or 304).
    pub fn is_download(self) -> bool {
        matches!(self, Self::Downloaded | Self::NotModified | Self::UnsupportedType)
    }

    /// Whether a request was made; the estimator's histories count only requests.
    pub fn is_request(self) -> bool {
        !matches!(self, Self::RobotsDenied | Self::Deferred)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Downloaded => "downloaded",
            Self::NotModified => "not_modified",
            Self::UnsupportedType => "unsupported_type",
            Self::HttpStatus => "http_status",
            Self::Timeout => "timeout",
            Self::Dns => "dns",
            Self::Connect => "connect",
            Self::Tls => "tls",
            Self::TooManyRedirects => "too_many_redirects",
            Self::BodyTooLarge => "body_too_large",
            Self::BlockedAddress => "blocked_address",
            Self::Other => "other",
            Self::RobotsDenied => "robots_denied",
            Self::Deferred => "deferred",
        }
    }
}

/// The outcome of fetching one pick. Topic `fetch-results`, keyed by URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FetchResult {
    /// The URL that was picked (normalised).
    pub url: String,
    /// xxh3-64 of `url`, 16 hex digits.
    pub url_key: String,
    /// Host of `url`.
    pub host: String,
    /// The pick's `group`, copied; read by no stage since schema 2.
    pub group: String,
    /// The period of the pick this result answers.
    pub period: u64,
    /// What came of the request.
    pub outcome: FetchOutcome,
    /// The final HTTP status, when the server answered.
    pub http_status: Option<u16>,
    /// Wall time from sending the request to the end of the body, milliseconds.
    pub latency_ms: f64,
    /// Body length in bytes (0 when there is no body).
    pub size_bytes: u64,
    /// The body as received (empty unless `outcome` is `downloaded`).
    #[serde(with = "serde_bytes")]
    #[schemars(with = "Vec<u8>")]
    pub body: Vec<u8>,
    /// The `Content-Type` response header.
    pub content_type: Option<String>,
    /// The `ETag` response header.
    pub etag: Option<String>,
    /// The `Last-Modified` response header.
    pub last_modified: Option<String>,
    /// The URL after redirects, when it differs from `url`.
    pub final_url: Option<String>,
    /// A human-readable reason for a failed request.
    pub error: Option<String>,
    /// When the request finished, Unix milliseconds.
    pub fetched_at_ms: i64,
    /// Depth of the pick, copied so the page's links can carry depth + 1.
    pub depth: u32,
    /// The host's robots.txt Crawl-delay, when the fetcher knows one.
    pub crawl_delay_ms: Option<u64>,
    /// Every redirect target followed, in order; the last is `final_url`.
    pub redirects: Vec<String>,
    /// The server's `Retry-After` with a 429 or 503, in milliseconds from the answer.
    pub retry_after_ms: Option<u64>,
    /// The last request and its answer as they went over the wire, for the archive's WARC
    /// records: present whenever the server answered (schema 2 on).
    pub exchange: Option<HttpExchange>,
}

/// One HTTP header: its name and its value's bytes (a value need not be UTF-8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HttpHeader {
    pub name: String,
    #[serde(with = "serde_bytes")]
    #[schemars(with = "Vec<u8>")]
    pub value: Vec<u8>,
}

/// A fetch's last request (the one that got the final answer, after redirects) and the
/// answer's status line and headers, bounded: each side keeps its headers in order until
/// [`bounds::MAX_EXCHANGE_HEADERS`] of them or [`bounds::MAX_EXCHANGE_HEADER_BYTES`],
/// leaves out a value past [`bounds::MAX_HEADER_BYTES`], and counts what it left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HttpExchange {
    /// The request method (`GET`).
    pub method: String,
    /// The request target as the request line carried it: path and query (origin form).
    pub target: String,
    /// The HTTP version of the request and its answer (`HTTP/1.1`).
    pub http_version: String,
    /// The request's headers as the fetcher sent them, `Host` first.
    pub request_headers: Vec<HttpHeader>,
    /// The answer's status line reason phrase (`OK`), empty when unknown.
    pub reason: String,
    /// The answer's headers as the fetcher's HTTP client handed them over: a body it
    /// decoded (gzip, br, deflate) has lost its `Content-Encoding` and `Content-Length`.
    pub response_headers: Vec<HttpHeader>,
    /// Headers of either side left out by the bounds.
    pub headers_left_out: u32,
    /// The address the answer came from, where the client knows it.
    pub remote_ip: Option<String>,
}

impl HttpExchange {
    /// Checks the bounds the fetcher keeps to, and that every part is what an HTTP
    /// message's line can hold (no line break, no NUL: written out, one would end the
    /// line); the error names the field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        bounds::text("exchange.method", &self.method, bounds::MAX_HTTP_TOKEN_BYTES)?;
        bounds::text("exchange.target", &self.target, bounds::MAX_URL_BYTES)?;
        bounds::text("exchange.http_version", &self.http_version, bounds::MAX_HTTP_TOKEN_BYTES)?;
        bounds::text("exchange.reason", &self.reason, bounds::MAX_HEADER_BYTES)?;
        let parts = [("method", self.method.as_bytes()), ("target", self.target.as_bytes())]
            .into_iter()
            .chain([("http_version", self.http_version.as_bytes()), ("reason", self.reason.as_bytes())])
            .chain(self.request_headers.iter().chain(&self.response_headers).flat_map(|header| {
                [("a header name", header.name.as_bytes()), ("a header value", header.value.as_slice())]
            }));
        for (name, bytes) in parts {
            if bytes.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)) {
                return Err(ValidationError::LineBreak { part: name });
            }
        }
        if self
            .request_headers
            .iter()
            .chain(&self.response_headers)
            .any(|h| h.name.is_empty() || h.name.contains([':', ' ']))
        {
            return Err(ValidationError::Contradiction(
                "exchange: a header name is empty or holds ':' or a space",
            ));
        }
        bounds::headers("exchange.request_headers", &self.request_headers)?;
        bounds::headers("exchange.response_headers", &self.response_headers)?;
        if let Some(ip) = &self.remote_ip {
            ip.parse::<std::net::IpAddr>().map_err(|_| ValidationError::NotAnIp {
                field: "exchange.remote_ip".to_owned(),
                value: ip.clone(),
            })?;
        }
        Ok(())
    }
}

impl FetchResult {
    /// A 200 response carrying the UTF-8 HTML `body`, for a URL whose group is its host:
    /// how tests and benches build the diff stage's input.
    pub fn html_page(url: &str, host: &str, period: u64, body: impl Into<Vec<u8>>) -> Self {
        let body = body.into();
        Self {
            url: url.to_owned(),
            url_key: crate::url_key(url),
            host: host.to_owned(),
            group: host.to_owned(),
            period,
            outcome: FetchOutcome::Downloaded,
            http_status: Some(200),
            latency_ms: 0.0,
            size_bytes: body.len() as u64,
            body,
            content_type: Some("text/html; charset=utf-8".into()),
            etag: None,
            last_modified: None,
            final_url: None,
            error: None,
            fetched_at_ms: 0,
            depth: 0,
            crawl_delay_ms: None,
            redirects: Vec::new(),
            retry_after_ms: None,
            exchange: None,
        }
    }
}

impl Message for FetchResult {
    const NAME: &'static str = "FetchResult";
    const FORMAT: Format = Format::Bincode;
    /// 2: `exchange`, the request and answer as they went, for the archive.
    const VERSION: u16 = 2;
    /// Version 1 ends before `exchange`, the last field.
    const ADDED_TRAILING_OPTIONS: usize = 1;

    fn validate(&self) -> Result<(), ValidationError> {
        bounds::identity(&self.url, &self.url_key, &self.host, self.period)?;
        bounds::time_ms("fetched_at_ms", self.fetched_at_ms)?;
        bounds::duration_ms("latency_ms", self.latency_ms)?;
        bounds::size_bytes("size_bytes", self.size_bytes)?;
        for (name, header) in [
            ("content_type", &self.content_type),
            ("etag", &self.etag),
            ("last_modified", &self.last_modified),
        ] {
            bounds::header(name, header.as_deref())?;
        }
        for text in [&self.final_url, &self.error] {
            bounds::optional_text("a URL or error", text.as_deref())?;
        }
        if let Some(final_url) = &self.final_url {
            bounds::no_credentials("final_url", final_url)?;
        }
        bounds::count("redirects", self.redirects.len(), bounds::MAX_REDIRECTS)?;
        self.redirects.iter().try_for_each(|url| {
            bounds::text("a redirect", url, bounds::MAX_URL_BYTES)?;
            bounds::no_credentials("a redirect", url)
        })?;
        self.exchange.as_ref().map_or(Ok(()), HttpExchange::validate)
    }

    fn read_earlier(framed: &Framed<'_>, bytes: &[u8]) -> Result<Self, EnvelopeError> {
        decode_as(framed, bytes)
    }
}

/// A link found on a fetched page. Topic `links`, keyed by the linked URL so that the
/// scheduler instance owning that URL counts its in-degree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiscoveredLinks {
    /// The linked page (its URL normalised, fragment dropped).
    pub page: PageRef,
    /// The page the link was found on; null for a seed URL.
    pub source: Option<PageRef>,
    /// How many times the source page links to `page`.
    pub occurrences: u32,
    /// The period in which the source page was fetched (or the seed was loaded).
    pub period: u64,
    /// Links followed from a seed to reach `page`: the source's depth + 1, 0 for a seed.
    pub depth: u32,
}

impl Message for DiscoveredLinks {
    const NAME: &'static str = "DiscoveredLinks";
    const FORMAT: Format = Format::Json;
    const VERSION: u16 = 2;

    fn validate(&self) -> Result<(), ValidationError> {
        self.page.validate("page")?;
        self.source.as_ref().map_or(Ok(()), |source| source.validate("source"))?;
        bounds::period(self.period)
    }

    fn read_earlier(framed: &Framed<'_>, bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let v1::DiscoveredLinks { url, url_key, host, source_url, source_key, occurrences, period, depth } =
            decode_as(framed, bytes)?;
        let source = source_url
            .map(|url| {
                let key = source_key.unwrap_or_else(|| crate::url_key(&url));
                let host = crate::host_of(&url).map_err(|e| EnvelopeError::Payload {
                    name: Self::NAME,
                    reason: format!("source_url: {e}"),
                })?;
                Ok(PageRef::from_v1(url, key, host))
            })
            .transpose()?;
        Ok(Self { page: PageRef::from_v1(url, url_key, host), source, occurrences, period, depth })
    }
}

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
}

impl ChangeRateSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prior => "prior",
            Self::Comparisons => "comparisons",
            Self::Dates => "dates",
        }
    }
}

impl FetchOutcome {
    /// How a request that did not say (an estimate of schema 2 or earlier, what the
    /// estimator keeps of a request to revise its estimate) most likely ended: a download
    /// or a 304, else an HTTP status, else `other`.
    pub fn inferred(downloaded: bool, http_status: Option<u16>) -> Self {
        match (downloaded, http_status) {
            (true, Some(304)) => Self::NotModified,
            (true, _) => Self::Downloaded,
            (false, Some(_)) => Self::HttpStatus,
            (false, None) => Self::Other,
        }
    }
}

impl Message for PageEstimate {
    const NAME: &'static str = "PageEstimate";
    const FORMAT: Format = Format::Json;
    /// 3: `last_request.outcome` and `change_rate_source`.
    const VERSION: u16 = 3;

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

    /// Schema 2 reads with the fields it lacks inferred: the outcome from the download and
    /// the status, the rate's source from the comparisons (a rate from dates reads as from
    /// comparisons). Schema 1 reads into schema 2's fields likewise.
    fn read_earlier(framed: &Framed<'_>, bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let payload_error = |reason: String| EnvelopeError::Payload { name: Self::NAME, reason };
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

/// One estimator partition's share of a group's DR and MR distributions
/// (`docs/algorithms/estimator.md` §3). Topic `distributions` (JSON, compacted), keyed by
/// `group/partition`; a group's distribution is the sum of the latest record of every
/// partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GroupDistribution {
    /// The group.
    pub group: String,
    /// The change-events partition whose URLs these counts cover.
    pub partition: i32,
    /// The latest period applied to these URLs: the counts cover requests up to it.
    pub period: u64,
    /// The earliest first-request period among these URLs (the group's crawl count K
    /// runs from the minimum over partitions).
    pub first_period: u64,
    /// URLs of the group in the partition.
    pub urls: u64,
    /// Requests applied to them; grows with every applied request, so a reader keeps
    /// the record with the most.
    pub requests: u64,
    /// Eligible URLs per DR bin: {0}, 0.01–0.09, 0.10–0.19, …, 0.90–0.99, {1}.
    pub download_rate_bins: [u64; 12],
    /// Eligible URLs per MR bin, the same 12 bins.
    pub modification_rate_bins: [u64; 12],
    /// Eligible URLs per DR percentage point 0…100 (101 numbers).
    pub download_rate_fine: Vec<u64>,
    /// Eligible URLs per MR percentage point 0…100 (101 numbers).
    pub modification_rate_fine: Vec<u64>,
    /// When the record was produced.
    pub published_at: UtcTime,
    /// `published_at` in Unix milliseconds.
    pub published_at_ms: i64,
}

impl Message for GroupDistribution {
    const NAME: &'static str = "GroupDistribution";
    const FORMAT: Format = Format::Json;
    const VERSION: u16 = 2;

    /// Every instance sums these over partitions: bounded counts keep the sums in range.
    fn validate(&self) -> Result<(), ValidationError> {
        // A host or a site, as an estimate's group: every instance keeps each one it reads.
        bounds::text("group", &self.group, bounds::MAX_HOST_BYTES)?;
        if !(0..=bounds::MAX_PARTITION).contains(&self.partition) {
            return Err(ValidationError::Partition { partition: self.partition, max: bounds::MAX_PARTITION });
        }
        bounds::period(self.period)?;
        // u64::MAX stands for "no URL yet".
        if self.urls > 0 {
            bounds::period(self.first_period)?;
        }
        bounds::tally("urls", self.urls)?;
        bounds::tally("requests", self.requests)?;
        for (name, bins) in [
            ("download_rate_bins", &self.download_rate_bins[..]),
            ("modification_rate_bins", &self.modification_rate_bins[..]),
            ("download_rate_fine", &self.download_rate_fine),
            ("modification_rate_fine", &self.modification_rate_fine),
        ] {
            bounds::count(name, bins.len(), FINE_RATE_BINS)?;
            bins.iter().try_for_each(|&count| bounds::tally(name, count))?;
        }
        bounds::instant("published_at", self.published_at, self.published_at_ms)
    }

    fn read_earlier(framed: &Framed<'_>, bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let v1::GroupDistribution {
            group,
            partition,
            period,
            first_period,
            urls,
            requests,
            download_rate_bins,
            modification_rate_bins,
            download_rate_fine,
            modification_rate_fine,
            published_at_ms,
        } = decode_as(framed, bytes)?;
        Ok(Self {
            group,
            partition,
            period,
            first_period,
            urls,
            requests,
            download_rate_bins,
            modification_rate_bins,
            download_rate_fine,
            modification_rate_fine,
            published_at: UtcTime::from_ms(published_at_ms),
            published_at_ms,
        })
    }
}

/// Percentage points 0…100 of the fine rate bins.
const FINE_RATE_BINS: usize = 101;

/// Fixed sample values: the golden fixtures and the envelope tests use them.
#[cfg(test)]
pub mod samples {
    use super::*;

    pub fn page_pick() -> PagePick {
        PagePick {
            url: "http://example.com/a.html".into(),
            url_key: crate::url_key("http://example.com/a.html"),
            host: "example.com".into(),
            group: "example.com".into(),
            period: 42,
            reason: PickReason::Refresh,
            depth: 3,
            score: 12.5,
            etag: Some("\"v1\"".into()),
            last_modified: Some("Wed, 21 Oct 2026 07:28:00 GMT".into()),
            deadline_ms: Some(1_780_000_060_000),
        }
    }

    pub fn fetch_result() -> FetchResult {
        FetchResult {
            url: "http://example.com/a.html".into(),
            url_key: crate::url_key("http://example.com/a.html"),
            host: "example.com".into(),
            group: "example.com".into(),
            period: 42,
            outcome: FetchOutcome::Downloaded,
            http_status: Some(200),
            latency_ms: 12.25,
            size_bytes: 11,
            body: b"<p>hello</p>"[..11].to_vec(),
            content_type: Some("text/html".into()),
            etag: Some("\"v1\"".into()),
            last_modified: None,
            final_url: None,
            error: None,
            fetched_at_ms: 1_780_000_000_000,
            depth: 3,
            crawl_delay_ms: Some(2_000),
            redirects: vec!["http://example.com/a.html?moved=1".into()],
            retry_after_ms: None,
            exchange: None,
        }
    }

    /// [`fetch_result`] as the fetcher writes it since schema 2: with its exchange.
    pub fn fetch_result_with_exchange() -> FetchResult {
        let header = |name: &str, value: &[u8]| HttpHeader { name: name.into(), value: value.to_vec() };
        FetchResult {
            exchange: Some(HttpExchange {
                method: "GET".into(),
                target: "/a.html?moved=1".into(),
                http_version: "HTTP/1.1".into(),
                request_headers: vec![header("host", b"example.com"), header("user-agent", b"recrawl/0.1")],
                reason: "OK".into(),
                response_headers: vec![header("content-type", b"text/html"), header("x-latin-1", b"caf\xe9")],
                headers_left_out: 1,
                remote_ip: Some("192.0.2.7".into()),
            }),
            ..fetch_result()
        }
    }

    pub fn discovered_links() -> DiscoveredLinks {
        DiscoveredLinks {
            page: PageRef::new("http://example.com/b.html", "example.com"),
            source: Some(PageRef::new("http://example.com/a.html", "example.com")),
            occurrences: 2,
            period: 42,
            depth: 4,
        }
    }

    pub fn change_event() -> ChangeEvent {
        ChangeEvent {
            page: PageRef::new("http://example.com/a.html", "example.com"),
            period: 42,
            downloaded: true,
            outcome: FetchOutcome::Downloaded,
            http_status: Some(200),
            latency_ms: 12.25,
            size_bytes: 11,
            previous_size_bytes: Some(14),
            size_change_bytes: Some(-3),
            first_seen: false,
            changed: Some(true),
            text_changed: Some(true),
            content_hash: Some("00112233445566778899aabbccddeeff".into()),
            previous_content_hash: Some("ffeeddccbbaa99887766554433221100".into()),
            text_hash: Some("0123456789abcdef".into()),
            encoding: Some("EUC-KR".into()),
            words: Some(10),
            previous_words: Some(9),
            degrees: Some(ChangeDegrees {
                bw: 1.0,
                cos: Some(0.125),
                wd: Some(0.25),
                ed: Some(0.375),
                sh: Some(0.5),
                sh_k: Some(10),
                ied: 0.57,
                ied_cost: 5.7,
                ied_ops: IedOps { add: 2, copy: 3, drop: 0, shrink: 4, replace: 0, moves: 1 },
                ied_s: 0.4,
                ied_t: 0.9,
                truncated: false,
            }),
            fetched_at: UtcTime::from_ms(1_780_000_000_000),
            fetched_at_ms: 1_780_000_000_000,
            crawl_delay_ms: Some(2_000),
            etag: Some("\"v2\"".into()),
            last_modified: None,
        }
    }

    pub fn page_estimate() -> PageEstimate {
        PageEstimate {
            page: PageRef::new("http://example.com/a.html", "example.com"),
            group: "example.com".into(),
            period: 42,
            last_request: LastRequest {
                period: 42,
                downloaded: true,
                outcome: FetchOutcome::Downloaded,
                changed: Some(false),
                size_bytes: 11,
                size_change_bytes: Some(0),
                latency_ms: 12.25,
                fetched_at: UtcTime::from_ms(1_780_000_000_000),
                fetched_at_ms: 1_780_000_000_000,
                http_status: Some(200),
                crawl_delay_ms: Some(2_000),
                etag: Some("\"v2\"".into()),
                last_modified: None,
            },
            crawls: 16,
            first_request_period: 27,
            requests: 12,
            successes: 9,
            failures: 3,
            comparisons: 8,
            changes: 2,
            request_rate: Some(0.75),
            download_rate: Some(0.75),
            download_recall: Some(0.75),
            modification_rate: Some(0.25),
            change_recall: Some(8.0 / 15.0),
            download_eligible: false,
            change_eligible: false,
            model: ForecastModel::Paper,
            downloads: Forecast {
                yes: 4,
                no: 1,
                probabilities: vec![0.0, 0.0, 0.0, 0.125, 0.375, 0.5],
                next: 0.875,
                prior: ForecastPrior::Group,
            },
            changes_forecast: Forecast {
                yes: 1,
                no: 4,
                probabilities: vec![1.0 / 6.0; 6],
                next: 0.5,
                prior: ForecastPrior::Uniform,
            },
            change_rate: Some(0.25),
            change_rate_low: None,
            change_rate_high: None,
            change_rate_prior_mean: None,
            change_rate_prior_urls: None,
            change_rate_source: ChangeRateSource::Comparisons,
            refresh: RefreshPlan {
                weekly_change_rate: 4.5,
                group16: FrequencyGroup::Weekly(5),
                group6: FrequencyGroup::Weekly(7),
                crawls_per_week: 7.0,
                paper_hour: Some(0),
                weekdays: vec![0, 1, 2, 3, 4, 5, 6],
                min_wait_hour: Some(15),
                min_wait_slot: Some(111),
            },
        }
    }

    pub fn group_distribution() -> GroupDistribution {
        let mut download_rate_fine = vec![0; 101];
        download_rate_fine[0] = 3;
        download_rate_fine[45] = 1;
        download_rate_fine[95] = 2;
        download_rate_fine[100] = 9;
        let mut modification_rate_fine = vec![0; 101];
        modification_rate_fine[0] = 4;
        modification_rate_fine[12] = 1;
        modification_rate_fine[100] = 6;
        GroupDistribution {
            group: "example.com".into(),
            partition: 2,
            period: 42,
            first_period: 27,
            urls: 17,
            requests: 200,
            download_rate_bins: [3, 0, 0, 0, 0, 1, 0, 0, 0, 0, 2, 9],
            modification_rate_bins: [4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 6],
            download_rate_fine,
            modification_rate_fine,
            published_at: UtcTime::from_ms(1_780_000_000_000),
            published_at_ms: 1_780_000_000_000,
        }
    }
}

/// Bounds on what a message from a topic may hold, checked before a stage uses it
/// ([`Message::validate`]): whatever the producer, a stage's arithmetic and memory stay
/// within these.
pub mod bounds {
    use crate::validation::ValidationError;

    /// Longest URL accepted anywhere (browsers and servers commonly stop near 8 KiB).
    pub const MAX_URL_BYTES: usize = 8 * 1024;
    /// Longest host name (DNS allows 253 characters).
    pub const MAX_HOST_BYTES: usize = 255;
    /// Longest `Content-Type`, `ETag` or `Last-Modified` a record carries: the fetcher
    /// drops a longer one, and the scheduler keeps the validators of every URL it tracks.
    pub const MAX_HEADER_BYTES: usize = 1024;
    /// Most redirects followed (and recorded) for one request.
    pub const MAX_REDIRECTS: usize = 10;
    /// Most headers a fetch result keeps of one side of its exchange (hyper, the fetcher's
    /// HTTP client, reads at most 100 response headers).
    pub const MAX_EXCHANGE_HEADERS: usize = 100;
    /// Most bytes of names and values a fetch result keeps of one side of its exchange.
    pub const MAX_EXCHANGE_HEADER_BYTES: usize = 32 * 1024;
    /// Longest HTTP method or version (`HTTP/1.1`) a record carries.
    pub const MAX_HTTP_TOKEN_BYTES: usize = 32;
    /// Largest period number: a million years of one-minute periods, far from overflow.
    pub const MAX_PERIOD: u64 = 1 << 40;
    /// Latest Unix time in milliseconds accepted (about the year 6400).
    pub const MAX_TIME_MS: i64 = 1 << 47;
    /// Highest partition number (Kafka clusters stop far below).
    pub const MAX_PARTITION: i32 = (1 << 20) - 1;
    /// Largest count of URLs or requests: summed over every partition up to
    /// [`MAX_PARTITION`], still far below `u64::MAX`.
    pub const MAX_TALLY: u64 = 1 << 40;
    /// Longest request duration accepted, milliseconds: a day, past any request timeout,
    /// and finite as the `f32` the stages keep it in.
    pub const MAX_DURATION_MS: f64 = 86_400_000.0;
    /// Largest body size accepted, bytes: past any record, and the difference of two is
    /// an `i64`.
    pub const MAX_SIZE_BYTES: u64 = 1 << 40;
    /// How far past 1 a probability may be, as a sum of floating-point terms can be.
    const PROBABILITY_ROUNDING: f64 = 1e-9;

    pub fn text(name: &str, value: &str, max: usize) -> Result<(), ValidationError> {
        if value.len() > max {
            return Err(ValidationError::TooLong { field: name.to_owned(), bytes: value.len(), max });
        }
        Ok(())
    }

    pub fn optional_text(name: &str, value: Option<&str>) -> Result<(), ValidationError> {
        value.map_or(Ok(()), |value| text(name, value, MAX_URL_BYTES))
    }

    /// A header value a record carries, if any: at most [`MAX_HEADER_BYTES`].
    pub fn header(name: &str, value: Option<&str>) -> Result<(), ValidationError> {
        value.map_or(Ok(()), |value| text(name, value, MAX_HEADER_BYTES))
    }

    /// One side's headers of an exchange: within [`MAX_EXCHANGE_HEADERS`] and
    /// [`MAX_EXCHANGE_HEADER_BYTES`], each value within [`MAX_HEADER_BYTES`].
    pub fn headers(name: &str, headers: &[crate::HttpHeader]) -> Result<(), ValidationError> {
        count(name, headers.len(), MAX_EXCHANGE_HEADERS)?;
        let mut total = 0usize;
        for header in headers {
            text(&format!("{name} name"), &header.name, MAX_HEADER_BYTES)?;
            if header.value.len() > MAX_HEADER_BYTES {
                return Err(ValidationError::HeaderTooLong {
                    field: name.to_owned(),
                    name: header.name.clone(),
                    bytes: header.value.len(),
                    max: MAX_HEADER_BYTES,
                });
            }
            total = total.saturating_add(header.name.len()).saturating_add(header.value.len());
        }
        if total > MAX_EXCHANGE_HEADER_BYTES {
            return Err(ValidationError::HeadersTooLarge {
                field: name.to_owned(),
                bytes: total,
                max: MAX_EXCHANGE_HEADER_BYTES,
            });
        }
        Ok(())
    }

    pub fn count(name: &str, count: usize, max: usize) -> Result<(), ValidationError> {
        if count > max {
            return Err(ValidationError::TooMany { field: name.to_owned(), count, max });
        }
        Ok(())
    }

    pub fn tally(name: &str, value: u64) -> Result<(), ValidationError> {
        if value > MAX_TALLY {
            return Err(ValidationError::Tally { field: name.to_owned(), value, max: MAX_TALLY });
        }
        Ok(())
    }

    pub fn period(period: u64) -> Result<(), ValidationError> {
        if period > MAX_PERIOD {
            return Err(ValidationError::Period { period, max: MAX_PERIOD });
        }
        Ok(())
    }

    /// The page identity every keyed message carries.
    pub fn identity(url: &str, url_key: &str, host: &str, period_number: u64) -> Result<(), ValidationError> {
        text("url", url, MAX_URL_BYTES)?;
        text("url_key", url_key, MAX_URL_BYTES)?;
        if host.is_empty() {
            return Err(ValidationError::Empty { field: "host".to_owned() });
        }
        text("host", host, MAX_HOST_BYTES)?;
        // A pick filed under another host than its URL's would be fetched under that
        // host's politeness gate and its change event refused downstream.
        match crate::host_of(url) {
            Ok(own) if own == host => {}
            Ok(own) => {
                return Err(ValidationError::HostMismatch {
                    field: "host".to_owned(),
                    host: host.to_owned(),
                    url_field: "url".to_owned(),
                    url_host: own,
                })
            }
            Err(source) => return Err(ValidationError::Url { field: "url".to_owned(), source }),
        }
        period(period_number)
    }

    /// A URL a record carries besides its identity (a redirect, a final URL): without
    /// credentials. The serialised form the stages write puts them before the first `@`
    /// of the authority, so the text is enough.
    pub fn no_credentials(name: &str, url: &str) -> Result<(), ValidationError> {
        let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
        let authority = after_scheme.split(['/', '?', '#']).next().unwrap_or_default();
        if authority.contains('@') {
            return Err(ValidationError::Credentials { field: name.to_owned() });
        }
        Ok(())
    }

    /// An instant carried twice, as RFC 3339 `name` and as `name_ms`: in range and equal.
    pub fn instant(name: &str, at: crate::UtcTime, ms: i64) -> Result<(), ValidationError> {
        time_ms(&format!("{name}_ms"), ms)?;
        if at.ms() != ms {
            return Err(ValidationError::Instant { field: name.to_owned(), at, ms });
        }
        Ok(())
    }

    pub fn time_ms(name: &str, ms: i64) -> Result<(), ValidationError> {
        if !(0..=MAX_TIME_MS).contains(&ms) {
            return Err(ValidationError::UnixTime { field: name.to_owned(), ms, max: MAX_TIME_MS });
        }
        Ok(())
    }

    pub fn finite(name: &str, value: f64) -> Result<(), ValidationError> {
        if !value.is_finite() {
            return Err(ValidationError::NotFinite { field: name.to_owned(), value });
        }
        Ok(())
    }

    pub fn non_negative(name: &str, value: f64) -> Result<(), ValidationError> {
        if !(value.is_finite() && value >= 0.0) {
            return Err(ValidationError::NotNonNegative { field: name.to_owned(), value });
        }
        Ok(())
    }

    pub fn duration_ms(name: &str, value: f64) -> Result<(), ValidationError> {
        if !(0.0..=MAX_DURATION_MS).contains(&value) {
            return Err(ValidationError::Duration { field: name.to_owned(), value, max: MAX_DURATION_MS });
        }
        Ok(())
    }

    pub fn size_bytes(name: &str, value: u64) -> Result<(), ValidationError> {
        if value > MAX_SIZE_BYTES {
            return Err(ValidationError::Size { field: name.to_owned(), value, max: MAX_SIZE_BYTES });
        }
        Ok(())
    }

    /// A probability: a page forecast to download or change more surely than certainly
    /// would outrank every other.
    pub fn probability(name: &str, value: f64) -> Result<(), ValidationError> {
        if !(0.0..=1.0 + PROBABILITY_ROUNDING).contains(&value) {
            return Err(ValidationError::Probability { field: name.to_owned(), value });
        }
        Ok(())
    }
}
