//! The fetch stage: fetches each picked URL over HTTP, politely and only where robots.txt
//! and the address policy allow, and emits the result and the page's links.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects))]

pub mod address;
pub mod announce;
pub mod announcements;
mod clock;
pub mod crawl;
mod gate;
pub mod http;
pub mod links;
pub mod metrics;
pub mod robots;

use std::net::IpAddr;
use std::time::Duration;

use clap::Args;
use ipnet::IpNet;
use recrawl_common::links::LinkRules;
use recrawl_common::runtime::{run_stage, DeadLetterKind, Emitter, RuntimeError, SetupError, StageError};
use recrawl_common::service::run_service;
use recrawl_common::{unix_ms, InputRecord, KafkaArgs, ServiceArgs, Stage, StageContext, StateStore};
use recrawl_model::PeriodClock;
use recrawl_schemas::topics::{ANNOUNCEMENTS, DEAD_LETTER, FETCH, FETCH_RESULTS, LINKS};
use recrawl_schemas::{DiscoveredLinks, PagePick, PageRef};

use crate::address::{parse_allowed_network, parse_resolve, AddressPolicy, GuardedResolver};
use crate::announce::AnnouncementLimits;
use crate::crawl::{CrawlSettings, Crawled, Crawler};
pub use crate::http::RESULT_OVERHEAD_BYTES;
use crate::http::{FetchConfig, Fetcher, DEFAULT_CONTENT_TYPES, MAX_REDIRECTS};
use crate::links::{LinkFilter, MAX_FRAMES};
use crate::metrics::FetchMetrics;
use crate::robots::RobotsLifetimes;

pub const STAGE: &str = "fetch";

#[derive(Debug, Clone, Args)]
pub struct FetchArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub service: ServiceArgs,
    #[command(flatten)]
    pub http: HttpArgs,
    #[command(flatten)]
    pub politeness: PolitenessArgs,
    #[command(flatten)]
    pub links: LinkRules,
    /// Most distinct links published per page.
    #[arg(long, env = "RECRAWL_FETCH_MAX_LINKS", default_value_t = 1000)]
    pub max_links: usize,
    /// Same-host `<frame>` documents fetched per page, whose links count as the page's;
    /// at most 64, the frames a page keeps.
    #[arg(long, env = "RECRAWL_FETCH_MAX_FRAMES", default_value_t = 4,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_FRAMES as u64))]
    pub max_frames: usize,
    #[command(flatten)]
    pub clock: PeriodClock,
}

/// How requests are made.
#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// Limit on a whole request (every redirect hop, headers and body), milliseconds;
    /// the estimator paper's crawler gave up after 5 s.
    #[arg(long, env = "RECRAWL_FETCH_REQUEST_TIMEOUT_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_ms: u64,
    /// Limit on opening a connection, milliseconds.
    #[arg(long, env = "RECRAWL_FETCH_CONNECT_TIMEOUT_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub connect_timeout_ms: u64,
    /// Redirects followed before giving up (too_many_redirects); at most 10, as each is
    /// kept in the result.
    #[arg(long, env = "RECRAWL_FETCH_MAX_REDIRECTS", default_value_t = 5,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_REDIRECTS as u64))]
    pub max_redirects: usize,
    /// Bodies larger than this are abandoned (body_too_large); at most 48 MiB, below the
    /// envelope's payload limit.
    #[arg(long, env = "RECRAWL_FETCH_MAX_BODY_BYTES", default_value_t = 8 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1..=48 * 1024 * 1024))]
    pub max_body_bytes: u64,
    /// User-Agent header; its product token (before the first `/`) selects the
    /// robots.txt group.
    #[arg(long, env = "RECRAWL_FETCH_USER_AGENT", default_value = "recrawl/0.1")]
    pub user_agent: String,
    /// Media types whose bodies are read (comma-separated prefixes); others are recorded
    /// as unsupported_type without their body. The XML and gzip types are those of
    /// sitemaps and feeds, whose announced pages are published.
    #[arg(
        long,
        env = "RECRAWL_FETCH_CONTENT_TYPES",
        value_delimiter = ',',
        default_value = DEFAULT_CONTENT_TYPES
    )]
    pub content_types: Vec<String>,
    /// Networks the fetcher may connect to although they are loopback, private,
    /// link-local, metadata or otherwise internal (an IP or CIDR; repeat or comma-separate).
    /// Refused by default, after DNS and on every redirect hop.
    #[arg(long = "allow-address", env = "RECRAWL_FETCH_ALLOW_ADDRESSES", value_delimiter = ',', value_parser = parse_allowed_network)]
    pub allow_addresses: Vec<IpNet>,
    /// HOST=IP: connect to IP for HOST without DNS (repeat or comma-separate); the address
    /// policy still applies.
    #[arg(long = "resolve", env = "RECRAWL_FETCH_RESOLVE", value_delimiter = ',', value_parser = parse_resolve)]
    pub resolve: Vec<(String, IpAddr)>,
    /// Hosts whose connections are kept open between requests, at most, each up to
    /// --connections-per-host; past it a request to another host closes its connection
    /// after the answer, unless the host has picks queued in the batch (as many such
    /// hosts again keep theirs until their last). Each costs a file descriptor.
    #[arg(long, env = "RECRAWL_FETCH_MAX_IDLE_CONNECTIONS", default_value_t = 256,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1_000_000))]
    pub max_idle_connections: usize,
    /// How long an idle connection is kept open, milliseconds; at most --batch-budget-ms,
    /// so a batch's connections are let go before the next.
    #[arg(long, env = "RECRAWL_FETCH_IDLE_CONNECTION_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_connection_timeout_ms: u64,
}

