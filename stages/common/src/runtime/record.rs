//! The records a stage reads and writes.

use rdkafka::message::{BorrowedMessage, Headers, Message as _};
use recrawl_schemas::envelope::{
    check_kafka_headers, EnvelopeError, CONTENT_TYPE_HEADER, SCHEMA_VERSION_HEADER,
};
use recrawl_schemas::topics::Topic;
use recrawl_schemas::{decode, Message, ValidationError};
use thiserror::Error;

use super::errors::DeadLetterKind;

/// Why a record is not a message a stage takes: the reason its dead letter carries, and
/// of the dead letter's [kind](RecordError::kind).
#[derive(Debug, Error)]
pub enum RecordError {
    #[error("the message has no payload")]
    NoPayload,
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    /// Decoded, but out of the message's bounds.
    #[error("{name}: {source}")]
    Invalid { name: &'static str, source: ValidationError },
}

impl RecordError {
    pub fn kind(&self) -> DeadLetterKind {
        match self {
            Self::NoPayload => DeadLetterKind::Undecodable,
            Self::Envelope(error) => DeadLetterKind::of_decode_error(error),
            Self::Invalid { .. } => DeadLetterKind::Invalid,
        }
    }
}

/// An input message, owned so stages can hold it across awaits.
#[derive(Debug, Clone)]
pub struct InputRecord {
    /// The input it was read from, as the stage names it: without the topic prefix.
    pub input: &'static str,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub content_type: Option<Vec<u8>>,
    pub schema_version: Option<Vec<u8>>,
}

impl InputRecord {
    pub(crate) fn from_message(message: &BorrowedMessage<'_>, input: &'static str) -> Self {
        let mut content_type = None;
        let mut schema_version = None;
        if let Some(headers) = message.headers() {
            for header in headers.iter() {
                match header.key {
                    CONTENT_TYPE_HEADER => content_type = header.value.map(<[u8]>::to_vec),
                    SCHEMA_VERSION_HEADER => schema_version = header.value.map(<[u8]>::to_vec),
                    _ => {}
                }
            }
        }
        Self {
            input,
            topic: message.topic().to_owned(),
            partition: message.partition(),
            offset: message.offset(),
            key: message.key().map(<[u8]>::to_vec),
            payload: message.payload().map(<[u8]>::to_vec),
            content_type,
            schema_version,
        }
    }

    /// Decodes the payload as `topic`'s message, checking the Kafka headers against what
    /// the payload says of itself; the error is the reason recorded with the dead letter.
    pub fn decode<M: Message>(&self, _topic: Topic<M>) -> Result<M, RecordError> {
        let payload = match self.payload.as_deref() {
            Some(payload) if !payload.is_empty() => payload,
            _ => return Err(RecordError::NoPayload),
        };
        check_kafka_headers(payload, self.content_type.as_deref(), self.schema_version.as_deref())?;
        let message: M = decode(payload)?;
        message.validate().map_err(|source| RecordError::Invalid { name: M::NAME, source })?;
        Ok(message)
    }

    pub fn key_str(&self) -> Option<&str> {
        self.key.as_deref().and_then(|k| std::str::from_utf8(k).ok())
    }

    pub(super) fn payload_len(&self) -> usize {
        self.payload.as_ref().map_or(0, Vec::len)
    }
}

/// A message to produce.
#[derive(Debug, Clone)]
pub struct OutputRecord {
    pub topic: String,
    pub key: Vec<u8>,
    /// `None` is a tombstone (changelog deletes).
    pub payload: Option<Vec<u8>>,
    pub headers: Vec<(&'static str, Vec<u8>)>,
    /// Set for changelog records (partition p of the input); `None` lets the
    /// partitioner hash the key.
    pub partition: Option<i32>,
    /// For a dead letter: its kind and the topic it belongs on.
    pub(super) dead_letter: Option<(DeadLetterKind, String)>,
}

impl OutputRecord {
    pub(super) fn size(&self) -> usize {
        let headers = self
            .headers
            .iter()
            .fold(0usize, |sum, (name, value)| sum.saturating_add(name.len()).saturating_add(value.len()));
        self.key.len().saturating_add(self.payload.as_ref().map_or(0, Vec::len)).saturating_add(headers)
    }
}

#[cfg(test)]
impl InputRecord {
    /// A record of the fetch topic holding `payload`, for the runtime's tests.
    pub(super) fn sample(payload: Option<Vec<u8>>) -> Self {
        Self {
            input: "fetch",
            topic: "p.fetch".into(),
            partition: 2,
            offset: 41,
            key: Some(b"host.example".to_vec()),
            payload,
            content_type: None,
            schema_version: None,
        }
    }
}
