//! Serving a batch of picks politely: robots.txt first, then at most
//! `connections_per_host` requests to a host at a time, each starting at least the host's
//! delay (the larger of `--min-host-delay-ms` and its Crawl-delay) after the previous one
//! to that host started and ended, never before a 429/503's Retry-After has passed, and
//! never more than `--concurrency` in flight overall.
//!
//! A pick whose host cannot be served before the pick's deadline (the end of its period) is
//! reported `deferred`; one that could, but not within the batch's time budget, is handed
//! back to be requeued when the budget is spent (at once on shutdown), so the stage never
//! holds its input for long and a paused host's picks do not circle through the topic.
//! Picks arrive keyed by host, so one instance owns each host's politeness; the hosts of a
//! batch run as concurrent tasks.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use recrawl_common::unix_ms;
#[cfg(test)]
use recrawl_schemas::AnnouncingDocument;
use recrawl_schemas::{FetchOutcome, FetchResult, PageAnnouncement, PagePick};
use tokio::sync::Semaphore;
use tokio::task::{self, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::announce::AnnouncementLimits;
use crate::announcements::{self, Announced, Context};
use crate::clock::later;
use crate::gate::SharedGate;
use crate::http::{
    any_redirect, error_text, moved_to, redacted, unanswered, Answer, DocumentFailure, Fetcher, Hop, Reading,
};
use crate::links::{extract_links, is_html, LinkFilter, PageLinks};
use crate::metrics::FetchMetrics;
use crate::robots::{agent_token, whole_lines, RobotsCache, RobotsLifetimes, RobotsRules, MAX_ROBOTS_BYTES};

/// Politeness and time limits.
#[derive(Debug, Clone)]
pub struct CrawlSettings {
    /// Least time between requests to one host (raised by its Crawl-delay).
    pub min_host_delay: Duration,
    /// Requests to one host in flight at once.
    pub connections_per_host: usize,
    /// Requests in flight at once over all hosts.
    pub concurrency: usize,
    /// A host answering 429 or 503 without `Retry-After` gets no request for this long;
    /// `None`: for the rest of the pick's period (the scheduler backs the host off for
    /// more periods as such answers repeat), or a minute for a pick with no period.
    pub overload_pause: Option<Duration>,
    /// Longest `Retry-After` honoured; a longer one is cut to this.
    pub max_retry_after: Duration,
    /// How long one batch may hold its picks; the rest are requeued.
    pub batch_budget: Duration,
    /// Bytes of bodies and found links one batch may hold before its picks not yet started
    /// are requeued: the results are published together, after the last request.
    pub batch_body_bytes: u64,
    /// Same-host `<frame>` documents fetched per page for their links.
    pub max_frames: usize,
    pub robots: RobotsLifetimes,
    /// Origins whose robots.txt is kept.
    pub robots_capacity: usize,
    /// About the memory the kept robots.txt rules may take.
    pub robots_cache_bytes: usize,
    /// The User-Agent, whose product token selects the robots.txt group.
    pub user_agent: String,
    /// How much of a sitemap or feed is read.
    pub announcement_limits: AnnouncementLimits,
}

impl Default for CrawlSettings {
    fn default() -> Self {
        Self {
            min_host_delay: Duration::from_secs(1),
            connections_per_host: 1,
            concurrency: 64,
            overload_pause: None,
            max_retry_after: Duration::from_secs(3600),
            batch_budget: Duration::from_secs(60),
            batch_body_bytes: 256 << 20,
            max_frames: 4,
            robots: RobotsLifetimes {
                ttl: Duration::from_secs(24 * 3600),
                error_ttl: Duration::from_secs(3600),
            },
            robots_capacity: 100_000,
            robots_cache_bytes: 128 << 20,
            user_agent: "recrawl/0.1".to_owned(),
            announcement_limits: AnnouncementLimits::default(),
        }
    }
}

/// How long a 429 or 503 without `Retry-After` pauses a host when the pick has no period
/// to pause it for the rest of.
const PAUSE_WITHOUT_PERIOD: Duration = Duration::from_secs(60);

/// One served pick: its result and, for a downloaded page, its links, and the pages it
/// announces (a sitemap's or feed's entries, a page's feeds).
#[derive(Debug)]
pub struct Crawled {
    pub result: FetchResult,
    pub links: PageLinks,
    pub announcements: Vec<PageAnnouncement>,
}

/// What a batch came to: results in pick order, the picks to requeue, and the sitemaps
/// the robots.txt files fetched for it name.
#[derive(Debug, Default)]
pub struct CrawlOutput {
    pub crawled: Vec<Crawled>,
    pub requeued: Vec<PagePick>,
    pub announcements: Vec<PageAnnouncement>,
}

/// A pick's place in its batch.
type Indexed = (usize, PagePick);

enum Served {
    Done(Box<Crawled>),
    Requeue(PagePick),
}

/// What robots.txt says about an origin, for this batch.
#[derive(Clone)]
enum Robots {
    Rules(Arc<RobotsRules>),
    /// The file could not be fetched (DNS, connection, TLS, timeout, refused address):
    /// the host is unreachable, so its picks fail the same way without more requests.
    Unreachable {
        outcome: FetchOutcome,
        error: String,
    },
    /// The batch ran out of time, or shutdown began, before the file could be fetched.
    NotYet,
}

/// What every host task of a batch shares.
struct Shared {
    fetcher: Fetcher,
    settings: CrawlSettings,
    filter: LinkFilter,
    agent: String,
    robots: Mutex<RobotsCache>,
    /// Each host's gate, kept across batches: a host's task holds its own, and a redirect
    /// to a host takes a slot of that host's.
    gates: Mutex<HashMap<String, SharedGate>>,
    permits: Semaphore,
    /// Bytes of bodies, links and announcements the batch's results hold so far.
    batch_bytes: AtomicU64,
    /// The sitemaps named by the robots.txt files fetched in this batch.
    robots_announced: Mutex<Vec<PageAnnouncement>>,
    /// Sitemaps and feeds read at once: each may hold 50 MB of XML text while it is read.
    documents: Semaphore,
    metrics: FetchMetrics,
    shutdown: CancellationToken,
    /// The host whose task panics, to test that a panic costs only that host's picks.
    #[cfg(test)]
    panic_on_host: Option<String>,
}

/// The fetch stage's crawling state: robots.txt rules and each host's gate, kept across
/// batches.
pub struct Crawler {
    shared: Arc<Shared>,
    prune_at: usize,
}

impl std::fmt::Debug for Crawler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crawler").field("hosts", &lock(&self.shared.gates).len()).finish_non_exhaustive()
    }
}

const MIN_PRUNE_AT: usize = 1024;

impl Crawler {
    pub fn new(
        fetcher: Fetcher,
        settings: CrawlSettings,
        filter: LinkFilter,
        metrics: FetchMetrics,
        shutdown: CancellationToken,
    ) -> Self {
        let robots = Mutex::new(RobotsCache::new(
            settings.robots,
            settings.robots_capacity,
            settings.robots_cache_bytes,
        ));
        let agent = agent_token(&settings.user_agent).to_owned();
        let permits = Semaphore::new(settings.concurrency.max(1));
        let shared = Shared {
            fetcher,
            settings,
            filter,
            agent,
            robots,
            gates: Mutex::default(),
            permits,
            batch_bytes: AtomicU64::new(0),
            robots_announced: Mutex::default(),
            documents: Semaphore::new(DOCUMENTS_READ_AT_ONCE),
            metrics,
            shutdown,
            #[cfg(test)]
            panic_on_host: None,
        };
        Self { shared: Arc::new(shared), prune_at: MIN_PRUNE_AT }
    }

    /// Serves `picks`; the hosts run concurrently, each host's picks in order. A host
    /// task that panics costs only its own picks, which end as `other`: failing the batch
    /// would replay the same picks into the same panic, over and over.
    pub async fn crawl(&mut self, picks: Vec<PagePick>) -> CrawlOutput {
        let budget_end = later(Instant::now(), self.shared.settings.batch_budget);
        self.shared.batch_bytes.store(0, Ordering::Relaxed);
        let mut by_host: HashMap<String, Vec<Indexed>> = HashMap::new();
        let total = picks.len();
        for (index, pick) in picks.into_iter().enumerate() {
            by_host.entry(pick.host.clone()).or_default().push((index, pick));
        }
        let mut tasks = JoinSet::new();
        // What each task was given, to answer for its picks should it panic.
        let mut running: HashMap<task::Id, (String, SharedGate, Vec<Indexed>)> = HashMap::new();
        for (host, picks) in by_host {
            self.shared.metrics.host_queue_depth.observe(picks.len() as f64);
            let gate = gate_of(&self.shared, &host);
            let shared = self.shared.clone();
            let given = picks.clone();
            #[cfg(test)]
            let panics = shared.panic_on_host.as_deref() == Some(host.as_str());
            let task_gate = Arc::clone(&gate);
            let id = tasks
                .spawn(async move {
                    #[cfg(test)]
                    assert!(!panics, "the test's host task panics");
                    serve_host(&shared, picks, &task_gate, budget_end).await
                })
                .id();
            running.insert(id, (host, gate, given));
        }
        let mut slots: Vec<Option<Served>> = (0..total).map(|_| None).collect();
        while let Some(joined) = tasks.join_next_with_id().await {
            let served = match joined {
                Ok((id, served)) => {
                    running.remove(&id);
                    served
                }
                Err(error) => {
                    let Some((host, gate, given)) = running.remove(&error.id()) else { continue };
                    tracing::error!(%host, picks = given.len(), %error, "a host task failed; its picks end as other");
                    // What the task sent before it failed is unknown: count a request as
                    // having just ended, so the host still gets its delay.
                    lock(&gate).last_end = Some(Instant::now());
                    given.iter().map(|(index, pick)| (*index, internal_error(pick))).collect()
                }
            };
            for (index, item) in served {
                if let Some(slot) = slots.get_mut(index) {
                    *slot = Some(item);
                }
            }
        }
        self.prune_gates();
        let mut output = CrawlOutput::default();
        for served in slots.into_iter().flatten() {
            match served {
                Served::Done(crawled) => output.crawled.push(*crawled),
                Served::Requeue(pick) => output.requeued.push(pick),
            }
        }
        self.shared.metrics.requeued.inc_by(output.requeued.len() as u64);
        output.announcements = std::mem::take(&mut *lock(&self.shared.robots_announced));
        output
    }

