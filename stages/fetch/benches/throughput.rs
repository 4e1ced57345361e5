//! The crawler's throughput: batches of 4,000 picks spread over 1,000 host names, all
//! mapped to 127.0.0.1 with `--resolve`, against a server in a child process answering
//! every path with the same 10 KB HTML page (20 links). Politeness delay 0, one connection
//! per host, 64 requests in flight; robots.txt is fetched once per host in the warm-up and
//! cached after, as in a running stage.
//!
//! `crawler` keeps the connections of the stage's default 256 origins, so three requests
//! in four open a connection; `crawler_every_connection_kept` keeps all 1,000.
//!
//! Baseline in the same run, `plain_reqwest`: the same GETs through a bare reqwest client
//! with the same concurrency, no robots.txt, politeness, address checks or link
//! extraction; the ratio is the crawler's own cost.
//!
//! After the timings, the CPU time of the crawler's process and of the server's, per
//! page, over 10 batches.

use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use futures::StreamExt;
use recrawl_fetch::address::{AddressPolicy, GuardedResolver};
use recrawl_fetch::crawl::{CrawlSettings, Crawler};
use recrawl_fetch::http::{FetchConfig, Fetcher};
use recrawl_fetch::links::LinkFilter;
use recrawl_fetch::metrics::FetchMetrics;
use recrawl_schemas::{url_key, PagePick, PickReason};
use tokio_util::sync::CancellationToken;

mod shared;

const HOSTS: usize = 1000;
const BATCH: usize = 4000;
const CONCURRENCY: usize = 64;
/// Set in the child process that serves the pages.
const SERVER_ENV: &str = "RECRAWL_FETCH_BENCH_SERVER";

/// The child: serves `page()` for every path (and a 404 for robots.txt) until killed.
fn serve() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let body = shared::small_page();
        let router = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let body = body.clone();
            async move {
                use axum::response::IntoResponse;
                if uri.path() == "/robots.txt" {
                    axum::http::StatusCode::NOT_FOUND.into_response()
                } else {
                    axum::response::Html(body).into_response()
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        println!("{}", listener.local_addr().expect("address"));
        axum::serve(listener, router).await.expect("serve");
    });
}

/// Starts the server child; its first stdout line is its address.
fn start_server() -> (Child, SocketAddr) {
    let exe = std::env::current_exe().expect("bench executable");
    let mut child = Command::new(exe)
        .env(SERVER_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("server process");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).expect("address line");
    (child, line.trim().parse().expect("socket address"))
}

fn host(i: usize) -> String {
    format!("h{i}.bench.test")
}

fn picks(port: u16, batch: usize) -> Vec<PagePick> {
    (0..BATCH)
        .map(|i| {
            let host = host(i % HOSTS);
            let url = format!("http://{host}:{port}/b{batch}/p{i}.html");
            PagePick {
                url_key: url_key(&url),
                url,
                group: host.clone(),
                host: format!("{host}:{port}"),
                period: batch as u64,
                reason: PickReason::Refresh,
                depth: 0,
                score: 0.0,
                etag: None,
                last_modified: None,
                deadline_ms: None,
            }
        })
        .collect()
}

/// The crawler as the stage runs it, its pool keeping the connections of at most
/// `idle_hosts` origins (the stage's `--max-idle-connections`, 256 by default).
fn crawler(idle_hosts: usize) -> Crawler {
    let overrides: Vec<(String, IpAddr)> =
        (0..HOSTS).map(|i| (host(i), IpAddr::from([127, 0, 0, 1]))).collect();
    let loopback = recrawl_fetch::address::parse_allowed_network("127.0.0.1").expect("network");
    let config = FetchConfig {
        resolver: GuardedResolver::new(AddressPolicy::new(vec![loopback]), overrides),
        max_idle_hosts: idle_hosts,
        ..FetchConfig::default()
    };
    let settings = CrawlSettings {
        min_host_delay: Duration::ZERO,
        concurrency: CONCURRENCY,
        ..CrawlSettings::default()
    };
    let metrics = FetchMetrics::register(&prometheus::Registry::new()).expect("metrics");
    let fetcher = Fetcher::new(config).expect("fetcher");
    Crawler::new(fetcher, settings, LinkFilter::default(), metrics, CancellationToken::new())
}

