//! `recrawl simweb`: the simulated web over HTTP on 127.0.0.1, one virtual host per site
//! (`s{site}.sim.test`, told apart by the Host header), with its ground truth.
//!
//! Wall time maps to periods: period p starts at `epoch_unix_ms + p·period_ms`. A page's
//! text at a moment is its initial text with every change before that moment applied, a
//! change of one of the six kinds at a time, so what a crawler downloads at a time is
//! determined by the seed. Pages that do not download answer 404 or 500, or hold the
//! request until the client gives up; ETag and Last-Modified name the version and the
//! time it appeared, and a matching conditional request gets 304.
//!
//! Ground truth: `GET /_sim/truth` lists every page's change times up to now (periods)
//! and `GET /_sim/served` every response; `--truth-log` writes both at shutdown.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{AppendHeaders, IntoResponse, Response};
use axum::Router;
use clap::Args;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use recrawl_common::service::print_line;
use recrawl_common::{format_http_date, http_date_ms, unix_ms};
use recrawl_diff::criteria::ChangeKind;
use recrawl_schemas::UtcTime;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::text::{apply_change, encode, initial_words, render_html, Charset, Language, Vocabulary};
use super::web::{feed_items, ChangeState, Failure, Web, WebParams, WorldKind};
use super::{dates_shares, parse_fraction, parse_non_negative, parse_positive};

/// Every site's host name ends in this.
pub const DOMAIN: &str = "sim.test";
/// Where a site with a feed serves it; its pages name it in their heads.
const FEED_PATH: &str = "/feed.xml";

/// The virtual host of `site`.
pub fn site_host(site: u32) -> String {
    format!("s{site}.{DOMAIN}")
}
const VOCABULARY_WORDS: usize = 20_000;

/// The six kinds as changes happen on the simulated pages: replacements most, moves
/// least, so degrees spread as in the diff paper's experiment 1.
const KIND_WEIGHTS: [(ChangeKind, f64); 6] = [
    (ChangeKind::Replace, 0.35),
    (ChangeKind::Add, 0.2),
    (ChangeKind::Drop, 0.15),
    (ChangeKind::Copy, 0.1),
    (ChangeKind::Shrink, 0.1),
    (ChangeKind::Move, 0.1),
];

/// How many times its first length a page may grow. Adds and copies outweigh drops and
/// shrinks, so a fast-changing page's length would grow without bound over a long run, and
/// each change costs time linear in it: past the cap a growing change drops words instead.
const MAX_GROWTH: usize = 4;

#[derive(Debug, Clone, Args)]
pub struct SimWebArgs {
    /// Seed of the web's pages, links and change times: the same seed, the same web.
    #[arg(long, env = "RECRAWL_SIMWEB_SEED", default_value_t = 1)]
    pub seed: u64,
    /// Sites, one virtual host each (s0.sim.test, s1.sim.test, …).
    #[arg(long, env = "RECRAWL_SIMWEB_SITES", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..100_000))]
    pub sites: u32,
    /// Pages on each site.
    #[arg(long, env = "RECRAWL_SIMWEB_PAGES_PER_SITE", default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..100_000))]
    pub pages_per_site: u32,
    /// Wall milliseconds per period.
    #[arg(long, env = "RECRAWL_SIMWEB_PERIOD_MS", default_value_t = 3000, value_parser = clap::value_parser!(u64).range(10..))]
    pub period_ms: u64,
    /// Simulated minutes a period stands for (time of day of changes and load).
    #[arg(long, env = "RECRAWL_SIMWEB_PERIOD_MINUTES", default_value_t = 60.0, value_parser = parse_positive)]
    pub period_minutes: f64,
    /// Median changes per period of a page.
    #[arg(long, env = "RECRAWL_SIMWEB_MEDIAN_CHANGE_RATE", default_value_t = 0.2, value_parser = parse_positive)]
    pub median_change_rate: f64,
    /// Share of sites in Korean (half of them served in EUC-KR).
    #[arg(long, env = "RECRAWL_SIMWEB_KOREAN_SHARE", default_value_t = 0.3, value_parser = parse_fraction)]
    pub korean_share: f64,
    /// Start of period 0, Unix ms (default: now).
    #[arg(long, env = "RECRAWL_SIMWEB_EPOCH_UNIX_MS")]
    pub epoch_unix_ms: Option<i64>,
    /// Multiplies the hosts' modelled response times (0: answer at once).
    #[arg(long, env = "RECRAWL_SIMWEB_LATENCY_SCALE", default_value_t = 0.25, value_parser = parse_non_negative)]
    pub latency_scale: f64,
    /// How long a page that times out holds the request, ms.
    #[arg(long, env = "RECRAWL_SIMWEB_HOLD_MS", default_value_t = 30_000)]
    pub hold_ms: u64,
    /// Share of the sites whose `Last-Modified` dates each page's latest change.
    #[arg(long, env = "RECRAWL_SIMWEB_TRUTHFUL_DATES_SHARE", default_value_t = WebParams::default().truthful_dates_share, value_parser = parse_fraction)]
    pub truthful_dates_share: f64,
    /// Share of the sites whose `Last-Modified` is the time of the response.
    #[arg(long, env = "RECRAWL_SIMWEB_RESPONSE_DATES_SHARE", default_value_t = WebParams::default().response_dates_share, value_parser = parse_fraction)]
    pub response_dates_share: f64,
    /// Share of the sites whose `Last-Modified` never moves, whatever the page's changes;
    /// the other sites send none.
    #[arg(long, env = "RECRAWL_SIMWEB_STUCK_DATES_SHARE", default_value_t = WebParams::default().stuck_dates_share, value_parser = parse_fraction)]
    pub stuck_dates_share: f64,
    /// How the pages change: web, periodic, bursty, drifting, heavy-tailed or mixed
    /// (`docs/algorithms/worlds.md`).
    #[arg(long, env = "RECRAWL_SIMWEB_WORLD", value_enum, default_value_t = WorldKind::Web)]
    pub world: WorldKind,
    /// Whether requests fail as the estimator paper's Table 1 says: some pages never
    /// download, others now and then (default: on the `web` world only).
    #[arg(long, env = "RECRAWL_SIMWEB_FAILURES", action = clap::ArgAction::Set)]
    pub failures: Option<bool>,
    /// Share of the sites with a sitemap (`/sitemap.xml`, named in robots.txt) listing
    /// their public pages; its `<lastmod>`s date each page as the site's `Last-Modified`
    /// does (`--truthful-dates-share` and the others): truthful, the time of the
    /// request, never moving, or absent.
    #[arg(long, env = "RECRAWL_SIMWEB_SITEMAPS", default_value_t = 0.0, value_parser = parse_fraction)]
    pub sitemaps: f64,
    /// Share of a sitemap site's pages that no page links to: only its sitemap names them.
    #[arg(long, env = "RECRAWL_SIMWEB_SITEMAP_ONLY_SHARE", default_value_t = 0.0, value_parser = parse_fraction)]
    pub sitemap_only_share: f64,
    /// Share of the sites with an RSS feed (`/feed.xml`, named in each page's
    /// `<link rel="alternate">`) of their 20 latest changed pages, dated as the sitemaps.
    #[arg(long, env = "RECRAWL_SIMWEB_FEEDS", default_value_t = 0.0, value_parser = parse_fraction)]
    pub feeds: f64,
    /// Periods the web is meant to be crawled for: where in the run a drifting page's
    /// rate jumps.
    #[arg(long, env = "RECRAWL_SIMWEB_RUN_PERIODS", default_value_t = WebParams::default().run_periods, value_parser = parse_positive)]
    pub run_periods: f64,
    /// Address to serve on, host:port (port 0: any free port; the first line says which).
    #[arg(long, env = "RECRAWL_SIMWEB_LISTEN", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Write the truth (every page's change times) and the served log here at shutdown, as
    /// JSON lines.
    #[arg(long, env = "RECRAWL_SIMWEB_TRUTH_LOG")]
    pub truth_log: Option<PathBuf>,
}

