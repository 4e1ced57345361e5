//! What a site's sitemaps and feeds claim of its pages' changes, judged against the
//! content, and the trust a site earns by them (`docs/algorithms/sitemaps.md`).
//!
//! A sitemap fetched at s that dates a page's latest change at L claims a change at L and
//! none in (L, s]. A truthful site's claims are complete observations (Kolobov et al.,
//! NeurIPS 2019): a changed page is known stale without fetching it, an unchanged one
//! known current as of s. Many are not: dates that never move, the time of the request,
//! or none. So a claim is judged against the comparison of two downloads, d1 < d2, both
//! ways:
//! - L clearly inside (d1, d2]: a change claimed there; the content changing confirms it,
//!   unless L is within the clocks' skew of s (the time of the request confirms nothing);
//!   the content not changing refutes it.
//! - L clearly before d1 and s ≥ d2: no change claimed over the interval; a change refutes
//!   it, none agrees.
//! - otherwise (L within the skew of a download, or of a download known only by its
//!   period, or a day-only date spanning one) the claim says nothing of the interval.
//!
//! A site's claims are believed only once several confirmed and nearly none were refuted
//! ([`ClaimTally`]), as its `Last-Modified` dates are ([`crate::modified`]).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

pub use recrawl_schemas::ClaimTrust;

use crate::modified::CLOCK_SKEW_MS;
use crate::rate::{RateEstimate, RateLikelihood, RatePrior};

/// A sitemap's or feed's claim: the page last changed at `changed_ms`, as the document
/// fetched at `seen_ms` said. Unix ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub changed_ms: i64,
    pub seen_ms: i64,
}

const DAY_MS: i64 = 86_400_000;

/// A time known to lie in `[earliest_ms, latest_ms]`: a download timed to the ms is one
/// instant, one known only by its period spans the period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub earliest_ms: i64,
    pub latest_ms: i64,
}

impl Span {
    pub fn at(ms: i64) -> Span {
        Span { earliest_ms: ms, latest_ms: ms }
    }
}

/// How far a local calendar date lies from the UTC day of the same name: the earliest
/// time zone is 12 hours behind UTC, the latest 14 ahead.
const ZONES_BEHIND_MS: i64 = 14 * 3_600_000;
const ZONES_AHEAD_MS: i64 = 12 * 3_600_000;

impl Claim {
    /// When the claimed change may have happened, up to the document's fetch. A date
    /// without a time of day (the W3C format allows `2024-05-01`) reads as midnight UTC;
    /// it names the site's local day, any time from 14 hours before that midnight to 36
    /// after.
    pub fn changed(self) -> Span {
        if self.changed_ms.rem_euclid(DAY_MS) != 0 {
            return Span::at(self.changed_ms);
        }
        let earliest_ms = self.changed_ms.saturating_sub(ZONES_BEHIND_MS);
        let latest_ms =
            self.changed_ms.saturating_add(DAY_MS + ZONES_AHEAD_MS - 1).min(self.seen_ms).max(earliest_ms);
        Span { earliest_ms, latest_ms }
    }

    /// Whether the change can have been seen: not dated after the document was fetched.
    pub fn is_possible(self) -> bool {
        self.changed().earliest_ms <= self.seen_ms.saturating_add(CLOCK_SKEW_MS)
    }

    /// Whether a comparison could confirm it: its change dated, clearly before the
    /// document was fetched (the time of the request confirms nothing).
    pub fn can_confirm(self) -> bool {
        self.changed().latest_ms < self.seen_ms.saturating_sub(CLOCK_SKEW_MS)
    }
}

/// Two downloads of a page, `from` before `to_ms`, and whether its content changed between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comparison {
    pub from: Span,
    pub to_ms: i64,
    pub changed: bool,
}

/// What a claim showed against a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// A claimed change the content confirmed.
    Confirmed,
    /// A claim of no change the content agreed with: consistent, but a date that never
    /// moves agrees as well, so it proves nothing.
    Agreed,
    /// The content contradicts the claim.
    Refuted,
    /// The claim says nothing of the interval.
    Silent,
}

