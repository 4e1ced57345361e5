//! The improved edit distance and the stage's comparison (`docs/algorithms/change-degree.md` §5),
//! on the paper's changes: each of the six kinds, the changed words in one cluster.
//!
//! - `ied_1000_words_5pct/<kind>`: from visible text to result (both texts split into
//!   words and hashed, LCS, IED), the paper's typical page.
//! - `ied_8192_words_25pct/<kind>`: on word hashes, the paper's largest case; the baseline
//!   in the same run is `textbook_dp_lcs`, the O(m·n) dynamic programme alone.
//! - `lcs_100000_words`: the LCS alone at the stage's default `--max-words`, on two words
//!   each filling half of both pages (the pages swapped), against distinct words.
//! - `all_metrics_1000_words_5pct`: IED and the four word baselines together.
//! - `stage_apply_1000_words`: one fetch result through the stage's code: charset, visible
//!   text, words, every metric, the document-frequency update.
//! - `document_frequencies_1000_words`: a 1,000-word version of words new to the default
//!   32 MiB sketch holding 2 million words counted in and out and its words' IDF read,
//!   against one random read per word of a table as large (`baseline_one_read_a_word`).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use recrawl_diff::change::{DiffSettings, Differ};
use recrawl_diff::criteria::{change_pair, change_pair_of, ChangeKind};
use recrawl_diff::degree::{ied, mix, DocumentFrequencies, IedCosts, DEFAULT_SKETCH_BYTES};
use recrawl_diff::lcs::{lcs, reference};
use recrawl_diff::text::{word_hashes, CaseFold};
use recrawl_schemas::FetchResult;
use std::hint::black_box;

fn text_pair(kind: ChangeKind, n: usize, x: usize) -> (String, String) {
    let (old, new) = change_pair_of(kind, n, x, |tag, i| format!("{tag}{i}"));
    (old.join(" "), new.join(" "))
}

fn fetch_result(period: u64, text: &str) -> FetchResult {
    let body = format!(
        "<!doctype html><html><head><meta charset=utf-8><title>page</title>\
         <script>var tracking = 1;</script></head><body><p>{text}</p></body></html>"
    );
    FetchResult::html_page("http://example.com/a.html", "example.com", period, body)
}

