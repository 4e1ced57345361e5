//! What sitemaps and feeds claim of a book's tracked pages (`docs/algorithms/sitemaps.md`
//! §2–4): each dated claim is judged against the URL's comparisons
//! ([`recrawl_model::claims`]), the judgement tallied on its host, and a trusted host's
//! claims taken as complete observations: a copy known stale, or current as of the
//! document's fetch. The stage and the simulator both come here.

pub use recrawl_model::claims::UrlClaims;
use recrawl_model::claims::{
    Claim, ClaimTally, ClaimTrust, ClaimedChanges, CopyNews, Judgement, Listing, Span,
};
use recrawl_model::modified::CLOCK_SKEW_MS;
use recrawl_model::period_start_ms;
use recrawl_model::rate::RateEstimate;
use recrawl_schemas::LastRequest;

use super::{period32, Book, BookSettings, Page, CHANGE_CLAIMED, CLAIM_TO_TEST};
use crate::coarse::CoarseF32;
use crate::hosts::Hosts;

/// Periods after its latest download past which a trusted claim no longer keeps a copy
/// current: the copy is fetched again as its model says, an audit of the host's claims
/// (a host that stops dating its changes would otherwise keep its pages from ever being
/// compared again).
pub const CLAIM_AUDIT_PERIODS: u64 = 100;

/// What one claim came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimOutcome {
    pub judgement: Judgement,
    /// The host's standing after it.
    pub trust: ClaimTrust,
    /// What the claim says of the stored copy, were it believed.
    pub news: CopyNews,
    /// Whether the book took the news (the host is trusted and it said something new).
    pub taken: bool,
}

/// Whether fetching `page` would test `claim`, its host's claims not yet judged: the claim
/// dates a change after the download made within `downloaded`, and one a comparison could
/// confirm (the time of the request never is).
fn worth_a_test(page: &Page, claim: Claim, downloaded: Option<Span>) -> bool {
    page.last_download().is_some() && claim.can_confirm() && claim.news(downloaded) == CopyNews::Stale
}

impl Page {
    /// Whether a trusted claim says the page changed since its latest download.
    pub fn is_change_claimed(&self) -> bool {
        self.flags & CHANGE_CLAIMED != 0
    }

    /// Whether fetching it would test a claim of a host not yet judged.
    pub fn is_claim_to_test(&self) -> bool {
        self.flags & CLAIM_TO_TEST != 0
    }
}

impl Book {
    /// Judges `claim` about the tracked URL at `slot`, tallies the judgement on its host,
    /// and where the host's claims are trusted takes what the claim says of the copy.
    /// A claim from a document that lists every page (`listing`) also counts towards the
    /// page's claimed changes ([`UrlClaims::claimed`]). `None` for a URL not tracked (a
    /// frontier URL is stale whatever is claimed).
    pub fn claim(
        &mut self,
        hosts: &mut Hosts,
        slot: u32,
        claim: Claim,
        listing: Listing,
        settings: &BookSettings,
    ) -> Option<ClaimOutcome> {
        let page = *self.pages.get(slot as usize)?;
        if page.is_frontier() || page.is_gone() {
            return None;
        }
        // Before a claim named it, the URL's downloads were not timed to the ms: its last
        // is known by its period only, and a change within that period says nothing.
        let period_start = |period: u64| period_start_ms(settings.epoch_unix_ms, settings.period_ms, period);
        let downloaded = page.last_download().map(|period| Span {
            earliest_ms: period_start(period),
            latest_ms: period_start(period.saturating_add(1)).saturating_sub(1),
        });
        let entry = self.claims.entry(slot).or_insert(UrlClaims::new(downloaded));
        let before = *entry;
        let judgement = entry.evidence.observe_claim(claim);
        let news = claim.news(entry.last_download);
        let real_download = entry.last_download;
        let trust = self.tally(hosts, page.host, judgement)?;
        let mut claimed = before.claimed;
        if trust == ClaimTrust::Distrusted {
            claimed = ClaimedChanges::default();
        } else if listing == Listing::Every {
            claimed.observe(claim);
        }
        let entry = self.claims.get_mut(&slot)?;
        entry.claimed = claimed;
        let kept_changed = *entry != before;
        if claimed != before.claimed {
            self.prefer_claimed_rate(slot, hosts, settings);
        }
        if judgement != Judgement::Silent || kept_changed {
            // The record carries the URL's claims and the host's tally to a restore.
            self.mark_dirty(slot);
        }
        let period_of = |ms: i64| {
            let since_epoch = u64::try_from(ms.saturating_sub(settings.epoch_unix_ms)).unwrap_or(0);
            since_epoch.checked_div(settings.period_ms).unwrap_or(0)
        };
        let seen_period = period_of(claim.seen_ms);
        let audit_due = real_download
            .is_some_and(|at| seen_period.saturating_sub(period_of(at.latest_ms)) > CLAIM_AUDIT_PERIODS);
        let believed = trust == ClaimTrust::Trusted && !(audit_due && matches!(news, CopyNews::CurrentAt(_)));
        let taken = believed && self.take_claim(slot, news, seen_period);
        // A host judged either way needs no more tests.
        if trust == ClaimTrust::Unknown && worth_a_test(&page, claim, real_download) {
            self.flag_claim_test(slot);
        } else if trust != ClaimTrust::Unknown {
            self.clear_test_flag(slot);
        }
        Some(ClaimOutcome { judgement, trust, news, taken })
    }

