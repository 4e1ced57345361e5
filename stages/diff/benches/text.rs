//! From a fetched body to word hashes (`recrawl_diff::text`), on generated ~1,000-word pages.
//!
//! - `text_1000_words/page_words`: charset, visible text, words and hashes of an English page
//!   with inline markup, entities, a script and a style block; `visible_text` is the HTML
//!   step alone, `baseline_visible_text_html5ever` the html5ever tokenizer it replaced
//!   (`tests/support/html5ever_text.rs`), on the same page in the same run.
//! - `text_real_pages`: both on the pages of the corpus `RECRAWL_TEXT_CORPUS` names (the
//!   article extraction benchmark's, gzipped: see `tests/text_corpus.rs`), all in one
//!   iteration; skipped without it.
//! - `text_1000_words/word_hashes_{ascii,mixed}`: words and hashes of that page's visible
//!   text, as is and with a typographic apostrophe or `©` every few words; the baseline in the
//!   same run is `unicode_words` + xxh3 on the same text, which the ASCII fast path must beat
//!   (`unicode_words` drops to its general path for a whole text with any non-ASCII in it).
//! - `text_korean_euc_kr/page_words_{header,detected}`: a Korean EUC-KR page of ~1,000 words,
//!   its charset from the header or guessed by chardetng.

#[path = "../tests/support/html5ever_text.rs"]
mod html5ever_text;

use std::io::Read;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use html5ever_text::visible_text_html5ever;
use recrawl_diff::text::{page_words, visible_text, word_hashes, CaseFold};
use std::hint::black_box;
use unicode_segmentation::UnicodeSegmentation;
use xxhash_rust::xxh3::xxh3_64;

const ENGLISH: &[&str] = &[
    "the",
    "crawler",
    "fetches",
    "pages",
    "and",
    "measures",
    "how",
    "much",
    "their",
    "text",
    "changed",
    "between",
    "two",
    "downloads",
    "don't",
    "it's",
    "3.14",
    "2005",
    "e.g.",
    "Web",
    "Server",
    "freshness",
    "schedule",
    "period",
    "1,000",
    "search",
    "engine",
    "copies",
    "of",
];

const KOREAN: &[&str] = &[
    "한국어",
    "웹",
    "문서",
    "검색",
    "엔진은",
    "페이지를",
    "주기적으로",
    "다시",
    "내려받아",
    "최신",
    "상태로",
    "유지합니다",
    "똠방각하",
    "변화",
    "정도를",
    "측정합니다",
    "2005년",
    "서울",
];

/// A deterministic sequence of `n` words from `vocabulary`.
fn word_list<'a>(vocabulary: &[&'a str], n: usize) -> Vec<&'a str> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            vocabulary[(state >> 33) as usize % vocabulary.len()]
        })
        .collect()
}

/// An HTML page of `words` in paragraphs of 50, with some inline markup and entities.
fn page(head: &str, words: &[&str]) -> String {
    let mut html = format!(
        "<!DOCTYPE html><html><head>{head}<title>A generated page</title>\
         <style>body {{ font: 14px sans-serif }} p.note {{ color: #333 }}</style>\
         <script>window.dataLayer = []; function track(e) {{ if (e < 3) {{ dataLayer.push(e); }} }}</script>\
         </head><body><div id=main>"
    );
    for paragraph in words.chunks(50) {
        html.push_str("<p class=\"text\">");
        for (i, word) in paragraph.iter().enumerate() {
            match i % 12 {
                3 => html.push_str(&format!("<b>{word}</b> ")),
                7 => html.push_str(&format!("<a href=\"/p/{i}.html\">{word}</a> ")),
                10 => html.push_str(&format!("{word} &amp; ")),
                _ => html.push_str(&format!("{word} ")),
            }
        }
        html.push_str("</p>\n");
    }
    html.push_str("</div><!-- footer --></body></html>");
    html
}

fn unicode_words_xxh3(text: &str) -> Vec<u64> {
    text.unicode_words().map(|w| xxh3_64(w.as_bytes())).collect()
}

