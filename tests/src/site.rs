//! A small deterministic website for the end-to-end tests (the demo crawls the
//! simulated web of `recrawl::sim`).
//!
//! It serves a home page, `pages` ordinary pages that link to each other, and
//! `failing_pages` pages that always answer 500. A page's content changes after
//! a fixed number of requests for that page rather than after some time has
//! passed, so which changes a crawler should detect is fully determined by the
//! order of its fetches, independent of wall-clock timing.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{AppendHeaders, IntoResponse, Response};
use axum::Router;
use tokio_util::sync::CancellationToken;

const HTML: &str = "text/html; charset=utf-8";

/// Words the page text is drawn from; any fixed list works, this one just
/// reads like prose so text-diffing stages see word-level changes.
#[rustfmt::skip]
const WORDS: &[&str] = &[
    "river", "lantern", "orchard", "signal", "harbor", "meadow", "copper", "whisper", "granite",
    "falcon", "velvet", "ember", "compass", "thistle", "glacier", "marble", "willow", "tundra",
    "beacon", "saffron", "canyon", "pebble", "quartz", "lagoon", "cinder", "juniper", "summit",
    "prairie", "osprey", "cobalt", "mosaic", "timber", "nectar", "basalt", "horizon", "fennel",
    "sparrow", "drift", "citadel", "ripple", "bramble", "zenith", "mariner", "lichen", "aurora",
    "kestrel", "sandstone", "meridian",
];

/// Shape of the site. Pages are numbered from 0.
#[derive(Debug, Clone)]
pub struct SiteConfig {
    /// Ordinary pages `/page/0.html` .. `/page/{pages-1}.html`.
    pub pages: usize,
    /// Page `i` changes after every `change_every[i % len]` requests served of
    /// that page; 0 (or an empty list) means it never changes, and such a page's
    /// `Last-Modified` says it was last modified on [`STATIC_PAGES_MODIFIED`].
    pub change_every: Vec<u32>,
    /// Extra pages `/broken/{j}.html` that always answer 500.
    pub failing_pages: usize,
    /// How many other ordinary pages each ordinary page links to (capped at
    /// `pages - 1`).
    pub links_per_page: usize,
    /// Pages `/listed/{k}.html` that no page links to: only `[`SITEMAP_PATH`]` names
    /// them, which robots.txt names. 0: no robots.txt and no sitemap.
    pub listed_only: usize,
}

/// When the pages that never change were written, as their `Last-Modified` says.
pub const STATIC_PAGES_MODIFIED: &str = "Sun, 01 Jan 2023 00:00:00 GMT";

/// One request the site answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Request path, without the query string.
    pub path: String,
    pub status: u16,
    /// Content version served; always 0 for anything but ordinary pages.
    pub version: u32,
}

/// A running site on `127.0.0.1`; it stops on [`DemoSite::shutdown`] or drop.
#[derive(Debug)]
pub struct DemoSite {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
}

#[derive(Debug)]
struct Shared {
    config: SiteConfig,
    log: Mutex<Log>,
}

#[derive(Debug)]
struct Log {
    /// Requests served so far, per ordinary page.
    page_counts: Vec<u64>,
    served: Vec<Served>,
}

