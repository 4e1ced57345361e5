//! librdkafka client configuration and the consumer context (statistics → lag gauges,
//! rebalances → a notification the loop turns into state restores).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance};
use rdkafka::statistics::Statistics;
use rdkafka::ClientConfig;
use rdkafka::ClientContext;
use tokio::sync::Notify;

use crate::config::KafkaArgs;
use crate::metrics::StageMetrics;

/// Settings every client gets: brokers, then recrawl's defaults, then the user's
/// passthrough options (which may override the defaults but not the reserved keys).
pub fn base_config(args: &KafkaArgs, defaults: &[(&str, &str)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &args.brokers);
    for (key, value) in defaults {
        config.set(*key, *value);
    }
    for (key, value) in &args.kafka_options {
        config.set(key, value);
    }
    config
}

/// A group consumer whose offsets are stored by the loop, only after a batch's outputs
/// are acknowledged, and committed in the background and on shutdown.
pub fn consumer_config(args: &KafkaArgs, group: &str) -> ClientConfig {
    let mut config = base_config(
        args,
        &[
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "true"),
            ("statistics.interval.ms", "5000"),
        ],
    );
    config.set("group.id", group).set("enable.auto.offset.store", "false");
    config
}

/// An idempotent producer that waits for all in-sync replicas.
pub fn producer_config(args: &KafkaArgs) -> ClientConfig {
    let mut config =
        base_config(args, &[("acks", "all"), ("enable.idempotence", "true"), ("linger.ms", "5")]);
    config.set("compression.type", args.compression.as_str());
    config
}

/// A consumer outside any group that reads one partition from the start (state restore,
/// tools).
pub fn reader_config(args: &KafkaArgs, group: &str) -> ClientConfig {
    let mut config = base_config(args, &[("auto.offset.reset", "earliest")]);
    config.set("group.id", group).set("enable.auto.commit", "false").set("enable.auto.offset.store", "false");
    config
}

#[derive(Debug)]
pub struct StageConsumerContext {
    metrics: StageMetrics,
    rebalanced: Arc<Notify>,
    joined: Arc<AtomicBool>,
}

impl StageConsumerContext {
    pub fn new(metrics: StageMetrics) -> Self {
        Self { metrics, rebalanced: Arc::new(Notify::new()), joined: Arc::new(AtomicBool::new(false)) }
    }

    /// Notified after every rebalance.
    pub fn rebalanced(&self) -> Arc<Notify> {
        self.rebalanced.clone()
    }

    /// True once the consumer has received an assignment (possibly empty).
    pub fn has_joined(&self) -> bool {
        self.joined.load(Ordering::Relaxed)
    }
}

impl ClientContext for StageConsumerContext {
    fn stats(&self, statistics: Statistics) {
        for (topic, stats) in &statistics.topics {
            for partition in stats.partitions.values() {
                // librdkafka reports -1 for partitions it has no lag for (not assigned,
                // or the internal UA partition).
                if partition.partition >= 0 && partition.consumer_lag >= 0 {
                    self.metrics
                        .consumer_lag
                        .with_label_values(&[topic.as_str(), &partition.partition.to_string()])
                        .set(partition.consumer_lag);
                }
            }
        }
    }
}

impl ConsumerContext for StageConsumerContext {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(assigned) => {
                tracing::info!(partitions = assigned.count(), "partitions assigned");
                self.joined.store(true, Ordering::Relaxed);
            }
            Rebalance::Revoke(revoked) => tracing::info!(partitions = revoked.count(), "partitions revoked"),
            Rebalance::Error(error) => tracing::warn!(%error, "rebalance error"),
        }
        self.rebalanced.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use rdkafka::producer::BaseProducer;

    use super::*;
    use crate::config::TestCli as Cli;

    /// librdkafka refuses these settings at client creation when it was built without
    /// OpenSSL (TLS, SASL SCRAM) or zstd, so creating the client proves the build has them.
    #[test]
    fn the_build_supports_tls_sasl_and_zstd() {
        let cli = Cli::parse_from([
            "stage",
            "--brokers",
            "127.0.0.1:1",
            "--compression",
            "zstd",
            "--kafka-option",
            "security.protocol=SASL_SSL",
            "--kafka-option",
            "sasl.mechanism=SCRAM-SHA-512",
            "--kafka-option",
            "sasl.username=user",
            "--kafka-option",
            "sasl.password=secret",
            "--kafka-option",
            "ssl.endpoint.identification.algorithm=https",
        ]);
        let producer: Result<BaseProducer, _> = producer_config(&cli.kafka).create();
        assert!(producer.is_ok(), "{:?}", producer.err());
        let mut unknown = producer_config(&cli.kafka);
        unknown.set("no.such.property", "1");
        let error = unknown.create::<BaseProducer>().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("no.such.property"), "{error}");
    }
}
