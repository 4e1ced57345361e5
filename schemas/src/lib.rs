//! recrawl's wire contract: one type per Kafka message, the envelope every payload
//! travels in, the URL key used for joins, and the topic catalogue (`deploy/topics.toml`)
//! from which the AsyncAPI document and JSON Schemas are generated.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects))]

pub mod catalogue;
pub mod envelope;
pub mod frequency;
pub mod messages;
pub mod time;
pub mod topics;
pub mod url_key;
mod v1;
pub mod validation;

pub use envelope::{decode, encode, EnvelopeError, Format, Message, SCHEMA_VERSION};
pub use frequency::{FrequencyGroup, UnknownFrequencyGroup};
pub use messages::*;
pub use time::{UtcTime, UtcTimeError};
pub use topics::{Topic, TopicCatalogue, TopicError, TopicNames, TopicSpec};
pub use url_key::{host_of, normalise_url, site_of, url_key, UrlError};
pub use validation::ValidationError;
