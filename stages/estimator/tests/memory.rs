//! What the estimator holds per URL at the defaults, as a counting allocator measures it
//! (its own test binary: the allocator counts the whole process): the state store's key
//! and record after a month of daily requests, a third of them changed.
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

#[test]
fn a_url_costs_what_its_history_holds() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: EstimateArgs,
    }
    let settings = Cli::parse_from(["estimator"]).args.settings();
    let mut estimator = Estimator::new(settings);
    let mut state = StateStore::default();
    const URLS: u64 = 2_000;
    // 2026-11-01 and a day a request.
    let start_ms = 1_793_491_200_000i64;
    let region = Region::new(ALLOCATOR);
    for day in 0..30u64 {
        for n in 0..URLS {
            let url = format!("http://www{}.site{}.example/section/{n:010}/page.html", n % 10, n % 200);
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
    let per_url = held / URLS as usize;
    eprintln!(
        "estimator: {per_url} bytes a URL after 30 daily requests ({} URLs, 2,000 hosts' groups)",
        URLS
    );
    assert!(per_url <= 4 << 10, "{per_url} bytes a URL");
}
