//! Fetching one URL. Every pick ends in a [`FetchResult`], failures included, because the
//! estimator's download rates count failed requests as much as downloads.
//!
//! Redirects are followed here rather than by reqwest so that every hop is checked
//! against the address policy and recorded, and one timeout covers the whole request:
//! every hop, the headers and the body.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use recrawl_common::descriptors::out_of_descriptors;
use recrawl_common::unix_ms;
use recrawl_schemas::messages::bounds::{MAX_EXCHANGE_HEADERS, MAX_EXCHANGE_HEADER_BYTES};
use recrawl_schemas::url_key::has_credentials;
use recrawl_schemas::{
    moved_for_good, FetchOutcome, FetchResult, HttpExchange, HttpHeader, PagePick, PERMANENT_REDIRECTS,
};
use reqwest::header::{
    HeaderMap, HeaderName, HeaderValue, ACCEPT, ACCEPT_ENCODING, CONNECTION, CONTENT_TYPE, ETAG, HOST,
    IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, LOCATION, RETRY_AFTER, USER_AGENT,
};
use reqwest::{redirect, Client, Response, StatusCode};
use thiserror::Error;
use tokio::time::Instant;
use url::Url;

use crate::address::{
    check_url_host, find_cause, AddressPolicy, BlockedAddress, DnsFailure, GuardedResolver,
};

pub use recrawl_schemas::messages::bounds::{MAX_REDIRECTS, MAX_URL_BYTES};

/// Whether a redirect to a URL may be followed: robots.txt's say, and the target host's
/// politeness, which the caller knows.
pub type MayFollow<'a> = dyn Fn(Url) -> BoxFuture<'a, Hop> + Send + Sync + 'a;

/// Held while a request goes on after a hop: its drop tells the hop's host the request
/// has ended.
pub type HopGuard = Box<dyn Send + Sync>;

/// What may become of a redirect.
pub enum Hop {
    /// Follow it, holding the guard until the request ends.
    Follow(Option<HopGuard>),
    /// robots.txt disallows the target.
    Disallowed,
    /// Not followed: the request ends with `outcome`, for `reason`.
    Refused { outcome: FetchOutcome, reason: String },
    /// Not followed for want of a file descriptor here (the target's robots.txt could
    /// not be fetched): the request is to be tried again, not charged to the site.
    OutOfDescriptors(String),
}

impl std::fmt::Debug for Hop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Follow(guard) => f.debug_tuple("Follow").field(&guard.as_ref().map(|_| "guard")).finish(),
            Self::Disallowed => f.write_str("Disallowed"),
            Self::Refused { outcome, reason } => {
                f.debug_struct("Refused").field("outcome", outcome).field("reason", reason).finish()
            }
            Self::OutOfDescriptors(reason) => f.debug_tuple("OutOfDescriptors").field(reason).finish(),
        }
    }
}

/// Every redirect may be followed (robots.txt itself, tests).
pub fn any_redirect<'a>(_: Url) -> BoxFuture<'a, Hop> {
    Box::pin(std::future::ready(Hop::Follow(None)))
}

/// Longest `Content-Type`, `ETag` or `Last-Modified` kept, as records carry them; a
/// longer one is dropped.
pub use recrawl_schemas::messages::bounds::MAX_HEADER_BYTES;

/// Longest `error` text in a result.
pub const MAX_ERROR_BYTES: usize = 1024;

/// Bound on an encoded [`FetchResult`]'s size beyond its body, given a pick whose URL is
/// at most [`MAX_URL_BYTES`] (as every link this stage publishes is) and whose host and
/// group are short: so a body at the cap always fits in a record. Its exchange's headers
/// are most of it.
pub const RESULT_OVERHEAD_BYTES: usize = 256 * 1024;

/// What every request says of what it accepts, besides its `Host` and `User-Agent`: the
/// values reqwest would add, sent explicitly so that the recorded request is the one sent.
const ACCEPT_ANY: &str = "*/*";
const ACCEPTED_ENCODINGS: &str = "gzip, deflate, br";

/// How the fetcher talks to servers.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// Limit on a whole request: every redirect hop, the headers and the body.
    pub request_timeout: Duration,
    /// Limit on opening one connection.
    pub connect_timeout: Duration,
    /// Redirects followed before giving up with `TooManyRedirects`; at most
    /// [`MAX_REDIRECTS`].
    pub max_redirects: usize,
    /// Largest (decoded) body kept; longer bodies end as `BodyTooLarge`.
    pub max_body_bytes: u64,
    /// Sent as `User-Agent` so that site operators can tell who is crawling.
    pub user_agent: String,
    /// Media types whose bodies are read (prefixes of the `Content-Type` essence, lower
    /// case); other 2xx answers end as `UnsupportedType` without their body.
    pub content_types: Vec<String>,
    /// Idle keep-alive connections kept per host.
    pub idle_connections_per_host: usize,
    /// Hosts whose connections may be kept idle at once; past it a request to another
    /// host asks for its connection to be closed after the answer.
    pub max_idle_hosts: usize,
    /// How long an idle connection is kept.
    pub idle_timeout: Duration,
    /// Which addresses may be connected to, and `--resolve` overrides.
    pub resolver: GuardedResolver,
}

/// Pages, and the sitemaps and feeds that announce them.
pub const DEFAULT_CONTENT_TYPES: &str = "text/html,application/xhtml+xml,application/xml,text/xml,\
    application/rss+xml,application/atom+xml,application/gzip,application/x-gzip";

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            max_redirects: 5,
            max_body_bytes: 8 * 1024 * 1024,
            user_agent: "recrawl/0.1".to_owned(),
            content_types: DEFAULT_CONTENT_TYPES.split(',').map(str::to_owned).collect(),
            idle_connections_per_host: 1,
            max_idle_hosts: 256,
            idle_timeout: Duration::from_secs(10),
            resolver: GuardedResolver::new(AddressPolicy::default(), Vec::new()),
        }
    }
}

/// Why a document (robots.txt, a frame) was not read: the outcome a pick would have had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentFailure {
    pub outcome: FetchOutcome,
    pub reason: String,
    /// This process ran out of file descriptors: no news about the site.
    pub out_of_descriptors: bool,
}

/// The origins whose connections the pool may keep idle. reqwest keeps one idle
/// connection per origin for its idle timeout, however many origins a batch visits (1,500
/// hosts took 1,500 descriptors for 90 s): past `most` origins, a request to another
/// asks for `Connection: close`, so the pool holds at most `most` origins' connections.
///
/// Once those are taken (the first origins seen keep theirs while they are visited), an
/// origin with more requests to come in the batch still keeps its connection between
/// them, up to `most` such origins more: its last request asks for `Connection: close`
/// and frees the place (as does the idle timeout, should no last request come). Without
/// that, each of a host's picks past the cap opened a connection (and, for HTTPS, a TLS
/// handshake) of its own.
#[derive(Debug)]
struct IdleHosts {
    most: usize,
    kept_for: Duration,
    origins: Mutex<KeptOrigins>,
}

/// Origin → until when its connection may be kept.
#[derive(Debug, Default)]
struct KeptOrigins {
    /// Kept between batches as well.
    lasting: HashMap<String, Instant>,
    /// Kept until the origin's last request of a run.
    running: HashMap<String, Instant>,
}

impl IdleHosts {
    /// Whether the connection of a request to `origin` now may be kept afterwards;
    /// `more_coming`: other requests to it follow soon.
    fn admit(&self, origin: &str, now: Instant, more_coming: bool) -> bool {
        let until = crate::clock::later(now, self.kept_for);
        let mut kept = self.origins.lock().unwrap_or_else(PoisonError::into_inner);
        let KeptOrigins { lasting, running } = &mut *kept;
        if let Some(kept) = lasting.get_mut(origin) {
            *kept = until;
            return true;
        }
        if let Some(kept) = running.get_mut(origin) {
            if more_coming {
                *kept = until;
            } else {
                running.remove(origin);
            }
            return more_coming;
        }
        if let Some(free) = room(lasting, self.most, now) {
            free.insert(origin.to_owned(), until);
            return true;
        }
        if more_coming {
            if let Some(free) = room(running, self.most, now) {
                free.insert(origin.to_owned(), until);
                return true;
            }
        }
        false
    }

    fn len(&self, now: Instant) -> usize {
        let mut kept = self.origins.lock().unwrap_or_else(PoisonError::into_inner);
        kept.lasting.retain(|_, until| *until > now);
        kept.running.retain(|_, until| *until > now);
        kept.lasting.len().saturating_add(kept.running.len())
    }
}

/// `origins` if it has room for another of at most `most`, once those expired are gone.
fn room(
    origins: &mut HashMap<String, Instant>,
    most: usize,
    now: Instant,
) -> Option<&mut HashMap<String, Instant>> {
    if origins.len() >= most {
        origins.retain(|_, until| *until > now);
    }
    (origins.len() < most).then_some(origins)
}

/// The fetcher could not be built from its configuration.
#[derive(Debug, Error)]
pub enum FetchSetupError {
    #[error("--user-agent or TLS: cannot build the HTTP client")]
    Client(#[from] reqwest::Error),
    #[error("--user-agent is not a valid header value")]
    UserAgent,
}

/// What a GET led to after its redirects, before the outcome is decided.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// Redirect targets followed, in order.
    pub redirects: Vec<Url>,
    /// The body, read only for 2xx answers of an accepted type.
    pub body: Option<Vec<u8>>,
    /// Whether `body` is only the first [`Reading::cap`] bytes of a longer one.
    pub truncated: bool,
    /// The final hop's request and the answer's status line and headers.
    pub exchange: HttpExchange,
}

