//! Running group distributions shared across estimator instances (`docs/algorithms/estimator.md` §3).
//!
//! Each instance keeps, for every (partition, group) it owns, the counts of eligible URLs
//! per fine DR and MR bin ([`Partial`]), and publishes them. Every instance files its own
//! and everyone else's partials in a [`DistributionBook`]; a group's distribution is the
//! sum over partitions. Pure: no Kafka here.
//!
//! Predictions for requests of period t use, per partition, the latest partial that covers
//! only periods before t. A period's requests therefore never see each other, and once all
//! instances have read each other's partials for the periods before t, every deployment
//! (one instance or many) predicts period t from the same numbers.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use recrawl_common::state::KeyHashState;
use recrawl_schemas::{GroupDistribution, UtcTime};
use thiserror::Error;

use recrawl_model::prediction::{coarse_of_fine, PreparedPrior, RateHistogram, COARSE_BINS, FINE_BINS};

/// Non-zero counts per fine bin, sorted by bin. Sparse because most groups (a host, a
/// domain) have few distinct rates, and the book keeps a few copies per partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SparseCounts(Vec<(u8, u64)>);

impl recrawl_model::page::FineBinCounts for SparseCounts {
    fn add_bin(&mut self, bin: u8) {
        self.add(bin);
    }

    fn remove_bin(&mut self, bin: u8) {
        self.remove(bin);
    }
}

impl SparseCounts {
    pub fn add(&mut self, bin: u8) {
        match self.0.binary_search_by_key(&bin, |(b, _)| *b) {
            Ok(at) => self.0[at].1 = self.0[at].1.saturating_add(1),
            Err(at) => self.0.insert(at, (bin, 1)),
        }
    }

