//! Topic administration: applying the catalogue (`recrawl topics create`, the demo) and
//! checking at stage start that the topics a stage uses exist and are co-partitioned.

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{Client, ClientContext, DefaultClientContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use recrawl_schemas::{TopicCatalogue, TopicNames};
use thiserror::Error;

use crate::config::ClusterArgs;
use crate::kafka::base_config;

#[derive(Debug, Error)]
pub enum AdminError {
    #[error("creating the Kafka admin client: {0}")]
    Client(KafkaError),
    #[error("cannot reach the Kafka brokers {brokers} within {waited:?} ({source}): check --brokers, the network and any TLS/SASL --kafka-option")]
    Unreachable { brokers: String, waited: Duration, source: KafkaError },
    #[error("a blocking Kafka call panicked: {0}")]
    Join(#[from] tokio::task::JoinError),
    #[error("creating topics: {0}")]
    Request(KafkaError),
    #[error("creating topic {topic}: {code}")]
    Topic { topic: String, code: RDKafkaErrorCode },
    #[error("reading metadata of topic {topic}: {source}")]
    Metadata { topic: String, source: KafkaError },
    #[error("topic {0} does not exist: create the topics with `recrawl topics create --brokers …` (deploy/topics.toml)")]
    Missing(String),
    #[error("topic {topic} has {found} partitions but {other} has {expected}: a stage handles partition p of each input and of its changelog together, so they must match")]
    NotCopartitioned { topic: String, found: i32, other: String, expected: i32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicOutcome {
    Created,
    AlreadyExists,
}

/// Creates every topic of `catalogue` under the prefix of `args`; existing topics are
/// reported, not changed.
pub async fn create_topics(
    args: &ClusterArgs,
    catalogue: &TopicCatalogue,
    replication_factor: Option<i32>,
) -> Result<Vec<(String, TopicOutcome)>, AdminError> {
    let admin: AdminClient<DefaultClientContext> =
        base_config(args, &[]).create().map_err(AdminError::Client)?;
    let waited = Duration::from_millis(args.startup_timeout_ms);
    let brokers = args.brokers.clone();
    let admin = tokio::task::spawn_blocking(move || {
        admin.inner().fetch_metadata(None, waited).map(|_| admin).map_err(|source| AdminError::Unreachable {
            brokers,
            waited,
            source,
        })
    })
    .await??;
    let names = args.topics();
    let replication = replication_factor.unwrap_or(catalogue.replication_factor);
    let full_names: Vec<String> = catalogue.topics.iter().map(|t| names.name(&t.name)).collect();
    let max_message_bytes = catalogue.max_message_bytes.to_string();
    let retention: Vec<Option<String>> =
        catalogue.topics.iter().map(|t| t.retention_ms.map(|r| r.to_string())).collect();
    let new_topics: Vec<NewTopic<'_>> = catalogue
        .topics
        .iter()
        .zip(&full_names)
        .zip(&retention)
        .map(|((spec, name), retention)| {
            let topic = NewTopic::new(name, spec.partitions, TopicReplication::Fixed(replication))
                .set("cleanup.policy", spec.cleanup_policy.as_str())
                .set("max.message.bytes", &max_message_bytes);
            match retention {
                Some(ms) => topic.set("retention.ms", ms),
                None => topic,
            }
        })
        .collect();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = admin.create_topics(&new_topics, &options).await.map_err(AdminError::Request)?;
    results
        .into_iter()
        .map(|result| match result {
            Ok(name) => Ok((name, TopicOutcome::Created)),
            Err((name, RDKafkaErrorCode::TopicAlreadyExists)) => Ok((name, TopicOutcome::AlreadyExists)),
            Err((topic, code)) => Err(AdminError::Topic { topic, code }),
        })
        .collect()
}

/// Partition counts of `topics` from one metadata request to `brokers` (the client's
/// bootstrap list, for the error); an unreachable cluster and a missing topic are errors
/// naming them. Blocking, at most `timeout`.
pub fn topic_partitions<C: ClientContext>(
    client: &Client<C>,
    brokers: &str,
    topics: &[String],
    timeout: Duration,
) -> Result<HashMap<String, i32>, AdminError> {
    let metadata = client.fetch_metadata(None, timeout).map_err(|source| match source {
        KafkaError::MetadataFetch(RDKafkaErrorCode::OperationTimedOut | RDKafkaErrorCode::AllBrokersDown)
        | KafkaError::MetadataFetch(RDKafkaErrorCode::BrokerTransportFailure) => {
            AdminError::Unreachable { brokers: brokers.to_owned(), waited: timeout, source }
        }
        source => AdminError::Metadata { topic: topics.join(", "), source },
    })?;
    let mut counts = HashMap::new();
    for topic in topics {
        let found = metadata.topics().iter().find(|t| t.name() == topic);
        match found {
            Some(t) if t.error().is_none() && !t.partitions().is_empty() => {
                counts.insert(topic.clone(), t.partitions().len() as i32);
            }
            _ => return Err(AdminError::Missing(topic.clone())),
        }
    }
    Ok(counts)
}

/// Checks that every topic of `group` has the partition count of the first.
pub fn check_copartitioned(counts: &HashMap<String, i32>, group: &[String]) -> Result<(), AdminError> {
    let Some((first, rest)) = group.split_first() else { return Ok(()) };
    let expected = counts.get(first).copied().ok_or_else(|| AdminError::Missing(first.clone()))?;
    for topic in rest {
        let found = counts.get(topic).copied().ok_or_else(|| AdminError::Missing(topic.clone()))?;
        if found != expected {
            return Err(AdminError::NotCopartitioned {
                topic: topic.clone(),
                found,
                other: first.clone(),
                expected,
            });
        }
    }
    Ok(())
}

/// Every full topic name of the catalogue under `names`' prefix.
pub fn catalogue_topic_names(catalogue: &TopicCatalogue, names: &TopicNames) -> Vec<String> {
    catalogue.topics.iter().map(|t| names.name(&t.name)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copartitioning_check_names_both_topics() {
        let counts = HashMap::from([("a".to_owned(), 6), ("b".to_owned(), 6), ("c".to_owned(), 3)]);
        assert!(check_copartitioned(&counts, &["a".into(), "b".into()]).is_ok());
        let err = check_copartitioned(&counts, &["a".into(), "c".into()]).unwrap_err().to_string();
        assert!(err.contains("topic c has 3") && err.contains("a has 6"), "{err}");
        let err = check_copartitioned(&counts, &["a".into(), "zz".into()]).unwrap_err().to_string();
        assert!(err.contains("zz does not exist"), "{err}");
    }
}
