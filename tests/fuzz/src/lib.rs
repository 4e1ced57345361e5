//! The bodies of recrawl's fuzz targets, one `pub fn(&[u8])` each, calling the code the
//! stages run on untrusted bytes. `fuzz/` (cargo-fuzz, nightly) feeds them libFuzzer's
//! inputs; `tests/corpus.rs` replays the committed corpus and crash inputs on stable, so
//! `cargo test --workspace` keeps every input found so far passing.
//!
//! A target panics only on a real bug: a panic in the code under test, or a broken
//! invariant that the code documents.

use clap::ValueEnum;
use recrawl_common::state::Keyed;
use recrawl_common::StateStore;
use recrawl_diff::change::{DiffSettings, Differ};
use recrawl_diff::offline::{score, InputKind};
use recrawl_diff::text::{page_words, CaseFold};
use recrawl_diff::{CompareArgs, DiffState};
use recrawl_estimator::estimate::Estimator;
use recrawl_estimator::offline::{stats, StatsArgs};
use recrawl_estimator::{Applied, EstimatorState, Settings as EstimatorSettings};
use recrawl_fetch::announce::AnnouncementLimits;
use recrawl_fetch::announcements::of_download;
use recrawl_fetch::links::{extract_links, LinkFilter};
use recrawl_fetch::robots::{RobotsRules, MAX_ROBOTS_BYTES};
use recrawl_lab::evaluate::parse_histories;
use recrawl_scheduler::book::{Book, BookSettings, SchedulerState};
use recrawl_scheduler::hosts::Hosts;
use recrawl_scheduler::plan::{choose, PlanSettings};
use recrawl_scheduler::policy::Policy;
use recrawl_schemas::envelope::{check_kafka_headers, inspect};
use recrawl_schemas::{
    bounds, decode, encode, normalise_url, ChangeEvent, DiscoveredLinks, FetchResult, Format,
    GroupDistribution, HostTrust, Message, PageAnnouncement, PageEstimate, PagePick, RequestOutcome,
};
use url::Url;

/// A target: runs one input, panics on a bug.
pub type Target = fn(&[u8]);

/// Every target by name: the name is its directory under `fuzz/corpus/` and
/// `fuzz/regressions/` and its file under `fuzz/fuzz_targets/`.
pub const TARGETS: [(&str, Target); 8] = [
    ("decode_topics", decode_topics),
    ("restore_state", restore_state),
    ("robots", robots),
    ("announcements", announcements),
    ("html_text", html_text),
    ("html_links", html_links),
    ("change_degree", change_degree),
    ("history", history),
];

/// The bytes of a Kafka record as every message type on a topic and every stage's
/// changelog state would read them, and the envelope's header check.
pub fn decode_topics(data: &[u8]) {
    round_trip::<PagePick>(data);
    round_trip::<FetchResult>(data);
    round_trip::<DiscoveredLinks>(data);
    round_trip::<PageAnnouncement>(data);
    round_trip::<ChangeEvent>(data);
    round_trip::<PageEstimate>(data);
    round_trip::<GroupDistribution>(data);
    round_trip::<HostTrust>(data);
    round_trip::<DiffState>(data);
    round_trip::<EstimatorState>(data);
    round_trip::<SchedulerState>(data);
    // Headers from the record itself: any bytes a producer may have put there.
    let _ = check_kafka_headers(data, Some(data), Some(data));
    file_share(data);
}

/// Another instance's share of a group, as the estimator files it from the distributions
/// topic: one that validates is filed, and a request of a URL of its group is estimated
/// from it and the estimator's own share, as the group's view merges them.
fn file_share(data: &[u8]) {
    let Some(share) = valid::<GroupDistribution>(data) else { return };
    let mut estimator = Estimator::new(EstimatorSettings::default());
    if estimator.file(&share).is_err() {
        return;
    }
    let mut store = StateStore::default();
    let url = format!("http://{}/page.html", share.group);
    for period in [share.period, share.period.saturating_add(1)] {
        let outcome =
            RequestOutcome { period, downloaded: true, changed: Some(period % 2 == 0), fetched_at_ms: 0 };
        let event = ChangeEvent::request(&url, &share.group, outcome);
        // The stage reads only events that validate: a group that is no host names none.
        if event.validate().is_err() {
            return;
        }
        apply_checked(&mut estimator, &event, share.partition.saturating_add(1), &mut store, 0);
    }
    check_partials(&mut estimator, 0);
}

