//! The codec on a typical fetch result (48 KiB body, bincode envelope) and change event
//! (plain JSON with its schema tag). Baseline in the same run: the same values through
//! serde_json alone.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use recrawl_schemas::{
    decode, encode, ChangeDegrees, ChangeEvent, FetchOutcome, FetchResult, IedOps, Message, PageRef, UtcTime,
};
use std::hint::black_box;

fn fetch_result() -> FetchResult {
    let body: Vec<u8> = (0..48 * 1024).map(|i| b"<p>lorem ipsum dolor sit amet</p>\n"[i % 34]).collect();
    FetchResult {
        url: "http://example.com/some/page.html".into(),
        url_key: recrawl_schemas::url_key("http://example.com/some/page.html"),
        host: "example.com".into(),
        group: "example.com".into(),
        period: 1234,
        outcome: FetchOutcome::Downloaded,
        http_status: Some(200),
        latency_ms: 35.5,
        size_bytes: body.len() as u64,
        body,
        content_type: Some("text/html; charset=utf-8".into()),
        etag: Some("\"abc\"".into()),
        last_modified: Some("Sat, 21 Nov 2026 10:00:00 GMT".into()),
        final_url: None,
        error: None,
        fetched_at_ms: 1_795_000_000_000,
        depth: 1,
        crawl_delay_ms: None,
        redirects: Vec::new(),
        retry_after_ms: None,
        exchange: None,
    }
}

fn change_event() -> ChangeEvent {
    ChangeEvent {
        page: PageRef::new("http://example.com/some/page.html", "example.com"),
        period: 1234,
        downloaded: true,
        outcome: FetchOutcome::Downloaded,
        http_status: Some(200),
        latency_ms: 35.5,
        size_bytes: 49152,
        previous_size_bytes: Some(4084),
        size_change_bytes: Some(12),
        first_seen: false,
        changed: Some(true),
        text_changed: Some(true),
        content_hash: Some("00112233445566778899aabbccddeeff".into()),
        previous_content_hash: Some("ffeeddccbbaa99887766554433221100".into()),
        text_hash: Some("0123456789abcdef".into()),
        encoding: Some("UTF-8".into()),
        words: Some(1012),
        previous_words: Some(1000),
        degrees: Some(ChangeDegrees {
            bw: 1.0,
            cos: Some(0.01),
            wd: Some(0.02),
            ed: Some(0.03),
            sh: Some(0.1),
            sh_k: Some(10),
            ied: 0.02,
            ied_cost: 20.25,
            ied_ops: IedOps { add: 12, copy: 3, drop: 0, shrink: 0, replace: 6, moves: 0 },
            ied_s: 0.75,
            ied_t: 0.75,
            truncated: false,
        }),
        fetched_at: UtcTime::from_ms(1_795_000_000_000),
        fetched_at_ms: 1_795_000_000_000,
        crawl_delay_ms: None,
        etag: None,
        last_modified: None,
    }
}

fn bench(c: &mut Criterion) {
    let result = fetch_result();
    let encoded = encode(&result).expect("encode");
    let json = serde_json::to_vec(&result).expect("json");
    let mut group = c.benchmark_group("fetch_result_48KiB");
    group.throughput(Throughput::Bytes(result.body.len() as u64));
    group.bench_function("envelope_encode", |b| b.iter(|| encode(black_box(&result))));
    group.bench_function("envelope_decode", |b| b.iter(|| decode::<FetchResult>(black_box(&encoded))));
    group.bench_function("baseline_json_decode", |b| {
        b.iter(|| serde_json::from_slice::<FetchResult>(black_box(&json)))
    });
    group.finish();

    let event = change_event();
    let encoded = encode(&event).expect("encode");
    let json = serde_json::to_vec(&event).expect("json");
    let mut group = c.benchmark_group("change_event");
    group.bench_function("plain_json_encode", |b| b.iter(|| encode(black_box(&event))));
    group.bench_function("baseline_json_encode", |b| b.iter(|| serde_json::to_vec(black_box(&event))));
    group.bench_function("plain_json_decode", |b| b.iter(|| decode::<ChangeEvent>(black_box(&encoded))));
    // Every reader checks what it decodes, and the stage that makes an event checks it too.
    group.bench_function("validate", |b| b.iter(|| black_box(&event).validate()));
    group.bench_function("baseline_json_decode", |b| {
        b.iter(|| serde_json::from_slice::<ChangeEvent>(black_box(&json)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
