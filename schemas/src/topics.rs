//! The topic catalogue, `deploy/topics.toml`: names, partitions, cleanup policies, keys
//! and payloads. `recrawl topics create` applies it; the AsyncAPI document is generated
//! from it; stages check at start that the topics they use are co-partitioned as it says.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use thiserror::Error;

use crate::envelope::{EnvelopeError, Message};
use crate::messages::{
    ChangeEvent, DiscoveredLinks, FetchResult, GroupDistribution, HostTrust, PageAnnouncement, PageEstimate,
    PagePick,
};

/// The catalogue shipped with this build.
pub const BUILTIN_TOPICS_TOML: &str = include_str!("../../deploy/topics.toml");
pub const DEFAULT_TOPIC_PREFIX: &str = "recrawl.";

/// A topic that carries one message type: its name without prefix, and the key its
/// records have (co-partitioned joins and compaction rely on it), so emitters and decoders
/// cannot pair a topic with the wrong type or key.
pub struct Topic<M> {
    pub name: &'static str,
    key: fn(&M) -> Cow<'_, str>,
}

impl<M> Topic<M> {
    const fn new(name: &'static str, key: fn(&M) -> Cow<'_, str>) -> Self {
        Self { name, key }
    }

    /// The Kafka key of `message` on this topic.
    pub fn key<'m>(&self, message: &'m M) -> Cow<'m, str> {
        (self.key)(message)
    }

    /// A payload of this topic, decoded as its message type.
    pub fn decode(&self, payload: &[u8]) -> Result<M, EnvelopeError>
    where
        M: Message,
    {
        crate::envelope::decode(payload)
    }
}

// Not derived: a derive would require `M: Clone`.
impl<M> Clone for Topic<M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for Topic<M> {}

impl<M> std::fmt::Debug for Topic<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Topic").field(&self.name).finish()
    }
}

/// Picks, keyed by host: one fetch instance owns a host, so politeness holds across instances.
pub const FETCH: Topic<PagePick> = Topic::new("fetch", |pick| Cow::Borrowed(&pick.host));
pub const FETCH_RESULTS: Topic<FetchResult> =
    Topic::new("fetch-results", |result| Cow::Borrowed(&result.url));
pub const LINKS: Topic<DiscoveredLinks> = Topic::new("links", |links| Cow::Borrowed(&links.page.url));
/// Pages announced in sitemaps and feeds, keyed as links are, for the same scheduler instance.
pub const ANNOUNCEMENTS: Topic<PageAnnouncement> =
    Topic::new("announcements", |announcement| Cow::Borrowed(&announcement.page.url));
pub const CHANGE_EVENTS: Topic<ChangeEvent> =
    Topic::new("change-events", |event| Cow::Borrowed(&event.page.url));
pub const ESTIMATES: Topic<PageEstimate> =
    Topic::new("estimates", |estimate| Cow::Borrowed(&estimate.page.url));
/// Each instance's share of a group, keyed so compaction keeps the latest per partition.
pub const DISTRIBUTIONS: Topic<GroupDistribution> =
    Topic::new("distributions", |share| Cow::Owned(format!("{}/{}", share.group, share.partition)));
/// Each scheduler partition's judgement of a host's claims, keyed so compaction keeps the
/// latest per partition.
pub const HOST_TRUST: Topic<HostTrust> =
    Topic::new("host-trust", |trust| Cow::Owned(format!("{}/{}", trust.host, trust.partition)));
/// Rejected records of any topic, as they were: not a message type of its own.
pub const DEAD_LETTER: &str = "dead-letter";

/// Why a record was dead-lettered, as the `recrawl-dlq-kind` header and the
/// `recrawl_dead_letters_total{kind}` label say: it did not decode; it is of a schema
/// version this build does not read; its key is not the one its payload names; it
/// decoded but failed a check; or the broker refused an output it caused.
pub const DEAD_LETTER_KINDS: [&str; 5] =
    ["undecodable", "schema_version", "key_mismatch", "invalid", "unproducible"];

/// The Kafka headers of a dead letter: why and where the record was rejected.
pub mod dead_letter_headers {
    /// Why the stage rejected the record, in words.
    pub const REASON: &str = "recrawl-dlq-reason";
    /// The kind of reason, one of the stages' `DeadLetterKind`s (a bounded set).
    pub const KIND: &str = "recrawl-dlq-kind";
    /// The stage that rejected it.
    pub const STAGE: &str = "recrawl-dlq-stage";
    /// The topic the record belongs on: read from (an input) or meant for (an output).
    pub const TOPIC: &str = "recrawl-dlq-topic";
    /// Partition and offset it was read from (inputs only).
    pub const PARTITION: &str = "recrawl-dlq-partition";
    pub const OFFSET: &str = "recrawl-dlq-offset";
    /// Size of the original value in bytes; when it exceeds what a dead letter carries,
    /// only its first bytes are kept and [`TRUNCATED`] is "true".
    pub const ORIGINAL_BYTES: &str = "recrawl-dlq-original-bytes";
    pub const TRUNCATED: &str = "recrawl-dlq-truncated";
}