    /// Forgets hosts whose gates no longer constrain anything, once their number doubles.
    /// Between batches, so no task holds a gate.
    fn prune_gates(&mut self) {
        let mut gates = lock(&self.shared.gates);
        if gates.len() < self.prune_at {
            return;
        }
        let now = Instant::now();
        let min_delay = self.shared.settings.min_host_delay;
        gates.retain(|_, gate| !lock(gate).is_spent(now, min_delay));
        self.prune_at = gates.len().saturating_mul(2).max(MIN_PRUNE_AT);
    }
}

/// Serves one host's picks: robots.txt per origin, then the picks over
/// `connections_per_host` lanes.
async fn serve_host(
    shared: &Shared,
    picks: Vec<Indexed>,
    gate: &SharedGate,
    budget_end: Instant,
) -> Vec<(usize, Served)> {
    let mut robots: HashMap<String, Robots> = HashMap::new();
    for (_, pick) in &picks {
        let origin = origin_of(&pick.url);
        if let std::collections::hash_map::Entry::Vacant(entry) = robots.entry(origin) {
            let rules = robots_for(shared, entry.key(), pick, gate, budget_end).await;
            entry.insert(rules);
        }
    }
    let queue = Mutex::new(VecDeque::from(picks));
    let lanes = (0..shared.settings.connections_per_host.max(1)).map(|_| async {
        let mut served = Vec::new();
        loop {
            // Popped in its own statement: the guard must not live across the await.
            let next = {
                let mut queue = lock(&queue);
                queue.pop_front().map(|next| (next, !queue.is_empty()))
            };
            let Some(((index, pick), more)) = next else { break };
            let rules = robots.get(&origin_of(&pick.url)).cloned().unwrap_or(Robots::NotYet);
            served.push((index, serve_pick(shared, pick, rules, more, gate, budget_end).await));
        }
        served
    });
    futures::future::join_all(lanes).await.into_iter().flatten().collect()
}

/// `host`'s gate, a new one if it has none.
fn gate_of(shared: &Shared, host: &str) -> SharedGate {
    Arc::clone(lock(&shared.gates).entry(host.to_owned()).or_default())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The guarded values stay consistent at every await-free critical section's end, so
    // a panic elsewhere leaves nothing half-done.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `scheme://host[:port]` of a URL, the unit robots.txt applies to.
fn origin_of(url: &str) -> String {
    Url::parse(url).map(|u| u.origin().ascii_serialization()).unwrap_or_default()
}

/// Where a request stands, for deciding on its redirects: the pick's host, whose slot it
/// holds, and the origin it asked, whose robots.txt says `rules`.
struct Asked<'a> {
    shared: &'a Shared,
    host: &'a str,
    origin: &'a str,
    rules: &'a Arc<RobotsRules>,
    deadline: Option<Instant>,
    /// When the request began: a hop waits for a slot for at most half its timeout.
    started: Mutex<Instant>,
    /// Other hosts the request has hopped to, whose slots it holds.
    hopped: Mutex<Vec<String>>,
}

impl<'a> Asked<'a> {
    fn new(
        shared: &'a Shared,
        host: &'a str,
        origin: &'a str,
        rules: &'a Arc<RobotsRules>,
        deadline: Option<Instant>,
    ) -> Self {
        let started = Mutex::new(Instant::now());
        Self { shared, host, origin, rules, deadline, started, hopped: Mutex::default() }
    }

    /// The request begins now.
    fn begin(&self) {
        *lock(&self.started) = Instant::now();
    }
}

/// What becomes of a redirect to `target`. The robots.txt of the target's origin decides,
/// fetched and cached when not known yet; one that cannot be fetched ends the request as
/// a pick of that origin would end. A hop within the pick's host, or to a host the request
/// already hopped to, is part of the request. A hop to another host takes that host's next
/// polite slot, as its own picks do, if it comes within half the request timeout and the
/// host has a connection free (`deferred` otherwise); the slot covers the robots.txt
/// request and the hop, and the host counts the request as its own until it ends. Hosts
/// are known to this instance only: another fetch instance may own the target host.
async fn redirect_verdict(asked: &Asked<'_>, target: Url) -> Hop {
    let shared = asked.shared;
    let Ok(target_host) = recrawl_schemas::host_of(target.as_str()) else {
        return Hop::Refused { outcome: FetchOutcome::Other, reason: "the target names no host".to_owned() };
    };
    let target_origin = target.origin().ascii_serialization();
    let elsewhere = (target_host != asked.host && !lock(&asked.hopped).contains(&target_host))
        .then(|| gate_of(shared, &target_host));
    let cached = || lock(&shared.robots).get(&target_origin, Instant::now());
    let mut under_way = None;
    let rules = if target_origin == asked.origin {
        Arc::clone(asked.rules)
    } else if let Some(rules) = cached() {
        rules
    } else {
        if let Some(gate) = &elsewhere {
            match take_slot(asked, gate, &target_host).await {
                Ok(taken) => under_way = Some(taken),
                Err(refused) => return refused,
            }
        }
        // Another hop there may have fetched it while this one waited for the slot.
        match cached() {
            Some(rules) => rules,
            None => {
                let Some(robots_url) = robots_url(&target_origin) else {
                    let reason = format!("no robots.txt URL for {target_origin:?}");
                    return Hop::Refused { outcome: FetchOutcome::Other, reason };
                };
                let answer = shared.fetcher.get_document(robots_url, ROBOTS_READING, &any_redirect).await;
                match cache_robots(shared, &target_origin, answer).await {
                    Ok(rules) => rules,
                    Err(DocumentFailure { reason, out_of_descriptors: true, .. }) => {
                        return Hop::OutOfDescriptors(reason)
                    }
                    Err(DocumentFailure { outcome, reason, .. }) => return Hop::Refused { outcome, reason },
                }
            }
        }
    };
    if !rules.allows_without_blocking(target.as_str()).await {
        return Hop::Disallowed;
    }
    let Some(gate) = elsewhere else { return Hop::Follow(None) };
    {
        let mut gate = lock(&gate);
        gate.crawl_delay = gate.crawl_delay.max(rules.crawl_delay());
    }
    let under_way = match under_way {
        Some(taken) => taken,
        None => match take_slot(asked, &gate, &target_host).await {
            Ok(taken) => taken,
            Err(refused) => return refused,
        },
    };
    lock(&asked.hopped).push(target_host);
    Hop::Follow(Some(Box::new(under_way)))
}

/// `host`'s next polite slot for a hop, waited for, with the request then under way there.
async fn take_slot(asked: &Asked<'_>, gate: &SharedGate, host: &str) -> Result<UnderWay, Hop> {
    let shared = asked.shared;
    let deferred = |reason: String| Hop::Refused { outcome: FetchOutcome::Deferred, reason };
    let shutting_down = || deferred("the stage is shutting down".to_owned());
    if shared.shutdown.is_cancelled() {
        return Err(shutting_down());
    }
    let half_timeout = shared.fetcher.request_timeout().checked_div(2).unwrap_or_default();
    let by = later(*lock(&asked.started), half_timeout);
    let by = asked.deadline.map_or(by, |deadline| deadline.min(by));
    match claim_slot(shared, gate, Some(by), by).await {
        Slot::Claimed(under_way) => Ok(under_way),
        Slot::Missed => {
            let next = lock(gate).earliest(Instant::now(), shared.settings.min_host_delay);
            let wait = next.saturating_duration_since(Instant::now());
            Err(deferred(format!("{host}'s next polite slot is in {wait:?}, or it is busy")))
        }
        Slot::ShuttingDown => Err(shutting_down()),
    }
}

fn robots_url(origin: &str) -> Option<Url> {
    Url::parse(origin).and_then(|origin| origin.join("/robots.txt")).ok()
}

/// robots.txt is read whatever its type, and one past [`MAX_ROBOTS_BYTES`] only that far,
/// as RFC 9309 §2.5 allows.
const ROBOTS_READING: Reading = Reading {
    cap: MAX_ROBOTS_BYTES,
    any_type: true,
    truncate: true,
    least_redirects: ROBOTS_REDIRECTS,
    stop_at_moved: false,
    // The site's pages follow.
    more_from_origin: true,
};

/// Redirects followed for a robots.txt whatever `--max-redirects` says: past them (or in
/// a loop) the file counts as unavailable, as a 4xx (RFC 9309 §2.3.1.2).
const ROBOTS_REDIRECTS: usize = 5;

/// The cached rules of `origin`, or fetches its robots.txt in the host's next slot (for
/// `pick`, which the sitemaps it names are announced with).
async fn robots_for(
    shared: &Shared,
    origin: &str,
    pick: &PagePick,
    gate: &SharedGate,
    budget_end: Instant,
) -> Robots {
    let cached = lock(&shared.robots).get(origin, Instant::now());
    if let Some(rules) = cached {
        lock(gate).crawl_delay = rules.crawl_delay();
        return Robots::Rules(rules);
    }
    let Some(robots_url) = robots_url(origin) else {
        return Robots::Unreachable {
            outcome: FetchOutcome::Other,
            error: format!("no robots.txt URL for {origin:?}"),
        };
    };
    let Slot::Claimed(claimed) = claim_slot(shared, gate, None, budget_end).await else {
        return Robots::NotYet;
    };
    let answer = request(shared, claimed, || {
        shared.fetcher.get_document(robots_url.clone(), ROBOTS_READING, &any_redirect)
    })
    .await;
    match cache_robots(shared, origin, answer).await {
        Ok(rules) => {
            lock(gate).crawl_delay = rules.crawl_delay();
            // Only a file that was read names sitemaps, or lets /sitemap.xml be guessed.
            if matches!(*rules, RobotsRules::Parsed { .. } | RobotsRules::AllowAll) {
                // At the depth of a seed's links, whatever pick came first: the file is the
                // site's, and is cached for the pages of every depth.
                let context = Context { period: pick.period, depth: 0, fetched_at_ms: unix_ms() };
                let named = announcements::of_robots(&robots_url, &pick.host, rules.sitemaps(), context);
                count_announced(shared, &named);
                lock(&shared.robots_announced).extend(named.records);
            }
            Robots::Rules(rules)
        }
        Err(DocumentFailure { out_of_descriptors: true, .. }) => Robots::NotYet,
        Err(DocumentFailure { outcome, reason, .. }) => Robots::Unreachable { outcome, error: reason },
    }
}

