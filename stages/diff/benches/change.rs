//! Change detection on a 100 KiB body. Baseline in the same run: xxh3-128 of the body
//! alone, the floor for any content comparison.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use recrawl_diff::change::{compare, PageVersion};
use recrawl_schemas::{FetchOutcome, FetchResult};
use std::hint::black_box;
use xxhash_rust::xxh3::xxh3_128;

fn bench(c: &mut Criterion) {
    let body: Vec<u8> = (0..100 * 1024u32).map(|i| (i % 251) as u8).collect();
    let result = FetchResult {
        url: "http://example.com/a.html".into(),
        url_key: recrawl_schemas::url_key("http://example.com/a.html"),
        host: "example.com".into(),
        group: "example.com".into(),
        period: 2,
        outcome: FetchOutcome::Downloaded,
        http_status: Some(200),
        latency_ms: 10.0,
        size_bytes: body.len() as u64,
        body: body.clone(),
        content_type: None,
        etag: None,
        last_modified: None,
        final_url: None,
        error: None,
        fetched_at_ms: 0,
    };
    let previous = PageVersion { content_hash: 7, size_bytes: 10, period: 1 };
    let mut group = c.benchmark_group("diff_100KiB");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("compare", |b| b.iter(|| compare(black_box(Some(&previous)), black_box(&result))));
    group.bench_function("baseline_xxh3_128", |b| b.iter(|| xxh3_128(black_box(&body))));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
