//! What an operator relies on, checked on the four stage binaries running a crawl:
//!
//! - every metric family a stage exports is in `docs/metrics.md`, with its type, and every
//!   row of that table is exported by the stages it names;
//! - every metric name the alert rules (`deploy/prometheus/alerts.yaml`) and the dashboard
//!   (`deploy/grafana/recrawl.json`) use is exported;
//! - a real Prometheus server on 127.0.0.1, with the alert rules loaded, scrapes the four
//!   stages: every one is `up`, a lag series is there, and every dashboard expression and
//!   alert expression is accepted by its query API. Without the `prometheus` binary (Debian
//!   package `prometheus`) that part says so and is skipped, unless
//!   `RECRAWL_REQUIRE_PROMETHEUS` is set, as `.ci/run` does.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use recrawl_common::KafkaArgs;
use recrawl_e2e::processes::{free_port, start_pipeline, Pipeline, Stage};
use recrawl_e2e::{
    kafka_flags, parse_args, read_repository_file as read, repository_file, unique_prefix, Broker,
};

const STAGES: [&str; 5] = ["fetch", "diff", "estimator", "scheduler", "archive"];

/// One row of `docs/metrics.md`: the family's type and the stages that export it.
#[derive(Debug)]
struct Documented {
    kind: String,
    stages: Vec<String>,
}

/// The table of `docs/metrics.md`: rows `| `name` | type | stages | labels | meaning |`.
fn documented_metrics() -> BTreeMap<String, Documented> {
    let mut table = BTreeMap::new();
    for line in read("docs/metrics.md").lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, name, kind, stages, _labels, _meaning, _] = cells[..] else { continue };
        let Some(name) = name.strip_prefix('`').and_then(|n| n.strip_suffix('`')) else { continue };
        let stages = match stages {
            "all" => STAGES.iter().map(|s| (*s).to_owned()).collect(),
            listed => listed.split(',').map(|s| s.trim().to_owned()).collect(),
        };
        let row = Documented { kind: kind.to_owned(), stages };
        assert!(table.insert(name.to_owned(), row).is_none(), "docs/metrics.md lists {name} twice");
    }
    assert!(table.len() > 20, "docs/metrics.md's table was not found");
    table
}

/// The families of a Prometheus text page, by name, with their type.
fn families(page: &str) -> BTreeMap<String, String> {
    page.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_once(' '))
        .map(|(name, kind)| (name.to_owned(), kind.to_owned()))
        .collect()
}

/// The `recrawl_…` names in `text`, histogram and summary series mapped to their family.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("recrawl_") {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        let name = &tail[..end];
        let family = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
        names.insert(family.to_owned());
        rest = &tail[end..];
    }
    names
}

/// Every PromQL expression of the dashboard, with Grafana's interval variable given a value
/// Prometheus reads.
fn dashboard_expressions() -> Vec<String> {
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("deploy/grafana/recrawl.json")).expect("the dashboard is JSON");
    let mut expressions = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                expressions.push(expr.replace("$__rate_interval", "1m"));
            }
        }
    }
    assert!(expressions.len() >= 10, "the dashboard's expressions were not found");
    expressions
}

/// The `expr:` of every rule in the alert file (single-line or `|`/`>` blocks).
fn alert_expressions() -> Vec<String> {
    let text = read("deploy/prometheus/alerts.yaml");
    let mut expressions = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(value) = line.trim_start().strip_prefix("expr:") else { continue };
        let value = value.trim();
        if !matches!(value, "|" | ">" | "|-" | ">-") {
            expressions.push(value.to_owned());
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let mut block = Vec::new();
        while let Some(next) = lines.peek() {
            if !next.trim().is_empty() && next.len() - next.trim_start().len() <= indent {
                break;
            }
            block.push(next.trim().to_owned());
            lines.next();
        }
        expressions.push(block.join(" "));
    }
    assert!(expressions.len() >= 6, "the alert rules' expressions were not found");
    expressions
}