/// Judges `claim` against `comparison` (the module's rules). A claimed change within the
/// clocks' skew of either download, or of a download known only by its period, says
/// nothing: which side of it the change fell is not known.
pub fn judge(claim: Claim, comparison: Comparison) -> Judgement {
    let Comparison { from, to_ms, changed } = comparison;
    let claimed = claim.changed();
    let skew = CLOCK_SKEW_MS;
    // A change dated after the document was fetched cannot have been seen.
    if !claim.is_possible() {
        return Judgement::Refuted;
    }
    let inside = claimed.earliest_ms > from.latest_ms.saturating_add(skew)
        && claimed.latest_ms < to_ms.saturating_sub(skew);
    if inside {
        return match (changed, claim.can_confirm()) {
            (false, _) => Judgement::Refuted,
            (true, true) => Judgement::Confirmed,
            (true, false) => Judgement::Silent,
        };
    }
    let before = claimed.latest_ms < from.earliest_ms.saturating_sub(skew);
    if before && claim.seen_ms >= to_ms {
        return if changed { Judgement::Refuted } else { Judgement::Agreed };
    }
    Judgement::Silent
}

/// A URL's latest claim and its latest comparison not yet judged: a claim is judged when
/// a download brackets it, or a comparison when a later document covers it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimEvidence {
    pub claim: Option<Claim>,
    pub pending: Option<Comparison>,
}

impl ClaimEvidence {
    /// Takes a claim; what judging it against the pending comparison showed, if anything.
    /// A claim from a document older than the one kept is ignored.
    pub fn observe_claim(&mut self, claim: Claim) -> Judgement {
        if self.claim.is_some_and(|kept| kept.seen_ms > claim.seen_ms) {
            return Judgement::Silent;
        }
        self.claim = Some(claim);
        self.judge_pending()
    }

    /// Takes a comparison; what judging the kept claim against it showed, if anything.
    /// A comparison that follows one not yet judged extends it (the content changed over
    /// the whole if in either part), so downloads closer together than the clocks' skew
    /// or a day-only date still add up to an interval a claim can be judged against.
    pub fn observe_comparison(&mut self, comparison: Comparison) -> Judgement {
        if comparison.to_ms <= comparison.from.latest_ms {
            return Judgement::Silent;
        }
        let merged = match self.pending {
            Some(pending) if pending.to_ms <= comparison.from.latest_ms => Comparison {
                from: pending.from,
                to_ms: comparison.to_ms,
                changed: pending.changed || comparison.changed,
            },
            _ => comparison,
        };
        self.pending = Some(merged);
        self.judge_pending()
    }

    /// Judges the pending comparison against the claim; a comparison is judged once.
    fn judge_pending(&mut self) -> Judgement {
        let (Some(claim), Some(comparison)) = (self.claim, self.pending) else { return Judgement::Silent };
        let judgement = judge(claim, comparison);
        if judgement != Judgement::Silent {
            self.pending = None;
        }
        judgement
    }
}

/// A URL's claims and the download they are judged from; on the scheduler's changelog with
/// the URL (`SchedulerState::claims`) and on the estimator's, so a restart judges a waiting
/// claim against the next comparison as it would have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlClaims {
    pub evidence: ClaimEvidence,
    /// When the latest download was made: to the ms once one was heard of since the
    /// entry began; before, as well as the stage knows it (the scheduler by its period).
    pub last_download: Option<Span>,
    /// The changes its host's claims dated, which the page's rate is taken from while the
    /// host is trusted; dropped when a claim finds the host distrusted. Last, so a record
    /// written before it was kept reads it as none (its varints zero-padded).
    pub claimed: ClaimedChanges,
}

impl UrlClaims {
    /// Claims of a URL last downloaded at `last_download`, none yet seen.
    pub fn new(last_download: Option<Span>) -> Self {
        Self { evidence: ClaimEvidence::default(), last_download, claimed: ClaimedChanges::default() }
    }