impl SimWebArgs {
    pub fn web_params(&self) -> anyhow::Result<WebParams> {
        let dates =
            dates_shares(self.truthful_dates_share, self.response_dates_share, self.stuck_dates_share)?;
        Ok(dates.applied_to(WebParams {
            seed: self.seed,
            sites: self.sites,
            pages_per_site: self.pages_per_site,
            period_minutes: self.period_minutes,
            median_change_rate: self.median_change_rate,
            korean_share: self.korean_share,
            world: self.world,
            failures: self.failures.unwrap_or(self.world.fails_by_default()),
            run_periods: self.run_periods,
            sitemap_share: self.sitemaps,
            sitemap_only_share: self.sitemap_only_share,
            feed_share: self.feeds,
            ..WebParams::default()
        }))
    }
}

/// One response of the server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Served {
    pub page: Option<u32>,
    pub path: String,
    pub host: String,
    pub status: u16,
    /// Version served (changes applied); for a 304, the version it confirmed.
    pub version: Option<u64>,
    /// When, in periods.
    pub at: f64,
}

/// One page's change times up to a moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageTruth {
    pub page: u32,
    pub url: String,
    pub changes: Vec<f64>,
}

#[derive(Debug)]
struct PageText {
    version: u64,
    /// Time of the latest change applied.
    changed_at: f64,
    words: Vec<u32>,
    changes: ChangeState,
    /// The first change not applied yet.
    next_change: Option<f64>,
}

#[derive(Debug)]
struct Shared {
    web: Web,
    vocabularies: [Vocabulary; 2],
    period_ms: f64,
    epoch_unix_ms: i64,
    latency_scale: f64,
    hold: Duration,
    port: u16,
    texts: Mutex<HashMap<u32, PageText>>,
    served: Mutex<Vec<Served>>,
    shutdown: CancellationToken,
}

/// A running simulated web; stops on [`SimWebServer::shutdown`] or drop.
#[derive(Debug)]
pub struct SimWebServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    truth_log: Option<PathBuf>,
}

impl Drop for SimWebServer {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

impl SimWebServer {
    pub async fn start(args: &SimWebArgs) -> anyhow::Result<Self> {
        let params = args.web_params()?;
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("--listen {}", args.listen))?;
        let addr = listener.local_addr()?;
        let seed = params.seed;
        let shared = Arc::new(Shared {
            web: Web::generate(params),
            vocabularies: [
                Vocabulary::new(Language::English, VOCABULARY_WORDS, seed),
                Vocabulary::new(Language::Korean, VOCABULARY_WORDS, seed),
            ],
            period_ms: args.period_ms as f64,
            epoch_unix_ms: args.epoch_unix_ms.unwrap_or_else(unix_ms),
            latency_scale: args.latency_scale.max(0.0),
            hold: Duration::from_millis(args.hold_ms),
            port: addr.port(),
            texts: Mutex::new(HashMap::new()),
            served: Mutex::new(Vec::new()),
            shutdown: CancellationToken::new(),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let token = shared.shutdown.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).with_graceful_shutdown(token.cancelled_owned()).await;
        });
        Ok(Self { addr, shared, truth_log: args.truth_log.clone() })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn web(&self) -> &Web {
        &self.shared.web
    }

    /// Every site's home page: the crawl's seeds.
    pub fn home_urls(&self) -> Vec<String> {
        (0..self.shared.web.sites().len() as u32)
            .map(|site| format!("http://{}:{}/", site_host(site), self.addr.port()))
            .collect()
    }

    /// The URL a page is served at (redirected pages too: this is where the redirect ends).
    pub fn url(&self, page: u32) -> String {
        self.shared.page_url(page)
    }

    /// The page a URL of this web names (through a redirect too).
    pub fn page_of(&self, url: &str) -> Option<u32> {
        let path = url.split("://").nth(1)?.split_once('/')?.1;
        let id = path
            .strip_prefix("p/")
            .or_else(|| path.strip_prefix("private/"))
            .and_then(|file| file.strip_suffix(".html"))
            .or_else(|| path.strip_prefix("r/"))?;
        id.parse().ok().filter(|&page| (page as usize) < self.shared.web.len())
    }

