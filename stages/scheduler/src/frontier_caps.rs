//! What the web can make a scheduler instance hold: frontier URLs in total and per site
//! (registered domain, `page.site`), hosts in total and per site, tracked URLs in total. A spider trap links
//! without end, on new paths (a calendar) or new subdomains; each host's own cap
//! (`--link-max-per-site`) does not stop the second, and nothing stopped the frontier.
//!
//! A new host past its site's cap or the instance's is refused (hosts are interned for
//! good). A new URL is admitted up to a sixteenth past its caps; past that it is refused,
//! and past half of it the frontier is pruned back to its caps: the URLs dropped are the
//! least likely to be picked, fewest in-links first, then deepest, then latest
//! discovered. Dropped URLs leave the index and the changelog (a tombstone) and come back
//! as new if linked again; their slots are reclaimed once they are an eighth of a book.

use std::collections::{BTreeMap, HashMap};

use clap::Args;
use hashbrown::HashTable;
use recrawl_schemas::site_of;
use xxhash_rust::xxh3::xxh3_64;

use crate::book::{Book, Page};
use crate::hosts::Hosts;

/// The frontier's caps, as flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct FrontierArgs {
    /// Frontier URLs (linked, never fetched) an instance holds at most, over its
    /// partitions: about 200 bytes each.
    #[arg(long, env = "RECRAWL_FRONTIER_MAX_URLS", default_value_t = 2_000_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 32))]
    pub frontier_max_urls: usize,
    /// Frontier URLs per site (registered domain) over all instances, split evenly over
    /// the partitions as --link-max-per-site is.
    #[arg(long, env = "RECRAWL_FRONTIER_MAX_URLS_PER_SITE", default_value_t = 30_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub frontier_max_urls_per_site: u32,
    /// Hosts per site an instance learns of from links: a trap's new subdomains past it
    /// are refused.
    #[arg(long, env = "RECRAWL_MAX_HOSTS_PER_SITE", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_hosts_per_site: u32,
    /// Hosts an instance learns of from links, at most.
    #[arg(long, env = "RECRAWL_MAX_HOSTS", default_value_t = 1_000_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 32))]
    pub max_hosts: usize,
    /// URLs an instance tracks (fetched at least once) over its partitions, at most: at
    /// the cap, frontier URLs other than seeds are no longer picked, so neither this
    /// instance (about 160 bytes a URL) nor the estimator (about 1.7 KB) grows further.
    #[arg(long, env = "RECRAWL_MAX_TRACKED_URLS", default_value_t = 500_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 32))]
    pub max_tracked_urls: usize,
}

impl Default for FrontierArgs {
    fn default() -> Self {
        Self {
            frontier_max_urls: 2_000_000,
            frontier_max_urls_per_site: 30_000,
            max_hosts_per_site: 100,
            max_hosts: 1_000_000,
            max_tracked_urls: 500_000,
        }
    }
}

/// Which cap turned a link away; the label of the links metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capped {
    /// The instance's frontier holds its cap and its margin.
    Frontier,
    /// The site's share of frontier URLs, and its margin.
    SiteFrontier,
    /// A new host of a site with its cap of hosts.
    SiteHosts,
    /// A new host past the instance's cap of hosts.
    Hosts,
}

impl Capped {
    pub const ALL: [Self; 4] = [Self::Frontier, Self::SiteFrontier, Self::SiteHosts, Self::Hosts];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Frontier => "frontier_full",
            Self::SiteFrontier => "site_frontier_full",
            Self::SiteHosts => "site_hosts_full",
            Self::Hosts => "hosts_full",
        }
    }
}

/// URLs a pruning dropped, by the cap it restored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub site: usize,
    pub total: usize,
}

/// Priority classes, worst last: 64 in-degrees (fewest last) × 32 depths (deepest last).
const CLASSES: usize = 64 * 32;

