//! Flags shared by every stage. Every flag is also an environment variable; clap rejects
//! unknown flags and invalid values at start with a message naming the flag, and
//! [`KafkaArgs::validate`] rejects combinations that would break the at-least-once loop.

use std::net::SocketAddr;

use clap::builder::TypedValueParser;
use clap::{Args, ValueEnum};
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("--kafka-option {}: expected key=value", redact_option_text(.0))]
    KafkaOptionSyntax(String),
    /// librdkafka refused a passed-through property; its value is shown only if it cannot
    /// be a secret.
    #[error("--kafka-option {key}={shown}: {reason}", shown = redact_option(.key, .value))]
    KafkaOption { key: String, value: String, reason: String },
    #[error("--kafka-option {0}: set by recrawl itself ({1}); use the recrawl flag instead")]
    ReservedKafkaOption(String, &'static str),
    #[error("--drain-timeout-ms {drain_ms} must be below the consumer session timeout ({session_ms} ms, session.timeout.ms) so a drained stage is not evicted mid-drain")]
    DrainTooLong { drain_ms: u64, session_ms: u64 },
    #[error("--kafka-option session.timeout.ms={0:?} is not a number")]
    SessionTimeout(String),
    #[error("--kafka-option max.poll.interval.ms={0:?} is not a number")]
    PollInterval(String),
    #[error("--outage-timeout-ms {outage_ms} must be below max.poll.interval.ms ({poll_ms} ms): a stage retrying its outputs that long would leave its group and keep writing for partitions another instance took")]
    OutageOutlastsPoll { outage_ms: u64, poll_ms: u64 },
    #[error("--batch-size must be at least 1")]
    BatchSize,
    #[error("--instance-id {0:?}: expected 1 to 200 characters of [A-Za-z0-9._-]")]
    InstanceId(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Gzip => "gzip",
            Self::Snappy => "snappy",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
        }
    }
}

/// recrawl's consumer session timeout, unless `session.timeout.ms` is passed through:
/// librdkafka's 45 s would leave a crashed instance's partitions idle that long.
pub const DEFAULT_SESSION_TIMEOUT_MS: u64 = 10_000;

/// The largest Kafka record any stage produces or accepts, unless `--max-record-bytes`
/// says otherwise; `deploy/topics.toml` gives every topic this `max.message.bytes`.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 16 << 20;

pub fn parse_kafka_option(raw: &str) -> Result<(String, String), ConfigError> {
    let (key, value) = raw.split_once('=').ok_or_else(|| ConfigError::KafkaOptionSyntax(raw.to_owned()))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(ConfigError::KafkaOptionSyntax(raw.to_owned()));
    }
    let reserved = match key {
        "bootstrap.servers" | "metadata.broker.list" => Some("--brokers"),
        "group.id" => Some("--group-id"),
        "enable.auto.offset.store" => Some("offsets are stored after outputs are acknowledged"),
        "compression.type" | "compression.codec" => Some("--compression"),
        "message.max.bytes" | "max.partition.fetch.bytes" => Some("--max-record-bytes"),
        "group.instance.id" => Some("--instance-id"),
        "allow.auto.create.topics" => Some("topics are created from deploy/topics.toml, never by a client"),
        _ => None,
    };
    if let Some(flag) = reserved {
        return Err(ConfigError::ReservedKafkaOption(key.to_owned(), flag));
    }
    Ok((key.to_owned(), value.trim().to_owned()))
}

/// Whether a librdkafka property (or a misspelling of one) may hold a secret: passwords,
/// private keys, OAuth secrets and JAAS or OIDC configurations, by the words in its name.
pub fn is_secret_option(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "pass",
        "pasw",
        "pwd",
        "secret",
        "token",
        "key.pem",
        "credential",
        "jaas",
        "oauthbearer.config",
        "private",
    ]
    .iter()
    .any(|word| key.contains(word))
}

/// The value of `key` fit to print: `***` when the property may hold a secret.
pub fn redact_option<'a>(key: &str, value: &'a str) -> std::borrow::Cow<'a, str> {
    if is_secret_option(key) {
        "***".into()
    } else {
        value.into()
    }
}

/// A raw `--kafka-option` argument fit to print, cut after its key when that may name a
/// secret (or when it has no '=' and may be one).
fn redact_option_text(raw: &str) -> String {
    match raw.split_once('=') {
        Some((key, value)) => format!("{key}={}", redact_option(key, value)),
        None if is_secret_option(raw) => "***".to_owned(),
        None => format!("{raw:?}"),
    }
}

