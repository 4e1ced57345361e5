//! librdkafka client configuration and the client contexts: statistics → lag gauges and
//! cluster reachability, librdkafka's log lines → tracing (connection failures once per
//! outage, not once a second), rebalances → a notification the loop turns into state
//! restores.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{
    BaseConsumer, Consumer, ConsumerContext, Rebalance, RebalanceProtocol, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::ClientConfig;
use rdkafka::ClientContext;
use rdkafka::TopicPartitionList;
use tokio::sync::Notify;

use crate::config::{ClusterArgs, KafkaArgs, DEFAULT_SESSION_TIMEOUT_MS};
use crate::http::Health;
use crate::metrics::StageMetrics;

/// The longest wait between attempts to reach a broker, in ms (`reconnect.backoff.max.ms`).
const RECONNECT_BACKOFF_MAX_MS: &str = "1000";

/// Largest fetch response librdkafka may ask for: its default, or one record if larger.
const DEFAULT_FETCH_MAX_BYTES: usize = 50 << 20;

/// Settings every client gets: brokers, then recrawl's defaults, then the user's
/// passthrough options (which may override the defaults but not the reserved keys).
pub fn base_config(args: &ClusterArgs, defaults: &[(&str, &str)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &args.brokers);
    // A producer or consumer that names a missing topic must fail, not create it with
    // the broker's default partition count: the stages' state depends on co-partitioning.
    config.set("allow.auto.create.topics", "false");
    // librdkafka backs off to 10 s between attempts to reach a broker that went away, so
    // a stage noticed the brokers' return up to 10 s late and rejoined its group after
    // about 11 s. Java clients back off to 1 s; so do these.
    config.set("reconnect.backoff.max.ms", RECONNECT_BACKOFF_MAX_MS);
    for (key, value) in defaults {
        config.set(*key, *value);
    }
    for (key, value) in &args.kafka_options {
        config.set(key, value);
    }
    config
}

/// Fetch limits that let a record of `--max-record-bytes` through.
fn fetch_limits(args: &ClusterArgs, config: &mut ClientConfig) {
    let fetch_max = args.max_record_bytes.max(DEFAULT_FETCH_MAX_BYTES);
    config
        .set("max.partition.fetch.bytes", args.max_record_bytes.to_string())
        .set("fetch.max.bytes", fetch_max.to_string())
        // A response holds at most fetch.max.bytes of records plus protocol framing.
        .set("receive.message.max.bytes", fetch_max.saturating_add(1 << 20).to_string());
}

/// A group consumer whose offsets are stored by the loop, only after a batch's outputs
/// are acknowledged, and committed in the background and on shutdown. Cooperative
/// rebalancing keeps every other partition consuming while one moves; with
/// `--instance-id` the membership is static, so a restart gets its partitions back at
/// once.
pub fn consumer_config(args: &KafkaArgs, group: &str) -> ClientConfig {
    let session = DEFAULT_SESSION_TIMEOUT_MS.to_string();
    // A passed-through value that does not parse is refused by `KafkaArgs::validate`.
    let poll_interval = args.max_poll_interval_ms().unwrap_or_default().to_string();
    let mut config = base_config(
        &args.cluster,
        &[
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "true"),
            ("auto.commit.interval.ms", "1000"),
            ("partition.assignment.strategy", "cooperative-sticky"),
            // Statistics drive the lag gauges and the reachability behind /readyz.
            ("statistics.interval.ms", "1000"),
            ("session.timeout.ms", &session),
            ("heartbeat.interval.ms", "1000"),
            ("max.poll.interval.ms", &poll_interval),
        ],
    );
    config.set("group.id", group).set("enable.auto.offset.store", "false");
    if let Some(id) = &args.instance_id {
        config.set("group.instance.id", id);
    }
    fetch_limits(&args.cluster, &mut config);
    config
}

/// An idempotent producer that waits for all in-sync replicas. A delivery not
/// acknowledged within `message.timeout.ms` comes back to the loop, which retries it
/// for as long as `--outage-timeout-ms` allows.
pub fn producer_config(args: &KafkaArgs) -> ClientConfig {
    let mut config = base_config(
        &args.cluster,
        &[
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("linger.ms", "5"),
            ("message.timeout.ms", "30000"),
        ],
    );
    config
        .set("compression.type", args.compression.as_str())
        .set("message.max.bytes", args.cluster.max_record_bytes.to_string());
    config
}