    /// Judges the claims of a URL that has any against a download's comparison, and lifts
    /// the page's claim flags unless the kept claim dates a change after this download
    /// (an estimate can arrive after the sitemap read that followed its download).
    pub(super) fn judge_download(&mut self, hosts: &mut Hosts, slot: u32, request: &LastRequest) {
        if !request.downloaded {
            return;
        }
        let fetched_at_ms = request.fetched_at_ms;
        let Some(entry) = self.claims.get_mut(&slot) else {
            self.clear_claim_flags(slot);
            return;
        };
        let later_change = entry.evidence.claim.is_some_and(|claim| {
            claim.is_possible() && claim.changed().earliest_ms > fetched_at_ms.saturating_add(CLOCK_SKEW_MS)
        });
        let judgement = entry.observe_download(fetched_at_ms, request.changed);
        if !later_change {
            self.clear_claim_flags(slot);
        }
        let host = self.pages[slot as usize].host;
        self.tally(hosts, host, judgement);
    }

    /// Tallies `judgement` on `host`, in the hosts' tally and in this partition's share of
    /// it (what its records carry, and what its revocation takes back). The host's trust
    /// after it; `None` for a host the hosts do not hold.
    fn tally(&mut self, hosts: &mut Hosts, host: u32, judgement: Judgement) -> Option<ClaimTrust> {
        let stats = hosts.stats.get_mut(host as usize)?;
        stats.claims.record(judgement);
        stats.trust_unpublished = true;
        let trust = stats.claims.trust();
        self.host_claims_mut(host).record(judgement);
        Some(trust)
    }

    /// This partition's share of `host`'s claim tally, if it judged any of its claims.
    pub fn host_claims(&self, host: u32) -> Option<ClaimTally> {
        self.host_shares.get(&host).map(|share| share.claims).filter(|tally| tally.total() > 0)
    }

    /// This partition's share of `host`'s claim tally.
    pub(super) fn host_claims_mut(&mut self, host: u32) -> &mut ClaimTally {
        &mut self.host_shares.entry(host).or_default().claims
    }

    /// Flags again, after a restore, each page whose kept claim a fetch would test: its
    /// host not yet judged (as far as the partitions restored so far tell; a host another
    /// partition shows judged is unflagged by its next claim), its claim dating a change
    /// after the page's latest download, clearly before the read.
    pub(super) fn flag_restored_claim_tests(&mut self, hosts: &Hosts) {
        let to_test: Vec<u32> = self
            .claims
            .iter()
            .filter(|(&slot, claims)| {
                let Some(page) = self.pages.get(slot as usize) else { return false };
                let unjudged = hosts
                    .stats
                    .get(page.host as usize)
                    .is_some_and(|stats| stats.claims.trust() == ClaimTrust::Unknown);
                let testable = claims
                    .evidence
                    .claim
                    .is_some_and(|claim| worth_a_test(page, claim, claims.last_download));
                unjudged && testable && !page.is_frontier()
            })
            .map(|(&slot, _)| slot)
            .collect();
        for slot in to_test {
            self.flag_claim_test(slot);
        }
    }