/// A clap value parser for flags that are shares, costs or probabilities: a number in
/// [0, 1].
pub fn unit_interval(value: &str) -> Result<f64, String> {
    let parsed: f64 = value.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&parsed) {
        Ok(parsed)
    } else {
        Err(format!("{parsed} is not in [0, 1]"))
    }
}

/// A clap value parser for weights: a finite number ≥ 0.
pub fn non_negative(value: &str) -> Result<f64, String> {
    let parsed: f64 = value.parse().map_err(|e| format!("{e}"))?;
    if parsed.is_finite() && parsed >= 0.0 {
        Ok(parsed)
    } else {
        Err(format!("{parsed} is not a finite number ≥ 0"))
    }
}

/// Where the cluster is and how to reach it: all a command that only reads or creates
/// topics needs (`recrawl topics create`, `recrawl tail`).
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// Bootstrap brokers, host:port[,host:port].
    // The text is also `--help`'s, where brackets are the usual mark of an optional part.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, env = "RECRAWL_BROKERS")]
    pub brokers: String,
    /// Prefix of every topic name.
    #[arg(long, env = "RECRAWL_TOPIC_PREFIX", default_value = recrawl_schemas::topics::DEFAULT_TOPIC_PREFIX)]
    pub topic_prefix: String,
    /// A librdkafka property passed to every client, key=value; repeatable
    /// (in the environment, separate several with ';'). TLS and SASL go here:
    /// security.protocol, ssl.*, sasl.*.
    #[arg(long = "kafka-option", env = "RECRAWL_KAFKA_OPTIONS", value_delimiter = ';', value_parser = parse_kafka_option)]
    pub kafka_options: Vec<(String, String)>,
    /// The largest Kafka record, bytes (key, value and headers): the producer's
    /// message.max.bytes and the consumer's per-partition fetch size. Topics must accept
    /// it (max.message.bytes in deploy/topics.toml); the fetch stage's --max-body-bytes
    /// must fit in it.
    #[arg(long, env = "RECRAWL_MAX_RECORD_BYTES", default_value_t = DEFAULT_MAX_RECORD_BYTES,
          value_parser = clap::value_parser!(u64).range(1 << 20..=256 << 20).map(|b| b as usize))]
    pub max_record_bytes: usize,
    /// How long the brokers must answer at start, milliseconds: an unreachable cluster is
    /// an error naming the brokers tried after this long.
    #[arg(long, env = "RECRAWL_STARTUP_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(1_000..=600_000))]
    pub startup_timeout_ms: u64,
}

/// Kafka connection and a stage loop's settings.
#[derive(Debug, Clone, Args)]
pub struct KafkaArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Consumer group (default: the topic prefix followed by the stage name, e.g.
    /// recrawl.diff, so pipelines under different prefixes never share a group).
    #[arg(long, env = "RECRAWL_GROUP_ID")]
    pub group_id: Option<String>,
    /// Static group membership (group.instance.id): an instance restarted under the same
    /// id gets its partitions back at once, without a rebalance. Unique per instance and
    /// stable across its restarts, e.g. the pod name; default: dynamic membership.
    #[arg(long, env = "RECRAWL_INSTANCE_ID")]
    pub instance_id: Option<String>,
    /// Producer compression.
    #[arg(long, env = "RECRAWL_COMPRESSION", value_enum, default_value = "lz4")]
    pub compression: Compression,
    /// Most input messages handled in one batch (outputs of a batch are acknowledged
    /// before its offsets are stored).
    #[arg(long, env = "RECRAWL_BATCH_SIZE", default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(1..=100_000).map(|n| n as usize))]
    pub batch_size: usize,
    /// How long a batch waits for more messages after the first, milliseconds.
    #[arg(long, env = "RECRAWL_BATCH_LINGER_MS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub batch_linger_ms: u64,
    /// On SIGTERM/SIGINT, how long the in-flight batch may take to finish before the
    /// stage commits what is done and exits, milliseconds.
    #[arg(long, env = "RECRAWL_DRAIN_TIMEOUT_MS", default_value_t = 8_000,
          value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub drain_timeout_ms: u64,
    /// After a state restore has read a changelog to its high watermark, keep reading
    /// until nothing new arrives for this long, milliseconds. Covers brokers that
    /// under-report the watermark (tansu 0.6 does after multi-record batches); 0 trusts
    /// the watermark.
    #[arg(long, env = "RECRAWL_RESTORE_SETTLE_MS", default_value_t = 250,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub restore_settle_ms: u64,
    /// Changelog readers of a state restore, each with its own consumer and share of the
    /// partitions being restored (never more readers than partitions): the per-record
    /// work of a restore (decoding, hashing, inserting) is what bounds it, not the broker.
    #[arg(long, env = "RECRAWL_RESTORE_READERS", default_value_t = 4,
          value_parser = clap::value_parser!(u64).range(1..=64).map(|n| n as usize))]
    pub restore_readers: usize,
    /// How long the stage rides out Kafka being unreachable or failing (retrying with
    /// back-off, /readyz 503) before /healthz turns 503 and it exits non-zero,
    /// milliseconds.
    #[arg(long, env = "RECRAWL_OUTAGE_TIMEOUT_MS", default_value_t = 600_000,
          value_parser = clap::value_parser!(u64).range(1_000..=MAX_OUTAGE_TIMEOUT_MS))]
    pub outage_timeout_ms: u64,
}

