//! Links found on fetched pages: topic `links`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bounds;
use super::page::PageRef;
use crate::envelope::{decode_as, EnvelopeError, Format, Framed, Message};
use crate::v1;
use crate::validation::ValidationError;

/// A link found on a fetched page. Topic `links`, keyed by the linked URL so that the
/// scheduler instance owning that URL counts its in-degree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiscoveredLinks {
    /// The linked page (its URL normalised, fragment dropped).
    pub page: PageRef,
    /// The page the link was found on; null for a seed URL.
    pub source: Option<PageRef>,
    /// How many times the source page links to `page`.
    pub occurrences: u32,
    /// The period in which the source page was fetched (or the seed was loaded).
    pub period: u64,
    /// Links followed from a seed to reach `page`: the source's depth + 1, 0 for a seed.
    pub depth: u32,
}

impl Message for DiscoveredLinks {
    const NAME: &'static str = "DiscoveredLinks";
    const FORMAT: Format = Format::Json;
    const VERSION: u16 = 2;

    fn validate(&self) -> Result<(), ValidationError> {
        self.page.validate("page")?;
        self.source.as_ref().map_or(Ok(()), |source| source.validate("source"))?;
        bounds::period(self.period)
    }

    fn read_earlier(framed: &Framed<'_>, bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let v1::DiscoveredLinks { url, url_key, host, source_url, source_key, occurrences, period, depth } =
            decode_as(framed, bytes)?;
        let source = source_url
            .map(|url| {
                let key = source_key.unwrap_or_else(|| crate::url_key(&url));
                let host = crate::host_of(&url).map_err(|e| EnvelopeError::Payload {
                    name: Self::NAME,
                    reason: format!("source_url: {e}"),
                })?;
                Ok(PageRef::from_v1(url, key, host))
            })
            .transpose()?;
        Ok(Self { page: PageRef::from_v1(url, url_key, host), source, occurrences, period, depth })
    }
}