impl DemoSite {
    /// Binds an ephemeral port on 127.0.0.1 and serves the site from a
    /// spawned task; must be called inside a tokio runtime.
    pub async fn start(config: SiteConfig) -> std::io::Result<DemoSite> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            log: Mutex::new(Log { page_counts: vec![0; config.pages], served: Vec::new() }),
            config,
        });
        let shutdown = CancellationToken::new();
        let app = Router::new().fallback(handle).with_state(Arc::clone(&shared));
        let stop = shutdown.clone().cancelled_owned();
        tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, app).with_graceful_shutdown(stop).await {
                tracing::warn!(%addr, error = %err, "demo site server failed");
            }
        });
        Ok(DemoSite { addr, shared, shutdown })
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The home page, which links to every other page: the crawl seed.
    pub fn home_url(&self) -> String {
        format!("{}/", self.base_url())
    }

    /// Home, every ordinary page and every broken page, as absolute URLs.
    pub fn all_urls(&self) -> Vec<String> {
        let base = self.base_url();
        let config = &self.shared.config;
        let mut urls = Vec::with_capacity(1 + config.pages + config.failing_pages);
        urls.push(self.home_url());
        urls.extend((0..config.pages).map(|i| format!("{base}/page/{i}.html")));
        urls.extend((0..config.failing_pages).map(|j| format!("{base}/broken/{j}.html")));
        urls
    }

    /// Snapshot of every request answered so far, in the order answered.
    pub fn served(&self) -> Vec<Served> {
        self.shared.lock().served.clone()
    }

    /// Stops accepting connections and lets in-flight requests finish.
    pub fn shutdown(self) {
        // Drop does the work; taking `self` makes the stop explicit at call sites.
        drop(self);
    }
}

impl Drop for DemoSite {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        // The log holds plain data that is never left half-updated, so a
        // panic elsewhere while holding the lock does not invalidate it.
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn change_every(&self, page: usize) -> u32 {
        let every = &self.config.change_every;
        page.checked_rem(every.len()).and_then(|k| every.get(k)).copied().unwrap_or(0)
    }

    /// Counts the request and logs it under one lock, so versions and log
    /// order agree even when requests for the same page race.
    fn record(&self, path: &str, route: Route) -> u32 {
        let every = match route {
            Route::Page(i) => u64::from(self.change_every(i)),
            _ => 0,
        };
        let mut log = self.lock();
        let version = match route {
            Route::Page(i) => match log.page_counts.get_mut(i) {
                Some(count) => {
                    let before = *count;
                    *count += 1;
                    before.checked_div(every).map_or(0, saturate_u32)
                }
                None => 0,
            },
            _ => 0,
        };
        log.served.push(Served { path: path.to_owned(), status: route.status().as_u16(), version });
        version
    }
}

fn saturate_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Home,
    Page(usize),
    Broken(usize),
    Listed(usize),
    Robots,
    Sitemap,
    NotFound,
}

impl Route {
    fn parse(path: &str, config: &SiteConfig) -> Route {
        if path == "/" {
            return Route::Home;
        }
        if let Some(i) = numbered(path, "/page/", config.pages) {
            return Route::Page(i);
        }
        if let Some(j) = numbered(path, "/broken/", config.failing_pages) {
            return Route::Broken(j);
        }
        if let Some(k) = numbered(path, "/listed/", config.listed_only) {
            return Route::Listed(k);
        }
        if config.listed_only > 0 && path == "/robots.txt" {
            return Route::Robots;
        }
        if config.listed_only > 0 && path == SITEMAP_PATH {
            return Route::Sitemap;
        }
        Route::NotFound
    }