/// librdkafka's limit on max.poll.interval.ms, a day.
const MOST_POLL_INTERVAL_MS: u64 = 86_400_000;
/// How much longer than the outage timeout the consumer may go between polls by default:
/// a batch's own work (fetch's budget, a restore) on top of its retries.
const POLL_HEADROOM_MS: u64 = 300_000;
/// The longest outage a stage rides out: its poll interval must still fit in a day.
pub const MAX_OUTAGE_TIMEOUT_MS: u64 = MOST_POLL_INTERVAL_MS - POLL_HEADROOM_MS;

impl ClusterArgs {
    pub fn topics(&self) -> recrawl_schemas::TopicNames {
        recrawl_schemas::TopicNames::new(self.topic_prefix.clone())
    }

    /// Hands every passed-through property to librdkafka once, without creating a client,
    /// so a misspelled or invalid one fails here with a message of ours (librdkafka's own
    /// repeats the property and prints its value, which may be a password).
    pub fn check_kafka_options(&self) -> Result<(), ConfigError> {
        for (key, value) in &self.kafka_options {
            let mut config = rdkafka::ClientConfig::new();
            config.set(key, value);
            if let Err(error) = config.create_native_config() {
                let reason = match error {
                    rdkafka::error::KafkaError::ClientConfig(_, description, _, _) => {
                        description.replace(value.as_str(), "…")
                    }
                    other => other.to_string().replace(value.as_str(), "…"),
                };
                return Err(ConfigError::KafkaOption { key: key.clone(), value: value.clone(), reason });
            }
        }
        Ok(())
    }
}

impl KafkaArgs {
    /// `brokers`, `topic_prefix` and `kafka_options` with every other setting as its flag
    /// (or environment variable) gives it, for tools that start stages themselves.
    pub fn with_defaults(
        brokers: &str,
        topic_prefix: &str,
        kafka_options: Vec<(String, String)>,
    ) -> Result<Self, clap::Error> {
        use clap::FromArgMatches;
        let command = Self::augment_args(clap::Command::new("kafka"));
        let matches =
            command.try_get_matches_from(["kafka", "--brokers", brokers, "--topic-prefix", topic_prefix])?;
        let mut args = Self::from_arg_matches(&matches)?;
        args.cluster.kafka_options = kafka_options;
        Ok(args)
    }