    /// Takes a download fetched at `fetched_at_ms`, `changed` as its comparison with the
    /// one before says (`None`: not compared): what judging the kept claim against that
    /// comparison showed, if anything. It is the next comparison's start.
    pub fn observe_download(&mut self, fetched_at_ms: i64, changed: Option<bool>) -> Judgement {
        let previous = self.last_download.replace(Span::at(fetched_at_ms));
        match (previous, changed) {
            (Some(from), Some(changed)) => {
                self.evidence.observe_comparison(Comparison { from, to_ms: fetched_at_ms, changed })
            }
            _ => Judgement::Silent,
        }
    }
}

/// What a document says of the pages it does not list; on the scheduler's changelog with
/// each URL it keeps as a sitemap (`Every`) or a feed (`Latest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Listing {
    /// A sitemap lists every page in its scope, so each read observes each page.
    Every,
    /// A feed lists only the pages changed latest: a page is seen only while it is among
    /// them, so which reads see it depends on its changes, and counting them would read
    /// its rate high.
    Latest,
}

/// A page's changes as its site's sitemap dated them: complete observations between the
/// reads (§4 of `sitemaps.md`). Each read whose date moved past the one before counts a
/// change at its date and quiet from there to the read (earlier changes may hide between
/// the reads); a read whose date held counts the time since the read before as quiet. The
/// likelihood is λ^changes · e^(−λ · quiet), as for proven `Last-Modified` dates, but
/// with a read every period or two instead of a download every twenty. All zero (the
/// default, and what a record written before it reads as) until a claim is counted; the
/// first counts a change, so none are counted while `changes` is 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimedChanges {
    pub changes: u32,
    /// Seconds (136 years fit), so a URL's claims stay small.
    pub quiet_s: u32,
    /// The latest claim counted.
    pub latest: Claim,
}

impl ClaimedChanges {
    /// Counts what `claim`, read from a sitemap, adds. Whether it added anything: not
    /// for a document older than the latest counted, a date in the future, a day-only
    /// date (changes within its day cannot be told from none), or a date that moved back.
    pub fn observe(&mut self, claim: Claim) -> bool {
        let instant = |claim: Claim| claim.is_possible() && claim.changed() == Span::at(claim.changed_ms);
        if !instant(claim) {
            return false;
        }
        let changed_ms = claim.changed_ms.min(claim.seen_ms);
        let quiet_since = |from_ms: i64| {
            u32::try_from(claim.seen_ms.saturating_sub(from_ms).max(0) / 1_000).unwrap_or(u32::MAX)
        };
        let previous = self.latest;
        let (changes, quiet_s) = if self.changes == 0 {
            (1, quiet_since(changed_ms))
        } else if previous.seen_ms >= claim.seen_ms {
            return false;
        } else if changed_ms > previous.changed_ms.saturating_add(CLOCK_SKEW_MS) {
            (1, quiet_since(changed_ms))
        } else if changed_ms >= previous.changed_ms.saturating_sub(CLOCK_SKEW_MS) {
            (0, quiet_since(previous.seen_ms))
        } else {
            return false;
        };
        self.changes = self.changes.saturating_add(changes);
        self.quiet_s = self.quiet_s.saturating_add(quiet_s);
        self.latest = Claim { changed_ms, seen_ms: claim.seen_ms };
        true
    }

    /// The page's change rate per period of `period_ms` from these observations alone:
    /// under a flat prior over the rate grid, since they are complete and soon many.
    /// `None` before any.
    pub fn rate(&self, period_ms: u64) -> Option<RateEstimate> {
        if period_ms == 0 || self.changes == 0 {
            return None;
        }
        static FLAT: OnceLock<RatePrior> = OnceLock::new();
        let quiet = f64::from(self.quiet_s) * 1_000.0 / period_ms as f64;
        Some(RateLikelihood::dated(self.changes, quiet).posterior(FLAT.get_or_init(RatePrior::default)))
    }
}