    fn status(self) -> StatusCode {
        match self {
            Route::Home | Route::Page(_) | Route::Listed(_) | Route::Robots | Route::Sitemap => {
                StatusCode::OK
            }
            Route::Broken(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Route::NotFound => StatusCode::NOT_FOUND,
        }
    }
}

/// Parses `{prefix}{n}.html` with `n < limit`. Only the canonical spelling of
/// `n` is accepted (no sign, no leading zeros) so each page has exactly one
/// URL and per-page counts cannot be split across aliases.
fn numbered(path: &str, prefix: &str, limit: usize) -> Option<usize> {
    let digits = path.strip_prefix(prefix)?.strip_suffix(".html")?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !canonical {
        return None;
    }
    digits.parse().ok().filter(|&n| n < limit)
}

async fn handle(State(shared): State<Arc<Shared>>, headers: HeaderMap, uri: Uri) -> Response {
    let path = uri.path();
    let route = Route::parse(path, &shared.config);
    let version = shared.record(path, route);
    let status = route.status();
    let content_type = [(header::CONTENT_TYPE, HTML)];
    match route {
        Route::Home => (status, content_type, home_html(&shared.config)).into_response(),
        Route::Page(i) => {
            let body = page_html(i, version, shared.config.pages, shared.config.links_per_page);
            let etag = format!("\"{i}-{version}\"");
            let dated =
                (shared.change_every(i) == 0).then_some((header::LAST_MODIFIED, STATIC_PAGES_MODIFIED));
            (status, content_type, [(header::ETAG, etag)], AppendHeaders(dated), body).into_response()
        }
        Route::Listed(k) => (
            status,
            content_type,
            format!("<!doctype html><title>Listed {k}</title><p>Only the sitemap names me.</p>\n"),
        )
            .into_response(),
        Route::Robots => (
            status,
            [(header::CONTENT_TYPE, "text/plain")],
            format!("User-agent: *\nDisallow: /nowhere/\nSitemap: http://{}{SITEMAP_PATH}\n", host(&headers)),
        )
            .into_response(),
        Route::Sitemap => {
            (status, [(header::CONTENT_TYPE, "application/xml")], sitemap_xml(&shared.config, host(&headers)))
                .into_response()
        }
        Route::Broken(j) => (
            status,
            content_type,
            format!("<!doctype html><title>Error</title><p>Broken page {j} always fails.</p>\n"),
        )
            .into_response(),
        Route::NotFound => {
            (status, content_type, "<!doctype html><title>Not found</title><p>No such page.</p>\n")
                .into_response()
        }
    }
}

/// Where the sitemap is: under a directory, so its scope is that directory's.
pub const SITEMAP_PATH: &str = "/listed/sitemap.xml";

/// The authority the request named, for absolute URLs back to this site.
fn host(headers: &HeaderMap) -> &str {
    headers.get(header::HOST).and_then(|value| value.to_str().ok()).unwrap_or("127.0.0.1")
}

/// The sitemap of the listed pages (a sitemap names only URLs under its own directory).
fn sitemap_xml(config: &SiteConfig, host: &str) -> String {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n",
    );
    for k in 0..config.listed_only {
        xml.push_str(&format!(
            "<url><loc>http://{host}/listed/{k}.html</loc><lastmod>2024-05-0{}</lastmod><changefreq>daily</changefreq></url>\n",
            k % 9 + 1
        ));
    }
    xml.push_str("</urlset>\n");
    xml
}

fn home_html(config: &SiteConfig) -> String {
    let mut html = String::from(
        "<!doctype html>\n<html><head><title>Demo site</title></head><body>\n<h1>Demo site</h1>\n<ul>\n",
    );
    for i in 0..config.pages {
        html.push_str(&format!("<li><a href=\"page/{i}.html\">Page {i}</a></li>\n"));
    }
    for j in 0..config.failing_pages {
        html.push_str(&format!("<li><a href=\"broken/{j}.html\">Broken {j}</a></li>\n"));
    }
    html.push_str("</ul>\n</body></html>\n");
    html
}

fn page_html(i: usize, version: u32, pages: usize, links_per_page: usize) -> String {
    let mut html = format!(
        "<!doctype html>\n<html><head><title>Page {i}</title></head><body>\n<h1>Page {i}</h1>\n<p>{}</p>\n<ul>\n",
        page_text(i, version)
    );
    for (k, j) in link_targets(i, pages, links_per_page).into_iter().enumerate() {
        // Both relative forms appear so crawlers must resolve hrefs properly.
        let href = if k % 2 == 0 { format!("../page/{j}.html") } else { format!("/page/{j}.html") };
        html.push_str(&format!("<li><a href=\"{href}\">Page {j}</a></li>\n"));
    }
    html.push_str("<li><a href=\"../\">Home</a></li>\n</ul>\n</body></html>\n");
    html
}