/// The class of a frontier page: lower is kept first. A page a sitemap or feed named
/// counts as the most linked-to, as the frontier picks it first.
fn class(page: &Page) -> usize {
    let in_degree = if page.is_announced() { 63 } else { page.in_degree.min(63) as usize };
    let fewer_in_links = 63usize.saturating_sub(in_degree);
    fewer_in_links.saturating_mul(32).saturating_add(usize::from(page.depth.min(31)))
}

/// How far past `cap` URLs are still admitted, pruning back at half of it.
fn margin(cap: usize) -> usize {
    (cap / 16).max(16)
}

/// The caps, and what they count: the instance's sites, their hosts and frontier URLs.
#[derive(Debug, Default)]
pub struct FrontierCaps {
    args: FrontierArgs,
    names: Vec<Box<str>>,
    index: HashTable<u32>,
    /// Per site: frontier URLs over the owned partitions, and hosts.
    site_frontier: Vec<u32>,
    site_hosts: Vec<u32>,
    /// Each host's site, by host number; hosts past its length are not counted yet.
    host_site: Vec<u32>,
    /// A count passed its cap by half its margin: prune after the batch.
    overflowed: bool,
}

impl FrontierCaps {
    pub fn new(args: FrontierArgs) -> Self {
        Self { args, ..Self::default() }
    }

    pub fn args(&self) -> &FrontierArgs {
        &self.args
    }

    /// Sites counted.
    pub fn sites(&self) -> usize {
        self.names.len()
    }

    /// Bytes the counts take, for the memory figures.
    pub fn bytes(&self) -> usize {
        let names: usize = self.names.iter().map(|name| name.len().saturating_add(16)).sum();
        names
            .saturating_add(self.index.capacity().saturating_mul(5))
            .saturating_add(self.site_frontier.capacity().saturating_mul(8))
            .saturating_add(self.host_site.capacity().saturating_mul(4))
    }

    fn find_site(&self, name: &str) -> Option<u32> {
        self.index.find(xxh3_64(name.as_bytes()), |&id| &*self.names[id as usize] == name).copied()
    }

    fn intern_site(&mut self, name: &str) -> u32 {
        if let Some(id) = self.find_site(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.into());
        self.site_frontier.push(0);
        self.site_hosts.push(0);
        let names = &self.names;
        self.index.insert_unique(xxh3_64(name.as_bytes()), id, |&id| xxh3_64(names[id as usize].as_bytes()));
        id
    }

    /// Counts the hosts interned since the last call under their sites.
    pub fn sync_hosts(&mut self, hosts: &Hosts) {
        for host in self.host_site.len()..hosts.len() {
            let site = self.intern_site(site_of(hosts.name(host as u32)));
            self.host_site.push(site);
            let count = &mut self.site_hosts[site as usize];
            *count = count.saturating_add(1);
        }
    }

    /// Whether a link to a URL the instance does not hold, on `host`, may enter the
    /// frontier, which holds `frontier` URLs; `site_share` is the instance's share of
    /// the per-site cap.
    pub fn admits(&self, hosts: &Hosts, host: &str, frontier: usize, site_share: u32) -> Result<(), Capped> {
        let site_name = site_of(host);
        let site = self.find_site(site_name);
        if hosts.find(host).is_none() {
            if hosts.len() >= self.args.max_hosts {
                return Err(Capped::Hosts);
            }
            if site.is_some_and(|site| self.site_hosts[site as usize] >= self.args.max_hosts_per_site) {
                return Err(Capped::SiteHosts);
            }
        }
        let share = site_share as usize;
        if site.is_some_and(|site| {
            self.site_frontier[site as usize] as usize >= share.saturating_add(margin(share))
        }) {
            return Err(Capped::SiteFrontier);
        }
        let cap = self.args.frontier_max_urls;
        if frontier >= cap.saturating_add(margin(cap)) {
            return Err(Capped::Frontier);
        }
        Ok(())
    }

