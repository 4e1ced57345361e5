//! What the diff stage holds per page at the defaults, as a counting allocator measures it
//! (its own test binary: the allocator counts the whole process): the state store's key
//! and record, the kept words, the document frequencies' sketch once. A page of 100,000
//! random words under the longest URL records take stays within 64 KiB.
//!
//! `cargo test --release -p recrawl-diff --test memory -- --nocapture` prints the figures
//! BENCHMARKS.md quotes.

use std::alloc::System;

use recrawl_common::StateStore;
use recrawl_diff::change::{DiffSettings, Differ};
use recrawl_diff::DiffState;
use recrawl_schemas::{bounds, FetchResult};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// A text page of `words` words, distinct per page and word when `random`, else drawn
/// from a vocabulary of 5,000 as prose is.
fn page(url: &str, words: u64, seed: u64, random: bool) -> FetchResult {
    let text: Vec<String> = (0..words)
        .map(|i| {
            let mixed = (seed << 32 | i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            if random {
                format!("w{mixed:x}")
            } else {
                format!("w{}", mixed % 5_000)
            }
        })
        .collect();
    FetchResult {
        content_type: Some("text/plain".into()),
        ..FetchResult::html_page(url, "a.test", 1, text.join(" "))
    }
}

/// Heap bytes held per page once `pages` pages of `words` words are kept, besides the
/// sketch.
fn held_per_page(pages: u64, words: u64, random: bool, url_bytes: usize) -> (usize, usize) {
    let mut differ = Differ::new(DiffSettings::default());
    let mut store: StateStore<DiffState> = StateStore::default();
    // The sketch, allocated at the first page, counted apart.
    let first = page("http://a.test/warm", 10, u64::MAX, random);
    let region = Region::new(ALLOCATOR);
    let mut warm = None;
    differ.apply(&mut warm, &first);
    let sketch = region.change().bytes_allocated.saturating_sub(region.change().bytes_deallocated);
    let region = Region::new(ALLOCATOR);
    for n in 0..pages {
        let mut url = format!("http://a.test/{n}/");
        url.push_str(&"x".repeat(url_bytes.saturating_sub(url.len())));
        let result = page(&url, words, n, random);
        let state = store.get_or_insert_with(0, &url, || DiffState {
            last_period: 1,
            version: None,
            applied_before: Some(0),
        });
        differ.apply(&mut state.version, &result);
        drop(result);
    }
    let _ = store.take_dirty();
    let change = region.change();
    let held = change.bytes_allocated.saturating_sub(change.bytes_deallocated);
    (held / pages as usize, sketch)
}

#[test]
fn a_page_costs_at_most_64_kib_at_the_defaults() {
    let (worst, sketch) = held_per_page(50, 100_000, true, bounds::MAX_URL_BYTES);
    let (prose, _) = held_per_page(2_000, 1_000, false, 60);
    eprintln!(
        "diff: {worst} bytes a page of 100,000 random words under an 8 KiB URL; \
         {prose} bytes a page of 1,000 words of prose under a 60-byte URL; sketch {sketch} bytes once"
    );
    assert!(worst <= 64 << 10, "{worst} bytes a page");
    assert!(prose <= 16 << 10, "{prose} bytes a page");
}