async fn scrape(client: &reqwest::Client, stage: &Stage) -> String {
    stage.metrics(client).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_metric_is_exported_and_prometheus_scrapes_the_pipeline() {
    let broker = Broker::start();
    let prefix = unique_prefix("operate");
    let flags = kafka_flags(&broker.bootstrap(), &prefix);
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    let Pipeline { mut stages, web, client, .. } = start_pipeline(&flags, &prefix, 7).await;
    // The archive beside the pipeline, publishing its files every 2 s.
    let archived = tempfile::tempdir().expect("archive directory");
    let mut archive_flags = flags.clone();
    let out = format!("file://{}", archived.path().display());
    archive_flags.extend(["--out", &out, "--max-file-age-ms", "2000"].map(str::to_owned));
    let mut archive = Stage::start("archive", archive_flags);
    archive.ready(&client).await;
    stages.push(archive);

    // The crawl has gone through every stage once each has consumed input, and librdkafka's
    // statistics have given every stage a lag series.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut pages = Vec::new();
    loop {
        pages.clear();
        for stage in &stages {
            pages.push(scrape(&client, stage).await);
        }
        let flowing = pages.iter().all(|page| {
            page.contains("recrawl_consumer_lag_records{")
                && page
                    .lines()
                    .filter(|l| l.starts_with("recrawl_records_in_total{"))
                    .any(|l| !l.ends_with(" 0"))
        });
        if flowing {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the crawl did not reach every stage:\n{pages:#?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let documented = documented_metrics();
    let mut exported: BTreeSet<String> = BTreeSet::new();
    for (stage, page) in stages.iter().zip(&pages) {
        let found = families(page);
        for (name, kind) in &found {
            let row = documented.get(name).unwrap_or_else(|| {
                panic!("{} exports {name}, which docs/metrics.md does not list", stage.name)
            });
            assert_eq!(&row.kind, kind, "docs/metrics.md gives {name} the wrong type");
            assert!(
                row.stages.iter().any(|s| s == stage.name),
                "{} exports {name}, which docs/metrics.md says only {:?} export",
                stage.name,
                row.stages
            );
        }
        for (name, row) in &documented {
            // The estimator's group gauges are opt-in (`--metrics-groups`).
            let opt_in = name.starts_with("recrawl_estimator_group_");
            if row.stages.iter().any(|s| s == stage.name) && !opt_in {
                assert!(found.contains_key(name), "{} does not export {name} (docs/metrics.md)", stage.name);
            }
        }
        exported.extend(found.into_keys());
    }
    assert!(
        pages[0].contains(r#"recrawl_build_info{git_commit=""#),
        "build_info carries the git commit:\n{}",
        pages[0]
    );

    let rules = read("deploy/prometheus/alerts.yaml");
    let dashboard = read("deploy/grafana/recrawl.json");
    for (file, text) in [("alerts.yaml", &rules), ("recrawl.json", &dashboard)] {
        let names = metric_names(text);
        assert!(names.len() >= 5, "{file} uses no recrawl_ metric");
        for name in names {
            assert!(exported.contains(&name), "{file} uses {name}, which no running stage exports");
        }
    }

    prometheus_scrapes(&stages, &client).await;

    for stage in stages {
        let name = stage.name;
        assert_eq!(stage.stop(), Some(0), "{name} exits 0 after SIGTERM");
    }
    web.shutdown().expect("web");
}

/// The Prometheus binary: `RECRAWL_PROMETHEUS`, else `prometheus` on the PATH.
fn prometheus_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("RECRAWL_PROMETHEUS") {
        return Some(path.into());
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("prometheus"))
        .find(|path| path.is_file())
}

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Prometheus server scraping the stages every second, with the alert rules loaded.
async fn prometheus_scrapes(stages: &[Stage], client: &reqwest::Client) {
    let Some(binary) = prometheus_binary() else {
        assert!(
            std::env::var_os("RECRAWL_REQUIRE_PROMETHEUS").is_none(),
            "RECRAWL_REQUIRE_PROMETHEUS is set but no prometheus binary was found"
        );
        eprintln!(
            "SKIPPED: no `prometheus` binary on the PATH (apt-get install prometheus, or set \
             RECRAWL_PROMETHEUS): the scrape by a real Prometheus server was not tested"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = String::from(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - RULES\nscrape_configs:\n",
    );
    config = config.replace("RULES", &repository_file("deploy/prometheus/alerts.yaml").display().to_string());
    for stage in stages {
        config.push_str(&format!(
            "  - job_name: recrawl-{}\n    static_configs:\n      - targets: ['{}']\n",
            stage.name, stage.http
        ));
    }
    let config_path = dir.path().join("prometheus.yml");
    std::fs::write(&config_path, config).expect("config");
    let log_path = dir.path().join("prometheus.log");
    let start = |listen: SocketAddr| {
        let log = std::fs::File::create(&log_path).expect("log");
        Server(
            Command::new(&binary)
                .arg(format!("--config.file={}", config_path.display()))
                .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
                .arg(format!("--web.listen-address={listen}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("{}: {e}", binary.display())),
        )
    };
    let mut listen = free_port();
    let mut server = start(listen);
    let query = |listen: SocketAddr, expr: String| {
        let client = client.clone();
        async move {
            let answer = client
                .get(format!("http://{listen}/api/v1/query"))
                .query(&[("query", expr.as_str())])
                .send()
                .await
                .ok()?;
            serde_json::from_str::<serde_json::Value>(&answer.text().await.ok()?).ok()
        }
    };
    let prometheus_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    // A port found free and let go can be taken before Prometheus binds it.
    let mut port_retries = recrawl_common::http::PORT_RETRIES;
    // Prometheus starts, loads the rules and scrapes: only observable by asking again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let up = query(listen, "up == 1".to_owned()).await;
        let jobs: BTreeSet<String> = up
            .as_ref()
            .and_then(|answer| answer["data"]["result"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|series| series["metric"]["job"].as_str().map(str::to_owned))
            .collect();
        let lag = query(listen, "recrawl_consumer_lag_records".to_owned()).await;
        let lag_series = lag.as_ref().and_then(|a| a["data"]["result"].as_array().map(Vec::len)).unwrap_or(0);
        if jobs.len() == STAGES.len() && lag_series > 0 {
            break;
        }
        if server.0.try_wait().expect("status").is_some() {
            let log = prometheus_log();
            assert!(port_retries > 0 && log.contains("address already in use"), "prometheus exited:\n{log}");
            port_retries -= 1;
            listen = free_port();
            server = start(listen);
            continue;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Prometheus did not see every stage up ({jobs:?}) and a lag series ({lag_series}):\n{}",
            prometheus_log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Each expression parses and evaluates on the scraped data.
    for expr in dashboard_expressions().into_iter().chain(alert_expressions()) {
        let answer = query(listen, expr.clone()).await.expect("query answer");
        assert_eq!(answer["status"], "success", "Prometheus refuses {expr}: {answer}");
    }
    let rules = client.get(format!("http://{listen}/api/v1/rules")).send().await.expect("rules");
    let rules: serde_json::Value = serde_json::from_str(&rules.text().await.expect("rules")).expect("JSON");
    let loaded = rules["data"]["groups"]
        .as_array()
        .map_or(0, |groups| groups.iter().map(|g| g["rules"].as_array().map_or(0, Vec::len)).sum::<usize>());
    assert_eq!(loaded, alert_expressions().len(), "Prometheus loaded the alert rules: {rules}");
}