    /// The moment `unix_ms` in periods.
    pub fn period_at(&self, unix_ms: i64) -> f64 {
        self.shared.period_at(unix_ms)
    }

    pub fn served(&self) -> Vec<Served> {
        self.shared.served.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Every page's change times before `until` (periods).
    pub fn truth(&self, until: f64) -> Vec<PageTruth> {
        self.shared.truth(until)
    }

    /// Stops serving; writes the truth log if one was asked for.
    pub fn shutdown(self) -> anyhow::Result<()> {
        self.shared.shutdown.cancel();
        if let Some(path) = &self.truth_log {
            let now = self.shared.period_at(unix_ms());
            let mut out = String::new();
            for page in self.shared.truth(now) {
                out.push_str(&serde_json::to_string(&serde_json::json!({ "truth": page }))?);
                out.push('\n');
            }
            for served in self.served() {
                out.push_str(&serde_json::to_string(&serde_json::json!({ "served": served }))?);
                out.push('\n');
            }
            std::fs::write(path, out).with_context(|| format!("--truth-log {}", path.display()))?;
        }
        Ok(())
    }
}

impl Shared {
    fn period_at(&self, unix_ms: i64) -> f64 {
        ((unix_ms - self.epoch_unix_ms) as f64 / self.period_ms).max(0.0)
    }

    fn unix_ms_at(&self, period: f64) -> i64 {
        self.epoch_unix_ms + (period * self.period_ms) as i64
    }

    fn site_url(&self, site: u32) -> String {
        format!("http://s{site}.{DOMAIN}:{}", self.port)
    }

    fn page_path(&self, page: u32) -> String {
        let dir = if self.web.page(page).private { "private" } else { "p" };
        format!("/{dir}/{page}.html")
    }

    fn page_url(&self, page: u32) -> String {
        format!("{}{}", self.site_url(self.web.page(page).site), self.page_path(page))
    }

    /// How a page links to `target`: relative on its own site, through `/r/` when the
    /// target is reached by a redirect.
    fn href(&self, from_site: u32, target: u32) -> String {
        let page = self.web.page(target);
        let path =
            if page.redirected && !page.private { format!("/r/{target}") } else { self.page_path(target) };
        if page.site == from_site {
            path
        } else {
            format!("{}{path}", self.site_url(page.site))
        }
    }

    fn truth(&self, until: f64) -> Vec<PageTruth> {
        (0..self.web.len() as u32)
            .map(|page| PageTruth {
                page,
                url: self.page_url(page),
                changes: self.web.changes(page, 0.0).take_while(|&t| t < until).collect(),
            })
            .collect()
    }

    fn vocabulary(&self, page: u32) -> &Vocabulary {
        match self.web.site_of(page).language {
            Language::English => &self.vocabularies[0],
            Language::Korean => &self.vocabularies[1],
        }
    }

    /// The page's text at `at`: (version, time of that version, html).
    fn render(&self, page: u32, at: f64) -> (u64, f64, String) {
        let vocabulary = self.vocabulary(page);
        let seed = self.web.params().seed;
        let mut texts = match self.texts.lock() {
            Ok(texts) => texts,
            Err(poisoned) => poisoned.into_inner(),
        };
        let text = texts.entry(page).or_insert_with(|| {
            let mut rng = Pcg64::seed_from_u64(seed ^ u64::from(page).rotate_left(29));
            let words = initial_words(vocabulary, usize::from(self.web.page(page).words), &mut rng);
            let mut changes = self.web.change_state(page);
            let next_change = changes.next_change(&self.web);
            PageText { version: 0, changed_at: 0.0, words, changes, next_change }
        });
        // Requests arrive roughly in time order; a late one sees the newer version, which
        // was live when it was answered.
        while let Some(change) = text.next_change.filter(|&t| t < at) {
            text.version += 1;
            text.changed_at = change;
            text.next_change = text.changes.next_change(&self.web);
            let mut rng = Pcg64::seed_from_u64(seed ^ u64::from(page) << 24 ^ text.version);
            let mut pick = rng.random::<f64>();
            let kind = KIND_WEIGHTS
                .iter()
                .find(|(_, weight)| {
                    pick -= weight;
                    pick < 0.0
                })
                .map_or(ChangeKind::Replace, |(kind, _)| *kind);
            let longest = usize::from(self.web.page(page).words).max(1).saturating_mul(MAX_GROWTH);
            let kind = match kind {
                ChangeKind::Add | ChangeKind::Copy if text.words.len() >= longest => ChangeKind::Drop,
                kind => kind,
            };
            // Between 0.5 % and 30 % of the words, log-uniformly: mostly small edits.
            let share = 0.005 * 60f64.powf(rng.random::<f64>());
            apply_change(kind, &mut text.words, share, vocabulary, &mut rng);
        }
        let site = self.web.page(page).site;
        let links: Vec<String> = self
            .web
            .links(page)
            .into_iter()
            .filter(|&target| !self.web.sitemaps().only_in_sitemap(self.web.page(target).site, target))
            .map(|target| self.href(site, target))
            .collect();
        let charset = self.web.site_of(page).charset;
        let feed = self.web.sitemaps().has_feed(site).then_some(FEED_PATH);
        let html =
            render_html(&format!("Page {page}"), &text.words, vocabulary, &links, charset.name(), feed);
        (text.version, text.changed_at, html)
    }

    /// The site a Host header names (`s3.DOMAIN`, with or without a port).
    fn site_named(&self, host: &str) -> Option<u32> {
        host.split(':')
            .next()
            .and_then(|name| name.strip_suffix(DOMAIN))
            .and_then(|name| name.strip_suffix('.'))
            .and_then(|name| name.strip_prefix('s'))
            .and_then(|id| id.parse::<u32>().ok())
            .filter(|&site| (site as usize) < self.web.sites().len())
    }

