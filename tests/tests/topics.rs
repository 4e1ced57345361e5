//! `recrawl topics create` against a real broker (the independent tier): librdkafka's
//! mock cluster has no CreateTopics, so on the hermetic tier this says it is skipped.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use recrawl_common::admin::{catalogue_topic_names, create_topics, topic_partitions, TopicOutcome};
use recrawl_common::kafka::reader_config;
use recrawl_common::KafkaArgs;
use recrawl_e2e::{kafka_flags, parse_args, unique_prefix, Broker, EXTERNAL_BROKERS_ENV};
use recrawl_schemas::TopicCatalogue;

#[tokio::test]
async fn topics_create_applies_the_catalogue_once() {
    let broker = Broker::start();
    if matches!(broker, Broker::Mock(_)) {
        eprintln!("skipped: needs a broker with CreateTopics; set {EXTERNAL_BROKERS_ENV} (CI runs it against tansu)");
        return;
    }
    let kafka: KafkaArgs = parse_args(&kafka_flags(&broker.bootstrap(), &unique_prefix("topics")));
    let catalogue = TopicCatalogue::builtin();
    let first = create_topics(&kafka.cluster, &catalogue, Some(1)).await.expect("create");
    assert_eq!(first.len(), catalogue.topics.len());
    assert!(first.iter().all(|(_, outcome)| *outcome == TopicOutcome::Created), "{first:?}");
    let second = create_topics(&kafka.cluster, &catalogue, Some(1)).await.expect("create again");
    assert!(second.iter().all(|(_, outcome)| *outcome == TopicOutcome::AlreadyExists), "{second:?}");

    let names = catalogue_topic_names(&catalogue, &kafka.cluster.topics());
    let probe: BaseConsumer = reader_config(&kafka.cluster, "probe").create().expect("client");
    let brokers = kafka.cluster.brokers.clone();
    let counts = tokio::task::spawn_blocking(move || {
        topic_partitions(probe.client(), &brokers, &names, Duration::from_secs(30))
    })
    .await
    .expect("join")
    .expect("metadata");
    for spec in &catalogue.topics {
        assert_eq!(
            counts.get(&kafka.cluster.topics().name(&spec.name)),
            Some(&spec.partitions),
            "{}",
            spec.name
        );
    }
}

/// An unreachable cluster is one clear error naming the brokers tried, within the
/// start-up timeout, not a minute of repeated log lines.
#[tokio::test]
async fn an_unreachable_broker_is_named_within_the_startup_timeout() {
    let unreachable = recrawl_common::http::free_local_port().expect("port").to_string();
    let mut flags = kafka_flags(&unreachable, "unreachable.");
    flags.extend(["--startup-timeout-ms".to_owned(), "2000".to_owned()]);
    let kafka: KafkaArgs = parse_args(&flags);
    let started = std::time::Instant::now();
    let error =
        create_topics(&kafka.cluster, &TopicCatalogue::builtin(), Some(1)).await.expect_err("unreachable");
    let text = error.to_string();
    assert!(text.contains(&unreachable) && text.contains("cannot reach"), "{text}");
    // Bounded by the timeout, not by librdkafka's retries: a minute would mean it is not.
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
}

/// What `S` declares it reads and writes, against `deploy/topics.toml`'s consumers and
/// producers of every topic: a mismatch is a wrong catalogue (and so wrong AsyncAPI
/// document and ACLs) or a stage reading a topic nobody creates for it.
fn declared_topics_match_the_catalogue<S: recrawl_common::Stage>(catalogue: &TopicCatalogue) -> Vec<String> {
    use std::collections::BTreeSet;
    let stateful = std::any::TypeId::of::<S::State>() != std::any::TypeId::of::<()>();
    let state = format!("state.{}", S::NAME);
    let with_state = |topics: &[&str]| -> BTreeSet<String> {
        topics.iter().map(|t| t.to_string()).chain(stateful.then(|| state.clone())).collect()
    };
    let reads = with_state(&[S::INPUTS, S::SIDE_INPUTS].concat());
    let writes = with_state(S::OUTPUTS);
    let listed = |parties: fn(&recrawl_schemas::topics::TopicSpec) -> &Vec<String>| -> BTreeSet<String> {
        catalogue
            .topics
            .iter()
            .filter(|topic| parties(topic).iter().any(|party| party == S::NAME))
            .map(|topic| topic.name.clone())
            .collect()
    };
    let mut mismatches = Vec::new();
    let (consumed, produced) = (listed(|t| &t.consumers), listed(|t| &t.producers));
    if reads != consumed {
        mismatches.push(format!("{} reads {reads:?}; the catalogue's consumers say {consumed:?}", S::NAME));
    }
    if writes != produced {
        mismatches.push(format!("{} writes {writes:?}; the catalogue's producers say {produced:?}", S::NAME));
    }
    mismatches
}

#[test]
fn every_stage_reads_and_writes_what_the_catalogue_says() {
    let catalogue = TopicCatalogue::builtin();
    let mismatches = [
        declared_topics_match_the_catalogue::<recrawl_fetch::Fetch>(&catalogue),
        declared_topics_match_the_catalogue::<recrawl_diff::Diff>(&catalogue),
        declared_topics_match_the_catalogue::<recrawl_estimator::EstimatorStage>(&catalogue),
        declared_topics_match_the_catalogue::<recrawl_scheduler::Scheduler>(&catalogue),
    ]
    .concat();
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}