/// The rules an answer for `origin`'s robots.txt stands for, parsed and cached; or, when
/// there was no answer, the outcome its pages get and why.
async fn cache_robots(
    shared: &Shared,
    origin: &str,
    answer: Result<Answer, DocumentFailure>,
) -> Result<Arc<RobotsRules>, DocumentFailure> {
    let metrics = &shared.metrics;
    let answer = match answer {
        Ok(answer) => answer,
        Err(DocumentFailure { outcome: FetchOutcome::TooManyRedirects, .. }) => {
            metrics.robots.with_label_values(&["absent"]).inc();
            return Ok(lock(&shared.robots).insert(origin, RobotsRules::AllowAll, false, Instant::now()));
        }
        // Nothing learned of the site: not cached, and its picks tried again.
        Err(failure) if failure.out_of_descriptors => {
            metrics.out_of_descriptors.inc();
            return Err(failure);
        }
        Err(failure) => {
            metrics.robots.with_label_values(&["unreachable"]).inc();
            return Err(DocumentFailure { reason: format!("robots.txt: {}", failure.reason), ..failure });
        }
    };
    let (body, status, agent) =
        (answer.body.unwrap_or_default(), answer.status.as_u16(), shared.agent.clone());
    let truncated = answer.truncated;
    // Off the async threads: a file of thousands of wildcard rules takes seconds to
    // compile, and other hosts' requests must not wait for it.
    let parsed = tokio::task::spawn_blocking(move || {
        let body = if truncated { whole_lines(&body) } else { &body };
        RobotsRules::from_answer(status, body, &agent)
    })
    .await;
    let (rules, server_failure) = parsed.unwrap_or_else(|error| {
        (RobotsRules::DisallowAll { reason: format!("reading robots.txt failed: {error}") }, true)
    });
    let result = match (&rules, server_failure) {
        (_, true) => "server_error",
        (RobotsRules::Parsed { .. }, _) => "parsed",
        _ => "absent",
    };
    metrics.robots.with_label_values(&[result]).inc();
    Ok(lock(&shared.robots).insert(origin, rules, server_failure, Instant::now()))
}

/// Reserves the host's next start; `None` when it would fall after `deadline` or the
/// batch's budget, or shutdown has begun.
fn reserve(
    shared: &Shared,
    gate: &SharedGate,
    deadline: Option<Instant>,
    budget_end: Instant,
) -> Option<Instant> {
    let mut gate = lock(gate);
    let at = gate.earliest(Instant::now(), shared.settings.min_host_delay);
    if at > budget_end || deadline.is_some_and(|deadline| at > deadline) || shared.shutdown.is_cancelled() {
        return None;
    }
    gate.last_start = Some(at);
    Some(at)
}

/// How a wait for a host's slot ended.
enum Slot {
    /// The request may start, and is under way on the host until this is dropped.
    Claimed(UnderWay),
    /// The host has no slot before the deadline or the batch's budget.
    Missed,
    ShuttingDown,
}

/// How long a wait for a busy host's slot lasts before the slot is booked again.
const BUSY_HOST_RECHECK: Duration = Duration::from_millis(50);

/// Books the host's next polite start, waits for it and claims it, booked again while the
/// host has all its connections under way (a redirect from another host's pick may hold
/// one) or one ended less than its delay ago.
async fn claim_slot(
    shared: &Shared,
    gate: &SharedGate,
    deadline: Option<Instant>,
    budget_end: Instant,
) -> Slot {
    let connections = shared.settings.connections_per_host.max(1);
    loop {
        let Some(at) = reserve(shared, gate, deadline, budget_end) else { return Slot::Missed };
        if !wait_for(shared, at).await {
            return Slot::ShuttingDown;
        }
        let now = Instant::now();
        let claimed = {
            let mut host = lock(gate);
            let free = host.is_free(now, shared.settings.min_host_delay, connections);
            if free {
                host.in_flight = host.in_flight.saturating_add(1);
            }
            free
        };
        if claimed {
            return Slot::Claimed(UnderWay(Arc::clone(gate)));
        }
        // Not at once: with no delay the booking would be now again.
        if !wait_for(shared, later(now, BUSY_HOST_RECHECK)).await {
            return Slot::ShuttingDown;
        }
    }
}

/// Waits until `at`; false when shutdown began first.
async fn wait_for(shared: &Shared, at: Instant) -> bool {
    tokio::select! {
        () = tokio::time::sleep_until(at) => true,
        () = shared.shutdown.cancelled() => false,
    }
}

/// Runs one request to the host, whose slot `claimed` holds, under a global permit; its
/// end is then the host's last.
async fn request<T, F: std::future::Future<Output = T>>(
    shared: &Shared,
    claimed: UnderWay,
    send: impl FnOnce() -> F,
) -> T {
    // The semaphore is never closed, so acquiring fails only if it were.
    let _permit = shared.permits.acquire().await.ok();
    shared.metrics.active_connections.inc();
    let answer = send().await;
    shared.metrics.active_connections.dec();
    drop(claimed);
    answer
}

/// A request to a host under way, from the claim of its slot ([`claim_slot`]); its end,
/// however it ends, is the host's last.
struct UnderWay(SharedGate);

impl Drop for UnderWay {
    fn drop(&mut self) {
        let mut host = lock(&self.0);
        host.in_flight = host.in_flight.saturating_sub(1);
        host.last_end = Some(Instant::now());
    }
}

/// Whether the batch's results hold its limit of body bytes.
fn batch_full(shared: &Shared) -> bool {
    shared.batch_bytes.load(Ordering::Relaxed) >= shared.settings.batch_body_bytes
}

/// Requeues `pick` once the batch's budget is spent (at once on shutdown): a pick whose
/// host is paused past the budget then comes back at most once per budget, rather than
/// circling through the topic as fast as the stage can read it.
async fn requeue_at_budget_end(shared: &Shared, pick: PagePick, budget_end: Instant) -> Served {
    wait_for(shared, budget_end).await;
    Served::Requeue(pick)
}

/// The deadline of `pick` on the monotonic clock, `None` without one.
fn deadline_of(pick: &PagePick, now: Instant) -> Option<Instant> {
    let deadline_ms = pick.deadline_ms?;
    let left = u64::try_from(deadline_ms.saturating_sub(unix_ms())).unwrap_or(0);
    Some(later(now, Duration::from_millis(left)))
}

fn not_requested(
    pick: &PagePick,
    outcome: FetchOutcome,
    error: String,
    crawl_delay: Option<Duration>,
) -> Served {
    let mut result = unanswered(pick, outcome);
    result.error = Some(error_text(error));
    result.crawl_delay_ms = crawl_delay.map(duration_ms);
    Served::Done(Box::new(Crawled { result, links: PageLinks::default(), announcements: Vec::new() }))
}

