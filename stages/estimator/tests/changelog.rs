//! The estimator's changelog records (`state.estimator`) written by this build read back
//! as they were: a rolling upgrade restores every URL's state instead of starting it over.

use std::path::Path;

use recrawl_estimator::claims::KeptClaims;
use recrawl_estimator::{EstimatorState, LastResponse};
use recrawl_model::claims::{Claim, ClaimEvidence, ClaimedChanges, Span, UrlClaims};
use recrawl_model::history::{Observation, PageHistory};
use recrawl_model::modified::{DateTrust, DatedChanges};
use recrawl_model::page::{ComparedDownloads, PageState, Request};
use recrawl_model::refresh::{ChangeCalendar, ChangeHours, RefreshSettings, WeeklyChanges};
use recrawl_schemas::envelope::check_fixture;
use recrawl_schemas::{decode, encode, Message, PageRef};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/estimator-state.bin");
/// The same state as version 1 wrote it, before `page.compared` was kept.
const FIXTURE_V1: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/estimator-state-v1.bin");
/// As version 2 wrote it, before `page.dated` was kept.
const FIXTURE_V2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/estimator-state-v2.bin");
/// As version 3 wrote it, before `last_response` was kept.
const FIXTURE_V3: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/estimator-state-v3.bin");
/// As version 4 wrote it, before `claimed` was kept.
const FIXTURE_V4: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/estimator-state-v4.bin");

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
        group: "example.org".into(),
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
            dated: Some(DatedChanges {
                last_modified_ms: 1_699_990_000_000,
                last_download_ms: 1_700_000_000_000,
                changes: 2,
                quiet_ms: 10_000_000,
                trust: DateTrust::Proven,
            }),
        },
        last_response: Some(Box::new(LastResponse {
            page: PageRef::new("http://example.org/a", "example.org"),
            downloaded: true,
            changed: Some(true),
            http_status: Some(200),
            crawl_delay_ms: Some(2_000),
            etag: Some("\"v6\"".to_owned()),
            last_modified: Some("Tue, 14 Nov 2023 19:06:40 GMT".to_owned()),
            estimated_trusted: true,
        })),
        claims: Some(Box::new(KeptClaims {
            url: UrlClaims {
                evidence: ClaimEvidence {
                    claim: Some(Claim { changed_ms: 1_699_995_000_000, seen_ms: 1_700_000_050_000 }),
                    pending: None,
                },
                last_download: Some(Span::at(1_700_000_000_000)),
                claimed: ClaimedChanges {
                    changes: 3,
                    quiet_s: 86_400,
                    latest: Claim { changed_ms: 1_699_995_000_000, seen_ms: 1_700_000_050_000 },
                },
            },
            refuted: false,
        })),
    }
}

#[test]
fn a_changelog_record_of_this_layout_reads_back() {
    check_fixture(&sample(), Path::new(FIXTURE)).unwrap();
}

#[test]
fn a_version_1_record_reads_back_and_estimates_its_rate_as_before() {
    let old = decode::<EstimatorState>(&std::fs::read(FIXTURE_V1).expect("fixture")).expect("decodes");
    let mut expected = sample();
    (expected.page.compared, expected.page.dated, expected.last_response, expected.claims) =
        (None, None, None, None);
    assert_eq!(old, expected);
    // Then the comparison was taken to span every request: 6 − 3 periods.
    assert_eq!(old.page.comparison_spacing(), Some(3.0));
}

#[test]
fn a_version_2_record_reads_back_without_dates_and_counts_them_from_its_next_download() {
    let mut old = decode::<EstimatorState>(&std::fs::read(FIXTURE_V2).expect("fixture")).expect("decodes");
    let mut expected = sample();
    (expected.page.dated, expected.last_response, expected.claims) = (None, None, None);
    assert_eq!(old, expected);
    let request = Request { last_modified_ms: Some(1_699_000_000_000), ..unchanged_download(7) };
    assert!(old.page.record(&request, &RefreshSettings::default()));
    let dated = old.page.dated.expect("dated from this download");
    assert_eq!((dated.changes, dated.trust), (1, DateTrust::Unproven));
}

#[test]
fn a_version_3_record_reads_back_and_keeps_no_response_until_its_next_request() {
    let old = decode::<EstimatorState>(&std::fs::read(FIXTURE_V3).expect("fixture")).expect("decodes");
    let mut expected = sample();
    (expected.last_response, expected.claims) = (None, None);
    assert_eq!(old, expected);
}

#[test]
fn a_version_4_record_reads_back_without_claims() {
    let old = decode::<EstimatorState>(&std::fs::read(FIXTURE_V4).expect("fixture")).expect("decodes");
    let mut expected = sample();
    expected.claims = None;
    assert_eq!(old, expected);
}

#[test]
fn a_version_1_record_ending_in_a_failure_keeps_the_span_of_its_requests() {
    // As version 1 wrote it: this layout without the trailing `None` tags of
    // `page.compared`, `page.dated`, `last_response` and `claimed`, under version 1 in
    // the envelope.
    let mut state = sample();
    state.page.history.record(10, Observation { downloaded: false, changed: None });
    (state.page.compared, state.page.dated, state.last_response, state.claims) = (None, None, None, None);
    let mut bytes = encode(&state).expect("encodes");
    assert_eq!(
        (bytes.pop(), bytes.pop(), bytes.pop(), bytes.pop()),
        (Some(0), Some(0), Some(0), Some(0)),
        "the None tags end the record"
    );
    bytes[2..4].copy_from_slice(&1u16.to_be_bytes());
    let mut old = decode::<EstimatorState>(&bytes).expect("decodes");
    assert_eq!(old, state);
    // Its one comparison spans its requests, 3 to 10, as version 1 estimated it ...
    assert_eq!(old.page.comparison_spacing(), Some(7.0));
    // ... and from its next download on the span is counted, the failure at 10 taken as
    // the download it followed: 7 + (14 − 10) periods over 2 comparisons.
    assert!(old.page.record(&unchanged_download(14), &RefreshSettings::default()));
    assert_eq!(old.page.comparison_spacing(), Some(5.5));
}

/// An unchanged download in `period`, without a `Last-Modified`.
fn unchanged_download(period: u64) -> Request {
    Request {
        period,
        fetched_at_ms: 1_700_000_100_000,
        downloaded: true,
        changed: Some(false),
        size_bytes: 5_000,
        update_size: Some(0),
        latency_ms: 40.0,
        last_modified_ms: None,
    }
}

/// A restore skips what fails `validate`: every layout a build has written must pass, or a
/// rolling upgrade would drop the URLs it wrote.
#[test]
fn records_of_every_version_pass_the_restore_s_check() {
    for fixture in [FIXTURE, FIXTURE_V1, FIXTURE_V2, FIXTURE_V3, FIXTURE_V4] {
        let state = decode::<EstimatorState>(&std::fs::read(fixture).expect("fixture")).expect("decodes");
        assert_eq!(state.validate(), Ok(()), "{fixture}");
    }
}