/// What a trusted claim says of a stored copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyNews {
    /// The page changed since the download: the copy is stale.
    Stale,
    /// Nothing changed from the download to the document's fetch, Unix ms: the copy was
    /// current then.
    CurrentAt(i64),
    /// The claim is older than the copy, or its change too near the download to say.
    Nothing,
}

impl Claim {
    /// What this claim, believed, says of a copy downloaded within `downloaded` (`None`:
    /// never stored).
    pub fn news(self, downloaded: Option<Span>) -> CopyNews {
        if !self.is_possible() {
            return CopyNews::Nothing;
        }
        let Some(downloaded) = downloaded else { return CopyNews::Stale };
        let claimed = self.changed();
        if claimed.earliest_ms > downloaded.latest_ms.saturating_add(CLOCK_SKEW_MS) {
            CopyNews::Stale
        } else if claimed.latest_ms < downloaded.earliest_ms.saturating_sub(CLOCK_SKEW_MS)
            && self.seen_ms > downloaded.latest_ms
        {
            CopyNews::CurrentAt(self.seen_ms)
        } else {
            CopyNews::Nothing
        }
    }
}

/// A site's judged claims: whether they are believed, refuted, or not yet known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimTally {
    pub confirmed: u32,
    pub agreed: u32,
    pub refuted: u32,
    /// Claims and comparisons that said nothing yet.
    pub silent: u32,
}

impl ClaimTally {
    /// Judgements tallied, silent ones included: a later share of the same tally has more.
    pub fn total(&self) -> u64 {
        [self.confirmed, self.agreed, self.refuted, self.silent].iter().map(|&count| u64::from(count)).sum()
    }

    /// Adds `other`'s judgements (a partition's share, restored).
    pub fn add(&mut self, other: &ClaimTally) {
        self.confirmed = self.confirmed.saturating_add(other.confirmed);
        self.agreed = self.agreed.saturating_add(other.agreed);
        self.refuted = self.refuted.saturating_add(other.refuted);
        self.silent = self.silent.saturating_add(other.silent);
    }

    /// Takes `other`'s judgements back out (a partition's share, revoked).
    pub fn remove(&mut self, other: &ClaimTally) {
        self.confirmed = self.confirmed.saturating_sub(other.confirmed);
        self.agreed = self.agreed.saturating_sub(other.agreed);
        self.refuted = self.refuted.saturating_sub(other.refuted);
        self.silent = self.silent.saturating_sub(other.silent);
    }

    /// Confirmed changes a site needs before its claims are believed.
    pub const LEAST_CONFIRMED: u32 = 3;
    /// Refutations that settle distrust, when they are more than a tenth of the judged.
    pub const LEAST_REFUTED: u32 = 2;

    pub fn record(&mut self, judgement: Judgement) {
        let count = match judgement {
            Judgement::Confirmed => &mut self.confirmed,
            Judgement::Agreed => &mut self.agreed,
            Judgement::Refuted => &mut self.refuted,
            Judgement::Silent => &mut self.silent,
        };
        *count = count.saturating_add(1);
    }

