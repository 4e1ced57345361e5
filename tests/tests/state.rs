//! Partitioned state: restored from the changelog when partitions move between instances,
//! replays are no-ops, malformed input is dead-lettered and counted, and a changelog
//! record no stage could have written is skipped and counted.

use std::time::Duration;

use rdkafka::mocking::{MockCluster, MockCoordinator};
use rdkafka::producer::{FutureProducer, FutureRecord};
use recrawl::observe::{Observed, Observer};
use recrawl_common::KafkaArgs;
use recrawl_e2e::{kafka_flags, metric, parse_args, produce, unique_prefix, wait_for, Broker, RunningStage};
use recrawl_scheduler::book::{Book, SchedulerState};
use recrawl_scheduler::hosts::Hosts;
use recrawl_schemas::topics::{CHANGE_EVENTS, DEAD_LETTER, FETCH_RESULTS};
use recrawl_schemas::{encode, ChangeEvent, FetchOutcome, FetchResult, TopicCatalogue};

const URLS: usize = 8;
const ORIGINAL: &str = "<p>one two three alpha</p>";
/// One word of four replaced.
const EDITED: &str = "<p>one two three <b>beta</b></p>";

fn result(index: usize, period: u64, body: &str) -> FetchResult {
    let url = format!("http://site{index}.example/page.html");
    FetchResult::html_page(&url, &format!("site{index}.example"), period, body)
}

