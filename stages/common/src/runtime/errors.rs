//! What goes wrong: the errors that stop a stage, and the kinds the metrics count.

use std::time::Duration;

use rdkafka::error::KafkaError;
use recrawl_schemas::envelope::{EnvelopeError, SCHEMA_VERSION_HEADER};
use recrawl_schemas::topics::DEAD_LETTER_KINDS;
use thiserror::Error;

use crate::admin::AdminError;
use crate::config::ConfigError;

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("creating the Kafka {client}: {source}")]
    Client { client: &'static str, source: KafkaError },
    #[error(transparent)]
    Topics(#[from] AdminError),
    #[error("subscribing to {topics:?}: {source}")]
    Subscribe { topics: Vec<String>, source: KafkaError },
    #[error("Kafka unusable for {waited:?} (--outage-timeout-ms) while {doing}: {last_error}")]
    Outage { doing: String, waited: Duration, last_error: String },
    #[error("restoring partition {partition} of {topic}: {reason}")]
    Restore { topic: String, partition: i32, reason: String },
    #[error("reading {topic}: {reason}")]
    Tail { topic: String, reason: String },
    #[error("the in-flight batch did not finish within --drain-timeout-ms ({0:?}); it will be replayed")]
    DrainTimeout(Duration),
    #[error("shutting down: {0}")]
    Close(String),
    #[error("stage: {0}")]
    Stage(#[from] StageError),
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error("a blocking Kafka call panicked: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// An error a stage cannot turn into a dead letter. The loop stops without storing the
/// batch's offsets.
#[derive(Debug, Error)]
pub enum StageError {
    #[error("encoding an output: {0}")]
    Encode(#[from] EnvelopeError),
    /// Outputs that leave Kafka (the archive's files) could not be made durable in time.
    #[error("{0}")]
    Durability(String),
}

/// Why a stage could not start, before it reads a record.
#[derive(Debug, Error)]
pub enum SetupError {
    #[error("registering the {stage} stage's metrics: {source}")]
    Metrics { stage: &'static str, source: prometheus::Error },
    /// A setting, or a file one names, unusable; the error names it.
    #[error(transparent)]
    Settings(Box<dyn std::error::Error + Send + Sync>),
}

impl SetupError {
    pub fn settings(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        SetupError::Settings(Box::new(source))
    }
}

/// Why a record went to the dead-letter topic; its name is the `recrawl-dlq-kind` header
/// and the `kind` label of `recrawl_dead_letters_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadLetterKind {
    Undecodable,
    SchemaVersion,
    KeyMismatch,
    Invalid,
    Unproducible,
}

impl DeadLetterKind {
    pub const ALL: [Self; 5] =
        [Self::Undecodable, Self::SchemaVersion, Self::KeyMismatch, Self::Invalid, Self::Unproducible];

    pub fn as_str(self) -> &'static str {
        DEAD_LETTER_KINDS[self as usize]
    }

    pub(super) fn of_decode_error(error: &EnvelopeError) -> Self {
        match error {
            EnvelopeError::UnknownVersion { .. } => Self::SchemaVersion,
            EnvelopeError::HeaderMismatch { header, .. } if *header == SCHEMA_VERSION_HEADER => {
                Self::SchemaVersion
            }
            _ => Self::Undecodable,
        }
    }
}

/// The kinds of `recrawl_errors_total`, all exported from the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The consumer reported an error (broker unreachable, a partition's leader moving).
    Consume,
    /// A delivery failed and will be retried.
    Produce,
    /// The producer hit a fatal error (fenced, unknown producer id) and was re-created.
    ProducerRecreated,
    /// The broker refused a dead letter; it was logged and skipped.
    DeadLetterRefused,
    /// A changelog restore failed and will be retried.
    Restore,
    /// A changelog record this build cannot read, or whose values are out of range, was
    /// skipped.
    RestoreDecode,
    /// Offsets could not be stored (the partition was revoked meanwhile).
    StoreOffsets,
    /// The assignment could not be read.
    Assignment,
}

impl ErrorKind {
    pub const ALL: [Self; 8] = [
        Self::Consume,
        Self::Produce,
        Self::ProducerRecreated,
        Self::DeadLetterRefused,
        Self::Restore,
        Self::RestoreDecode,
        Self::StoreOffsets,
        Self::Assignment,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Consume => "consume",
            Self::Produce => "produce",
            Self::ProducerRecreated => "producer_recreated",
            Self::DeadLetterRefused => "dead_letter_refused",
            Self::Restore => "restore",
            Self::RestoreDecode => "restore_decode",
            Self::StoreOffsets => "store_offsets",
            Self::Assignment => "assignment",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_letter_kinds_are_the_catalogue_s() {
        let names: Vec<&str> = DeadLetterKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, DEAD_LETTER_KINDS);
    }
}
