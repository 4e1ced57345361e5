//! A broker outage is ridden out: while the broker is down the stage is not ready but
//! keeps running, and once it is back the stage catches up with what arrived meanwhile;
//! an outage past `--outage-timeout-ms` fails liveness and ends the stage with an error.
//! Runs where the test can stop its broker and start it again with its data: the mock
//! broker's down/up switch, or a tansu of its own on S3 storage (`RECRAWL_TEST_TANSU`).

use std::time::Duration;

use rdkafka::producer::FutureProducer;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use recrawl::observe::{Observed, Observer};
use recrawl_common::runtime::RuntimeError;
use recrawl_common::KafkaArgs;
use recrawl_e2e::{
    committed_offsets, kafka_flags, parse_args, produce, unique_prefix, wait_for, Broker, RunningStage,
};
use recrawl_schemas::topics::{CHANGE_EVENTS, FETCH_RESULTS};
use recrawl_schemas::FetchResult;

async fn change_event_for(observer: &Observer, url: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let observed = tokio::time::timeout_at(deadline, observer.next())
            .await
            .unwrap_or_else(|_| panic!("no change event for {url}"))
            .expect("observer");
        if matches!(&observed, Observed::Change(event) if event.page.url == url) {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_diff_stage_rides_out_a_broker_outage_and_gives_up_past_its_timeout() {
    let mut broker = Broker::restartable().await;
    if matches!(broker, Broker::External(_)) {
        eprintln!("the outage test restarts its broker; skipped on an external one (set RECRAWL_TEST_TANSU)");
        return;
    }
    let prefix = unique_prefix("outage");
    let mut flags = kafka_flags(&broker.bootstrap(), &prefix);
    flags.extend(["--outage-timeout-ms".to_owned(), "120000".to_owned()]);
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let observer = Observer::new(&kafka.cluster, &[CHANGE_EVENTS.name]).await.expect("observer");

    let diff = RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(&flags), ctx));
    diff.ready().await;
    let before = FetchResult::html_page("http://a.example/1.html", "a.example", 1, "<p>before</p>");
    produce(&producer, &kafka.cluster.topics(), FETCH_RESULTS, &before).await;
    change_event_for(&observer, &before.url).await;

    assert!(broker.stop());
    let health = diff.ctx.health.clone();
    wait_for("the stage reports the outage on /readyz", || !health.is_ready()).await;
    assert!(!health.is_failed(), "an outage within the timeout is not a failure");
    // Written during the outage: the producer delivers it once the broker is back.
    let during = FetchResult::html_page("http://a.example/2.html", "a.example", 1, "<p>during</p>");
    let sent = {
        let (producer, names, during) = (producer.clone(), kafka.cluster.topics(), during.clone());
        tokio::spawn(async move { produce(&producer, &names, FETCH_RESULTS, &during).await })
    };
    broker.start_again().await;
    sent.await.expect("produced after the outage");
    change_event_for(&observer, &during.url).await;
    wait_for("ready again after the outage", || health.is_ready()).await;
    diff.stop().await.expect("the stage stops cleanly after riding out the outage");

    // An outage past the timeout: liveness fails and the stage ends with the outage error.
    let mut short = kafka_flags(&broker.bootstrap(), &prefix);
    short.extend(["--outage-timeout-ms".to_owned(), "2000".to_owned()]);
    let diff = RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(&short), ctx));
    diff.ready().await;
    let health = diff.ctx.health.clone();
    assert!(broker.stop());
    wait_for("liveness fails past the outage timeout", || health.is_failed()).await;
    let ended = diff.stop().await;
    assert!(matches!(ended, Err(RuntimeError::Outage { .. })), "{ended:?}");
    broker.start_again().await;
}

/// A tail of `fetch-results` on `broker` (topics under `name`'s prefix), read to its end.
async fn started_tail(
    broker: &Broker,
    name: &str,
    extra_flags: &[&str],
) -> (KafkaArgs, recrawl_common::runtime::Tail, tokio_util::sync::CancellationToken) {
    let mut flags = kafka_flags(&broker.bootstrap(), &unique_prefix(name));
    flags.extend(extra_flags.iter().map(|flag| (*flag).to_owned()));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tail = recrawl_common::runtime::tail_topic(&kafka, FETCH_RESULTS.name, name, stop.clone());
    tokio::time::timeout(Duration::from_secs(60), &mut tail.caught_up)
        .await
        .expect("the empty topic is read within a minute")
        .expect("the empty topic is read");
    (kafka, tail, stop)
}

