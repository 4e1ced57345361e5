//! One Prometheus registry per stage instance (several stages can share a process in
//! tests), with the series every stage exports. Stages register their own series in the
//! same registry through [`StageMetrics::registry`].

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

#[derive(Debug, Clone)]
pub struct StageMetrics {
    registry: Registry,
    pub messages_in: IntCounterVec,
    pub messages_out: IntCounterVec,
    pub batch_seconds: Histogram,
    pub errors: IntCounterVec,
    pub dead_letters: IntCounterVec,
    pub consumer_lag: IntGaugeVec,
    pub assigned_partitions: IntGauge,
    pub state_keys: IntGauge,
    pub restore_seconds: Histogram,
    pub restored_records: IntCounter,
}

impl StageMetrics {
    pub fn new(stage: &str) -> Self {
        let registry = Registry::new_custom(
            Some("recrawl".into()),
            Some([("stage".to_owned(), stage.to_owned())].into()),
        )
        .unwrap_or_default();
        // Metric definitions are constants, so registration only fails on a duplicate
        // name, which the unit test below would catch.
        fn register<T: prometheus::core::Collector + Clone + 'static>(registry: &Registry, metric: T) -> T {
            let _ = registry.register(Box::new(metric.clone()));
            metric
        }
        let counter = |name: &str, help: &str, labels: &[&str]| {
            register(
                &registry,
                IntCounterVec::new(Opts::new(name, help), labels).unwrap_or_else(|e| panic!("{name}: {e}")),
            )
        };
        let histogram = |name: &str, help: &str, buckets: Vec<f64>| {
            register(
                &registry,
                Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
                    .unwrap_or_else(|e| panic!("{name}: {e}")),
            )
        };
        let gauge = |name: &str, help: &str| {
            register(&registry, IntGauge::new(name, help).unwrap_or_else(|e| panic!("{name}: {e}")))
        };
        Self {
            messages_in: counter("messages_in_total", "Input messages consumed, by topic.", &["topic"]),
            messages_out: counter(
                "messages_out_total",
                "Messages produced and acknowledged, by topic.",
                &["topic"],
            ),
            batch_seconds: histogram(
                "batch_processing_seconds",
                "Time from a batch's first message to its offsets being stored.",
                prometheus::exponential_buckets(0.001, 2.0, 16).unwrap_or_default(),
            ),
            errors: counter("errors_total", "Errors, by kind.", &["kind"]),
            dead_letters: counter(
                "dead_letters_total",
                "Records sent to the dead-letter topic, by the topic they belong on and kind (undecodable, schema_version, key_mismatch, invalid, unproducible).",
                &["topic", "kind"],
            ),
            consumer_lag: register(
                &registry,
                IntGaugeVec::new(
                    Opts::new(
                        "consumer_lag",
                        "Messages behind the high watermark, from librdkafka statistics.",
                    ),
                    &["topic", "partition"],
                )
                .unwrap_or_else(|e| panic!("consumer_lag: {e}")),
            ),
            assigned_partitions: gauge("assigned_partitions", "Input partitions assigned to this instance."),
            state_keys: gauge("state_keys", "Keys held in partitioned state."),
            restore_seconds: histogram(
                "state_restore_seconds",
                "Time to restore newly assigned partitions' state from the changelog.",
                prometheus::exponential_buckets(0.001, 4.0, 10).unwrap_or_default(),
            ),
            restored_records: register(
                &registry,
                IntCounter::new("state_restored_keys_total", "Keys restored from the changelog.")
                    .unwrap_or_else(|e| panic!("state_restored_keys_total: {e}")),
            ),
            registry,
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The registry in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_series_with_the_stage_label() {
        let metrics = StageMetrics::new("diff");
        metrics.messages_in.with_label_values(&["recrawl.fetch-results"]).inc();
        metrics.errors.with_label_values(&["decode"]).inc_by(2);
        metrics.consumer_lag.with_label_values(&["t", "0"]).set(7);
        let text = metrics.render();
        // The series' own labels come sorted, the constant stage label after them.
        assert!(
            text.contains(r#"recrawl_messages_in_total{topic="recrawl.fetch-results",stage="diff"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"recrawl_errors_total{kind="decode",stage="diff"} 2"#), "{text}");
        assert!(text.contains(r#"recrawl_consumer_lag{partition="0",topic="t",stage="diff"} 7"#), "{text}");
        assert!(
            text.contains(r#"recrawl_batch_processing_seconds_bucket{stage="diff",le="0.001"}"#),
            "{text}"
        );
    }
}