async fn events_until(
    observer: &Observer,
    events: &mut Vec<ChangeEvent>,
    dead: &mut usize,
    count: usize,
    dead_count: usize,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while events.len() < count || *dead < dead_count {
        let observed = tokio::time::timeout_at(deadline, observer.next())
            .await
            .unwrap_or_else(|_| panic!("only {} of {count} change events", events.len()))
            .expect("observer");
        match observed {
            Observed::Change(event) => events.push(event),
            Observed::DeadLetter(_) => *dead += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_state_follows_partitions_between_instances_and_replays_are_noops() {
    let broker = Broker::start();
    let prefix = unique_prefix("state");
    let flags = kafka_flags(&broker.bootstrap(), &prefix);
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 4).await;
    let topic = kafka.cluster.topics().name(FETCH_RESULTS.name);
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let observer = Observer::new(&kafka.cluster, &[CHANGE_EVENTS.name, DEAD_LETTER]).await.expect("observer");
    let (mut events, mut dead) = (Vec::new(), 0);

    // One instance sees period 1 of every URL.
    let first = RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(&flags), ctx));
    first.ready().await;
    for i in 0..URLS {
        let page = result(i, 1, ORIGINAL);
        produce(&producer, &kafka.cluster.topics(), FETCH_RESULTS, &page).await;
    }
    events_until(&observer, &mut events, &mut dead, URLS, 0).await;
    assert!(events.iter().all(|e| e.first_seen && e.changed.is_none()));

    // A second instance joins: the partitions it takes bring their state along, so
    // period 2 (same bodies) is unchanged for every URL, whichever instance sees it.
    let second = RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(&flags), ctx));
    second.ready().await;
    for i in 0..URLS {
        let page = result(i, 2, ORIGINAL);
        produce(&producer, &kafka.cluster.topics(), FETCH_RESULTS, &page).await;
    }
    events_until(&observer, &mut events, &mut dead, 2 * URLS, 0).await;
    for event in &events[URLS..] {
        assert_eq!(
            (event.period, event.changed, event.first_seen),
            (2, Some(false), false),
            "{}",
            event.page.url
        );
    }
    let second_keys = second.ctx.metrics.state_keys.get();
    assert!(
        second_keys > 0 && second_keys < URLS as i64,
        "the second instance holds part of the state: {second_keys}"
    );

    // The first leaves; the second takes everything. A replay of period 2 with another
    // body is ignored, period 4 compares with period 2's content; then a result of period
    // 3 arrives late (as fetch sends a pick it requeued behind a later one): it has its
    // event, its replay and an old period's replay have none.
    first.stop().await.expect("first instance stops cleanly");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    // The gauge is set when the restore after the rebalance is done; only looking again
    // shows it.
    while second.ctx.metrics.state_keys.get() < URLS as i64 {
        assert!(tokio::time::Instant::now() < deadline, "state never moved to the second instance");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let replayed = result(0, 2, "replayed");
    produce(&producer, &kafka.cluster.topics(), FETCH_RESULTS, &replayed).await;
    let truncated =
        FutureRecord::to(&topic).key("http://site0.example/page.html").payload(b"\xc5\x01".as_slice());
    producer.send(truncated, Duration::from_secs(10)).await.expect("produced");
    for i in 0..URLS {
        let page = result(i, 4, if i % 2 == 0 { EDITED } else { ORIGINAL });
        produce(&producer, &kafka.cluster.topics(), FETCH_RESULTS, &page).await;
    }
    // The URL's next result comes after them on its partition: once its event is in,
    // any event of theirs would be too.
    let late = FetchResult { outcome: FetchOutcome::Deferred, http_status: None, ..result(1, 3, "") };
    for page in [&late, &late, &result(1, 1, "replayed"), &result(1, 5, ORIGINAL)] {
        produce(&producer, &kafka.cluster.topics(), FETCH_RESULTS, page).await;
    }
    events_until(&observer, &mut events, &mut dead, 3 * URLS + 2, 1).await;
    let after: Vec<(u64, bool)> = events
        .iter()
        .filter(|e| e.page.url == late.url && e.period != 4)
        .map(|e| (e.period, e.downloaded))
        .skip(2)
        .collect();
    assert_eq!(after, [(3, false), (5, true)], "the late result's event, then the next one's");
    events.retain(|e| e.period != 3 && e.period != 5);
    for event in &events[2 * URLS..] {
        let index: usize =
            event.page.host.trim_start_matches("site").trim_end_matches(".example").parse().expect("index");
        assert_eq!((event.period, event.changed), (4, Some(index.is_multiple_of(2))), "{}", event.page.url);
        // The restored version carries the old words, not only a hash.
        let degrees = event.degrees.as_ref().expect("compared");
        let expected_ied = if index.is_multiple_of(2) { 0.25 } else { 0.0 };
        assert_eq!(
            (degrees.ied, degrees.ied_ops.replace),
            (expected_ied, u64::from(index.is_multiple_of(2)))
        );
    }
    assert_eq!(events.len(), 3 * URLS, "replays produced no events");
    assert_eq!(dead, 1);
    // Counters move when the broker acknowledges, which can be after the observer has
    // read the record; a stopped instance has drained, so its counters are final.
    let second_ctx = second.ctx.clone();
    second.stop().await.expect("second instance stops cleanly");
    let metrics = second_ctx.metrics.render();
    let dead_letters: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("recrawl_dead_letters_total{") && !l.ends_with(" 0"))
        .collect();
    assert_eq!(dead_letters.len(), 1, "{metrics}");
    assert!(
        dead_letters[0].contains(r#"kind="undecodable""#) && dead_letters[0].ends_with(" 1"),
        "{}",
        dead_letters[0]
    );
    drop(broker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_compares_with_versions_restored_after_a_restart() {
    let broker = Broker::start();
    let prefix = unique_prefix("restart");
    let flags = kafka_flags(&broker.bootstrap(), &prefix);
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let observer = Observer::new(&kafka.cluster, &[CHANGE_EVENTS.name, DEAD_LETTER]).await.expect("observer");
    let (mut events, mut dead) = (Vec::new(), 0);

    let before = RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(&flags), ctx));
    before.ready().await;
    for i in 0..URLS {
        let page = result(i, 1, ORIGINAL);
        produce(&producer, &kafka.cluster.topics(), FETCH_RESULTS, &page).await;
    }
    events_until(&observer, &mut events, &mut dead, URLS, 0).await;
    before.stop().await.expect("stops cleanly");

    // A new process: nothing in memory, everything from the changelog.
    let after = RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(&flags), ctx));
    after.ready().await;
    assert_eq!(after.ctx.metrics.state_keys.get(), URLS as i64, "every URL's version restored");
    for i in 0..URLS {
        let page = result(i, 2, EDITED);
        produce(&producer, &kafka.cluster.topics(), FETCH_RESULTS, &page).await;
    }
    events_until(&observer, &mut events, &mut dead, 2 * URLS, 0).await;
    for event in &events[URLS..] {
        assert!(!event.first_seen, "{}", event.page.url);
        assert_eq!(
            (event.changed, event.text_changed, event.previous_words),
            (Some(true), Some(true), Some(4))
        );
        let degrees = event.degrees.as_ref().expect("compared");
        assert_eq!(
            (degrees.ied, degrees.ied_ops.replace, degrees.ed),
            (0.25, 1, Some(0.25)),
            "{}",
            event.page.url
        );
        assert!(degrees.cos.is_some_and(|d| d > 0.0), "COS's corpus was rebuilt from the restored versions");
    }
    after.stop().await.expect("stops cleanly");
    drop(broker);
}