/// How hosts are spared.
#[derive(Debug, Clone, Args)]
pub struct PolitenessArgs {
    /// Requests in flight at once, over all hosts.
    #[arg(long, env = "RECRAWL_FETCH_CONCURRENCY", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: u32,
    /// Requests to one host in flight at once.
    #[arg(long, env = "RECRAWL_FETCH_CONNECTIONS_PER_HOST", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections_per_host: u32,
    /// Least time between requests to one host, milliseconds (a longer robots.txt
    /// Crawl-delay wins).
    #[arg(long, env = "RECRAWL_FETCH_MIN_HOST_DELAY_MS", default_value_t = 1_000)]
    pub min_host_delay_ms: u64,
    /// A host answering 429 or 503 without Retry-After is left alone this long, ms
    /// (default: for the rest of the pick's period; the scheduler backs the host off for
    /// more periods as such answers repeat).
    #[arg(long, env = "RECRAWL_FETCH_OVERLOAD_PAUSE_MS")]
    pub overload_pause_ms: Option<u64>,
    /// Longest Retry-After honoured, milliseconds.
    #[arg(long, env = "RECRAWL_FETCH_MAX_RETRY_AFTER_MS", default_value_t = 3_600_000)]
    pub max_retry_after_ms: u64,
    /// How long one input batch may wait on politeness before its remaining picks are
    /// put back on the fetch topic, milliseconds; with a request and --outage-timeout-ms
    /// of retrying its outputs, below max.poll.interval.ms.
    #[arg(long, env = "RECRAWL_FETCH_BATCH_BUDGET_MS", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_budget_ms: u64,
    /// Bytes of bodies and found links one input batch may hold before its picks not yet
    /// started are put back on the fetch topic (its results are published together at its end). With up to
    /// --concurrency requests of --max-body-bytes in flight on top, this bounds the
    /// stage's memory: 256 MiB and 64 × 8 MiB fit the deploy files' 1 GiB.
    #[arg(long, env = "RECRAWL_FETCH_MAX_BATCH_BODY_BYTES", default_value_t = 256 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_batch_body_bytes: u64,
    /// How long a fetched robots.txt (or its absence) is trusted, milliseconds.
    #[arg(long, env = "RECRAWL_FETCH_ROBOTS_TTL_MS", default_value_t = 86_400_000)]
    pub robots_ttl_ms: u64,
    /// How long a host whose robots.txt answered 5xx or 429 counts as disallowed, ms.
    #[arg(long, env = "RECRAWL_FETCH_ROBOTS_ERROR_TTL_MS", default_value_t = 3_600_000)]
    pub robots_error_ttl_ms: u64,
    /// Origins whose robots.txt is kept in memory.
    #[arg(long, env = "RECRAWL_FETCH_ROBOTS_CACHE_ORIGINS", default_value_t = 100_000)]
    pub robots_cache_origins: usize,
    /// About the memory the kept robots.txt rules may take, bytes (192 a rule besides its
    /// pattern, 64 a sitemap line besides its URL, and 32 KiB for each of a file's at most
    /// 200 rules ending in `$`, which compile to regexes); the least recently used origins
    /// go first. Whichever of this and --robots-cache-origins is reached first binds: a
    /// file of 20 rules counts about 5 KiB, so 128 MiB holds some 25,000 such origins.
    #[arg(long, env = "RECRAWL_FETCH_ROBOTS_CACHE_BYTES", default_value_t = 128 << 20,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range((1 << 20)..))]
    pub robots_cache_bytes: usize,
}

