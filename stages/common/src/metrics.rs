//! One Prometheus registry per stage instance (several stages can share a process in
//! tests), with the series every stage exports. Stages register their own series in the
//! same registry through [`StageMetrics::registry`].

use prometheus::core::Collector;
use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

/// The build's git commit (`build.rs`), or "unknown".
pub const GIT_COMMIT: &str = env!("RECRAWL_GIT_COMMIT");

#[derive(Debug, Clone)]
pub struct StageMetrics {
    registry: Registry,
    pub records_in: IntCounterVec,
    pub records_out: IntCounterVec,
    pub batch_seconds: Histogram,
    pub errors: IntCounterVec,
    pub dead_letters: IntCounterVec,
    pub consumer_lag: IntGaugeVec,
    pub assigned_partitions: IntGaugeVec,
    pub state_keys: IntGauge,
    pub restore_seconds: Histogram,
    pub restore_started: IntGauge,
    pub restored_records: IntCounter,
    pub group_assignments: IntCounter,
}

/// Registers `metric` in `registry` and returns it: a stage's metrics struct is built
/// field by field with it.
pub fn registered<T: Collector + Clone + 'static>(
    registry: &Registry,
    metric: T,
) -> Result<T, prometheus::Error> {
    registry.register(Box::new(metric.clone()))?;
    Ok(metric)
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
        fn register<T: Collector + Clone + 'static>(registry: &Registry, metric: T) -> T {
            let _ = registered(registry, metric.clone());
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
        let gauges = |name: &str, help: &str, labels: &[&str]| {
            register(
                &registry,
                IntGaugeVec::new(Opts::new(name, help), labels).unwrap_or_else(|e| panic!("{name}: {e}")),
            )
        };
        gauges("build_info", "Always 1: the build's version and git commit.", &["version", "git_commit"])
            .with_label_values(&[env!("CARGO_PKG_VERSION"), GIT_COMMIT])
            .set(1);
        Self {
            records_in: counter("records_in_total", "Input records consumed, by topic.", &["topic"]),
            records_out: counter(
                "records_out_total",
                "Records produced and acknowledged (outputs, changelog, dead letters), by topic.",
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
            consumer_lag: gauges(
                "consumer_lag_records",
                "Records behind the high watermark per assigned input partition, from librdkafka statistics.",
                &["topic", "partition"],
            ),
            assigned_partitions: gauges(
                "assigned_partitions",
                "Input partitions assigned to this instance, by topic.",
                &["topic"],
            ),
            state_keys: gauge("state_keys", "Keys held in partitioned state."),
            restore_seconds: histogram(
                "state_restore_seconds",
                "Time to restore newly assigned partitions' state from the changelog.",
                prometheus::exponential_buckets(0.001, 4.0, 10).unwrap_or_default(),
            ),
            restore_started: gauge(
                "state_restore_started_timestamp_seconds",
                "Unix time the state restore in progress started; 0 when none is running.",
            ),
            restored_records: register(
                &registry,
                IntCounter::new(
                    "state_restored_records_total",
                    "Changelog records read while restoring state (values and tombstones).",
                )
                .unwrap_or_else(|e| panic!("state_restored_records_total: {e}")),
            ),
            group_assignments: register(
                &registry,
                IntCounter::new(
                    "group_assignments_total",
                    "Assignments the consumer group gave this instance: its first join, and every rejoin after a rebalance or a lost session.",
                )
                .unwrap_or_else(|e| panic!("group_assignments_total: {e}")),
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
        metrics.records_in.with_label_values(&["recrawl.fetch-results"]).inc();
        metrics.errors.with_label_values(&["decode"]).inc_by(2);
        metrics.consumer_lag.with_label_values(&["t", "0"]).set(7);
        let text = metrics.render();
        // The series' own labels come sorted, the constant stage label after them.
        assert!(
            text.contains(r#"recrawl_records_in_total{topic="recrawl.fetch-results",stage="diff"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"recrawl_errors_total{kind="decode",stage="diff"} 2"#), "{text}");
        assert!(
            text.contains(r#"recrawl_consumer_lag_records{partition="0",topic="t",stage="diff"} 7"#),
            "{text}"
        );
        let build = format!(
            r#"recrawl_build_info{{git_commit="{GIT_COMMIT}",version="{}",stage="diff"}} 1"#,
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&build), "{text}");
        assert!(
            text.contains(r#"recrawl_batch_processing_seconds_bucket{stage="diff",le="0.001"}"#),
            "{text}"
        );
    }
}
