//! What analysts run against `change-events`: `recrawl tail` with its filters and formats,
//! ending on its own at the end of the topic, its JSON lines readable by any JSON tool; and
//! the recipes of `docs/analysts.md` (Python with confluent-kafka, DuckDB, Kafka Connect's
//! converter settings), run as written.

use std::process::Command;
use std::time::Duration;

use rdkafka::producer::FutureProducer;
use recrawl::observe::{Observed, Observer};
use recrawl_common::{unix_ms, KafkaArgs};
use recrawl_e2e::python::{python, python_imports};
use recrawl_e2e::{
    binary, kafka_flags, output_within, parse_args, produce, repository_file, unique_prefix, Broker,
    RunningStage,
};
use recrawl_schemas::topics::{CHANGE_EVENTS, FETCH_RESULTS};
use recrawl_schemas::FetchResult;

const SITES: usize = 3;
const PERIODS: u64 = 3;

/// Site s's page in period p: site 0 changes every period, the others never.
fn page(site: usize, period: u64) -> FetchResult {
    let version = if site == 0 { period } else { 0 };
    let body = format!("<p>one two three version{version}</p>");
    let mut result = FetchResult::html_page(
        &format!("http://site{site}.example/p.html"),
        &format!("site{site}.example"),
        period,
        body,
    );
    result.fetched_at_ms = unix_ms();
    result
}

