//! The bodies of recrawl's fuzz targets, one `pub fn(&[u8])` each, calling the code the
//! stages run on untrusted bytes. `fuzz/` (cargo-fuzz, nightly) feeds them libFuzzer's
//! inputs; `tests/corpus.rs` replays the committed corpus and crash inputs on stable, so
//! `cargo test --workspace` keeps every input found so far passing.
//!
//! A target panics only on a real bug: a panic in the code under test, or a broken
//! invariant that the code documents.

use recrawl_diff::offline::{score, InputKind};
use recrawl_diff::text::{page_words, CaseFold};
use recrawl_diff::CompareArgs;
use recrawl_estimator::offline::{stats, StatsArgs};
use recrawl_fetch::links::{extract_links, LinkFilter};
use recrawl_fetch::robots::{RobotsRules, MAX_ROBOTS_BYTES};
use recrawl_lab::evaluate::parse_histories;
use recrawl_schemas::envelope::{check_kafka_headers, inspect};
use recrawl_schemas::{
    decode, encode, normalise_url, ChangeEvent, DiscoveredLinks, FetchResult, Format, GroupDistribution,
    Message, PageEstimate, PagePick,
};
use url::Url;

/// A target: runs one input, panics on a bug.
pub type Target = fn(&[u8]);

/// Every target by name: the name is its directory under `fuzz/corpus/` and
/// `fuzz/regressions/` and its file under `fuzz/fuzz_targets/`.
pub const TARGETS: [(&str, Target); 6] = [
    ("decode_topics", decode_topics),
    ("robots", robots),
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
    round_trip::<ChangeEvent>(data);
    round_trip::<PageEstimate>(data);
    round_trip::<GroupDistribution>(data);
    round_trip::<recrawl_diff::DiffState>(data);
    round_trip::<recrawl_estimator::EstimatorState>(data);
    round_trip::<recrawl_scheduler::book::SchedulerState>(data);
    // Headers from the record itself: any bytes a producer may have put there.
    let _ = check_kafka_headers(data, Some(data), Some(data));
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

/// Two versions scored as `recrawl-diff score` does, every metric on. Input layout:
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
    };
    let scored = score(old, new, input, &compare);
    for (name, degree) in degrees(&scored) {
        assert!((0.0..=1.0).contains(&degree), "{name} = {degree} outside [0, 1]");
    }
    assert!(scored.ied_cost >= 0.0 && scored.ied_cost.is_finite(), "ied_cost = {}", scored.ied_cost);
    let same = score(old, old, input, &compare);
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
