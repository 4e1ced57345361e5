//! Link extraction from a 10 KB page with 20 links (the size of most pages, where each
//! page's setup counts), a 100 KiB page with 1,000 links, and from a hostile page at the
//! body limit: 8 MiB of short relative links against a base URL near the URL limit, so
//! every link resolves to a URL too long to keep. Baseline in the same run: lol_html
//! tokenising the same page with no handlers (the parser's own cost).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lol_html::{HtmlRewriter, Settings};
use recrawl_fetch::links::{extract_links, LinkFilter};
use recrawl_schemas::messages::bounds::MAX_URL_BYTES;
use std::hint::black_box;

mod shared;

fn page() -> Vec<u8> {
    let mut html = String::from("<html><head><title>bench</title></head><body>");
    for i in 0..1000 {
        html.push_str(&format!(
            "<p>Paragraph {i} with some text around a <a href=\"/section/{}/page{i}.html\">link {i}</a> and more words.</p>\n",
            i % 17
        ));
    }
    html.push_str("</body></html>");
    html.into_bytes()
}

/// `<a href=?N>` links filling the fetch stage's default body limit, 8 MiB.
fn hostile_page() -> Vec<u8> {
    let mut html = String::new();
    for n in 0.. {
        if html.len() >= 8 << 20 {
            break;
        }
        html.push_str(&format!("<a href=?{n}>"));
    }
    html.into_bytes()
}

fn tokenise_only(html: &[u8]) {
    let mut rewriter = HtmlRewriter::new(Settings::new(), |_: &[u8]| {});
    rewriter.write(black_box(html)).expect("write");
    rewriter.end().expect("end");
}

fn bench(c: &mut Criterion) {
    let base = url::Url::parse("http://example.com/index.html").expect("url");
    let filter = LinkFilter::default();
    let small = shared::small_page().into_bytes();
    assert_eq!(extract_links(&base, &small, &filter, 1).links.len(), 20);
    let mut group = c.benchmark_group("links_10KB_20_links");
    group.throughput(Throughput::Bytes(small.len() as u64));
    group.bench_function("extract_links", |b| {
        b.iter(|| extract_links(black_box(&base), black_box(&small), &filter, 1))
    });
    group.bench_function("baseline_tokenise_only", |b| b.iter(|| tokenise_only(&small)));
    group.finish();

    let html = page();
    assert_eq!(extract_links(&base, &html, &filter, 1).links.len(), 1000);
    let mut group = c.benchmark_group("links_100KiB_1000_links");
    group.throughput(Throughput::Bytes(html.len() as u64));
    group.bench_function("extract_links", |b| {
        b.iter(|| extract_links(black_box(&base), black_box(&html), &filter, 1))
    });
    group.bench_function("baseline_tokenise_only", |b| b.iter(|| tokenise_only(&html)));
    group.finish();

    let hostile = hostile_page();
    // The longest page URL a pick may hold: `?N` makes every link one too long.
    let long_path = "p".repeat(MAX_URL_BYTES - "http://example.com/".len());
    let long_base = url::Url::parse(&format!("http://example.com/{long_path}")).expect("url");
    let links = extract_links(&long_base, &hostile, &filter, 1);
    assert!(
        links.links.is_empty() && links.cut_short,
        "the hostile page should resolve to nothing kept, cut short"
    );
    let mut group = c.benchmark_group("links_8MiB_hostile");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(hostile.len() as u64));
    group.bench_function("extract_links", |b| {
        b.iter(|| extract_links(black_box(&long_base), black_box(&hostile), &filter, 1))
    });
    group.bench_function("baseline_tokenise_only", |b| b.iter(|| tokenise_only(&hostile)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
