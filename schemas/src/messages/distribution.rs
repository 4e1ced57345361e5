//! The per-group DR and MR distributions: topic `distributions`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bounds;
use crate::envelope::{decode_as, EnvelopeError, Format, Framed, Message};
use crate::time::UtcTime;
use crate::v1;
use crate::validation::ValidationError;

/// One estimator partition's share of a group's DR and MR distributions
/// (`docs/algorithms/estimator.md` §3). Topic `distributions` (JSON, compacted), keyed by
/// `group/partition`; a group's distribution is the sum of the latest record of every
/// partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GroupDistribution {
    /// The group.
    pub group: String,
    /// The change-events partition whose URLs these counts cover.
    pub partition: i32,
    /// The latest period applied to these URLs: the counts cover requests up to it.
    pub period: u64,
    /// The earliest first-request period among these URLs (the group's crawl count K
    /// runs from the minimum over partitions).
    pub first_period: u64,
    /// URLs of the group in the partition.
    pub urls: u64,
    /// Requests applied to them; grows with every applied request, so a reader keeps
    /// the record with the most.
    pub requests: u64,
    /// Eligible URLs per DR bin: {0}, 0.01–0.09, 0.10–0.19, …, 0.90–0.99, {1}.
    pub download_rate_bins: [u64; 12],
    /// Eligible URLs per MR bin, the same 12 bins.
    pub modification_rate_bins: [u64; 12],
    /// Eligible URLs per DR percentage point 0…100 (101 numbers).
    pub download_rate_fine: Vec<u64>,
    /// Eligible URLs per MR percentage point 0…100 (101 numbers).
    pub modification_rate_fine: Vec<u64>,
    /// When the record was produced.
    pub published_at: UtcTime,
    /// `published_at` in Unix milliseconds.
    pub published_at_ms: i64,
}

impl Message for GroupDistribution {
    const NAME: &'static str = "GroupDistribution";
    const FORMAT: Format = Format::Json;
    const VERSION: u16 = 2;

    /// Every instance sums these over partitions: bounded counts keep the sums in range.
    fn validate(&self) -> Result<(), ValidationError> {
        // A host or a site, as an estimate's group: every instance keeps each one it reads.
        bounds::text("group", &self.group, bounds::MAX_HOST_BYTES)?;
        bounds::partition(self.partition)?;
        bounds::period(self.period)?;
        // u64::MAX stands for "no URL yet".
        if self.urls > 0 {
            bounds::period(self.first_period)?;
        }
        bounds::tally("urls", self.urls)?;
        bounds::tally("requests", self.requests)?;
        for (name, bins) in [
            ("download_rate_bins", &self.download_rate_bins[..]),
            ("modification_rate_bins", &self.modification_rate_bins[..]),
            ("download_rate_fine", &self.download_rate_fine),
            ("modification_rate_fine", &self.modification_rate_fine),
        ] {
            bounds::count(name, bins.len(), FINE_RATE_BINS)?;
            bins.iter().try_for_each(|&count| bounds::tally(name, count))?;
        }
        bounds::instant("published_at", self.published_at, self.published_at_ms)
    }

    fn read_earlier(framed: &Framed<'_>, bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let v1::GroupDistribution {
            group,
            partition,
            period,
            first_period,
            urls,
            requests,
            download_rate_bins,
            modification_rate_bins,
            download_rate_fine,
            modification_rate_fine,
            published_at_ms,
        } = decode_as(framed, bytes)?;
        Ok(Self {
            group,
            partition,
            period,
            first_period,
            urls,
            requests,
            download_rate_bins,
            modification_rate_bins,
            download_rate_fine,
            modification_rate_fine,
            published_at: UtcTime::from_ms(published_at_ms),
            published_at_ms,
        })
    }
}

/// Percentage points 0…100 of the fine rate bins.
const FINE_RATE_BINS: usize = 101;
