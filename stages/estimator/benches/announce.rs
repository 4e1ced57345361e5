//! The estimator's per-announcement path: a sitemap's date for a tracked URL counted in
//! its claimed changes (`Estimator::announce`), the work `recrawl-estimator` does for each
//! record of `announcements` (a sitemap poll brings one per page it lists), without Kafka.
//!
//! - `announce/sitemap_read`: one read of a sitemap listing 20,000 tracked URLs (4
//!   partitions), a third of them dated past the read before, after 3 reads.
//! - `announce/lookup_only` (baseline, same run): the same URLs' state looked up, nothing
//!   counted: what finding a URL's state costs before its claim.

mod support;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use recrawl_common::StateStore;
use recrawl_estimator::estimate::{Estimator, Settings};
use recrawl_schemas::{AnnouncingDocument, ChangeEvent, PageAnnouncement, PageRef, RequestOutcome, UtcTime};
use support::clone_store;

const URLS: u64 = 20_000;
const HOUR: i64 = 3_600_000;
const READS_BEFORE: u64 = 3;

fn url(index: u64) -> String {
    format!("http://h{}.example/{index}.html", index % 97)
}

/// The sitemap read of hour `read`: URL `index` last changed at the read before if it
/// changes every third read, or at read 0 otherwise.
fn read(read: u64) -> Vec<(i32, PageAnnouncement)> {
    let seen_ms = 1_780_000_000_000 + read as i64 * HOUR;
    (0..URLS)
        .map(|index| {
            let changed_ms =
                if (index + read).is_multiple_of(3) { seen_ms - HOUR / 2 } else { 1_780_000_000_000 };
            let page = PageRef::of_url(&url(index)).expect("url");
            let source =
                PageRef::of_url(&format!("http://h{}.example/sitemap.xml", index % 97)).expect("url");
            let announcement = PageAnnouncement {
                page,
                source,
                document: AnnouncingDocument::Sitemap,
                period: read,
                fetched_at: UtcTime::from_ms(seen_ms),
                fetched_at_ms: seen_ms,
                claimed_modified: Some(UtcTime::from_ms(changed_ms)),
                claimed_modified_ms: Some(changed_ms),
                change_frequency: None,
                priority: None,
                depth: 1,
            };
            ((index % 4) as i32, announcement)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut estimator = Estimator::new(Settings::default());
    let mut state = StateStore::default();
    for index in 0..URLS {
        let outcome =
            RequestOutcome { period: 1, downloaded: true, changed: None, fetched_at_ms: 1_780_000_000_000 };
        let event = ChangeEvent::request(&url(index), &format!("h{}.example", index % 97), outcome);
        estimator.apply(&event, (index % 4) as i32, &mut state, 0);
    }
    for before in 1..=READS_BEFORE {
        for (partition, announcement) in read(before) {
            estimator.announce(&announcement, partition, &mut state, i64::MAX);
        }
    }
    state.take_dirty();
    let measured = read(READS_BEFORE + 1);
    let mut group = c.benchmark_group("announce");
    group.throughput(Throughput::Elements(URLS));
    group.sample_size(20);
    group.bench_function("sitemap_read", |b| {
        b.iter_batched_ref(
            || clone_store(&state),
            |copy| {
                for (partition, announcement) in &measured {
                    std::hint::black_box(estimator.announce(announcement, *partition, copy, i64::MAX));
                }
                copy.take_dirty();
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("lookup_only", |b| {
        b.iter_batched_ref(
            || clone_store(&state),
            |copy| {
                for (partition, announcement) in &measured {
                    std::hint::black_box(copy.get(*partition, &announcement.page.url));
                }
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