    /// Trusted once [`Self::LEAST_CONFIRMED`] changes were confirmed and at most a tenth
    /// of the claims that could have been refuted were; distrusted once more than a tenth
    /// were refuted (and at least [`Self::LEAST_REFUTED`]). Agreement counts in the
    /// share (a truthful site's quiet pages agree) but never earns trust alone.
    pub fn trust(&self) -> ClaimTrust {
        let judged = u64::from(self.confirmed)
            .saturating_add(u64::from(self.agreed))
            .saturating_add(u64::from(self.refuted));
        let refuted_share_high = u64::from(self.refuted).saturating_mul(10) > judged;
        if refuted_share_high && self.refuted >= Self::LEAST_REFUTED {
            ClaimTrust::Distrusted
        } else if !refuted_share_high && self.confirmed >= Self::LEAST_CONFIRMED {
            ClaimTrust::Trusted
        } else {
            ClaimTrust::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    fn claim(changed_hour: i64, seen_hour: i64) -> Claim {
        Claim { changed_ms: changed_hour * HOUR, seen_ms: seen_hour * HOUR }
    }

    fn comparison(from_hour: i64, to_hour: i64, changed: bool) -> Comparison {
        Comparison { from: Span::at(from_hour * HOUR), to_ms: to_hour * HOUR, changed }
    }

    /// A page changing every 4 hours (at half past), its sitemap read every hour (at a
    /// quarter to): each change counts once, with the time from it to the read; a read
    /// whose date held adds the hour since the read before. The time from a read to the
    /// next dated change is not quiet: earlier changes may hide there.
    #[test]
    fn claimed_changes_count_each_change_once_and_the_quiet_time_after_it() {
        let mut claimed = ClaimedChanges::default();
        assert_eq!(claimed.rate(HOUR as u64), None, "no claim, no rate");
        for hour in 1..=200 {
            let latest_change = (hour - hour % 4) * HOUR + HOUR / 2;
            let claim = Claim { changed_ms: latest_change, seen_ms: hour * HOUR + 3 * HOUR / 4 };
            assert!(claimed.observe(claim), "hour {hour}");
        }
        // The change at 0:30, then one at each of hours 4, 8, …, 200.
        assert_eq!(claimed.changes, 51);
        // 1:15 to the first read, 1 hour at each of the 149 reads whose date held, and a
        // quarter of an hour after each of the 50 later changes.
        assert_eq!(i64::from(claimed.quiet_s), (5 * HOUR / 4 + 149 * HOUR + 50 * HOUR / 4) / 1_000);
    }

    /// Claims of a Poisson page, read hourly: the rate they give is the page's.
    #[test]
    fn claimed_changes_of_a_poisson_page_give_its_rate() {
        let rate_per_hour = 0.25;
        // xorshift64*: uniform draws without a dependency.
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut uniform = || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1_u64 << 53) as f64
        };
        let (mut claimed, mut latest_change) = (ClaimedChanges::default(), 0.5);
        let mut next_change = latest_change;
        for hour in 1..=2_000 {
            let seen = f64::from(hour) + 0.75;
            while next_change <= seen {
                latest_change = next_change;
                next_change += -(1.0 - uniform()).ln() / rate_per_hour;
            }
            let claim = Claim {
                changed_ms: (latest_change * HOUR as f64) as i64 + 1,
                seen_ms: (seen * HOUR as f64) as i64,
            };
            claimed.observe(claim);
        }
        // The likelihood's peak, changes over quiet hours, is the page's rate.
        let peak = f64::from(claimed.changes) * 3_600.0 / f64::from(claimed.quiet_s);
        assert!((peak / rate_per_hour - 1.0).abs() < 0.05, "{claimed:?}: {peak}");
        for period_hours in [1, 2] {
            let rate = claimed.rate(period_hours * HOUR as u64).expect("a rate");
            let truth = rate_per_hour * period_hours as f64;
            assert!(rate.low < truth && truth < rate.high, "{rate:?} against {truth}");
        }
    }

    #[test]
    fn claimed_changes_skip_an_older_document_a_future_a_day_only_or_a_receding_date() {
        let mut claimed = ClaimedChanges::default();
        assert!(claimed.observe(claim(2, 5)));
        let before = claimed;
        let skipped = [claim(3, 4), claim(9, 6), Claim { changed_ms: 0, seen_ms: 6 * HOUR }, claim(1, 6)];
        for next in skipped {
            assert!(!claimed.observe(next), "{next:?}");
        }
        assert_eq!(claimed, before);
        // A date that held: the hour since the read before was quiet.
        assert!(claimed.observe(claim(2, 6)));
        assert_eq!((claimed.changes, claimed.quiet_s), (1, 4 * 3_600));
    }

    #[test]
    fn a_claimed_change_between_two_downloads_is_confirmed_or_refuted_by_the_content() {
        assert_eq!(judge(claim(5, 8), comparison(2, 10, true)), Judgement::Confirmed);
        assert_eq!(judge(claim(5, 8), comparison(2, 10, false)), Judgement::Refuted);
    }