/// Applies `event` from `partition`; the estimate it gives, if any, must validate.
fn apply_checked(
    estimator: &mut Estimator,
    event: &ChangeEvent,
    partition: i32,
    store: &mut StateStore<EstimatorState>,
    now_ms: i64,
) {
    if let Applied::New(estimate, _) | Applied::Repeated(estimate) =
        estimator.apply(event, partition, store, now_ms)
    {
        assert!(estimate.validate().is_ok(), "{estimate:?}");
    }
}

/// The shares the estimator publishes at `now_ms` must validate.
fn check_partials(estimator: &mut Estimator, now_ms: i64) {
    for partial in estimator.take_partials(now_ms) {
        assert!(partial.validate().is_ok(), "{partial:?}");
    }
}

/// The URL a restored record is filed under.
const RESTORED_URL: &str = "http://a.test/page.html";

/// A stage's changelog record as a restore reads it: what decodes and validates (the
/// rest is skipped and counted) is restored into the stage's own structures and stepped
/// as after a restart: the diff stage compares a new download with the restored version,
/// the estimator republishes its groups' shares and applies the URL's next request, the
/// scheduler chooses under every policy and writes the record again.
pub fn restore_state(data: &[u8]) {
    if let Some(state) = valid::<DiffState>(data) {
        let mut differ = Differ::new(DiffSettings::default());
        let mut kept = state.version;
        if let Some(version) = &kept {
            differ.hold(version);
        }
        let next =
            FetchResult::html_page(RESTORED_URL, "a.test", state.last_period.saturating_add(1), "<p>a b</p>");
        let event = differ.apply(&mut kept, &next);
        assert!(event.validate().is_ok(), "{event:?}");
    }
    if let Some(state) = valid::<EstimatorState>(data) {
        let next_period = state.page.history.last_request.saturating_add(1);
        let fetched_at_ms =
            state.page.last_fetched_at_ms.clamp(0, bounds::MAX_TIME_MS / 2).saturating_add(60_000);
        let mut store = StateStore::default();
        store.insert_partition(0, Keyed::from_iter([(RESTORED_URL.to_owned(), state)]));
        let mut estimator = Estimator::new(EstimatorSettings::default());
        estimator.restored(0, &mut store);
        check_partials(&mut estimator, fetched_at_ms);
        let outcome =
            RequestOutcome { period: next_period, downloaded: true, changed: Some(true), fetched_at_ms };
        let event = ChangeEvent::request(RESTORED_URL, "a.test", outcome);
        apply_checked(&mut estimator, &event, 0, &mut store, fetched_at_ms);
        for estimate in estimator.take_revised() {
            assert!(estimate.validate().is_ok(), "{estimate:?}");
        }
    }
    if let Some(state) = valid::<SchedulerState>(data) {
        let mut hosts = Hosts::default();
        let records = [(RESTORED_URL.to_owned(), state)];
        let Ok((book, _)) = Book::restore(records, &mut hosts, &BookSettings::default()) else { return };
        let caps = vec![u32::MAX; hosts.len()];
        for &policy in Policy::value_variants() {
            let settings = PlanSettings { policy, ..PlanSettings::default() };
            for choice in choose(&[&book], &hosts, 1_000, 10.0, 1, &caps, &settings) {
                assert!(!choice.score.is_nan(), "{policy:?}: {choice:?}");
            }
        }
        for slot in 0..book.len() as u32 {
            let record = book.record(slot);
            assert!(record.validate().is_ok(), "{record:?}");
        }
        book.release(&mut hosts);
    }
}

/// `data` as a stage reads a record of `M`, from a topic or its changelog: `None` where it
/// is refused (dead-lettered or skipped).
fn valid<M: Message>(data: &[u8]) -> Option<M> {
    decode::<M>(data).ok().filter(|message| message.validate().is_ok())
}

