//! The scheduler's changelog records (`state.scheduler`) written by this build read back
//! as they were: a rolling upgrade restores every URL's schedule instead of starting it
//! over.

use std::collections::HashMap;
use std::path::Path;

use recrawl_model::claims::{
    Claim, ClaimEvidence, ClaimTally, ClaimTrust, ClaimedChanges, Comparison, Listing, Span,
};
use recrawl_model::day::DayProfile;
use recrawl_scheduler::book::{Book, BookSettings, SchedulerState, UrlClaims, MAX_IN_LINKS};
use recrawl_scheduler::groups::CrawlSchedule;
use recrawl_scheduler::hosts::Hosts;
use recrawl_schemas::envelope::check_fixture;
use recrawl_schemas::frequency::FrequencyGroup;
use recrawl_schemas::{bounds, decode, Message};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scheduler-state.bin");
/// The same state as version 1 wrote it, before `central_change_rate` was kept.
const FIXTURE_V1: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scheduler-state-v1.bin");
/// As version 2 wrote it, before `middle_half_low_rate` was kept.
const FIXTURE_V2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scheduler-state-v2.bin");
/// As version 3 wrote it, before `host_day` was kept.
const FIXTURE_V3: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scheduler-state-v3.bin");
/// As version 4 wrote it, before `announced` was kept.
const FIXTURE_V4: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scheduler-state-v4.bin");
/// As version 5 wrote it, before `moved` was kept.
const FIXTURE_V5: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scheduler-state-v5.bin");
/// As version 6 wrote it, before `host_claims` was kept.
const FIXTURE_V6: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scheduler-state-v6.bin");
/// As version 7 wrote it, before `change_claimed` and `claims` were kept.
const FIXTURE_V7: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scheduler-state-v7.bin");
/// As version 8 wrote it, before a URL's claims kept the changes they dated.
const FIXTURE_V8: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scheduler-state-v8.bin");
/// As version 9 wrote it, before a sitemap or feed was kept as a document.
const FIXTURE_V9: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scheduler-state-v9.bin");

/// 2026-01-11T00:00:00Z.
const MIDNIGHT_MS: i64 = 1_768_089_600_000;
const HOUR_MS: i64 = 3_600_000;

/// A host's day as a partition learned it: changes seen over the morning, none overnight.
fn host_day() -> DayProfile {
    let mut day = DayProfile::default();
    let rate_per_ms = 1.0 / (6 * HOUR_MS) as f64;
    for start in [6, 8, 10] {
        let from = MIDNIGHT_MS + start * HOUR_MS;
        day.observe_comparison(true, from, from + 2 * HOUR_MS, rate_per_ms);
    }
    day.observe_comparison(false, MIDNIGHT_MS - 4 * HOUR_MS, MIDNIGHT_MS + 4 * HOUR_MS, rate_per_ms);
    day.observe(
        MIDNIGHT_MS + 9 * HOUR_MS,
        MIDNIGHT_MS + 8 * HOUR_MS,
        MIDNIGHT_MS + 10 * HOUR_MS,
        rate_per_ms,
    );
    day
}

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
        central_change_rate: Some(0.0625),
        middle_half_low_rate: Some(0.03125),
        host_day: Some(host_day()),
        announced: Some(true),
        moved: Some(true),
        host_claims: Some(ClaimTally { confirmed: 4, agreed: 9, refuted: 0, silent: 2 }),
        change_claimed: Some(true),
        claims: Some(Box::new(url_claims())),
        document: Some(Listing::Latest),
    }
}

/// `sample()` as a build of `version` wrote it: the fields added since read as null.
fn as_written_by(version: u16) -> SchedulerState {
    let mut state = sample();
    if version < 10 {
        state.document = None;
    }
    if let (true, Some(claims)) = (version < 9, state.claims.as_mut()) {
        claims.claimed = ClaimedChanges::default();
    }
    if version < 8 {
        (state.change_claimed, state.claims) = (None, None);
    }
    if version < 7 {
        state.host_claims = None;
    }
    if version < 6 {
        state.moved = None;
    }
    if version < 5 {
        state.announced = None;
    }
    if version < 4 {
        state.host_day = None;
    }
    if version < 3 {
        state.middle_half_low_rate = None;
    }
    if version < 2 {
        state.central_change_rate = None;
    }
    state
}

/// A claim read at 11:00 dating a change at 10:00, waiting for the comparison of the
/// downloads at 9:00 and 12:00 to judge it.
fn url_claims() -> UrlClaims {
    let at = |hour: i64| MIDNIGHT_MS + hour * HOUR_MS;
    let nine = Span { earliest_ms: at(9), latest_ms: at(9) };
    UrlClaims {
        evidence: ClaimEvidence {
            claim: Some(Claim { changed_ms: at(10), seen_ms: at(11) }),
            pending: Some(Comparison { from: nine, to_ms: at(12), changed: true }),
        },
        last_download: Some(Span { earliest_ms: at(12), latest_ms: at(12) }),
        claimed: ClaimedChanges {
            changes: 2,
            quiet_s: 5 * 3_600,
            latest: Claim { changed_ms: at(10), seen_ms: at(11) },
        },
    }
}