    fn flag_claim_test(&mut self, slot: u32) {
        let page = &mut self.pages[slot as usize];
        if !page.is_claim_to_test() {
            page.flags |= CLAIM_TO_TEST;
            self.claim_tests = self.claim_tests.saturating_add(1);
        }
    }

    pub(super) fn clear_claim_flags(&mut self, slot: u32) {
        self.clear_test_flag(slot);
        self.pages[slot as usize].flags &= !CHANGE_CLAIMED;
    }

    fn clear_test_flag(&mut self, slot: u32) {
        let page = &mut self.pages[slot as usize];
        if page.is_claim_to_test() {
            self.claim_tests = self.claim_tests.saturating_sub(1);
        }
        page.flags &= !CLAIM_TO_TEST;
    }

    /// The rate the changes its host claimed give the page at `slot`, once the host is
    /// trusted.
    pub(super) fn claimed_rate(
        &self,
        slot: u32,
        hosts: &Hosts,
        settings: &BookSettings,
    ) -> Option<RateEstimate> {
        // Most URLs have no claims: the map, usually empty, is looked at before the host.
        let claimed = self.claims.get(&slot)?.claimed;
        let host = self.pages.get(slot as usize)?.host;
        let trusted = hosts.stats.get(host as usize)?.claims.trust() == ClaimTrust::Trusted;
        trusted.then(|| claimed.rate(settings.period_ms)).flatten()
    }

    /// Scores the page at `slot` by the rate its trusted host's claimed changes give,
    /// where they give one: the estimator's, from a download every so many periods, knows
    /// less.
    pub(super) fn prefer_claimed_rate(&mut self, slot: u32, hosts: &Hosts, settings: &BookSettings) {
        let Some(rate) = self.claimed_rate(slot, hosts, settings) else { return };
        if let Some(page) = self.pages.get_mut(slot as usize) {
            page.change_rate = CoarseF32::new(Some(rate.rate));
            page.keep_rate_interval(Some((rate.low, rate.high)));
        }
    }

    /// Pages flagged for a claim test: the plan passes over the pages for them only when
    /// there are any.
    pub fn claim_tests_due(&self) -> usize {
        self.claim_tests
    }

    /// The slots flagged for a claim test, in slot order, found among the URLs with claims
    /// rather than among every page.
    pub fn claim_test_slots(&self) -> Vec<u32> {
        if self.claim_tests == 0 {
            return Vec::new();
        }
        let mut slots: Vec<u32> = self
            .claims
            .keys()
            .copied()
            .filter(|&slot| self.pages.get(slot as usize).is_some_and(Page::is_claim_to_test))
            .collect();
        slots.sort_unstable();
        slots
    }

    /// Takes what a trusted claim says of a tracked page's copy: stale, or current as of
    /// `period` (its age then counts from there, as from a download). Whether anything
    /// changed.
    pub fn take_claim(&mut self, slot: u32, news: CopyNews, period: u64) -> bool {
        let Some(page) = self.pages.get_mut(slot as usize) else { return false };
        if page.is_frontier() || page.is_gone() {
            return false;
        }
        match news {
            CopyNews::Stale if !page.is_change_claimed() => page.flags |= CHANGE_CLAIMED,
            CopyNews::CurrentAt(_)
                if !page.is_change_claimed() && page.last_download().is_some_and(|last| last < period) =>
            {
                page.last_download = period32(period);
            }
            _ => return false,
        }
        self.mark_dirty(slot);
        true
    }
}

#[cfg(test)]
mod tests {
    use recrawl_common::links::LinkRules;

    use std::collections::HashMap;

    use super::*;
    use crate::book::tests::{estimate, link};
    use crate::book::SchedulerState;

    const HOUR: i64 = 3_600_000;