    pub fn remove(&mut self, bin: u8) {
        if let Ok(at) = self.0.binary_search_by_key(&bin, |(b, _)| *b) {
            self.0[at].1 = self.0[at].1.saturating_sub(1);
            if self.0[at].1 == 0 {
                self.0.remove(at);
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (u8, u64)> + '_ {
        self.0.iter().copied()
    }

    pub fn total(&self) -> u64 {
        self.0.iter().map(|(_, n)| n).sum()
    }

    fn fine(&self) -> Vec<u64> {
        let mut fine = [0; FINE_BINS];
        self.add_into(&mut fine);
        fine.to_vec()
    }

    fn coarse(&self) -> [u64; COARSE_BINS] {
        let mut coarse = [0u64; COARSE_BINS];
        for (bin, count) in self.iter() {
            let sum = &mut coarse[coarse_of_fine(usize::from(bin))];
            *sum = sum.saturating_add(count);
        }
        coarse
    }

    fn from_fine(fine: &[u64]) -> Self {
        Self(fine.iter().zip(0u8..).filter(|(n, _)| **n > 0).map(|(n, bin)| (bin, *n)).collect())
    }

    fn add_into(&self, fine: &mut [u64; FINE_BINS]) {
        for (bin, count) in self.iter() {
            fine[usize::from(bin)] = fine[usize::from(bin)].saturating_add(count);
        }
    }
}

/// One partition's share of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    /// The latest period applied; the counts cover periods up to it.
    pub period: u64,
    pub first_period: u64,
    pub urls: u64,
    pub requests: u64,
    pub download: SparseCounts,
    pub change: SparseCounts,
}

impl Default for Partial {
    fn default() -> Self {
        Self {
            period: 0,
            first_period: u64::MAX,
            urls: 0,
            requests: 0,
            download: SparseCounts::default(),
            change: SparseCounts::default(),
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DistributionError {
    #[error("{field} has {found} bins, not {FINE_BINS}")]
    Bins { field: &'static str, found: usize },
    #[error("fine and coarse bins of {field} disagree")]
    Coarse { field: &'static str },
}

impl Partial {
    pub fn to_message(&self, group: &str, partition: i32, published_at_ms: i64) -> GroupDistribution {
        GroupDistribution {
            group: group.to_owned(),
            partition,
            period: self.period,
            first_period: self.first_period,
            urls: self.urls,
            requests: self.requests,
            download_rate_bins: self.download.coarse(),
            modification_rate_bins: self.change.coarse(),
            download_rate_fine: self.download.fine(),
            modification_rate_fine: self.change.fine(),
            published_at: UtcTime::from_ms(published_at_ms),
            published_at_ms,
        }
    }

    /// Reads a published partial, checking that its bins are consistent.
    pub fn from_message(message: &GroupDistribution) -> Result<Self, DistributionError> {
        let read = |field: &'static str, fine: &[u64], coarse: &[u64; COARSE_BINS]| {
            if fine.len() != FINE_BINS {
                return Err(DistributionError::Bins { field, found: fine.len() });
            }
            let counts = SparseCounts::from_fine(fine);
            if counts.coarse() != *coarse {
                return Err(DistributionError::Coarse { field });
            }
            Ok(counts)
        };
        Ok(Self {
            period: message.period,
            first_period: message.first_period,
            urls: message.urls,
            requests: message.requests,
            download: read("download_rate_fine", &message.download_rate_fine, &message.download_rate_bins)?,
            change: read(
                "modification_rate_fine",
                &message.modification_rate_fine,
                &message.modification_rate_bins,
            )?,
        })
    }
}

/// The snapshots of one (group, partition) kept: enough periods for requests of adjacent
/// periods arriving interleaved.
const SNAPSHOTS_KEPT: usize = 3;

/// A group's distribution as predictions use it.
#[derive(Debug)]
pub struct GroupView {
    /// Partitions that contributed.
    pub partitions: usize,
    /// The group's earliest first-request period, if any partition reported one.
    pub first_period: Option<u64>,
    pub urls: u64,
    pub requests: u64,
    pub download: RateHistogram,
    pub change: RateHistogram,
    pub download_prior: PreparedPrior,
    pub change_prior: PreparedPrior,
}

#[derive(Debug, Default)]
struct GroupBook {
    /// Each partition's latest partials, oldest first, at most [`SNAPSHOTS_KEPT`]; by
    /// partition. Vectors, not maps: a group with a URL or two is the common case, and a
    /// map's node is sized for eleven.
    partitions: Vec<(i32, Vec<Partial>)>,
    version: u64,
    /// The view last asked for, while it is among the book's [`MAX_CACHED_VIEWS`].
    cached: Option<CachedView>,
}

#[derive(Debug)]
struct CachedView {
    before: u64,
    version: u64,
    /// When it was cached: which entry of the book's queue is this view's.
    stamp: u64,
    view: Arc<GroupView>,
}

/// Most groups whose view a book keeps. A view is about 5 KB (two histograms, two
/// prepared priors) and up to 8 KiB of forecasts: 2,048 views are at most about 27 MB,
/// whatever the groups, where a view kept for every group cost more than the rest of a
/// group with one URL. A view is asked again at each of the group's events of a period;
/// the shares filed meanwhile, of that period or later, leave it as it is.
pub const MAX_CACHED_VIEWS: usize = 2048;

/// Whether [`DistributionBook::insert`] kept a partial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filed {
    Kept,
    /// An older record than one already held (a replay, or a late echo).
    Stale,
    /// Another instance's share of a group new to a book that holds its most groups.
    Full,
}

/// Totals of a group over the latest partial of every partition (for metrics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupTotals {
    pub partitions: usize,
    pub urls: u64,
    pub requests: u64,
    pub download: [u64; COARSE_BINS],
    pub change: [u64; COARSE_BINS],
}

/// Every partition's latest partials of every group this instance has heard of.
#[derive(Debug)]
pub struct DistributionBook {
    /// Looked up at every event: hashed as the state's keys are, not with SipHash.
    groups: HashMap<String, GroupBook, KeyHashState>,
    /// Largest exponent the prepared priors tabulate (window + future).
    max_exponent: u32,
    /// Most groups filed from other instances' shares: the topic's group names are
    /// remote input, and each costs memory on every instance.
    max_groups: usize,
    /// Groups with a cached view, oldest first, each with the stamp it was cached under
    /// (an entry whose group was cached again since is stale).
    cached_order: VecDeque<(String, u64)>,
    cached_views: usize,
    next_stamp: u64,
}

impl DistributionBook {
    pub fn new(max_exponent: u32, max_groups: usize) -> Self {
        Self {
            groups: HashMap::default(),
            max_exponent,
            max_groups,
            cached_order: VecDeque::new(),
            cached_views: 0,
            next_stamp: 0,
        }
    }

    /// [`DistributionBook::insert`] for another instance's share: refused ([`Filed::Full`])
    /// for a group the book does not hold once it holds its most groups. This instance's
    /// own partials always go in, bounded by its own URLs.
    pub fn insert_shared(&mut self, group: &str, partition: i32, partial: Partial) -> Filed {
        if self.groups.len() >= self.max_groups && !self.groups.contains_key(group) {
            return Filed::Full;
        }
        self.insert(group, partition, partial)
    }

    /// Groups held.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Files `partial` for (group, partition); for one period the record with the most
    /// requests wins, and only the latest periods are kept.
    pub fn insert(&mut self, group: &str, partition: i32, partial: Partial) -> Filed {
        let book = match self.groups.get_mut(group) {
            Some(book) => book,
            None => self.groups.entry(group.to_owned()).or_default(),
        };
        let at = match book.partitions.binary_search_by_key(&partition, |(p, _)| *p) {
            Ok(at) => at,
            Err(at) => {
                book.partitions.insert(at, (partition, Vec::with_capacity(SNAPSHOTS_KEPT)));
                at
            }
        };
        let Some((_, snapshots)) = book.partitions.get_mut(at) else { return Filed::Stale };
        let period = partial.period;
        let mut forgot_earlier = None;
        match snapshots.binary_search_by_key(&period, |held| held.period) {
            Ok(at) => {
                let Some(held) = snapshots.get_mut(at) else { return Filed::Stale };
                if held.requests > partial.requests || *held == partial {
                    return Filed::Stale;
                }
                *held = partial;
            }
            // Older than every period kept.
            Err(0) if snapshots.len() >= SNAPSHOTS_KEPT => return Filed::Stale,
            Err(mut at) => {
                while snapshots.len() >= SNAPSHOTS_KEPT {
                    let forgotten = snapshots.remove(0);
                    forgot_earlier = Some(forgotten.period);
                    at = at.saturating_sub(1);
                }
                snapshots.insert(at, partial);
            }
        }
        // The cached view sums each partition's latest partial before its period: a
        // partial of that period or later leaves it as it is, unless the partition's only
        // earlier one was forgotten. The stage files its own partial of the current period
        // after every batch, and a view recomputed then would start its forecasts over.
        let stays = book.cached.as_ref().is_some_and(|cached| {
            period >= cached.before
                && forgot_earlier.is_none_or(|forgotten| {
                    forgotten >= cached.before || snapshots.iter().any(|held| held.period < cached.before)
                })
        });
        if !stays {
            book.version = book.version.wrapping_add(1);
        }
        Filed::Kept
    }

    /// The group's distribution from the partials covering only periods before `before`.
    pub fn view(&mut self, group: &str, before: u64) -> Arc<GroupView> {
        let max_exponent = self.max_exponent;
        let Some(book) = self.groups.get_mut(group) else {
            return Arc::new(sum(std::iter::empty(), max_exponent));
        };
        if let Some(cached) = &book.cached {
            if cached.before == before && cached.version == book.version {
                return cached.view.clone();
            }
        }
        let parts = book
            .partitions
            .iter()
            .filter_map(|(_, snapshots)| snapshots.iter().rev().find(|partial| partial.period < before));
        let view = Arc::new(sum(parts, max_exponent));
        let stamp = self.next_stamp;
        self.next_stamp = stamp.wrapping_add(1);
        let replaced =
            book.cached.replace(CachedView { before, version: book.version, stamp, view: view.clone() });
        if replaced.is_none() {
            self.cached_views = self.cached_views.saturating_add(1);
        }
        self.cached_order.push_back((group.to_owned(), stamp));
        self.forget_views_past_the_cap();
        view
    }

    /// Drops the oldest cached views past [`MAX_CACHED_VIEWS`], and the queue's stale
    /// entries once they outnumber the live ones, so the queue stays within twice them.
    fn forget_views_past_the_cap(&mut self) {
        while self.cached_views > MAX_CACHED_VIEWS {
            let Some((group, stamp)) = self.cached_order.pop_front() else { break };
            if let Some(book) = self.groups.get_mut(&group) {
                if book.cached.as_ref().is_some_and(|cached| cached.stamp == stamp) {
                    book.cached = None;
                    self.cached_views = self.cached_views.saturating_sub(1);
                }
            }
        }
        if self.cached_order.len() > self.cached_views.saturating_mul(2).max(64) {
            let groups = &self.groups;
            self.cached_order.retain(|(group, stamp)| {
                groups
                    .get(group)
                    .and_then(|book| book.cached.as_ref())
                    .is_some_and(|cached| cached.stamp == *stamp)
            });
        }
    }

    /// Groups whose view is cached: at most [`MAX_CACHED_VIEWS`].
    pub fn cached_views(&self) -> usize {
        self.cached_views
    }

    /// Totals over the latest partial of every partition.
    pub fn totals(&self, group: &str) -> Option<GroupTotals> {
        let book = self.groups.get(group)?;
        let mut totals = GroupTotals {
            partitions: 0,
            urls: 0,
            requests: 0,
            download: [0; COARSE_BINS],
            change: [0; COARSE_BINS],
        };
        for partial in book.partitions.iter().filter_map(|(_, snapshots)| snapshots.last()) {
            totals.partitions = totals.partitions.saturating_add(1);
            totals.urls = totals.urls.saturating_add(partial.urls);
            totals.requests = totals.requests.saturating_add(partial.requests);
            for (sum, count) in totals.download.iter_mut().zip(partial.download.coarse()) {
                *sum = sum.saturating_add(count);
            }
            for (sum, count) in totals.change.iter_mut().zip(partial.change.coarse()) {
                *sum = sum.saturating_add(count);
            }
        }
        Some(totals)
    }
}

fn sum<'a>(parts: impl Iterator<Item = &'a Partial>, max_exponent: u32) -> GroupView {
    let mut download = [0; FINE_BINS];
    let mut change = [0; FINE_BINS];
    let (mut partitions, mut urls, mut requests, mut first_period) = (0usize, 0u64, 0u64, None::<u64>);
    for partial in parts {
        partitions = partitions.saturating_add(1);
        urls = urls.saturating_add(partial.urls);
        requests = requests.saturating_add(partial.requests);
        if partial.urls > 0 {
            first_period = Some(first_period.map_or(partial.first_period, |f| f.min(partial.first_period)));
        }
        partial.download.add_into(&mut download);
        partial.change.add_into(&mut change);
    }
    let download = RateHistogram::from_counts(download);
    let change = RateHistogram::from_counts(change);
    GroupView {
        partitions,
        first_period,
        urls,
        requests,
        download_prior: PreparedPrior::new(&download, max_exponent),
        change_prior: PreparedPrior::new(&change, max_exponent),
        download,
        change,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partial(period: u64, requests: u64, download_bins: &[u8]) -> Partial {
        let mut partial = Partial {
            period,
            first_period: 1,
            urls: download_bins.len() as u64,
            requests,
            ..Partial::default()
        };
        download_bins.iter().for_each(|bin| partial.download.add(*bin));
        partial
    }

    #[test]
    fn sparse_counts_add_and_remove() {
        let mut counts = SparseCounts::default();
        [100, 0, 100, 37].into_iter().for_each(|b| counts.add(b));
        counts.remove(0);
        counts.remove(55);
        assert_eq!(counts.iter().collect::<Vec<_>>(), vec![(37, 1), (100, 2)]);
        assert_eq!(counts.total(), 3);
        assert_eq!(counts.coarse()[4], 1, "0.37 is in the 0.30–0.39 bin");
    }

    #[test]
    fn a_view_sums_the_partitions_before_the_period() {
        let mut book = DistributionBook::new(10, 100);
        assert_eq!(book.insert("g", 0, partial(3, 10, &[100, 100])), Filed::Kept);
        assert_eq!(book.insert("g", 0, partial(4, 12, &[100, 100, 0])), Filed::Kept);
        assert_eq!(book.insert("g", 1, partial(3, 5, &[50])), Filed::Kept);
        let at_4 = book.view("g", 4);
        assert_eq!((at_4.partitions, at_4.urls, at_4.requests), (2, 3, 15));
        assert_eq!(at_4.download.counts()[100], 2);
        let at_5 = book.view("g", 5);
        assert_eq!((at_5.urls, at_5.requests, at_5.download.counts()[0]), (4, 17, 1));
        assert_eq!(book.view("g", 3).partitions, 0, "nothing covers only periods before 3");
        assert_eq!(book.view("other", 9).first_period, None);
    }

    #[test]
    fn stale_records_are_not_filed() {
        let mut book = DistributionBook::new(10, 100);
        book.insert("g", 0, partial(5, 10, &[100]));
        assert_eq!(
            book.insert("g", 0, partial(5, 9, &[0])),
            Filed::Stale,
            "fewer requests for the same period"
        );
        assert_eq!(book.insert("g", 0, partial(5, 10, &[100])), Filed::Stale, "an echo");
        book.insert("g", 0, partial(6, 11, &[100]));
        book.insert("g", 0, partial(7, 12, &[100]));
        assert_eq!(book.insert("g", 0, partial(2, 3, &[0])), Filed::Stale, "older than every kept period");
        assert_eq!(book.view("g", 6).requests, 10);
        let totals = book.totals("g").unwrap();
        assert_eq!((totals.partitions, totals.requests, totals.download[11]), (1, 12, 1));
    }

    #[test]
    fn the_cached_view_follows_new_records() {
        let mut book = DistributionBook::new(10, 100);
        book.insert("g", 0, partial(1, 1, &[100]));
        assert_eq!(book.view("g", 2).urls, 1);
        book.insert("g", 1, partial(1, 1, &[100]));
        assert_eq!(book.view("g", 2).urls, 2);
    }

    #[test]
    fn a_partial_of_the_viewed_period_or_later_keeps_the_cached_view() {
        let mut book = DistributionBook::new(10, 100);
        book.insert("g", 0, partial(1, 1, &[100]));
        let before = book.view("g", 2);
        book.insert("g", 0, partial(2, 2, &[100, 0]));
        book.insert("g", 1, partial(3, 1, &[0]));
        assert!(Arc::ptr_eq(&before, &book.view("g", 2)), "nothing before period 2 changed");
        assert_eq!(book.view("g", 4).urls, 3, "a later period's view sees them");
        // Partition 0 holds periods 1–3, its most: a fourth forgets period 1, and the
        // view before 3 still sums period 2; a fifth forgets that too.
        let at_3 = book.view("g", 3);
        assert_eq!(at_3.urls, 2);
        book.insert("g", 0, partial(3, 3, &[100, 0]));
        book.insert("g", 0, partial(4, 4, &[100, 0]));
        assert!(Arc::ptr_eq(&at_3, &book.view("g", 3)), "period 2 is still partition 0's latest before 3");
        book.insert("g", 0, partial(5, 5, &[100, 0]));
        assert_eq!(book.view("g", 3).urls, 0, "partition 0 holds nothing before 3 now");
    }

    /// Whatever is filed and whatever period is asked, the view served (cached or not) is
    /// the sum of each partition's latest partial before that period.
    #[test]
    fn the_view_served_is_always_the_fresh_sum() {
        let mut seed: u64 = 0x1234_5678;
        let mut draw = |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        for _ in 0..300 {
            let mut book = DistributionBook::new(10, 100);
            let mut before = draw(10);
            for _ in 0..60 {
                if draw(4) == 0 {
                    before = draw(10);
                } else {
                    let bins: Vec<u8> = (0..draw(3)).map(|_| draw(101) as u8).collect();
                    book.insert("g", draw(3) as i32, partial(draw(10), draw(5), &bins));
                }
                let served = book.view("g", before);
                let held = book.groups.get("g").into_iter().flat_map(|group| group.partitions.iter());
                let fresh =
                    sum(held.filter_map(|(_, kept)| kept.iter().rev().find(|held| held.period < before)), 10);
                assert_eq!(
                    (served.partitions, served.first_period, served.urls, served.requests),
                    (fresh.partitions, fresh.first_period, fresh.urls, fresh.requests)
                );
                assert_eq!(served.download.counts(), fresh.download.counts());
            }
        }
    }

    #[test]
    fn views_are_kept_for_at_most_the_cap_s_groups_the_latest_asked() {
        let mut book = DistributionBook::new(10, usize::MAX);
        let groups = MAX_CACHED_VIEWS + 100;
        for round in 0..3u64 {
            for g in 0..groups {
                let group = format!("g{g}");
                // A new share makes every view stale: each round computes them all again.
                book.insert(&group, 0, partial(round + 1, round + 1, &[100]));
                assert_eq!(book.view(&group, round + 2).requests, round + 1);
                assert!(book.cached_views() <= MAX_CACHED_VIEWS);
            }
            assert_eq!(book.cached_views(), MAX_CACHED_VIEWS);
            assert!(book.cached_order.len() <= 2 * MAX_CACHED_VIEWS, "{}", book.cached_order.len());
        }
        let cached = |book: &DistributionBook, g: usize| book.groups[&format!("g{g}")].cached.is_some();
        assert!(cached(&book, groups - 1), "the latest asked is kept");
        assert!(!cached(&book, 0), "the first asked was dropped");
        // A view asked again of an unchanged group is the one kept.
        let again = book.view(&format!("g{}", groups - 1), 4);
        assert!(Arc::ptr_eq(&again, &book.view(&format!("g{}", groups - 1), 4)));
        // One group asked over and over keeps one view, and the queue stays bounded.
        let mut few = DistributionBook::new(10, usize::MAX);
        for before in 0..(4 * MAX_CACHED_VIEWS as u64) {
            few.view("g0", before);
            few.insert("g0", 0, partial(before + 1, 1, &[100]));
        }
        assert_eq!(few.cached_views(), 1);
        assert!(few.cached_order.len() <= 64, "{}", few.cached_order.len());
    }

    #[test]
    fn messages_round_trip_and_inconsistent_ones_are_refused() {
        let original = partial(7, 30, &[0, 5, 99, 100, 100]);
        let message = original.to_message("g", 3, 1);
        assert_eq!(message.download_rate_bins, [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(Partial::from_message(&message), Ok(original));
        let mut short = message.clone();
        short.download_rate_fine.pop();
        assert_eq!(
            Partial::from_message(&short),
            Err(DistributionError::Bins { field: "download_rate_fine", found: 100 })
        );
        let mut mismatched = message;
        mismatched.modification_rate_bins[3] = 1;
        assert_eq!(
            Partial::from_message(&mismatched),
            Err(DistributionError::Coarse { field: "modification_rate_fine" })
        );
    }

    #[test]
    fn shares_of_new_groups_are_refused_once_the_book_is_full() {
        let mut book = DistributionBook::new(10, 2);
        assert_eq!(book.insert_shared("a", 0, partial(1, 1, &[100])), Filed::Kept);
        assert_eq!(book.insert_shared("b", 0, partial(1, 1, &[100])), Filed::Kept);
        assert_eq!(book.insert_shared("c", 0, partial(1, 1, &[100])), Filed::Full);
        assert_eq!(book.insert_shared("a", 1, partial(2, 1, &[50])), Filed::Kept, "a group held takes more");
        assert_eq!(book.insert("own", 0, partial(1, 1, &[100])), Filed::Kept, "this instance's own partial");
        assert_eq!(book.groups(), 3);
        assert_eq!(book.view("c", 9).urls, 0);
    }
}