/// A tail started as [`started_tail`] on the mock broker, which then refuses the next
/// `count` requests of `api` as not authorised; `None` on an external broker, which
/// cannot inject errors.
async fn tail_refused(
    broker: &Broker,
    name: &str,
    extra_flags: &[&str],
    api: RDKafkaApiKey,
    count: usize,
) -> Option<(KafkaArgs, recrawl_common::runtime::Tail, tokio_util::sync::CancellationToken)> {
    let Broker::Mock(mock) = broker else {
        eprintln!("injects errors with the mock broker; skipped on an external one");
        return None;
    };
    let started = started_tail(broker, name, extra_flags).await;
    mock.request_errors(api, &vec![RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED; count]);
    Some(started)
}

/// A record produced now reaches `tail`, which then ends without error when stopped.
async fn tail_reads_on(
    kafka: &KafkaArgs,
    mut tail: recrawl_common::runtime::Tail,
    stop: tokio_util::sync::CancellationToken,
) {
    let producer: FutureProducer = recrawl_common::kafka::producer_config(kafka).create().expect("producer");
    let after = FetchResult::html_page("http://a.example/after.html", "a.example", 1, "<p>after</p>");
    produce(&producer, &kafka.cluster.topics(), FETCH_RESULTS, &after).await;
    let record = tokio::time::timeout(Duration::from_secs(60), tail.records.recv())
        .await
        .expect("the record produced reaches the tail")
        .expect("the tail is still running");
    assert_eq!(record.key.as_deref(), Some(after.url.as_bytes()));
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(60), tail.task)
        .await
        .expect("the tail ends within a minute")
        .expect("joined")
        .expect("the tail ends without error");
}

/// A whole-topic tail (the estimator's distribution shares) rides out an outage too: it
/// neither ends nor misses what arrives once the broker is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_tail_rides_out_a_broker_outage() {
    let mut broker = Broker::restartable().await;
    if matches!(broker, Broker::External(_)) {
        eprintln!("the outage test restarts its broker; skipped on an external one (set RECRAWL_TEST_TANSU)");
        return;
    }
    let (kafka, tail, stop) = started_tail(&broker, "tail-outage", &[]).await;
    assert!(broker.stop());
    // The outage must outlast librdkafka's reconnect attempts for the tail to see the
    // brokers go; its length is the scenario.
    tokio::time::sleep(Duration::from_secs(5)).await;
    broker.start_again().await;
    tail_reads_on(&kafka, tail, stop).await;
}

/// Errors other than the cluster being out of reach (here: fetches refused as not
/// authorised, as during a broker's restart with ACLs) do not end a side input's tail
/// either: it reads on once they stop. Mock broker only: it injects the errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_tail_reads_on_through_other_consumer_errors() {
    let broker = Broker::start();
    let Some((kafka, tail, stop)) = tail_refused(&broker, "tail-errors", &[], RDKafkaApiKey::Fetch, 4).await
    else {
        return;
    };
    tail_reads_on(&kafka, tail, stop).await;
}

/// A side input the tail cannot read for the outage timeout (its topic deleted, a
/// permission revoked: here, offset requests refused as not authorised) ends the tail
/// with an error, which ends the stage, rather than leaving it on a stale view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_tail_unreadable_past_the_outage_timeout_ends() {
    let broker = Broker::start();
    let flags = ["--outage-timeout-ms", "1000"];
    let Some((_kafka, mut tail, stop)) =
        tail_refused(&broker, "tail-unreadable", &flags, RDKafkaApiKey::ListOffsets, 200).await
    else {
        return;
    };
    let ended = tokio::time::timeout(Duration::from_secs(60), &mut tail.task)
        .await
        .expect("the tail ends")
        .expect("joined");
    let error = ended.expect_err("an unreadable topic is an error").to_string();
    assert!(error.contains("--outage-timeout-ms"), "{error}");
    stop.cancel();
}