async fn crawl_batch(crawler: &mut Crawler, port: u16, batch: usize) {
    let output = crawler.crawl(picks(port, batch)).await;
    let downloaded = output.crawled.iter().filter(|c| c.result.outcome.is_download()).count();
    assert_eq!(downloaded, BATCH, "every pick downloaded");
    assert!(output.crawled.iter().all(|c| c.links.links.len() == 20));
}

async fn plain_batch(client: &reqwest::Client, port: u16, batch: usize) {
    let urls: Vec<String> =
        (0..BATCH).map(|i| format!("http://127.0.0.1:{port}/b{batch}/p{i}.html")).collect();
    let fetched =
        futures::stream::iter(urls)
            .map(|url| async move {
                client.get(url).send().await.expect("get").bytes().await.expect("body").len()
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<usize>>()
            .await;
    assert!(fetched.iter().all(|&len| len > 10_000));
}

/// User plus system CPU time of process `pid`, from /proc.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> =
        after_name.split_whitespace().skip(11).take(2).filter_map(|f| f.parse().ok()).collect();
    // Clock ticks of 1/100 s on Linux.
    Duration::from_millis(fields.iter().sum::<u64>() * 10)
}

fn main() {
    if std::env::var_os(SERVER_ENV).is_some() {
        serve();
        return;
    }
    let (mut server, address) = start_server();
    let port = address.port();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let mut default_pool = crawler(FetchConfig::default().max_idle_hosts);
    // Past the default cap most requests close their connection; with a cap above the
    // number of hosts, every host's connection is kept, as for a user who raised it.
    let mut all_kept = crawler(HOSTS);
    // Warm-up: robots.txt of every host, and the connections.
    runtime.block_on(crawl_batch(&mut default_pool, port, 0));
    runtime.block_on(crawl_batch(&mut all_kept, port, 0));
    let client = reqwest::Client::builder().no_proxy().build().expect("client");

    let mut criterion = Criterion::default().sample_size(10).configure_from_args();
    let mut group = criterion.benchmark_group("fetch_4000_pages_1000_hosts");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.measurement_time(Duration::from_secs(30));
    let mut batch = 1;
    group.bench_function("crawler", |b| {
        b.iter_custom(|iterations| {
            let started = Instant::now();
            for _ in 0..iterations {
                runtime.block_on(crawl_batch(&mut default_pool, port, batch));
                batch += 1;
            }
            started.elapsed()
        })
    });
    group.bench_function("crawler_every_connection_kept", |b| {
        b.iter_custom(|iterations| {
            let started = Instant::now();
            for _ in 0..iterations {
                runtime.block_on(crawl_batch(&mut all_kept, port, batch));
                batch += 1;
            }
            started.elapsed()
        })
    });
    group.bench_function("plain_reqwest", |b| {
        b.iter_custom(|iterations| {
            let started = Instant::now();
            for _ in 0..iterations {
                runtime.block_on(plain_batch(&client, port, batch));
                batch += 1;
            }
            started.elapsed()
        })
    });
    group.finish();

    let batches = 10;
    let (own_before, server_before, started) =
        (cpu_time(std::process::id()), cpu_time(server.id()), Instant::now());
    for _ in 0..batches {
        runtime.block_on(crawl_batch(&mut default_pool, port, batch));
        batch += 1;
    }
    let (elapsed, pages) = (started.elapsed(), (batches * BATCH) as f64);
    let per_page = |cpu: Duration| cpu.as_secs_f64() * 1e6 / pages;
    println!(
        "crawler: {:.0} pages/s over {batches} batches; CPU per page: crawler {:.0} µs, server {:.0} µs",
        pages / elapsed.as_secs_f64(),
        per_page(cpu_time(std::process::id()) - own_before),
        per_page(cpu_time(server.id()) - server_before),
    );
    criterion.final_summary();
    let _ = server.kill();
    let _ = server.wait();
}
