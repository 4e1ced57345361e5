//! Reading a sitemap of the protocol's 50,000 entries (`read_announcements`), plain and
//! gzip, and the records the stage publishes from it (`announcements::of_download`).
//! Baselines in the same run: quick-xml's bare event loop over the same bytes, which
//! decodes and keeps nothing, and gunzip alone.

use std::hint::black_box;
use std::io::{Read, Write};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use quick_xml::events::Event;
use recrawl_fetch::announce::{read_announcements, AnnouncementLimits};
use recrawl_fetch::announcements::of_download;
use recrawl_schemas::FetchResult;
use url::Url;

const SITEMAP_URL: &str = "https://www.example.com/sitemap.xml";

/// 50,000 entries as news sites write them: a dated `<lastmod>`, most with a frequency
/// and a priority.
fn sitemap() -> Vec<u8> {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n",
    );
    for n in 0..50_000 {
        xml.push_str(&format!(
            "<url><loc>https://www.example.com/news/2024/05/{:02}/story-{n}-about-something.html</loc>\
             <lastmod>2024-05-{:02}T{:02}:{:02}:00+00:00</lastmod><changefreq>daily</changefreq>\
             <priority>0.{}</priority></url>\n",
            n % 28 + 1,
            n % 28 + 1,
            n % 24,
            n % 60,
            n % 9 + 1
        ));
    }
    xml.push_str("</urlset>\n");
    xml.into_bytes()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("in memory");
    encoder.finish().expect("in memory")
}

/// Every event of the document, nothing kept: what reading it costs at the least.
fn bare_events(xml: &[u8]) -> usize {
    let mut reader = quick_xml::Reader::from_reader(xml);
    let (mut buffer, mut events) = (Vec::new(), 0);
    loop {
        match reader.read_event_into(&mut buffer) {
            Ok(Event::Eof) | Err(_) => return events,
            Ok(_) => events += 1,
        }
        buffer.clear();
    }
}

fn bench(c: &mut Criterion) {
    let xml = sitemap();
    let gzipped = gzip(&xml);
    let url = Url::parse(SITEMAP_URL).expect("url");
    let limits = AnnouncementLimits::default();
    let read = read_announcements(&url, &xml, &limits).expect("a sitemap");
    assert_eq!(read.entries.len(), 50_000);
    assert_eq!(read_announcements(&url, &gzipped, &limits).expect("gzip").entries, read.entries);
    let result = FetchResult {
        content_type: Some("application/xml".to_owned()),
        ..FetchResult::html_page(SITEMAP_URL, "www.example.com", 1, xml.clone())
    };
    assert_eq!(of_download(&result, &limits).records.len(), 50_000);

    let mut group = c.benchmark_group("announce");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(xml.len() as u64));
    group.bench_function("bare_quick_xml_events", |b| b.iter(|| bare_events(black_box(&xml))));
    group.bench_function("read_sitemap", |b| b.iter(|| read_announcements(&url, black_box(&xml), &limits)));
    group.bench_function("records_of_sitemap", |b| b.iter(|| of_download(black_box(&result), &limits)));
    group.bench_function("gunzip_only", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(xml.len());
            flate2::read::GzDecoder::new(black_box(gzipped.as_slice())).read_to_end(&mut out).expect("gzip");
            out.len()
        })
    });
    group.bench_function("read_sitemap_gzip", |b| {
        b.iter(|| read_announcements(&url, black_box(&gzipped), &limits))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
