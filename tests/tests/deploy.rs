//! The deployment files agree with the stages they deploy: KEDA never scales a stage past
//! the partitions of its input topics in `deploy/topics.toml` and reads lag with the
//! stages' credentials, the dashboard uses whichever Prometheus it is given, and every
//! orchestrator waits longer than the stages' drain timeout before it kills them. (`.ci/run` validates the
//! files' syntax and schemas with promtool, docker-compose, kustomize and
//! kubernetes-validate.)

use recrawl_common::KafkaArgs;
use recrawl_e2e::{parse_args, read_repository_file as read};
use recrawl_schemas::topics::{CHANGE_EVENTS, ESTIMATES, FETCH, FETCH_RESULTS, LINKS};
use recrawl_schemas::TopicCatalogue;

/// The topics each stage's consumer group reads.
const INPUTS: [(&str, &[&str]); 5] = [
    ("fetch", &[FETCH.name]),
    ("diff", &[FETCH_RESULTS.name]),
    ("estimator", &[CHANGE_EVENTS.name]),
    ("scheduler", &[ESTIMATES.name, LINKS.name]),
    ("archive", &[FETCH_RESULTS.name]),
];

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

/// The scaler reads lag with the credentials the stages use: every ScaledObject names the
/// TriggerAuthentication, and the example's KEDA Secret says what its Kafka options say.
#[test]
fn keda_reads_lag_with_the_stages_credentials() {
    let keda = read("deploy/k8s/base/keda.yaml");
    assert!(keda.contains("kind: TriggerAuthentication\nmetadata:\n  name: recrawl-kafka\n"), "{keda}");
    for (stage, _) in INPUTS {
        let at = keda.find(&format!("name: recrawl-{stage}\n")).unwrap_or_else(|| panic!("no {stage}"));
        let trigger = keda[at..].find("authenticationRef:").map(|found| at + found);
        assert_eq!(trigger.map(|from| value_after(&keda, from, "name")), Some("recrawl-kafka"), "{stage}");
    }
    let env = |path: &str| -> Vec<(String, String)> {
        read(path)
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
            .collect()
    };
    let scaler: std::collections::HashMap<String, String> =
        env("deploy/k8s/overlays/example/keda-kafka.env").into_iter().collect();
    let mut keys: Vec<&str> = scaler.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["password", "sasl", "tls", "username"]);
    let options: std::collections::HashMap<String, String> = env("deploy/k8s/overlays/example/kafka.env")
        .into_iter()
        .find(|(key, _)| key == "RECRAWL_KAFKA_OPTIONS")
        .map(|(_, value)| {
            value
                .split(';')
                .filter_map(|o| o.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .expect("RECRAWL_KAFKA_OPTIONS");
    let protocol = options.get("security.protocol").map_or("PLAINTEXT", String::as_str);
    let tls = if protocol.ends_with("SSL") { "enable" } else { "disable" };
    // librdkafka's sasl.mechanism (default GSSAPI) in the scaler's words.
    let sasl = match (protocol.starts_with("SASL"), options.get("sasl.mechanism").map(String::as_str)) {
        (false, _) => "none",
        (true, Some("PLAIN")) => "plaintext",
        (true, Some("SCRAM-SHA-256")) => "scram_sha256",
        (true, Some("SCRAM-SHA-512")) => "scram_sha512",
        (true, Some("OAUTHBEARER")) => "oauthbearer",
        (true, Some("GSSAPI") | None) => "gssapi",
        (true, Some(other)) => panic!("sasl.mechanism {other}"),
    };
    assert_eq!((scaler["tls"].as_str(), scaler["sasl"].as_str()), (tls, sasl));
    assert_eq!(Some(&scaler["username"]), options.get("sasl.username"));
    assert_eq!(Some(&scaler["password"]), options.get("sasl.password"));
}

/// Imported into any Grafana, the dashboard asks which Prometheus to use: no panel names
/// a data source by a uid only one installation has.
#[test]
fn the_dashboard_queries_the_prometheus_it_is_given() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("deploy/grafana/recrawl.json")).expect("the dashboard is JSON");
    let variable = dashboard["templating"]["list"]
        .as_array()
        .and_then(|list| list.iter().find(|v| v["name"] == "datasource"))
        .expect("a datasource variable");
    assert_eq!((&variable["type"], &variable["query"]), (&"datasource".into(), &"prometheus".into()));
    fn sources<'a>(value: &'a serde_json::Value, found: &mut Vec<&'a serde_json::Value>) {
        match value {
            serde_json::Value::Object(map) => map.iter().for_each(|(key, value)| {
                if key == "datasource" {
                    found.push(value);
                } else {
                    sources(value, found);
                }
            }),
            serde_json::Value::Array(items) => items.iter().for_each(|item| sources(item, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    sources(&dashboard["panels"], &mut found);
    assert!(found.len() >= 10);
    for source in found {
        assert_eq!(source["uid"], "${datasource}", "{source}");
    }
}

#[test]
fn orchestrators_wait_longer_than_a_stage_takes_to_stop() {
    // The deployments' stages are static members, which skip leaving the group: the bound
    // without an instance id is the longer one.
    let kafka: KafkaArgs = parse_args(&["--brokers".to_owned(), "b:9092".to_owned()]);
    let bound = recrawl_common::runtime::stop_bound(&kafka).as_secs_f64();
    for (stage, _) in INPUTS {
        let manifest = read(&format!("deploy/k8s/base/{stage}.yaml"));
        let grace: f64 =
            value_after(&manifest, 0, "terminationGracePeriodSeconds").parse().expect("a number");
        assert!(grace > bound, "{stage}: terminationGracePeriodSeconds {grace} ≤ the stop bound's {bound} s");
    }
    let compose = read("deploy/compose.yaml");
    let grace = value_after(&compose, 0, "stop_grace_period");
    let grace: f64 = grace.strip_suffix('s').and_then(|s| s.parse().ok()).expect("seconds");
    assert!(grace > bound, "compose stop_grace_period {grace}s ≤ the stop bound's {bound} s");
}