fn bench(c: &mut Criterion) {
    let costs = IedCosts::default();
    let mut group = c.benchmark_group("ied_1000_words_5pct");
    group.throughput(Throughput::Elements(1));
    for kind in ChangeKind::ALL {
        let (old, new) = text_pair(kind, 1000, 50);
        group.bench_function(kind.name(), |b| {
            b.iter(|| {
                let a = word_hashes(black_box(&old), CaseFold::None);
                let b = word_hashes(black_box(&new), CaseFold::None);
                ied(&a, &b, costs)
            })
        });
    }
    // The floor: splitting and hashing the two texts alone.
    let (old, new) = text_pair(ChangeKind::Replace, 1000, 50);
    group.bench_function("words_only", |b| {
        b.iter(|| {
            (word_hashes(black_box(&old), CaseFold::None), word_hashes(black_box(&new), CaseFold::None))
        })
    });
    group.finish();

    let mut group = c.benchmark_group("ied_8192_words_25pct");
    group.throughput(Throughput::Elements(1));
    for kind in ChangeKind::ALL {
        let (old, new) = change_pair(kind, 8192, 2048);
        group.bench_function(kind.name(), |b| b.iter(|| ied(black_box(&old), black_box(&new), costs)));
    }
    // The DP's cost does not depend on the kind; one pair stands for all.
    let (old, new) = change_pair(ChangeKind::Move, 8192, 2048);
    group.sample_size(10);
    group.bench_function("textbook_dp_lcs", |b| b.iter(|| reference::lcs(black_box(&old), black_box(&new))));
    group.finish();

    // The LCS at the stage's --max-words: two words of 50,000 columns each, swapped, whose
    // rows took 7 s walking each word's columns; the baseline is 100,000 distinct words
    // with a quarter of them moved, as far from the greedy bound.
    let mut group = c.benchmark_group("lcs_100000_words");
    group.sample_size(10);
    let halves: Vec<u64> = [vec![1; 50_000], vec![2; 50_000]].concat();
    let swapped: Vec<u64> = [vec![2; 50_000], vec![1; 50_000]].concat();
    group.bench_function("two_words_swapped_halves", |b| {
        b.iter(|| lcs(black_box(&halves), black_box(&swapped)))
    });
    let distinct: Vec<u64> = (0..100_000).collect();
    let mut moved = distinct.clone();
    moved[10_000..60_000].rotate_left(25_000);
    group.bench_function("baseline_distinct_words_quarter_moved", |b| {
        b.iter(|| lcs(black_box(&distinct), black_box(&moved)))
    });
    group.finish();

    let differ = Differ::new(DiffSettings::default());
    let (old, new) = change_pair(ChangeKind::Replace, 1000, 50);
    c.bench_function("all_metrics_1000_words_5pct", |b| {
        b.iter(|| differ.degrees(black_box(&old), black_box(&new), true, false))
    });

    let (old_text, new_text) = text_pair(ChangeKind::Replace, 1000, 50);
    let (first, second) = (fetch_result(1, &old_text), fetch_result(2, &new_text));
    let mut differ = Differ::new(DiffSettings::default());
    let mut kept = None;
    differ.apply(&mut kept, &first);
    let stored = kept.clone();
    let mut group = c.benchmark_group("stage_apply_1000_words");
    group.throughput(Throughput::Bytes(second.body.len() as u64));
    group.bench_function("changed", |b| {
        b.iter(|| {
            let mut kept = stored.clone();
            differ.apply(&mut kept, black_box(&second))
        })
    });
    group.finish();

    // The page of the probe that took diff past 1.4 GB: 100,000 random words, a tenth
    // replaced; its versions keep a sample of 7,000 words at most, which is compared.
    let random = |replaced: u64| -> String {
        let words = (0..100_000u64).map(|i| {
            let word = if i < replaced { i ^ 0xDEAD_BEEF } else { i };
            format!("w{:x}", word.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        });
        words.collect::<Vec<_>>().join(" ")
    };
    let (first, second) = (fetch_result(1, &random(0)), fetch_result(2, &random(10_000)));
    let mut differ = Differ::new(DiffSettings::default());
    let mut kept = None;
    differ.apply(&mut kept, &first);
    let stored = kept.clone();
    let mut group = c.benchmark_group("stage_apply_100000_random_words");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(second.body.len() as u64));
    group.bench_function("tenth_replaced", |b| {
        b.iter(|| {
            let mut kept = stored.clone();
            differ.apply(&mut kept, black_box(&second))
        })
    });
    group.bench_function("baseline_page_words", |b| b.iter(|| differ.version_of(black_box(&second))));
    group.finish();
}

fn sketch(c: &mut Criterion) {
    let document =
        |seed: u64| -> Vec<(u64, u32)> { (0..1_000u64).map(|i| (mix(seed << 20 | i), 1)).collect() };
    let mut corpus = DocumentFrequencies::default();
    for seed in 1..=2_000 {
        corpus.add(&document(seed));
    }
    // Pages of words new to the sketch, more of them than the caches hold, taken in turn.
    let pages: Vec<Vec<(u64, u32)>> = (0..512).map(|page| document(1 << 30 | page)).collect();
    let mut group = c.benchmark_group("document_frequencies_1000_words");
    group.throughput(Throughput::Elements(1_000));
    let mut turn = pages.iter().cycle();
    group.bench_function("add_idf_remove", |b| {
        b.iter(|| {
            let page = turn.next().map_or(&[][..], Vec::as_slice);
            corpus.add(black_box(page));
            let idf: f64 = page.iter().map(|&(word, _)| corpus.idf(word)).sum();
            corpus.remove(black_box(page));
            idf
        })
    });
    let table = vec![0u32; DEFAULT_SKETCH_BYTES / 4];
    let slots = table.len() as u64;
    let mut turn = pages.iter().cycle();
    group.bench_function("baseline_one_read_a_word", |b| {
        b.iter(|| {
            let page = turn.next().map_or(&[][..], Vec::as_slice);
            page.iter()
                .map(|&(word, _)| table[((u128::from(word) * u128::from(slots)) >> 64) as usize])
                .sum::<u32>()
        })
    });
    group.finish();
}

criterion_group!(benches, bench, sketch);
criterion_main!(benches);