    /// A URL of `host` entered the frontier, which now holds `frontier`.
    pub fn entered(&mut self, hosts: &Hosts, host: u32, frontier: usize, site_share: u32) {
        self.sync_hosts(hosts);
        let Some(&site) = self.host_site.get(host as usize) else { return };
        let count = &mut self.site_frontier[site as usize];
        *count = count.saturating_add(1);
        let share = site_share as usize;
        let cap = self.args.frontier_max_urls;
        if *count as usize > share.saturating_add(margin(share) / 2)
            || frontier > cap.saturating_add(margin(cap) / 2)
        {
            self.overflowed = true;
        }
    }

    /// A URL of `host` left the frontier (fetched, or dropped).
    pub fn left(&mut self, host: u32) {
        if let Some(&site) = self.host_site.get(host as usize) {
            let count = &mut self.site_frontier[site as usize];
            *count = count.saturating_sub(1);
        }
    }

    /// Counts the frontier afresh from the books (after a partition was revoked).
    pub fn recount<'a>(&mut self, hosts: &Hosts, books: impl Iterator<Item = &'a Book>) {
        self.site_frontier.iter_mut().for_each(|count| *count = 0);
        for book in books {
            self.count(hosts, book);
        }
    }

    /// Adds a book's frontier to the counts (a partition restored): only its own URLs,
    /// so restoring many partitions stays linear in their URLs.
    pub fn count(&mut self, hosts: &Hosts, book: &Book) {
        self.sync_hosts(hosts);
        for page in book.pages().iter().filter(|page| page.is_frontier() && !page.is_gone()) {
            if let Some(&site) = self.host_site.get(page.host as usize) {
                let count = &mut self.site_frontier[site as usize];
                *count = count.saturating_add(1);
            }
        }
        self.overflowed = true;
    }

    /// Whether a count went past its cap by half its margin since the last pruning.
    pub fn needs_pruning(&self) -> bool {
        self.overflowed
    }

    /// Drops the lowest-priority frontier URLs of every site past its share, then of the
    /// instance if it is past its cap.
    pub fn prune(&mut self, books: &mut BTreeMap<i32, Book>, hosts: &mut Hosts, site_share: u32) -> Pruned {
        self.overflowed = false;
        self.sync_hosts(hosts);
        let share = site_share as usize;
        let excess: HashMap<u32, usize> = (0..self.site_frontier.len() as u32)
            .filter_map(|site| {
                let count = self.site_frontier[site as usize] as usize;
                (count > share).then(|| (site, count.saturating_sub(share)))
            })
            .collect();
        let mut pruned = Pruned::default();
        if !excess.is_empty() {
            let site_of_page = |page: &Page| self.host_site.get(page.host as usize).copied();
            let mut classes: HashMap<u32, Vec<usize>> = HashMap::new();
            for page in frontier_pages(books) {
                if let Some(site) = site_of_page(page).filter(|site| excess.contains_key(site)) {
                    let counts = classes.entry(site).or_insert_with(|| vec![0; CLASSES]);
                    counts[class(page)] = counts[class(page)].saturating_add(1);
                }
            }
            let mut cut: HashMap<u32, Cut> =
                classes.iter().map(|(&site, counts)| (site, Cut::of(counts, excess[&site]))).collect();
            let host_site = &self.host_site;
            let dropped = drop_where(books, hosts, |page| {
                let site = host_site.get(page.host as usize).copied()?;
                cut.get_mut(&site)?.takes(class(page)).then_some(site)
            });
            pruned.site = dropped.len();
            for site in dropped {
                let count = &mut self.site_frontier[site as usize];
                *count = count.saturating_sub(1);
            }
        }
        let frontier: usize = books.values().map(Book::frontier_len).sum();
        let cap = self.args.frontier_max_urls;
        if frontier > cap {
            let mut counts = vec![0usize; CLASSES];
            for page in frontier_pages(books) {
                counts[class(page)] = counts[class(page)].saturating_add(1);
            }
            let mut cut = Cut::of(&counts, frontier.saturating_sub(cap));
            let host_site = &self.host_site;
            let dropped = drop_where(books, hosts, |page| {
                cut.takes(class(page)).then(|| host_site.get(page.host as usize).copied().unwrap_or(u32::MAX))
            });
            pruned.total = dropped.len();
            for site in dropped {
                if let Some(count) = self.site_frontier.get_mut(site as usize) {
                    *count = count.saturating_sub(1);
                }
            }
        }
        pruned
    }
}

