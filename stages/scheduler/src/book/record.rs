//! A URL's record on the scheduler's changelog (`state.scheduler`): what a restore reads
//! back into the book, and what it checks first.

use recrawl_model::claims::{ClaimTally, Listing};
use recrawl_model::day::DayProfile;
use recrawl_schemas::envelope::{decode_as, EnvelopeError, Framed};
use recrawl_schemas::{bounds, Format, Message, ValidationError};
use serde::{Deserialize, Serialize};

use super::UrlClaims;
use crate::groups::CrawlSchedule;

/// In-links remembered per frontier URL; beyond this its in-degree saturates.
pub const MAX_IN_LINKS: u32 = 1024;

/// The changelog record of one URL (`state.scheduler`, keyed by URL). The host is the
/// URL's; the slot orders the partition's URLs by discovery when they are restored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchedulerState {
    pub slot: u32,
    pub discovered: u32,
    pub depth: u16,
    pub last_estimate: Option<u32>,
    pub last_download: Option<u32>,
    pub last_pick: Option<u32>,
    pub size: u32,
    pub latency_ms: f32,
    pub p_change: f32,
    pub p_download: f32,
    pub change_rate: Option<f32>,
    pub interval: f32,
    pub schedule: Option<CrawlSchedule>,
    /// Fingerprints of the pages linking here, while in the frontier.
    pub in_links: Vec<u32>,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub central_change_rate: Option<f32>,
    pub middle_half_low_rate: Option<f32>,
    /// What this partition's URLs have taught of their host's day, as it stood when the
    /// record was written; the partition's latest is the one with the most observations.
    pub host_day: Option<DayProfile>,
    /// Whether a sitemap or feed named the URL while it was in the frontier; null before
    /// version 5 and for a tracked URL.
    pub announced: Option<bool>,
    /// Whether its latest request found it moved for good (a permanent redirect); null
    /// before version 6 and for a URL that did not move.
    pub moved: Option<bool>,
    /// This partition's tally of its host's claims, as it stood when the record was
    /// written; the partition's latest is the one with the most judgements. Null before
    /// version 7, for a frontier URL and for a host with none.
    pub host_claims: Option<ClaimTally>,
    /// Whether a trusted claim has marked the copy stale since its latest download; null
    /// before version 8 and when none has.
    pub change_claimed: Option<bool>,
    /// The URL's latest dated claim, the comparison waiting to judge one, and the download
    /// they are judged from; null before version 8 and for a URL no dated claim named.
    /// Boxed (the same bytes on the wire): few URLs have one, and a restore holds every
    /// record of its partitions decoded at once.
    pub claims: Option<Box<UrlClaims>>,
    /// What the URL lists if a robots.txt, a sitemap index or a page named it as a sitemap
    /// (`Every`) or a feed (`Latest`), which are read again by their own rule
    /// (`crate::documents`); null before version 10 and for any other URL.
    pub document: Option<Listing>,
}

impl Message for SchedulerState {
    const NAME: &'static str = "SchedulerState";
    const FORMAT: Format = Format::Bincode;
    /// 2: `central_change_rate`. 3: `middle_half_low_rate`. 4: `host_day`. 5: `announced`.
    /// 6: `moved`. 7: `host_claims`. 8: `change_claimed` and `claims`. 9: `claims.claimed`,
    /// the last field of the last. 10: `document`.
    const VERSION: u16 = 10;
    const ADDED_TRAILING_OPTIONS: usize = 10;

    /// What the book keeps raw: a probability or rate out of range would score NaN and
    /// outrank every page. The coarse fields (latency, central and low rates) read
    /// anything out of range as absent, and an unsound `host_day` is skipped on its own.
    fn validate(&self) -> Result<(), ValidationError> {
        bounds::probability("p_change", f64::from(self.p_change))?;
        bounds::probability("p_download", f64::from(self.p_download))?;
        // A finite rate or interval past f32's range is stored as infinity, which the
        // scores take as no estimate and as never due.
        let at_least_zero = |name: &str, value: f32| {
            if value >= 0.0 {
                Ok(())
            } else {
                Err(ValidationError::Negative { field: name.to_owned(), value })
            }
        };
        if let Some(rate) = self.change_rate {
            at_least_zero("change_rate", rate)?;
        }
        at_least_zero("interval", self.interval)?;
        bounds::count("in_links", self.in_links.len(), MAX_IN_LINKS as usize)?;
        bounds::header("etag", self.etag.as_deref())?;
        bounds::header("last_modified", self.last_modified.as_deref())
    }

    /// Version 1 reads with no central rate: the freshness index scores the page at its
    /// mean rate until its next estimate; versions 1 and 2 with no middle half: at its
    /// central rate alone; versions 1 to 3 with no host day: the host's day is learned
    /// again.
    fn read_earlier(framed: &Framed<'_>, bytes: &[u8]) -> Result<Self, EnvelopeError> {
        decode_as(framed, bytes)
    }
}