    fn route(&self, site: u32, path: &str) -> Route {
        let per_site = self.web.params().pages_per_site;
        let first = site * per_site;
        let id_in = |prefix: &str, suffix: &str| {
            path.strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(suffix))
                .and_then(|id| id.parse::<u32>().ok())
                .filter(|&id| id >= first && id < first + per_site)
        };
        if path == "/robots.txt" {
            return Route::Robots;
        }
        if path == "/sitemap.xml" && self.web.sitemaps().has_sitemap(site) {
            return Route::Sitemap;
        }
        if path == FEED_PATH && self.web.sitemaps().has_feed(site) {
            return Route::Feed;
        }
        if path == "/" {
            return Route::Home;
        }
        if let Some(page) = id_in("/r/", "") {
            return Route::Redirect(page);
        }
        id_in("/p/", ".html")
            .filter(|&page| !self.web.page(page).private)
            .or_else(|| id_in("/private/", ".html").filter(|&page| self.web.page(page).private))
            .map_or(Route::Missing, Route::Page)
    }

    fn robots_txt(&self, site: u32) -> String {
        let delay = self.web.sites()[site as usize].crawl_delay_ms;
        let mut body = String::from("User-agent: *\nDisallow: /private/\n");
        if delay > 0 {
            body.push_str(&format!("Crawl-delay: {}\n", f64::from(delay) / 1000.0));
        }
        if self.web.sitemaps().has_sitemap(site) {
            body.push_str(&format!("Sitemap: {}/sitemap.xml\n", self.site_url(site)));
        }
        body
    }

    /// The page's latest change before `at`, if any since time 0.
    fn latest_change(&self, page: u32, at: f64) -> Option<f64> {
        self.web.changes(page, 0.0).take_while(|&t| t < at).last()
    }

    /// The site's public pages, each `<lastmod>` as the site dates the page at `at`.
    fn sitemap(&self, site: u32, at: f64) -> String {
        let first = site * self.web.params().pages_per_site;
        let mut xml = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n",
        );
        for page in first..first + self.web.params().pages_per_site {
            if self.web.page(page).private {
                continue;
            }
            let latest = self.latest_change(page, at);
            let lastmod = self.web.last_modified(page, latest, at).map(|t| self.unix_ms_at(t));
            let lastmod =
                lastmod.map_or(String::new(), |ms| format!("<lastmod>{}</lastmod>", UtcTime::from_ms(ms)));
            xml.push_str(&format!("<url><loc>{}</loc>{lastmod}</url>\n", self.page_url(page)));
        }
        xml.push_str("</urlset>\n");
        xml
    }

    /// The site's RSS 2.0 feed: its public pages changed latest, newest first, each
    /// `<pubDate>` as the site dates the page at `at`.
    fn feed(&self, site: u32, at: f64) -> String {
        let first = site * self.web.params().pages_per_site;
        let latest = (first..first + self.web.params().pages_per_site)
            .filter(|&page| !self.web.page(page).private)
            .map(|page| (page, self.latest_change(page, at)));
        let mut xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<rss version=\"2.0\"><channel><title>Site {site}</title><link>{}/</link><description>Latest changes</description>\n",
            self.site_url(site)
        );
        for (page, latest) in feed_items(latest) {
            let date = self.web.last_modified(page, Some(latest), at).map(|t| self.unix_ms_at(t));
            let date =
                date.and_then(format_http_date).map_or(String::new(), |d| format!("<pubDate>{d}</pubDate>"));
            xml.push_str(&format!(
                "<item><title>Page {page}</title><link>{}</link>{date}</item>\n",
                self.page_url(page)
            ));
        }
        xml.push_str("</channel></rss>\n");
        xml
    }

    /// The home page links to the site's pages in order of their ids' popularity rank.
    fn home_page(&self, site: u32) -> String {
        let first = site * self.web.params().pages_per_site;
        let links: Vec<String> = (first..first + self.web.params().pages_per_site.min(20))
            .filter(|&page| !self.web.sitemaps().only_in_sitemap(site, page))
            .map(|page| self.href(site, page))
            .collect();
        let feed = self.web.sitemaps().has_feed(site).then_some(FEED_PATH);
        render_html(&format!("Site {site}"), &[], &self.vocabularies[0], &links, Charset::Utf8.name(), feed)
    }

    fn record(&self, served: Served) {
        if let Ok(mut log) = self.served.lock() {
            log.push(served);
        }
    }
}

fn etag(page: u32, version: u64) -> String {
    format!("\"{page}-{version}\"")
}

/// Whether the request's validators still match the version served now (dated
/// `last_modified_ms`, if the server dates it).
fn not_modified(headers: &HeaderMap, tag: &str, last_modified_ms: Option<i64>) -> bool {
    if let Some(value) = headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) {
        return value.split(',').any(|candidate| candidate.trim() == tag);
    }
    headers
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(http_date_ms)
        .zip(last_modified_ms)
        .is_some_and(|(since_ms, last_modified_ms)| {
            // HTTP dates have whole seconds.
            last_modified_ms / 1000 <= since_ms / 1000
        })
}

async fn handle(State(shared): State<Arc<Shared>>, headers: HeaderMap, uri: Uri) -> Response {
    let visit = Visit {
        at: shared.period_at(unix_ms()),
        host: headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned(),
        path: uri.path().to_owned(),
    };
    if visit.path.starts_with("/_sim/") {
        return match visit.path.as_str() {
            "/_sim/truth" => json(&shared.truth(visit.at)),
            "/_sim/served" => json(&shared.served.lock().map(|s| s.clone()).unwrap_or_default()),
            _ => StatusCode::NOT_FOUND.into_response(),
        };
    }
    let Some(site) = shared.site_named(&visit.host) else {
        shared.record(visit.served(StatusCode::NOT_FOUND, None, None));
        return (StatusCode::NOT_FOUND, "no such site").into_response();
    };
    match shared.route(site, &visit.path) {
        Route::Robots => {
            shared.record(visit.served(StatusCode::OK, None, None));
            ([(header::CONTENT_TYPE, "text/plain")], shared.robots_txt(site)).into_response()
        }
        Route::Sitemap => {
            shared.record(visit.served(StatusCode::OK, None, None));
            ([(header::CONTENT_TYPE, "application/xml")], shared.sitemap(site, visit.at)).into_response()
        }
        Route::Feed => {
            shared.record(visit.served(StatusCode::OK, None, None));
            ([(header::CONTENT_TYPE, "application/rss+xml")], shared.feed(site, visit.at)).into_response()
        }
        Route::Home => {
            shared.record(visit.served(StatusCode::OK, None, None));
            ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], shared.home_page(site)).into_response()
        }
        Route::Redirect(page) => {
            shared.record(visit.served(StatusCode::MOVED_PERMANENTLY, Some(page), None));
            (StatusCode::MOVED_PERMANENTLY, [(header::LOCATION, shared.page_path(page))]).into_response()
        }
        Route::Page(page) => serve_page(&shared, &headers, page, &visit).await,
        Route::Missing => {
            shared.record(visit.served(StatusCode::NOT_FOUND, None, None));
            StatusCode::NOT_FOUND.into_response()
        }
    }
}

