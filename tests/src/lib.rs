//! Harness for the end-to-end tests: a broker (librdkafka's mock cluster, or the
//! independent broker named by `RECRAWL_TEST_BROKERS`), topics under a per-test prefix,
//! and the stages run in-process through the same `run(config, ctx)` their binaries call.

use std::future::Future;
use std::time::Duration;

use clap::{Args, Parser};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, FutureProducer, FutureRecord};
use recrawl_common::runtime::RuntimeError;
use recrawl_common::{unix_ms, KafkaArgs, StageContext};
use recrawl_schemas::envelope::kafka_headers;
use recrawl_schemas::{encode, Message, TopicCatalogue};
use tokio::task::JoinHandle;

pub mod processes;

pub const EXTERNAL_BROKERS_ENV: &str = "RECRAWL_TEST_BROKERS";

/// A workspace binary (`recrawl-diff`, …) built beside this test executable. `cargo test
/// --workspace` builds every stage binary, since each stage crate has integration tests
/// of its own; `cargo build --bins` does too.
pub fn binary(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let dir = exe.parent().and_then(std::path::Path::parent).expect("target directory");
    let path = dir.join(name);
    assert!(path.exists(), "{} is missing: run `cargo build --bins` first", path.display());
    path
}

/// The broker a test runs against. The mock cluster is `!Send`: keep this on the test's
/// own task.
pub enum Broker {
    Mock(MockCluster<'static, DefaultProducerContext>),
    External(String),
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Mock(mock) => write!(f, "Mock({})", mock.bootstrap_servers()),
            Self::External(brokers) => write!(f, "External({brokers})"),
        }
    }
}

impl Broker {
    /// Starts the mock cluster, or names the external broker. Also turns on logging to
    /// the test output when `RECRAWL_TEST_LOG` holds a filter (e.g. `info`).
    pub fn start() -> Self {
        if let Ok(filter) = std::env::var("RECRAWL_TEST_LOG") {
            let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
        }
        match std::env::var(EXTERNAL_BROKERS_ENV) {
            Ok(brokers) if !brokers.is_empty() => Self::External(brokers),
            _ => Self::Mock(MockCluster::new(1).expect("mock cluster")),
        }
    }

    pub fn bootstrap(&self) -> String {
        match self {
            Self::Mock(mock) => mock.bootstrap_servers(),
            Self::External(brokers) => brokers.clone(),
        }
    }

    /// Creates the catalogue's topics under `kafka`'s prefix, with `partitions` for every
    /// multi-partition topic (co-partitioning is kept).
    pub async fn create_topics(&self, kafka: &KafkaArgs, partitions: i32) {
        let mut catalogue = TopicCatalogue::builtin();
        for topic in &mut catalogue.topics {
            if topic.partitions > 1 {
                topic.partitions = partitions;
            }
        }
        match self {
            Self::Mock(mock) => {
                recrawl::demo::create_topics_on_mock(mock, &catalogue, &kafka.topics()).expect("mock topics");
            }
            Self::External(_) => {
                recrawl_common::admin::create_topics(kafka, &catalogue, Some(1)).await.expect("topics");
            }
        }
    }
}

/// A topic prefix no other test (or earlier run against the same broker) uses.
pub fn unique_prefix(test: &str) -> String {
    format!("t{}-{}-{test}.", std::process::id(), unix_ms())
}

#[derive(Debug, Parser)]
struct Wrapped<A: Args> {
    #[command(flatten)]
    args: A,
}

/// Parses a stage's arguments exactly as its binary would.
pub fn parse_args<A: Args>(argv: &[String]) -> A {
    Wrapped::<A>::try_parse_from(std::iter::once("stage".to_owned()).chain(argv.iter().cloned()))
        .unwrap_or_else(|e| panic!("{e}"))
        .args
}

/// The Kafka flags every stage of a test gets.
pub fn kafka_flags(brokers: &str, prefix: &str) -> Vec<String> {
    [
        "--brokers",
        brokers,
        "--topic-prefix",
        prefix,
        "--drain-timeout-ms",
        "3000",
        "--kafka-option",
        "session.timeout.ms=6000",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// A stage running on the test's runtime.
#[derive(Debug)]
pub struct RunningStage {
    pub name: &'static str,
    pub ctx: StageContext,
    handle: JoinHandle<Result<(), RuntimeError>>,
}

impl RunningStage {
    pub fn spawn<F, Fut>(name: &'static str, run: F) -> Self
    where
        F: FnOnce(StageContext) -> Fut,
        Fut: Future<Output = Result<(), RuntimeError>> + Send + 'static,
    {
        let ctx = StageContext::new(name);
        let handle = tokio::spawn(run(ctx.clone()));
        Self { name, ctx, handle }
    }

    /// Waits until the stage has its assignment and restored state.
    pub async fn ready(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        // Readiness is a flag the loop sets; it is only observable by looking again.
        while !self.ctx.health.is_ready() {
            assert!(!self.handle.is_finished(), "{} stopped before it was ready", self.name);
            assert!(tokio::time::Instant::now() < deadline, "{} not ready within 60 s", self.name);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Signals shutdown and returns how the stage ended.
    pub async fn stop(self) -> Result<(), RuntimeError> {
        self.ctx.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.handle)
            .await
            .unwrap_or_else(|_| panic!("{} did not stop within 30 s", self.name))
            .unwrap_or_else(|e| panic!("{} panicked: {e}", self.name))
    }
}

/// Produces `message` as a stage would: envelope payload, envelope headers, `key`.
pub async fn produce<M: Message>(producer: &FutureProducer, topic: &str, key: &str, message: &M) {
    produce_at(producer, topic, None, key, message).await;
}

/// [`produce`] to a chosen partition (`None`: the key's).
pub async fn produce_at<M: Message>(
    producer: &FutureProducer,
    topic: &str,
    partition: Option<i32>,
    key: &str,
    message: &M,
) {
    let payload = encode(message).expect("encode");
    let mut headers = OwnedHeaders::new();
    for (name, value) in kafka_headers::<M>() {
        headers = headers.insert(Header { key: name, value: Some(value.as_bytes()) });
    }
    let mut record = FutureRecord::to(topic).key(key).payload(&payload).headers(headers);
    if let Some(partition) = partition {
        record = record.partition(partition);
    }
    producer.send(record, Duration::from_secs(10)).await.expect("produced");
}

/// Waits until `done` holds, for at most a minute. For values a stage only exposes as
/// gauges: looking again is the only way to see them change.
pub async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The value of the Prometheus series `series` (name and labels, as rendered) in
/// `stage`'s registry, if exported.
pub fn metric(stage: &RunningStage, series: &str) -> Option<f64> {
    stage.ctx.metrics.render().lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok()).flatten()
    })
}