    #[test]
    fn the_time_of_the_request_confirms_nothing_but_is_refuted_by_a_quiet_page() {
        assert_eq!(judge(claim(8, 8), comparison(2, 10, true)), Judgement::Silent);
        assert_eq!(judge(claim(8, 8), comparison(2, 10, false)), Judgement::Refuted);
    }

    #[test]
    fn a_date_that_never_moves_is_refuted_by_a_change_it_covers_and_only_agrees_otherwise() {
        assert_eq!(judge(claim(-1000, 12), comparison(2, 10, true)), Judgement::Refuted);
        assert_eq!(judge(claim(-1000, 12), comparison(2, 10, false)), Judgement::Agreed);
        // A document fetched before the second download cannot cover the interval.
        assert_eq!(judge(claim(-1000, 9), comparison(2, 10, true)), Judgement::Silent);
    }

    #[test]
    fn a_change_dated_after_the_document_was_fetched_is_refuted() {
        assert_eq!(judge(claim(20, 8), comparison(2, 10, true)), Judgement::Refuted);
    }

    #[test]
    fn evidence_judges_a_comparison_once_whichever_arrives_first() {
        let mut evidence = ClaimEvidence::default();
        assert_eq!(evidence.observe_comparison(comparison(2, 10, false)), Judgement::Silent);
        // A document before the second download says nothing of it yet …
        assert_eq!(evidence.observe_claim(claim(-5, 9)), Judgement::Silent);
        // … a later one does, and the comparison is spent.
        assert_eq!(evidence.observe_claim(claim(-5, 11)), Judgement::Agreed);
        assert_eq!(evidence.observe_claim(claim(-5, 12)), Judgement::Silent);
        assert_eq!(evidence.observe_comparison(comparison(10, 12, true)), Judgement::Refuted);
        // An older document is ignored.
        assert_eq!(evidence.observe_claim(claim(15, 11)), Judgement::Silent);
        assert_eq!(evidence.claim, Some(claim(-5, 12)));
    }

    #[test]
    fn a_believed_claim_says_whether_the_copy_is_stale_or_current() {
        let at = |hour: i64| Some(Span::at(hour * HOUR));
        assert_eq!(claim(5, 8).news(at(4)), CopyNews::Stale);
        assert_eq!(claim(3, 8).news(at(4)), CopyNews::CurrentAt(8 * HOUR));
        assert_eq!(claim(3, 4).news(at(6)), CopyNews::Nothing);
        assert_eq!(claim(3, 4).news(None), CopyNews::Stale);
        // A change within the clocks' skew of the download: either side of it.
        let near = Claim { changed_ms: 4 * HOUR - 30_000, seen_ms: 8 * HOUR };
        assert_eq!(near.news(at(4)), CopyNews::Nothing);
        // A download known only by its period (hours 4 to 5): a change in it says nothing.
        let period = Some(Span { earliest_ms: 4 * HOUR, latest_ms: 5 * HOUR - 1 });
        assert_eq!(
            Claim { changed_ms: 4 * HOUR + HOUR / 2, seen_ms: 8 * HOUR }.news(period),
            CopyNews::Nothing
        );
        assert_eq!(claim(6, 8).news(period), CopyNews::Stale);
    }

    #[test]
    fn a_change_near_a_download_or_within_its_period_says_nothing_of_the_interval() {
        // Changed 20 s after a download timed only by its period (hours 2 to 3), at 2:00:20;
        // downloaded again, unchanged since, at 10.
        let within = Span { earliest_ms: 2 * HOUR, latest_ms: 3 * HOUR - 1 };
        let claim = Claim { changed_ms: 2 * HOUR + 20_000, seen_ms: 9 * HOUR };
        assert_eq!(
            judge(claim, Comparison { from: within, to_ms: 10 * HOUR, changed: false }),
            Judgement::Silent
        );
        // Within the skew of an exact download: the same.
        let claim = Claim { changed_ms: 2 * HOUR - 20_000, seen_ms: 9 * HOUR };
        assert_eq!(judge(claim, comparison(2, 10, true)), Judgement::Silent);
    }

