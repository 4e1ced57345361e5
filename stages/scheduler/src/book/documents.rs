//! The sitemaps and feeds among a book's URLs: those a robots.txt, a sitemap index or a
//! page named as one. The plan reads each again by its own rule (`crate::documents`)
//! while that rule governs its host, not by the page's change rate: a sitemap that changes
//! every period is worth reading more, not less.

use recrawl_model::claims::{Claim, Listing};
use recrawl_model::period_start_ms;

use super::{Book, BookSettings};
use crate::hosts::Hosts;

/// Documents of one host a partition keeps: a site names few, and a hostile one (a
/// sitemap index of 50,000 sitemaps) gets no more; the rest are pages.
pub const MAX_DOCUMENTS_PER_HOST: u8 = 4;

impl Book {
    /// Marks the URL as a document that lists its pages as `listing` says, within
    /// [`MAX_DOCUMENTS_PER_HOST`] of its host. Whether it is one now (a URL not held, one
    /// that moved for good, or one past the limit, is not).
    pub fn mark_document(&mut self, url: &str, listing: Listing) -> bool {
        let Some(slot) = self.find(url) else { return false };
        // robots.txt names `/sitemap.xml` again at each read, moved or not.
        if self.pages[slot as usize].is_moved() {
            self.drop_document(slot);
            return false;
        }
        if self.documents.contains_key(&slot) {
            return true;
        }
        let kept = self.keep_document(slot, listing);
        if kept {
            self.mark_dirty(slot);
        }
        kept
    }

    /// Keeps `slot` as a document, within its host's limit; whether it was kept.
    pub(super) fn keep_document(&mut self, slot: u32, listing: Listing) -> bool {
        let Some(page) = self.pages.get(slot as usize) else { return false };
        let count = self.host_documents.entry(page.host).or_default();
        if *count >= MAX_DOCUMENTS_PER_HOST {
            return false;
        }
        *count = count.saturating_add(1);
        self.documents.insert(slot, listing);
        true
    }