/// A stable opening sentence (depends on the page only) followed by two that
/// depend on the version, so a change rewrites part of the page rather than
/// all of it. The closing revision note guarantees versions never collide.
fn page_text(i: usize, version: u32) -> String {
    let page = i as u64;
    let mut sentences = vec![sentence(mix(page, u64::MAX), 7)];
    for s in 0..2u64 {
        sentences.push(sentence(mix(page, (u64::from(version) << 1) | s), 9));
    }
    sentences.push(format!("Revision {version}."));
    sentences.join(" ")
}

fn sentence(mut seed: u64, words: usize) -> String {
    let mut out = String::new();
    for w in 0..words {
        seed = splitmix64(seed);
        let word = WORDS[(seed % WORDS.len() as u64) as usize];
        if w == 0 {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                out.extend(first.to_uppercase());
                out.push_str(chars.as_str());
            }
        } else {
            out.push(' ');
            out.push_str(word);
        }
    }
    out.push('.');
    out
}

fn mix(a: u64, b: u64) -> u64 {
    splitmix64(splitmix64(a) ^ b)
}

/// SplitMix64: a tiny deterministic scrambler, so the text needs no RNG crate
/// and is identical on every run.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Up to `want` distinct pages other than `i`: first `i*k+1 mod n` for
/// k = 1.., which spreads links across the site, then the following pages in
/// order to fill any slots lost to collisions.
fn link_targets(i: usize, n: usize, want: usize) -> Vec<usize> {
    let want = want.min(n.saturating_sub(1));
    let spread = (1..=want).map(|k| i.wrapping_mul(k).wrapping_add(1) % n);
    let following = (1..n).map(|d| (i + d) % n);
    let mut out = Vec::with_capacity(want);
    for j in spread.chain(following) {
        if out.len() == want {
            break;
        }
        if j != i && !out.contains(&j) {
            out.push(j);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn config(pages: usize, change_every: Vec<u32>) -> SiteConfig {
        SiteConfig { pages, change_every, failing_pages: 2, links_per_page: 3, listed_only: 0 }
    }

    fn client() -> reqwest::Client {
        // no_proxy: a proxy from the environment must never see test traffic.
        reqwest::Client::builder().no_proxy().build().expect("client")
    }

    async fn get(client: &reqwest::Client, url: &str) -> (u16, Option<String>, String) {
        let resp = client.get(url).send().await.expect("request");
        let status = resp.status().as_u16();
        let etag =
            resp.headers().get(reqwest::header::ETAG).map(|v| v.to_str().expect("etag ascii").to_owned());
        (status, etag, resp.text().await.expect("body"))
    }

    fn hrefs(body: &str) -> Vec<String> {
        body.split("href=\"")
            .skip(1)
            .map(|rest| rest.split('"').next().expect("closing quote").to_owned())
            .collect()
    }

    /// Resolves the href forms the site emits against the directory of `page_path`.
    fn resolve(base: &str, page_path: &str, href: &str) -> String {
        if href.starts_with('/') {
            return format!("{base}{href}");
        }
        let mut dir: Vec<&str> = page_path.split('/').collect();
        dir.pop();
        let mut rest = href;
        while let Some(r) = rest.strip_prefix("../") {
            dir.pop();
            rest = r;
        }
        if rest == ".." {
            dir.pop();
            rest = "";
        }
        format!("{base}{}/{rest}", dir.join("/"))
    }

    #[tokio::test]
    async fn home_links_to_every_page_and_broken_page() {
        let site = DemoSite::start(config(5, vec![1])).await.expect("start");
        let (status, etag, body) = get(&client(), &site.home_url()).await;
        assert_eq!(status, 200);
        assert_eq!(etag, None);
        let linked: BTreeSet<String> =
            hrefs(&body).iter().map(|h| resolve(&site.base_url(), "/", h)).collect();
        let expected: BTreeSet<String> = site.all_urls().into_iter().skip(1).collect();
        assert_eq!(expected.len(), 7);
        assert_eq!(linked, expected);
        assert_eq!(site.all_urls()[0], format!("{}/", site.base_url()));
    }

    #[tokio::test]
    async fn page_links_resolve_to_distinct_other_pages_and_home() {
        let site = DemoSite::start(config(6, vec![0])).await.expect("start");
        let client = client();
        let base = site.base_url();
        for i in 0..6 {
            let path = format!("/page/{i}.html");
            let (_, _, body) = get(&client, &format!("{base}{path}")).await;
            let links = hrefs(&body);
            assert!(links.iter().any(|h| h.starts_with("../page/")), "{links:?}");
            assert!(links.iter().any(|h| h.starts_with("/page/")), "{links:?}");
            let resolved: Vec<String> = links.iter().map(|h| resolve(&base, &path, h)).collect();
            let unique: BTreeSet<&String> = resolved.iter().collect();
            assert_eq!(unique.len(), 4, "3 pages + home for page {i}: {resolved:?}");
            assert!(resolved.contains(&site.home_url()));
            assert!(!resolved.contains(&format!("{base}{path}")));
            for url in &resolved {
                assert_eq!(get(&client, url).await.0, 200, "{url}");
            }
        }
    }

    #[tokio::test]
    async fn page_version_advances_every_change_every_requests() {
        let site = DemoSite::start(config(3, vec![5, 2])).await.expect("start");
        let client = client();
        let url = format!("{}/page/1.html", site.base_url());
        let mut responses = Vec::new();
        for _ in 0..5 {
            let (status, etag, body) = get(&client, &url).await;
            assert_eq!(status, 200);
            responses.push((etag.expect("page has etag"), body));
        }
        let etags: Vec<&str> = responses.iter().map(|(e, _)| e.as_str()).collect();
        assert_eq!(etags, ["\"1-0\"", "\"1-0\"", "\"1-1\"", "\"1-1\"", "\"1-2\""]);
        let bodies: Vec<&str> = responses.iter().map(|(_, b)| b.as_str()).collect();
        assert_eq!(bodies[0], bodies[1]);
        assert_ne!(bodies[1], bodies[2]);
        assert_eq!(bodies[2], bodies[3]);
        assert_ne!(bodies[3], bodies[4]);
        assert_ne!(bodies[0], bodies[4]);
        // Same (page, version) renders the same bytes on an independent site.
        let other = DemoSite::start(config(3, vec![5, 2])).await.expect("start");
        let (_, _, fresh) = get(&client, &format!("{}/page/1.html", other.base_url())).await;
        assert_eq!(fresh, bodies[0]);
    }

    #[tokio::test]
    async fn change_every_zero_never_changes() {
        let site = DemoSite::start(config(2, vec![0])).await.expect("start");
        let client = client();
        let url = format!("{}/page/1.html", site.base_url());
        let (_, first_etag, first_body) = get(&client, &url).await;
        assert_eq!(first_etag.as_deref(), Some("\"1-0\""));
        for _ in 0..6 {
            let (_, etag, body) = get(&client, &url).await;
            assert_eq!(etag, first_etag);
            assert_eq!(body, first_body);
        }
        assert!(site.served().iter().all(|s| s.version == 0));
    }

    #[tokio::test]
    async fn empty_change_every_means_never_changes() {
        let site = DemoSite::start(config(2, Vec::new())).await.expect("start");
        let client = client();
        let url = format!("{}/page/0.html", site.base_url());
        for _ in 0..3 {
            assert_eq!(get(&client, &url).await.1.as_deref(), Some("\"0-0\""));
        }
    }

    #[tokio::test]
    async fn broken_page_answers_500_as_html() {
        let site = DemoSite::start(config(2, vec![1])).await.expect("start");
        let resp = client().get(format!("{}/broken/1.html", site.base_url())).send().await.expect("request");
        assert_eq!(resp.status().as_u16(), 500);
        assert_eq!(resp.headers().get(reqwest::header::CONTENT_TYPE).expect("content type"), HTML);
        assert!(!resp.text().await.expect("body").is_empty());
    }

    #[tokio::test]
    async fn unknown_and_non_canonical_paths_answer_404() {
        let site = DemoSite::start(config(2, vec![1])).await.expect("start");
        let client = client();
        let base = site.base_url();
        for path in [
            "/nope",
            "/page/2.html",
            "/page/01.html",
            "/page/+1.html",
            "/page/.html",
            "/broken/2.html",
            "/page/1.htm",
        ] {
            assert_eq!(get(&client, &format!("{base}{path}")).await.0, 404, "{path}");
        }
        assert!(site.served().iter().all(|s| s.status == 404 && s.version == 0));
        assert_eq!(site.served().len(), 7);
    }

    #[tokio::test]
    async fn served_log_records_path_status_version_in_order() {
        let site = DemoSite::start(config(2, vec![1])).await.expect("start");
        let client = client();
        let base = site.base_url();
        for path in ["/", "/page/0.html", "/broken/0.html", "/page/0.html", "/x?y=1", "/page/1.html"] {
            get(&client, &format!("{base}{path}")).await;
        }
        let log: Vec<(String, u16, u32)> =
            site.served().into_iter().map(|s| (s.path, s.status, s.version)).collect();
        let expected = [
            ("/", 200, 0),
            ("/page/0.html", 200, 0),
            ("/broken/0.html", 500, 0),
            ("/page/0.html", 200, 1),
            ("/x", 404, 0),
            ("/page/1.html", 200, 0),
        ];
        let expected: Vec<(String, u16, u32)> =
            expected.iter().map(|&(p, s, v)| (p.to_owned(), s, v)).collect();
        assert_eq!(log, expected);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_requests_are_all_counted() {
        let site = DemoSite::start(config(2, vec![3])).await.expect("start");
        let client = client();
        let url = format!("{}/page/0.html", site.base_url());
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..20 {
            let (client, url) = (client.clone(), url.clone());
            tasks.spawn(async move { get(&client, &url).await });
        }
        let mut per_version = [0usize; 7];
        while let Some(joined) = tasks.join_next().await {
            let (status, etag, _) = joined.expect("task");
            assert_eq!(status, 200);
            let etag = etag.expect("etag");
            let version: usize =
                etag.trim_matches('"').strip_prefix("0-").expect("page 0 etag").parse().expect("version");
            per_version[version] += 1;
        }
        assert_eq!(per_version, [3, 3, 3, 3, 3, 3, 2]);
        let versions: Vec<u32> = site.served().iter().map(|s| s.version).collect();
        let expected: Vec<u32> = (0..20).map(|k| k / 3).collect();
        assert_eq!(versions, expected);
    }

    #[tokio::test]
    async fn shutdown_stops_accepting_connections() {
        let site = DemoSite::start(config(1, vec![1])).await.expect("start");
        let home = site.home_url();
        assert_eq!(get(&client(), &home).await.0, 200);
        site.shutdown();
        // The server task notices cancellation asynchronously; a bounded
        // number of fresh-connection attempts must end in a refusal.
        let mut refused = false;
        for _ in 0..100 {
            let attempt = reqwest::Client::builder()
                .no_proxy()
                .pool_max_idle_per_host(0)
                .build()
                .expect("client")
                .get(&home)
                .send()
                .await;
            if attempt.is_err() {
                refused = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(refused, "server still answering after shutdown");
    }

    #[test]
    fn link_targets_are_distinct_others_capped_at_site_size() {
        for n in 1..12 {
            for i in 0..n {
                for want in 0..15 {
                    let links = link_targets(i, n, want);
                    assert_eq!(links.len(), want.min(n - 1));
                    assert!(links.iter().all(|&j| j != i && j < n));
                    let unique: BTreeSet<_> = links.iter().collect();
                    assert_eq!(unique.len(), links.len());
                }
            }
        }
        assert_eq!(link_targets(3, 10, 3), [4, 7, 0]);
    }
}
