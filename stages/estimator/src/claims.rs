//! What sites' sitemaps claim of their pages, as the estimator takes it
//! (`docs/algorithms/sitemaps.md` §7): each URL's claims from the `announcements` topic,
//! judged against its own comparisons and its sitemap's dates counted as its claimed
//! changes, and each host's standing, read from `host-trust`, where the scheduler
//! publishes the judgements of all its URLs' claims. A trusted host's sitemap dates are
//! complete observations, read every period or two where a download comes every twenty:
//! a URL with any is rated by them, unless its own latest judged claim was refuted.

use std::collections::{HashMap, HashSet};

use recrawl_model::claims::{Claim, ClaimTally, ClaimTrust, ClaimedChanges, Judgement, Span, UrlClaims};
use recrawl_model::page::{PageRate, RateSource};
use recrawl_model::rate::RatePrior;
use recrawl_schemas::{AnnouncingDocument, HostTrust, PageAnnouncement};
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

/// What the estimator keeps of a URL's claims, on its changelog record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptClaims {
    pub url: UrlClaims,
    /// Whether the latest of its claims judged against its comparisons was refuted: its
    /// claimed changes rate it no more until a later one is confirmed or agreed with.
    pub refuted: bool,
}

impl KeptClaims {
    /// A URL's claims, none yet, its latest download at `last_download` if known.
    pub fn new(last_download: Option<Span>) -> Self {
        Self { url: UrlClaims::new(last_download), refuted: false }
    }

    /// Takes a download fetched at `fetched_at_ms`, `changed` as its comparison says, and
    /// judges the kept claim against it.
    pub fn observe_download(&mut self, fetched_at_ms: i64, changed: Option<bool>) {
        let judgement = self.url.observe_download(fetched_at_ms, changed);
        self.judged(judgement);
    }

    fn judged(&mut self, judgement: Judgement) {
        if judgement != Judgement::Silent {
            self.refuted = judgement == Judgement::Refuted;
        }
    }
}

/// What became of a `host-trust` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustFiled {
    /// The partition's share of the host is the record's now.
    Kept,
    /// A share of no claims: the partition's share left.
    Dropped,
    /// A new host past the book's limit: not kept.
    Full,
}

impl TrustFiled {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kept => "kept",
            Self::Dropped => "dropped",
            Self::Full => "full",
        }
    }
}

/// Each host's claim tally, by scheduler partition, as `host-trust` last said; a host's
/// standing is the rule applied to the sum of its partitions' shares, as the topic's
/// documentation says. At most `max_hosts` hosts: host names come from a topic.
#[derive(Debug)]
pub struct HostTrustBook {
    hosts: HashMap<String, Vec<(i32, ClaimTally)>>,
    /// Hosts a share of which was refused for the limit, by hash: the topic is compacted
    /// and read once, so that share never comes back, and judged on the shares kept later
    /// such a host could be trusted on part of its tally (its refutations in the share
    /// refused). So it never is. At most `max_hosts`; past that, no new host is kept.
    refused: HashSet<u64>,
    max_hosts: usize,
}

impl HostTrustBook {
    pub fn new(max_hosts: usize) -> Self {
        Self { hosts: HashMap::new(), refused: HashSet::new(), max_hosts }
    }

    /// Files `record`, the latest share of its `host/partition` (the topic is compacted
    /// and read in order, so a later record replaces an earlier one).
    pub fn file(&mut self, record: &HostTrust) -> TrustFiled {
        let count = |value: u64| u32::try_from(value).unwrap_or(u32::MAX);
        let tally = ClaimTally {
            confirmed: count(record.confirmed),
            agreed: count(record.agreed),
            refuted: count(record.refuted),
            silent: count(record.silent),
        };
        if tally.total() == 0 {
            if let Some(shares) = self.hosts.get_mut(&record.host) {
                shares.retain(|&(partition, _)| partition != record.partition);
                if shares.is_empty() {
                    self.hosts.remove(&record.host);
                }
            }
            return TrustFiled::Dropped;
        }
        let full = self.hosts.len() >= self.max_hosts || self.refused.len() >= self.max_hosts;
        if full && !self.hosts.contains_key(&record.host) {
            if self.refused.len() < self.max_hosts {
                self.refused.insert(xxh3_64(record.host.as_bytes()));
            }
            return TrustFiled::Full;
        }
        let shares = self.hosts.entry(record.host.clone()).or_default();
        match shares.iter_mut().find(|(partition, _)| *partition == record.partition) {
            Some((_, share)) => *share = tally,
            None => shares.push((record.partition, tally)),
        }
        TrustFiled::Kept
    }