    #[test]
    fn a_trusted_claim_marks_a_copy_stale_until_its_download_or_current_as_of_the_claim() {
        let (mut book, mut hosts, settings) = (Book::default(), Hosts::default(), BookSettings::default());
        let rules = LinkRules::default();
        book.apply_link(&mut hosts, &link("http://h/a.html", None, 0, 0), &rules, 10, &settings).unwrap();
        let slot = book.find("http://h/a.html").unwrap();
        assert!(!book.take_claim(slot, CopyNews::Stale, 1), "a frontier page is stale anyway");
        book.apply_estimate(&mut hosts, &estimate("http://h/a.html", 2, true, None), &settings).unwrap();
        assert!(book.take_claim(slot, CopyNews::CurrentAt(0), 5));
        assert_eq!(book.page(slot).last_download(), Some(5), "its age counts from the claim");
        assert!(!book.take_claim(slot, CopyNews::CurrentAt(0), 4), "an older claim says nothing new");
        assert!(book.take_claim(slot, CopyNews::Stale, 6));
        assert!(book.page(slot).is_change_claimed());
        assert!(!book.take_claim(slot, CopyNews::CurrentAt(0), 7), "a stale copy stays stale until fetched");
        book.apply_estimate(&mut hosts, &estimate("http://h/a.html", 8, true, Some(true)), &settings)
            .unwrap();
        assert!(!book.page(slot).is_change_claimed());
        assert_eq!(book.page(slot).last_download(), Some(8));
    }

    /// An entry costs what the memory gauge says and `docs/algorithms/sitemaps.md` §7.
    #[test]
    fn a_url_s_claims_stay_within_104_bytes() {
        assert!(std::mem::size_of::<UrlClaims>() <= 104, "{}", std::mem::size_of::<UrlClaims>());
    }

    /// A host whose sitemap dates each change is trusted after three confirmed, and its
    /// claims then mark copies; one that sends the time of the request never is.
    #[test]
    fn a_host_earns_trust_by_confirmed_claims_and_then_its_claims_are_taken() {
        let (mut book, mut hosts, settings, outcomes) = truthful_and_lying_hosts();
        let trust = |hosts: &Hosts, host: &str| {
            let slot = book.find(&format!("http://{host}/0.html")).unwrap();
            hosts.stats[book.page(slot).host as usize].claims.trust()
        };
        assert_eq!(trust(&hosts, "truthful"), ClaimTrust::Trusted);
        assert_eq!(trust(&hosts, "lying"), ClaimTrust::Distrusted);
        // Taken once the host was trusted (after three pages), never from the other.
        for (host, page, outcome) in &outcomes {
            assert_eq!(outcome.taken, *host == "truthful" && *page >= 3, "{host} {page}: {outcome:?}");
        }
        // Now a change claimed at 5:00 of the truthful host's page marks it stale.
        let slot = book.find("http://truthful/0.html").unwrap();
        let claim = Claim { changed_ms: 5 * HOUR, seen_ms: 6 * HOUR };
        let outcome = book.claim(&mut hosts, slot, claim, Listing::Every, &settings);
        assert!(outcome.is_some_and(|outcome| outcome.taken && outcome.news == CopyNews::Stale));
        assert!(book.page(slot).is_change_claimed());
        // The lying host's claims are judged but never taken.
        let slot = book.find("http://lying/0.html").unwrap();
        let claim = Claim { changed_ms: 6 * HOUR, seen_ms: 6 * HOUR };
        let outcome = book.claim(&mut hosts, slot, claim, Listing::Every, &settings);
        assert!(outcome.is_some_and(|outcome| !outcome.taken));
        assert!(!book.page(slot).is_change_claimed());
    }