/// A flag combination that cannot work.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FetchConfigError {
    #[error("--request-timeout-ms {request_ms} must be below --drain-timeout-ms {drain_ms}, so requests in flight at shutdown can finish")]
    RequestOutlastsDrain { request_ms: u64, drain_ms: u64 },
    #[error("--batch-budget-ms {budget_ms}, with a last request and --outage-timeout-ms of retrying the batch's outputs after it, must fit in max.poll.interval.ms ({poll_ms} ms), or the consumer leaves the group while a batch waits")]
    BudgetOutlastsPoll { budget_ms: u64, poll_ms: u64 },
    #[error(transparent)]
    Kafka(#[from] recrawl_common::config::ConfigError),
    #[error("--max-body-bytes {body} leaves no room for the result's other fields in --max-record-bytes {record}: at most {most}")]
    BodyOutgrowsRecord { body: u64, record: usize, most: usize },
}

impl FetchArgs {
    pub fn validate(&self) -> Result<(), FetchConfigError> {
        // The largest page accepted must fit in the record that carries its result.
        let record = self.kafka.cluster.max_record_bytes;
        let most = record.saturating_sub(RESULT_OVERHEAD_BYTES);
        if usize::try_from(self.http.max_body_bytes).map_or(true, |body| body > most) {
            return Err(FetchConfigError::BodyOutgrowsRecord {
                body: self.http.max_body_bytes,
                record,
                most,
            });
        }
        let (request_ms, drain_ms) = (self.http.request_timeout_ms, self.kafka.drain_timeout_ms);
        if request_ms >= drain_ms {
            return Err(FetchConfigError::RequestOutlastsDrain { request_ms, drain_ms });
        }
        let poll_ms = self.kafka.max_poll_interval_ms()?;
        let budget_ms = self.politeness.batch_budget_ms;
        // The last requests of a batch may start just before the budget ends, and its
        // outputs may then be retried for the outage timeout, all without a poll.
        let between_polls = budget_ms.saturating_add(request_ms).saturating_add(self.kafka.outage_timeout_ms);
        if between_polls >= poll_ms {
            return Err(FetchConfigError::BudgetOutlastsPoll { budget_ms, poll_ms });
        }
        Ok(())
    }

    pub fn fetch_config(&self) -> FetchConfig {
        let http = &self.http;
        FetchConfig {
            request_timeout: Duration::from_millis(http.request_timeout_ms),
            connect_timeout: Duration::from_millis(http.connect_timeout_ms),
            max_redirects: http.max_redirects,
            max_body_bytes: http.max_body_bytes,
            user_agent: http.user_agent.clone(),
            content_types: http.content_types.clone(),
            idle_connections_per_host: self.politeness.connections_per_host as usize,
            max_idle_hosts: http.max_idle_connections,
            idle_timeout: Duration::from_millis(
                http.idle_connection_timeout_ms.min(self.politeness.batch_budget_ms),
            ),
            resolver: GuardedResolver::new(
                AddressPolicy::new(http.allow_addresses.clone()),
                http.resolve.clone(),
            ),
        }
    }