/// Which answers' bodies a GET reads, and how much of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Most body bytes read.
    pub cap: u64,
    /// Read the body whatever its type, not only those of the accepted types.
    pub any_type: bool,
    /// Past `cap`, keep the first `cap` bytes and stop reading, rather than fail with
    /// `BodyTooLarge`.
    pub truncate: bool,
    /// Redirects followed however few `max_redirects` allows (RFC 9309 §2.3.1.2 asks five
    /// for robots.txt).
    pub least_redirects: usize,
    /// End the request at the URL's own permanent redirect ([`moved_to`]): a picked page
    /// that moved is to be tracked at its new URL, not fetched under both.
    pub stop_at_moved: bool,
    /// More requests to the URL's origin follow in this batch (its host's next pick, or
    /// its pages after robots.txt): keep the connection even past the idle hosts' cap.
    pub more_from_origin: bool,
}

/// Fetches over HTTP(S). Cheap to clone: clones share one connection pool.
#[derive(Debug, Clone)]
pub struct Fetcher {
    client: Client,
    idle: Arc<IdleHosts>,
    policy: AddressPolicy,
    request_timeout: Duration,
    max_redirects: usize,
    pub max_body_bytes: u64,
    content_types: Vec<String>,
    /// Sent with every request: `User-Agent`, `Accept`, `Accept-Encoding`.
    common_headers: HeaderMap,
}

impl Fetcher {
    /// How long one request may take, redirects included.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Builds the HTTP client; fails on an unusable configuration, such as a user agent that
    /// is not a valid header value.
    pub fn new(config: FetchConfig) -> Result<Self, FetchSetupError> {
        let policy = config.resolver.policy().clone();
        let client = Client::builder()
            .use_rustls_tls()
            .user_agent(config.user_agent.as_str())
            .timeout(config.request_timeout)
            .connect_timeout(config.connect_timeout)
            .redirect(redirect::Policy::none())
            // A proxy would connect on the fetcher's behalf, past the address checks.
            .no_proxy()
            .dns_resolver(std::sync::Arc::new(config.resolver))
            .pool_max_idle_per_host(config.idle_connections_per_host)
            .pool_idle_timeout(config.idle_timeout)
            .gzip(true)
            .brotli(true)
            .deflate(true)
            .build()?;
        let mut common_headers = HeaderMap::new();
        let agent = HeaderValue::from_str(&config.user_agent).map_err(|_| FetchSetupError::UserAgent)?;
        common_headers.insert(USER_AGENT, agent);
        common_headers.insert(ACCEPT, HeaderValue::from_static(ACCEPT_ANY));
        common_headers.insert(ACCEPT_ENCODING, HeaderValue::from_static(ACCEPTED_ENCODINGS));
        let content_types = config.content_types.iter().map(|t| t.trim().to_ascii_lowercase()).collect();
        let idle = IdleHosts {
            most: config.max_idle_hosts,
            // A connection goes idle when its request ends, up to a request timeout after
            // it was admitted.
            kept_for: config.idle_timeout.saturating_add(config.request_timeout),
            origins: Mutex::default(),
        };
        Ok(Self {
            client,
            idle: Arc::new(idle),
            policy,
            request_timeout: config.request_timeout,
            max_redirects: config.max_redirects.min(MAX_REDIRECTS),
            max_body_bytes: config.max_body_bytes,
            content_types,
            common_headers,
        })
    }

    /// Fetches `pick.url`, conditionally when the pick carries validators, and reports
    /// what came of it; failures are outcomes, not errors.
    ///
    /// The body is kept only for `Downloaded`. `size_bytes` counts the body bytes received:
    /// for a body abandoned part-way (`BodyTooLarge`, or a timeout while reading) that is
    /// how far it got, and it is 0 when an oversized `Content-Length` was refused before
    /// reading. Bodies of other answers are not read, so for those `latency_ms` ends at
    /// the response headers.
    pub async fn fetch(&self, pick: &PagePick, may_follow: &MayFollow<'_>) -> FetchResult {
        self.fetch_checked(pick, may_follow, false).await.0
    }

    /// [`fetch`](Self::fetch), and whether the request failed because this process ran
    /// out of file descriptors: then the result is no news about the site, and the pick
    /// is to be tried again. `more_from_origin` as [`Reading::more_from_origin`].
    pub async fn fetch_checked(
        &self,
        pick: &PagePick,
        may_follow: &MayFollow<'_>,
        more_from_origin: bool,
    ) -> (FetchResult, bool) {
        let mut result = unanswered(pick, FetchOutcome::Other);
        let started = Instant::now();
        let mut starved = false;
        let request = self.request(pick, may_follow, more_from_origin, &mut result);
        result.outcome = match self.within_timeout(request).await {
            Ok(outcome) => outcome,
            Err(failure) => {
                starved = failure.is_out_of_descriptors();
                let outcome = failure.outcome();
                result.error = Some(error_text(failure.describe()));
                outcome
            }
        };
        result.latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        result.fetched_at_ms = unix_ms();
        tracing::debug!(
            url = %redacted(&result.url),
            outcome = result.outcome.as_str(),
            status = ?result.http_status,
            latency_ms = result.latency_ms,
            error = ?result.error,
            "fetched"
        );
        (result, starved)
    }

    async fn request(
        &self,
        pick: &PagePick,
        may_follow: &MayFollow<'_>,
        more_from_origin: bool,
        result: &mut FetchResult,
    ) -> Result<FetchOutcome, FetchFailure> {
        let url = Url::parse(&pick.url)
            .map_err(|source| FetchFailure::UnparsableUrl { url: redacted(&pick.url), source })?;
        let mut conditions = HeaderMap::new();
        let validators = [(IF_NONE_MATCH, &pick.etag), (IF_MODIFIED_SINCE, &pick.last_modified)];
        for (name, value) in validators {
            // A validator that is not a valid header value cannot have come from a header.
            if let Some(value) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                conditions.insert(name, value);
            }
        }
        let reading = Reading {
            cap: self.max_body_bytes,
            any_type: false,
            truncate: false,
            least_redirects: 0,
            stop_at_moved: true,
            more_from_origin,
        };
        let answer = self.get(url, conditions, reading, may_follow, &mut result.size_bytes).await;
        let answer = match answer {
            Ok(answer) => answer,
            Err((failure, redirects)) => {
                result.redirects = redirects.iter().map(Url::to_string).collect();
                result.final_url = result.redirects.last().cloned();
                return Err(failure);
            }
        };
        record_headers(&answer.headers, result);
        result.exchange = Some(answer.exchange);
        result.http_status = Some(answer.status.as_u16());
        result.redirects = answer.redirects.iter().map(Url::to_string).collect();
        result.final_url = result.redirects.last().cloned();
        if answer.status == StatusCode::NOT_MODIFIED {
            return Ok(FetchOutcome::NotModified);
        }
        if !answer.status.is_success() {
            if matches!(answer.status, StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE) {
                result.retry_after_ms = retry_after(&answer.headers, SystemTime::now());
            }
            return Err(FetchFailure::Status(answer.status));
        }
        match answer.body {
            Some(body) => {
                result.body = body;
                Ok(FetchOutcome::Downloaded)
            }
            None => Ok(FetchOutcome::UnsupportedType),
        }
    }

    /// A plain GET of `url` within the request timeout, following redirects, for
    /// robots.txt and frame documents. The error is the outcome it would have as a pick's.
    pub async fn get_document(
        &self,
        url: Url,
        reading: Reading,
        may_follow: &MayFollow<'_>,
    ) -> Result<Answer, DocumentFailure> {
        let mut received = 0;
        let get = async {
            self.get(url, HeaderMap::new(), reading, may_follow, &mut received)
                .await
                .map_err(|(failure, _)| failure)
        };
        self.within_timeout(get).await.map_err(|failure| DocumentFailure {
            outcome: failure.outcome(),
            out_of_descriptors: failure.is_out_of_descriptors(),
            reason: failure.describe(),
        })
    }

    /// `work` cut off at the request timeout, which then is its failure.
    async fn within_timeout<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, FetchFailure>>,
    ) -> Result<T, FetchFailure> {
        tokio::time::timeout(self.request_timeout, work)
            .await
            .unwrap_or(Err(FetchFailure::Timeout(self.request_timeout)))
    }

    /// GETs `url`, following up to `max_redirects` redirects, each hop checked against
    /// the address policy and `may_follow`. Reads the body of a 2xx answer as `reading`
    /// says, counting into `received`. A failure comes with the redirects taken (and the
    /// one refused).
    async fn get(
        &self,
        url: Url,
        headers: HeaderMap,
        reading: Reading,
        may_follow: &MayFollow<'_>,
        received: &mut u64,
    ) -> Result<Answer, (FetchFailure, Vec<Url>)> {
        let mut redirects: Vec<Url> = Vec::new();
        // Dropped when the request ends: the hosts hopped to count it as theirs until then.
        let mut hops_held: Vec<HopGuard> = Vec::new();
        let mut current = url.clone();
        loop {
            let request_headers = self.request_headers(&current, &headers);
            // A hop elsewhere has no more requests known to follow.
            let more_coming = reading.more_from_origin && current.origin() == url.origin();
            let sent = self.send(&current, &request_headers, more_coming).await;
            let mut response = match sent {
                Ok(response) => response,
                Err(failure) => return Err((failure, redirects)),
            };
            let status = response.status();
            let target = is_followed_redirect(status)
                .then(|| response.headers().get(LOCATION))
                .flatten()
                .and_then(|location| location.to_str().ok())
                .and_then(|location| redirect_target(&current, location));
            let moved = reading.stop_at_moved && redirects.is_empty() && is_permanent_redirect(status);
            if let Some(target) = target.filter(|_| !moved) {
                if target.as_str().len() > MAX_URL_BYTES {
                    return Err((FetchFailure::LongRedirect(target.as_str().len()), redirects));
                }
                if target == url || redirects.contains(&target) {
                    return Err((FetchFailure::RedirectLoop(redacted(target.as_str())), redirects));
                }
                let most_redirects = self.max_redirects.max(reading.least_redirects);
                if redirects.len() >= most_redirects {
                    return Err((FetchFailure::TooManyRedirects(most_redirects), redirects));
                }
                redirects.push(target.clone());
                // Before robots.txt is asked for: a refused address is the hop's outcome.
                if let Err(blocked) = check_url_host(&self.policy, &target) {
                    return Err((blocked.into(), redirects));
                }
                match may_follow(target.clone()).await {
                    Hop::Follow(guard) => hops_held.extend(guard),
                    Hop::Disallowed => {
                        return Err((FetchFailure::DisallowedRedirect(redacted(target.as_str())), redirects))
                    }
                    Hop::OutOfDescriptors(reason) => {
                        return Err((FetchFailure::OutOfDescriptors(reason), redirects));
                    }
                    Hop::Refused { outcome, reason } => {
                        let target = redacted(target.as_str());
                        return Err((
                            FetchFailure::RedirectNotFollowed { target, outcome, reason },
                            redirects,
                        ));
                    }
                }
                current = target;
                continue;
            }
            let accepted = status.is_success() && (reading.any_type || self.accepts(response.headers()));
            let (body, truncated) = if accepted {
                match read_body(&mut response, reading, received).await {
                    Ok((body, truncated)) => (Some(body), truncated),
                    Err(failure) => return Err((failure, redirects)),
                }
            } else {
                (None, false)
            };
            let exchange = exchange(&current, &request_headers, &response);
            return Ok(Answer {
                status,
                headers: response.headers().clone(),
                redirects,
                body,
                truncated,
                exchange,
            });
        }
    }

    /// Every header a request to `url` sends, `Host` first: `conditions` and the common
    /// ones, so that nothing is added on the way and the exchange records what went.
    fn request_headers(&self, url: &Url, conditions: &HeaderMap) -> HeaderMap {
        let mut headers = HeaderMap::with_capacity(conditions.len().saturating_add(4));
        let host = match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => String::new(),
        };
        // A URL's host is ASCII once parsed (IDNA), so always a valid value.
        if let Ok(host) = HeaderValue::from_str(&host) {
            headers.insert(HOST, host);
        }
        headers.extend(self.common_headers.clone());
        headers.extend(conditions.clone());
        headers
    }

    async fn send(
        &self,
        url: &Url,
        headers: &HeaderMap,
        more_coming: bool,
    ) -> Result<Response, FetchFailure> {
        if has_credentials(url) {
            return Err(FetchFailure::Credentials);
        }
        check_url_host(&self.policy, url)?;
        let mut headers = headers.clone();
        if !self.idle.admit(&url.origin().ascii_serialization(), Instant::now(), more_coming) {
            headers.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        Ok(self.client.get(url.clone()).headers(headers).send().await?)
    }

    /// Origins whose connections the pool may hold idle now (at most twice
    /// `--max-idle-connections`).
    pub fn idle_hosts(&self) -> usize {
        self.idle.len(Instant::now())
    }

    /// Whether the answer's type is on the allow-list; an answer without one is read, as
    /// browsers sniff it and most such pages are HTML.
    fn accepts(&self, headers: &HeaderMap) -> bool {
        let Some(content_type) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
            return true;
        };
        let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        self.content_types.iter().any(|accepted| essence.starts_with(accepted.as_str()))
    }
}

