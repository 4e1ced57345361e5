//! What the estimator holds per URL at the defaults, as a counting allocator measures it
//! (its own test binary: the allocator counts the whole process): the state store's key
//! and record after a month of daily requests, a third of them changed, and its share of
//! its host's group.
//!
//! `cargo test --release -p recrawl-estimator --test memory -- --nocapture` prints the
//! figure BENCHMARKS.md quotes.

use std::alloc::System;

use recrawl_common::StateStore;
use recrawl_estimator::estimate::Estimator;
use recrawl_estimator::EstimateArgs;
use recrawl_schemas::{ChangeEvent, RequestOutcome};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes held a URL after `days` daily requests of `urls` URLs on `hosts` hosts (a group
/// a host), a third of the requests finding a change.
fn held_per_url(urls: u64, hosts: u64, days: u64) -> usize {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: EstimateArgs,
    }
    let settings = Cli::parse_from(["estimator"]).args.settings();
    let mut estimator = Estimator::new(settings);
    let mut state = StateStore::default();
    // 2026-11-01 and a day a request.
    let start_ms = 1_793_491_200_000i64;
    let region = Region::new(ALLOCATOR);
    for day in 0..days {
        for n in 0..urls {
            let host = n % hosts;
            let url = format!("http://www{}.site{}.example/section/{n:010}/page.html", host % 10, host / 10);
            let changed = (day > 0).then_some((n + day) % 3 == 0);
            let fetched_at_ms = start_ms + day as i64 * 86_400_000;
            let outcome = RequestOutcome { period: day + 1, downloaded: true, changed, fetched_at_ms };
            let host = recrawl_schemas::host_of(&url).expect("host");
            let event = ChangeEvent { first_seen: day == 0, ..ChangeEvent::request(&url, &host, outcome) };
            let _ = estimator.apply(&event, 0, &mut state, fetched_at_ms);
        }
        let _ = state.take_dirty();
        let _ = estimator.take_partials(start_ms + day as i64 * 86_400_000);
    }
    let change = region.change();
    let held = change.bytes_allocated.saturating_sub(change.bytes_deallocated);
    drop((estimator, state));
    held / urls as usize
}

#[test]
fn a_url_costs_what_its_history_holds() {
    // A hundred URLs a host, then ten: mostly the URL's own state (BENCHMARKS' figures).
    let hundred = held_per_url(1_000, 10, 30);
    let ten = held_per_url(1_000, 100, 30);
    // Each URL its own host, more hosts than the views kept: every URL pays for a group
    // too (its shares, its live share and, while among the latest asked, its view).
    let alone = held_per_url(5_000, 5_000, 10);
    eprintln!(
        "estimator: bytes a URL after 30 daily requests: {hundred} at 100 URLs a host, {ten} at 10; \
         after 10, {alone} a host a URL (5,000 hosts)"
    );
    assert!(hundred <= 1 << 10, "{hundred} bytes a URL at 100 a host");
    assert!(hundred < ten, "a URL sharing its host's group with more costs less: {hundred}, {ten}");
    // 9.5 KB a URL when every group kept its view and its shares in maps.
    assert!(alone <= 6 << 10, "{alone} bytes a URL alone on its host");
}
