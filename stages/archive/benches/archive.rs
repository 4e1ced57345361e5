//! The archive's hot path on 100 HTML pages of 40 KB with their exchanges: each result
//! made into its WARC records (SHA-1 digests of payload and block, the request), each
//! record gzipped as a member of its own, and its index line (SURT key, JSON). Baseline in
//! the same run: the same bodies gzipped alone, each a member of its own at the same
//! level, the least any archive of them must do. Also the same pages fetched again
//! unchanged: revisits, whose payload is digested but not stored.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use flate2::Compression;
use recrawl_archive::capture::{archive, Capture};
use recrawl_archive::cdxj::IndexEntry;
use recrawl_archive::warc::Gzip;
use recrawl_schemas::{FetchResult, HttpExchange, HttpHeader};

/// An HTML page of `bytes` from a vocabulary, different for each `seed`.
fn page(seed: u64, bytes: usize) -> Vec<u8> {
    const WORDS: [&str; 24] = [
        "the", "archive", "keeps", "fresh", "copies", "of", "pages", "crawled", "again", "when", "they",
        "change", "revisit", "records", "refer", "to", "earlier", "captures", "payload", "digest", "site",
        "news", "price", "update",
    ];
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    let mut html = String::from("<html><head><title>page</title></head><body>");
    while html.len() < bytes {
        html.push_str("<p>");
        for _ in 0..12 {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            html.push_str(WORDS[(state >> 33) as usize % WORDS.len()]);
            html.push(' ');
        }
        html.push_str("</p>\n");
    }
    html.push_str("</body></html>");
    html.into_bytes()
}

fn results(pages: usize, bytes: usize) -> Vec<FetchResult> {
    let header = |name: &str, value: &str| HttpHeader { name: name.into(), value: value.as_bytes().to_vec() };
    (0..pages)
        .map(|i| {
            let url = format!("http://site{}.example/section/page-{i}.html?lang=en", i % 10);
            let mut result =
                FetchResult::html_page(&url, &format!("site{}.example", i % 10), 7, page(i as u64, bytes));
            result.fetched_at_ms = 1_780_000_000_000 + i as i64 * 1000;
            result.exchange = Some(HttpExchange {
                method: "GET".into(),
                target: format!("/section/page-{i}.html?lang=en"),
                http_version: "HTTP/1.1".into(),
                request_headers: vec![
                    header("host", &format!("site{}.example", i % 10)),
                    header("user-agent", "recrawl/0.1"),
                    header("accept", "*/*"),
                    header("accept-encoding", "gzip, deflate, br"),
                ],
                reason: "OK".into(),
                response_headers: vec![
                    header("content-type", "text/html; charset=utf-8"),
                    header("date", "Sat, 05 Dec 2026 12:00:00 GMT"),
                    header("etag", "\"abcdef\""),
                    header("cache-control", "max-age=60"),
                ],
                headers_left_out: 0,
                remote_ip: Some("192.0.2.7".into()),
            });
            result
        })
        .collect()
}

/// What the stage does with each result, in memory: the bytes it would append.
fn archive_all(results: &[FetchResult], last: &[Option<Capture>], out: &mut Vec<u8>) -> usize {
    let mut gzip = Gzip::new(Compression::default());
    let mut lines = 0;
    for (offset, (result, last)) in results.iter().zip(last).enumerate() {
        let Some(archived) = archive(result, last.as_ref(), offset as i64 + 100, "<urn:uuid:w>", false)
        else {
            continue;
        };
        let start = out.len();
        for record in &archived.records {
            record.write_gzip(&mut gzip, out).expect("gzip");
        }
        let line = IndexEntry {
            target_uri: archived.target_uri,
            date_ms: archived.fetched_at_ms,
            mime: archived.mime.as_deref(),
            status: Some(archived.status),
            digest: &archived.digest,
            length: (out.len() - start) as u64,
            offset: start as u64,
            filename: "recrawl-20261205120000000-00001-host-p0.warc.gz",
        }
        .line();
        lines += line.len();
    }
    lines
}

fn gzip_bodies(results: &[FetchResult], out: &mut Vec<u8>) {
    let mut gzip = Gzip::new(Compression::default());
    for result in results {
        gzip.member(&[&result.body], out).expect("gzip");
    }
}

fn bench(c: &mut Criterion) {
    // 40 KiB pages; 3 KiB ones, as the simulated web's median, where each record's fixed
    // costs (its deflate state, its WARC and HTTP headers) weigh more.
    for (pages, bytes) in [(100, 40 * 1024), (1000, 3 * 1024)] {
        let results = results(pages, bytes);
        let total: u64 = results.iter().map(|r| r.body.len() as u64).sum();
        let first: Vec<Option<Capture>> = vec![None; results.len()];
        // The state after a first crawl: every page captured, at an earlier offset.
        let captured: Vec<Option<Capture>> = results
            .iter()
            .enumerate()
            .map(|(offset, result)| archive(result, None, offset as i64, "w", false).and_then(|a| a.capture))
            .collect();
        let mut group = c.benchmark_group(format!("archive_{pages}_pages_{}KiB", bytes / 1024));
        group.throughput(Throughput::Bytes(total));
        group.bench_function("baseline_gzip_bodies_alone", |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(total as usize / 3);
                gzip_bodies(black_box(&results), &mut out);
                out.len()
            })
        });
        group.bench_function("archive_responses", |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(total as usize / 3);
                archive_all(black_box(&results), &first, &mut out);
                out.len()
            })
        });
        group.bench_function("archive_revisits", |b| {
            b.iter(|| {
                let mut out = Vec::new();
                archive_all(black_box(&results), &captured, &mut out);
                out.len()
            })
        });
        group.finish();
        let (mut gzipped, mut archived, mut revisited) = (Vec::new(), Vec::new(), Vec::new());
        gzip_bodies(&results, &mut gzipped);
        let index = archive_all(&results, &first, &mut archived);
        archive_all(&results, &captured, &mut revisited);
        eprintln!(
            "{pages} pages, {total} body bytes: gzip alone {} bytes; archived as responses {} bytes (+{index} of index); as revisits {} bytes",
            gzipped.len(),
            archived.len(),
            revisited.len()
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
