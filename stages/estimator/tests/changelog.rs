//! The estimator's changelog records (`state.estimator`) written by this build read back
//! as they were: a rolling upgrade restores every URL's state instead of starting it over.

use recrawl_estimator::EstimatorState;
use recrawl_model::history::{Observation, PageHistory};
use recrawl_model::page::{ComparedDownloads, PageState};
use recrawl_model::refresh::{ChangeCalendar, ChangeHours, WeeklyChanges};
use recrawl_schemas::{decode, encode};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/estimator-state.bin");
/// The same state as version 1 wrote it, before `page.compared` was kept.
const FIXTURE_V1: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/estimator-state-v1.bin");

fn sample() -> EstimatorState {
    let mut history = PageHistory::default();
    for (period, downloaded, changed) in [(3, true, None), (4, false, None), (6, true, Some(true))] {
        history.record(period, Observation { downloaded, changed });
    }
    let (mut weekly, mut hours) = (WeeklyChanges::default(), ChangeHours::default());
    weekly.record(1_700_000_000_000, 28, 60);
    hours.record(1_700_000_000_000, 120, 60);
    EstimatorState {
        host: "example.org".to_owned(),
        group: "example.org".to_owned(),
        page: PageState {
            history,
            first_seen_ms: 1_699_000_000_000,
            last_fetched_at_ms: 1_700_000_000_000,
            last_size_bytes: 5_120,
            last_update_size: Some(-120),
            last_latency_ms: 42.5,
            download_bin: Some(67),
            change_bin: None,
            calendar: ChangeCalendar { weekly, hours },
            compared: Some(ComparedDownloads { last_download: 3, periods: 3 }),
        },
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
    assert_eq!(decode::<EstimatorState>(&fixture).expect("decodes"), sample());
}

#[test]
fn a_version_1_record_reads_back_and_estimates_its_rate_as_before() {
    let old = decode::<EstimatorState>(&std::fs::read(FIXTURE_V1).expect("fixture")).expect("decodes");
    let mut expected = sample();
    expected.page.compared = None;
    assert_eq!(old, expected);
    // Then the comparison was taken to span every request: 6 − 3 periods.
    assert_eq!(old.page.comparison_spacing(), Some(3.0));
}