    /// The trust a host earned is on the partition's changelog records: a restore (a
    /// restart, or another instance taking the partition) starts from it instead of
    /// probing the host again, and a revocation takes the partition's share back.
    #[test]
    fn a_host_s_trust_survives_a_restore_from_the_records_and_leaves_with_the_partition() {
        let (mut book, hosts, settings, _) = truthful_and_lying_hosts();
        let judged = |hosts: &Hosts, book: &Book, host: &str| {
            let slot = book.find(&format!("http://{host}/0.html")).unwrap();
            hosts.stats[book.page(slot).host as usize].claims
        };
        let before = [judged(&hosts, &book, "truthful"), judged(&hosts, &book, "lying")];
        let records: HashMap<String, SchedulerState> = book.take_dirty().into_iter().collect();
        let mut restarted = Hosts::default();
        let (restored, _) = Book::restore(records.clone(), &mut restarted, &settings).unwrap();
        assert_eq!(
            [judged(&restarted, &restored, "truthful"), judged(&restarted, &restored, "lying")],
            before
        );
        assert_eq!(judged(&restarted, &restored, "truthful").trust(), ClaimTrust::Trusted);
        assert_eq!(judged(&restarted, &restored, "lying").trust(), ClaimTrust::Distrusted);
        // The book restored writes the share as it read it.
        let slot = restored.find("http://truthful/0.html").unwrap();
        assert_eq!(restored.record(slot).host_claims, Some(before[0]));
        restored.release(&mut restarted);
        assert_eq!(judged(&restarted, &restored, "truthful"), ClaimTally::default());
        // A judgement marks its URL for a record, so a restore sees the latest share even
        // when no download followed.
        let (mut book, mut hosts, settings, _) = truthful_and_lying_hosts();
        let mut unchanged = estimate("http://truthful/1.html", 6, true, Some(false));
        unchanged.last_request.fetched_at_ms = 6 * HOUR;
        book.apply_estimate(&mut hosts, &unchanged, &settings).unwrap();
        book.take_dirty();
        let slot = book.find("http://truthful/1.html").unwrap();
        // Read at 6:30, dating the latest change at 2:30: the download at 6:00 agrees, and
        // the copy is as current as the claim says (no news for the page's record).
        let quiet = Claim { changed_ms: 2 * HOUR + HOUR / 2, seen_ms: 6 * HOUR + HOUR / 2 };
        let outcome = book.claim(&mut hosts, slot, quiet, Listing::Every, &settings).unwrap();
        assert_eq!(outcome.judgement, Judgement::Agreed);
        assert!(!outcome.taken);
        let dirty = book.take_dirty();
        assert_eq!(dirty.len(), 1, "{dirty:?}");
        assert_eq!(
            dirty[0].1.host_claims.map(|tally| tally.agreed),
            Some(judged(&hosts, &book, "truthful").agreed)
        );
    }

    /// A stale mark and a claim waiting for its comparison are on the URL's record: a
    /// restored book keeps the copy stale and judges the claim at the next download as
    /// the running book does.
    #[test]
    fn a_stale_mark_and_a_waiting_claim_survive_a_restore() {
        let (mut book, mut hosts, settings, _) = truthful_and_lying_hosts();
        book.take_dirty();
        let url = "http://truthful/0.html";
        let slot = book.find(url).unwrap();
        let claim = Claim { changed_ms: 5 * HOUR, seen_ms: 6 * HOUR };
        let outcome = book.claim(&mut hosts, slot, claim, Listing::Every, &settings).unwrap();
        assert!(outcome.taken && book.page(slot).is_change_claimed());
        let records: HashMap<String, SchedulerState> = book.take_dirty().into_iter().collect();
        assert_eq!(records.len(), 1, "the claim writes its URL's record");
        let mut restarted = Hosts::default();
        let (mut restored, _) = Book::restore(records, &mut restarted, &settings).unwrap();
        let again = restored.find(url).unwrap();
        assert!(restored.page(again).is_change_claimed(), "stale after the restart");
        assert_eq!(restored.record(again).claims, book.record(slot).claims);
        let mut changed = estimate(url, 7, true, Some(true));
        changed.last_request.fetched_at_ms = 7 * HOUR;
        let after_download = |book: &mut Book, hosts: &mut Hosts| {
            book.apply_estimate(hosts, &changed, &settings).unwrap();
            let slot = book.find(url).unwrap();
            (book.page(slot).is_change_claimed(), hosts.stats[book.page(slot).host as usize].claims)
        };
        let running = after_download(&mut book, &mut hosts);
        assert!(!running.0, "the download lifts the mark");
        assert_eq!(after_download(&mut restored, &mut restarted), running);
    }

