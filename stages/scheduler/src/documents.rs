//! When a site's sitemap or feed is read again (`docs/algorithms/sitemaps.md` §5): the
//! rule the stage's plan and the simulator both follow. A host whose claims are not yet
//! judged every [`PROBE_EVERY`] periods, so that claims meet comparisons; a trusted host
//! once the changes its reads announce, at their running rate, times the budget's share
//! R, come to [`POLL_WORTH`] since the document's last read ([`FEED_POLL_WORTH`] for a
//! feed): the more of them a period can refresh, the sooner they are worth knowing.
//! Nothing governs a document of a host found out, or whose documents date nothing or
//! only the time of the request: it is a page like any other.

use recrawl_model::claims::{Claim, ClaimTrust, Listing};
use recrawl_model::modified::CLOCK_SKEW_MS;

/// Periods between reads of a document whose host's claims are not yet judged.
pub const PROBE_EVERY: u64 = 4;
/// The changes a trusted host's sitemap is expected to announce since its last read,
/// times the budget's share R, that are worth reading it again (tuned at R = 0.02, 0.05
/// and 0.2: `docs/algorithms/sitemaps.md` §5). A sitemap's read also counts towards the
/// rate of every page it lists, so it is worth more than a feed's.
pub const POLL_WORTH: f64 = 0.3;
/// [`POLL_WORTH`] for a feed.
pub const FEED_POLL_WORTH: f64 = 0.5;
/// Periods a trusted host's document waits at most, however few changes it announced: a
/// quiet spell measures a rate of none, which would otherwise never call for a read.
pub const MOST_PERIODS_UNREAD: u64 = 32;
/// Reads of a host's documents that may show no dated entry before the rule leaves them
/// to their pages' model.
pub const READS_TO_A_DATE: u8 = 3;
/// Weight of the latest read in a host's running rate of announced changes.
const RATE_WEIGHT: f64 = 0.3;

/// What a host's sitemaps and feeds announced, as far as the entries this instance holds
/// show: counted as their announcements arrive, folded into the host's running rate at
/// the next read of one of its documents ([`Announced::read`]), since the entries of a
/// read arrive after it. A host's documents are counted together but read on their own
/// schedules, so whether they have anything to teach is judged on all their entries so
/// far, not on one read's: an undated sitemap beside a dated feed, in either order, does
/// not turn the rule off for both.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Announced {
    /// Since the latest read: entries dating a change after their URL's read before,
    /// dated entries, undated ones, and dated ones within the clocks' skew of the read.
    changes: u32,
    dated: u32,
    undated: u32,
    at_the_read: u32,
    /// Before the latest read: dated entries, those dated at the read, and the reads
    /// whose entries included dated ones.
    dated_before: u32,
    at_the_read_before: u32,
    dated_reads: u8,
    /// Reads before any entry was dated (a document that names no page, or not one, as an
    /// HTML page at `/sitemap.xml`, is not read for ever).
    reads_before_a_date: u8,
    /// Whether a read's entries were all undated.
    undated_read: bool,
    /// Changes announced per period, running; `None` before a trusted read measured it.
    rate: Option<f32>,
    /// The period of the latest read, and the periods from the read before to it, which
    /// the changes counted since were announced over; in 32 bits, as the book's.
    last_read: Option<u32>,
    interval: Option<u32>,
}

/// Share of a host's dated entries dated at the read past which, over two reads or more
/// while its claims are not judged, it has nothing to teach: no comparison can confirm
/// such a date, and a feed's items did change, so one rarely refutes it either. A few
/// honest dates (a post's real date) do not save such a host; a sitemap of real dates
/// beside a feed dated at the read does.
const AT_THE_READ_SHARE: f64 = 0.9;

impl Announced {
    /// Takes one entry of a document: `claim` its date, if any; `previous_read_ms` when
    /// the entry's URL was last read in a document, if ever.
    pub fn observe(&mut self, claim: Option<Claim>, previous_read_ms: Option<i64>) {
        let Some(claim) = claim else {
            self.undated = self.undated.saturating_add(1);
            return;
        };
        self.dated = self.dated.saturating_add(1);
        if claim.changed_ms >= claim.seen_ms.saturating_sub(CLOCK_SKEW_MS) {
            self.at_the_read = self.at_the_read.saturating_add(1);
        }
        if previous_read_ms.is_some_and(|read| claim.changed_ms > read) {
            self.changes = self.changes.saturating_add(1);
        }
    }