/// The request sent to `url` with `sent` and the answer's status line and headers, bounded
/// as [`HttpExchange`] says.
fn exchange(url: &Url, sent: &HeaderMap, response: &Response) -> HttpExchange {
    let mut left_out = 0u32;
    let mut request_headers = kept_headers(sent, &mut left_out);
    let response_headers = kept_headers(response.headers(), &mut left_out);
    request_headers.shrink_to_fit();
    let mut target = url.path().to_owned();
    if let Some(query) = url.query() {
        target.push('?');
        target.push_str(query);
    }
    HttpExchange {
        method: "GET".to_owned(),
        target,
        http_version: format!("{:?}", response.version()),
        request_headers,
        reason: response.status().canonical_reason().unwrap_or_default().to_owned(),
        response_headers,
        headers_left_out: left_out,
        remote_ip: response.remote_addr().map(|address| address.ip().to_string()),
    }
}

/// `headers` in order (a name's repeats together) up to the exchange's bounds; a value past
/// [`MAX_HEADER_BYTES`] is left out, and every header left out is counted in `left_out`.
fn kept_headers(headers: &HeaderMap, left_out: &mut u32) -> Vec<HttpHeader> {
    let mut kept = Vec::new();
    let mut bytes = 0usize;
    for (name, value) in headers {
        let size = name.as_str().len().saturating_add(value.len());
        let fits = kept.len() < MAX_EXCHANGE_HEADERS
            && value.len() <= MAX_HEADER_BYTES
            && bytes.saturating_add(size) <= MAX_EXCHANGE_HEADER_BYTES;
        if fits {
            bytes = bytes.saturating_add(size);
            kept.push(HttpHeader { name: name.as_str().to_owned(), value: value.as_bytes().to_vec() });
        } else {
            *left_out = left_out.saturating_add(1);
        }
    }
    kept
}

/// A result for `pick` before any answer: the pick's identity and `outcome`.
pub fn unanswered(pick: &PagePick, outcome: FetchOutcome) -> FetchResult {
    FetchResult {
        url: pick.url.clone(),
        url_key: pick.url_key.clone(),
        host: pick.host.clone(),
        group: pick.group.clone(),
        period: pick.period,
        outcome,
        http_status: None,
        latency_ms: 0.0,
        size_bytes: 0,
        body: Vec::new(),
        content_type: None,
        etag: None,
        last_modified: None,
        final_url: None,
        error: None,
        fetched_at_ms: unix_ms(),
        depth: pick.depth,
        crawl_delay_ms: None,
        redirects: Vec::new(),
        retry_after_ms: None,
        exchange: None,
    }
}