/// A consumer outside any group that reads one partition from the start (state restore,
/// tools).
pub fn reader_config(args: &ClusterArgs, group: &str) -> ClientConfig {
    let mut config = base_config(args, &[("auto.offset.reset", "earliest")]);
    config.set("group.id", group).set("enable.auto.commit", "false").set("enable.auto.offset.store", "false");
    fetch_limits(args, &mut config);
    config
}

/// Whether librdkafka's statistics show a connection to at least one broker.
fn any_broker_up(statistics: &Statistics) -> bool {
    statistics.brokers.values().any(|broker| broker.source != "internal" && broker.state == "UP")
}

/// librdkafka's lines go to tracing at their own level, except failures of single
/// connections, which it repeats every second while a broker is away: those are debug
/// lines, since what matters (all brokers gone, deliveries failing) is reported once per
/// outage through [`Health::kafka_down`].
fn forward_log(level: RDKafkaLogLevel, facility: &str, message: &str) {
    let connection_failure = matches!(facility, "FAIL" | "ERROR")
        && ["Connect to", "Connection refused", "Disconnected", "timed out", "Failed to resolve"]
            .iter()
            .any(|sign| message.contains(sign));
    if connection_failure {
        tracing::debug!(target: "librdkafka", facility, message);
        return;
    }
    match level {
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => {
            tracing::error!(target: "librdkafka", facility, message)
        }
        RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", facility, message),
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
            tracing::info!(target: "librdkafka", facility, message)
        }
        RDKafkaLogLevel::Debug => tracing::debug!(target: "librdkafka", facility, message),
    }
}

/// Whether `error` says the brokers are out of reach, which librdkafka rides out by
/// reconnecting, rather than that something is wrong.
pub fn brokers_unreachable(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure)
    )
}

/// What a reader outside any consumer group does after a read error that does not end it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOn {
    /// The brokers are out of reach: librdkafka reconnects, and reading goes on once they
    /// are back.
    Waiting,
    /// Another error, of the kind that comes and goes with an outage (a name not
    /// resolving, a partition between leaders, a request refused while a broker restarts).
    Through,
}

/// The read errors of one reader outside any consumer group (a stage's side-input tail,
/// `recrawl tail`): a fatal one ends the reading; the others are read through, each said
/// once while it repeats.
#[derive(Debug, Default)]
pub struct ReadErrors {
    last_said: String,
}

impl ReadErrors {
    /// Takes the error `reader` (a name for the log) got: `Err` with it when it is fatal.
    pub fn read_on(&mut self, error: KafkaError, reader: &str) -> Result<ReadOn, KafkaError> {
        if matches!(error, KafkaError::MessageConsumptionFatal(_)) {
            return Err(error);
        }
        if brokers_unreachable(&error) {
            tracing::debug!(reader, %error, "brokers unreachable; waiting");
            return Ok(ReadOn::Waiting);
        }
        let said = error.to_string();
        if said != self.last_said {
            tracing::warn!(reader, error = %said, "read error; reading on");
            self.last_said = said;
        }
        Ok(ReadOn::Through)
    }

    /// The last error read through, empty if none.
    pub fn last(&self) -> &str {
        &self.last_said
    }
}

/// The consumer's view of the cluster: it keeps connections to its group coordinator and
/// partition leaders, so "all brokers down" from it means the cluster is out of reach.
fn forward_error(health: &Health, error: KafkaError, reason: &str) {
    if brokers_unreachable(&error) {
        health.kafka_down(reason);
    } else {
        tracing::error!(%error, reason, "Kafka client error");
    }
}

/// The context of a stage's producer and changelog readers: their log lines. They do not
/// judge reachability: a producer connects only when it has something to send, so an idle
/// one reports every broker down; deliveries that fail are reported by the loop instead.
#[derive(Debug, Clone, Default)]
pub struct ClusterContext;