/// A final commit the group's coordinator cannot take yet (still loading the group, as
/// right after an outage) is tried again within the close's bound: the stage exits
/// cleanly with its input committed, rather than failing with the commit one retry away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_commit_that_finds_the_coordinator_loading_is_tried_again() {
    let broker = Broker::start();
    let Broker::Mock(mock) = &broker else {
        eprintln!("injects errors with the mock broker; skipped on an external one");
        return;
    };
    let prefix = unique_prefix("commit");
    let mut flags = kafka_flags(&broker.bootstrap(), &prefix);
    // Only the final commit commits: a background one could take the errors, or commit
    // first and leave the close nothing to do.
    flags.extend(["--kafka-option".to_owned(), "enable.auto.commit=false".to_owned()]);
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 1).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let observer = Observer::new(&kafka.cluster, &[CHANGE_EVENTS.name]).await.expect("observer");
    let diff = RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(&flags), ctx));
    diff.ready().await;
    let page = FetchResult::html_page("http://a.example/1.html", "a.example", 1, "<p>one</p>");
    produce(&producer, &kafka.cluster.topics(), FETCH_RESULTS, &page).await;
    change_event_for(&observer, &page.url).await;

    // Every commit from now on is refused until these run out.
    let loading = RDKafkaRespErr::RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    mock.request_errors(RDKafkaApiKey::OffsetCommit, &[loading; 3]);
    diff.stop().await.expect("the stage stops cleanly once the coordinator takes the commit");
    let group = kafka.group_for(recrawl_diff::STAGE);
    let topic = kafka.cluster.topics().name(FETCH_RESULTS.name);
    let committed = committed_offsets(&kafka, &group, &topic, 0..1).await;
    assert_eq!(committed.get(&0), Some(&1), "the one input record is committed");
}

/// Consumer errors other than the brokers going away (here fetches refused as not
/// authorised, as during a broker's restart with ACLs) do not end an observer, which
/// `recrawl tail` and the demo read through: it reads on once they stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_reads_on_through_consumer_errors() {
    let broker = Broker::start();
    let Broker::Mock(mock) = &broker else {
        eprintln!("injects errors with the mock broker; skipped on an external one");
        return;
    };
    let kafka: KafkaArgs = parse_args(&kafka_flags(&broker.bootstrap(), &unique_prefix("observer-errors")));
    broker.create_topics(&kafka, 1).await;
    let observer = Observer::new(&kafka.cluster, &[FETCH_RESULTS.name]).await.expect("observer");
    let refused = RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED;
    mock.request_errors(RDKafkaApiKey::Fetch, &[refused; 4]);
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let page = FetchResult::html_page("http://a.example/1.html", "a.example", 1, "<p>one</p>");
    produce(&producer, &kafka.cluster.topics(), FETCH_RESULTS, &page).await;
    let observed = tokio::time::timeout(Duration::from_secs(60), observer.next())
        .await
        .expect("the record is read within a minute")
        .expect("the observer reads on");
    assert!(matches!(&observed, Observed::Result(result) if result.url == page.url), "{observed:?}");
}

/// Errors that do not end (here every fetch refused as not authorised) end an observer
/// once they have lasted its error limit with no record read, rather than leaving
/// `recrawl tail` waiting for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_gives_up_on_errors_that_do_not_end() {
    let broker = Broker::start();
    let Broker::Mock(mock) = &broker else {
        eprintln!("injects errors with the mock broker; skipped on an external one");
        return;
    };
    let kafka: KafkaArgs = parse_args(&kafka_flags(&broker.bootstrap(), &unique_prefix("observer-gives-up")));
    broker.create_topics(&kafka, 1).await;
    let observer = Observer::new(&kafka.cluster, &[FETCH_RESULTS.name])
        .await
        .expect("observer")
        .with_error_limit(Duration::from_secs(2));
    let refused = RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED;
    mock.request_errors(RDKafkaApiKey::Fetch, &[refused; 1000]);
    let ended = tokio::time::timeout(Duration::from_secs(60), observer.next())
        .await
        .expect("the observer ends within a minute");
    let error = ended.expect_err("errors past the limit end the observer").to_string();
    assert!(error.contains("authorization"), "{error}");
}