fn bench(c: &mut Criterion) {
    let html = page("<meta charset=utf-8>", &word_list(ENGLISH, 1000));
    let ascii = visible_text(&html);
    let mixed = ascii.replace("'", "’").replace(" of ", " © ");
    let mut group = c.benchmark_group("text_1000_words");
    group.throughput(Throughput::Bytes(html.len() as u64));
    group.bench_function("page_words", |b| {
        b.iter(|| page_words(black_box(html.as_bytes()), Some("text/html"), CaseFold::None))
    });
    assert_eq!(visible_text(&html), visible_text_html5ever(&html));
    group.bench_function("visible_text", |b| b.iter(|| visible_text(black_box(&html))));
    group.bench_function("baseline_visible_text_html5ever", |b| {
        b.iter(|| visible_text_html5ever(black_box(&html)))
    });
    group.throughput(Throughput::Bytes(ascii.len() as u64));
    for (name, text) in [("ascii", &ascii), ("mixed", &mixed)] {
        group.bench_function(format!("word_hashes_{name}"), |b| {
            b.iter(|| word_hashes(black_box(text), CaseFold::None))
        });
        group.bench_function(format!("word_hashes_{name}_lower"), |b| {
            b.iter(|| word_hashes(black_box(text), CaseFold::Lower))
        });
        group.bench_function(format!("baseline_unicode_words_{name}"), |b| {
            b.iter(|| unicode_words_xxh3(black_box(text)))
        });
    }
    group.finish();

    if let Some(dir) = std::env::var_os("RECRAWL_TEXT_CORPUS") {
        real_pages(c, std::path::Path::new(&dir).join("html"));
    }

    // One tag of 150,000 attributes in 1 MiB: html5ever compared each attribute with the
    // tag's earlier ones (the old extraction kept 256 of them); the scanner skips them. The
    // baseline is ordinary markup of the same size.
    let names: Vec<String> = (0..150_000).map(|i| format!("x{i:x}")).collect();
    let hostile = format!("<p>text</p><a {}>link</a>", names.join(" "));
    let ordinary = html.repeat(hostile.len().div_ceil(html.len()));
    let mut group = c.benchmark_group("text_hostile_1MiB");
    group.throughput(Throughput::Bytes(hostile.len() as u64));
    group.bench_function("visible_text_150000_attributes", |b| b.iter(|| visible_text(black_box(&hostile))));
    group.bench_function("baseline_visible_text_ordinary", |b| b.iter(|| visible_text(black_box(&ordinary))));
    group.finish();

    let korean = page("", &word_list(KOREAN, 1000));
    let (body, _, _) = encoding_rs::EUC_KR.encode(&korean);
    assert_eq!(page_words(&body, None, CaseFold::None).encoding, "EUC-KR", "chardetng's guess");
    let mut group = c.benchmark_group("text_korean_euc_kr");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("page_words_header", |b| {
        b.iter(|| page_words(black_box(&body), Some("text/html; charset=euc-kr"), CaseFold::None))
    });
    group.bench_function("page_words_detected", |b| {
        b.iter(|| page_words(black_box(&body), None, CaseFold::None))
    });
    group.finish();
}

/// Both extractions over every page of a corpus folder of `*.html.gz`, decoded as UTF-8.
fn real_pages(c: &mut Criterion, dir: std::path::PathBuf) {
    let mut pages = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.map(|e| e.path()).unwrap_or_default();
        let (Ok(file), true) = (std::fs::File::open(&path), path.to_string_lossy().ends_with(".html.gz"))
        else {
            continue;
        };
        let mut html = String::new();
        if flate2::read::GzDecoder::new(file).read_to_string(&mut html).is_ok() {
            pages.push(html);
        }
    }
    let mut group = c.benchmark_group("text_real_pages");
    group.throughput(Throughput::Bytes(pages.iter().map(|p| p.len() as u64).sum()));
    group.sample_size(20);
    group.bench_function(format!("visible_text_{}_pages", pages.len()), |b| {
        b.iter(|| pages.iter().map(|p| visible_text(black_box(p)).len()).sum::<usize>())
    });
    group.bench_function(format!("baseline_visible_text_html5ever_{}_pages", pages.len()), |b| {
        b.iter(|| pages.iter().map(|p| visible_text_html5ever(black_box(p)).len()).sum::<usize>())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
