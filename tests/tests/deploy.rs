//! The deployment files agree with the stages they deploy: KEDA never scales a stage past
//! the partitions of its input topics in `deploy/topics.toml`, and every orchestrator waits
//! longer than the stages' drain timeout before it kills them. (`.ci/run` validates the
//! files' syntax and schemas with promtool, docker-compose, kustomize and
//! kubernetes-validate.)

use std::path::Path;

use recrawl_common::KafkaArgs;
use recrawl_e2e::parse_args;
use recrawl_schemas::topics::{CHANGE_EVENTS, ESTIMATES, FETCH, FETCH_RESULTS, LINKS};
use recrawl_schemas::TopicCatalogue;

/// The topics each stage's consumer group reads.
const INPUTS: [(&str, &[&str]); 4] = [
    ("fetch", &[FETCH.name]),
    ("diff", &[FETCH_RESULTS.name]),
    ("estimator", &[CHANGE_EVENTS.name]),
    ("scheduler", &[ESTIMATES.name, LINKS.name]),
];

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The value of the first `key: value` line at or after `from` in `text`.
fn value_after<'a>(text: &'a str, from: usize, key: &str) -> &'a str {
    text[from..]
        .lines()
        .find_map(|line| line.trim().strip_prefix(key).and_then(|rest| rest.strip_prefix(':')))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {key} after byte {from}"))
}

#[test]
fn keda_scales_each_stage_up_to_its_input_partitions() {
    let catalogue = TopicCatalogue::builtin();
    let keda = read("deploy/k8s/base/keda.yaml");
    for (stage, inputs) in INPUTS {
        let partitions = inputs
            .iter()
            .map(|input| catalogue.topics.iter().find(|t| t.name == *input).expect("topic").partitions)
            .max()
            .expect("inputs");
        let at = keda.find(&format!("name: recrawl-{stage}\n")).unwrap_or_else(|| panic!("no {stage}"));
        let max: i32 = value_after(&keda, at, "maxReplicaCount").parse().expect("a number");
        assert_eq!(max, partitions, "{stage}: maxReplicaCount against its input partitions");
        assert_eq!(value_after(&keda, at, "consumerGroup"), format!("recrawl.{stage}"));
        assert_eq!(value_after(&keda, at, "allowIdleConsumers"), "\"false\"");
    }
}

#[test]
fn orchestrators_wait_longer_than_the_drain() {
    let kafka: KafkaArgs = parse_args(&["--brokers".to_owned(), "b:9092".to_owned()]);
    let drain_s = kafka.drain_timeout_ms.div_ceil(1000);
    for (stage, _) in INPUTS {
        let manifest = read(&format!("deploy/k8s/base/{stage}.yaml"));
        let grace: u64 =
            value_after(&manifest, 0, "terminationGracePeriodSeconds").parse().expect("a number");
        assert!(grace > drain_s, "{stage}: terminationGracePeriodSeconds {grace} ≤ the drain's {drain_s} s");
    }
    let compose = read("deploy/compose.yaml");
    let grace = value_after(&compose, 0, "stop_grace_period");
    let grace: u64 = grace.strip_suffix('s').and_then(|s| s.parse().ok()).expect("seconds");
    assert!(grace > drain_s, "compose stop_grace_period {grace}s ≤ the drain's {drain_s} s");
}