/// The result of a pick whose host task failed: the bug is in the log, not the result.
fn internal_error(pick: &PagePick) -> Served {
    let error = "an internal error ended this host's requests; see the fetch stage's log".to_owned();
    not_requested(pick, FetchOutcome::Other, error, None)
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// `more_from_host`: the host's queue holds other picks, which its connection is kept for.
async fn serve_pick(
    shared: &Shared,
    pick: PagePick,
    robots: Robots,
    more_from_host: bool,
    gate: &SharedGate,
    budget_end: Instant,
) -> Served {
    let metrics = &shared.metrics;
    let now = Instant::now();
    let deadline = deadline_of(&pick, now);
    let crawl_delay = lock(gate).crawl_delay;
    if deadline.is_some_and(|deadline| deadline <= now) {
        return not_requested(
            &pick,
            FetchOutcome::Deferred,
            "the pick's period ended before it was reached".into(),
            crawl_delay,
        );
    }
    let rules = match robots {
        Robots::Rules(rules) => rules,
        Robots::Unreachable { outcome, error } => return not_requested(&pick, outcome, error, None),
        Robots::NotYet => return requeue_at_budget_end(shared, pick, budget_end).await,
    };
    if !rules.allows_without_blocking(&pick.url).await {
        return not_requested(&pick, FetchOutcome::RobotsDenied, rules.denial(), crawl_delay);
    }
    // The batch holds all it may: the next batch, right after this one is published,
    // takes the pick.
    if batch_full(shared) {
        return Served::Requeue(pick);
    }
    let claimed = match claim_slot(shared, gate, deadline, budget_end).await {
        Slot::Claimed(claimed) => claimed,
        Slot::ShuttingDown => return Served::Requeue(pick),
        Slot::Missed => {
            let next = lock(gate).earliest(now, shared.settings.min_host_delay);
            if deadline.is_some_and(|deadline| next > deadline) {
                let wait = next.saturating_duration_since(now);
                let error = format!("the host's next polite slot, in {wait:?}, is after the pick's period");
                return not_requested(&pick, FetchOutcome::Deferred, error, crawl_delay);
            }
            return requeue_at_budget_end(shared, pick, budget_end).await;
        }
    };
    let origin = origin_of(&pick.url);
    let asked = Asked::new(shared, &pick.host, &origin, &rules, deadline);
    let asked = &asked;
    let may_follow = move |target: Url| redirect_verdict(asked, target).boxed();
    // Checked again under the permit, and the body and links counted before it is let go:
    // every host's task passed the check above while the batch held nothing.
    let fetched = request(shared, claimed, || async {
        if batch_full(shared) {
            return None;
        }
        asked.begin();
        let (result, starved) = shared.fetcher.fetch_checked(&pick, &may_follow, more_from_host).await;
        if starved {
            return Some(Err(result.error));
        }
        let links = page_links_of(shared, &result);
        let held = links.as_ref().map_or(0, |(_, links)| links.held_bytes());
        shared.batch_bytes.fetch_add(result.body.len().saturating_add(held) as u64, Ordering::Relaxed);
        Some(Ok((result, links)))
    })
    .await;
    metrics.idle_connections.set(i64::try_from(shared.fetcher.idle_hosts()).unwrap_or(i64::MAX));
    let (mut result, links) = match fetched {
        None => return Served::Requeue(pick),
        Some(Ok(fetched)) => fetched,
        // This process ran out of file descriptors: no news about the site, whose
        // page is tried again once the batch's budget is spent.
        Some(Err(error)) => {
            metrics.out_of_descriptors.inc();
            tracing::warn!(url = %redacted(&pick.url), error, "out of file descriptors; the pick goes back on the fetch topic");
            return requeue_at_budget_end(shared, pick, budget_end).await;
        }
    };
    result.crawl_delay_ms = crawl_delay.map(duration_ms);
    if matches!(result.http_status, Some(429 | 503)) {
        let pause = match (result.retry_after_ms, shared.settings.overload_pause) {
            (Some(ms), _) => Duration::from_millis(ms).min(shared.settings.max_retry_after),
            (None, Some(pause)) => pause,
            // Until the period has ended: a pick may start at its deadline.
            (None, None) => deadline.map_or(PAUSE_WITHOUT_PERIOD, |deadline| {
                deadline.saturating_duration_since(Instant::now()).saturating_add(Duration::from_millis(1))
            }),
        };
        // The host that answered: after a redirect to another host, that host asked for
        // the pause, and the one that redirected is not overloaded.
        let answered = result.final_url.as_deref().and_then(|url| recrawl_schemas::host_of(url).ok());
        let answered = answered.filter(|host| *host != pick.host).map(|host| gate_of(shared, &host));
        lock(answered.as_ref().unwrap_or(gate)).paused_until = Some(later(Instant::now(), pause));
    }
    let outcome = result.outcome.as_str();
    metrics.latency.with_label_values(&[outcome]).observe(result.latency_ms / 1000.0);
    metrics.bytes.inc_by(result.size_bytes);
    let links = match links {
        Some(page) => with_frames(shared, &result, page, &rules, gate, deadline, budget_end).await,
        None => PageLinks::default(),
    };
    let (result, announced) = if links.feeds.is_empty() {
        read_announcements(shared, result).await
    } else {
        let feeds = announcements::of_feeds(&links.feeds, &result);
        (result, feeds)
    };
    count_announced(shared, &announced);
    shared.batch_bytes.fetch_add(announced.held_bytes() as u64, Ordering::Relaxed);
    Served::Done(Box::new(Crawled { result, links, announcements: announced.records }))
}

/// Sitemaps and feeds read at once by an instance.
const DOCUMENTS_READ_AT_ONCE: usize = 2;

/// The pages a downloaded sitemap or feed announces; read off the async threads, as a
/// document of 50 MB takes a good part of a second.
async fn read_announcements(shared: &Shared, mut result: FetchResult) -> (FetchResult, Announced) {
    if result.outcome != FetchOutcome::Downloaded || is_html(result.content_type.as_deref()) {
        return (result, Announced::default());
    }
    let limits = shared.settings.announcement_limits.clone();
    // Closed only with the crawler, which outlives its batches.
    let Ok(_reading) = shared.documents.acquire().await else {
        return (result, Announced::default());
    };
    // What is left of the result should the reader panic (it must not): all but the body.
    let body = std::mem::take(&mut result.body);
    let kept = result.clone();
    result.body = body;
    let read = tokio::task::spawn_blocking(move || {
        let announced = announcements::of_download(&result, &limits);
        (result, announced)
    })
    .await;
    read.unwrap_or_else(|error| {
        tracing::error!(url = %redacted(&kept.url), %error, "reading a document's announcements failed");
        let failed = FetchResult {
            outcome: FetchOutcome::Other,
            error: Some(format!("reading the document's announcements failed: {error}")),
            ..kept
        };
        (failed, Announced::default())
    })
}

/// Counts a document's announcements, published and dropped, in the metrics.
fn count_announced(shared: &Shared, announced: &Announced) {
    let metrics = &shared.metrics;
    metrics.announcements.with_label_values(&["published"]).inc_by(announced.records.len() as u64);
    for (label, count) in announcements::Dropped::LABELS.iter().zip(announced.dropped.counts()) {
        metrics.announcements.with_label_values(&[label]).inc_by(count);
    }
    let document = announced.document.map_or("unknown", |document| document.as_str());
    let read = match (&announced.refused, announced.cut_short) {
        (Some(_), _) => "refused",
        (None, true) => "cut_short",
        (None, false) => "read",
    };
    if announced.document.is_some() || announced.refused.is_some() {
        metrics.announcing_documents.with_label_values(&[document, read]).inc();
    }
}

/// The links of a downloaded HTML page and the URL they were resolved against; links are
/// held until the batch is published, as the body is (1,000 links of 8 KiB found on a page
/// of 16 KB take 8 MB).
fn page_links_of(shared: &Shared, result: &FetchResult) -> Option<(Url, PageLinks)> {
    // A page that moved for good links only to its new URL, which is to be tracked instead.
    if let Some(target) = moved_to(result) {
        let mut links = PageLinks::default();
        links.record(target, &shared.filter, result.depth.saturating_add(1));
        return Some((Url::parse(&result.url).ok()?, links));
    }
    if result.outcome != FetchOutcome::Downloaded || !is_html(result.content_type.as_deref()) {
        return None;
    }
    let page_url = Url::parse(result.final_url.as_deref().unwrap_or(&result.url)).ok()?;
    let links = extract_links(&page_url, &result.body, &shared.filter, result.depth.saturating_add(1));
    Some((page_url, links))
}

/// The links of a downloaded page (counted in the batch), resolved against its URL, with
/// those of its same-origin frames on the pick's host, which count as the page's own
/// (`docs/algorithms/in-degree-first.md` §2). A frame that is not fetched (another origin
/// or host, disallowed, past `max_frames`, or no time left) is a plain link.
async fn with_frames(
    shared: &Shared,
    result: &FetchResult,
    (page_url, mut links): (Url, PageLinks),
    rules: &Arc<RobotsRules>,
    gate: &SharedGate,
    deadline: Option<Instant>,
    budget_end: Instant,
) -> PageLinks {
    let counted = links.held_bytes();
    let (filter, depth) = (&shared.filter, result.depth.saturating_add(1));
    // `rules` are the pick's origin's; a redirect may have brought the page elsewhere.
    // Frames are fetched in the pick's host's slots, so only those on its host.
    let origin = origin_of(&result.url);
    let mut fetched = 0;
    for frame in std::mem::take(&mut links.frames) {
        let asked = Asked::new(shared, &result.host, &origin, rules, deadline);
        let asked = &asked;
        let on_the_host = recrawl_schemas::host_of(frame.as_str()).is_ok_and(|host| host == result.host);
        let fetchable = fetched < shared.settings.max_frames
            && frame.origin() == page_url.origin()
            && on_the_host
            && matches!(redirect_verdict(asked, frame.clone()).await, Hop::Follow(_));
        if !fetchable {
            links.record(frame, filter, depth);
            continue;
        }
        let Slot::Claimed(claimed) = claim_slot(shared, gate, deadline, budget_end).await else {
            links.record(frame, filter, depth);
            continue;
        };
        fetched = fetched.saturating_add(1);
        let reading = Reading {
            cap: shared.fetcher.max_body_bytes,
            any_type: false,
            truncate: false,
            least_redirects: 0,
            stop_at_moved: false,
            more_from_origin: false,
        };
        let may_follow = move |target: Url| redirect_verdict(asked, target).boxed();
        let answer = request(shared, claimed, || {
            asked.begin();
            shared.fetcher.get_document(frame.clone(), reading, &may_follow)
        })
        .await;
        let frame_links = match answer {
            Ok(answer) if answer.status.is_success() => answer.body.map(|body| {
                let frame_url = answer.redirects.last().unwrap_or(&frame);
                extract_links(frame_url, &body, filter, depth)
            }),
            Ok(_) => None,
            Err(failure) => {
                tracing::debug!(frame = %redacted(frame.as_str()), error = failure.reason, "frame not fetched");
                None
            }
        };
        let outcome = if frame_links.is_some() { "downloaded" } else { "failed" };
        shared.metrics.frames.with_label_values(&[outcome]).inc();
        if let Some(frame_links) = frame_links {
            links.merge(frame_links, filter.max_links);
        }
    }
    links.finish();
    let grown = links.held_bytes().saturating_sub(counted);
    shared.batch_bytes.fetch_add(grown as u64, Ordering::Relaxed);
    links
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, SocketAddr};

    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::body::{Body, Bytes};
    use axum::extract::Request;
    use axum::http::header::{CONTENT_TYPE, LOCATION, RETRY_AFTER};
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    use axum::Router;
    use futures::stream::{self, StreamExt};
    use prometheus::Registry;

    use super::*;
    use crate::address::{parse_allowed_network, AddressPolicy, GuardedResolver};
    use crate::http::tests::{pick_for as pick, serve};
    use crate::http::FetchConfig;

    type Log = Arc<Mutex<Vec<(String, Instant)>>>;

    /// A site on 127.0.0.1 answering `respond(path)`, recording each request's path and
    /// arrival time on the server's side.
    async fn site(respond: fn(&str) -> Response) -> (SocketAddr, Log) {
        let log: Log = Arc::default();
        let recorded = log.clone();
        let router = Router::new().fallback(move |request: Request| {
            let recorded = recorded.clone();
            async move {
                let path = request.uri().path().to_owned();
                lock(&recorded).push((path.clone(), Instant::now()));
                respond(&path)
            }
        });
        (serve(router).await, log)
    }

    fn html(body: &'static str) -> Response {
        ([(CONTENT_TYPE, "text/html")], body).into_response()
    }

    fn not_found() -> Response {
        StatusCode::NOT_FOUND.into_response()
    }

    fn paths(log: &Log) -> Vec<String> {
        lock(log).iter().map(|(path, _)| path.clone()).collect()
    }

    /// A crawler allowed to reach loopback, with `names` resolving to 127.0.0.1.
    fn crawler_with(settings: CrawlSettings, names: &[&str], shutdown: CancellationToken) -> Crawler {
        crawler_of(settings, FetchConfig::default(), names, shutdown)
    }

    /// [`crawler_with`] from `config`, whose address policy and timeout it replaces.
    fn crawler_of(
        settings: CrawlSettings,
        config: FetchConfig,
        names: &[&str],
        shutdown: CancellationToken,
    ) -> Crawler {
        let loopback = parse_allowed_network("127.0.0.1").unwrap();
        let overrides: Vec<(String, IpAddr)> =
            names.iter().map(|name| ((*name).to_owned(), IpAddr::from([127, 0, 0, 1]))).collect();
        let config = FetchConfig {
            request_timeout: Duration::from_secs(3),
            resolver: GuardedResolver::new(AddressPolicy::new(vec![loopback]), overrides),
            ..config
        };
        let metrics = FetchMetrics::register(&Registry::new()).unwrap();
        Crawler::new(Fetcher::new(config).unwrap(), settings, LinkFilter::default(), metrics, shutdown)
    }

    fn crawler(settings: CrawlSettings) -> Crawler {
        crawler_with(settings, &[], CancellationToken::new())
    }

    fn no_delay() -> CrawlSettings {
        CrawlSettings { min_host_delay: Duration::ZERO, ..CrawlSettings::default() }
    }

    fn outcomes(output: &CrawlOutput) -> Vec<(String, FetchOutcome)> {
        output
            .crawled
            .iter()
            .map(|c| (c.result.url.rsplit('/').next().unwrap_or_default().to_owned(), c.result.outcome))
            .collect()
    }

    /// Gaps between consecutive arrivals on the server.
    fn gaps(log: &Log) -> Vec<Duration> {
        lock(log).windows(2).map(|pair| pair[1].1.duration_since(pair[0].1)).collect()
    }

    #[tokio::test]
    async fn requests_to_a_host_arrive_at_least_the_delay_apart() {
        let (address, log) =
            site(|path| if path == "/robots.txt" { not_found() } else { html("<p>page</p>") }).await;
        let delay = Duration::from_millis(150);
        let mut crawler = crawler(CrawlSettings { min_host_delay: delay, ..CrawlSettings::default() });
        let picks: Vec<PagePick> = (0..4).map(|i| pick(&format!("http://{address}/p{i}.html"))).collect();
        let output = crawler.crawl(picks).await;
        assert!(output.crawled.iter().all(|c| c.result.outcome == FetchOutcome::Downloaded));
        assert_eq!(paths(&log), ["/robots.txt", "/p0.html", "/p1.html", "/p2.html", "/p3.html"]);
        for gap in gaps(&log) {
            assert!(gap >= delay, "{gap:?} < {delay:?}");
        }
    }

    /// robots.txt names a sitemap, which names pages; a page names a feed: each becomes
    /// announcements of the pick's host, read off the async threads and counted.
    #[tokio::test]
    async fn robots_txt_sitemaps_and_feeds_announce_the_site_s_pages() {
        // Answers name the authority asked for, as a site's absolute URLs do.
        let router = Router::new().fallback(|request: Request| async move {
            let host =
                request.headers().get("host").and_then(|h| h.to_str().ok()).unwrap_or_default().to_owned();
            match request.uri().path() {
                "/robots.txt" => {
                    "User-agent: *\nSitemap: /relative-is-no-url\nSitemap: http://other.example/s.xml\n\
                                  Sitemap: http://a.example/news/sitemap.xml\n"
                        .into_response()
                }
                "/news/sitemap.xml" => (
                    [(CONTENT_TYPE, "application/xml")],
                    format!(
                        r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
                        <url><loc>http://{host}/news/1.html</loc><lastmod>2024-05-01T10:00:00+02:00</lastmod>
                        <changefreq>hourly</changefreq><priority>0.9</priority></url>
                        <url><loc>http://{host}/news/2.html</loc><lastmod>yesterday</lastmod></url>
                        <url><loc>http://{host}/elsewhere.html</loc></url>
                        <url><loc>http://b.example/news/3.html</loc></url></urlset>"#
                    ),
                )
                    .into_response(),
                _ => {
                    html(r#"<link rel="alternate" type="application/atom+xml" href="/feed.atom"><p>page</p>"#)
                }
            }
        });
        let address = serve(router).await;
        let port = address.port();
        let mut crawler = crawler_with(no_delay(), &["a.example"], CancellationToken::new());
        let url = |path: &str| format!("http://a.example:{port}{path}");
        let output = crawler.crawl(vec![pick(&url("/news/sitemap.xml")), pick(&url("/home.html"))]).await;

        // robots.txt's own-host sitemap (the port is the authority's: this one names the
        // default port, so another host); none on the pick's host, so /sitemap.xml.
        let named: Vec<(&str, AnnouncingDocument)> =
            output.announcements.iter().map(|a| (a.page.url.as_str(), a.document)).collect();
        assert_eq!(named, [(url("/sitemap.xml").as_str(), AnnouncingDocument::RobotsTxt)]);
        let sitemap = &output.crawled[0].announcements;
        let pages: Vec<&str> = sitemap.iter().map(|a| a.page.url.as_str()).collect();
        assert_eq!(pages, [url("/news/1.html"), url("/news/2.html")].each_ref().map(String::as_str));
        assert!(sitemap
            .iter()
            .all(|a| a.document == AnnouncingDocument::Sitemap && a.source.url == url("/news/sitemap.xml")));
        assert_eq!(sitemap[0].claimed_modified_ms, Some(1_714_550_400_000));
        assert_eq!(sitemap[0].change_frequency, Some(recrawl_schemas::ClaimedChangeFrequency::Hourly));
        assert_eq!(sitemap[0].priority, Some(0.9));
        assert_eq!((sitemap[1].claimed_modified_ms, sitemap[1].depth), (None, 1));
        let feeds: Vec<&str> = output.crawled[1].announcements.iter().map(|a| a.page.url.as_str()).collect();
        assert_eq!(feeds, [url("/feed.atom").as_str()]);
        let metrics = &crawler.shared.metrics;
        let announced = |result: &str| metrics.announcements.with_label_values(&[result]).get();
        assert_eq!(announced("published"), 4);
        assert_eq!(
            announced("out_of_scope"),
            2 + 2,
            "a path and a host outside the sitemap's; two robots lines"
        );
        assert_eq!(announced("bad_value"), 1);
        assert_eq!(metrics.announcing_documents.with_label_values(&["sitemap", "read"]).get(), 1);
    }

    #[tokio::test]
    async fn crawl_delay_spaces_requests_and_is_reported() {
        let (address, log) = site(|path| match path {
            "/robots.txt" => "User-agent: *\nCrawl-delay: 0.3\n".into_response(),
            _ => html("<p>page</p>"),
        })
        .await;
        let mut crawler = crawler(no_delay());
        let picks: Vec<PagePick> = (0..3).map(|i| pick(&format!("http://{address}/p{i}.html"))).collect();
        let output = crawler.crawl(picks).await;
        assert!(output.crawled.iter().all(|c| c.result.crawl_delay_ms == Some(300)));
        assert_eq!(lock(&log).len(), 4);
        for gap in gaps(&log) {
            assert!(gap >= Duration::from_millis(300), "{gap:?}");
        }
    }

    #[tokio::test]
    async fn disallowed_urls_are_denied_without_a_request_and_robots_is_cached() {
        let (address, log) = site(|path| match path {
            "/robots.txt" => "User-agent: recrawl\nDisallow: /private\n".into_response(),
            _ => html("<p>page</p>"),
        })
        .await;
        let mut crawler = crawler(no_delay());
        let urls = [format!("http://{address}/private/a.html"), format!("http://{address}/open.html")];
        let output = crawler.crawl(urls.iter().map(|u| pick(u)).collect()).await;
        assert_eq!(
            outcomes(&output),
            [
                ("a.html".to_owned(), FetchOutcome::RobotsDenied),
                ("open.html".to_owned(), FetchOutcome::Downloaded)
            ]
        );
        assert!(!output.crawled[0].result.outcome.is_request());
        let again = crawler.crawl(urls.iter().map(|u| pick(u)).collect()).await;
        assert_eq!(outcomes(&again), outcomes(&output));
        assert_eq!(
            paths(&log),
            ["/robots.txt", "/open.html", "/open.html"],
            "one robots.txt, no private page"
        );
    }

    /// A redirect into a path the origin's robots.txt disallows is not followed: the pick
    /// ends as denied, with the refused hop among its redirects.
    #[tokio::test]
    async fn a_redirect_into_a_disallowed_path_is_not_followed() {
        let (address, log) = site(|path| match path {
            "/robots.txt" => html("User-agent: *\nDisallow: /private/\n"),
            "/old.html" => (StatusCode::FOUND, [(LOCATION, "/private/x.html")]).into_response(),
            "/moved.html" => (StatusCode::TEMPORARY_REDIRECT, [(LOCATION, "/new.html")]).into_response(),
            _ => html("<p>page</p>"),
        })
        .await;
        let mut crawler = crawler(no_delay());
        let picks = ["old.html", "moved.html"].map(|page| pick(&format!("http://{address}/{page}")));
        let output = crawler.crawl(picks.to_vec()).await;
        assert_eq!(
            outcomes(&output),
            [
                ("old.html".into(), FetchOutcome::RobotsDenied),
                ("moved.html".into(), FetchOutcome::Downloaded)
            ]
        );
        let denied = &output.crawled[0].result;
        assert_eq!(denied.redirects, [format!("http://{address}/private/x.html")]);
        assert!(denied.error.as_deref().unwrap_or_default().contains("robots.txt"), "{:?}", denied.error);
        assert_eq!(paths(&log), ["/robots.txt", "/old.html", "/moved.html", "/new.html"]);
    }

    /// A picked page that answers with a permanent redirect has moved: the fetcher does
    /// not follow it (the new URL is to be tracked instead, not fetched under both), and
    /// publishes the target as the page's only link. A temporary one is followed, and a
    /// permanent one further down a chain is the next URL's, so followed too.
    #[tokio::test]
    async fn a_page_that_moved_for_good_links_to_its_new_url_instead_of_being_fetched_there() {
        let (address, log) = site(|path| match path {
            "/robots.txt" => html(""),
            "/gone-for-good.html" => {
                (StatusCode::MOVED_PERMANENTLY, [(LOCATION, "/new.html#top")]).into_response()
            }
            "/kept.html" => (StatusCode::PERMANENT_REDIRECT, [(LOCATION, "other.html")]).into_response(),
            "/for-now.html" => (StatusCode::FOUND, [(LOCATION, "/kept.html")]).into_response(),
            _ => html("<p>page</p>"),
        })
        .await;
        let mut crawler = crawler(no_delay());
        let picks = ["gone-for-good.html", "kept.html", "for-now.html"]
            .map(|page| pick(&format!("http://{address}/{page}")));
        let output = crawler.crawl(picks.to_vec()).await;
        assert_eq!(
            outcomes(&output),
            [
                ("gone-for-good.html".into(), FetchOutcome::HttpStatus),
                ("kept.html".into(), FetchOutcome::HttpStatus),
                ("for-now.html".into(), FetchOutcome::Downloaded)
            ]
        );
        let new_urls: Vec<Vec<String>> = output
            .crawled
            .iter()
            .map(|crawled| crawled.links.links.iter().map(|link| link.url.clone()).collect())
            .collect();
        assert_eq!(
            new_urls,
            [
                vec![format!("http://{address}/new.html")],
                vec![format!("http://{address}/other.html")],
                vec![]
            ]
        );
        let moved = &output.crawled[0].result;
        assert_eq!((moved.http_status, moved.final_url.as_deref()), (Some(301), None));
        assert!(moved.redirects.is_empty() && moved.body.is_empty(), "{moved:?}");
        let followed = &output.crawled[2].result;
        assert_eq!(
            followed.redirects,
            [format!("http://{address}/kept.html"), format!("http://{address}/other.html")]
        );
        assert_eq!(
            paths(&log),
            [
                "/robots.txt",
                "/gone-for-good.html",
                "/kept.html",
                "/for-now.html",
                "/kept.html",
                "/other.html"
            ],
            "neither moved page's target fetched under its old name"
        );
    }

    /// A hop to another origin follows that origin's robots.txt: the cached one, or one
    /// fetched then, once, and cached; one that cannot be read ends the request as a pick
    /// of that origin would end.
    #[tokio::test]
    async fn a_redirect_elsewhere_follows_the_robots_txt_there() {
        let (elsewhere, elsewhere_log) = site(|path| match path {
            "/robots.txt" => html("User-agent: *\nDisallow: /private\n"),
            _ => html("<p>page</p>"),
        })
        .await;
        let (address, _) = site(redirect_to_port).await;
        let mut crawler = crawler(no_delay());
        let port = elsewhere.port();
        let output = crawler.crawl(vec![pick(&format!("http://{address}/private-{port}"))]).await;
        let denied = &output.crawled[0].result;
        assert_eq!(denied.outcome, FetchOutcome::RobotsDenied, "{:?}", denied.error);
        assert_eq!(denied.redirects, [format!("http://{elsewhere}/private.html")]);
        assert_eq!(paths(&elsewhere_log), ["/robots.txt"], "the disallowed page is not requested");
        let output = crawler.crawl(vec![pick(&format!("http://{address}/open-{port}"))]).await;
        let followed = &output.crawled[0].result;
        assert_eq!(followed.outcome, FetchOutcome::Downloaded, "{:?}", followed.error);
        assert_eq!(paths(&elsewhere_log), ["/robots.txt", "/open.html"], "robots.txt is cached");

        let unreadable = crawler_with(no_delay(), &[], CancellationToken::new());
        let closed = recrawl_common::http::free_local_port().unwrap();
        let target = Url::parse(&format!("http://{closed}/page.html")).unwrap();
        let own = Arc::new(RobotsRules::AllowAll);
        let asked = Asked::new(&unreadable.shared, "a.test", "http://a.test", &own, None);
        let unread = redirect_verdict(&asked, target).await;
        assert!(
            matches!(unread, Hop::Refused { outcome: FetchOutcome::Connect, .. }),
            "as a pick there would end: {unread:?}"
        );
        let same_origin = Url::parse("http://a.test/x.html").unwrap();
        let own_rules = redirect_verdict(&asked, same_origin).await;
        assert!(matches!(own_rules, Hop::Follow(None)), "the origin's own rules, no slot: {own_rules:?}");
    }

    /// A site whose every page `/page-port` redirects to 127.0.0.1:port/page.html (a
    /// handler cannot capture the other site's port).
    fn redirect_to_port(path: &str) -> Response {
        if path == "/robots.txt" {
            return not_found();
        }
        let (page, port) = path.trim_start_matches('/').split_once('-').unwrap_or_default();
        (StatusCode::FOUND, [(LOCATION, format!("http://127.0.0.1:{port}/{page}.html"))]).into_response()
    }

    /// Hops from two hosts to a third wait for its delay as its own picks would: its
    /// pages arrive the delay apart, the first right after its robots.txt, in one slot; a
    /// hop whose slot would come past half the request timeout is deferred.
    #[tokio::test]
    async fn redirects_to_another_host_keep_to_its_delay() {
        let (target, target_log) = site(|path| match path {
            "/robots.txt" => not_found(),
            _ => html("<p>page</p>"),
        })
        .await;
        let (a, _) = site(redirect_to_port).await;
        let (b, _) = site(redirect_to_port).await;
        let delay = Duration::from_millis(300);
        let mut crawler = crawler(CrawlSettings { min_host_delay: delay, ..CrawlSettings::default() });
        let port = target.port();
        let picks: Vec<PagePick> =
            (0..4).map(|i| pick(&format!("http://{}/p{i}-{port}", [a, b][i % 2]))).collect();
        let output = crawler.crawl(picks).await;
        let all_downloaded = output.crawled.iter().all(|c| c.result.outcome == FetchOutcome::Downloaded);
        assert!(all_downloaded, "{:?}", outcomes(&output));
        let arrived = paths(&target_log);
        assert_eq!(arrived.len(), 5, "robots.txt once and four pages: {arrived:?}");
        assert_eq!(arrived[0], "/robots.txt");
        // One slot covers robots.txt and the hop after it; the other hops wait for slots of
        // their own. Starts are the delay apart on the crawler's clock; arrivals add each
        // connection's latency. Without the target's gate the two hosts' hops arrive together.
        let latency = Duration::from_millis(50);
        for gap in gaps(&target_log).into_iter().skip(1) {
            assert!(gap + latency >= delay, "{gap:?} < {delay:?}: {arrived:?}");
        }

        // The target host's delay is now past half the request timeout (1.5 s here), and
        // its robots.txt known: the first hop takes its slot, the second is deferred.
        let slow = CrawlSettings { min_host_delay: Duration::from_secs(2), ..CrawlSettings::default() };
        let mut slow_crawler = super::tests::crawler(slow);
        let known = RobotsRules::AllowAll;
        lock(&slow_crawler.shared.robots).insert(&format!("http://{target}"), known, false, Instant::now());
        let picks = vec![pick(&format!("http://{a}/q0-{port}")), pick(&format!("http://{b}/q1-{port}"))];
        let output = slow_crawler.crawl(picks).await;
        let mut outcomes: Vec<FetchOutcome> = output.crawled.iter().map(|c| c.result.outcome).collect();
        outcomes.sort_by_key(|outcome| outcome.as_str());
        assert_eq!(outcomes, [FetchOutcome::Deferred, FetchOutcome::Downloaded], "{:?}", output.crawled);
        let deferred = output.crawled.iter().find(|c| c.result.outcome == FetchOutcome::Deferred);
        let error = deferred.and_then(|c| c.result.error.as_deref()).unwrap_or_default();
        assert!(error.contains("next polite slot"), "{error}");
    }

    /// A slot of the target host covers its robots.txt and the hop, and hops within it
    /// after that are part of the request: a chain A → B → B goes through even where B's
    /// delay is past half the request timeout.
    #[tokio::test]
    async fn one_slot_covers_a_hosts_robots_txt_and_the_hops_within_it() {
        let (target, target_log) = site(|path| match path {
            "/robots.txt" => not_found(),
            "/first.html" => (StatusCode::FOUND, [(LOCATION, "/second.html")]).into_response(),
            _ => html("<p>page</p>"),
        })
        .await;
        let (a, _) = site(redirect_to_port).await;
        let slow = CrawlSettings { min_host_delay: Duration::from_secs(2), ..CrawlSettings::default() };
        let output = crawler(slow).crawl(vec![pick(&format!("http://{a}/first-{}", target.port()))]).await;
        let result = &output.crawled[0].result;
        assert_eq!(result.outcome, FetchOutcome::Downloaded, "{:?}", result.error);
        assert_eq!(paths(&target_log), ["/robots.txt", "/first.html", "/second.html"]);
    }

    /// A hop to a refused address ends as one, before its robots.txt is asked for.
    #[tokio::test]
    async fn a_redirect_to_a_refused_address_is_blocked_before_robots_txt() {
        let (address, _) = site(|path| match path {
            "/robots.txt" => not_found(),
            _ => (StatusCode::FOUND, [(LOCATION, "http://169.254.169.254/latest/")]).into_response(),
        })
        .await;
        let output = crawler(no_delay()).crawl(vec![pick(&format!("http://{address}/meta"))]).await;
        let result = &output.crawled[0].result;
        assert_eq!(result.outcome, FetchOutcome::BlockedAddress, "{:?}", result.error);
        assert!(!result.error.as_deref().unwrap_or_default().contains("robots.txt"), "{:?}", result.error);
    }

    #[tokio::test]
    async fn a_failing_robots_txt_disallows_the_site() {
        let (address, log) = site(|path| match path {
            "/robots.txt" => StatusCode::SERVICE_UNAVAILABLE.into_response(),
            _ => html("<p>page</p>"),
        })
        .await;
        let mut crawler = crawler(no_delay());
        let output = crawler.crawl(vec![pick(&format!("http://{address}/a.html"))]).await;
        let result = &output.crawled[0].result;
        assert_eq!(result.outcome, FetchOutcome::RobotsDenied);
        assert!(result.error.as_deref().unwrap_or_default().contains("503"), "{:?}", result.error);
        assert_eq!(paths(&log), ["/robots.txt"]);
    }

    #[tokio::test]
    async fn an_overload_without_retry_after_pauses_the_host_for_the_rest_of_its_period() {
        let (address, log) = site(|path| match path {
            "/robots.txt" => not_found(),
            "/busy.html" => StatusCode::SERVICE_UNAVAILABLE.into_response(),
            _ => html("<p>page</p>"),
        })
        .await;
        let mut paused = crawler(CrawlSettings { batch_budget: Duration::from_secs(20), ..no_delay() });
        // The busy pick's period ends in 2 s: a pick of the same period is deferred, one of
        // the next is served once it ends (a minute's pause, as before, would defer it).
        let period_end = unix_ms() + 2_000;
        let in_period = |name: &str, deadline_ms| PagePick {
            deadline_ms: Some(deadline_ms),
            ..pick(&format!("http://{address}/{name}"))
        };
        let picks = vec![
            in_period("busy.html", period_end),
            in_period("same-period.html", period_end),
            in_period("next-period.html", period_end + 10_000),
        ];
        let output = paused.crawl(picks).await;
        assert_eq!(
            outcomes(&output),
            [
                ("busy.html".to_owned(), FetchOutcome::HttpStatus),
                ("same-period.html".to_owned(), FetchOutcome::Deferred),
                ("next-period.html".to_owned(), FetchOutcome::Downloaded),
            ]
        );
        assert_eq!(paths(&log), ["/robots.txt", "/busy.html", "/next-period.html"]);
        // Told a pause, the stage keeps it whatever the period.
        let (address, _) = site(|path| match path {
            "/robots.txt" => not_found(),
            _ => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        })
        .await;
        let settings = CrawlSettings {
            overload_pause: Some(Duration::from_secs(60)),
            batch_budget: Duration::from_secs(1),
            ..no_delay()
        };
        let picks = vec![
            PagePick { deadline_ms: Some(unix_ms() + 300), ..pick(&format!("http://{address}/a.html")) },
            PagePick { deadline_ms: Some(unix_ms() + 3_000), ..pick(&format!("http://{address}/b.html")) },
        ];
        let output = crawler(settings).crawl(picks).await;
        assert_eq!(outcomes(&output)[1], ("b.html".to_owned(), FetchOutcome::Deferred));
    }

    #[tokio::test]
    async fn retry_after_pauses_the_host_deferring_or_requeueing_the_rest() {
        let (address, log) = site(|path| match path {
            "/robots.txt" => not_found(),
            "/busy.html" => (StatusCode::TOO_MANY_REQUESTS, [(RETRY_AFTER, "5")]).into_response(),
            _ => html("<p>page</p>"),
        })
        .await;
        let settings = CrawlSettings { batch_budget: Duration::from_secs(2), ..no_delay() };
        let mut crawler = crawler(settings);
        let soon =
            PagePick { deadline_ms: Some(unix_ms() + 1_000), ..pick(&format!("http://{address}/soon.html")) };
        let later = pick(&format!("http://{address}/later.html"));
        let output = crawler.crawl(vec![pick(&format!("http://{address}/busy.html")), soon, later]).await;
        assert_eq!(
            outcomes(&output),
            [
                ("busy.html".to_owned(), FetchOutcome::HttpStatus),
                ("soon.html".to_owned(), FetchOutcome::Deferred)
            ]
        );
        assert_eq!(output.crawled[0].result.retry_after_ms, Some(5_000));
        assert_eq!(
            output.requeued.iter().map(|p| p.url.as_str()).collect::<Vec<_>>(),
            [format!("http://{address}/later.html")]
        );
        assert_eq!(paths(&log), ["/robots.txt", "/busy.html"]);
    }

    /// A 429 after a redirect to another host pauses that host: the pick's host only
    /// redirected, and goes on serving its picks.
    #[tokio::test]
    async fn retry_after_from_a_redirect_target_pauses_the_target_not_the_redirecting_host() {
        let (target, target_log) = site(|path| match path {
            "/robots.txt" => not_found(),
            "/busy.html" => (StatusCode::TOO_MANY_REQUESTS, [(RETRY_AFTER, "5")]).into_response(),
            _ => html("<p>page</p>"),
        })
        .await;
        let (redirecting, redirecting_log) = site(redirect_to_port).await;
        let port = target.port();
        let soon = PagePick {
            deadline_ms: Some(unix_ms() + 1_000),
            ..pick(&format!("http://{redirecting}/soon-{port}"))
        };
        let mut crawler = crawler(no_delay());
        let output = crawler.crawl(vec![pick(&format!("http://{redirecting}/busy-{port}")), soon]).await;
        assert_eq!(output.crawled[0].result.http_status, Some(429));
        assert!(output.requeued.is_empty());
        assert_eq!(
            paths(&redirecting_log),
            ["/robots.txt", &format!("/busy-{port}"), &format!("/soon-{port}")]
        );
        let deferred = &output.crawled[1].result;
        assert_eq!(deferred.outcome, FetchOutcome::Deferred);
        let error = deferred.error.as_deref().unwrap_or_default();
        assert!(error.contains(&format!("127.0.0.1:{port}'s next polite slot")), "{error}");
        assert_eq!(paths(&target_log), ["/robots.txt", "/busy.html"]);
    }

    /// RFC 9309 §2.3.1.2: five redirects are followed for a robots.txt whatever
    /// `--max-redirects` says, and the rules found apply to the origin asked.
    #[tokio::test]
    async fn robots_txt_redirects_are_followed_however_few_pages_may_take() {
        let (address, log) = site(|path| match path {
            "/robots.txt" => (StatusCode::FOUND, [(LOCATION, "/moved/robots.txt")]).into_response(),
            "/moved/robots.txt" => "User-agent: *\nDisallow: /private".into_response(),
            _ => html("<p>page</p>"),
        })
        .await;
        let config = FetchConfig { max_redirects: 0, ..FetchConfig::default() };
        let mut crawler = crawler_of(no_delay(), config, &[], CancellationToken::new());
        let picks = ["page.html", "private.html"].map(|page| pick(&format!("http://{address}/{page}")));
        let output = crawler.crawl(picks.to_vec()).await;
        assert_eq!(
            outcomes(&output),
            [
                ("page.html".to_owned(), FetchOutcome::Downloaded),
                ("private.html".to_owned(), FetchOutcome::RobotsDenied)
            ]
        );
        assert_eq!(paths(&log), ["/robots.txt", "/moved/robots.txt", "/page.html"]);
    }

    /// Past its redirects, or in a loop, a robots.txt counts as unavailable, as a 4xx,
    /// and is kept like one: not asked for again at every batch.
    #[tokio::test]
    async fn a_robots_txt_redirected_in_a_loop_is_unavailable_and_kept() {
        let (address, log) = site(|path| match path {
            "/robots.txt" => (StatusCode::FOUND, [(LOCATION, "/robots.txt")]).into_response(),
            _ => html("<p>page</p>"),
        })
        .await;
        let mut crawler = crawler(no_delay());
        for page in ["a.html", "b.html"] {
            let output = crawler.crawl(vec![pick(&format!("http://{address}/{page}"))]).await;
            assert_eq!(outcomes(&output), [(page.to_owned(), FetchOutcome::Downloaded)]);
        }
        assert_eq!(paths(&log), ["/robots.txt", "/a.html", "/b.html"]);
    }

    #[tokio::test]
    async fn a_pick_past_its_period_is_deferred_without_a_request() {
        let (address, log) =
            site(|path| if path == "/robots.txt" { not_found() } else { html("<p>page</p>") }).await;
        let mut crawler = crawler(no_delay());
        let late =
            PagePick { deadline_ms: Some(unix_ms() - 1), ..pick(&format!("http://{address}/late.html")) };
        let output = crawler.crawl(vec![late]).await;
        assert_eq!(output.crawled[0].result.outcome, FetchOutcome::Deferred);
        assert!(!paths(&log).contains(&"/late.html".to_owned()));
    }

    #[tokio::test]
    async fn refused_and_unreachable_hosts_fail_each_pick() {
        let closed = recrawl_common::http::free_local_port().unwrap();
        let mut crawler = crawler(no_delay());
        let picks = vec![
            pick("http://169.254.169.254/latest/a.html"),
            pick("http://169.254.169.254/latest/b.html"),
            pick(&format!("http://{closed}/c.html")),
        ];
        let output = crawler.crawl(picks).await;
        assert_eq!(
            outcomes(&output),
            [
                ("a.html".to_owned(), FetchOutcome::BlockedAddress),
                ("b.html".to_owned(), FetchOutcome::BlockedAddress),
                ("c.html".to_owned(), FetchOutcome::Connect),
            ]
        );
        assert!(output.crawled[0].result.error.as_deref().unwrap_or_default().starts_with("robots.txt: "));
    }

    #[tokio::test]
    async fn same_origin_frames_lend_their_links_and_others_are_links() {
        let (address, log) = site(|path| match path {
            "/robots.txt" => not_found(),
            "/menu.html" => html(r#"<a href="/m1.html">m1</a><a href="/own.html">own again</a>"#),
            _ => html(
                r#"<a href="/own.html">own</a><frameset><frame src="/menu.html">
                <frame src="http://elsewhere.test/x.html"></frameset>"#,
            ),
        })
        .await;
        let mut crawler = crawler(no_delay());
        let output = crawler.crawl(vec![pick(&format!("http://{address}/index.html"))]).await;
        let links: Vec<(&str, u32)> =
            output.crawled[0].links.links.iter().map(|l| (l.url.as_str(), l.occurrences)).collect();
        let own = format!("http://{address}/own.html");
        let m1 = format!("http://{address}/m1.html");
        assert_eq!(links, [(own.as_str(), 2), (m1.as_str(), 1), ("http://elsewhere.test/x.html", 1)]);
        assert_eq!(paths(&log), ["/robots.txt", "/index.html", "/menu.html"]);
    }

    /// Once a batch holds its limit of body bytes, the picks not yet started go back to
    /// the topic, and the next batch (with nothing held) fetches them.
    #[tokio::test]
    async fn a_batch_holding_its_body_limit_requeues_the_rest() {
        let (address, log) = site(|path| match path {
            "/robots.txt" => not_found(),
            _ => ([(CONTENT_TYPE, "text/html")], "x".repeat(60_000)).into_response(),
        })
        .await;
        let settings = CrawlSettings { batch_body_bytes: 100_000, ..no_delay() };
        let mut crawler = crawler(settings);
        let picks: Vec<PagePick> = (0..5).map(|i| pick(&format!("http://{address}/p{i}.html"))).collect();
        let output = crawler.crawl(picks.clone()).await;
        assert_eq!(
            outcomes(&output),
            [("p0.html".into(), FetchOutcome::Downloaded), ("p1.html".into(), FetchOutcome::Downloaded)]
        );
        assert_eq!(output.requeued, picks[2..]);
        assert_eq!(paths(&log), ["/robots.txt", "/p0.html", "/p1.html"]);
        let next = crawler.crawl(output.requeued).await;
        assert_eq!(next.crawled.len(), 2, "the next batch starts with nothing held");
        assert_eq!(next.requeued, picks[4..]);

        // Picks on five hosts start together; the limit holds across them.
        let hosts = ["b0.test", "b1.test", "b2.test", "b3.test", "b4.test"];
        let settings = CrawlSettings { batch_body_bytes: 100_000, concurrency: 1, ..no_delay() };
        let mut crawler = crawler_with(settings, &hosts, CancellationToken::new());
        let picks: Vec<PagePick> =
            hosts.iter().map(|host| pick(&format!("http://{host}:{}/p.html", address.port()))).collect();
        let output = crawler.crawl(picks).await;
        assert_eq!((output.crawled.len(), output.requeued.len()), (2, 3));
    }

    /// A page's links count toward the batch's limit with its body: a small page can
    /// link to a thousand URLs of 8 KiB.
    #[tokio::test]
    async fn links_count_toward_the_batch_limit() {
        fn many_long_links(path: &str) -> Response {
            if path == "/robots.txt" {
                return not_found();
            }
            let base = format!("<base href=\"/{}/\">", "b".repeat(7_000));
            let links: String = (0..200).map(|n| format!("<a href={n}>")).collect();
            ([(CONTENT_TYPE, "text/html")], format!("{base}{links}<frame src=\"/frame.html\">"))
                .into_response()
        }
        let (address, _) = site(many_long_links).await;
        let settings = CrawlSettings { batch_body_bytes: 1_000_000, ..no_delay() };
        let mut crawler = crawler(settings);
        let picks: Vec<PagePick> = (0..3).map(|i| pick(&format!("http://{address}/p{i}.html"))).collect();
        let output = crawler.crawl(picks.clone()).await;
        let [crawled] = &output.crawled[..] else { panic!("{:?}", outcomes(&output)) };
        assert!(crawled.result.body.len() < 10_000);
        assert_eq!(crawled.links.links.len(), 200);
        assert!(crawled.links.held_bytes() > 1_400_000, "{}", crawled.links.held_bytes());
        assert_eq!(output.requeued, picks[1..]);

        // Counted before the page's frame waits for its host's slot, when the permit is
        // free for other hosts' picks.
        let hosts = ["b0.test", "b1.test", "b2.test", "b3.test", "b4.test"];
        let settings = CrawlSettings {
            batch_body_bytes: 1_000_000,
            concurrency: 1,
            min_host_delay: Duration::from_millis(200),
            ..CrawlSettings::default()
        };
        let mut crawler = crawler_with(settings, &hosts, CancellationToken::new());
        let picks: Vec<PagePick> =
            hosts.iter().map(|host| pick(&format!("http://{host}:{}/p.html", address.port()))).collect();
        let output = crawler.crawl(picks).await;
        assert_eq!((output.crawled.len(), output.requeued.len()), (1, 4), "{:?}", outcomes(&output));
    }

    #[tokio::test]
    async fn at_shutdown_picks_not_started_are_requeued() {
        let (address, log) = site(|_| html("<p>page</p>")).await;
        let shutdown = CancellationToken::new();
        let mut crawler = crawler_with(no_delay(), &["a.test"], shutdown.clone());
        shutdown.cancel();
        let picks = vec![
            pick(&format!("http://{address}/a.html")),
            pick(&format!("http://a.test:{}/b.html", address.port())),
        ];
        let output = crawler.crawl(picks.clone()).await;
        assert!(output.crawled.is_empty());
        assert_eq!(output.requeued, picks);
        assert!(paths(&log).is_empty());
    }

    #[tokio::test]
    async fn extreme_deadlines_and_retry_after_do_not_overflow_the_clock() {
        let (address, log) = site(|path| match path {
            "/robots.txt" => not_found(),
            "/busy.html" => {
                (StatusCode::SERVICE_UNAVAILABLE, [(RETRY_AFTER, u64::MAX.to_string())]).into_response()
            }
            _ => html("<p>page</p>"),
        })
        .await;
        // Retry-After honoured however long, so the pause itself is u64::MAX seconds. The
        // budget is ample for the pages before busy.html on a loaded machine (each batch
        // with the paused host lasts it: requeues wait for its end); nothing after
        // busy.html fits in any budget.
        let settings = CrawlSettings {
            max_retry_after: Duration::MAX,
            batch_budget: Duration::from_secs(2),
            ..no_delay()
        };
        let mut crawler = crawler(settings);
        let url = |name: &str| format!("http://{address}/{name}");
        let picks = vec![
            PagePick { deadline_ms: Some(i64::MAX), ..pick(&url("endless.html")) },
            PagePick { deadline_ms: Some(i64::MIN), ..pick(&url("long-gone.html")) },
            pick(&url("busy.html")),
            PagePick { deadline_ms: Some(i64::MAX), ..pick(&url("after.html")) },
        ];
        let output = crawler.crawl(picks).await;
        assert_eq!(
            outcomes(&output),
            [
                ("endless.html".to_owned(), FetchOutcome::Downloaded),
                ("long-gone.html".to_owned(), FetchOutcome::Deferred),
                ("busy.html".to_owned(), FetchOutcome::HttpStatus),
            ]
        );
        assert_eq!(output.crawled[2].result.retry_after_ms, Some(u64::MAX));
        assert_eq!(output.requeued.iter().map(|p| p.url.clone()).collect::<Vec<_>>(), [url("after.html")]);
        assert_eq!(paths(&log), ["/robots.txt", "/endless.html", "/busy.html"]);
        // The host stays paused in the next batch, which still ends in its budget.
        let again = crawler.crawl(vec![pick(&url("next.html"))]).await;
        assert_eq!(again.requeued.len(), 1);
        assert_eq!(paths(&log).len(), 3);
    }

    #[tokio::test]
    async fn a_panicking_host_task_fails_only_its_own_picks() {
        let (address, log) = site(|_| html("<p>page</p>")).await;
        let mut crawler = crawler_with(no_delay(), &["boom.test"], CancellationToken::new());
        let boom = format!("boom.test:{}", address.port());
        Arc::get_mut(&mut crawler.shared).unwrap().panic_on_host = Some(boom.clone());
        let picks = vec![
            pick(&format!("http://{boom}/a.html")),
            pick(&format!("http://{address}/b.html")),
            pick(&format!("http://{boom}/c.html")),
        ];
        let output = crawler.crawl(picks).await;
        assert_eq!(
            outcomes(&output),
            [
                ("a.html".to_owned(), FetchOutcome::Other),
                ("b.html".to_owned(), FetchOutcome::Downloaded),
                ("c.html".to_owned(), FetchOutcome::Other),
            ]
        );
        let error = output.crawled[0].result.error.as_deref().unwrap_or_default();
        assert!(error.contains("internal error"), "{error}");
        assert_eq!(output.crawled[0].result.host, boom);
        assert!(lock(&crawler.shared.gates).contains_key(&boom), "the host keeps its gate");
        assert_eq!(paths(&log), ["/robots.txt", "/b.html"]);
    }

    #[tokio::test]
    async fn a_huge_robots_txt_is_read_up_to_the_cap_and_its_whole_lines_apply() {
        const SIZE: usize = 10 * 1024 * 1024;
        let cap = usize::try_from(MAX_ROBOTS_BYTES).unwrap();
        let mut robots = b"User-agent: *\nDisallow: /private\n#".to_vec();
        // A rule the cap cuts to `Disallow: /o`, which would deny /open.html.
        let trap = b"Disallow: /open-to-all\n";
        robots.resize(cap - 12 - 1, b' ');
        robots.push(b'\n');
        robots.extend_from_slice(trap);
        while robots.len() < SIZE {
            robots.extend_from_slice(b"# filler\n");
        }
        let robots = Bytes::from(robots);
        let sent = Arc::new(AtomicUsize::new(0));
        let counted = sent.clone();
        let router = Router::new()
            .route(
                "/robots.txt",
                get(move || {
                    let (robots, counted) = (robots.clone(), counted.clone());
                    async move {
                        let chunks = stream::iter((0..robots.len()).step_by(64 * 1024)).map(move |start| {
                            let chunk = robots.slice(start..robots.len().min(start + 64 * 1024));
                            counted.fetch_add(chunk.len(), Ordering::Relaxed);
                            Ok::<_, Infallible>(chunk)
                        });
                        Body::from_stream(chunks)
                    }
                }),
            )
            .fallback(|| async { html("<p>page</p>") });
        let address = serve(router).await;
        let mut crawler = crawler(no_delay());
        let picks = vec![
            pick(&format!("http://{address}/private/a.html")),
            pick(&format!("http://{address}/open.html")),
        ];
        let output = crawler.crawl(picks).await;
        assert_eq!(
            outcomes(&output),
            [
                ("a.html".to_owned(), FetchOutcome::RobotsDenied),
                ("open.html".to_owned(), FetchOutcome::Downloaded)
            ]
        );
        // Socket buffers take a few MB, but the connection is dropped before the end.
        let sent = sent.load(Ordering::Relaxed);
        assert!(sent < SIZE, "the server got to send {sent} bytes");
    }

    #[tokio::test]
    async fn odd_crawl_delays_neither_panic_nor_stall_the_host() {
        // (Crawl-delay, the delay kept, whether the pages fit in the batch after robots.txt)
        let cases = [
            ("0", Some(0), true),
            ("-1", None, true),
            ("NaN", None, true),
            ("10000000000000000000", Some(86_400_000), false),
        ];
        for (value, delay_ms, fetched) in cases {
            let robots = format!("User-agent: *\nCrawl-delay: {value}\n");
            let router = Router::new()
                .route("/robots.txt", get(move || async move { robots }))
                .fallback(|| async { html("<p>page</p>") });
            let address = serve(router).await;
            // Ample for two pages on a loaded machine; a delay of a day fits in none.
            let budget = if fetched { Duration::from_secs(5) } else { Duration::from_millis(200) };
            let mut crawler = crawler(CrawlSettings { batch_budget: budget, ..no_delay() });
            let picks =
                vec![pick(&format!("http://{address}/1.html")), pick(&format!("http://{address}/2.html"))];
            let output = crawler.crawl(picks).await;
            let gate = gate_of(&crawler.shared, &address.to_string());
            assert_eq!(lock(&gate).crawl_delay.map(duration_ms), delay_ms, "{value}");
            let downloaded = output
                .crawled
                .iter()
                .filter(|c| {
                    c.result.outcome == FetchOutcome::Downloaded && c.result.crawl_delay_ms == delay_ms
                })
                .count();
            let expected = if fetched { (2, 0) } else { (0, 2) };
            assert_eq!((downloaded, output.requeued.len()), expected, "{value}");
        }
    }
}