/// One request, as the served log records it.
struct Visit {
    host: String,
    path: String,
    /// When, in periods.
    at: f64,
}

impl Visit {
    fn served(&self, status: StatusCode, page: Option<u32>, version: Option<u64>) -> Served {
        Served {
            page,
            path: self.path.clone(),
            host: self.host.clone(),
            status: status.as_u16(),
            version,
            at: self.at,
        }
    }
}

/// What a path on a site asks for.
enum Route {
    Robots,
    Sitemap,
    Feed,
    Home,
    /// A redirect to the page's URL.
    Redirect(u32),
    Page(u32),
    Missing,
}

/// A page after the host's modelled response time: its failure, a 304 for a current
/// copy, or its HTML in the site's charset.
async fn serve_page(shared: &Shared, headers: &HeaderMap, page: u32, visit: &Visit) -> Response {
    let at = visit.at;
    let model = *shared.web.page(page);
    let site_model = shared.web.site_of(page);
    let delay_ms = shared.web.response_ms(site_model, at, shared.web.bytes(page)) * shared.latency_scale;
    tokio::time::sleep(Duration::from_micros((delay_ms * 1000.0) as u64)).await;
    if !shared.web.downloads(page, at as u64) {
        let status = match model.failure {
            Failure::NotFound => StatusCode::NOT_FOUND,
            Failure::ServerError => StatusCode::INTERNAL_SERVER_ERROR,
            Failure::Timeout => {
                // Held until the client gives up (or the server stops).
                tokio::select! {
                    _ = tokio::time::sleep(shared.hold) => {}
                    _ = shared.shutdown.cancelled() => {}
                }
                StatusCode::GATEWAY_TIMEOUT
            }
        };
        shared.record(visit.served(status, Some(page), None));
        return status.into_response();
    }
    let (version, changed_at, html) = shared.render(page, at);
    let tag = etag(page, version);
    // As the site's server dates pages (`Web::last_modified`); version 0 is the page as it
    // was before the web started.
    let latest_change = (version > 0).then_some(changed_at);
    let modified_ms = shared.web.last_modified(page, latest_change, at).map(|t| shared.unix_ms_at(t));
    let validators: Vec<(header::HeaderName, String)> = std::iter::once((header::ETAG, tag.clone()))
        .chain(modified_ms.and_then(format_http_date).map(|date| (header::LAST_MODIFIED, date)))
        .collect();
    if not_modified(headers, &tag, modified_ms) {
        shared.record(visit.served(StatusCode::NOT_MODIFIED, Some(page), Some(version)));
        return (StatusCode::NOT_MODIFIED, AppendHeaders(validators)).into_response();
    }
    let charset = site_model.charset;
    let body = match encode(&html, charset) {
        Ok(body) => body,
        Err(error) => {
            shared.record(visit.served(StatusCode::INTERNAL_SERVER_ERROR, Some(page), None));
            return (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response();
        }
    };
    shared.record(visit.served(StatusCode::OK, Some(page), Some(version)));
    let content_type = format!("text/html; charset={}", charset.name());
    (AppendHeaders(validators), [(header::CONTENT_TYPE, content_type)], body).into_response()
}

fn json(value: &impl Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
    }
}

