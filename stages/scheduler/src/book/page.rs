//! A URL's scheduling state, [`Page`]: what the plan reads of it, in 48 bytes, and the
//! bits of its flags byte.

use recrawl_model::rate::{central_rate, middle_half_low};

use super::{known, NONE};
use crate::coarse::{CoarseF32, Probability};
use crate::groups::CrawlSchedule;

/// Per-URL scheduling state: 48 bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Page {
    pub host: u32,
    pub discovered: u32,
    /// Period of the latest estimate applied; [`NONE`] while the URL is in the frontier.
    pub last_estimate: u32,
    pub last_download: u32,
    pub last_pick: u32,
    /// p_j: bytes of the latest download, in two bytes ([`Page::size_bytes`]): a cost
    /// is not known to 0.2 %.
    pub size: CoarseF32,
    /// Kept only to seed the host's response time when the partition is restored.
    pub latency_ms: CoarseF32,
    /// The estimator's probability of a change at the next comparison.
    pub p_change: Probability,
    /// The estimator's probability that the next request downloads.
    pub p_download: Probability,
    /// The estimator's Poisson change rate per period, in two bytes as the rates below;
    /// none before any comparison (nor for a rate of 0, which the policies read as none).
    pub change_rate: CoarseF32,
    /// The centre of the rate's credible interval on the log scale ([`central_rate`]) and
    /// the low end of its middle half ([`middle_half_low`]; the high end follows from both,
    /// [`middle_half`](recrawl_model::rate::middle_half)), where the freshness index looks,
    /// in two bytes each so that a page stays within 48.
    pub central_change_rate: CoarseF32,
    pub middle_half_low_rate: CoarseF32,
    /// Nutch's adaptive fetch interval, periods ([`Page::nutch_interval`]), in two bytes.
    pub interval: CoarseF32,
    /// Distinct pages linking here while in the frontier, at most
    /// [`MAX_IN_LINKS`](super::MAX_IN_LINKS).
    pub in_degree: u16,
    /// Head of the URL's in-link fingerprint chain, [`NONE`] when empty.
    pub(super) in_links: u32,
    pub depth: u16,
    /// [`DIRTY`], [`ANNOUNCED`], [`CHANGE_CLAIMED`], [`CLAIM_TO_TEST`], [`MOVED`] and the
    /// picks in a row no estimate answered ([`UNANSWERED_PICKS`]), in one byte so that a
    /// page stays within 48.
    pub(super) flags: u8,
    pub schedule: Option<CrawlSchedule>,
}

/// Changed since its record was last written.
pub(super) const DIRTY: u8 = 1;
/// A sitemap or feed of its site names it: in the frontier, ranked after seeds and before
/// URLs only linked to.
pub(super) const ANNOUNCED: u8 = 2;
/// A trusted sitemap or feed dated a change after its latest download: its copy is known
/// stale (`recrawl_model::claims`). Cleared by the next download.
pub(super) const CHANGE_CLAIMED: u8 = 4;
/// A host whose claims are not yet judged dated a change after its latest download: a
/// fetch would confirm or refute the claim. Cleared by the next download.
pub(super) const CLAIM_TO_TEST: u8 = 8;
/// Its latest request was answered by a permanent redirect (301, 308), which the fetcher
/// does not follow: the page now lives at the redirect's target, which the fetch stage
/// published as a link. Never picked again; a link to it finds it tracked, so it does not
/// come back as new. Cleared by an estimate of any other answer.
pub(super) const MOVED: u8 = 0x80;
/// The picks in a row that no estimate answered, in these bits: a pick robots.txt denied
/// or the fetcher deferred makes no request, so the estimator answers nothing; each such
/// pick doubles the wait before the next ([`Page::is_pending`]), up to
/// [`MOST_UNANSWERED_PICKS`] doublings. Not persisted: a restored partition starts over at
/// the pending periods.
const UNANSWERED_PICKS: u8 = 0x70;
const UNANSWERED_SHIFT: u32 = 4;
/// The scheduler cannot tell a denied pick from one deferred while its host paused or
/// fetch lagged, so the wait stops doubling at 32 times the pending periods (64 periods
/// at the default, as a host's longest back-off).
const MOST_UNANSWERED_PICKS: u8 = 5;

