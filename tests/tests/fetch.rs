//! The fetch stage through the broker, against a site on 127.0.0.1: results and links are
//! published, robots.txt denials and refused addresses are reported, and a pick its batch
//! had no time for goes back on the fetch topic and is fetched later.

use std::time::Duration;

use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use rdkafka::producer::FutureProducer;
use recrawl::observe::{Observed, Observer};
use recrawl_common::KafkaArgs;
use recrawl_e2e::{kafka_flags, parse_args, produce, unique_prefix, Broker, RunningStage};
use recrawl_schemas::topics::{FETCH, FETCH_RESULTS, LINKS};
use recrawl_schemas::{host_of, url_key, DiscoveredLinks, FetchOutcome, FetchResult, PagePick, PickReason};

fn respond(uri: &Uri) -> Response {
    let html = |body: &'static str| ([(CONTENT_TYPE, "text/html")], body).into_response();
    match uri.path() {
        "/robots.txt" => "User-agent: *\nDisallow: /private/\n".into_response(),
        "/index.html" => html(r#"<a href="/a.html">a</a><a href="/img.jpg">img</a><a href="b/">b</a>"#),
        // Always busy, with a Retry-After longer than a batch's budget.
        "/busy.html" => (StatusCode::SERVICE_UNAVAILABLE, [(RETRY_AFTER, "4")]).into_response(),
        _ => html("<p>page</p>"),
    }
}

fn pick(url: &str) -> PagePick {
    PagePick {
        url: url.to_owned(),
        url_key: url_key(url),
        host: host_of(url).expect("host"),
        group: host_of(url).expect("host"),
        period: 1,
        reason: PickReason::Refresh,
        depth: 2,
        score: 1.0,
        etag: None,
        last_modified: None,
        deadline_ms: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fetch_stage_publishes_results_and_links_and_requeues_what_must_wait() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let site = listener.local_addr().expect("address");
    let router = Router::new().fallback(|uri: Uri| async move { respond(&uri) });
    tokio::spawn(async move { axum::serve(listener, router).await });

    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("fetch"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    let observer =
        Observer::new(&kafka.cluster, &[FETCH.name, FETCH_RESULTS.name, LINKS.name]).await.expect("observer");
    let mut fetch_flags = flags.clone();
    fetch_flags.extend(
        [
            "--allow-address",
            "127.0.0.1",
            "--min-host-delay-ms",
            "0",
            "--request-timeout-ms",
            "2000",
            "--batch-budget-ms",
            "500",
        ]
        .map(String::from),
    );
    let stage = RunningStage::spawn("fetch", |ctx| recrawl_fetch::run(parse_args(&fetch_flags), ctx));
    stage.ready().await;

    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let [index, private, busy, after, metadata] = [
        format!("http://{site}/index.html"),
        format!("http://{site}/private/x.html"),
        format!("http://{site}/busy.html"),
        format!("http://{site}/after.html"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
    ];
    for url in [&index, &private, &busy, &after, &metadata] {
        let pick = pick(url);
        produce(&producer, &kafka.cluster.topics(), FETCH, &pick).await;
    }

    let (mut results, mut links, mut picks_of_after): (Vec<FetchResult>, Vec<DiscoveredLinks>, usize) =
        (Vec::new(), Vec::new(), 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    // `after` waits on the busy host's Retry-After (4 s) beyond the 0.5 s budget: it is
    // requeued at least once before it is fetched.
    while !results.iter().any(|r| r.url == after) {
        let observed = tokio::time::timeout_at(deadline, observer.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "results so far: {:?}",
                    results.iter().map(|r| (&r.url, r.outcome)).collect::<Vec<_>>()
                )
            })
            .expect("observer");
        match observed {
            Observed::Pick(p) if p.url == after => picks_of_after += 1,
            Observed::Result(r) => results.push(r),
            Observed::Link(l) => links.push(l),
            _ => {}
        }
    }
    let outcome_of = |url: &str| results.iter().find(|r| r.url == url).map(|r| r.outcome);
    assert_eq!(outcome_of(&index), Some(FetchOutcome::Downloaded));
    assert_eq!(outcome_of(&private), Some(FetchOutcome::RobotsDenied));
    assert_eq!(outcome_of(&busy), Some(FetchOutcome::HttpStatus));
    assert_eq!(outcome_of(&after), Some(FetchOutcome::Downloaded));
    assert_eq!(outcome_of(&metadata), Some(FetchOutcome::BlockedAddress));
    assert_eq!(results.iter().find(|r| r.url == busy).and_then(|r| r.retry_after_ms), Some(4_000));
    assert!(picks_of_after >= 2, "requeued onto the fetch topic: seen {picks_of_after} times");

    let mut linked: Vec<(&str, u32, Option<&str>)> = links
        .iter()
        .map(|l| (l.page.url.as_str(), l.depth, l.source.as_ref().map(|source| source.url.as_str())))
        .collect();
    linked.sort_unstable();
    let (a, b) = (format!("http://{site}/a.html"), format!("http://{site}/b/"));
    assert_eq!(linked, [(a.as_str(), 3, Some(index.as_str())), (b.as_str(), 3, Some(index.as_str()))]);
    stage.stop().await.expect("clean stop");
}