#[test]
fn a_changelog_record_of_this_layout_reads_back() {
    check_fixture(&sample(), Path::new(FIXTURE)).unwrap();
}

#[test]
fn a_version_1_record_reads_back_and_scores_freshness_at_its_mean_rate() {
    let old = decode::<SchedulerState>(&std::fs::read(FIXTURE_V1).expect("fixture")).expect("decodes");
    assert_eq!(old, as_written_by(1));
    let records = HashMap::from([("http://example.org/a.html".to_owned(), old)]);
    let (book, skipped) =
        Book::restore(records, &mut Hosts::default(), &BookSettings::default()).expect("restores");
    assert_eq!(skipped, 0);
    assert_eq!(book.page(0).freshness_rate(), Some(0.125));
    let (current, _) = Book::restore(
        HashMap::from([("http://example.org/a.html".to_owned(), sample())]),
        &mut Hosts::default(),
        &BookSettings::default(),
    )
    .expect("restores");
    let central = current.page(0).freshness_rate().expect("a rate");
    assert!((central / 0.0625 - 1.0).abs() < 1e-3, "{central}");
}

#[test]
fn a_version_2_record_reads_back_and_scores_freshness_at_its_central_rate_alone() {
    let old = decode::<SchedulerState>(&std::fs::read(FIXTURE_V2).expect("fixture")).expect("decodes");
    assert_eq!(old, as_written_by(2));
    let records = HashMap::from([("http://example.org/a.html".to_owned(), old)]);
    let (book, _) =
        Book::restore(records, &mut Hosts::default(), &BookSettings::default()).expect("restores");
    assert_eq!(book.page(0).middle_half_low_rate.get(), None);
    let (current, _) = Book::restore(
        HashMap::from([("http://example.org/a.html".to_owned(), sample())]),
        &mut Hosts::default(),
        &BookSettings::default(),
    )
    .expect("restores");
    assert_eq!(current.page(0).middle_half_low_rate.get(), Some(0.03125));
}

#[test]
fn a_version_3_record_reads_back_with_its_host_s_day_to_learn_again() {
    let old = decode::<SchedulerState>(&std::fs::read(FIXTURE_V3).expect("fixture")).expect("decodes");
    assert_eq!(old, as_written_by(3));
    let mut hosts = Hosts::default();
    let records = HashMap::from([("http://example.org/a.html".to_owned(), old)]);
    Book::restore(records, &mut hosts, &BookSettings::default()).expect("restores");
    assert_eq!(hosts.stats[0].day.shape(), None);
    let mut hosts = Hosts::default();
    let records = HashMap::from([("http://example.org/a.html".to_owned(), sample())]);
    Book::restore(records, &mut hosts, &BookSettings::default()).expect("restores");
    assert_eq!(hosts.stats[0].day, host_day());
}

#[test]
fn a_version_4_record_reads_back_as_a_url_no_sitemap_named() {
    let old = decode::<SchedulerState>(&std::fs::read(FIXTURE_V4).expect("fixture")).expect("decodes");
    assert_eq!(old, as_written_by(4));
    let frontier = |state: SchedulerState| SchedulerState {
        last_estimate: None,
        moved: None,
        host_claims: None,
        change_claimed: None,
        claims: None,
        ..state
    };
    for (state, announced) in [(frontier(old), false), (frontier(sample()), true)] {
        let records = HashMap::from([("http://example.org/a.html".to_owned(), state)]);
        let (book, _) =
            Book::restore(records, &mut Hosts::default(), &BookSettings::default()).expect("restores");
        assert_eq!(book.page(0).is_announced(), announced);
        assert_eq!(book.record(0).announced, announced.then_some(true), "written back as it was read");
    }
}

#[test]
fn a_version_5_record_reads_back_as_a_url_that_did_not_move() {
    let old = decode::<SchedulerState>(&std::fs::read(FIXTURE_V5).expect("fixture")).expect("decodes");
    assert_eq!(old, as_written_by(5));
    for (state, moved) in [(old, false), (sample(), true)] {
        let records = HashMap::from([("http://example.org/a.html".to_owned(), state)]);
        let (book, _) =
            Book::restore(records, &mut Hosts::default(), &BookSettings::default()).expect("restores");
        assert_eq!(book.page(0).is_moved(), moved);
        assert_eq!(book.record(0).moved, moved.then_some(true), "written back as it was read");
    }
}

