//! Whether a host's sitemaps and feeds prove true: topic `host-trust`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bounds;
use crate::envelope::{Format, Message};
use crate::time::UtcTime;
use crate::validation::ValidationError;

/// A host's standing as its claims were judged (`docs/algorithms/sitemaps.md` §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClaimTrust {
    /// Too few claims judged to say: they are judged, not taken.
    Unknown,
    /// The claims are taken as complete observations of the host's pages' changes.
    Trusted,
    /// The claims are ignored: more than a tenth of those judged were false.
    Distrusted,
}

impl ClaimTrust {
    pub const ALL: [Self; 3] = [Self::Unknown, Self::Trusted, Self::Distrusted];

    /// The name the records and metrics carry.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Trusted => "trusted",
            Self::Distrusted => "distrusted",
        }
    }
}

/// One scheduler partition's judgement of a host's sitemap and feed claims against the
/// comparisons of its pages' downloads. Topic `host-trust` (JSON, compacted), keyed by
/// `host/partition`; the host's judgement over the whole pipeline is the sum of the counts
/// of the latest record of every partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostTrust {
    /// The host whose claims were judged.
    pub host: String,
    /// The estimates partition whose URLs' claims these counts cover.
    pub partition: i32,
    /// The period in which the record was published.
    pub period: u64,
    /// Claimed changes a comparison of two downloads confirmed.
    pub confirmed: u64,
    /// Claims of no change over an interval whose downloads did not differ.
    pub agreed: u64,
    /// Claims a comparison refuted: a change claimed where the content held, or none
    /// claimed where it changed.
    pub refuted: u64,
    /// Claims and comparisons that said nothing of each other: a date within the clocks'
    /// skew of a download, or known only to the day.
    pub silent: u64,
    /// The standing the scheduler instance owning `partition` holds for the host, from
    /// the counts of every partition it owns: what its picks act on. Counts summed over
    /// all partitions give the pipeline's standing by the same rule: trusted from 3
    /// confirmed with at most a tenth of `confirmed + agreed + refuted` refuted;
    /// distrusted from 2 refuted that are more than a tenth.
    pub trust: ClaimTrust,
    /// When the record was produced.
    pub published_at: UtcTime,
    /// `published_at` in Unix milliseconds.
    pub published_at_ms: i64,
}

impl Message for HostTrust {
    const NAME: &'static str = "HostTrust";
    const FORMAT: Format = Format::Json;
    const VERSION: u16 = 1;

    fn validate(&self) -> Result<(), ValidationError> {
        // A record's host names the tally its readers sum: an empty one names none.
        if self.host.is_empty() {
            return Err(ValidationError::Empty { field: "host".to_owned() });
        }
        bounds::text("host", &self.host, bounds::MAX_HOST_BYTES)?;
        bounds::partition(self.partition)?;
        bounds::period(self.period)?;
        for (name, count) in [
            ("confirmed", self.confirmed),
            ("agreed", self.agreed),
            ("refuted", self.refuted),
            ("silent", self.silent),
        ] {
            bounds::tally(name, count)?;
        }
        bounds::instant("published_at", self.published_at, self.published_at_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::samples;

    #[test]
    fn a_host_s_trust_is_checked_for_what_readers_rely_on() {
        assert_eq!(samples::host_trust().validate(), Ok(()));
        let no_host = HostTrust { host: String::new(), ..samples::host_trust() };
        assert!(matches!(no_host.validate(), Err(ValidationError::Empty { .. })));
        let long_host = HostTrust { host: "a".repeat(256), ..samples::host_trust() };
        assert!(matches!(long_host.validate(), Err(ValidationError::TooLong { .. })));
        let negative = HostTrust { partition: -1, ..samples::host_trust() };
        assert!(matches!(negative.validate(), Err(ValidationError::Partition { .. })));
        let skewed = HostTrust { published_at_ms: 1, ..samples::host_trust() };
        assert!(matches!(skewed.validate(), Err(ValidationError::Instant { .. })));
        let huge = HostTrust { refuted: u64::MAX, ..samples::host_trust() };
        assert!(huge.validate().is_err());
        for trust in ClaimTrust::ALL {
            let written = serde_json::to_value(trust).unwrap();
            assert_eq!(written.as_str(), Some(trust.as_str()));
        }
    }
}