    /// The standing of `host`'s claims over every partition's share.
    pub fn trust(&self, host: &str) -> ClaimTrust {
        let Some(shares) = self.hosts.get(host) else { return ClaimTrust::Unknown };
        if !self.refused.is_empty() && self.refused.contains(&xxh3_64(host.as_bytes())) {
            return ClaimTrust::Unknown;
        }
        let mut sum = ClaimTally::default();
        shares.iter().for_each(|(_, share)| sum.add(share));
        sum.trust()
    }

    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }
}

/// What became of an announcement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announced {
    /// Its claim was counted in its URL's claimed changes.
    Counted,
    /// Its claim added nothing to them: a feed's (which lists only the latest changes;
    /// kept to be judged), a date within the day, a document older than the latest read.
    NotCounted,
    /// No date claimed.
    Undated,
    /// A URL never requested: nothing of it is kept yet.
    Untracked,
    /// Read after the end of its period or after now: its claim is not believed.
    Implausible,
}

impl Announced {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Counted => "counted",
            Self::NotCounted => "not_counted",
            Self::Undated => "undated",
            Self::Untracked => "untracked",
            Self::Implausible => "implausible",
        }
    }
}

/// Takes `announcement`'s claim into a tracked URL's claims, `kept` (`None` for a URL not
/// tracked): judged against its pending comparison, and for a sitemap's counted in its
/// claimed changes. What became of it, and the claims when they changed. `latest_ms` is
/// the latest time the document can have been read: the end of its period, or now if
/// earlier, with the clocks' skew.
pub fn take_claim(
    announcement: &PageAnnouncement,
    kept: Option<KeptClaims>,
    latest_ms: i64,
) -> (Announced, Option<KeptClaims>) {
    let Some(changed_ms) = announcement.claimed_modified_ms else { return (Announced::Undated, None) };
    let claim = Claim { changed_ms, seen_ms: announcement.fetched_at_ms };
    if claim.seen_ms > latest_ms {
        return (Announced::Implausible, None);
    }
    let Some(before) = kept else { return (Announced::Untracked, None) };
    let mut after = before;
    let judgement = after.url.evidence.observe_claim(claim);
    after.judged(judgement);
    // A sitemap lists every page in its scope, so each read observes each page; a feed
    // lists only the latest changes, and counting its reads would read the rate high.
    let counted = announcement.document == AnnouncingDocument::Sitemap && after.url.claimed.observe(claim);
    let announced = if counted { Announced::Counted } else { Announced::NotCounted };
    (announced, (after != before).then_some(after))
}

