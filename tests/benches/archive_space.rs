//! The archive on the simulated web at the demo's scale: 6 sites × 25 pages, pages changing
//! at a median 0.2 times a period, 15 periods (of 300 ms here, not the demo's 3 s: the web
//! changes per period, whatever its length). Each period the fetcher GETs the period's
//! picks over HTTP, conditionally with the validators of the page's last answer, as the
//! fetch stage does: the demo's 30 picks a period, uniform (round robin: the crawl the
//! demo compares itself with), and every page every period.
//!
//! Space (printed): the WARC records the archive writes, revisits and all, against
//! storing every download in full (a 304 as the copy it confirms). Time (criterion): the
//! archive of the run's results against gzip of the same bodies alone, in the same run.

use std::collections::HashMap;
use std::hint::black_box;
use std::net::IpAddr;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use flate2::Compression;
use recrawl::sim::server::{site_host, SimWebArgs, SimWebServer};
use recrawl::sim::web::{WebParams, WorldKind};
use recrawl_archive::capture::{archive, Capture, Kind};
use recrawl_archive::warc::Gzip;
use recrawl_common::unix_ms;
use recrawl_e2e::refresh_pick;
use recrawl_fetch::address::{parse_allowed_network, AddressPolicy, GuardedResolver};
use recrawl_fetch::http::{any_redirect, FetchConfig, Fetcher};
use recrawl_schemas::{FetchOutcome, FetchResult};

const SITES: u32 = 6;
const PAGES_PER_SITE: u32 = 25;
const PERIODS: u64 = 15;
const PERIOD_MS: u64 = 300;

/// The demo's simulated web, its period 0 a second from now.
async fn web(seed: u64) -> SimWebServer {
    SimWebServer::start(&SimWebArgs {
        seed,
        sites: SITES,
        pages_per_site: PAGES_PER_SITE,
        period_ms: PERIOD_MS,
        period_minutes: 60.0,
        median_change_rate: 0.2,
        korean_share: 0.3,
        epoch_unix_ms: Some(unix_ms() + 1000),
        latency_scale: 0.0,
        hold_ms: 50,
        truthful_dates_share: WebParams::default().truthful_dates_share,
        response_dates_share: WebParams::default().response_dates_share,
        stuck_dates_share: WebParams::default().stuck_dates_share,
        world: WorldKind::Web,
        sitemaps: 0.0,
        sitemap_only_share: 0.0,
        feeds: 0.0,
        failures: None,
        run_periods: PERIODS as f64,
        listen: "127.0.0.1:0".parse().expect("address"),
        truth_log: None,
    })
    .await
    .expect("the simulated web")
}

/// The results of a crawl of `picks_per_period` pages a period, round robin.
async fn crawl(seed: u64, picks_per_period: usize) -> Vec<FetchResult> {
    let web = web(seed).await;
    let pages = (SITES * PAGES_PER_SITE) as usize;
    let overrides: Vec<(String, IpAddr)> =
        (0..SITES).map(|s| (site_host(s), IpAddr::from([127, 0, 0, 1]))).collect();
    let loopback = parse_allowed_network("127.0.0.1").expect("network");
    let config = FetchConfig {
        resolver: GuardedResolver::new(AddressPolicy::new(vec![loopback]), overrides),
        request_timeout: Duration::from_millis(200),
        ..FetchConfig::default()
    };
    let fetcher = Fetcher::new(config).expect("fetcher");
    let mut last: HashMap<String, FetchResult> = HashMap::new();
    let mut results = Vec::new();
    for period in 0..PERIODS {
        // Into the period, as the pipeline fetches: early in it.
        while web.period_at(unix_ms()) < period as f64 + 0.1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let urls: Vec<String> = (0..picks_per_period)
            .map(|i| web.url(((period as usize * picks_per_period + i) % pages) as u32))
            .collect();
        let fetches = urls.iter().map(|url| {
            let pick = refresh_pick(url, period, last.get(url));
            let fetcher = fetcher.clone();
            async move { fetcher.fetch(&pick, &any_redirect).await }
        });
        for result in futures::future::join_all(fetches).await {
            if result.outcome == FetchOutcome::Downloaded {
                last.insert(result.url.clone(), result.clone());
            }
            results.push(result);
        }
    }
    results
}