    pub fn crawl_settings(&self) -> CrawlSettings {
        let p = &self.politeness;
        CrawlSettings {
            min_host_delay: Duration::from_millis(p.min_host_delay_ms),
            connections_per_host: p.connections_per_host as usize,
            concurrency: p.concurrency as usize,
            overload_pause: p.overload_pause_ms.map(Duration::from_millis),
            max_retry_after: Duration::from_millis(p.max_retry_after_ms),
            batch_budget: Duration::from_millis(p.batch_budget_ms),
            batch_body_bytes: p.max_batch_body_bytes,
            max_frames: self.max_frames,
            robots: RobotsLifetimes {
                ttl: Duration::from_millis(p.robots_ttl_ms),
                error_ttl: Duration::from_millis(p.robots_error_ttl_ms),
            },
            robots_capacity: p.robots_cache_origins,
            robots_cache_bytes: p.robots_cache_bytes,
            user_agent: self.http.user_agent.clone(),
            announcement_limits: AnnouncementLimits {
                max_url_bytes: crate::http::MAX_URL_BYTES,
                ..AnnouncementLimits::default()
            },
        }
    }

    pub fn link_filter(&self) -> LinkFilter {
        LinkFilter { rules: self.links.clone(), max_links: self.max_links }
    }
}

#[derive(Debug)]
pub struct Fetch {
    crawler: Crawler,
    metrics: FetchMetrics,
    clock: PeriodClock,
}

impl Fetch {
    fn emit(&self, crawled: Crawled, out: &mut Emitter) -> Result<(), StageError> {
        let Crawled { result, links, announcements } = crawled;
        self.metrics.picks.with_label_values(&[result.outcome.as_str()]).inc();
        for rejection in &links.rejected {
            self.metrics.links.with_label_values(&[rejection.as_str()]).inc();
        }
        self.metrics.links.with_label_values(&["too_long"]).inc_by(links.too_long);
        self.metrics.links.with_label_values(&["published"]).inc_by(links.links.len() as u64);
        if links.cut_short {
            self.metrics.links_cut_short.inc();
        }
        let source = PageRef::new(&result.url, &result.host);
        for link in links.links {
            let Ok(page) = PageRef::of_url(&link.url) else { continue };
            let discovered = DiscoveredLinks {
                page,
                source: Some(source.clone()),
                occurrences: link.occurrences,
                period: result.period,
                depth: result.depth.saturating_add(1),
            };
            out.send(LINKS, &discovered)?;
        }
        for announcement in &announcements {
            out.send(ANNOUNCEMENTS, announcement)?;
        }
        out.send(FETCH_RESULTS, &result)
    }
}

impl Stage for Fetch {
    // No changelog: replayed picks are fetched again and diff drops the duplicate results;
    // politeness and robots.txt live in memory.
    type State = ();

    const NAME: &'static str = STAGE;
    const INPUTS: &'static [&'static str] = &[FETCH.name];
    const OUTPUTS: &'static [&'static str] =
        &[FETCH.name, FETCH_RESULTS.name, LINKS.name, ANNOUNCEMENTS.name, DEAD_LETTER];

    async fn handle(
        &mut self,
        batch: Vec<InputRecord>,
        _state: &mut StateStore<()>,
        out: &mut Emitter,
    ) -> Result<(), StageError> {
        let now_ms = unix_ms();
        let mut picks: Vec<PagePick> = Vec::with_capacity(batch.len());
        for record in &batch {
            let Some(pick) = out.decode_keyed(record, FETCH) else { continue };
            // Its result would be of a period not begun: diff would keep that version and
            // take every real download of the URL for a late one.
            if let Some(ahead) = self.clock.ahead(pick.period, now_ms) {
                out.dead_letter(record, DeadLetterKind::Invalid, ahead);
                continue;
            }
            picks.push(pick);
        }
        if let Some(oldest) = picks.iter().map(|p| p.period).min() {
            self.metrics.oldest_period_in_flight.set(i64::try_from(oldest).unwrap_or(i64::MAX));
        }
        let output = self.crawler.crawl(picks).await;
        for announcement in &output.announcements {
            out.send(ANNOUNCEMENTS, announcement)?;
        }
        for crawled in output.crawled {
            self.emit(crawled, out)?;
        }
        for pick in output.requeued {
            out.send(FETCH, &pick)?;
        }
        Ok(())
    }
}

/// Runs the fetch stage until `ctx.shutdown`.
pub async fn run(args: FetchArgs, ctx: StageContext) -> Result<(), RuntimeError> {
    args.validate().map_err(SetupError::settings)?;
    let fetcher = Fetcher::new(args.fetch_config()).map_err(SetupError::settings)?;
    let metrics = FetchMetrics::register(ctx.metrics.registry())
        .map_err(|source| SetupError::Metrics { stage: STAGE, source })?;
    let crawler = Crawler::new(
        fetcher,
        args.crawl_settings(),
        args.link_filter(),
        metrics.clone(),
        ctx.shutdown.clone(),
    );
    run_stage(Fetch { crawler, metrics, clock: args.clock }, &args.kafka, ctx).await
}