    /// A document of the host is read in `period`, the host's claims standing at `trust`:
    /// what the reads before announced is folded in. The changes counted are multiplied by
    /// `scale`, the share of the host's entries this instance does not see (total over
    /// owned partitions).
    pub fn read(&mut self, period: u64, trust: ClaimTrust, scale: f64) {
        let period = u32::try_from(period).unwrap_or(u32::MAX);
        // Two documents read in one period: the second's entries are not in yet.
        if self.last_read == Some(period) {
            return;
        }
        if !self.ever_dated() {
            self.reads_before_a_date = self.reads_before_a_date.saturating_add(1);
        }
        self.undated_read |= self.undated > 0 && self.dated == 0;
        if self.dated > 0 {
            self.dated_reads = self.dated_reads.saturating_add(1);
        }
        self.dated_before = self.dated_before.saturating_add(self.dated);
        self.at_the_read_before = self.at_the_read_before.saturating_add(self.at_the_read);
        if let (ClaimTrust::Trusted, Some(interval)) = (trust, self.interval) {
            // A first window without changes tells only that the host announces fewer than
            // about one in it: counted as none, it would read as a host that never changes
            // and wait the longest for its next read. Half a change, the first time only;
            // later quiet windows wear the rate down by the running weight.
            let changes = match self.rate {
                None => f64::from(self.changes).max(0.5),
                Some(_) => f64::from(self.changes),
            };
            let sample = changes * scale / f64::from(interval.max(1));
            let rate = self.rate.map_or(sample, |old| {
                let old = f64::from(old);
                old + RATE_WEIGHT * (sample - old)
            });
            self.rate = Some(rate as f32);
        }
        self.interval = self.last_read.map(|last| period.saturating_sub(last).max(1));
        self.last_read = Some(period);
        (self.changes, self.dated, self.undated, self.at_the_read) = (0, 0, 0, 0);
    }

    fn ever_dated(&self) -> bool {
        self.dated_before > 0 || self.dated > 0
    }

    /// Whether the rule governs a document of the host: its host is not found out, and its
    /// documents date their entries (or may yet: [`READS_TO_A_DATE`]), and not all at the
    /// read. Known as the entries arrive, not only at the next read. A document it does
    /// not govern is scheduled as a page.
    pub fn governs(&self, trust: ClaimTrust) -> bool {
        let ever_dated = self.ever_dated();
        let may_date = ever_dated || self.reads_before_a_date < READS_TO_A_DATE;
        let undated = !ever_dated && (self.undated_read || self.undated > 0);
        trust != ClaimTrust::Distrusted && may_date && !undated && !self.dated_at_the_read(trust)
    }

    /// Whether, the host's claims not yet judged, two reads or more dated entries and
    /// nearly all of them at the read (a truthful feed read just after its items changed
    /// looks the same once, so it takes two).
    fn dated_at_the_read(&self, trust: ClaimTrust) -> bool {
        let reads = u32::from(self.dated_reads).saturating_add(u32::from(self.dated > 0));
        let dated = f64::from(self.dated_before.saturating_add(self.dated));
        let at_the_read = f64::from(self.at_the_read_before.saturating_add(self.at_the_read));
        trust == ClaimTrust::Unknown && reads >= 2 && at_the_read >= AT_THE_READ_SHARE * dated
    }

    /// Whether a document of the host that lists its pages as `listing` says, last read
    /// `since` periods ago (`None`: never), is due, at a budget of `budget_share` of the
    /// pages a period.
    pub fn due(&self, trust: ClaimTrust, listing: Listing, since: Option<u64>, budget_share: f64) -> bool {
        let Some(since) = since else { return true };
        if !self.governs(trust) {
            return false;
        }
        match trust {
            ClaimTrust::Distrusted => false,
            ClaimTrust::Unknown => since >= PROBE_EVERY,
            ClaimTrust::Trusted => {
                let worth = if listing == Listing::Every { POLL_WORTH } else { FEED_POLL_WORTH };
                match self.rate {
                    _ if since >= MOST_PERIODS_UNREAD => true,
                    Some(rate) => {
                        since >= 1
                            && f64::from(rate) * since as f64 * budget_share.max(f64::MIN_POSITIVE) >= worth
                    }
                    None => since >= 1,
                }
            }
        }
    }

    /// The period of the read before the latest: an entry whose URL no read named before
    /// announces the changes since then.
    pub fn read_before(&self) -> Option<u64> {
        Some(u64::from(self.last_read?.saturating_sub(self.interval?)))
    }