/// The frontier pages of every book, not dropped.
fn frontier_pages(books: &BTreeMap<i32, Book>) -> impl Iterator<Item = &Page> {
    books.values().flat_map(|book| book.pages().iter().filter(|page| page.is_frontier() && !page.is_gone()))
}

/// Drops every frontier page `chosen` names a site for, latest discovered first (books in
/// reverse order, slots from the last); the sites of the pages dropped.
fn drop_where(
    books: &mut BTreeMap<i32, Book>,
    hosts: &mut Hosts,
    mut chosen: impl FnMut(&Page) -> Option<u32>,
) -> Vec<u32> {
    let mut dropped = Vec::new();
    for book in books.values_mut().rev() {
        for slot in (0..book.len() as u32).rev() {
            let page = *book.page(slot);
            if !page.is_frontier() || page.is_gone() {
                continue;
            }
            if let Some(site) = chosen(&page) {
                if book.forget(hosts, slot) {
                    dropped.push(site);
                }
            }
        }
    }
    dropped
}

/// Which classes a pruning drops: every page of a class past `worst_kept`, and `partial`
/// pages of that class itself.
#[derive(Debug, Clone, Copy)]
struct Cut {
    worst_kept: usize,
    partial: usize,
}

impl Cut {
    /// The cut dropping `excess` of the pages counted by class in `counts`.
    fn of(counts: &[usize], excess: usize) -> Self {
        let mut left = excess;
        for class in (0..counts.len()).rev() {
            if counts[class] >= left {
                return Self { worst_kept: class, partial: left };
            }
            left = left.saturating_sub(counts[class]);
        }
        Self { worst_kept: 0, partial: left }
    }