/// A crash while a batch's outputs are undeliverable must not leave behind a changelog
/// that marks the batch applied: its replay would be skipped as a repeat, and the outputs
/// lost. Two mock brokers, `change-events` led by the second: with it down, the diff
/// stage's change event cannot be delivered while the changelog (on the first) could be.
/// The stage is stopped mid-retry (a crash as far as the batch goes: its producer purges
/// what it holds), the broker comes back, and a new instance must still emit the event.
/// Mock-only: it places partition leaders, which an external broker does not let a test do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_the_outputs_are_acknowledged_loses_no_output() {
    let mock = MockCluster::new(2).expect("mock cluster");
    let prefix = unique_prefix("changelog-order");
    let mut flags = kafka_flags(&mock.bootstrap_servers(), &prefix);
    // Failed deliveries surface after 2 s rather than 30; the drain gives up at once.
    flags.extend(["--kafka-option", "message.timeout.ms=2000"].map(String::from));
    let drain = flags.iter().position(|flag| flag == "--drain-timeout-ms").expect("drain flag") + 1;
    flags[drain] = "200".to_owned();
    let kafka: KafkaArgs = parse_args(&flags);
    let names = kafka.cluster.topics();
    let catalogue = TopicCatalogue::builtin();
    recrawl::demo::create_topics_on_mock(&mock, &catalogue, &names).expect("topics");
    for topic in &catalogue.topics {
        let leader = if topic.name == CHANGE_EVENTS.name { 2 } else { 1 };
        for partition in 0..topic.partitions {
            mock.partition_leader(&names.name(&topic.name), partition, Some(leader)).expect("leader");
        }
    }
    mock.coordinator(MockCoordinator::Group(kafka.group_for("diff")), 1).expect("coordinator");
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");

    let crashing = RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(&flags), ctx));
    crashing.ready().await;
    mock.broker_down(2).expect("broker 2 down");
    produce(&producer, &names, FETCH_RESULTS, &result(0, 1, ORIGINAL)).await;
    // Every delivery of the batch has an answer once one has failed.
    let failed_deliveries = crashing.ctx.metrics.errors.with_label_values(&["produce"]);
    wait_for("a failed delivery of the change event", || failed_deliveries.get() > 0).await;
    assert!(crashing.stop().await.is_err(), "the batch was abandoned, not finished");

    mock.broker_up(2).expect("broker 2 up");
    let observer = Observer::new(&kafka.cluster, &[CHANGE_EVENTS.name]).await.expect("observer");
    let restarted = RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(&flags), ctx));
    restarted.ready().await;
    let (mut events, mut dead) = (Vec::new(), 0);
    events_until(&observer, &mut events, &mut dead, 1, 0).await;
    assert_eq!((events[0].page.url.as_str(), events[0].period), ("http://site0.example/page.html", 1));
    restarted.stop().await.expect("stops cleanly");
}

/// A changelog record holding what no stage writes (a forged probability) and one no build
/// can read are skipped and counted on restore; the stage starts, and the URL whose
/// record is sound keeps its state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changelog_records_out_of_range_or_unreadable_are_skipped_and_counted() {
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("forged-state"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let (mut book, mut hosts) = (Book::default(), Hosts::default());
    let url = |i: usize| format!("http://site{i}.example/page.html");
    for i in 0..3 {
        book.add_tracked(&mut hosts, &url(i), &format!("site{i}.example"), Some(1), 100, 0.5, 0.9, Some(0.1))
            .expect("room");
    }
    let forged = SchedulerState { p_download: f32::NAN, ..book.record(1) };
    let payloads =
        [encode(&book.record(0)).expect("encodes"), encode(&forged).expect("encodes"), b"\xc5\x01".to_vec()];
    let changelog = kafka.cluster.topics().state("scheduler");
    for (i, payload) in payloads.iter().enumerate() {
        let key = url(i);
        let record = FutureRecord::to(&changelog).key(&key).payload(payload);
        producer.send(record, Duration::from_secs(10)).await.expect("produced");
    }

    let stage = RunningStage::spawn("scheduler", |ctx| recrawl_scheduler::run(parse_args(&flags), ctx));
    stage.ready().await;
    // The gauge is set once the restore is done; only looking again shows it.
    wait_for("no state restored", || stage.ctx.metrics.state_keys.get() > 0).await;
    assert_eq!(stage.ctx.metrics.state_keys.get(), 1);
    let skipped = metric(&stage, r#"recrawl_errors_total{kind="restore_decode",stage="scheduler"}"#);
    assert_eq!(skipped, Some(2.0));
    stage.stop().await.expect("stops cleanly");
}