/// Reads the body chunk by chunk so that an oversized one is dropped, or cut, as soon as
/// it passes the cap instead of after it has all arrived; the flag says it was cut.
/// `received` counts the bytes read, also when reading fails part-way.
async fn read_body(
    response: &mut Response,
    reading: Reading,
    received: &mut u64,
) -> Result<(Vec<u8>, bool), FetchFailure> {
    let cap = reading.cap;
    // Absent for compressed bodies, whose decoded size is only known by reading them.
    let announced = response.content_length();
    if let Some(announced) = announced.filter(|&length| length > cap && !reading.truncate) {
        return Err(FetchFailure::AnnouncedBodyTooLarge { announced, cap });
    }
    // At most the cap, so a safe allocation.
    let expected = announced.map_or(0, |length| length.min(cap));
    let mut body = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    while let Some(chunk) = response.chunk().await? {
        let room = cap.saturating_sub(*received);
        *received = received.saturating_add(chunk.len() as u64);
        if *received > cap {
            if !reading.truncate {
                return Err(FetchFailure::BodyTooLarge { cap });
            }
            // Stopping here drops the connection with the rest of the body unread.
            let kept = chunk.get(..usize::try_from(room).unwrap_or(usize::MAX)).unwrap_or(&chunk);
            body.extend_from_slice(kept);
            *received = cap;
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// Why a request did not end in a download; mapped onto a [`FetchOutcome`].
#[derive(Debug, Error)]
enum FetchFailure {
    #[error("cannot parse the URL {url:?}")]
    UnparsableUrl {
        url: String,
        #[source]
        source: url::ParseError,
    },
    /// Never sent: reqwest would put them in an `Authorization` header.
    #[error("the URL carries a user name or password")]
    Credentials,
    #[error("the server answered {0}")]
    Status(StatusCode),
    #[error("Content-Length {announced} exceeds the body cap of {cap} bytes")]
    AnnouncedBodyTooLarge { announced: u64, cap: u64 },
    #[error("the body grew past the cap of {cap} bytes")]
    BodyTooLarge { cap: u64 },
    #[error("more than {0} redirects")]
    TooManyRedirects(usize),
    #[error("redirect loop back to {0}")]
    RedirectLoop(String),
    #[error("a redirect to a URL of {0} bytes, past the limit of {MAX_URL_BYTES}")]
    LongRedirect(usize),
    #[error("a redirect to {0}, which robots.txt disallows")]
    DisallowedRedirect(String),
    #[error("a redirect to {target}, not followed: {reason}")]
    RedirectNotFollowed { target: String, outcome: FetchOutcome, reason: String },
    #[error("this process is out of file descriptors: {0}")]
    OutOfDescriptors(String),
    #[error("no complete answer within {0:?}")]
    Timeout(Duration),
    #[error(transparent)]
    Blocked(#[from] BlockedAddress),
    #[error(transparent)]
    Transport(#[from] reqwest::Error),
}

impl FetchFailure {
    fn is_out_of_descriptors(&self) -> bool {
        match self {
            Self::OutOfDescriptors(_) => true,
            Self::Transport(error) => out_of_descriptors(error),
            _ => false,
        }
    }

    fn outcome(&self) -> FetchOutcome {
        match self {
            Self::UnparsableUrl { .. } | Self::Credentials => FetchOutcome::Other,
            Self::Status(_) => FetchOutcome::HttpStatus,
            Self::AnnouncedBodyTooLarge { .. } | Self::BodyTooLarge { .. } => FetchOutcome::BodyTooLarge,
            Self::TooManyRedirects(_) | Self::RedirectLoop(_) | Self::LongRedirect(_) => {
                FetchOutcome::TooManyRedirects
            }
            Self::DisallowedRedirect(_) => FetchOutcome::RobotsDenied,
            Self::RedirectNotFollowed { outcome, .. } => *outcome,
            // Reported as the connection it kept from being made, if reported at all.
            Self::OutOfDescriptors(_) => FetchOutcome::Connect,
            Self::Timeout(_) => FetchOutcome::Timeout,
            Self::Blocked(_) => FetchOutcome::BlockedAddress,
            Self::Transport(error) => transport_outcome(error),
        }
    }

    /// The failure and its causes on one line, without the URL reqwest puts in its
    /// messages (it may carry credentials, and the result names the URL anyway).
    fn describe(self) -> String {
        match self {
            Self::Transport(error) => describe_with_causes(&error.without_url()),
            other => describe_with_causes(&other),
        }
    }
}

fn transport_outcome(error: &reqwest::Error) -> FetchOutcome {
    // Resolver and TLS failures surface as connect errors; their causes tell them apart.
    if find_cause::<BlockedAddress>(error).is_some() {
        FetchOutcome::BlockedAddress
    } else if find_cause::<DnsFailure>(error).is_some() {
        FetchOutcome::Dns
    } else if find_cause::<rustls::Error>(error).is_some() {
        FetchOutcome::Tls
    } else if error.is_connect() {
        // Checked before timeouts: a connect timeout means no connection was made.
        FetchOutcome::Connect
    } else if error.is_timeout() {
        FetchOutcome::Timeout
    } else {
        FetchOutcome::Other
    }
}

/// The error and its causes on one line: reqwest's own message names only the failing
/// step ("error sending request"), while the reason ("Connection refused") is in the causes.
fn describe_with_causes(error: &dyn StdError) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(current) = cause {
        let cause_text = current.to_string();
        // Some layers repeat their inner error's message in their own.
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        cause = current.source();
    }
    text
}

/// The statuses that send a client elsewhere (RFC 9110 §15.4): 301, 302, 303, 307 and 308.
/// A 304 answers the conditional request, whatever `Location` it carries, and 300 and 305
/// name no single place to go.
fn is_followed_redirect(status: StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

fn is_permanent_redirect(status: StatusCode) -> bool {
    PERMANENT_REDIRECTS.contains(&status.as_u16())
}

/// Where a redirect's `Location` sends a request for `current`: resolved, without its
/// fragment, and without credentials: a server's redirect may name some, which are
/// someone's secret, so the hop is followed (and recorded) without them, never sent as
/// `Authorization`, never published.
fn redirect_target(current: &Url, location: &str) -> Option<Url> {
    let mut target = current.join(location).ok()?;
    target.set_fragment(None);
    if has_credentials(&target) {
        let _no_credentials = (target.set_username(""), target.set_password(None));
    }
    Some(target)
}

/// The new URL of a picked page whose request ended at its own permanent redirect (the
/// fetcher does not follow it, [`Reading::stop_at_moved`]): the answer's `Location`, as
/// the exchange recorded it, resolved against the picked URL. None for any other result,
/// and for a target longer than a record may carry.
pub fn moved_to(result: &FetchResult) -> Option<Url> {
    if !moved_for_good(result.outcome, result.http_status) || !result.redirects.is_empty() {
        return None;
    }
    let exchange = result.exchange.as_ref()?;
    let location = exchange
        .response_headers
        .iter()
        .find(|header| header.name.eq_ignore_ascii_case(LOCATION.as_str()))?;
    let location = std::str::from_utf8(&location.value).ok()?;
    let picked = Url::parse(&result.url).ok()?;
    redirect_target(&picked, location).filter(|target| target.as_str().len() <= MAX_URL_BYTES)
}

/// `url` without its user name and password, for logs and error texts.
pub fn redacted(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut parsed) if !parsed.username().is_empty() || parsed.password().is_some() => {
            // Both setters only fail for URLs that cannot carry credentials at all.
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.into()
        }
        Ok(_) => url.to_owned(),
        // Unparsable, yet it may still carry `user:password@` in what looks like its
        // authority: cut that out as text.
        Err(_) => {
            let (scheme, rest) = match url.split_once("://") {
                Some((scheme, rest)) => (Some(scheme), rest),
                None => (None, url),
            };
            let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
            let Some((_, host)) = authority.rsplit_once('@') else { return url.to_owned() };
            let after_authority = rest.get(authority.len()..).unwrap_or_default();
            match scheme {
                Some(scheme) => format!("{scheme}://{host}{after_authority}"),
                None => format!("{host}{after_authority}"),
            }
        }
    }
}

/// `Retry-After` in milliseconds from `now`: delay-seconds or an HTTP date (RFC 9110
/// §10.2.3); a date in the past is 0.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<u64> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(seconds.saturating_mul(1000));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).map_or(0, |wait| u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)))
}

fn record_headers(headers: &HeaderMap, result: &mut FetchResult) {
    result.content_type = header_text(headers, CONTENT_TYPE);
    result.etag = header_text(headers, ETAG);
    result.last_modified = header_text(headers, LAST_MODIFIED);
}

/// A header's value, or `None` when absent, not UTF-8 or longer than [`MAX_HEADER_BYTES`].
fn header_text(headers: &HeaderMap, name: HeaderName) -> Option<String> {
    let value = headers.get(name).filter(|value| value.len() <= MAX_HEADER_BYTES)?;
    std::str::from_utf8(value.as_bytes()).ok().map(str::to_owned)
}

/// `text` cut to at most [`MAX_ERROR_BYTES`] on a character boundary, marked by an ellipsis;
/// error texts quote what servers sent.
pub(crate) fn error_text(mut text: String) -> String {
    const ELLIPSIS: char = '…';
    if text.len() > MAX_ERROR_BYTES {
        let room = MAX_ERROR_BYTES.saturating_sub(ELLIPSIS.len_utf8());
        let end = (0..=room).rev().find(|&end| text.is_char_boundary(end)).unwrap_or(0);
        text.truncate(end);
        text.push(ELLIPSIS);
    }
    text
}

#[cfg(test)]
pub(crate) mod tests {
    use std::convert::Infallible;
    use std::net::SocketAddr;

    use axum::body::{Body, Bytes};
    use axum::extract::Path;
    use axum::http::header::CONTENT_ENCODING;
    use axum::http::HeaderValue;
    use axum::response::{IntoResponse, Redirect};
    use axum::routing::get;
    use axum::Router;
    use futures::stream::{self, StreamExt};
    use recrawl_schemas::{host_of, normalise_url, url_key, Message as _, PickReason};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    const SMALL_CAP: u64 = 1024;

    /// Serves `router` on an ephemeral loopback port. The listener is bound before this
    /// returns, so requests queue in its backlog until the server task accepts them.
    pub(crate) async fn serve(router: Router) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        address
    }

    pub(crate) fn pick_for(raw_url: &str) -> PagePick {
        let url = normalise_url(raw_url).unwrap();
        PagePick {
            url_key: url_key(&url),
            host: host_of(&url).unwrap(),
            group: "test-group".to_owned(),
            period: 7,
            reason: PickReason::Discovery,
            depth: 0,
            score: 1.5,
            etag: None,
            last_modified: None,
            deadline_ms: None,
            url,
        }
    }

    /// Short limits, so that a broken test fails in seconds rather than hanging; the
    /// test servers' loopback address allowed.
    fn test_config() -> FetchConfig {
        FetchConfig {
            request_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            max_redirects: 2,
            max_body_bytes: SMALL_CAP,
            resolver: loopback_allowed(Vec::new()),
            ..FetchConfig::default()
        }
    }

    fn loopback_allowed(overrides: Vec<(String, std::net::IpAddr)>) -> GuardedResolver {
        let loopback = crate::address::parse_allowed_network("127.0.0.1").unwrap();
        GuardedResolver::new(AddressPolicy::new(vec![loopback]), overrides)
    }

    async fn fetch_from(router: Router, path: &str) -> FetchResult {
        let address = serve(router).await;
        let fetcher = Fetcher::new(test_config()).unwrap();
        fetcher.fetch(&pick_for(&format!("http://{address}{path}")), &any_redirect).await
    }

    fn streamed_body(chunk_sizes: &'static [usize], then_stall: bool) -> Body {
        let chunks =
            stream::iter(chunk_sizes).map(|&size| Ok::<_, Infallible>(Bytes::from(vec![b'x'; size])));
        if then_stall {
            Body::from_stream(chunks.chain(stream::pending()))
        } else {
            Body::from_stream(chunks)
        }
    }

    #[tokio::test]
    async fn downloads_body_and_validators() {
        let router = Router::new().route(
            "/page",
            get(|| async {
                (
                    [
                        (CONTENT_TYPE, "text/html; charset=utf-8"),
                        (ETAG, "\"v1\""),
                        (LAST_MODIFIED, "Wed, 21 Oct 2015 07:28:00 GMT"),
                    ],
                    "<p>hello</p>",
                )
            }),
        );
        let address = serve(router).await;
        let pick = pick_for(&format!("http://{address}/page"));
        let before_ms = unix_ms();
        let result = Fetcher::new(test_config()).unwrap().fetch(&pick, &any_redirect).await;
        let after_ms = unix_ms();

        assert_eq!(result.outcome, FetchOutcome::Downloaded, "{:?}", result.error);
        assert_eq!(result.http_status, Some(200));
        assert_eq!(result.body, b"<p>hello</p>");
        assert_eq!(result.size_bytes, 12);
        assert_eq!(result.content_type.as_deref(), Some("text/html; charset=utf-8"));
        assert_eq!(result.etag.as_deref(), Some("\"v1\""));
        assert_eq!(result.last_modified.as_deref(), Some("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(result.final_url, None);
        assert_eq!(result.error, None);
        assert_eq!(
            (&result.url, &result.url_key, &result.host, &result.group, result.period),
            (&pick.url, &pick.url_key, &pick.host, &pick.group, pick.period)
        );
        assert!(result.latency_ms > 0.0 && result.latency_ms.is_finite(), "{}", result.latency_ms);
        assert!((before_ms..=after_ms).contains(&result.fetched_at_ms));
    }

    /// The archive writes the request as the fetcher sent it: the server sees exactly the
    /// headers the result records, in that order.
    #[tokio::test]
    async fn the_exchange_is_the_request_sent_and_the_answer_received() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let router = Router::new().route(
            "/page",
            get({
                let seen = seen.clone();
                move |headers: axum::http::HeaderMap| async move {
                    let received =
                        headers.iter().map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()));
                    seen.lock().unwrap().extend(received);
                    ([(CONTENT_TYPE, "text/html"), (ETAG, "\"v2\"")], "<p>hello</p>")
                }
            }),
        );
        let address = serve(router).await;
        let mut pick = pick_for(&format!("http://{address}/page?q=1"));
        pick.etag = Some("\"v1\"".into());
        let result = Fetcher::new(test_config()).unwrap().fetch(&pick, &any_redirect).await;
        assert_eq!(result.outcome, FetchOutcome::Downloaded, "{:?}", result.error);
        assert_eq!(result.validate(), Ok(()));
        let exchange = result.exchange.expect("an answered fetch has its exchange");
        let sent: Vec<(String, Vec<u8>)> =
            exchange.request_headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect();
        assert_eq!(sent, *seen.lock().unwrap());
        let names: Vec<&str> = sent.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["host", "user-agent", "accept", "accept-encoding", "if-none-match"]);
        assert_eq!(sent[0].1, address.to_string().into_bytes());
        assert_eq!((exchange.method.as_str(), exchange.target.as_str()), ("GET", "/page?q=1"));
        assert_eq!((exchange.http_version.as_str(), exchange.reason.as_str()), ("HTTP/1.1", "OK"));
        assert_eq!(exchange.remote_ip.as_deref(), Some("127.0.0.1"));
        let etag = exchange.response_headers.iter().find(|h| h.name == "etag").map(|h| h.value.as_slice());
        assert_eq!(etag, Some(&b"\"v2\""[..]));
        assert_eq!(exchange.headers_left_out, 0);
        // A failure before any answer has no exchange to record.
        let closed =
            Fetcher::new(test_config()).unwrap().fetch(&pick_for("http://127.0.0.1:9/"), &any_redirect).await;
        assert_eq!(closed.exchange, None);
    }

    #[test]
    fn an_exchange_keeps_headers_within_its_bounds_and_counts_the_rest() {
        let mut headers = HeaderMap::new();
        headers.insert("x-long", HeaderValue::from_bytes(&[b'v'; MAX_HEADER_BYTES + 1]).unwrap());
        for i in 0..MAX_EXCHANGE_HEADERS + 20 {
            headers.append(
                HeaderName::from_bytes(format!("x-{i}").as_bytes()).unwrap(),
                HeaderValue::from_static("1"),
            );
        }
        let mut left_out = 0;
        let kept = kept_headers(&headers, &mut left_out);
        assert_eq!(kept.len(), MAX_EXCHANGE_HEADERS);
        assert_eq!(kept.first().map(|h| h.name.as_str()), Some("x-0"), "the long one is left out");
        assert_eq!(left_out, 21);
        let mut large = HeaderMap::new();
        for i in 0..40 {
            let name = HeaderName::from_bytes(format!("x-{i}").as_bytes()).unwrap();
            large.insert(name, HeaderValue::from_bytes(&[b'v'; MAX_HEADER_BYTES - 8]).unwrap());
        }
        let mut left_out = 0;
        let kept = kept_headers(&large, &mut left_out);
        let bytes: usize = kept.iter().map(|h| h.name.len() + h.value.len()).sum();
        assert!(bytes <= MAX_EXCHANGE_HEADER_BYTES && bytes + MAX_HEADER_BYTES > MAX_EXCHANGE_HEADER_BYTES);
        assert_eq!(kept.len() + left_out as usize, 40);
        assert_eq!(recrawl_schemas::messages::bounds::headers("h", &kept), Ok(()));
    }

    #[tokio::test]
    async fn error_statuses_are_http_errors_without_body() {
        let router = Router::new()
            .route("/missing", get(|| async { (StatusCode::NOT_FOUND, "no such page") }))
            .route("/broken", get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "oops") }));
        let address = serve(router).await;
        let fetcher = Fetcher::new(test_config()).unwrap();
        for (path, status) in [("/missing", 404), ("/broken", 500)] {
            let result = fetcher.fetch(&pick_for(&format!("http://{address}{path}")), &any_redirect).await;
            assert_eq!(result.outcome, FetchOutcome::HttpStatus, "{path}");
            assert_eq!(result.http_status, Some(status));
            assert!(result.body.is_empty());
            assert_eq!(result.size_bytes, 0);
            let error = result.error.unwrap_or_default();
            assert!(error.contains(&status.to_string()), "{error}");
        }
    }

    #[tokio::test]
    async fn not_modified_is_a_download_without_body() {
        let router =
            Router::new().route("/same", get(|| async { (StatusCode::NOT_MODIFIED, [(ETAG, "\"v1\"")]) }));
        let result = fetch_from(router, "/same").await;
        assert_eq!(result.outcome, FetchOutcome::NotModified);
        assert_eq!(result.http_status, Some(304));
        assert_eq!(result.etag.as_deref(), Some("\"v1\""));
        assert!(result.body.is_empty());
        assert_eq!(result.error, None);
    }

    /// A 304 is the answer to the conditional request even with a `Location`, which is
    /// not followed.
    #[tokio::test]
    async fn a_not_modified_answer_is_not_followed_whatever_its_location() {
        let router = Router::new()
            .route("/same", get(|| async { (StatusCode::NOT_MODIFIED, [(LOCATION, "/elsewhere")]) }))
            .route("/elsewhere", get(|| async { axum::response::Html("elsewhere") }));
        let result = fetch_from(router, "/same").await;
        assert_eq!(result.outcome, FetchOutcome::NotModified);
        assert!(result.redirects.is_empty() && result.final_url.is_none(), "{:?}", result.redirects);
    }

    /// `/hop/{n}` redirects `n` more times before answering.
    fn redirect_chain() -> Router {
        Router::new().route(
            "/hop/{remaining}",
            get(|Path(remaining): Path<u32>| async move {
                match remaining.checked_sub(1) {
                    Some(next) => Redirect::temporary(&format!("/hop/{next}")).into_response(),
                    None => axum::response::Html("arrived").into_response(),
                }
            }),
        )
    }

    #[tokio::test]
    async fn redirects_within_the_limit_are_followed() {
        let address = serve(redirect_chain()).await;
        let result = Fetcher::new(test_config())
            .unwrap()
            .fetch(&pick_for(&format!("http://{address}/hop/2")), &any_redirect)
            .await;
        assert_eq!(result.outcome, FetchOutcome::Downloaded, "{:?}", result.error);
        assert_eq!(result.body, b"arrived");
        assert_eq!(result.final_url, Some(format!("http://{address}/hop/0")));
        assert_eq!(result.redirects, [format!("http://{address}/hop/1"), format!("http://{address}/hop/0")]);
    }

    /// A loopback HTTP/1.1 server answering every request on a connection until the
    /// client closes it, or asks to (`Connection: close`): counts the connections open
    /// and the requests that asked.
    async fn counting_server(
    ) -> (SocketAddr, tokio::sync::watch::Receiver<usize>, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (open, open_now) = tokio::sync::watch::channel(0usize);
        let open = Arc::new(open);
        let closing = Arc::new(AtomicUsize::new(0));
        let closing_count = closing.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (open, closing) = (open.clone(), closing_count.clone());
                open.send_modify(|n| *n += 1);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 4096];
                    while let Ok(read @ 1..) = stream.read(&mut buffer).await {
                        head.extend_from_slice(&buffer[..read]);
                        let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                        let request = String::from_utf8_lossy(&head[..end]).to_ascii_lowercase();
                        head.drain(..end + 4);
                        let close = request.contains("connection: close");
                        let body = "<p>ok</p>";
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            break;
                        }
                        if close {
                            closing.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                    }
                    open.send_modify(|n| *n -= 1);
                });
            }
        });
        (address, open_now, closing)
    }

    #[tokio::test]
    async fn the_pool_keeps_idle_connections_to_at_most_its_cap_of_hosts() {
        use std::sync::atomic::Ordering;
        let (address, mut open, closing) = counting_server().await;
        let hosts: Vec<String> = (0..20).map(|i| format!("h{i}.test")).collect();
        let overrides = hosts.iter().map(|host| (host.clone(), address.ip())).collect();
        let config =
            FetchConfig { max_idle_hosts: 4, resolver: loopback_allowed(overrides), ..test_config() };
        let fetcher = Fetcher::new(config).unwrap();
        for round in 0..2 {
            for host in &hosts {
                let pick = pick_for(&format!("http://{host}:{}/page", address.port()));
                let result = fetcher.fetch(&pick, &any_redirect).await;
                assert_eq!(result.outcome, FetchOutcome::Downloaded, "{round} {host}: {:?}", result.error);
            }
        }
        assert_eq!(fetcher.idle_hosts(), 4);
        // The first 4 hosts keep theirs; every request to the other 16 closed its own.
        assert_eq!(closing.load(Ordering::SeqCst), 2 * 16);
        let settled =
            tokio::time::timeout(Duration::from_secs(10), open.wait_for(|&open| open <= 4)).await.is_ok();
        assert!(settled, "{} connections open", *open.borrow());
    }

    #[tokio::test]
    async fn past_the_cap_a_host_with_requests_to_come_keeps_its_connection_until_its_last() {
        use std::sync::atomic::Ordering;
        let (address, _open, closing) = counting_server().await;
        let hosts: Vec<String> = (0..4).map(|i| format!("h{i}.test")).collect();
        let overrides = hosts.iter().map(|host| (host.clone(), address.ip())).collect();
        let config =
            FetchConfig { max_idle_hosts: 1, resolver: loopback_allowed(overrides), ..test_config() };
        let fetcher = Fetcher::new(config).unwrap();
        let get = |host: usize, more: bool| {
            let pick = pick_for(&format!("http://{}:{}/page", hosts[host], address.port()));
            let fetcher = &fetcher;
            async move {
                let (result, _) = fetcher.fetch_checked(&pick, &any_redirect, more).await;
                assert_eq!(result.outcome, FetchOutcome::Downloaded, "{host}: {:?}", result.error);
            }
        };
        // h0 takes the one lasting place.
        get(0, false).await;
        // h1's run of three keeps its connection, and its last request lets it go.
        for more in [true, true, false] {
            get(1, more).await;
        }
        assert_eq!(closing.load(Ordering::SeqCst), 1, "only h1's last request closes");
        assert_eq!(fetcher.idle_hosts(), 1, "h1's place is free again");
        // Interleaved, h2 takes the freed place; h3 finds none (at most one run past the
        // cap) and closes each of its connections.
        for more in [true, true, false] {
            get(2, more).await;
            get(3, more).await;
        }
        assert_eq!(closing.load(Ordering::SeqCst), 1 + 1 + 3);
        // A host with no request to come past the cap closes, as before.
        get(3, false).await;
        assert_eq!(closing.load(Ordering::SeqCst), 6);
    }

    #[tokio::test]
    async fn a_redirect_with_credentials_is_followed_without_them() {
        let address = serve(
            Router::new()
                .route(
                    "/from",
                    get(|headers: HeaderMap| async move {
                        let host = headers.get(axum::http::header::HOST).and_then(|h| h.to_str().ok());
                        Redirect::to(&format!("http://user:SECRETPW@{}/to", host.unwrap_or_default()))
                    }),
                )
                .route(
                    "/to",
                    get(|headers: HeaderMap| async move {
                        let sent = headers.contains_key(axum::http::header::AUTHORIZATION);
                        ([(CONTENT_TYPE, "text/html")], if sent { "authorization sent" } else { "none" })
                    }),
                ),
        )
        .await;
        let result = Fetcher::new(test_config())
            .unwrap()
            .fetch(&pick_for(&format!("http://{address}/from")), &any_redirect)
            .await;
        assert_eq!(result.outcome, FetchOutcome::Downloaded, "{:?}", result.error);
        assert_eq!(result.body, b"none");
        assert_eq!(result.redirects, [format!("http://{address}/to")]);
        assert_eq!(recrawl_schemas::Message::validate(&result), Ok(()));
    }

    #[tokio::test]
    async fn redirect_loops_are_caught_and_recorded() {
        let router = Router::new()
            .route("/ping", get(|| async { Redirect::temporary("/pong") }))
            .route("/pong", get(|| async { Redirect::temporary("/ping") }));
        let address = serve(router).await;
        let fetcher = Fetcher::new(FetchConfig { max_redirects: 10, ..test_config() }).unwrap();
        let result = fetcher.fetch(&pick_for(&format!("http://{address}/ping")), &any_redirect).await;
        assert_eq!(result.outcome, FetchOutcome::TooManyRedirects);
        assert!(result.error.as_deref().unwrap_or_default().contains("loop"), "{:?}", result.error);
        assert_eq!(
            result.redirects,
            [format!("http://{address}/pong")],
            "the loop's last hop is not followed"
        );
    }

    /// `/page` answers 304 when the request's validator matches, else 200 with both.
    fn conditional_page() -> Router {
        Router::new().route(
            "/page",
            get(|headers: axum::http::HeaderMap| async move {
                let matches_etag = headers.get(IF_NONE_MATCH).is_some_and(|v| v == "\"v1\"");
                let matches_date =
                    headers.get(IF_MODIFIED_SINCE).is_some_and(|v| v == "Wed, 21 Oct 2015 07:28:00 GMT");
                if matches_etag || matches_date {
                    (StatusCode::NOT_MODIFIED, [(ETAG, "\"v1\"")]).into_response()
                } else {
                    (
                        [
                            (ETAG, "\"v1\""),
                            (LAST_MODIFIED, "Wed, 21 Oct 2015 07:28:00 GMT"),
                            (CONTENT_TYPE, "text/html"),
                        ],
                        "<p>v1</p>",
                    )
                        .into_response()
                }
            }),
        )
    }

    #[tokio::test]
    async fn long_redirect_targets_end_the_request_and_long_headers_are_dropped() {
        let long = format!("/{}", "a".repeat(MAX_URL_BYTES));
        let router =
            Router::new().route("/away", get(move || async move { Redirect::temporary(&long) })).route(
                "/headers",
                get(|| async {
                    let etag = format!("\"{}\"", "e".repeat(MAX_HEADER_BYTES));
                    let date = "d".repeat(MAX_HEADER_BYTES + 1);
                    (
                        [(CONTENT_TYPE, "text/html".to_owned()), (ETAG, etag), (LAST_MODIFIED, date)],
                        "<p>x</p>",
                    )
                }),
            );
        let address = serve(router).await;
        let fetcher = Fetcher::new(test_config()).unwrap();
        let away = fetcher.fetch(&pick_for(&format!("http://{address}/away")), &any_redirect).await;
        assert_eq!(away.outcome, FetchOutcome::TooManyRedirects, "{:?}", away.error);
        assert!(away.redirects.is_empty() && away.final_url.is_none());
        let error = away.error.unwrap_or_default();
        assert!(error.contains("past the limit of 8192"), "{error}");
        let headers = fetcher.fetch(&pick_for(&format!("http://{address}/headers")), &any_redirect).await;
        assert_eq!(headers.outcome, FetchOutcome::Downloaded, "{:?}", headers.error);
        assert_eq!(headers.content_type.as_deref(), Some("text/html"));
        assert_eq!((headers.etag, headers.last_modified), (None, None));
    }

    #[test]
    fn error_texts_are_cut_on_a_character_boundary() {
        assert_eq!(error_text("short".to_owned()), "short");
        let cut = error_text("é".repeat(MAX_ERROR_BYTES));
        assert!(cut.len() <= MAX_ERROR_BYTES && cut.len() > MAX_ERROR_BYTES - 8, "{}", cut.len());
        assert!(cut.starts_with("éé") && cut.ends_with('…'));
    }

    #[test]
    fn a_result_is_its_body_plus_a_bounded_overhead() {
        let long_url = |i: usize| {
            let url = format!("http://example.com/{i}/");
            format!("{url}{}", "x".repeat(MAX_URL_BYTES - url.len()))
        };
        let mut result = unanswered(&pick_for(&long_url(0)), FetchOutcome::Downloaded);
        assert_eq!(result.url.len(), MAX_URL_BYTES);
        result.redirects = (1..=MAX_REDIRECTS).map(long_url).collect();
        result.final_url = result.redirects.last().cloned();
        let header = Some("h".repeat(MAX_HEADER_BYTES));
        (result.content_type, result.etag, result.last_modified) = (header.clone(), header.clone(), header);
        result.error = Some(error_text("é".repeat(10 * MAX_ERROR_BYTES)));
        (result.http_status, result.crawl_delay_ms, result.retry_after_ms) = (Some(200), Some(1), Some(2));
        // Both sides' headers at their byte bound, the target a whole URL.
        let side = || {
            let header =
                |i: usize| HttpHeader { name: format!("x-{i:03}"), value: vec![b'v'; MAX_HEADER_BYTES - 8] };
            (0..MAX_EXCHANGE_HEADER_BYTES / MAX_HEADER_BYTES).map(header).collect::<Vec<_>>()
        };
        result.exchange = Some(HttpExchange {
            method: "GET".into(),
            target: "/".repeat(MAX_URL_BYTES),
            http_version: "HTTP/1.1".into(),
            request_headers: side(),
            reason: "r".repeat(MAX_HEADER_BYTES),
            response_headers: side(),
            headers_left_out: u32::MAX,
            remote_ip: Some("2001:db8::1".into()),
        });
        assert_eq!(result.validate(), Ok(()));
        for size in [0, 1000, 3 << 20] {
            result.body = vec![b'b'; size];
            result.size_bytes = size as u64;
            let encoded = recrawl_schemas::encode(&result).unwrap().len();
            assert!(encoded <= size + RESULT_OVERHEAD_BYTES, "{encoded} for a body of {size}");
            // The bound is not loose by an order of magnitude either.
            assert!(encoded > size + RESULT_OVERHEAD_BYTES / 2, "{encoded} for a body of {size}");
        }
    }

    #[tokio::test]
    async fn validators_on_the_pick_make_a_conditional_request() {
        let address = serve(conditional_page()).await;
        let fetcher = Fetcher::new(test_config()).unwrap();
        let url = format!("http://{address}/page");
        let first = fetcher.fetch(&pick_for(&url), &any_redirect).await;
        assert_eq!((first.outcome, first.body.as_slice()), (FetchOutcome::Downloaded, &b"<p>v1</p>"[..]));
        let by_etag = PagePick { etag: first.etag.clone(), ..pick_for(&url) };
        let by_date = PagePick { last_modified: first.last_modified.clone(), ..pick_for(&url) };
        for pick in [by_etag, by_date] {
            let again = fetcher.fetch(&pick, &any_redirect).await;
            assert_eq!(again.outcome, FetchOutcome::NotModified, "{pick:?}");
            assert_eq!((again.http_status, again.size_bytes), (Some(304), 0));
            assert!(again.body.is_empty());
        }
        let stale = PagePick { etag: Some("\"v0\"".into()), ..pick_for(&url) };
        assert_eq!(fetcher.fetch(&stale, &any_redirect).await.outcome, FetchOutcome::Downloaded);
    }

    #[tokio::test]
    async fn a_slow_trickle_past_the_timeout_is_a_timeout() {
        let router = Router::new().route(
            "/trickle",
            get(|| async {
                let drip = stream::unfold((), |()| async {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Some((Ok::<_, Infallible>(Bytes::from_static(b"x")), ()))
                });
                ([(CONTENT_TYPE, "text/html")], Body::from_stream(drip))
            }),
        );
        let address = serve(router).await;
        let request_timeout = Duration::from_millis(400);
        let fetcher = Fetcher::new(FetchConfig { request_timeout, ..test_config() }).unwrap();
        let result = fetcher.fetch(&pick_for(&format!("http://{address}/trickle")), &any_redirect).await;
        assert_eq!(result.outcome, FetchOutcome::Timeout, "{:?}", result.error);
        assert!(result.size_bytes > 0, "bytes arrived before the cut");
        assert!(result.body.is_empty());
        assert!(result.latency_ms >= 400.0, "{}", result.latency_ms);
    }

    #[tokio::test]
    async fn other_types_are_recorded_without_their_body() {
        // An endless body: reading it would end in a timeout or body_too_large.
        let router = Router::new().route(
            "/paper.pdf",
            get(|| async { ([(CONTENT_TYPE, "application/pdf")], streamed_body(&[100], true)) }),
        );
        let result = fetch_from(router, "/paper.pdf").await;
        assert_eq!(result.outcome, FetchOutcome::UnsupportedType, "{:?}", result.error);
        assert_eq!((result.http_status, result.size_bytes), (Some(200), 0));
        assert_eq!(result.content_type.as_deref(), Some("application/pdf"));
        assert!(result.outcome.is_download() && result.body.is_empty());
    }

    #[tokio::test]
    async fn too_many_requests_reports_retry_after() {
        let router = Router::new().route(
            "/busy",
            get(|| async { (StatusCode::TOO_MANY_REQUESTS, [(RETRY_AFTER, "120")], "slow down") }),
        );
        let result = fetch_from(router, "/busy").await;
        assert_eq!((result.outcome, result.http_status), (FetchOutcome::HttpStatus, Some(429)));
        assert_eq!(result.retry_after_ms, Some(120_000));
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        let header = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(RETRY_AFTER, HeaderValue::from_static(value));
            retry_after(&headers, now)
        };
        assert_eq!(header("30"), Some(30_000));
        // 1_445_412_480 is Wed, 21 Oct 2015 07:28:00 GMT.
        assert_eq!(header("Wed, 21 Oct 2015 07:29:30 GMT"), Some(90_000));
        assert_eq!(header("Wed, 21 Oct 2015 07:00:00 GMT"), Some(0));
        assert_eq!(header("soon"), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[tokio::test]
    async fn internal_addresses_are_refused_unless_allowed() {
        let router = Router::new().route("/", get(|| async { axum::response::Html("inside") }));
        let address = serve(router).await;
        let refusing = Fetcher::new(FetchConfig {
            resolver: GuardedResolver::new(AddressPolicy::default(), Vec::new()),
            ..test_config()
        })
        .unwrap();
        let loopback = refusing.fetch(&pick_for(&format!("http://{address}/")), &any_redirect).await;
        assert_eq!(loopback.outcome, FetchOutcome::BlockedAddress, "{:?}", loopback.error);
        assert!(loopback.error.as_deref().unwrap_or_default().contains("loopback"));
        let metadata =
            refusing.fetch(&pick_for("http://169.254.169.254/latest/meta-data/"), &any_redirect).await;
        assert_eq!(metadata.outcome, FetchOutcome::BlockedAddress);
        assert!(metadata.error.as_deref().unwrap_or_default().contains("metadata"));
        // A name is judged by what it resolves to.
        let named = Fetcher::new(FetchConfig {
            resolver: GuardedResolver::new(
                AddressPolicy::default(),
                vec![("intranet.test".into(), "10.1.2.3".parse().unwrap())],
            ),
            ..test_config()
        })
        .unwrap();
        let private = named.fetch(&pick_for("http://intranet.test/"), &any_redirect).await;
        assert_eq!(private.outcome, FetchOutcome::BlockedAddress);
        assert!(private.error.as_deref().unwrap_or_default().contains("private"));
        // The allow-list of the test config lets the same server through.
        let allowed = Fetcher::new(test_config())
            .unwrap()
            .fetch(&pick_for(&format!("http://{address}/")), &any_redirect)
            .await;
        assert_eq!(allowed.outcome, FetchOutcome::Downloaded);
    }

    #[tokio::test]
    async fn every_redirect_hop_is_checked() {
        let router = Router::new()
            .route("/out", get(|| async { Redirect::temporary("http://169.254.169.254/latest/meta-data/") }));
        let result = fetch_from(router, "/out").await;
        assert_eq!(result.outcome, FetchOutcome::BlockedAddress, "{:?}", result.error);
        assert_eq!(result.redirects, ["http://169.254.169.254/latest/meta-data/"]);
        assert_eq!(result.final_url.as_deref(), Some("http://169.254.169.254/latest/meta-data/"));
    }

    #[tokio::test]
    async fn unknown_names_are_dns_failures() {
        let result = Fetcher::new(test_config())
            .unwrap()
            .fetch(&pick_for("http://nonexistent.invalid/"), &any_redirect)
            .await;
        assert_eq!(result.outcome, FetchOutcome::Dns, "{:?}", result.error);
    }

    #[tokio::test]
    async fn a_failed_handshake_is_a_tls_failure() {
        let address = serve(Router::new().route("/", get(|| async { "plain" }))).await;
        let fetcher = Fetcher::new(test_config()).unwrap();
        let result = fetcher.fetch(&pick_for(&format!("https://{address}/")), &any_redirect).await;
        assert_eq!(result.outcome, FetchOutcome::Tls, "{:?}", result.error);
    }

    #[tokio::test]
    async fn credentials_stay_out_of_error_texts() {
        let closed = recrawl_common::http::free_local_port().unwrap();
        // No record may carry such a URL; one built past the checks is still never sent.
        let pick = PagePick {
            url: format!("http://crawler:s3cret@{closed}/"),
            ..pick_for(&format!("http://{closed}/"))
        };
        let result = Fetcher::new(test_config()).unwrap().fetch(&pick, &any_redirect).await;
        assert_eq!(result.outcome, FetchOutcome::Other);
        let error = result.error.unwrap_or_default();
        assert!(!error.contains("s3cret") && error.contains("user name or password"), "{error}");
        assert_eq!(redacted("http://crawler:s3cret@example.com/a"), "http://example.com/a");
        assert_eq!(redacted("http://crawler:s3cret@exa mple.com/a"), "http://exa mple.com/a");
        assert_eq!(redacted("http://example.com/a@b"), "http://example.com/a@b");
    }

    #[tokio::test]
    async fn redirects_past_the_limit_are_too_many() {
        let result = fetch_from(redirect_chain(), "/hop/3").await;
        assert_eq!(result.outcome, FetchOutcome::TooManyRedirects);
        assert_eq!(result.http_status, None);
        assert!(result.error.unwrap_or_default().contains("redirect"));
    }

    #[tokio::test]
    async fn gzip_bodies_are_decoded() {
        // "hello from gzip", gzip-compressed.
        const GZIPPED: [u8; 35] = [
            31, 139, 8, 0, 0, 0, 0, 0, 2, 3, 203, 72, 205, 201, 201, 87, 72, 43, 202, 207, 85, 72, 175, 202,
            44, 0, 0, 100, 170, 142, 181, 15, 0, 0, 0,
        ];
        let router = Router::new().route(
            "/zipped",
            get(|| async { ([(CONTENT_ENCODING, "gzip"), (CONTENT_TYPE, "text/html")], &GZIPPED[..]) }),
        );
        let result = fetch_from(router, "/zipped").await;
        assert_eq!(result.outcome, FetchOutcome::Downloaded, "{:?}", result.error);
        assert_eq!(result.body, b"hello from gzip");
        assert_eq!(result.size_bytes, 15);
    }

    #[tokio::test]
    async fn oversized_content_length_is_refused_before_reading() {
        let router = Router::new().route(
            "/big",
            get(|| async { ([(CONTENT_TYPE, "text/html")], vec![b'x'; SMALL_CAP as usize + 1]) }),
        );
        let result = fetch_from(router, "/big").await;
        assert_eq!(result.outcome, FetchOutcome::BodyTooLarge);
        assert_eq!(result.size_bytes, 0);
        assert!(result.body.is_empty());
        assert!(result.error.unwrap_or_default().contains("Content-Length 1025"));
    }

    #[tokio::test]
    async fn streamed_body_is_abandoned_once_past_the_cap() {
        // The stream stalls after passing the cap, so a reader that waited for the end
        // would report a timeout instead.
        let router = Router::new().route("/endless", get(|| async { streamed_body(&[600, 600], true) }));
        let result = fetch_from(router, "/endless").await;
        assert_eq!(result.outcome, FetchOutcome::BodyTooLarge, "{:?}", result.error);
        assert!(result.size_bytes > SMALL_CAP && result.size_bytes <= 1200, "{}", result.size_bytes);
        assert!(result.body.is_empty());
    }

    #[tokio::test]
    async fn a_truncating_read_keeps_the_first_cap_bytes_and_stops() {
        // The body stalls after passing the cap, so only a reader that stops at the cap
        // answers before the timeout; a Content-Length past the cap is no reason to refuse.
        let router = Router::new()
            .route("/endless", get(|| async { streamed_body(&[600, 600], true) }))
            .route("/announced", get(|| async { vec![b'y'; 3000] }));
        let address = serve(router).await;
        let fetcher = Fetcher::new(test_config()).unwrap();
        let reading = Reading {
            cap: SMALL_CAP,
            any_type: true,
            truncate: true,
            least_redirects: 0,
            stop_at_moved: false,
            more_from_origin: false,
        };
        for (path, byte) in [("/endless", b'x'), ("/announced", b'y')] {
            let url = Url::parse(&format!("http://{address}{path}")).unwrap();
            let answer = fetcher.get_document(url, reading, &any_redirect).await.unwrap();
            assert!(answer.truncated, "{path}");
            assert_eq!(answer.body, Some(vec![byte; 1024]), "{path}");
        }
    }

    #[tokio::test]
    async fn an_endless_body_ends_at_the_cap() {
        let endless = stream::repeat_with(|| Ok::<_, Infallible>(Bytes::from_static(&[b'x'; 100])));
        let router = Router::new().route("/endless", get(|| async { Body::from_stream(endless) }));
        let result = fetch_from(router, "/endless").await;
        assert_eq!(result.outcome, FetchOutcome::BodyTooLarge, "{:?}", result.error);
        assert!(result.body.is_empty());
    }

    /// A gzip member of `1 + 258 * copies` zero bytes, about 1/160 of that size: a zero,
    /// then copies of the previous 258 bytes, in one fixed-Huffman deflate block.
    fn gzip_of_zeros(copies: usize) -> (Vec<u8>, usize) {
        struct Bits {
            out: Vec<u8>,
            pending: u32,
            count: u32,
        }
        impl Bits {
            /// Appends the low `count` bits of `value`, first bit first as deflate packs.
            fn push(&mut self, value: u32, count: u32) {
                for bit in 0..count {
                    self.pending |= ((value >> bit) & 1) << self.count;
                    self.count += 1;
                    if self.count == 8 {
                        self.out.push(self.pending as u8);
                        (self.pending, self.count) = (0, 0);
                    }
                }
            }
            /// Huffman codes go most significant bit first.
            fn code(&mut self, code: u32, count: u32) {
                for bit in (0..count).rev() {
                    self.push(code >> bit, 1);
                }
            }
        }
        let len = 1 + 258 * copies;
        let mut bits = Bits { out: vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff], pending: 0, count: 0 };
        bits.push(1, 1); // the last block
        bits.push(1, 2); // fixed Huffman codes
        bits.code(0b0011_0000, 8); // literal 0
        for _ in 0..copies {
            bits.code(0b1100_0101, 8); // length 258
            bits.code(0, 5); // distance 1
        }
        bits.code(0, 7); // end of block
        bits.push(0, 7); // to a byte boundary
        let mut crc = !0u32;
        for _ in 0..len {
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        let mut gzip = bits.out;
        gzip.extend_from_slice(&(!crc).to_le_bytes());
        gzip.extend_from_slice(&(len as u32).to_le_bytes());
        (gzip, len)
    }

    #[tokio::test]
    async fn a_gzip_bomb_ends_at_the_cap_without_being_inflated() {
        let (bomb, len) = gzip_of_zeros(16 * 1024);
        assert!(bomb.len() * 100 < len, "{} bytes inflate to {len}", bomb.len());
        let bomb = Bytes::from(bomb);
        let router = Router::new().route(
            "/bomb",
            get(move || async move { ([(CONTENT_ENCODING, "gzip"), (CONTENT_TYPE, "text/html")], bomb) }),
        );
        let address = serve(router).await;
        let url = format!("http://{address}/bomb");
        let result = Fetcher::new(test_config()).unwrap().fetch(&pick_for(&url), &any_redirect).await;
        assert_eq!(result.outcome, FetchOutcome::BodyTooLarge, "{:?}", result.error);
        assert!(result.size_bytes < len as u64 / 10, "inflated {} of {len} bytes", result.size_bytes);
        // The bomb is valid gzip: read with room for it all, it inflates to every zero.
        let reading = Reading {
            cap: len as u64,
            any_type: false,
            truncate: false,
            least_redirects: 0,
            stop_at_moved: false,
            more_from_origin: false,
        };
        let answer = Fetcher::new(test_config())
            .unwrap()
            .get_document(Url::parse(&url).unwrap(), reading, &any_redirect)
            .await;
        assert_eq!(answer.unwrap().body, Some(vec![0; len]));
    }

    /// A server on 127.0.0.1 answering each connection with `response`, raw, once it has
    /// read the request, then closing the connection.
    async fn raw_server(response: Vec<u8>) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let response = response.clone();
                tokio::spawn(async move {
                    let mut request = [0; 4096];
                    let _ = socket.read(&mut request).await;
                    let _ = socket.write_all(&response).await;
                });
            }
        });
        address
    }

    #[tokio::test]
    async fn a_connection_closed_mid_body_is_a_failure() {
        let response =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\n\r\n<p>cut".to_vec();
        let address = raw_server(response).await;
        let result = Fetcher::new(test_config())
            .unwrap()
            .fetch(&pick_for(&format!("http://{address}/")), &any_redirect)
            .await;
        assert_eq!(result.outcome, FetchOutcome::Other, "{:?}", result.error);
        assert!(result.body.is_empty() && result.error.is_some());
    }

    #[tokio::test]
    async fn a_hundred_kilobytes_of_headers_is_a_failure() {
        let mut response = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n".to_vec();
        for i in 0..1000 {
            response.extend_from_slice(format!("X-Filler-{i:04}: {}\r\n", "f".repeat(84)).as_bytes());
        }
        response.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
        assert!(response.len() > 100_000);
        let address = raw_server(response).await;
        let result = Fetcher::new(test_config())
            .unwrap()
            .fetch(&pick_for(&format!("http://{address}/")), &any_redirect)
            .await;
        assert_eq!(result.outcome, FetchOutcome::Other, "{:?}", result.error);
        assert_eq!(result.http_status, None);
    }

    #[tokio::test]
    async fn streamed_body_exactly_at_the_cap_is_kept() {
        let router = Router::new().route("/full", get(|| async { streamed_body(&[512, 512], false) }));
        let result = fetch_from(router, "/full").await;
        assert_eq!(result.outcome, FetchOutcome::Downloaded, "{:?}", result.error);
        assert_eq!(result.size_bytes, SMALL_CAP);
        assert_eq!(result.body.len() as u64, SMALL_CAP);
    }

    #[tokio::test]
    async fn unanswered_request_times_out() {
        let router = Router::new().route("/stall", get(std::future::pending::<&'static str>));
        let address = serve(router).await;
        let request_timeout = Duration::from_millis(200);
        let fetcher = Fetcher::new(FetchConfig { request_timeout, ..test_config() }).unwrap();
        let result = fetcher.fetch(&pick_for(&format!("http://{address}/stall")), &any_redirect).await;
        assert_eq!(result.outcome, FetchOutcome::Timeout, "{:?}", result.error);
        assert_eq!(result.http_status, None);
        assert!(result.latency_ms >= request_timeout.as_secs_f64() * 1000.0, "{}", result.latency_ms);
    }

    #[tokio::test]
    async fn closed_port_is_a_connect_error() {
        let closed_address = recrawl_common::http::free_local_port().unwrap();
        let fetcher = Fetcher::new(test_config()).unwrap();
        let result = fetcher.fetch(&pick_for(&format!("http://{closed_address}/")), &any_redirect).await;
        assert_eq!(result.outcome, FetchOutcome::Connect, "{:?}", result.error);
        assert_eq!(result.http_status, None);
        let error = result.error.unwrap_or_default();
        assert!(error.to_lowercase().contains("connection refused"), "{error}");
    }

    #[tokio::test]
    async fn unparsable_pick_url_is_other_error() {
        let pick = PagePick { url: "not a url".to_owned(), ..pick_for("http://127.0.0.1/") };
        let result = Fetcher::new(test_config()).unwrap().fetch(&pick, &any_redirect).await;
        assert_eq!(result.outcome, FetchOutcome::Other);
        assert_eq!(result.url, "not a url");
        assert!(result.error.unwrap_or_default().contains("not a url"));
    }

    #[tokio::test]
    async fn non_utf8_header_values_are_skipped() {
        let router = Router::new().route(
            "/odd",
            get(|| async {
                let etag = HeaderValue::from_bytes(b"\"\xff\"").unwrap();
                let html = HeaderValue::from_static("text/html");
                (
                    [
                        (ETAG, etag),
                        (LAST_MODIFIED, HeaderValue::from_static("yesterday")),
                        (CONTENT_TYPE, html),
                    ],
                    "body",
                )
            }),
        );
        let result = fetch_from(router, "/odd").await;
        assert_eq!(result.outcome, FetchOutcome::Downloaded);
        assert_eq!(result.etag, None);
        assert_eq!(result.last_modified.as_deref(), Some("yesterday"));
    }

    #[test]
    fn invalid_user_agent_is_a_setup_error() {
        let config = FetchConfig { user_agent: "line\nbreak".to_owned(), ..FetchConfig::default() };
        assert!(matches!(Fetcher::new(config), Err(FetchSetupError::Client(_))));
    }
}