/// A payload that decodes must pass the header check with the headers its framing is
/// produced with, and, if valid, write back to a payload that decodes (a stage re-emits
/// what it read and accepted, and writes restored state to its changelog again).
fn round_trip<M: Message>(data: &[u8]) {
    let Ok(message) = decode::<M>(data) else { return };
    let framed =
        inspect(data).unwrap_or_else(|error| panic!("{} decodes but not its framing: {error}", M::NAME));
    let [(_, content_type), (_, schema_version)] = framed.kafka_headers();
    if let Err(error) =
        check_kafka_headers(data, Some(content_type.as_bytes()), Some(schema_version.as_bytes()))
    {
        panic!("{} decodes but its own headers are refused: {error}", M::NAME);
    }
    // Stages dead-letter what fails validation; they never write it again.
    if message.validate().is_err() {
        return;
    }
    let encoded =
        encode(&message).unwrap_or_else(|error| panic!("{} decodes but does not encode: {error}", M::NAME));
    let again = decode::<M>(&encoded)
        .unwrap_or_else(|error| panic!("{} re-encoded does not decode: {error}", M::NAME));
    // Bincode is exact, so a second trip must give the same bytes. JSON is only required
    // to decode again: serde_json's default float parsing may move a value by one ulp.
    if M::FORMAT == Format::Bincode {
        let twice =
            encode(&again).unwrap_or_else(|error| panic!("{} does not encode twice: {error}", M::NAME));
        assert!(twice == encoded, "{} changes on a second bincode round trip", M::NAME);
    }
}

/// A robots.txt answered with 200, as the fetch stage parses it for its user-agent, then
/// asked about a few URLs and one taken from the file's first line.
pub fn robots(data: &[u8]) {
    // The fetcher reads no more than this of a robots.txt.
    let body = &data[..data.len().min(MAX_ROBOTS_BYTES as usize)];
    let (rules, server_failed) = RobotsRules::from_answer(200, body, "recrawl");
    assert!(!server_failed, "a 200 answer counted as a server failure");
    let first_line = body.split(|&b| b == b'\n').next().unwrap_or_default();
    let probe = String::from_utf8_lossy(first_line);
    for path in ["/", "/index.html", "/private/page.html", "/a%20b/c.php?q=1&r=%E2%82%AC", "/*$", &probe] {
        rules.allows(&format!("https://example.com{path}"));
    }
    rules.allows(&probe);
    rules.crawl_delay();
}

/// A downloaded body as the fetch stage reads a sitemap or feed: every record it makes is
/// one a reader accepts, on the document's host, and no more than the limit.
pub fn announcements(data: &[u8]) {
    let limits = AnnouncementLimits { max_entries: 64, ..AnnouncementLimits::default() };
    let result = FetchResult {
        content_type: Some("application/xml".to_owned()),
        ..FetchResult::html_page("http://example.com/news/sitemap.xml", "example.com", 3, data)
    };
    let announced = of_download(&result, &limits);
    assert!(announced.records.len() <= limits.max_entries, "{} records", announced.records.len());
    for record in &announced.records {
        assert_eq!(record.validate(), Ok(()), "{record:?}");
        assert_eq!(record.page.host, "example.com");
        let bytes = encode(record).expect("a valid record encodes");
        assert_eq!(&decode::<PageAnnouncement>(&bytes).expect("and decodes"), record);
    }
}

/// Content types the diff stage meets, the selector byte picks one: none (sniffed), the
/// charset in the header, one that contradicts a `<meta charset>`, not HTML.
const CONTENT_TYPES: [Option<&str>; 7] = [
    None,
    Some("text/html"),
    Some("text/html; charset=utf-8"),
    Some("text/html; charset=EUC-KR"),
    Some("text/html;charset=\"windows-1252\""),
    Some("text/html; charset=UTF-16LE"),
    Some("text/plain; charset=bogus"),
];

/// A body as the diff stage reads a download: charset decoding, visible text, word hashes.
/// The first byte picks the content type.
pub fn html_text(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else { return };
    let content_type = CONTENT_TYPES[usize::from(selector) % CONTENT_TYPES.len()];
    let plain = page_words(body, content_type, CaseFold::None);
    let folded = page_words(body, content_type, CaseFold::Lower);
    // Folding applies to each word after segmentation and the text hash is taken before it.
    assert_eq!(plain.words.len(), folded.words.len(), "case folding changed the word count");
    assert_eq!(plain.text_hash, folded.text_hash, "case folding changed the text hash");
    assert_eq!(plain.encoding, folded.encoding);
}