/// The process entry point shared by `recrawl-fetch` and `recrawl stage fetch`.
pub async fn main(args: FetchArgs) -> anyhow::Result<()> {
    let service = args.service.clone();
    run_service(STAGE, &service, |ctx| run(args, ctx)).await
}
#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: FetchArgs,
    }

    fn parse(extra: &[&str]) -> Result<FetchArgs, clap::Error> {
        let mut argv = vec!["recrawl-fetch", "--brokers", "127.0.0.1:9092"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).map(|cli| cli.args)
    }

    #[test]
    fn defaults_are_the_papers_and_polite() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.validate(), Ok(()));
        let config = args.fetch_config();
        assert_eq!(config.request_timeout, Duration::from_secs(5));
        assert!(
            config.resolver.policy().check("h", "127.0.0.1".parse().unwrap()).is_err(),
            "loopback refused"
        );
        let settings = args.crawl_settings();
        assert_eq!((settings.connections_per_host, settings.min_host_delay), (1, Duration::from_secs(1)));
        assert_eq!(args.link_filter().rules, LinkRules::default());
    }

    #[test]
    fn allow_list_and_overrides_parse_and_bad_values_name_the_flag() {
        let args =
            parse(&["--allow-address", "127.0.0.1,10.0.0.0/8", "--resolve", "a.test=127.0.0.1"]).unwrap();
        let policy = args.fetch_config().resolver.policy().clone();
        assert!(policy.check("a.test", "127.0.0.1".parse().unwrap()).is_ok());
        assert!(policy.check("b", "10.9.8.7".parse().unwrap()).is_ok());
        assert!(policy.check("c", "192.168.1.1".parse().unwrap()).is_err());
        let error = parse(&["--allow-address", "10.0.0.0/99"]).unwrap_err().to_string();
        assert!(error.contains("--allow-address"), "{error}");
        let error = parse(&["--resolve", "nohost"]).unwrap_err().to_string();
        assert!(error.contains("--resolve"), "{error}");
        assert_eq!(parse(&["--max-redirects", "10"]).unwrap().fetch_config().max_redirects, 10);
        let error = parse(&["--max-redirects", "11"]).unwrap_err().to_string();
        assert!(error.contains("--max-redirects"), "{error}");
        assert_eq!(parse(&["--max-frames", "64"]).unwrap().crawl_settings().max_frames, MAX_FRAMES);
        let error = parse(&["--max-frames", "65"]).unwrap_err().to_string();
        assert!(error.contains("--max-frames"), "{error}");
    }

    #[test]
    fn timeouts_must_fit_the_drain_and_the_poll_interval() {
        let args = parse(&["--request-timeout-ms", "10000", "--drain-timeout-ms", "10000"]).unwrap();
        assert_eq!(
            args.validate(),
            Err(FetchConfigError::RequestOutlastsDrain { request_ms: 10_000, drain_ms: 10_000 })
        );
        let args = parse(&["--max-body-bytes", "16777216"]).unwrap();
        assert!(matches!(args.validate(), Err(FetchConfigError::BodyOutgrowsRecord { .. })));
        let args = parse(&["--max-body-bytes", "16777216", "--max-record-bytes", "33554432"]).unwrap();
        assert_eq!(args.validate(), Ok(()));
        // max.poll.interval.ms is the outage timeout (600 s by default) and 300 s.
        let args = parse(&["--batch-budget-ms", "294999"]).unwrap();
        assert_eq!(args.validate(), Ok(()));
        let args = parse(&["--batch-budget-ms", "300000"]).unwrap();
        assert_eq!(
            args.validate(),
            Err(FetchConfigError::BudgetOutlastsPoll { budget_ms: 300_000, poll_ms: 900_000 })
        );
        let args = parse(&["--batch-budget-ms", "300000", "--kafka-option", "max.poll.interval.ms=1000000"])
            .unwrap();
        assert_eq!(args.validate(), Ok(()));
    }
}