/// The rate a URL of `host` is given by its claimed changes, while the host's claims are
/// trusted and the URL's latest judged claim was not refuted: under the flat prior, as the
/// scheduler rates it ([`ClaimedChanges::rate`]).
pub fn claimed_rate(
    kept: Option<&KeptClaims>,
    host: &str,
    trust: &HostTrustBook,
    period_ms: u64,
) -> Option<PageRate> {
    let kept = kept.filter(|kept| !kept.refuted)?;
    let claimed: &ClaimedChanges = &kept.url.claimed;
    if trust.trust(host) != ClaimTrust::Trusted {
        return None;
    }
    let estimate = claimed.rate(period_ms)?;
    let flat = RatePrior::default();
    Some(PageRate {
        rate: estimate.rate,
        low: estimate.low,
        high: estimate.high,
        prior_mean: flat.mean,
        prior_pages: 0,
        source: RateSource::Claims,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use recrawl_schemas::{PageRef, UtcTime};

    use super::*;

    pub(crate) const HOUR: i64 = 3_600_000;
    pub(crate) const URL: &str = "http://truthful.example/a.html";
    pub(crate) const HOST: &str = "truthful.example";

    /// A scheduler partition's share of `host`'s tally.
    pub(crate) fn share(host: &str, partition: i32, confirmed: u64, refuted: u64) -> HostTrust {
        let tally = ClaimTally {
            confirmed: u32::try_from(confirmed).unwrap(),
            refuted: u32::try_from(refuted).unwrap(),
            ..ClaimTally::default()
        };
        HostTrust {
            host: host.to_owned(),
            partition,
            period: 1,
            confirmed,
            agreed: 0,
            refuted,
            silent: 0,
            trust: tally.trust(),
            published_at: UtcTime::from_ms(HOUR),
            published_at_ms: HOUR,
        }
    }

    /// `URL` announced by `document`, its change claimed at `changed_ms`, read at `seen_ms`.
    pub(crate) fn announcement(
        document: AnnouncingDocument,
        changed_ms: Option<i64>,
        seen_ms: i64,
    ) -> PageAnnouncement {
        PageAnnouncement {
            page: PageRef::of_url(URL).unwrap(),
            source: PageRef::of_url("http://truthful.example/sitemap.xml").unwrap(),
            document,
            period: u64::try_from(seen_ms / HOUR).unwrap(),
            fetched_at: UtcTime::from_ms(seen_ms),
            fetched_at_ms: seen_ms,
            claimed_modified: changed_ms.map(UtcTime::from_ms),
            claimed_modified_ms: changed_ms,
            change_frequency: None,
            priority: None,
            depth: 1,
        }
    }

    #[test]
    fn a_host_s_standing_is_the_rule_applied_to_the_sum_of_its_partitions_shares() {
        let mut book = HostTrustBook::new(10);
        // Two confirmed on each of two partitions: four in all, past the three needed.
        assert_eq!(book.file(&share(HOST, 0, 2, 0)), TrustFiled::Kept);
        assert_eq!(book.trust(HOST), ClaimTrust::Unknown, "two alone are not enough");
        assert_eq!(book.file(&share(HOST, 1, 2, 0)), TrustFiled::Kept);
        assert_eq!(book.trust(HOST), ClaimTrust::Trusted);
        // A later record of a partition replaces its share.
        book.file(&share(HOST, 1, 2, 3));
        assert_eq!(book.trust(HOST), ClaimTrust::Distrusted);
        // A share of no claims leaves; with the last, the host does.
        assert_eq!(book.file(&share(HOST, 1, 0, 0)), TrustFiled::Dropped);
        assert_eq!((book.trust(HOST), book.hosts()), (ClaimTrust::Unknown, 1));
        book.file(&share(HOST, 0, 0, 0));
        assert_eq!(book.hosts(), 0);
    }

    #[test]
    fn hosts_past_the_limit_are_refused_and_known_ones_still_move() {
        let mut book = HostTrustBook::new(1);
        assert_eq!(book.file(&share("a.example", 0, 3, 0)), TrustFiled::Kept);
        assert_eq!(book.file(&share("b.example", 0, 3, 0)), TrustFiled::Full);
        assert_eq!(book.trust("b.example"), ClaimTrust::Unknown);
        assert_eq!(book.file(&share("a.example", 1, 1, 0)), TrustFiled::Kept);
        assert_eq!(book.hosts(), 1);
    }

    #[test]
    fn a_host_refused_while_full_is_never_judged_on_part_of_its_shares() {
        let mut book = HostTrustBook::new(1);
        book.file(&share("other.example", 0, 3, 0));
        // The liar's refutations are refused, and never come back.
        assert_eq!(book.file(&share("liar.example", 0, 0, 5)), TrustFiled::Full);
        // The limit of refusals remembered is reached too: no new host is kept.
        assert_eq!(book.file(&share("new.example", 0, 3, 0)), TrustFiled::Full);
        book.file(&share("other.example", 0, 0, 0));
        assert_eq!(book.file(&share("new.example", 0, 3, 0)), TrustFiled::Full);
        let mut book = HostTrustBook::new(2);
        book.file(&share("a.example", 0, 3, 0));
        book.file(&share("b.example", 0, 3, 0));
        assert_eq!(book.file(&share("liar.example", 0, 0, 5)), TrustFiled::Full);
        book.file(&share("a.example", 0, 0, 0));
        // Room again: its confirmations of another partition are kept, and not trusted.
        assert_eq!(book.file(&share("liar.example", 1, 5, 0)), TrustFiled::Kept);
        assert_eq!(book.trust("liar.example"), ClaimTrust::Unknown);
        assert_eq!(book.trust("b.example"), ClaimTrust::Trusted);
    }
}