    /// The running rate of announced changes per period, once measured.
    pub fn rate(&self) -> Option<f64> {
        self.rate.map(f64::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD_MS: i64 = 60_000;

    fn dated(changed_period: i64, read_period: i64) -> Option<Claim> {
        Some(Claim { changed_ms: changed_period * PERIOD_MS, seen_ms: read_period * PERIOD_MS + 1_000 })
    }

    #[test]
    fn a_host_not_yet_judged_is_read_every_few_periods() {
        let mut announced = Announced::default();
        assert!(announced.due(ClaimTrust::Unknown, Listing::Every, None, 0.05), "never read: due");
        announced.observe(dated(0, 0), None);
        announced.read(0, ClaimTrust::Unknown, 1.0);
        assert!(announced.governs(ClaimTrust::Unknown));
        assert!(!announced.due(ClaimTrust::Unknown, Listing::Every, Some(PROBE_EVERY - 1), 0.05));
        assert!(announced.due(ClaimTrust::Unknown, Listing::Every, Some(PROBE_EVERY), 0.05));
        assert!(!announced.governs(ClaimTrust::Distrusted), "a host found out is left to its pages");
    }

    #[test]
    fn a_trusted_host_is_read_once_its_announced_changes_are_worth_it() {
        let mut announced = Announced::default();
        // Reads every 2 periods, each announcing 4 changes since the read before: 2 a period.
        for read in 0..6_i64 {
            announced.read(read as u64 * 2, ClaimTrust::Trusted, 1.0);
            for page in 0..10 {
                let previous = (read > 0).then(|| (read * 2 - 2) * PERIOD_MS + 1_000);
                let changed = if page < 4 { read * 2 - 1 } else { -10 };
                announced.observe(dated(changed, read * 2), previous);
            }
        }
        announced.read(12, ClaimTrust::Trusted, 1.0);
        let rate = announced.rate().unwrap();
        assert!((rate - 2.0).abs() < 1e-6, "{rate}");
        // At R = 0.05 a read is worth 0.3 / 0.05 = 6 changes: 3 periods at 2 a period.
        assert!(!announced.due(ClaimTrust::Trusted, Listing::Every, Some(2), 0.05));
        assert!(announced.due(ClaimTrust::Trusted, Listing::Every, Some(3), 0.05));
        // A feed's read is worth 10.
        assert!(!announced.due(ClaimTrust::Trusted, Listing::Latest, Some(4), 0.05));
        assert!(announced.due(ClaimTrust::Trusted, Listing::Latest, Some(5), 0.05));
        // One quiet window is not a host that never changes: it counts half a change, and
        // the quiet ones after it wear the rate down to the longest wait.
        let mut quiet = Announced::default();
        for read in 0..3 {
            quiet.read(read, ClaimTrust::Trusted, 1.0);
            quiet.observe(dated(-10, read as i64), Some(0));
        }
        assert_eq!(quiet.rate(), Some(0.5), "one window of a period, none announced");
        // 0.5 a period × 12 periods × 0.05 = 0.3.
        assert!(!quiet.due(ClaimTrust::Trusted, Listing::Every, Some(11), 0.05));
        assert!(quiet.due(ClaimTrust::Trusted, Listing::Every, Some(12), 0.05));
        for read in 3..20 {
            quiet.read(read, ClaimTrust::Trusted, 1.0);
            quiet.observe(dated(-10, read as i64), Some(0));
        }
        assert!(quiet.rate().is_some_and(|rate| rate < 0.01), "{:?}", quiet.rate());
        assert!(!quiet.due(ClaimTrust::Trusted, Listing::Every, Some(MOST_PERIODS_UNREAD - 1), 0.05));
        assert!(quiet.due(ClaimTrust::Trusted, Listing::Every, Some(MOST_PERIODS_UNREAD), 0.05));
        // An instance that sees half the entries counts each twice.
        let mut half = Announced::default();
        half.read(0, ClaimTrust::Trusted, 2.0);
        half.read(2, ClaimTrust::Trusted, 2.0);
        half.observe(dated(1, 2), Some(1_000));
        half.read(4, ClaimTrust::Trusted, 2.0);
        assert_eq!(half.rate(), Some(1.0));
    }

    #[test]
    fn undated_documents_and_dates_at_the_read_govern_nothing() {
        let mut undated = Announced::default();
        undated.observe(None, None);
        undated.read(0, ClaimTrust::Unknown, 1.0);
        assert!(!undated.governs(ClaimTrust::Unknown));
        assert!(!undated.due(ClaimTrust::Unknown, Listing::Every, Some(100), 0.05));

        let mut at_the_read = Announced::default();
        for read in 0..3_i64 {
            at_the_read.read(read as u64 * 4, ClaimTrust::Unknown, 1.0);
            at_the_read.observe(dated(read * 4, read * 4), None);
            let governed = at_the_read.governs(ClaimTrust::Unknown);
            assert_eq!(
                governed,
                read < 1,
                "read {read}: twice in a row is enough, known as the entries come"
            );
        }
        at_the_read.read(12, ClaimTrust::Unknown, 1.0);
        assert!(!at_the_read.governs(ClaimTrust::Unknown));

        // An empty feed may yet list pages; a document that never does is not read for ever.
        let mut empty = Announced::default();
        for read in 0..u64::from(READS_TO_A_DATE) {
            assert!(empty.governs(ClaimTrust::Unknown), "read {read}");
            empty.read(read * PROBE_EVERY, ClaimTrust::Unknown, 1.0);
        }
        assert!(!empty.governs(ClaimTrust::Unknown));
        let mut late = Announced::default();
        late.read(0, ClaimTrust::Unknown, 1.0);
        late.read(4, ClaimTrust::Unknown, 1.0);
        late.observe(dated(1, 4), None);
        late.read(8, ClaimTrust::Unknown, 1.0);
        late.read(12, ClaimTrust::Unknown, 1.0);
        assert!(late.governs(ClaimTrust::Unknown), "a date came in time");
    }

    #[test]
    fn one_document_dating_nothing_does_not_turn_the_rule_off_for_the_host_s_others() {
        let mut announced = Announced::default();
        announced.read(0, ClaimTrust::Unknown, 1.0);
        announced.observe(dated(-5, 0), None);
        // Another sitemap of the host, undated, read on its own schedule.
        for read in 1..4_i64 {
            announced.read(read as u64, ClaimTrust::Unknown, 1.0);
            announced.observe(None, None);
            assert!(announced.governs(ClaimTrust::Unknown), "read {read}");
        }
        // And a feed dated at the read, twice in a row.
        for read in 4..7_i64 {
            announced.read(read as u64, ClaimTrust::Unknown, 1.0);
            announced.observe(dated(read, read), None);
            assert!(announced.governs(ClaimTrust::Unknown), "read {read}");
        }
    }

    #[test]
    fn an_undated_sitemap_read_first_does_not_keep_a_dated_feed_from_the_rule() {
        let mut announced = Announced::default();
        announced.read(0, ClaimTrust::Unknown, 1.0);
        announced.observe(None, None);
        announced.read(1, ClaimTrust::Unknown, 1.0);
        assert!(!announced.governs(ClaimTrust::Unknown), "nothing dated yet");
        // A feed a page named, dating its items.
        announced.observe(dated(-3, 1), None);
        announced.read(2, ClaimTrust::Unknown, 1.0);
        assert!(announced.governs(ClaimTrust::Unknown));
    }

    #[test]
    fn a_feed_dating_at_the_read_is_left_alone_whatever_one_honest_date() {
        let mut announced = Announced::default();
        announced.read(0, ClaimTrust::Unknown, 1.0);
        for item in 0..20 {
            // One post carries its real date.
            let changed = if item == 0 { -1 } else { 0 };
            announced.observe(dated(changed, 0), None);
        }
        assert!(announced.governs(ClaimTrust::Unknown), "one read may be a busy minute");
        announced.read(4, ClaimTrust::Unknown, 1.0);
        for _ in 0..20 {
            announced.observe(dated(4, 4), None);
        }
        assert!(!announced.governs(ClaimTrust::Unknown));
        assert!(announced.governs(ClaimTrust::Trusted), "judged, the claims decide");
    }

    #[test]
    fn a_second_document_read_in_the_same_period_folds_nothing() {
        let mut announced = Announced::default();
        announced.read(0, ClaimTrust::Trusted, 1.0);
        announced.read(1, ClaimTrust::Trusted, 1.0);
        announced.observe(dated(1, 1), Some(1_000));
        announced.read(2, ClaimTrust::Trusted, 1.0);
        let before = announced;
        announced.read(2, ClaimTrust::Trusted, 1.0);
        assert_eq!(announced, before);
        assert_eq!(announced.rate(), Some(1.0));
    }
}