    /// The consumer's max.poll.interval.ms: `--kafka-option`'s, else the outage timeout
    /// and `POLL_HEADROOM_MS`. The loop does not poll while it restores state and
    /// retries a batch's outputs, which together stop at the outage timeout after the last
    /// poll; past this interval librdkafka would leave the group meanwhile.
    pub fn max_poll_interval_ms(&self) -> Result<u64, ConfigError> {
        match self.cluster.kafka_options.iter().rev().find(|(k, _)| k == "max.poll.interval.ms") {
            Some((_, v)) => v.parse().map_err(|_| ConfigError::PollInterval(v.clone())),
            None => Ok(self.outage_timeout_ms.saturating_add(POLL_HEADROOM_MS).min(MOST_POLL_INTERVAL_MS)),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.batch_size == 0 {
            return Err(ConfigError::BatchSize);
        }
        if let Some(id) = &self.instance_id {
            let valid = (1..=200).contains(&id.len())
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !valid {
                return Err(ConfigError::InstanceId(id.clone()));
            }
        }
        let session_ms =
            match self.cluster.kafka_options.iter().rev().find(|(k, _)| k == "session.timeout.ms") {
                Some((_, v)) => v.parse().map_err(|_| ConfigError::SessionTimeout(v.clone()))?,
                None => DEFAULT_SESSION_TIMEOUT_MS,
            };
        if self.drain_timeout_ms >= session_ms {
            return Err(ConfigError::DrainTooLong { drain_ms: self.drain_timeout_ms, session_ms });
        }
        let poll_ms = self.max_poll_interval_ms()?;
        if self.outage_timeout_ms >= poll_ms {
            return Err(ConfigError::OutageOutlastsPoll { outage_ms: self.outage_timeout_ms, poll_ms });
        }
        self.cluster.check_kafka_options()
    }

    pub fn group_for(&self, stage: &str) -> String {
        self.group_id.clone().unwrap_or_else(|| format!("{}{stage}", self.cluster.topic_prefix))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

/// Process settings: the health/metrics server and logging.
#[derive(Debug, Clone, Args)]
pub struct ServiceArgs {
    /// Address of the /metrics, /healthz and /readyz server (port 0 picks a free one).
    #[arg(long, env = "RECRAWL_HTTP_LISTEN", default_value = "127.0.0.1:0")]
    pub http_listen: SocketAddr,
    /// Log format.
    #[arg(long, env = "RECRAWL_LOG_FORMAT", value_enum, default_value = "human")]
    pub log_format: LogFormat,
    /// Log filter, tracing-subscriber EnvFilter syntax.
    #[arg(long, env = "RECRAWL_LOG", default_value = "info")]
    pub log: String,
    /// Stop, as on SIGTERM, once the process PID is no longer this one's parent: a
    /// supervisor killed outright (SIGKILL, out of memory) leaves no stage behind. `recrawl
    /// demo` sets it for its stages.
    #[arg(long, env = "RECRAWL_PARENT_PID", value_name = "PID")]
    pub parent_pid: Option<u32>,
}

/// A stage's shared flags as a command line, for the crate's tests.
#[cfg(test)]
#[derive(Debug, clap::Parser)]
pub(crate) struct TestCli {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub service: ServiceArgs,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    type Cli = TestCli;

    fn parse(args: &[&str]) -> Result<Cli, String> {
        Cli::try_parse_from(std::iter::once("stage").chain(args.iter().copied())).map_err(|e| e.to_string())
    }

    #[test]
    fn parses_options_and_defaults() {
        let cli = parse(&[
            "--brokers",
            "b:9092",
            "--kafka-option",
            "security.protocol=SASL_SSL",
            "--kafka-option",
            "sasl.mechanism=PLAIN",
        ])
        .unwrap();
        assert_eq!(
            cli.kafka.cluster.kafka_options,
            vec![
                ("security.protocol".to_owned(), "SASL_SSL".to_owned()),
                ("sasl.mechanism".to_owned(), "PLAIN".to_owned()),
            ]
        );
        assert_eq!(cli.kafka.cluster.topic_prefix, "recrawl.");
        assert_eq!(cli.kafka.group_for("diff"), "recrawl.diff");
        assert_eq!(cli.kafka.compression, Compression::Lz4);
        assert!(cli.kafka.validate().is_ok());
    }

    #[test]
    fn rejects_bad_settings_naming_them() {
        let err = parse(&["--brokers", "b:1", "--kafka-option", "novalue"]).unwrap_err();
        assert!(err.contains("--kafka-option") && err.contains("novalue"), "{err}");
        let err = parse(&["--brokers", "b:1", "--kafka-option", "group.id=x"]).unwrap_err();
        assert!(err.contains("group.id") && err.contains("--group-id"), "{err}");
        let err = parse(&["--brokers", "b:1", "--compression", "brotli"]).unwrap_err();
        assert!(err.contains("--compression") && err.contains("brotli"), "{err}");
        let err = parse(&["--brokers", "b:1", "--surprise"]).unwrap_err();
        assert!(err.contains("--surprise"), "{err}");
        let err = parse(&["--brokers", "b:1", "--http-listen", "nowhere"]).unwrap_err();
        assert!(err.contains("--http-listen"), "{err}");
        let err = parse(&[]).unwrap_err();
        assert!(err.contains("--brokers"), "{err}");
    }

    /// The consumer may go without polling for the outage timeout while it retries
    /// outputs: its poll interval follows, and a passed-through one must exceed it.
    #[test]
    fn the_poll_interval_outlasts_the_outage_timeout() {
        let cli = parse(&["--brokers", "b:1"]).unwrap();
        assert_eq!(cli.kafka.max_poll_interval_ms(), Ok(900_000));
        let consumer = crate::kafka::consumer_config(&cli.kafka, "g");
        assert_eq!(consumer.get("max.poll.interval.ms"), Some("900000"));
        let most = format!("{MAX_OUTAGE_TIMEOUT_MS}");
        let cli = parse(&["--brokers", "b:1", "--outage-timeout-ms", &most]).unwrap();
        assert_eq!(cli.kafka.max_poll_interval_ms(), Ok(86_400_000), "librdkafka's limit");
        assert!(cli.kafka.validate().is_ok());
        assert!(parse(&["--brokers", "b:1", "--outage-timeout-ms", "86400000"]).is_err());
        let cli = parse(&["--brokers", "b:1", "--kafka-option", "max.poll.interval.ms=300000"]).unwrap();
        assert_eq!(
            cli.kafka.validate(),
            Err(ConfigError::OutageOutlastsPoll { outage_ms: 600_000, poll_ms: 300_000 })
        );
        let cli = parse(&["--brokers", "b:1", "--kafka-option", "max.poll.interval.ms=soon"]).unwrap();
        assert_eq!(cli.kafka.validate(), Err(ConfigError::PollInterval("soon".into())));
        let cli = parse(&[
            "--brokers",
            "b:1",
            "--kafka-option",
            "max.poll.interval.ms=300000",
            "--outage-timeout-ms",
            "240000",
        ])
        .unwrap();
        assert!(cli.kafka.validate().is_ok());
        assert_eq!(
            crate::kafka::consumer_config(&cli.kafka, "g").get("max.poll.interval.ms"),
            Some("300000")
        );
    }

    #[test]
    fn rejects_a_drain_longer_than_the_session() {
        let cli = parse(&[
            "--brokers",
            "b:1",
            "--kafka-option",
            "session.timeout.ms=6000",
            "--drain-timeout-ms",
            "7000",
        ])
        .unwrap();
        assert_eq!(cli.kafka.validate(), Err(ConfigError::DrainTooLong { drain_ms: 7000, session_ms: 6000 }));
        let cli = parse(&["--brokers", "b:1"]).unwrap();
        assert_eq!(cli.kafka.drain_timeout_ms, 8000);
        assert!(cli.kafka.validate().is_ok(), "the defaults fit the default session timeout");
        let cli = parse(&["--brokers", "b:1", "--instance-id", "pod/1"]).unwrap();
        assert_eq!(cli.kafka.validate(), Err(ConfigError::InstanceId("pod/1".into())));
    }

    #[test]
    fn absurd_values_fail_at_start_naming_the_flag() {
        for (flag, value) in [
            ("--batch-size", "0"),
            ("--max-record-bytes", "1000"),
            ("--max-record-bytes", "999999999999"),
            ("--outage-timeout-ms", "0"),
            ("--startup-timeout-ms", "100"),
            ("--drain-timeout-ms", "0"),
        ] {
            let err = parse(&["--brokers", "b:1", flag, value]).unwrap_err();
            assert!(err.contains(flag), "{flag} {value}: {err}");
        }
        for reserved in ["message.max.bytes=1", "group.instance.id=x", "allow.auto.create.topics=true"] {
            let err = parse(&["--brokers", "b:1", "--kafka-option", reserved]).unwrap_err();
            assert!(err.contains("--kafka-option"), "{reserved}: {err}");
        }
        let args = KafkaArgs::with_defaults("h:1", "p.", vec![("a".into(), "b".into())]).unwrap();
        assert_eq!((args.cluster.brokers.as_str(), args.cluster.topic_prefix.as_str()), ("h:1", "p."));
        assert_eq!(args.cluster.max_record_bytes, DEFAULT_MAX_RECORD_BYTES);
    }

    #[test]
    fn shares_and_weights_are_checked() {
        assert_eq!(super::unit_interval("0.25"), Ok(0.25));
        assert!(super::unit_interval("1.5").is_err());
        assert_eq!(super::non_negative("3"), Ok(3.0));
        for bad in ["-1", "inf", "NaN", "x"] {
            assert!(super::non_negative(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn secret_options_are_redacted_by_name_misspelled_or_not() {
        for key in [
            "sasl.password",
            "sasl.pasword",
            "ssl.key.password",
            "ssl.keystore.password",
            "ssl.key.pem",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.config",
            "sasl.jaas.config",
            "SSL.KEY.PASSWD",
        ] {
            assert_eq!(super::redact_option(key, "s3cret"), "***", "{key}");
        }
        for key in ["security.protocol", "sasl.username", "ssl.key.location", "compression.level"] {
            assert_eq!(super::redact_option(key, "v"), "v", "{key}");
        }
        assert_eq!(super::redact_option_text("sasl.password:s3cret"), "***");
        assert_eq!(super::redact_option_text("linger.ms"), "\"linger.ms\"");
        assert_eq!(super::redact_option_text("sasl.password=s3cret"), "sasl.password=***");
    }
}