    #[test]
    fn a_date_without_a_time_of_day_is_any_time_that_local_day() {
        let day = 24 * HOUR;
        // "2024-05-01" (midnight UTC), read two days after: 14 hours before to 36 after.
        let claim = Claim { changed_ms: 100 * day, seen_ms: 102 * day };
        assert_eq!(
            claim.changed(),
            Span { earliest_ms: 100 * day - 14 * HOUR, latest_ms: 101 * day + 12 * HOUR - 1 }
        );
        // Downloads at 10:00 UTC that day and the next: the change may be either side.
        let first = 100 * day + 10 * HOUR;
        let compared = |changed| Comparison { from: Span::at(first), to_ms: 101 * day + 10 * HOUR, changed };
        assert_eq!(judge(claim, compared(true)), Judgement::Silent);
        assert_eq!(judge(claim, compared(false)), Judgement::Silent);
        assert_eq!(claim.news(Some(Span::at(first))), CopyNews::Nothing);
        // A site ten hours ahead of UTC dates a change at 05:00 local "May 1", read at
        // 20:00 UTC on April 30: possible, not refuted.
        let ahead = Claim { changed_ms: 100 * day, seen_ms: 100 * day - 4 * HOUR };
        assert!(ahead.is_possible());
        assert!(!ahead.can_confirm());
        // Downloads two days either side judge it.
        let wide = |changed| Comparison { from: Span::at(98 * day), to_ms: 103 * day, changed };
        assert_eq!(judge(claim, wide(true)), Judgement::Confirmed);
    }

    #[test]
    fn a_change_dated_after_the_read_says_nothing_of_the_copy() {
        let future = Claim { changed_ms: 20 * HOUR + 1, seen_ms: 8 * HOUR };
        assert!(!future.is_possible());
        assert_eq!(future.news(Some(Span::at(4 * HOUR))), CopyNews::Nothing);
    }

    #[test]
    fn comparisons_too_close_to_judge_add_up_until_one_can_be() {
        let mut evidence = ClaimEvidence::default();
        // Changed at 2:01:30; downloads every 40 seconds from 1:59:50, each too close to
        // the change for the skew of a minute, until together they bracket it.
        evidence.observe_claim(Claim { changed_ms: 2 * HOUR + 90_000, seen_ms: 3 * HOUR });
        let seconds = |s: i64| 2 * HOUR + s * 1000;
        let step = |from: i64, to: i64, changed| Comparison {
            from: Span::at(seconds(from)),
            to_ms: seconds(to),
            changed,
        };
        for (from, to, changed) in [(-10, 30, false), (30, 70, false), (70, 110, true), (110, 150, false)] {
            assert_eq!(evidence.observe_comparison(step(from, to, changed)), Judgement::Silent, "to {to}");
        }
        assert_eq!(evidence.observe_comparison(step(150, 190, false)), Judgement::Confirmed);
        assert_eq!(evidence.pending, None);
    }

    #[test]
    fn trust_takes_confirmed_changes_and_few_refutations() {
        let tally = |confirmed, agreed, refuted| ClaimTally { confirmed, agreed, refuted, silent: 0 }.trust();
        assert_eq!(tally(0, 0, 0), ClaimTrust::Unknown);
        assert_eq!(tally(0, 500, 0), ClaimTrust::Unknown, "agreement alone earns nothing");
        assert_eq!(tally(3, 20, 1), ClaimTrust::Trusted);
        // One refutation of four judged: a quarter, but one may be a clock's error.
        assert_eq!(tally(3, 0, 1), ClaimTrust::Unknown);
        assert_eq!(tally(0, 0, 2), ClaimTrust::Distrusted);
        assert_eq!(tally(30, 50, 9), ClaimTrust::Distrusted);
    }
}