/// `recrawl simweb`: serves until SIGTERM or SIGINT, then writes its truth log.
pub async fn run(args: SimWebArgs) -> anyhow::Result<()> {
    // Installed before the first line is printed: whoever saw it may stop us at once.
    let stopped = recrawl_common::service::stop_signal()?;
    let server = SimWebServer::start(&args).await?;
    let web = server.web();
    print_line(format_args!(
        "simulated web: {} sites × {} pages on http://{} (hosts s0.{DOMAIN} … s{}.{DOMAIN}, resolve them to 127.0.0.1); period {} ms; truth at http://{}/_sim/truth",
        web.sites().len(),
        args.pages_per_site,
        server.addr(),
        web.sites().len() - 1,
        args.period_ms,
        server.addr()
    ))?;
    for url in server.home_urls() {
        print_line(url)?;
    }
    let signal = stopped.await;
    eprintln!("{signal}: stopping the simulated web");
    server.shutdown()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::web::{ServerDates, FEED_ITEMS};

    fn args(seed: u64) -> SimWebArgs {
        SimWebArgs {
            seed,
            sites: 12,
            pages_per_site: 30,
            period_ms: 100,
            period_minutes: 60.0,
            median_change_rate: 0.3,
            korean_share: 0.5,
            // Thirty periods have passed: changes behind most pages.
            epoch_unix_ms: Some(unix_ms() - 3_000),
            latency_scale: 0.0,
            hold_ms: 30_000,
            truthful_dates_share: WebParams::default().truthful_dates_share,
            response_dates_share: WebParams::default().response_dates_share,
            stuck_dates_share: WebParams::default().stuck_dates_share,
            world: WorldKind::Web,
            sitemaps: 0.0,
            sitemap_only_share: 0.0,
            feeds: 0.0,
            failures: None,
            run_periods: WebParams::default().run_periods,
            listen: "127.0.0.1:0".parse().expect("address"),
            truth_log: None,
        }
    }

    fn client(server: &SimWebServer) -> reqwest::Client {
        let mut builder = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none());
        for site in 0..server.web().sites().len() as u32 {
            builder = builder.resolve(&site_host(site), server.addr());
        }
        builder.timeout(Duration::from_secs(20)).build().expect("client")
    }

    #[tokio::test]
    async fn a_page_that_changes_for_a_long_time_stays_within_its_growth_cap() {
        let server = SimWebServer::start(&args(11)).await.expect("server");
        let web = server.web();
        let page = (0..web.len() as u32)
            .max_by(|&a, &b| web.page(a).change_rate.total_cmp(&web.page(b).change_rate))
            .expect("pages");
        let first = usize::from(web.page(page).words);
        // Long enough for thousands of changes on the fastest page.
        let at = 5_000.0 / f64::from(web.page(page).change_rate).max(1e-3);
        let (version, _, _) = server.shared.render(page, at);
        let words = server.shared.texts.lock().expect("texts")[&page].words.len();
        assert!(version > 1_000, "{version} changes");
        assert!(words <= first.max(1) * MAX_GROWTH + first, "{words} words, first {first}");
    }

    /// Pages that download and are not private, by change rate: (fastest, one that never changes).
    fn servable(web: &Web) -> impl Iterator<Item = u32> + '_ {
        (0..web.len() as u32).filter(|&p| web.page(p).download_probability >= 1.0 && !web.page(p).private)
    }

    #[tokio::test]
    async fn the_same_seed_serves_the_same_pages() {
        let (a, b) = (
            SimWebServer::start(&args(5)).await.expect("a"),
            SimWebServer::start(&args(5)).await.expect("b"),
        );
        let static_page =
            servable(a.web()).find(|&p| a.web().page(p).change_rate == 0.0).expect("a static page");
        let body = |server: &SimWebServer| {
            let (client, url) = (client(server), server.url(static_page));
            async move { client.get(url).send().await.expect("get").bytes().await.expect("body") }
        };
        let (first, second) = (body(&a).await, body(&b).await);
        assert!(first.len() > 100);
        assert_eq!(first, second);
        let other = SimWebServer::start(&args(6)).await.expect("other");
        assert_ne!(a.web().pages(), other.web().pages());
    }

    #[tokio::test]
    async fn what_was_served_agrees_with_the_truth() {
        let server = SimWebServer::start(&args(9)).await.expect("server");
        let client = client(&server);
        let pages: Vec<u32> = servable(server.web()).take(40).collect();
        for &page in &pages {
            let response = client.get(server.url(page)).send().await.expect("get");
            assert_eq!(response.status(), 200);
            let tag = response.headers().get(header::ETAG).expect("etag").to_str().expect("ascii").to_owned();
            // A conditional request with the validator it just got is answered 304, unless
            // the page changed in between.
            let again =
                client.get(server.url(page)).header(header::IF_NONE_MATCH, &tag).send().await.expect("get");
            assert!(matches!(again.status().as_u16(), 304 | 200));
        }
        let served: Vec<Served> = server.served().into_iter().filter(|s| s.version.is_some()).collect();
        assert_eq!(served.len(), 2 * pages.len());
        let until = served.iter().map(|s| s.at).fold(0.0, f64::max) + 1.0;
        let truth = server.truth(until);
        let mut changed_pages = 0;
        for entry in &served {
            let page = entry.page.expect("a page");
            let changes = &truth[page as usize].changes;
            let before = changes.iter().filter(|&&t| t < entry.at).count() as u64;
            assert_eq!(entry.version, Some(before), "page {page} at {}", entry.at);
            changed_pages += usize::from(before > 0);
        }
        assert!(changed_pages > served.len() / 4, "the web changes: {changed_pages}");
        // The truth endpoint serves the same change times.
        let endpoint =
            client.get(format!("http://{}/_sim/truth", server.addr())).send().await.expect("truth");
        let endpoint: Vec<serde_json::Value> =
            serde_json::from_str(&endpoint.text().await.expect("body")).expect("json");
        assert_eq!(endpoint.len(), server.web().len());
        let listed = endpoint[pages[0] as usize]["changes"].as_array().expect("changes").len();
        assert!(listed >= truth[pages[0] as usize].changes.iter().filter(|&&t| t < served[0].at).count());
    }

    #[tokio::test]
    async fn last_modified_is_sent_as_each_site_dates_its_pages() {
        let server =
            SimWebServer::start(&SimWebArgs { stuck_dates_share: 0.25, ..args(9) }).await.expect("server");
        let (client, web) = (client(&server), server.web());
        let mut kinds = Vec::new();
        for page in servable(web) {
            let dates = web.site_of(page).dates;
            if kinds.contains(&dates) {
                continue;
            }
            kinds.push(dates);
            let asked_ms = unix_ms();
            let response = client.get(server.url(page)).send().await.expect("get");
            let header = response
                .headers()
                .get(header::LAST_MODIFIED)
                .map(|value| http_date_ms(value.to_str().expect("ascii")).expect("an HTTP date after 1970"));
            let served = server.served().into_iter().rfind(|s| s.page == Some(page)).expect("served");
            match dates {
                ServerDates::Absent => assert_eq!(header, None),
                ServerDates::ResponseTime => {
                    let header = header.expect("the response time");
                    assert!((asked_ms / 1000 * 1000..=unix_ms()).contains(&header), "{header}");
                }
                ServerDates::Stuck => {
                    assert_eq!(header, Some(server.shared.unix_ms_at(web.made(page)) / 1000 * 1000));
                }
                ServerDates::Truthful => {
                    let changes = &server.truth(served.at + 1.0)[page as usize].changes;
                    let version = served.version.expect("a version") as usize;
                    let latest = version.checked_sub(1).map(|index| changes[index]);
                    let dated = latest.unwrap_or_else(|| web.changed_before_start(page));
                    assert_eq!(header, Some(server.shared.unix_ms_at(dated) / 1000 * 1000));
                }
            }
        }
        assert_eq!(kinds.len(), 4, "every kind of server among the sites: {kinds:?}");
    }

    /// A feed lists the latest changed public pages of its site, newest first, at most
    /// [`FEED_ITEMS`], each dated as the site dates it; the site's pages name it in their
    /// heads, and the fetch stage reads it.
    #[tokio::test]
    async fn feeds_list_their_sites_latest_changes_and_its_pages_name_them() {
        let server = SimWebServer::start(&SimWebArgs {
            feeds: 0.5,
            truthful_dates_share: 1.0,
            response_dates_share: 0.0,
            stuck_dates_share: 0.0,
            ..args(5)
        })
        .await
        .expect("server");
        let client = client(&server);
        let port = server.addr().port();
        let web = server.web();
        let mut with_feed = 0;
        for site in 0..web.sites().len() as u32 {
            let origin = format!("http://{}:{port}", site_host(site));
            let home = client.get(format!("{origin}/")).send().await.expect("home");
            let home = home.text().await.expect("text");
            let names_one =
                home.contains(r#"<link rel="alternate" type="application/rss+xml" href="/feed.xml">"#);
            assert_eq!(names_one, web.sitemaps().has_feed(site), "site {site}");
            let before = server.period_at(unix_ms());
            let answer = client.get(format!("{origin}/feed.xml")).send().await.expect("feed");
            assert_eq!(answer.status().is_success(), names_one, "site {site}");
            if !names_one {
                continue;
            }
            with_feed += 1;
            let kind = answer.headers().get(header::CONTENT_TYPE).cloned();
            assert_eq!(kind.as_ref().and_then(|v| v.to_str().ok()), Some("application/rss+xml"));
            let body = answer.bytes().await.expect("body");
            let after = server.period_at(unix_ms());
            let url = reqwest::Url::parse(&format!("{origin}/feed.xml")).expect("url");
            let read =
                recrawl_fetch::announce::read_announcements(&url, &body, &Default::default()).expect("read");
            let per_site = web.params().pages_per_site;
            let public: Vec<u32> =
                (site * per_site..(site + 1) * per_site).filter(|&page| !web.page(page).private).collect();
            // RSS dates have whole seconds.
            let dated_second = |page: u32, latest: f64| {
                let dated = web.last_modified(page, Some(latest), after).expect("truthful dates");
                server.shared.unix_ms_at(dated).div_euclid(1000) * 1000
            };
            assert!(!read.entries.is_empty() && read.entries.len() <= FEED_ITEMS, "site {site}");
            let mut claimed_before = i64::MAX;
            for entry in &read.entries {
                let page = public.iter().copied().find(|&page| entry.url.as_str() == server.url(page));
                let page = page.unwrap_or_else(|| panic!("{} is a public page of site {site}", entry.url));
                let claimed = entry.modified_unix_ms.expect("pubDate");
                assert!(claimed <= claimed_before, "newest first: {claimed} after {claimed_before}");
                claimed_before = claimed;
                let changes: Vec<f64> = web.changes(page, 0.0).take_while(|&t| t < after).collect();
                let first = changes.iter().rposition(|&t| t < before).unwrap_or(0);
                let dated = changes[first..].iter().map(|&latest| dated_second(page, latest));
                assert!(dated.clone().any(|ms| ms == claimed), "page {page}: {claimed}");
            }
            // A page changed since the oldest item (by more than its date's rounding) is listed.
            for &page in &public {
                let latest = web.changes(page, 0.0).take_while(|&t| t < before).last();
                let listed = read.entries.iter().any(|entry| entry.url.as_str() == server.url(page));
                if latest.is_some_and(|latest| dated_second(page, latest) > claimed_before + 1000) {
                    assert!(listed, "page {page} changed after the feed's oldest item");
                }
            }
        }
        assert!(with_feed > 0, "no site has a feed");
    }

    /// Sitemaps list every public page of their site, dated as the site dates its pages;
    /// robots.txt names them; no page links to the pages only they name.
    #[tokio::test]
    async fn sitemaps_list_their_sites_pages_as_the_site_dates_them() {
        let server = SimWebServer::start(&SimWebArgs {
            sitemaps: 0.5,
            sitemap_only_share: 0.3,
            feeds: 0.0,
            truthful_dates_share: 1.0,
            response_dates_share: 0.0,
            stuck_dates_share: 0.0,
            ..args(4)
        })
        .await
        .expect("server");
        let client = client(&server);
        let port = server.addr().port();
        let (mut with_sitemap, mut only_there) = (0, Vec::new());
        for site in 0..server.web().sites().len() as u32 {
            let origin = format!("http://{}:{port}", site_host(site));
            let robots = client.get(format!("{origin}/robots.txt")).send().await.expect("robots");
            let names_one =
                robots.text().await.expect("text").contains(&format!("Sitemap: {origin}/sitemap.xml"));
            // The server dates the pages as they stood when it answered: somewhere between.
            let before = server.period_at(unix_ms());
            let answer = client.get(format!("{origin}/sitemap.xml")).send().await.expect("sitemap");
            assert_eq!(answer.status().is_success(), names_one, "site {site}");
            if !names_one {
                continue;
            }
            with_sitemap += 1;
            let body = answer.bytes().await.expect("body");
            let after = server.period_at(unix_ms());
            let url = reqwest::Url::parse(&format!("{origin}/sitemap.xml")).expect("url");
            let read =
                recrawl_fetch::announce::read_announcements(&url, &body, &Default::default()).expect("read");
            let per_site = server.web().params().pages_per_site;
            let public: Vec<u32> = (site * per_site..(site + 1) * per_site)
                .filter(|&page| !server.web().page(page).private)
                .collect();
            assert_eq!(read.entries.len(), public.len(), "site {site}");
            for (entry, &page) in read.entries.iter().zip(&public) {
                assert_eq!(entry.url.as_str(), server.url(page));
                let changes: Vec<f64> = server.web().changes(page, 0.0).take_while(|&t| t < after).collect();
                let before_request = changes.iter().rev().find(|&&t| t < before).copied();
                let during = changes.iter().copied().filter(|&t| t >= before);
                let claimed = entry.modified_unix_ms.expect("lastmod");
                let dated = std::iter::once(before_request).chain(during.map(Some)).map(|latest| {
                    let dated = server.web().last_modified(page, latest, after).expect("truthful dates");
                    server.shared.unix_ms_at(dated)
                });
                assert!(dated.clone().any(|ms| (claimed - ms).abs() <= 1), "page {page}: {claimed}");
                if server.shared.web.sitemaps().only_in_sitemap(site, page) {
                    only_there.push(page);
                }
            }
        }
        assert!(with_sitemap > 0 && !only_there.is_empty(), "{with_sitemap} sitemaps, {only_there:?}");
        let hrefs = |page: u32| [format!("/p/{page}.html\""), format!("/r/{page}\"")];
        for page in 0..server.web().len() as u32 {
            let (_, _, html) = server.shared.render(page, 0.0);
            for hidden in &only_there {
                assert!(
                    hrefs(*hidden).iter().all(|href| !html.contains(href.as_str())),
                    "{page} links to {hidden}"
                );
            }
        }
        for site in 0..server.web().sites().len() as u32 {
            let home = server.shared.home_page(site);
            assert!(only_there
                .iter()
                .all(|hidden| hrefs(*hidden).iter().all(|href| !home.contains(href.as_str()))));
        }
    }

    #[tokio::test]
    async fn dates_shares_over_one_are_refused_naming_the_flags() {
        let args = SimWebArgs {
            truthful_dates_share: 0.5,
            response_dates_share: 0.3,
            stuck_dates_share: 0.3,
            ..args(9)
        };
        let Err(error) = SimWebServer::start(&args).await else { panic!("shares over 1 taken") };
        let error = error.to_string();
        assert!(error.contains("--stuck-dates-share") && error.contains("more than 1"), "{error}");
        // Arguments built in code skip the flags' parser: a share below 0 is refused too.
        let negative = SimWebArgs { truthful_dates_share: 1.0, response_dates_share: -0.5, ..args.clone() };
        let Err(error) = SimWebServer::start(&negative).await else { panic!("a negative share taken") };
        assert!(error.to_string().contains("[0, 1]"), "{error}");
        let args = SimWebArgs {
            truthful_dates_share: 0.34,
            response_dates_share: 0.56,
            stuck_dates_share: 0.1,
            ..args
        };
        // 1.0000000000000002 in floats.
        assert!(
            SimWebServer::start(&args).await.is_ok(),
            "shares adding up to 1, but for the floats' rounding"
        );
    }

    #[tokio::test]
    async fn robots_redirects_failures_and_charsets_follow_the_model() {
        let server = SimWebServer::start(&args(11)).await.expect("server");
        let client = client(&server);
        let web = server.web();
        let robots = client
            .get(format!("http://{}:{}/robots.txt", site_host(0), server.addr().port()))
            .send()
            .await
            .expect("robots");
        let robots = robots.text().await.expect("text");
        assert!(robots.contains("Disallow: /private/"));
        let delayed =
            web.sites().iter().position(|s| s.crawl_delay_ms > 0).expect("a site with a crawl delay") as u32;
        let robots = client
            .get(format!("http://{}:{}/robots.txt", site_host(delayed), server.addr().port()))
            .send()
            .await
            .expect("robots");
        assert!(robots.text().await.expect("text").contains("Crawl-delay: 0.25"));
        let redirected = servable(web).find(|&p| web.page(p).redirected).expect("a redirected page");
        let site = web.page(redirected).site;
        let response = client
            .get(format!("http://{}:{}/r/{redirected}", site_host(site), server.addr().port()))
            .send()
            .await
            .expect("redirect");
        assert_eq!(response.status(), 301);
        assert_eq!(response.headers()[header::LOCATION], format!("/p/{redirected}.html").as_str());
        let missing = (0..web.len() as u32)
            .find(|&p| {
                web.page(p).download_probability == 0.0
                    && web.page(p).failure == Failure::NotFound
                    && !web.page(p).private
            })
            .expect("a page that never downloads");
        assert_eq!(client.get(server.url(missing)).send().await.expect("get").status(), 404);
        let korean = servable(web).find(|&p| web.site_of(p).charset == Charset::EucKr);
        {
            let page = korean.expect("a page in EUC-KR");
            let response = client.get(server.url(page)).send().await.expect("get");
            assert_eq!(response.headers()[header::CONTENT_TYPE], "text/html; charset=euc-kr");
            let body = response.bytes().await.expect("body");
            let (text, _, errors) = encoding_rs::EUC_KR.decode(&body);
            assert!(!errors && text.chars().any(|c| ('\u{AC00}'..='\u{D7A3}').contains(&c)));
        }
    }

    #[tokio::test]
    async fn degrees_between_visits_are_mostly_small_and_some_large() {
        use recrawl_diff::degree::{ied, IedCosts};
        use recrawl_diff::text::{visible_text, word_hashes, CaseFold};
        let server = SimWebServer::start(&args(13)).await.expect("server");
        let words = |html: &str| word_hashes(&visible_text(html), CaseFold::None);
        let mut degrees = Vec::new();
        for page in servable(server.web()).filter(|&p| server.web().page(p).change_rate > 0.0).take(150) {
            let (first, _, before) = server.shared.render(page, 10.0);
            let (second, _, after) = server.shared.render(page, 11.0);
            // One period apart, as a crawler revisiting; rendering again at the same time
            // gives the same page.
            assert_eq!(server.shared.render(page, 11.0).2, after);
            if second > first {
                degrees.push(ied(&words(&before), &words(&after), IedCosts::default()).degree);
            }
        }
        degrees.sort_by(f64::total_cmp);
        assert!(degrees.len() > 20, "{degrees:?}");
        // Mostly small edits, some large: like the diff paper's experiment 1.
        let median = degrees[degrees.len() / 2];
        assert!(degrees[0] < 0.05 && median < 0.3 && degrees[degrees.len() - 1] > 0.3, "{degrees:?}");
    }
}