/// Bytes of the WARC records of `results`: archived (revisits where they apply), and
/// every download stored in full.
fn sizes(results: &[FetchResult]) -> (u64, u64, HashMap<&'static str, usize>) {
    let mut state: HashMap<String, Capture> = HashMap::new();
    let mut downloads: HashMap<String, &FetchResult> = HashMap::new();
    let (mut archived, mut full) = (Vec::new(), Vec::new());
    let mut gzip = Gzip::new(Compression::default());
    let mut kinds: HashMap<&'static str, usize> = HashMap::new();
    for (offset, result) in results.iter().enumerate() {
        let Some(records) = archive(result, state.get(&result.url_key), offset as i64, "w", false) else {
            continue;
        };
        let kind = match records.kind {
            Kind::Response => "response",
            Kind::Revisit => "revisit",
            Kind::NotModified => "304",
        };
        *kinds.entry(kind).or_default() += 1;
        for record in &records.records {
            let before = archived.len();
            record.write_gzip(&mut gzip, &mut archived).expect("gzip");
            let part =
                if record.kind == recrawl_archive::warc::RecordType::Request { "request" } else { "capture" };
            *kinds.entry(bytes_label(kind, part)).or_default() += archived.len() - before;
        }
        if let Some(capture) = records.capture {
            state.insert(result.url_key.clone(), capture);
        }
        // In full: a download as a first capture; a 304 as the copy it confirms.
        let copy = match result.outcome {
            FetchOutcome::Downloaded => {
                downloads.insert(result.url_key.clone(), result);
                Some(result)
            }
            _ => downloads.get(&result.url_key).copied(),
        };
        if let Some(copy) = copy {
            let stored = FetchResult { fetched_at_ms: result.fetched_at_ms, ..copy.clone() };
            for record in archive(&stored, None, offset as i64, "w", false).expect("a download").records {
                record.write_gzip(&mut gzip, &mut full).expect("gzip");
            }
        }
    }
    (archived.len() as u64, full.len() as u64, kinds)
}

/// The label of a tally of bytes: the result's kind and which of its records.
fn bytes_label(kind: &'static str, part: &'static str) -> &'static str {
    match (kind, part) {
        ("response", "request") => "bytes of responses' requests",
        ("response", _) => "bytes of responses",
        ("revisit", "request") => "bytes of revisits' requests",
        ("revisit", _) => "bytes of revisits",
        (_, "request") => "bytes of 304s' requests",
        _ => "bytes of 304 revisits",
    }
}

fn archive_all(results: &[FetchResult]) -> usize {
    let mut gzip = Gzip::new(Compression::default());
    let mut state: HashMap<&str, Capture> = HashMap::new();
    let mut out = Vec::new();
    for (offset, result) in results.iter().enumerate() {
        let Some(records) = archive(result, state.get(result.url_key.as_str()), offset as i64, "w", false)
        else {
            continue;
        };
        for record in &records.records {
            record.write_gzip(&mut gzip, &mut out).expect("gzip");
        }
        if let Some(capture) = records.capture {
            state.insert(&result.url_key, capture);
        }
    }
    out.len()
}

fn gzip_bodies(results: &[FetchResult]) -> usize {
    let mut gzip = Gzip::new(Compression::default());
    let mut out = Vec::new();
    for result in results.iter().filter(|r| r.outcome == FetchOutcome::Downloaded) {
        gzip.member(&[&result.body], &mut out).expect("gzip");
    }
    out.len()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mut group = c.benchmark_group("archive_simulated_web");
    for (name, picks) in
        [("demo_30_picks", 30), ("every_page_every_period", (SITES * PAGES_PER_SITE) as usize)]
    {
        let results = runtime.block_on(crawl(1, picks));
        let (archived, full, kinds) = sizes(&results);
        let downloads = results.iter().filter(|r| r.outcome == FetchOutcome::Downloaded).count();
        let bodies: u64 = results.iter().map(|r| r.body.len() as u64).sum();
        eprintln!(
            "{name}: {} results, {downloads} downloads ({bodies} body bytes), {kinds:?}: archive {archived} bytes, \
             every download in full {full} bytes: {:.3} of it",
            results.len(),
            archived as f64 / full as f64
        );
        group.throughput(Throughput::Bytes(bodies));
        group.bench_function(format!("{name}/baseline_gzip_bodies_alone"), |b| {
            b.iter(|| gzip_bodies(black_box(&results)))
        });
        group.bench_function(format!("{name}/archive"), |b| b.iter(|| archive_all(black_box(&results))));
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
