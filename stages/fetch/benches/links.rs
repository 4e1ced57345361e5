//! Link extraction from a 100 KiB page with 1,000 links. Baseline in the same run:
//! lol_html tokenising the same page with no handlers (the parser's own cost).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lol_html::{HtmlRewriter, Settings};
use recrawl_fetch::links::{extract_links, LinkFilter};
use std::hint::black_box;

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

fn bench(c: &mut Criterion) {
    let html = page();
    let base = url::Url::parse("http://example.com/index.html").expect("url");
    let filter = LinkFilter::default();
    assert_eq!(extract_links(&base, &html, &filter, 1).links.len(), 1000);
    let mut group = c.benchmark_group("links_100KiB_1000_links");
    group.throughput(Throughput::Bytes(html.len() as u64));
    group.bench_function("extract_links", |b| {
        b.iter(|| extract_links(black_box(&base), black_box(&html), &filter, 1))
    });
    group.bench_function("baseline_tokenise_only", |b| {
        b.iter(|| {
            let mut rewriter = HtmlRewriter::new(Settings::new(), |_: &[u8]| {});
            rewriter.write(black_box(&html)).expect("write");
            rewriter.end().expect("end");
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
