//! What the scheduler holds per URL, as a counting allocator measures it (its own test
//! binary: the allocator counts the whole process): a frontier URL with its index entry
//! and in-link, and a tracked URL with its estimate's figures and validators, 60-byte URLs
//! over 2,000 hosts.
//!
//! `cargo test --release -p recrawl-scheduler --test memory -- --nocapture` prints the
//! figures BENCHMARKS.md quotes.

use std::alloc::System;

use recrawl_common::links::LinkRules;
use recrawl_scheduler::book::{Book, BookSettings};
use recrawl_scheduler::hosts::Hosts;
use recrawl_schemas::{DiscoveredLinks, PageRef};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn url(n: u32) -> String {
    format!("http://www{}.site{}.example/section/{n:010}/page.html", n % 10, n % 200)
}

#[test]
fn a_frontier_url_costs_at_most_200_bytes_and_a_tracked_one_about_as_much() {
    const URLS: u32 = 200_000;
    let (mut book, mut hosts, settings, rules) =
        (Book::default(), Hosts::default(), BookSettings::default(), LinkRules::default());
    let source = PageRef::of_url("http://hub.example/").expect("url");
    let links: Vec<DiscoveredLinks> = (0..URLS)
        .map(|n| DiscoveredLinks {
            page: PageRef::of_url(&url(n)).expect("url"),
            source: Some(source.clone()),
            occurrences: 1,
            period: 1,
            depth: 1,
        })
        .collect();
    let region = Region::new(ALLOCATOR);
    for link in &links {
        book.apply_link(&mut hosts, link, &rules, u32::MAX, &settings).expect("room");
    }
    let _ = book.take_dirty();
    let change = region.change();
    let frontier = change.bytes_allocated.saturating_sub(change.bytes_deallocated) / URLS as usize;
    let mut tracked_book = Book::default();
    let region = Region::new(ALLOCATOR);
    for n in 0..URLS {
        let host = recrawl_schemas::host_of(&url(n)).expect("host");
        tracked_book
            .add_tracked(&mut hosts, &url(n), &host, Some(1), 20_000, 0.3, 0.9, Some(0.05))
            .expect("room");
    }
    let change = region.change();
    let tracked = change.bytes_allocated.saturating_sub(change.bytes_deallocated) / URLS as usize;
    eprintln!(
        "scheduler: {frontier} bytes a frontier URL, {tracked} bytes a tracked URL (60-byte URLs, \
         allocator's count; BookMemory says {} for the frontier)",
        book.memory().total() / URLS as usize
    );
    assert!(frontier <= 200, "{frontier} bytes a frontier URL");
    // Each scheme and authority held once a partition, not once a URL, and a 48-byte
    // page (161 B before both).
    assert!(tracked <= 120, "{tracked} bytes a tracked URL");
}