#[derive(Debug, Error)]
pub enum TopicError {
    #[error("topic catalogue does not parse: {0}")]
    Parse(#[from] toml::de::Error),
    #[error("topic catalogue: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CleanupPolicy {
    Delete,
    Compact,
}

impl CleanupPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Compact => "compact",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicSpec {
    /// Name without the prefix.
    pub name: String,
    pub description: String,
    pub partitions: i32,
    pub cleanup_policy: CleanupPolicy,
    pub retention_ms: Option<i64>,
    /// What the Kafka key holds.
    pub key: String,
    /// The payload type name ([`Message::NAME`]) or `raw`.
    pub payload: String,
    pub producers: Vec<String>,
    pub consumers: Vec<String>,
    /// A topic whose partition count this one must equal.
    pub copartitioned_with: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicCatalogue {
    pub replication_factor: i32,
    /// Every topic's `max.message.bytes`: the stages' default `--max-record-bytes`.
    pub max_message_bytes: usize,
    #[serde(rename = "topic")]
    pub topics: Vec<TopicSpec>,
}

impl TopicCatalogue {
    pub fn parse(text: &str) -> Result<Self, TopicError> {
        let catalogue: Self = toml::from_str(text)?;
        catalogue.validate()?;
        Ok(catalogue)
    }

    // The text is compiled in, not read from anywhere, and a unit test parses it: this
    // cannot fail in a tested build.
    #[allow(clippy::expect_used)]
    pub fn builtin() -> Self {
        Self::parse(BUILTIN_TOPICS_TOML).expect("deploy/topics.toml is valid")
    }

    pub fn get(&self, name: &str) -> Option<&TopicSpec> {
        self.topics.iter().find(|t| t.name == name)
    }

    fn validate(&self) -> Result<(), TopicError> {
        let invalid = |msg: String| Err(TopicError::Invalid(msg));
        if self.replication_factor < 1 {
            return invalid(format!("replication_factor {} must be at least 1", self.replication_factor));
        }
        if self.max_message_bytes < 1 << 20 {
            return invalid(format!("max_message_bytes {} must be at least 1 MiB", self.max_message_bytes));
        }
        let mut by_name = HashMap::new();
        for topic in &self.topics {
            if by_name.insert(topic.name.as_str(), topic).is_some() {
                return invalid(format!("topic {:?} is defined twice", topic.name));
            }
            if topic.partitions < 1 {
                return invalid(format!(
                    "topic {:?}: partitions {} must be at least 1",
                    topic.name, topic.partitions
                ));
            }
        }
        for topic in &self.topics {
            if let Some(other) = &topic.copartitioned_with {
                let Some(other_topic) = by_name.get(other.as_str()) else {
                    return invalid(format!(
                        "topic {:?} is co-partitioned with unknown topic {other:?}",
                        topic.name
                    ));
                };
                if other_topic.partitions != topic.partitions {
                    return invalid(format!(
                        "topic {:?} has {} partitions but must match {other:?} ({})",
                        topic.name, topic.partitions, other_topic.partitions
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Full topic names under a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicNames {
    prefix: String,
}

impl TopicNames {
    pub fn new(prefix: impl Into<String>) -> Self {
        Self { prefix: prefix.into() }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn name(&self, short: &str) -> String {
        format!("{}{short}", self.prefix)
    }

    /// The changelog topic of a stage.
    pub fn state(&self, stage: &str) -> String {
        self.name(&format!("state.{stage}"))
    }
}

impl Default for TopicNames {
    fn default() -> Self {
        Self::new(DEFAULT_TOPIC_PREFIX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalogue_is_valid_and_complete() {
        let catalogue = TopicCatalogue::parse(BUILTIN_TOPICS_TOML).unwrap();
        let names = [
            FETCH.name,
            FETCH_RESULTS.name,
            LINKS.name,
            ANNOUNCEMENTS.name,
            CHANGE_EVENTS.name,
            ESTIMATES.name,
        ];
        for name in names.into_iter().chain([DISTRIBUTIONS.name, HOST_TRUST.name, DEAD_LETTER]) {
            assert!(catalogue.get(name).is_some(), "{name} missing");
        }
        for stage in ["diff", "estimator", "scheduler"] {
            let state = catalogue.get(&format!("state.{stage}")).unwrap();
            assert_eq!(state.cleanup_policy, CleanupPolicy::Compact);
            assert!(state.copartitioned_with.is_some());
        }
    }

    #[test]
    fn rejects_mismatched_copartitioning_and_unknown_fields() {
        let text = BUILTIN_TOPICS_TOML.replacen(
            "partitions = 6\ncleanup_policy = \"compact\"",
            "partitions = 3\ncleanup_policy = \"compact\"",
            1,
        );
        let err = TopicCatalogue::parse(&text).unwrap_err().to_string();
        assert!(err.contains("state.diff") && err.contains("must match"), "{err}");
        let text = format!("{BUILTIN_TOPICS_TOML}\nsurprise = 1\n");
        assert!(TopicCatalogue::parse(&text).is_err());
        let text = BUILTIN_TOPICS_TOML.replacen("partitions = 6", "partitions = 0", 1);
        assert!(TopicCatalogue::parse(&text).unwrap_err().to_string().contains("at least 1"));
    }

    #[test]
    fn names_carry_the_prefix() {
        let names = TopicNames::new("prod.recrawl.");
        assert_eq!(names.name(FETCH.name), "prod.recrawl.fetch");
        assert_eq!(names.state("diff"), "prod.recrawl.state.diff");
        assert_eq!(TopicNames::default().name(CHANGE_EVENTS.name), "recrawl.change-events");
    }
}
