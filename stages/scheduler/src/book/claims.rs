//! What sitemaps and feeds claim of a book's tracked pages (`docs/algorithms/sitemaps.md`
//! §2–4): each dated claim is judged against the URL's comparisons
//! ([`recrawl_model::claims`]), the judgement tallied on its host, and a trusted host's
//! claims taken as complete observations: a copy known stale, or current as of the
//! document's fetch. The stage and the simulator both come here.

use recrawl_model::claims::{Claim, ClaimEvidence, ClaimTrust, Comparison, CopyNews, Judgement};
use recrawl_model::period_start_ms;
use recrawl_schemas::LastRequest;

use super::{period32, Book, BookSettings, CHANGE_CLAIMED, CLAIM_TO_TEST};
use crate::hosts::Hosts;

/// A URL's claims and the download they are judged from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UrlClaims {
    evidence: ClaimEvidence,
    /// The latest download, Unix ms.
    last_download_ms: Option<i64>,
}

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

impl Book {
    /// Judges `claim` about the tracked URL at `slot`, tallies the judgement on its host,
    /// and where the host's claims are trusted takes what the claim says of the copy.
    /// `None` for a URL not tracked (a frontier URL is stale whatever is claimed).
    pub fn claim(
        &mut self,
        hosts: &mut Hosts,
        slot: u32,
        claim: Claim,
        settings: &BookSettings,
    ) -> Option<ClaimOutcome> {
        let page = *self.pages.get(slot as usize)?;
        if page.is_frontier() || page.is_gone() {
            return None;
        }
        // Before a claim named it, the URL's downloads were not timed to the ms: its last
        // is taken at its period's start, so a change that period reads as stale (a fetch
        // too many, never a change missed).
        let downloaded_ms = page
            .last_download()
            .map(|period| period_start_ms(settings.epoch_unix_ms, settings.period_ms, period));
        let entry = self
            .claims
            .entry(slot)
            .or_insert(UrlClaims { evidence: ClaimEvidence::default(), last_download_ms: downloaded_ms });
        let judgement = entry.evidence.observe_claim(claim);
        let news = claim.news(entry.last_download_ms);
        let tally = &mut hosts.stats.get_mut(page.host as usize)?.claims;
        tally.record(judgement);
        let trust = tally.trust();
        let since_epoch = u64::try_from(claim.seen_ms.saturating_sub(settings.epoch_unix_ms)).unwrap_or(0);
        let seen_period = since_epoch.checked_div(settings.period_ms).unwrap_or(0);
        let taken = trust == ClaimTrust::Trusted && self.take_claim(slot, news, seen_period);
        if trust == ClaimTrust::Unknown && news == CopyNews::Stale && page.last_download().is_some() {
            self.pages[slot as usize].flags |= CLAIM_TO_TEST;
        }
        Some(ClaimOutcome { judgement, trust, news, taken })
    }

    /// Judges the claims of a URL that has any against a download's comparison.
    pub(super) fn judge_download(&mut self, hosts: &mut Hosts, slot: u32, request: &LastRequest) {
        if !request.downloaded {
            return;
        }
        let Some(entry) = self.claims.get_mut(&slot) else { return };
        let previous = entry.last_download_ms.replace(request.fetched_at_ms);
        let (Some(from_ms), Some(changed)) = (previous, request.changed) else { return };
        let comparison = Comparison { from_ms, to_ms: request.fetched_at_ms, changed };
        let judgement = entry.evidence.observe_comparison(comparison);
        let host = self.pages[slot as usize].host as usize;
        if let Some(stats) = hosts.stats.get_mut(host) {
            stats.claims.record(judgement);
        }
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

    use super::*;
    use crate::book::tests::{estimate, link};

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
    fn a_url_s_claims_stay_within_64_bytes() {
        assert!(std::mem::size_of::<UrlClaims>() <= 64, "{}", std::mem::size_of::<UrlClaims>());
    }

    /// A host whose sitemap dates each change is trusted after three confirmed, and its
    /// claims then mark copies; one that sends the time of the request never is.
    #[test]
    fn a_host_earns_trust_by_confirmed_claims_and_then_its_claims_are_taken() {
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
                outcomes.push((host, page, book.claim(&mut hosts, slot, claim, &settings).unwrap()));
                // Fetched at 4:30: the truthful page changed, the other did not.
                let mut second =
                    estimate(&format!("http://{host}/{page}.html"), 4, true, Some(host == "truthful"));
                second.last_request.fetched_at_ms = 4 * HOUR + HOUR / 2;
                book.apply_estimate(&mut hosts, &second, &settings).unwrap();
            }
        }
        let trust = |host: &str| {
            let slot = book.find(&format!("http://{host}/0.html")).unwrap();
            hosts.stats[book.page(slot).host as usize].claims.trust()
        };
        assert_eq!(trust("truthful"), ClaimTrust::Trusted);
        assert_eq!(trust("lying"), ClaimTrust::Distrusted);
        // Taken once the host was trusted (after three pages), never from the other.
        for (host, page, outcome) in &outcomes {
            assert_eq!(outcome.taken, *host == "truthful" && *page >= 3, "{host} {page}: {outcome:?}");
        }
        // Now a change claimed at 5:00 of the truthful host's page marks it stale.
        let slot = book.find("http://truthful/0.html").unwrap();
        let outcome =
            book.claim(&mut hosts, slot, Claim { changed_ms: 5 * HOUR, seen_ms: 6 * HOUR }, &settings);
        assert!(outcome.is_some_and(|outcome| outcome.taken && outcome.news == CopyNews::Stale));
        assert!(book.page(slot).is_change_claimed());
        // The lying host's claims are judged but never taken.
        let slot = book.find("http://lying/0.html").unwrap();
        let outcome =
            book.claim(&mut hosts, slot, Claim { changed_ms: 6 * HOUR, seen_ms: 6 * HOUR }, &settings);
        assert!(outcome.is_some_and(|outcome| !outcome.taken));
        assert!(!book.page(slot).is_change_claimed());
    }
}