/// Runs `recrawl tail change-events` with `extra` flags; it must end by itself.
fn tail(broker: &Broker, prefix: &str, extra: &[&str]) -> Vec<String> {
    let mut command = Command::new(binary("recrawl"));
    command
        .args(["tail", "change-events", "--brokers", &broker.bootstrap(), "--topic-prefix", prefix])
        .args(extra);
    let output = output_within(&mut command, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{extra:?}: {}\n{stderr}", output.status);
    String::from_utf8(output.stdout).expect("UTF-8").lines().map(str::to_owned).collect()
}

/// The change events of `SITES` sites over `PERIODS` periods, written to a new broker by
/// the diff stage; returns the broker and the topics' prefix.
async fn change_events(test: &str) -> (Broker, String) {
    let broker = Broker::start();
    let prefix = unique_prefix(test);
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
    (broker, prefix)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_filters_and_stops_at_the_end_of_the_topic() {
    let (broker, prefix) = change_events("analysts").await;
    let expected = SITES * PERIODS as usize;
    let tail = |extra: &'static [&'static str]| {
        let (broker, prefix) = (&broker, prefix.as_str());
        tokio::task::block_in_place(|| tail(broker, prefix, extra))
    };

    // Everything, as the topic carries it; tail stops where the topic ends.
    let all = tail(&[]);
    assert_eq!(all.len(), expected, "{all:?}");
    for line in &all {
        assert!(line.starts_with(r#"{"schema":"recrawl.change-event/2","#), "{line}");
        let event: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(event["page"]["url"].as_str().is_some_and(|url| url.starts_with("http://site")), "{line}");
    }
    // Site 0's changes after its first download: periods 2 and 3.
    let changed = tail(&["--changed", "--min-degree", "0.2", "--since", "1h"]);
    assert_eq!(changed.len(), 2, "{changed:?}");
    for line in &changed {
        let event: serde_json::Value = serde_json::from_str(line).expect("JSON");
        assert_eq!(
            (event["page"]["host"].as_str(), event["changed"].as_bool()),
            (Some("site0.example"), Some(true))
        );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recipes_for_analysts_run_as_written() {
    if !python_imports(&["confluent_kafka", "duckdb"], "the recipes of docs/analysts.md") {
        return;
    }
    let (broker, prefix) = change_events("recipes").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let recipe = |name: &str| repository_file(&format!("docs/analysts/{name}")).display().to_string();

    // Python with confluent-kafka: every value is parsed by json.loads; site 0's page
    // changed, the others never did.
    let (bootstrap, topic, group) =
        (broker.bootstrap(), format!("{prefix}change-events"), format!("{prefix}analyst"));
    let share = tokio::task::block_in_place(|| {
        let script = recipe("change_share.py");
        let args = ["--brokers", &bootstrap, "--topic", &topic, "--group", &group, "--idle-seconds", "3"];
        python(&[&[script.as_str()][..], &args].concat(), dir.path())
    });
    assert_eq!(
        share.lines().collect::<Vec<_>>(),
        [
            "host\tpages\tchanged\tshare",
            "site0.example\t1\t1\t1.000",
            "site1.example\t1\t0\t0.000",
            "site2.example\t1\t0\t0.000"
        ],
        "{share}"
    );

    // DuckDB over what `recrawl tail change-events --since 7d > events.jsonl` wrote: site 0's
    // page changed twice in three fetches, one word of four each time (IED 0.25).
    let events = tokio::task::block_in_place(|| tail(&broker, &prefix, &["--since", "7d"]));
    assert_eq!(events.len(), SITES * PERIODS as usize, "{events:?}");
    std::fs::write(dir.path().join("events.jsonl"), events.join("\n") + "\n").expect("events.jsonl");
    let sql = std::fs::read_to_string(recipe("most-changed.sql")).expect("most-changed.sql");
    let print_rows =
        "import duckdb, sys; [print(*row, sep='\\t') for row in duckdb.sql(sys.argv[1]).fetchall()]";
    let most_changed = python(&["-c", print_rows, &sql], dir.path());
    assert_eq!(
        most_changed.lines().collect::<Vec<_>>(),
        [
            "http://site0.example/p.html\tsite0.example\t2\t3\t0.25",
            "http://site1.example/p.html\tsite1.example\t0\t3\tNone",
            "http://site2.example/p.html\tsite2.example\t0\t3\tNone"
        ],
        "{most_changed}"
    );

    // Kafka Connect: the settings name the converters whose input every record is (the
    // pipeline test checks each public topic's keys and values against them).
    let connect =
        std::fs::read_to_string(recipe("connect-sink.properties")).expect("connect-sink.properties");
    let settings: Vec<(&str, &str)> = connect
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| line.split_once('='))
        .collect();
    for setting in [
        ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
        ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
        ("value.converter.schemas.enable", "false"),
        ("topics", "recrawl.change-events"),
    ] {
        assert!(settings.contains(&setting), "{setting:?} not in {settings:?}");
    }
}

/// Records schema 1 wrote stay readable after the upgrade: `recrawl tail` writes a schema 1
/// change event already on the topic, plain or in the first builds' envelope, as schema 2
/// (the page nested); the Python recipe reads the plain one and skips the envelope; a
/// record of a newer schema is reported, not guessed at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_1_records_on_the_topic_are_still_read() {
    use rdkafka::producer::FutureRecord;
    let broker = Broker::start();
    let prefix = unique_prefix("schema1");
    let kafka: KafkaArgs = parse_args(&kafka_flags(&broker.bootstrap(), &prefix));
    broker.create_topics(&kafka, 1).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let topic = format!("{prefix}change-events");
    let schema_1 = std::fs::read(repository_file("schemas/fixtures/v1/change-event.json")).expect("fixture");
    let schema_3 = String::from_utf8(schema_1.clone()).expect("UTF-8").replacen("/1\"", "/3\"", 1);
    let other_page = String::from_utf8(schema_1.clone()).expect("UTF-8").replace("/a.html", "/b.html");
    let header = [recrawl_schemas::envelope::MAGIC, recrawl_schemas::Format::Json as u8, 0, 1];
    let enveloped = [&header[..], other_page.as_bytes()].concat();
    for (value, version) in [(schema_1.as_slice(), "1"), (schema_3.as_bytes(), "3"), (&enveloped[..], "1")] {
        let headers = rdkafka::message::OwnedHeaders::new()
            .insert(rdkafka::message::Header { key: "schema-version", value: Some(version) });
        let record =
            FutureRecord::to(&topic).key("http://example.com/a.html").payload(value).headers(headers);
        producer.send(record, Duration::from_secs(30)).await.map_err(|(e, _)| e).expect("produced");
    }

    let lines = tokio::task::block_in_place(|| tail(&broker, &prefix, &[]));
    assert_eq!(lines.len(), 3, "{lines:?}");
    for (line, path) in [(&lines[0], "/a.html"), (&lines[2], "/b.html")] {
        let event: serde_json::Value = serde_json::from_str(line).expect("JSON");
        assert_eq!(event["schema"], "recrawl.change-event/2", "{line}");
        assert_eq!(event["page"]["url"], format!("http://example.com{path}"), "{line}");
        assert_eq!(event["page"]["site"], "example.com", "{line}");
        assert_eq!(event["fetched_at"], "2026-05-28T20:26:40.000Z", "{line}");
    }
    assert!(lines[1].contains("schema version 3, which this build does not read"), "{}", lines[1]);

    if !python_imports(&["confluent_kafka"], "the Python recipe of docs/analysts.md") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let share = tokio::task::block_in_place(|| {
        let script = repository_file("docs/analysts/change_share.py").display().to_string();
        let (bootstrap, group) = (broker.bootstrap(), format!("{prefix}analyst"));
        let args = ["--brokers", &bootstrap, "--topic", &topic, "--group", &group, "--idle-seconds", "3"];
        python(&[&[script.as_str()][..], &args].concat(), dir.path())
    });
    assert_eq!(
        share.lines().collect::<Vec<_>>(),
        ["host\tpages\tchanged\tshare", "example.com\t1\t1\t1.000"]
    );
}