impl ClientContext for ClusterContext {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        forward_log(level, facility, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if brokers_unreachable(&error) {
            tracing::debug!(%error, reason, "Kafka client error");
        } else {
            tracing::error!(%error, reason, "Kafka client error");
        }
    }
}

impl ConsumerContext for ClusterContext {}

/// The context of a stage's group consumer. A stage keeps its state per partition number
/// over all its input topics, so partition p of every input must be on one instance; no
/// assignor of librdkafka's that rebalances cooperatively keeps that (with 4 members and 6
/// partitions of two topics, cooperative-sticky gave one member estimates 0 and 4 and
/// links 2). So the consumer subscribes to the first input only, and the context takes
/// partition p of every other input (the followers) with the first's partition p, in the
/// same assign or unassign: the group balances one topic and the rest follow.
#[derive(Debug)]
pub struct StageConsumerContext {
    metrics: StageMetrics,
    health: Health,
    rebalanced: Arc<Notify>,
    joined: Arc<AtomicBool>,
    /// The (topic, partition)s assigned now: the only ones with a lag series.
    assigned: Mutex<HashSet<(String, i32)>>,
    /// The input topics: the first is subscribed to, the others' partitions follow its.
    inputs: Vec<String>,
    /// Partitions of each input topic in librdkafka's latest statistics, which list every
    /// partition a known topic has in the brokers' metadata, assigned or not.
    input_partitions: Mutex<HashMap<String, i32>>,
}

impl StageConsumerContext {
    /// `inputs`: the stage's input topics; the consumer must subscribe to the first only.
    pub fn new(metrics: StageMetrics, health: Health, inputs: &[String]) -> Self {
        Self {
            metrics,
            health,
            rebalanced: Arc::new(Notify::new()),
            joined: Arc::new(AtomicBool::new(false)),
            assigned: Mutex::new(HashSet::new()),
            inputs: inputs.to_vec(),
            input_partitions: Mutex::new(HashMap::new()),
        }
    }

    /// Adds partition p of every follower for each partition p `list` names.
    fn with_followers(&self, list: &mut TopicPartitionList) {
        let led: Vec<i32> = list.elements().iter().map(|e| e.partition()).collect();
        for follower in self.inputs.iter().skip(1) {
            for &partition in &led {
                list.add_partition(follower, partition);
            }
        }
    }

    /// Sets the lag of every (topic, partition, lag) librdkafka reported that is assigned
    /// now. Its statistics can still list a partition after its revocation, with its last
    /// lag, and report -1 for one it has no lag for yet: neither gets a series.
    fn export_lag<'a>(&self, reported: impl Iterator<Item = (&'a str, i32, i64)>) {
        let assigned = self.assigned.lock().unwrap_or_else(PoisonError::into_inner);
        for (topic, partition, lag) in reported {
            let labels = [topic, &partition.to_string()];
            if lag >= 0 && assigned.contains(&(topic.to_owned(), partition)) {
                self.metrics.consumer_lag.with_label_values(&labels).set(lag);
            } else {
                let _absent = self.metrics.consumer_lag.remove_label_values(&labels);
            }
        }
    }

    /// Records the assignment after a rebalance and drops the lag series of partitions no
    /// longer in it, so a revoked partition's last lag does not linger.
    fn track_assignment(&self, assigned: HashSet<(String, i32)>) {
        let mut current = self.assigned.lock().unwrap_or_else(PoisonError::into_inner);
        for (topic, partition) in current.difference(&assigned) {
            let _absent = self.metrics.consumer_lag.remove_label_values(&[topic, &partition.to_string()]);
        }
        *current = assigned;
    }

    /// Notified after every rebalance.
    pub fn rebalanced(&self) -> Arc<Notify> {
        self.rebalanced.clone()
    }

    /// True while the consumer holds an assignment (possibly empty): from an assignment to
    /// the next revocation.
    pub fn has_joined(&self) -> bool {
        self.joined.load(Ordering::Relaxed)
    }

    /// The partition count of each input topic the client has metadata for: those the
    /// consumer reads, so all of them once it holds partitions.
    pub fn input_partitions(&self) -> HashMap<String, i32> {
        self.input_partitions.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Records each input topic's partition count from statistics. A partition assigned
    /// to a follower that its topic lacks is listed too, as unknown: it is not counted.
    fn record_input_partitions(&self, statistics: &Statistics) {
        let counts = self.inputs.iter().filter_map(|topic| {
            let known =
                statistics.topics.get(topic)?.partitions.values().filter(|p| p.partition >= 0 && !p.unknown);
            let count = i32::try_from(known.count()).unwrap_or(i32::MAX);
            (count > 0).then(|| (topic.clone(), count))
        });
        *self.input_partitions.lock().unwrap_or_else(PoisonError::into_inner) = counts.collect();
    }

    /// Whether any partition of any input is assigned to the consumer now.
    pub fn holds_partitions(&self) -> bool {
        !self.assigned.lock().unwrap_or_else(PoisonError::into_inner).is_empty()
    }
}

