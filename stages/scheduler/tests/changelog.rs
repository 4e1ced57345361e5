//! The scheduler's changelog records (`state.scheduler`) written by this build read back
//! as they were: a rolling upgrade restores every URL's schedule instead of starting it
//! over.

use recrawl_scheduler::book::SchedulerState;
use recrawl_scheduler::groups::CrawlSchedule;
use recrawl_schemas::frequency::FrequencyGroup;
use recrawl_schemas::{decode, encode};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scheduler-state.bin");

fn sample() -> SchedulerState {
    SchedulerState {
        slot: 17,
        discovered: 2,
        depth: 3,
        last_estimate: Some(9),
        last_download: Some(9),
        last_pick: Some(8),
        size: 5_120,
        latency_ms: 42.5,
        p_change: 0.25,
        p_download: 0.875,
        change_rate: Some(0.125),
        interval: 6.5,
        schedule: Some(CrawlSchedule::new(FrequencyGroup::Weekly(3), &[1, 4], 7)),
        in_links: vec![11, 12],
        etag: Some("\"v2\"".to_owned()),
        last_modified: Some("Tue, 14 Nov 2023 22:13:20 GMT".to_owned()),
    }
}

#[test]
fn a_changelog_record_of_this_layout_reads_back() {
    let bytes = encode(&sample()).expect("encodes");
    if std::env::var_os("RECRAWL_BLESS").is_some() {
        std::fs::write(FIXTURE, &bytes).expect("fixture written");
    }
    let fixture = std::fs::read(FIXTURE).expect("fixture (RECRAWL_BLESS=1 writes it)");
    assert_eq!(bytes, fixture, "the changelog layout changed: bump the state's version and migrate");
    assert_eq!(decode::<SchedulerState>(&fixture).expect("decodes"), sample());
}
