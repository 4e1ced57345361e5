//! What analysts run against `change-events`: `recrawl tail` with its filters and formats,
//! ending on its own at the end of the topic, its JSON lines readable by any JSON tool.

use std::process::{Command, Stdio};
use std::time::Duration;

use rdkafka::producer::FutureProducer;
use recrawl::observe::{Observed, Observer};
use recrawl_common::KafkaArgs;
use recrawl_e2e::{binary, kafka_flags, parse_args, produce, unique_prefix, Broker, RunningStage};
use recrawl_schemas::topics::{CHANGE_EVENTS, FETCH_RESULTS};
use recrawl_schemas::FetchResult;

const SITES: usize = 3;
const PERIODS: u64 = 3;

/// Site s's page in period p: site 0 changes every period, the others never.
fn page(site: usize, period: u64) -> FetchResult {
    let version = if site == 0 { period } else { 0 };
    let body = format!("<p>one two three version{version}</p>");
    FetchResult::html_page(
        &format!("http://site{site}.example/p.html"),
        &format!("site{site}.example"),
        period,
        body,
    )
}

/// Runs `recrawl tail change-events` with `extra` flags; it must end by itself.
fn tail(broker: &Broker, prefix: &str, extra: &[&str]) -> Vec<String> {
    let output = Command::new(binary("recrawl"))
        .args(["tail", "change-events", "--brokers", &broker.bootstrap(), "--topic-prefix", prefix])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("recrawl tail runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{extra:?}: {}\n{stderr}", output.status);
    String::from_utf8(output.stdout).expect("UTF-8").lines().map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_filters_and_stops_at_the_end_of_the_topic() {
    let broker = Broker::start();
    let prefix = unique_prefix("analysts");
    let flags = kafka_flags(&broker.bootstrap(), &prefix);
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let diff = RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(&flags), ctx));
    diff.ready().await;
    for period in 1..=PERIODS {
        for site in 0..SITES {
            produce(&producer, &kafka.cluster.topics(), FETCH_RESULTS, &page(site, period)).await;
        }
    }
    let observer = Observer::new(&kafka.cluster, &[CHANGE_EVENTS.name]).await.expect("observer");
    let expected = SITES * PERIODS as usize;
    for seen in 0..expected {
        let observed = tokio::time::timeout(Duration::from_secs(60), observer.next())
            .await
            .unwrap_or_else(|_| panic!("{seen} of {expected} change events"))
            .expect("observer");
        assert!(matches!(observed, Observed::Change(_)), "{observed:?}");
    }
    diff.stop().await.expect("diff stops cleanly");
    let tail = |extra: &'static [&'static str]| {
        let (broker, prefix) = (&broker, prefix.as_str());
        tokio::task::block_in_place(|| tail(broker, prefix, extra))
    };

    // Everything, as JSON objects; tail stops where the topic ends.
    let all = tail(&[]);
    assert_eq!(all.len(), expected, "{all:?}");
    for line in &all {
        let event: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(event["url"].as_str().is_some_and(|url| url.starts_with("http://site")), "{line}");
    }
    // Site 0's changes after its first download: periods 2 and 3.
    let changed = tail(&["--changed", "--min-degree", "0.2", "--since", "1h"]);
    assert_eq!(changed.len(), 2, "{changed:?}");
    for line in &changed {
        let event: serde_json::Value = serde_json::from_str(line).expect("JSON");
        assert_eq!((event["host"].as_str(), event["changed"].as_bool()), (Some("site0.example"), Some(true)));
    }
    assert!(tail(&["--changed", "--min-degree", "0.3"]).is_empty(), "one word of four: IED 0.25");
    assert_eq!(tail(&["--host", "site1.example"]).len(), PERIODS as usize);
    assert_eq!(tail(&["--limit", "4"]).len(), 4);
    // A table, one line per event.
    let table = tail(&["--format", "table", "--host", "site0.example"]);
    assert_eq!(table.len(), PERIODS as usize, "{table:?}");
    assert!(table[0].ends_with("first seen http://site0.example/p.html"), "{table:?}");
    assert!(
        table.iter().skip(1).all(|row| row.contains("changed 0.250 http://site0.example/p.html")),
        "{table:?}"
    );
}