/// Gives up the consumer's partitions and leaves the group, within `timeout`; false if
/// partitions are still held then. Call it before the consumer is dropped: unsubscribing
/// revokes the partitions through the rebalance callback while the group still runs.
/// Left to the close, the revocation's unassign call can reach librdkafka's group queue
/// just as the group terminates, which drops the call unanswered, and the caller (the
/// close) waits for the answer forever (librdkafka issue 4884). Records read meanwhile
/// are not processed and their offsets not stored: the partitions' next owner reads them.
///
/// Not for a static member (`group.instance.id`): unsubscribing makes it leave the group,
/// so its restart would cost two rebalances instead of none.
pub async fn leave_group(consumer: &StreamConsumer<StageConsumerContext>, timeout: Duration) -> bool {
    consumer.unsubscribe();
    let context = consumer.context();
    let rebalanced = context.rebalanced();
    // librdkafka can give up partitions without the callback (after a fatal error).
    let holds = || context.holds_partitions() && consumer.assignment().map_or(true, |list| list.count() > 0);
    let revoked = async {
        loop {
            // The rebalance callback runs inside `recv`, which returns only with a record
            // or an error. A rebalance queued while nobody polled (an assignment during the
            // final commit) is served before the quiet period ends.
            tokio::select! {
                _ = consumer.recv() => {}
                () = rebalanced.notified() => {}
                () = tokio::time::sleep(LEAVE_QUIET), if !holds() => break,
            }
        }
    };
    tokio::time::timeout(timeout, revoked).await.is_ok()
}

/// How long a consumer that gave up its partitions goes on serving rebalances it may still
/// have queued before it is closed.
const LEAVE_QUIET: Duration = Duration::from_millis(200);

/// Records between the consumer and the end of `partition`: librdkafka's lag from the
/// committed offset, or, before the group's first commit there (librdkafka says -1), from
/// the position the consumer reads at — with `auto.offset.reset=earliest` the log start
/// until it has read something — so an empty or never-committed partition has a series
/// too. -1 while the end is unknown.
fn records_behind(partition: &rdkafka::statistics::Partition) -> i64 {
    if partition.consumer_lag >= 0 || partition.hi_offset < 0 {
        return partition.consumer_lag;
    }
    let position = if partition.app_offset >= 0 { partition.app_offset } else { partition.lo_offset };
    if position < 0 {
        return -1;
    }
    partition.hi_offset.saturating_sub(position).max(0)
}

fn partitions_of(list: &TopicPartitionList) -> HashSet<(String, i32)> {
    list.elements().iter().map(|e| (e.topic().to_owned(), e.partition())).collect()
}

impl ClientContext for StageConsumerContext {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        forward_log(level, facility, message);
    }

    fn stats(&self, statistics: Statistics) {
        if any_broker_up(&statistics) {
            self.health.kafka_up();
        }
        self.record_input_partitions(&statistics);
        self.export_lag(statistics.topics.iter().flat_map(|(topic, stats)| {
            stats.partitions.values().map(move |p| (topic.as_str(), p.partition, records_behind(p)))
        }));
    }

    fn error(&self, error: KafkaError, reason: &str) {
        forward_error(&self.health, error, reason);
    }
}

