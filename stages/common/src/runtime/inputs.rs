//! The input topics' partition counts: at start and while running.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{Consumer, StreamConsumer};

use crate::admin::{self, AdminError};
use crate::config::KafkaArgs;
use crate::kafka::StageConsumerContext;

use super::errors::RuntimeError;

/// How long the inputs' partition counts may differ while running before the stage stops.
pub(super) const INPUTS_APART_GRACE: Duration = Duration::from_secs(60);

/// Partitions added to one input while running (start-up checks the counts) would leave
/// partition p of another input unread wherever that input has fewer. Once the counts
/// have differed for [`INPUTS_APART_GRACE`], time to grow every input, and the brokers'
/// metadata confirms it, the stage stops with the start-up check's error, which it then
/// gives at each start until they match. The changelog is checked at start only.
#[derive(Debug, Default)]
pub(super) struct InputsApart {
    since: Option<Instant>,
}

impl InputsApart {
    /// `counts`: the inputs' partition counts as the consumer knows them at `now`.
    pub(super) fn observe(
        &mut self,
        counts: &HashMap<String, i32>,
        inputs: &[String],
        now: Instant,
    ) -> Result<(), AdminError> {
        let apart = match admin::check_copartitioned(counts, inputs) {
            Err(error @ AdminError::NotCopartitioned { .. }) => error,
            // A topic without metadata yet is no evidence either way.
            Ok(()) | Err(_) => {
                self.since = None;
                return Ok(());
            }
        };
        let since = *self.since.get_or_insert_with(|| {
            tracing::warn!(%apart, grace = ?INPUTS_APART_GRACE, "input partition counts differ; stopping unless they match again");
            now
        });
        if now.saturating_duration_since(since) < INPUTS_APART_GRACE {
            return Ok(());
        }
        Err(apart)
    }
}

/// The partition count of each of `topics`, from the brokers' metadata, within the
/// start-up timeout; the request blocks, so it runs off the async threads.
pub(super) async fn partition_counts(
    consumer: &Arc<StreamConsumer<StageConsumerContext>>,
    args: &KafkaArgs,
    topics: Vec<String>,
) -> Result<HashMap<String, i32>, RuntimeError> {
    let consumer = consumer.clone();
    let brokers = args.cluster.brokers.clone();
    let timeout = Duration::from_millis(args.cluster.startup_timeout_ms);
    let asked = tokio::task::spawn_blocking(move || {
        admin::topic_partitions(consumer.client(), &brokers, &topics, timeout)
    });
    Ok(asked.await??)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs whose partition counts differ stop the stage only once they have differed
    /// for the grace; counts that match again, or a topic not known yet, reset it.
    #[test]
    fn inputs_apart_past_the_grace_stop_the_stage() {
        let inputs = ["estimates".to_owned(), "links".to_owned()];
        let counts = |links: Option<i32>| {
            let mut counts = HashMap::from([(inputs[0].clone(), 6)]);
            counts.extend(links.map(|n| (inputs[1].clone(), n)));
            counts
        };
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        let mut apart = InputsApart::default();
        assert!(apart.observe(&counts(Some(6)), &inputs, at(0)).is_ok());
        assert!(apart.observe(&counts(Some(8)), &inputs, at(1)).is_ok(), "the grace starts");
        assert!(apart.observe(&counts(Some(8)), &inputs, at(60)).is_ok());
        let error = apart.observe(&counts(Some(8)), &inputs, at(61)).expect_err("past the grace");
        assert!(error.to_string().contains("links has 8 partitions but estimates has 6"), "{error}");
        assert!(apart.observe(&counts(None), &inputs, at(62)).is_ok(), "links unknown: no evidence");
        assert!(apart.observe(&counts(Some(8)), &inputs, at(63)).is_ok(), "the grace starts again");
        assert!(apart.observe(&counts(Some(6)), &inputs, at(200)).is_ok(), "matching again");
        assert!(apart.observe(&counts(Some(8)), &inputs, at(201)).is_ok(), "and again");
        assert!(apart.observe(&counts(Some(8)), &inputs, at(262)).is_err());
    }
}