    /// Lets the URL at `slot` go as a document.
    pub(super) fn drop_document(&mut self, slot: u32) {
        if self.documents.remove(&slot).is_none() {
            return;
        }
        let host = self.pages[slot as usize].host;
        if let Some(count) = self.host_documents.get_mut(&host) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.host_documents.remove(&host);
            }
        }
    }

    /// Counts an entry of a sitemap or feed about the URL at `slot`, dated by `claim` or
    /// not, towards what its host's documents announced
    /// ([`Announced::observe`](crate::documents::Announced::observe)), before
    /// the claim is judged: a tracked URL's only, and a replayed or older read not again.
    pub fn count_announced(
        &self,
        hosts: &mut Hosts,
        slot: u32,
        claim: Option<Claim>,
        settings: &BookSettings,
    ) {
        let Some(page) = self.pages.get(slot as usize) else { return };
        if page.is_frontier() || page.is_gone() {
            return;
        }
        let kept_read_ms =
            self.claims.get(&slot).and_then(|kept| kept.evidence.claim).map(|kept| kept.seen_ms);
        if claim.is_some_and(|claim| kept_read_ms.is_some_and(|read| read >= claim.seen_ms)) {
            return;
        }
        let Some(stats) = hosts.stats.get_mut(page.host as usize) else { return };
        // A URL new to the host's documents (a feed lists a page only while it is among the
        // latest changed) announces what changed since the host's read before.
        let host_read_ms = || {
            let period = stats.announced.read_before()?;
            Some(period_start_ms(settings.epoch_unix_ms, settings.period_ms, period))
        };
        let previous_read_ms = kept_read_ms.or_else(host_read_ms);
        stats.announced.observe(claim, previous_read_ms);
    }

    /// What the document at `slot` lists, if it is one.
    pub fn document(&self, slot: u32) -> Option<Listing> {
        self.documents.get(&slot).copied()
    }

    /// The documents, in slot order.
    pub fn documents(&self) -> Vec<(u32, Listing)> {
        let mut documents: Vec<(u32, Listing)> =
            self.documents.iter().map(|(&slot, &kind)| (slot, kind)).collect();
        documents.sort_unstable_by_key(|&(slot, _)| slot);
        documents
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use recrawl_common::links::LinkRules;
    use recrawl_schemas::{DiscoveredLinks, FetchOutcome, PageRef};

    use super::*;
    use crate::book::tests::estimate;
    use crate::book::SchedulerState;
    use crate::hosts::Hosts;

    fn seed(book: &mut Book, hosts: &mut Hosts, url: &str) {
        let link = DiscoveredLinks {
            page: PageRef::of_url(url).unwrap(),
            source: None,
            occurrences: 1,
            period: 0,
            depth: 0,
        };
        book.apply_link(hosts, &link, &LinkRules::default(), 10_000, &BookSettings::default()).unwrap();
    }

    #[test]
    fn a_host_keeps_few_documents_and_they_survive_a_restore_and_a_compaction() {
        let (mut book, mut hosts, settings) = (Book::default(), Hosts::default(), BookSettings::default());
        let sitemap = |n: usize| format!("http://a/sitemap-{n}.xml");
        for n in 0..6 {
            seed(&mut book, &mut hosts, &sitemap(n));
        }
        seed(&mut book, &mut hosts, "http://b/feed.xml");
        assert!(!book.mark_document("http://a/unknown.xml", Listing::Every), "a URL not held");
        for n in 0..6 {
            let kept = book.mark_document(&sitemap(n), Listing::Every);
            assert_eq!(kept, n < usize::from(MAX_DOCUMENTS_PER_HOST), "{n}");
        }
        assert!(book.mark_document("http://b/feed.xml", Listing::Latest), "another host's limit");
        let feed = book.find("http://b/feed.xml").unwrap();
        assert_eq!(book.document(feed), Some(Listing::Latest));
        // One goes: another of the host's takes its place.
        let first = book.find(&sitemap(0)).unwrap();
        assert!(book.forget(&mut hosts, first));
        assert!(book.mark_document(&sitemap(5), Listing::Every));
        assert_eq!(book.documents().len(), 5);

        let expected = [sitemap(1), sitemap(2), sitemap(3), sitemap(5), "http://b/feed.xml".to_owned()];
        let listed = |book: &Book| -> Vec<String> {
            book.documents().iter().map(|&(slot, _)| book.url(slot)).collect()
        };
        assert_eq!(listed(&book), expected);

        // Slots are renumbered when dropped URLs are reclaimed.
        for n in 0..1_100 {
            seed(&mut book, &mut hosts, &format!("http://c/{n}"));
        }
        for n in 0..1_100 {
            let slot = book.find(&format!("http://c/{n}")).unwrap();
            book.forget(&mut hosts, slot);
        }
        let records: HashMap<String, SchedulerState> = book.take_dirty().into_iter().collect();
        book.take_removed();
        assert!(book.compact());
        assert_eq!(listed(&book), expected);
        let feed = book.find("http://b/feed.xml").unwrap();
        assert_eq!(book.document(feed), Some(Listing::Latest));

        let (mut restored, _) = Book::restore(records, &mut Hosts::default(), &settings).unwrap();
        assert_eq!(listed(&restored), expected);
        // A restored host's limit counts what it restored.
        assert!(!restored.mark_document(&sitemap(4), Listing::Every));
    }
    #[test]
    fn a_document_that_moved_for_good_gives_its_host_s_place_to_another() {
        let (mut book, mut hosts, settings) = (Book::default(), Hosts::default(), BookSettings::default());
        let sitemap = |n: usize| format!("http://a/sitemap-{n}.xml");
        for n in 0..=usize::from(MAX_DOCUMENTS_PER_HOST) {
            seed(&mut book, &mut hosts, &sitemap(n));
            book.mark_document(&sitemap(n), Listing::Every);
        }
        let last = sitemap(usize::from(MAX_DOCUMENTS_PER_HOST));
        assert_eq!(book.document(book.find(&last).unwrap()), None, "past the host's limit");
        let mut moved = estimate(&sitemap(0), 3, false, None);
        (moved.last_request.outcome, moved.last_request.http_status) = (FetchOutcome::HttpStatus, Some(301));
        book.apply_estimate(&mut hosts, &moved, &settings).unwrap();
        assert_eq!(book.document(book.find(&sitemap(0)).unwrap()), None);
        assert!(!book.mark_document(&sitemap(0), Listing::Every), "named again, it stays a page");
        assert!(book.mark_document(&last, Listing::Every));
    }
}