impl ConsumerContext for StageConsumerContext {
    /// rdkafka's rebalance, with the followers' partitions added to what is assigned or
    /// revoked. Their offsets come from the group's commits, as the led partitions' do.
    fn rebalance(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr, list: &mut TopicPartitionList) {
        let cooperative = matches!(consumer.rebalance_protocol(), RebalanceProtocol::Cooperative);
        let applied = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.with_followers(list);
                if cooperative {
                    consumer.incremental_assign(list)
                } else {
                    consumer.assign(list)
                }
            }
            _ => {
                if err == RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS {
                    self.with_followers(list);
                } else {
                    tracing::warn!(error = ?RDKafkaErrorCode::from(err), "rebalance error; giving up the partitions");
                }
                if cooperative {
                    consumer.incremental_unassign(list)
                } else {
                    consumer.unassign()
                }
            }
        };
        match applied {
            Ok(()) => {}
            // librdkafka waits for the assignment or revocation that failed: the group is
            // stuck for this member, so liveness fails and the instance is restarted.
            Err(error)
                if matches!(
                    err,
                    RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS
                        | RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS
                ) =>
            {
                tracing::error!(%error, ?err, "applying the rebalance failed; failing liveness");
                self.health.set_failed();
            }
            Err(error) => tracing::warn!(%error, "giving up partitions failed"),
        }
        let rebalance = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => Rebalance::Assign(list),
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => Rebalance::Revoke(list),
            _ => Rebalance::Error(KafkaError::Rebalance(err.into())),
        };
        self.post_rebalance(consumer, &rebalance);
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        // Incremental (cooperative) rebalances name only the partitions that moved; the
        // consumer's assignment is the whole of what it owns now.
        match consumer.assignment() {
            Ok(list) => self.track_assignment(partitions_of(&list)),
            // A closing consumer's group handler no longer answers (librdkafka's
            // ERR__DESTROY) while its partitions are revoked: apply what the rebalance
            // names. An eager revocation names every partition, so either protocol ends
            // with what the consumer owns.
            Err(error) => {
                if matches!(error, KafkaError::MetadataFetch(RDKafkaErrorCode::BrokerDestroy)) {
                    tracing::debug!(%error, "consumer closing; applying the rebalance's partitions");
                } else {
                    tracing::warn!(%error, "cannot read the assignment; applying the rebalance's partitions");
                }
                let mut assigned = self.assigned.lock().unwrap_or_else(PoisonError::into_inner).clone();
                match rebalance {
                    Rebalance::Assign(moved) => assigned.extend(partitions_of(moved)),
                    Rebalance::Revoke(moved) => {
                        let revoked = partitions_of(moved);
                        assigned.retain(|p| !revoked.contains(p));
                    }
                    Rebalance::Error(_) => {}
                }
                self.track_assignment(assigned);
            }
        }
        match rebalance {
            Rebalance::Assign(assigned) => {
                tracing::info!(partitions = assigned.count(), "partitions assigned");
                self.joined.store(true, Ordering::Relaxed);
                self.metrics.group_assignments.inc();
            }
            Rebalance::Revoke(revoked) => {
                // Until the next assignment the instance may not be in the group (a lost
                // session revokes everything): not ready, and no ticks.
                self.joined.store(false, Ordering::Relaxed);
                tracing::info!(partitions = revoked.count(), "partitions revoked");
            }
            Rebalance::Error(error) => tracing::warn!(%error, "rebalance error"),
        }
        self.rebalanced.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::mem::ManuallyDrop;

    use clap::Parser;
    use rdkafka::producer::BaseProducer;

    use super::*;
    use crate::config::TestCli as Cli;

    /// A scheduler-like group member of `group` reading `inputs`, subscribed to the first.
    /// Leaked rather than closed if a test fails while it is in the group, so a failure
    /// cannot turn into the close's hang (see `leave_group`): `leave` it instead.
    fn group_member(
        cli: &Cli,
        group: &str,
        inputs: &[String],
    ) -> ManuallyDrop<StreamConsumer<StageConsumerContext>> {
        let context = StageConsumerContext::new(StageMetrics::new("scheduler"), Health::default(), inputs);
        let consumer: StreamConsumer<StageConsumerContext> =
            consumer_config(&cli.kafka, group).create_with_context(context).expect("consumer");
        consumer.subscribe(&[inputs[0].as_str()]).expect("subscribe");
        ManuallyDrop::new(consumer)
    }

    /// Leaves the group as a stopping stage does, then closes the consumer.
    fn leave(
        runtime: &tokio::runtime::Runtime,
        consumer: ManuallyDrop<StreamConsumer<StageConsumerContext>>,
    ) {
        assert!(
            runtime.block_on(leave_group(&consumer, Duration::from_secs(60))),
            "a member kept its partitions"
        );
        assert!(!consumer.context().has_joined());
        let (closed, close_ended) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(ManuallyDrop::into_inner(consumer));
            let _ = closed.send(());
        });
        assert!(close_ended.recv_timeout(Duration::from_secs(60)).is_ok(), "the member's close did not end");
    }

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

    /// Lag series follow the assignment: a partition revoked loses its series at once,
    /// and statistics that still list it do not bring it back.
    #[test]
    fn lag_series_are_those_of_the_assigned_partitions() {
        let metrics = StageMetrics::new("scheduler");
        let context = StageConsumerContext::new(metrics.clone(), Health::default(), &[]);
        let owned = |pairs: &[(&str, i32)]| pairs.iter().map(|(t, p)| ((*t).to_owned(), *p)).collect();
        let series = || {
            let mut found: Vec<String> = metrics
                .render()
                .lines()
                .filter(|l| l.starts_with("recrawl_consumer_lag_records{"))
                .map(str::to_owned)
                .collect();
            found.sort();
            found
        };
        let line = |topic: &str, partition: i32, lag: i64| {
            format!(
                r#"recrawl_consumer_lag_records{{partition="{partition}",topic="{topic}",stage="scheduler"}} {lag}"#
            )
        };
        context.track_assignment(owned(&[("e", 0), ("e", 1), ("l", 0), ("l", 1)]));
        let reported = [("e", 0, 5), ("e", 1, 0), ("e", 2, 9), ("l", 0, 3), ("l", 1, -1), ("l", -1, 4)];
        context.export_lag(reported.into_iter());
        assert_eq!(series(), [line("e", 0, 5), line("l", 0, 3), line("e", 1, 0)]);
        context.track_assignment(owned(&[("e", 1), ("l", 1)]));
        assert_eq!(series(), [line("e", 1, 0)]);
        context.export_lag([("e", 0, 5), ("e", 1, 2), ("l", 1, 7)].into_iter());
        assert_eq!(series(), [line("e", 1, 2), line("l", 1, 7)]);
    }

    /// A consumer closing at SIGTERM cannot read its assignment while librdkafka revokes
    /// its partitions; the revocation itself still removes their series.
    /// (A consumer with no group cannot read an assignment either: it stands in.)
    #[test]
    fn a_revocation_removes_series_when_the_assignment_is_unreadable() {
        let metrics = StageMetrics::new("diff");
        let consumer: BaseConsumer<StageConsumerContext> = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .create_with_context(StageConsumerContext::new(metrics.clone(), Health::default(), &[]))
            .expect("a consumer needs no broker to be created");
        assert!(consumer.assignment().is_err(), "the stand-in must not read an assignment");
        let context = consumer.context();
        let list = |pairs: &[(&str, i32)]| {
            let mut list = TopicPartitionList::new();
            for (topic, partition) in pairs {
                list.add_partition(topic, *partition);
            }
            list
        };
        context.post_rebalance(&consumer, &Rebalance::Assign(&list(&[("e", 0), ("e", 1)])));
        context.post_rebalance(&consumer, &Rebalance::Assign(&list(&[("l", 0)])));
        context.export_lag([("e", 0, 5), ("e", 1, 2), ("l", 0, 3)].into_iter());
        let series =
            || metrics.render().lines().filter(|l| l.starts_with("recrawl_consumer_lag_records{")).count();
        assert_eq!(series(), 3);
        context.post_rebalance(&consumer, &Rebalance::Revoke(&list(&[("e", 1), ("l", 0)])));
        assert_eq!(series(), 1, "the revoked partitions' series are gone");
        assert!(!context.has_joined());
        context.post_rebalance(&consumer, &Rebalance::Revoke(&list(&[("e", 0)])));
        assert_eq!(series(), 0);
    }

    /// Members join one by one and one leaves; at every settled assignment each member
    /// owns the same partitions of both inputs, and every partition has one owner. Members
    /// leave as a stopping stage does, and their close then ends (it could hang when the
    /// close itself revoked the partitions).
    #[test]
    fn the_inputs_partitions_stay_together_as_members_come_and_go() {
        use std::collections::BTreeSet;
        use std::time::Instant;

        type Member = ManuallyDrop<StreamConsumer<StageConsumerContext>>;
        const PARTITIONS: i32 = 6;
        const SETTLING: Duration = Duration::from_secs(60);
        let mock = rdkafka::mocking::MockCluster::new(1).expect("mock cluster");
        let inputs = ["estimates".to_owned(), "links".to_owned()];
        for topic in &inputs {
            mock.create_topic(topic, PARTITIONS, 1).expect("topic");
        }
        // The mock broker waits a session timeout less a second for members to rejoin.
        let brokers = mock.bootstrap_servers();
        let cli =
            Cli::parse_from(["stage", "--brokers", &brokers, "--kafka-option", "session.timeout.ms=4000"]);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
        let _within = runtime.enter();
        let member = || group_member(&cli, "together", &inputs);
        let owned = |consumer: &Member, topic: &str| -> BTreeSet<i32> {
            let assignment = consumer.assignment().expect("assignment");
            assignment.elements().iter().filter(|e| e.topic() == topic).map(|e| e.partition()).collect()
        };
        let settled = |members: &[Member]| {
            let mut all = Vec::new();
            for consumer in members {
                let (led, followed) = (owned(consumer, &inputs[0]), owned(consumer, &inputs[1]));
                if led.is_empty() && followed.is_empty() && members.len() <= PARTITIONS as usize {
                    return false;
                }
                assert_eq!(led, followed, "a member owns different partitions of its inputs");
                all.extend(led);
            }
            all.sort_unstable();
            all == (0..PARTITIONS).collect::<Vec<_>>()
        };
        // Rebalance callbacks run while a member is polled.
        let settle = |members: &[Member]| {
            let deadline = Instant::now() + SETTLING;
            while !settled(members) {
                assert!(Instant::now() < deadline, "the group did not settle");
                for consumer in members {
                    let _ =
                        runtime.block_on(tokio::time::timeout(Duration::from_millis(20), consumer.recv()));
                }
            }
        };
        let mut members = Vec::new();
        for _ in 0..4 {
            members.push(member());
            settle(&members);
        }
        leave(&runtime, members.remove(1));
        settle(&members);
        for consumer in members {
            leave(&runtime, consumer);
        }
    }

    /// librdkafka's statistics give each input's partition count, leaving out the
    /// partitions a follower was assigned that its topic lacks, so inputs whose counts
    /// differ are told apart.
    #[test]
    fn statistics_count_the_partitions_of_each_input() {
        use std::time::Instant;

        let mock = rdkafka::mocking::MockCluster::new(1).expect("mock cluster");
        mock.create_topic("estimates", 6, 1).expect("topic");
        mock.create_topic("links", 4, 1).expect("topic");
        let inputs = ["estimates".to_owned(), "links".to_owned()];
        let brokers = mock.bootstrap_servers();
        let cli = Cli::parse_from(["stage", "--brokers", &brokers]);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
        let _within = runtime.enter();
        let consumer = group_member(&cli, "apart", &inputs);
        let deadline = Instant::now() + Duration::from_secs(60);
        while consumer.context().input_partitions().len() < inputs.len() {
            assert!(Instant::now() < deadline, "no statistics for both inputs");
            let _ = runtime.block_on(tokio::time::timeout(Duration::from_millis(100), consumer.recv()));
        }
        assert!(consumer.context().holds_partitions());
        let counts = consumer.context().input_partitions();
        assert_eq!(counts, HashMap::from([(inputs[0].clone(), 6), (inputs[1].clone(), 4)]));
        let error = crate::admin::check_copartitioned(&counts, &inputs).expect_err("6 and 4 partitions");
        assert!(error.to_string().contains("links"), "{error}");
        leave(&runtime, consumer);
    }

    #[test]
    fn a_reader_waits_out_unreachable_brokers_reads_through_other_errors_and_stops_on_fatal_ones() {
        let mut errors = ReadErrors::default();
        let down = KafkaError::MessageConsumption(RDKafkaErrorCode::AllBrokersDown);
        assert_eq!(errors.read_on(down, "test").ok(), Some(ReadOn::Waiting));
        assert_eq!(errors.last(), "", "waiting for the brokers is not an error read through");
        let refused = KafkaError::MessageConsumption(RDKafkaErrorCode::TopicAuthorizationFailed);
        assert_eq!(errors.read_on(refused.clone(), "test").ok(), Some(ReadOn::Through));
        assert_eq!(errors.last(), refused.to_string());
        let fatal = KafkaError::MessageConsumptionFatal(RDKafkaErrorCode::Fatal);
        assert!(matches!(errors.read_on(fatal, "test"), Err(KafkaError::MessageConsumptionFatal(_))));
    }

    #[test]
    fn a_partition_without_a_commit_is_behind_by_what_is_left_to_read() {
        let stats = |consumer_lag, hi_offset, lo_offset, app_offset| rdkafka::statistics::Partition {
            consumer_lag,
            hi_offset,
            lo_offset,
            app_offset,
            ..Default::default()
        };
        assert_eq!(records_behind(&stats(7, 10, 0, 3)), 7, "librdkafka's lag when it has one");
        assert_eq!(records_behind(&stats(-1, 0, 0, -1001)), 0, "an empty partition");
        assert_eq!(records_behind(&stats(-1, 10, 4, -1001)), 6, "nothing read yet: from the log start");
        assert_eq!(records_behind(&stats(-1, 10, 4, 8)), 2, "read up to 8, not committed yet");
        assert_eq!(records_behind(&stats(-1, -1, -1, -1001)), -1, "the end is not known yet");
    }

    /// The record limit reaches both ends, every client refuses to create topics, and every
    /// client tries a broker that went away again within a second.
    #[test]
    fn the_record_limit_and_no_auto_creation_reach_every_client() {
        let cli = Cli::parse_from(["stage", "--brokers", "b:1", "--max-record-bytes", "33554432"]);
        let producer = producer_config(&cli.kafka);
        assert_eq!(producer.get("message.max.bytes"), Some("33554432"));
        let consumer = consumer_config(&cli.kafka, "g");
        assert_eq!(consumer.get("max.partition.fetch.bytes"), Some("33554432"));
        assert_eq!(consumer.get("fetch.max.bytes"), Some("52428800"));
        assert_eq!(consumer.get("group.instance.id"), None);
        for config in [&producer, &consumer, &reader_config(&cli.kafka.cluster, "r")] {
            assert_eq!(config.get("allow.auto.create.topics"), Some("false"));
            assert_eq!(config.get("reconnect.backoff.max.ms"), Some("1000"));
        }
        let passed =
            Cli::parse_from(["stage", "--brokers", "b:1", "--kafka-option", "reconnect.backoff.max.ms=5000"]);
        assert_eq!(
            producer_config(&passed.kafka).get("reconnect.backoff.max.ms"),
            Some("5000"),
            "a passed-through back-off wins"
        );
        assert_eq!(
            recrawl_schemas::TopicCatalogue::builtin().max_message_bytes,
            crate::config::DEFAULT_MAX_RECORD_BYTES,
            "deploy/topics.toml's topics take the stages' largest record"
        );
        let cli = Cli::parse_from(["stage", "--brokers", "b:1", "--instance-id", "diff-0"]);
        let consumer = consumer_config(&cli.kafka, "g");
        assert_eq!(consumer.get("group.instance.id"), Some("diff-0"));
        assert_eq!(consumer.get("partition.assignment.strategy"), Some("cooperative-sticky"));
    }
}