#[test]
fn a_version_6_record_reads_back_with_its_host_s_claims_to_judge_again() {
    let old = decode::<SchedulerState>(&std::fs::read(FIXTURE_V6).expect("fixture")).expect("decodes");
    assert_eq!(old, as_written_by(6));
    for (state, trust) in [(old, ClaimTrust::Unknown), (sample(), ClaimTrust::Trusted)] {
        let records = HashMap::from([("http://example.org/a.html".to_owned(), state)]);
        let mut hosts = Hosts::default();
        let (book, _) = Book::restore(records, &mut hosts, &BookSettings::default()).expect("restores");
        assert_eq!(hosts.stats[book.page(0).host as usize].claims.trust(), trust);
    }
}

#[test]
fn a_version_7_record_reads_back_without_a_stale_mark_or_claims_to_judge() {
    let old = decode::<SchedulerState>(&std::fs::read(FIXTURE_V7).expect("fixture")).expect("decodes");
    assert_eq!(old, as_written_by(7));
    for state in [old, sample()] {
        let written = (state.change_claimed, state.claims.clone());
        let records = HashMap::from([("http://example.org/a.html".to_owned(), state)]);
        let (book, _) =
            Book::restore(records, &mut Hosts::default(), &BookSettings::default()).expect("restores");
        assert_eq!(book.page(0).is_change_claimed(), written.0 == Some(true));
        // The book writes back what it read.
        let record = book.record(0);
        assert_eq!((record.change_claimed, record.claims), written);
    }
}

#[test]
fn a_version_8_record_reads_back_with_no_claimed_changes_to_rate_the_page_by() {
    let old = decode::<SchedulerState>(&std::fs::read(FIXTURE_V8).expect("fixture")).expect("decodes");
    assert_eq!(old, as_written_by(8));
    assert_eq!(old.claims.as_ref().map(|claims| claims.claimed), Some(ClaimedChanges::default()));
    for state in [old, sample()] {
        let written = state.claims.clone();
        let records = HashMap::from([("http://example.org/a.html".to_owned(), state)]);
        let (book, _) =
            Book::restore(records, &mut Hosts::default(), &BookSettings::default()).expect("restores");
        assert_eq!(book.record(0).claims, written, "written back as it was read");
    }
}

#[test]
fn a_version_9_record_reads_back_as_a_url_no_document_named_a_sitemap_or_feed() {
    let old = decode::<SchedulerState>(&std::fs::read(FIXTURE_V9).expect("fixture")).expect("decodes");
    assert_eq!(old, as_written_by(9));
    // The sample moved for good: a document that moved is let go.
    for state in [old, sample(), SchedulerState { moved: None, ..sample() }] {
        let kept = state.document.filter(|_| state.moved != Some(true));
        let records = HashMap::from([("http://example.org/feed.xml".to_owned(), state)]);
        let (book, _) =
            Book::restore(records, &mut Hosts::default(), &BookSettings::default()).expect("restores");
        assert_eq!(book.document(0), kept);
        assert_eq!(book.record(0).document, kept, "written back as it was kept");
    }
}

#[test]
fn a_record_holding_what_the_book_never_writes_is_refused_naming_the_field() {
    assert_eq!(sample().validate(), Ok(()));
    let forged = [
        ("p_download", SchedulerState { p_download: f32::NAN, ..sample() }),
        ("p_change", SchedulerState { p_change: 1.5, ..sample() }),
        ("change_rate", SchedulerState { change_rate: Some(-0.5), ..sample() }),
        ("change_rate", SchedulerState { change_rate: Some(f32::NAN), ..sample() }),
        ("interval", SchedulerState { interval: f32::NAN, ..sample() }),
        ("in_links", SchedulerState { in_links: vec![7; MAX_IN_LINKS as usize + 1], ..sample() }),
        ("etag", SchedulerState { etag: Some("e".repeat(bounds::MAX_URL_BYTES + 1)), ..sample() }),
    ];
    for (field, state) in forged {
        let error = state.validate().expect_err(field).to_string();
        assert!(error.contains(field), "{field}: {error}");
    }
}

/// A restore skips what fails `validate`: every layout a build has written must pass, or a
/// rolling upgrade would drop the URLs it wrote.
#[test]
fn records_of_every_version_pass_the_restore_s_check() {
    for fixture in [
        FIXTURE, FIXTURE_V1, FIXTURE_V2, FIXTURE_V3, FIXTURE_V4, FIXTURE_V5, FIXTURE_V6, FIXTURE_V7,
        FIXTURE_V8, FIXTURE_V9,
    ] {
        let state = decode::<SchedulerState>(&std::fs::read(fixture).expect("fixture")).expect("decodes");
        assert_eq!(state.validate(), Ok(()), "{fixture}");
    }
}
