//! What came of a pick: topic `fetch-results`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bounds;
use crate::envelope::{decode_as, EnvelopeError, Format, Framed, Message};
use crate::validation::ValidationError;

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

/// The statuses that say a URL has moved for good (RFC 9110 §15.4.2, §15.4.9). The fetch
/// stage does not follow one a picked URL answers: its result is `http_status` with the
/// status, and the target is published as a link, to be tracked instead.
pub const PERMANENT_REDIRECTS: [u16; 2] = [301, 308];

/// Whether a request that ended with `outcome` and `http_status` found its URL moved for
/// good ([`PERMANENT_REDIRECTS`]).
pub fn moved_for_good(outcome: FetchOutcome, http_status: Option<u16>) -> bool {
    outcome == FetchOutcome::HttpStatus
        && http_status.is_some_and(|status| PERMANENT_REDIRECTS.contains(&status))
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