/// A page's links as the fetch stage extracts them, from a fixed page URL with the default
/// filter.
pub fn html_links(data: &[u8]) {
    let page = Url::parse("https://example.com/dir/page.html?x=1").expect("the page URL is valid");
    let filter = LinkFilter::default();
    let found = extract_links(&page, data, &filter, 1);
    assert!(found.links.len() <= filter.max_links, "more links than max_links");
    for link in &found.links {
        assert!(link.occurrences >= 1, "{} counted {} times", link.url, link.occurrences);
        // The scheduler normalises the links it receives again: it must get the same URL.
        let again = normalise_url(&link.url);
        assert!(again.as_deref() == Ok(link.url.as_str()), "link {:?} normalises to {again:?}", link.url);
    }
}

/// Two versions scored as `recrawl-diff score` does, every metric on, past 64 words on
/// samples. Input layout:
/// `[selector, costs, old length (u16 LE), old…, new…]`; the selector picks how the
/// versions are read (bits 0–1), case folding (bit 2) and the shingle k (bits 3–7, k =
/// 1–32); `costs` gives IED's s (low nibble) and t (high nibble) in fifteenths.
pub fn change_degree(data: &[u8]) {
    let [selector, costs, length_lo, length_hi, rest @ ..] = data else { return };
    let split = usize::from(u16::from_le_bytes([*length_lo, *length_hi])).min(rest.len());
    let (old, new) = rest.split_at(split);
    let input =
        [InputKind::Html, InputKind::Text, InputKind::Words, InputKind::Html][usize::from(selector & 3)];
    let compare = CompareArgs {
        s: f64::from(costs & 0xF) / 15.0,
        t: f64::from(costs >> 4) / 15.0,
        k: u32::from(selector >> 3) + 1,
        case_fold: if selector & 4 == 0 { CaseFold::None } else { CaseFold::Lower },
        // Small enough that longer inputs are compared on samples, as a long page is.
        max_words: 100_000,
        max_kept_words: 64,
    };
    let scored = score(old, new, input, &compare, false);
    for (name, degree) in degrees(&scored) {
        assert!((0.0..=1.0).contains(&degree), "{name} = {degree} outside [0, 1]");
    }
    assert!(scored.ied_cost >= 0.0 && scored.ied_cost.is_finite(), "ied_cost = {}", scored.ied_cost);
    let same = score(old, old, input, &compare, false);
    for (name, degree) in degrees(&same) {
        // COS divides by the vectors' norms, so a version against itself is zero only up
        // to rounding.
        let tolerance = if name == "cos" { 1e-9 } else { 0.0 };
        assert!(degree <= tolerance, "{name} = {degree} for a version against itself");
    }
}

fn degrees(score: &recrawl_diff::offline::Score) -> [(&'static str, f64); 6] {
    [
        ("bw", score.bw),
        ("cos", score.cos),
        ("wd", score.wd),
        ("ed", score.ed),
        ("sh", score.sh),
        ("ied", score.ied),
    ]
}

/// A history written as in the paper's Figure 1, read by `recrawl-estimator stats
/// --history`, and the same text as the `group<TAB>history` lines of `evaluate`.
pub fn history(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    check_stats(&text);
    if let Ok(lines) = parse_histories(&text) {
        for (_, history) in lines {
            check_stats(&history);
        }
    }
}

/// The counts add up and every rate is a share, K being the history's length.
fn check_stats(history: &str) {
    let stats = stats(&StatsArgs { history: history.to_owned(), crawls: None });
    assert_eq!(stats.requests, stats.successes + stats.failures, "{history:?}");
    assert!(stats.changes <= stats.successes, "{history:?}");
    assert!(u64::from(stats.requests) <= stats.crawls, "{history:?}");
    let rates = [
        ("request rate", stats.request_rate),
        ("DR", stats.dr),
        ("download recall", stats.download_recall),
        ("MR", stats.mr),
        ("change recall", stats.change_recall),
    ];
    for (name, rate) in rates {
        if let Some(rate) = rate {
            assert!((0.0..=1.0).contains(&rate), "{name} = {rate} for {history:?}");
        }
    }
}
