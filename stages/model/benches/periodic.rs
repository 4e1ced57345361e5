//! The `freshness` policy's index for a rate that follows the day
//! (`docs/algorithms/freshness-limits.md`, "Time of day"), against the constant index.
//!
//! - `freshness_index/constant`: the constant index at the best rate of a credible range,
//!   a page as the scheduler scores one without a day profile (the baseline).
//! - `freshness_index/periodic`: the same page on a host with a day profile, its table
//!   already solved: the correction from the table and the first term's integration.
//! - `freshness_index/periodic_bound`: the correction and the bound that lets a period
//!   pass over most pages.
//! - `periodic_table/solve`: solving one table cold (a rate of 0.1 an hour, amplitude
//!   0.6, ν of 2 freshness·hours: an interval of about 9 hours), as a period does once
//!   per new bucket.

use criterion::{criterion_group, criterion_main, Criterion};
use recrawl_model::freshness::best_freshness_index;
use recrawl_model::periodic::{DayTables, PeriodicPage};
use std::hint::black_box;

fn periodic(c: &mut Criterion) {
    // 30 hours old, 7 hours past its host's peak.
    let page = PeriodicPage { rate: 0.1, amplitude: 0.6, age: 30.0, since_peak: 7.0, multiplier: 2.0 };
    let mut group = c.benchmark_group("freshness_index");
    group.bench_function("constant", |b| {
        b.iter(|| best_freshness_index(black_box(0.08), 0.125, black_box(30.0)))
    });
    let mut tables = DayTables::default();
    tables.correction(&page);
    group.bench_function("periodic", |b| {
        b.iter(|| tables.correction(black_box(&page)).map(|correction| page.index(correction)))
    });
    group.bench_function("periodic_bound", |b| {
        b.iter(|| tables.correction(black_box(&page)).map(|correction| page.bound(correction)))
    });
    group.finish();
    c.bench_function("periodic_table/solve", |b| {
        b.iter(|| DayTables::default().correction(black_box(&page)))
    });
}

criterion_group!(benches, periodic);
criterion_main!(benches);