    /// Five pages each of a host whose sitemap dates each change truthfully and of one that
    /// sends the time of the request, each downloaded, claimed of and downloaded again; the
    /// outcome of each claim.
    #[allow(clippy::type_complexity)]
    fn truthful_and_lying_hosts() -> (Book, Hosts, BookSettings, Vec<(&'static str, u32, ClaimOutcome)>) {
        let settings = BookSettings { period_ms: HOUR as u64, epoch_unix_ms: 0, ..BookSettings::default() };
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        let rules = LinkRules::default();
        for host in ["truthful", "lying"] {
            for page in 0..5 {
                let url = format!("http://{host}/{page}.html");
                book.apply_link(&mut hosts, &link(&url, None, 0, 0), &rules, 10, &settings).unwrap();
                let mut first = estimate(&url, 1, true, None);
                first.last_request.fetched_at_ms = HOUR + HOUR / 2;
                book.apply_estimate(&mut hosts, &first, &settings).unwrap();
            }
        }
        let mut outcomes = Vec::new();
        for page in 0..5 {
            for (host, changed_ms) in [("truthful", 2 * HOUR + 60 * 60_000 / 2), ("lying", 3 * HOUR)] {
                let slot = book.find(&format!("http://{host}/{page}.html")).unwrap();
                // The sitemap read at hour 3 names a change at 2:30 (or says "now").
                let claim = Claim { changed_ms, seen_ms: 3 * HOUR };
                outcomes.push((
                    host,
                    page,
                    book.claim(&mut hosts, slot, claim, Listing::Every, &settings).unwrap(),
                ));
                // Fetched at 4:30: the truthful page changed, the other did not.
                let mut second =
                    estimate(&format!("http://{host}/{page}.html"), 4, true, Some(host == "truthful"));
                second.last_request.fetched_at_ms = 4 * HOUR + HOUR / 2;
                book.apply_estimate(&mut hosts, &second, &settings).unwrap();
            }
        }
        (book, hosts, settings, outcomes)
    }

    /// A tracked page of host "h", downloaded at `fetched_at_ms` in period 1 (periods of an
    /// hour from 0); the host trusted or not.
    fn one_page(trusted: bool) -> (Book, Hosts, BookSettings, u32) {
        let settings = BookSettings { period_ms: HOUR as u64, epoch_unix_ms: 0, ..BookSettings::default() };
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        book.apply_link(
            &mut hosts,
            &link("http://h/a.html", None, 0, 0),
            &LinkRules::default(),
            10,
            &settings,
        )
        .unwrap();
        let mut first = estimate("http://h/a.html", 1, true, None);
        first.last_request.fetched_at_ms = HOUR + HOUR / 2;
        book.apply_estimate(&mut hosts, &first, &settings).unwrap();
        let slot = book.find("http://h/a.html").unwrap();
        if trusted {
            hosts.stats[book.page(slot).host as usize].claims =
                recrawl_model::claims::ClaimTally { confirmed: 3, ..Default::default() };
        }
        (book, hosts, settings, slot)
    }

    /// Read hourly, a trusted host's sitemap dates each change of a page that changes every
    /// 10 hours: the page is scored by the rate those claims give (about 0.1 an hour), not
    /// by the estimator's 0.25 from its downloads, and an estimate arriving later does not
    /// undo it. A host not trusted leaves the estimator's rate, a host found out drops
    /// what its claims counted, and a feed's claims count nothing.
    #[test]
    fn a_trusted_host_s_claims_rate_its_page_over_the_estimator_s_comparisons() {
        for trusted in [true, false] {
            let (mut book, mut hosts, settings, slot) = one_page(trusted);
            for hour in 2..=61 {
                let changed_ms = (hour - hour % 10) * HOUR + HOUR / 2;
                let claim = Claim { changed_ms, seen_ms: hour * HOUR + 3 * HOUR / 4 };
                book.claim(&mut hosts, slot, claim, Listing::Every, &settings).unwrap();
            }
            let mut later = estimate("http://h/a.html", 62, true, Some(true));
            later.last_request.fetched_at_ms = 62 * HOUR;
            book.apply_estimate(&mut hosts, &later, &settings).unwrap();
            let rate = book.page(slot).estimated_change_rate().unwrap();
            if trusted {
                assert!((0.06..0.16).contains(&rate), "{rate}");
                assert_eq!(book.claims[&slot].claimed.changes, 7, "0:30, then six from 10:30 to 60:30");
            } else {
                assert!((rate - 0.25).abs() < 1e-3, "{rate}");
            }
        }
        let (mut book, mut hosts, settings, slot) = one_page(true);
        let read_at = |hour: i64| Claim { changed_ms: HOUR / 2, seen_ms: hour * HOUR };
        book.claim(&mut hosts, slot, read_at(2), Listing::Every, &settings).unwrap();
        assert_ne!(book.claims[&slot].claimed, ClaimedChanges::default());
        hosts.stats[book.page(slot).host as usize].claims =
            ClaimTally { refuted: 9, ..ClaimTally::default() };
        book.claim(&mut hosts, slot, read_at(3), Listing::Every, &settings).unwrap();
        assert_eq!(book.claims[&slot].claimed, ClaimedChanges::default());
        // A feed lists a page only while it is among those changed latest: its reads are
        // taken as claims but not counted.
        let (mut book, mut hosts, settings, slot) = one_page(true);
        let claim = Claim { changed_ms: HOUR / 2, seen_ms: 2 * HOUR };
        assert!(book.claim(&mut hosts, slot, claim, Listing::Latest, &settings).unwrap().taken);
        assert_eq!(book.claims[&slot].claimed, ClaimedChanges::default());
        assert!((book.page(slot).estimated_change_rate().unwrap() - 0.25).abs() < 1e-3);
    }

    /// A claim a fetch would test outlives a restart: the restored book flags its page
    /// again, unless the records show its host judged.
    #[test]
    fn a_claim_to_test_is_flagged_again_after_a_restore() {
        let (mut book, mut hosts, settings, slot) = one_page(false);
        let claim = Claim { changed_ms: 4 * HOUR, seen_ms: 6 * HOUR };
        book.claim(&mut hosts, slot, claim, Listing::Every, &settings).unwrap();
        assert!(book.page(slot).is_claim_to_test());
        let mut records: HashMap<String, SchedulerState> = book.take_dirty().into_iter().collect();
        let (restored, _) = Book::restore(records.clone(), &mut Hosts::default(), &settings).unwrap();
        let slot = restored.find("http://h/a.html").unwrap();
        assert!(restored.page(slot).is_claim_to_test());
        assert_eq!(restored.claim_test_slots(), vec![slot]);
        for state in records.values_mut() {
            state.host_claims = Some(ClaimTally { confirmed: 3, ..ClaimTally::default() });
        }
        let (restored, _) = Book::restore(records, &mut Hosts::default(), &settings).unwrap();
        assert_eq!(restored.claim_tests_due(), 0);
    }

    #[test]
    fn a_change_in_the_period_of_a_download_known_only_by_its_period_refutes_nothing() {
        let (mut book, mut hosts, settings, slot) = one_page(false);
        // Changed at 1:00:20, before the download at 1:30 (the entry knows only period 1).
        let claim = Claim { changed_ms: HOUR + 20_000, seen_ms: 5 * HOUR };
        let outcome = book.claim(&mut hosts, slot, claim, Listing::Every, &settings).unwrap();
        assert_eq!(outcome.news, CopyNews::Nothing);
        assert!(!book.page(slot).is_claim_to_test());
        let mut second = estimate("http://h/a.html", 6, true, Some(false));
        second.last_request.fetched_at_ms = 6 * HOUR;
        book.apply_estimate(&mut hosts, &second, &settings).unwrap();
        assert_eq!(hosts.stats[book.page(slot).host as usize].claims.refuted, 0);
    }

    #[test]
    fn a_download_before_the_claimed_change_leaves_the_copy_stale() {
        let (mut book, mut hosts, settings, slot) = one_page(true);
        // Downloaded at 3:00 (its estimate arrives late), changed at 3:30, read at 4:00.
        let claim = Claim { changed_ms: 3 * HOUR + HOUR / 2, seen_ms: 4 * HOUR };
        assert!(book.claim(&mut hosts, slot, claim, Listing::Every, &settings).unwrap().taken);
        let mut late = estimate("http://h/a.html", 3, true, Some(true));
        late.last_request.fetched_at_ms = 3 * HOUR;
        book.apply_estimate(&mut hosts, &late, &settings).unwrap();
        assert!(book.page(slot).is_change_claimed(), "the change came after that download");
        let mut after = estimate("http://h/a.html", 5, true, Some(true));
        after.last_request.fetched_at_ms = 5 * HOUR;
        book.apply_estimate(&mut hosts, &after, &settings).unwrap();
        assert!(!book.page(slot).is_change_claimed());
    }

    #[test]
    fn the_time_of_the_request_is_never_worth_a_test_fetch() {
        let (mut book, mut hosts, settings, slot) = one_page(false);
        let claim = Claim { changed_ms: 5 * HOUR, seen_ms: 5 * HOUR };
        assert_eq!(
            book.claim(&mut hosts, slot, claim, Listing::Every, &settings).unwrap().news,
            CopyNews::Stale
        );
        assert!(!book.page(slot).is_claim_to_test());
        assert_eq!(book.claim_tests_due(), 0);
        let claim = Claim { changed_ms: 4 * HOUR, seen_ms: 6 * HOUR };
        book.claim(&mut hosts, slot, claim, Listing::Every, &settings).unwrap();
        assert!(book.page(slot).is_claim_to_test());
        assert_eq!(book.claim_tests_due(), 1);
        let mut test = estimate("http://h/a.html", 7, true, Some(true));
        test.last_request.fetched_at_ms = 7 * HOUR;
        book.apply_estimate(&mut hosts, &test, &settings).unwrap();
        assert_eq!(book.claim_tests_due(), 0);
    }

    #[test]
    fn a_trusted_claim_keeps_a_copy_current_only_until_an_audit_is_due() {
        let (mut book, mut hosts, settings, slot) = one_page(true);
        let quiet = |seen_hour: i64| Claim { changed_ms: -10 * HOUR, seen_ms: seen_hour * HOUR };
        assert!(book.claim(&mut hosts, slot, quiet(50), Listing::Every, &settings).unwrap().taken);
        assert_eq!(book.page(slot).last_download(), Some(50));
        let late = 2 + CLAIM_AUDIT_PERIODS as i64 + 1;
        assert!(!book.claim(&mut hosts, slot, quiet(late), Listing::Every, &settings).unwrap().taken);
        assert_eq!(book.page(slot).last_download(), Some(50), "it ages from the last claim taken");
    }

    #[test]
    fn a_judged_host_s_pages_need_no_tests_and_a_future_date_marks_nothing() {
        let (mut book, mut hosts, settings, slot) = one_page(false);
        let claim = Claim { changed_ms: 4 * HOUR, seen_ms: 6 * HOUR };
        book.claim(&mut hosts, slot, claim, Listing::Every, &settings).unwrap();
        assert_eq!(book.claim_tests_due(), 1);
        let host = book.page(slot).host as usize;
        hosts.stats[host].claims = recrawl_model::claims::ClaimTally { refuted: 2, ..Default::default() };
        book.claim(
            &mut hosts,
            slot,
            Claim { changed_ms: 4 * HOUR, seen_ms: 7 * HOUR },
            Listing::Every,
            &settings,
        )
        .unwrap();
        assert!(!book.page(slot).is_claim_to_test());
        assert_eq!(book.claim_tests_due(), 0);
        // Trusted now: a change dated years after the read is no news of the copy.
        hosts.stats[host].claims = recrawl_model::claims::ClaimTally { confirmed: 3, ..Default::default() };
        let future = Claim { changed_ms: 10_000 * HOUR, seen_ms: 8 * HOUR };
        let outcome = book.claim(&mut hosts, slot, future, Listing::Every, &settings).unwrap();
        assert_eq!(outcome.news, CopyNews::Nothing);
        assert!(!book.page(slot).is_change_claimed());
    }
}