    /// Whether a page of `class` is dropped (counting it if it is one of the partial).
    fn takes(&mut self, class: usize) -> bool {
        if class > self.worst_kept {
            return true;
        }
        if class == self.worst_kept && self.partial > 0 {
            self.partial = self.partial.saturating_sub(1);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use recrawl_common::StateStore;

    use super::*;
    use crate::book::tests::{estimate, link};
    use crate::tests::scheduler;
    use crate::Scheduler;

    /// One instance owning one partition of one, with `args` as its caps and no depth
    /// limit, so a trap goes as deep as it likes.
    fn capped(args: FrontierArgs) -> Scheduler {
        let mut scheduler = scheduler();
        scheduler.assignment.partitions = vec![0];
        scheduler.assignment.total = 1;
        scheduler.caps = FrontierCaps::new(args);
        scheduler.link_rules.max_depth = u32::MAX;
        scheduler
    }

    /// Applies `links` as batches of 100 do, pruning after each as the stage does; the
    /// frontier's largest size at a batch's end.
    fn feed(
        scheduler: &mut Scheduler,
        links: impl Iterator<Item = recrawl_schemas::DiscoveredLinks>,
    ) -> usize {
        let mut largest = 0;
        let mut links = links.peekable();
        while links.peek().is_some() {
            for link in links.by_ref().take(100) {
                scheduler.apply_link(&link, 0).unwrap();
            }
            scheduler.prune_frontier();
            largest = largest.max(scheduler.frontier_len());
        }
        largest
    }

    fn counted(scheduler: &Scheduler, outcome: &str) -> u64 {
        scheduler.metrics.links.with_label_values(&[outcome]).get()
    }

    #[test]
    fn a_calendar_trap_keeps_its_site_within_its_share_and_the_shallowest_pages() {
        let args = FrontierArgs { frontier_max_urls_per_site: 1_000, ..FrontierArgs::default() };
        let mut scheduler = capped(args);
        // Every day links the next, one level deeper, for 20,000 days.
        let days = (0..20_000u32).map(|day| {
            let source = format!("http://calendar.example/day/{day}.html");
            link(&format!("http://calendar.example/day/{}.html", day + 1), Some(&source), 1, day + 1)
        });
        let largest = feed(&mut scheduler, days);
        assert!(largest <= 1_000 + margin(1_000) / 2 + 100, "{largest}");
        // A healthy site's pages are not touched.
        feed(
            &mut scheduler,
            (0..50).map(|i| {
                link(&format!("http://healthy.example/{i}.html"), Some("http://healthy.example/"), 1, 1)
            }),
        );
        assert_eq!(
            counted(&scheduler, "discovered"),
            20_000 - counted(&scheduler, "site_frontier_full") + 50
        );
        let book = &scheduler.books[&0];
        let kept: Vec<u16> = book
            .pages()
            .iter()
            .filter(|page| page.is_frontier() && !page.is_gone())
            .filter(|page| scheduler.hosts.name(page.host) == "calendar.example")
            .map(|page| page.depth)
            .collect();
        assert!(kept.len() <= 1_000 + margin(1_000), "{}", kept.len());
        assert!(kept.iter().all(|&depth| depth <= 1_100), "the deepest days went first");
        assert!(scheduler.metrics.frontier_dropped.with_label_values(&["site"]).get() > 0);
        assert_eq!(scheduler.books[&0].frontier_len(), kept.len() + 50);
    }

    #[test]
    fn a_subdomain_trap_gets_its_cap_of_hosts_and_no_more() {
        let mut scheduler = capped(FrontierArgs { max_hosts_per_site: 100, ..FrontierArgs::default() });
        let subdomains = (0..5_000).map(|i| {
            link(&format!("http://s{i}.trap.example/page.html"), Some("http://www.trap.example/"), 1, 1)
        });
        feed(&mut scheduler, subdomains);
        assert_eq!(scheduler.hosts.len(), 100);
        assert_eq!(counted(&scheduler, "site_hosts_full"), 4_900);
        // A host of the site already known still takes links, another site's new hosts too.
        feed(
            &mut scheduler,
            [link("http://s7.trap.example/more.html", Some("http://www.trap.example/"), 1, 1)].into_iter(),
        );
        feed(
            &mut scheduler,
            [link("http://new.other.example/", Some("http://www.trap.example/"), 1, 1)].into_iter(),
        );
        assert_eq!(scheduler.hosts.len(), 101);
        assert_eq!(counted(&scheduler, "discovered"), 102);
        let mut few = capped(FrontierArgs { max_hosts: 10, ..FrontierArgs::default() });
        feed(
            &mut few,
            (0..20).map(|i| link(&format!("http://h{i}.example/"), Some("http://a.example/"), 1, 1)),
        );
        assert_eq!((few.hosts.len(), counted(&few, "hosts_full")), (10, 10));
    }

    #[test]
    fn pruning_ranks_what_sitemaps_named_with_the_most_linked() {
        let mut scheduler = capped(FrontierArgs::default());
        let url = |i: u32| format!("http://site.example/{i}.html");
        feed(&mut scheduler, (0..3u32).map(|i| link(&url(i), Some("http://site.example/"), 1, 2)));
        let book = scheduler.books.get_mut(&0).expect("a book");
        assert!(book.announce(&url(0)));
        let class_of = |i: u32| class(book.page(book.find(&url(i)).expect("in the book")));
        assert!(class_of(0) < class_of(1), "{} against {}", class_of(0), class_of(1));
        assert_eq!(class_of(1), class_of(2));
    }

    #[test]
    fn the_total_cap_drops_the_least_linked_and_the_changelog_forgets_them() {
        let mut scheduler = capped(FrontierArgs { frontier_max_urls: 2_000, ..FrontierArgs::default() });
        let mut store = StateStore::default();
        // 50 sites of 100 URLs; every tenth URL linked from a second page, and first.
        let url = |i: u32| format!("http://site{}.example/{}.html", i % 50, i);
        let twice = (0..5_000u32).filter(|i| i % 10 == 0).flat_map(|i| {
            [
                link(&url(i), Some("http://hub.example/"), 1, 1),
                link(&url(i), Some("http://other.example/"), 1, 1),
            ]
        });
        let once =
            (0..5_000u32).filter(|i| i % 10 != 0).map(|i| link(&url(i), Some("http://hub.example/"), 1, 1));
        let links = twice.chain(once);
        let largest = feed(&mut scheduler, links);
        assert!(largest <= 2_000 + margin(2_000), "{largest}");
        let book = &scheduler.books[&0];
        assert!(book.frontier_len() <= 2_000 + margin(2_000) / 2 + 200);
        let linked_twice =
            (0..5_000u32).filter(|i| i % 10 == 0).filter(|&i| book.find(&url(i)).is_some()).count();
        assert_eq!(linked_twice, 500, "a URL with more in-links outranks one with fewer");
        let dropped = scheduler.metrics.frontier_dropped.with_label_values(&["total"]).get();
        assert!(dropped > 0);
        scheduler.write_changes(&mut store);
        let removed = store.take_removed();
        let written = store.take_written();
        // Dropped before their record was written, or after: a tombstone each, and no
        // record of a URL held no more.
        assert_eq!(removed.len() as u64, dropped);
        let book = &scheduler.books[&0];
        assert!(written.iter().all(|(_, url, _)| book.find(url).is_some()));
        assert!(removed.iter().all(|(_, url)| book.find(url).is_none()));
        assert_eq!(book.gone(), 0, "more than an eighth dropped: the book was compacted");
        assert_eq!(book.len(), book.frontier_len());
        // A dropped URL linked again is new.
        let again = &removed[0].1;
        scheduler.apply_link(&link(again, Some("http://hub.example/"), 2, 1), 0).unwrap();
        assert!(scheduler.books[&0].find(again).is_some());
    }

    #[test]
    fn a_fetched_url_leaves_its_sites_count() {
        let mut scheduler =
            capped(FrontierArgs { frontier_max_urls_per_site: 10, ..FrontierArgs::default() });
        feed(
            &mut scheduler,
            (0..10).map(|i| link(&format!("http://a.example/{i}.html"), Some("http://a.example/"), 1, 1)),
        );
        scheduler.apply_estimate(&estimate("http://a.example/0.html", 2, true, None), 0).unwrap();
        let site = scheduler.caps.find_site("a.example").unwrap();
        assert_eq!(scheduler.caps.site_frontier[site as usize], 9);
        scheduler.caps.recount(&scheduler.hosts, scheduler.books.values());
        assert_eq!(scheduler.caps.site_frontier[site as usize], 9);
    }

    #[test]
    fn a_frontier_url_costs_at_most_200_bytes() {
        let mut scheduler = capped(FrontierArgs::default());
        let count = 200_000u32;
        let links = (0..count).map(|i| {
            // 60-byte URLs over 2,000 hosts of 200 sites, as a crawl's frontier looks.
            let url = format!("http://www{}.site{}.example/section/{:010}/page.html", i % 10, i % 200, i);
            link(&url, Some("http://hub.example/"), 1, 1)
        });
        for link in links {
            scheduler.apply_link(&link, 0).unwrap();
        }
        let book = &scheduler.books[&0];
        assert_eq!(book.frontier_len(), count as usize);
        let bytes = book.memory().total() + scheduler.caps.bytes() + scheduler.hosts.bytes();
        let per_url = bytes / count as usize;
        assert!(per_url <= 200, "{per_url} bytes a frontier URL");
    }
}