impl Page {
    /// Whether a sitemap or feed of its site named it while it was in the frontier.
    pub fn is_announced(&self) -> bool {
        self.flags & ANNOUNCED != 0
    }

    /// Whether its latest request found it moved for good (a permanent redirect).
    pub fn is_moved(&self) -> bool {
        self.flags & MOVED != 0
    }

    pub(super) fn set_moved(&mut self, moved: bool) {
        self.flags = if moved { self.flags | MOVED } else { self.flags & !MOVED };
    }

    pub(super) fn is_dirty(&self) -> bool {
        self.flags & DIRTY != 0
    }

    pub(super) fn set_dirty(&mut self, dirty: bool) {
        self.flags = if dirty { self.flags | DIRTY } else { self.flags & !DIRTY };
    }

    pub fn is_frontier(&self) -> bool {
        self.last_estimate == NONE
    }

    /// Dropped from the frontier ([`Book::forget`](super::Book::forget)): its slot waits for compaction.
    /// `discovered` is never [`NONE`] otherwise (periods saturate below it).
    pub fn is_gone(&self) -> bool {
        self.discovered == NONE
    }

    /// Picked and not yet answered by an estimate, within `pending_periods` after the
    /// pick's period (picking it again would fetch it twice), or twice as long for each
    /// pick before it that went unanswered (a URL robots.txt denies is not picked every
    /// few periods for ever). No pending periods, no wait.
    pub fn is_pending(&self, clock: u64, pending_periods: u32) -> bool {
        let wait = u64::from(pending_periods) << self.unanswered_picks();
        self.is_awaiting_estimate() && clock <= u64::from(self.last_pick).saturating_add(wait)
    }

    /// Picked, and no estimate has come since.
    pub(super) fn is_awaiting_estimate(&self) -> bool {
        self.last_pick != NONE && (self.last_estimate == NONE || self.last_estimate < self.last_pick)
    }

    /// The picks before the latest one that no estimate answered, in a row.
    pub fn unanswered_picks(&self) -> u8 {
        (self.flags & UNANSWERED_PICKS) >> UNANSWERED_SHIFT
    }

    pub(super) fn set_unanswered_picks(&mut self, picks: u8) {
        let picks = picks.min(MOST_UNANSWERED_PICKS);
        self.flags = (self.flags & !UNANSWERED_PICKS) | (picks << UNANSWERED_SHIFT);
    }

    /// The latest period the page was downloaded or picked.
    pub fn last_visit(&self) -> Option<u64> {
        match (known(self.last_download), known(self.last_pick)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn last_download(&self) -> Option<u64> {
        known(self.last_download)
    }

    pub fn estimated_change_rate(&self) -> Option<f64> {
        self.change_rate.get()
    }

    /// Bytes of the latest download; 0 before any.
    pub fn size_bytes(&self) -> f64 {
        self.size.get().unwrap_or(0.0)
    }

    /// Keeps what the freshness index reads of the rate's credible interval: its centre and
    /// the low end of its middle half.
    pub(super) fn keep_rate_interval(&mut self, interval: Option<(f64, f64)>) {
        self.central_change_rate = CoarseF32::new(interval.and_then(|(low, high)| central_rate(low, high)));
        self.middle_half_low_rate =
            CoarseF32::new(interval.and_then(|(low, high)| middle_half_low(low, high)));
    }

    /// Nutch's adaptive fetch interval in periods. One past what two bytes hold (an
    /// infinite one a record may carry) reads as infinite, never due, as it was written;
    /// the book keeps none below its positive least interval.
    pub fn nutch_interval(&self) -> f64 {
        self.interval.get().unwrap_or(f64::INFINITY)
    }

    /// The rate the freshness index scores the page at: the central rate, else the mean.
    pub fn freshness_rate(&self) -> Option<f64> {
        self.central_change_rate.get().or_else(|| self.estimated_change_rate())
    }
}
