//! Poison never stops a stage: on every input topic of every stage, a 5 MB record, an
//! empty one, random bytes, a valid header with a truncated body and a record of a future
//! schema version each go to the dead-letter topic exactly once, with their origin and
//! reason (the 5 MB one with its first bytes and its size), and the valid record behind
//! them is processed. So does a valid record of a period that has not begun, on the inputs
//! of every stage, a pick or result filed under another host than its URL's, a pick
//! whose URL carries credentials, and a fetch result no WARC record can hold, on the
//! archive's.

use std::future::Future;
use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use recrawl::observe::{Observed, Observer};
use recrawl_common::runtime::RuntimeError;
use recrawl_common::{unix_ms, KafkaArgs, StageContext};
use recrawl_e2e::{kafka_flags, metric, parse_args, unique_prefix, Broker, RunningStage};
use recrawl_schemas::topics::{CHANGE_EVENTS, DEAD_LETTER, ESTIMATES, FETCH, FETCH_RESULTS, LINKS};
use recrawl_schemas::{
    bounds, encode, ChangeEvent, DiscoveredLinks, FetchResult, Message, PagePick, PageRef, RequestOutcome,
};

const FIVE_MB: usize = 5 << 20;

/// The five poisons for a topic whose valid payload encodes as `good`, each with the kind
/// its dead letter must carry.
fn poisons(good: &[u8]) -> Vec<(Vec<u8>, &'static str)> {
    // Deterministic noise that starts with no envelope's magic byte.
    let noise: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 1).collect();
    // The same record from the next schema version: in its JSON tag (the messages people
    // read), or in its envelope (internal ones).
    let future = match std::str::from_utf8(good) {
        Ok(json) if json.starts_with('{') => {
            // `{"schema":"recrawl.<name>/<version>"`
            const FIELD: &str = "\"schema\":\"";
            let start = json.find(FIELD).expect("a schema tag") + FIELD.len();
            let end = start + json[start..].find('"').expect("the tag's end");
            let slash = start + json[start..end].rfind('/').expect("a versioned tag");
            let version: u16 = json[slash + 1..end].parse().expect("a version");
            format!("{}/{}{}", &json[..slash], version + 1, &json[end..]).into_bytes()
        }
        _ => {
            let mut future = good.to_vec();
            let version = u16::from_be_bytes([good[2], good[3]]);
            future[2..4].copy_from_slice(&(version + 1).to_be_bytes());
            future
        }
    };
    vec![
        (vec![b'x'; FIVE_MB], "undecodable"),
        (Vec::new(), "undecodable"),
        (noise, "undecodable"),
        (good[..good.len() / 2].to_vec(), "undecodable"),
        (future, "schema_version"),
    ]
}

/// One input topic of a stage under test: where poison goes, and the valid record (its
/// bytes and envelope headers) sent after it.
struct Input {
    topic: &'static str,
    key: String,
    good: Vec<u8>,
    headers: [(&'static str, String); 2],
    /// What is sent before `good`, with the kind each dead letter must carry.
    poisons: Vec<(Vec<u8>, &'static str)>,
}

fn input<M: Message>(topic: &'static str, key: &str, message: &M) -> Input {
    let good = encode(message).expect("encode");
    Input {
        topic,
        key: key.to_owned(),
        poisons: poisons(&good),
        good,
        headers: recrawl_schemas::envelope::kafka_headers::<M>(),
    }
}

impl Input {
    /// Also sends `message`, valid but of a period that has not begun: applied, it would
    /// make the real records of its URL look stale for good.
    fn and_from_the_future<M: Message>(self, message: &M) -> Self {
        self.and_invalid(message)
    }

    /// Also sends `message`, whose encoding is sound but whose fields are not (a page
    /// filed under another host than its URL's, a URL with credentials).
    fn and_invalid<M: Message>(mut self, message: &M) -> Self {
        self.poisons.push((encode(message).expect("encode"), "invalid"));
        self
    }
}

/// Runs `stage`, poisons each input, sends each valid record, waits until `processed`
/// says the stage handled them, then checks the dead letters against the topic's content.
async fn poison_stage<F, Fut>(
    name: &'static str,
    extra_flags: &[&str],
    run: F,
    inputs: Vec<Input>,
    processed: impl Fn(&RunningStage, &[Observed]) -> bool,
    watched: &[&str],
) where
    F: FnOnce(Vec<String>, StageContext) -> Fut,
    Fut: Future<Output = Result<(), RuntimeError>> + Send + 'static,
{
    let broker = Broker::start();
    let prefix = unique_prefix(&format!("poison-{name}"));
    let kafka: KafkaArgs = parse_args(&kafka_flags(&broker.bootstrap(), &prefix));
    broker.create_topics(&kafka, 2).await;
    let mut flags = kafka_flags(&broker.bootstrap(), &prefix);
    flags.extend(extra_flags.iter().map(|f| (*f).to_owned()));
    let record_limit = flags
        .windows(2)
        .find(|pair| pair[0] == "--max-record-bytes")
        .map_or(kafka.cluster.max_record_bytes, |pair| pair[1].parse().expect("a number"));
    let stage = RunningStage::spawn(name, |ctx| run(flags.clone(), ctx));
    stage.ready().await;

    // The test's producer takes records as large as the default limit, whatever the stage's.
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    for input in &inputs {
        let topic = kafka.cluster.topics().name(input.topic);
        for (poison, _) in &input.poisons {
            producer
                .send(FutureRecord::to(&topic).key(&input.key).payload(poison), Duration::from_secs(30))
                .await
                .expect("poison produced");
        }
        let mut headers = OwnedHeaders::new();
        for (name, value) in &input.headers {
            headers = headers.insert(Header { key: name, value: Some(value.as_bytes()) });
        }
        let good = FutureRecord::to(&topic).key(&input.key).payload(&input.good).headers(headers);
        producer.send(good, Duration::from_secs(30)).await.expect("valid record produced");
    }

    let mut topics = vec![DEAD_LETTER];
    topics.extend_from_slice(watched);
    let observer = Observer::new(&kafka.cluster, &topics).await.expect("observer");
    let expected: usize = inputs.iter().map(|input| input.poisons.len()).sum();
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let dead = |seen: &[Observed]| seen.iter().filter(|o| matches!(o, Observed::DeadLetter(_))).count();
    while dead(&seen) < expected || !processed(&stage, &seen) {
        let next = tokio::time::timeout_at(deadline, observer.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{name}: {} dead letters of {expected}, processed: {}",
                    dead(&seen),
                    processed(&stage, &seen)
                )
            })
            .expect("observer");
        seen.push(next);
    }
    let ctx = stage.ctx.clone();
    stage.stop().await.unwrap_or_else(|e| panic!("{name} stops cleanly after the poison: {e}"));
    let metrics = ctx.metrics.render();

    // Exactly once each: the stage has flushed, so a marker written now to the one
    // partition of the dead-letter topic comes after every dead letter it wrote.
    let dead_letter_topic = kafka.cluster.topics().name(DEAD_LETTER);
    producer
        .send(FutureRecord::to(&dead_letter_topic).key("end-marker").payload("end"), Duration::from_secs(30))
        .await
        .expect("marker produced");
    loop {
        let next =
            tokio::time::timeout_at(deadline, observer.next()).await.expect("the marker").expect("observer");
        if matches!(&next, Observed::DeadLetter(letter) if letter.key == b"end-marker") {
            break;
        }
        seen.push(next);
    }
    assert_eq!(dead(&seen), expected, "{name}: each poison dead-lettered once");
    for input in &inputs {
        let topic = kafka.cluster.topics().name(input.topic);
        let mut letters: Vec<(String, usize, usize)> = seen
            .iter()
            .filter_map(|o| match o {
                Observed::DeadLetter(letter) => {
                    assert_eq!(letter.stage, name);
                    assert!(!letter.reason.is_empty());
                    if letter.kind == "schema_version" {
                        // The record one version past the newest the build reads.
                        let newest: u16 = letter
                            .reason
                            .split("it reads up to ")
                            .nth(1)
                            .and_then(|rest| rest.trim_end_matches(')').parse().ok())
                            .unwrap_or_else(|| panic!("no newest version: {}", letter.reason));
                        let found = format!("schema version {}, which this build does not read", newest + 1);
                        assert!(letter.reason.contains(&found), "{}", letter.reason);
                    }
                    (letter.source_topic == topic).then(|| {
                        assert_eq!(letter.key, input.key.as_bytes(), "the original key");
                        (letter.kind.clone(), letter.original_bytes, letter.value.len())
                    })
                }
                _ => None,
            })
            .collect();
        letters.sort();
        let mut wanted: Vec<(String, usize)> =
            input.poisons.iter().map(|(bytes, kind)| ((*kind).to_owned(), bytes.len())).collect();
        wanted.sort();
        let got: Vec<(String, usize)> = letters.iter().map(|(k, size, _)| (k.clone(), *size)).collect();
        assert_eq!(got, wanted, "{name}: dead letters of {topic}");
        // A dead letter keeps the whole value when it fits in a record, its first bytes
        // otherwise.
        let five_mb = letters.iter().find(|(_, size, _)| *size == FIVE_MB).expect("the 5 MB poison");
        if FIVE_MB < record_limit {
            assert_eq!(five_mb.2, FIVE_MB, "{name}: the 5 MB poison fits and is kept whole");
        } else {
            assert!(five_mb.2 > 0 && five_mb.2 < record_limit, "{name}: only the 5 MB poison's first bytes");
        }
        let counted = |kind: &str| {
            let series =
                format!(r#"recrawl_dead_letters_total{{kind="{kind}",topic="{topic}",stage="{name}"}} "#);
            metrics.lines().find_map(|line| line.strip_prefix(&series)).map(str::to_owned)
        };
        assert_eq!(counted("undecodable").as_deref(), Some("4"), "{name} {topic}");
        assert_eq!(counted("schema_version").as_deref(), Some("1"), "{name} {topic}");
        let invalid = input.poisons.iter().filter(|(_, kind)| *kind == "invalid").count();
        assert_eq!(counted("invalid"), Some(invalid.to_string()), "{name} {topic}");
    }
    drop(broker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_dead_letters_poison_and_goes_on() {
    // Loopback is refused by default: the valid pick ends as blocked_address, no network.
    let good = PagePick::discovery("http://127.0.0.1:9/page.html", 1).expect("pick");
    // Fetched under 127.0.0.1:9's politeness gate, it would be another host's request.
    let elsewhere = PagePick { url: "http://elsewhere.example/page.html".into(), ..good.clone() };
    let with_credentials =
        PagePick { url: "http://user:SECRETPW@127.0.0.1:9/page.html".into(), ..good.clone() };
    let inputs = vec![input(FETCH.name, &good.host, &good)
        .and_from_the_future(&PagePick { period: bounds::MAX_PERIOD, ..good.clone() })
        .and_invalid(&elsewhere)
        .and_invalid(&with_credentials)];
    let url = good.url.clone();
    let processed = move |_: &RunningStage, seen: &[Observed]| {
        seen.iter().any(|o| matches!(o, Observed::Result(r) if r.url == url))
    };
    poison_stage(
        "fetch",
        &["--request-timeout-ms", "2000"],
        |flags, ctx| recrawl_fetch::run(parse_args(&flags), ctx),
        inputs,
        processed,
        &[FETCH_RESULTS.name],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_dead_letters_poison_and_goes_on() {
    let good = FetchResult::html_page("http://site.example/a.html", "site.example", 1, "<p>one two</p>");
    // Kept, a result from the future would make every real one of its URL late: compared
    // with nothing, for good.
    let future = FetchResult { period: bounds::MAX_PERIOD, ..good.clone() };
    let elsewhere = FetchResult { host: "elsewhere.example".into(), ..good.clone() };
    let inputs = vec![input(FETCH_RESULTS.name, &good.url, &good)
        .and_from_the_future(&future)
        .and_invalid(&elsewhere)];
    let url = good.url.clone();
    let processed = move |_: &RunningStage, seen: &[Observed]| {
        seen.iter().any(|o| matches!(o, Observed::Change(c) if c.page.url == url))
    };
    poison_stage(
        "diff",
        &["--max-record-bytes", "4194304"],
        |flags, ctx| recrawl_diff::run(parse_args(&flags), ctx),
        inputs,
        processed,
        &[CHANGE_EVENTS.name],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_dead_letters_poison_and_goes_on() {
    let good = FetchResult::html_page("http://site.example/a.html", "site.example", 1, "<p>one two</p>");
    // Decodes and validates, but its ETag would end a line of the record it is written in.
    let forged = FetchResult { etag: Some("\"v\"\r\nWARC-Type: forged".into()), ..good.clone() };
    let mut archived = input(FETCH_RESULTS.name, &good.url, &good);
    archived.poisons.push((encode(&forged).expect("encode"), "invalid"));
    let dir = tempfile::tempdir().expect("dir");
    let out = format!("file://{}", dir.path().display());
    let processed = |stage: &RunningStage, _: &[Observed]| {
        metric(stage, r#"recrawl_archive_records_total{type="response",stage="archive"}"#)
            .is_some_and(|n| n >= 1.0)
    };
    poison_stage(
        "archive",
        &["--out", &out],
        |flags, ctx| recrawl_archive::run(parse_args(&flags), ctx),
        vec![archived],
        processed,
        &[],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimator_dead_letters_poison_and_goes_on() {
    let outcome = RequestOutcome { period: 1, downloaded: true, changed: None, fetched_at_ms: unix_ms() };
    let good = ChangeEvent::request("http://site.example/a.html", "site.example", outcome);
    let future = ChangeEvent { period: bounds::MAX_PERIOD, ..good.clone() };
    let inputs = vec![input(CHANGE_EVENTS.name, &good.page.url, &good).and_from_the_future(&future)];
    let url = good.page.url.clone();
    let processed = move |_: &RunningStage, seen: &[Observed]| {
        seen.iter().any(|o| matches!(o, Observed::Estimate(e) if e.page.url == url))
    };
    poison_stage(
        "estimator",
        &["--max-record-bytes", "4194304"],
        |flags, ctx| recrawl_estimator::run(parse_args(&flags), ctx),
        inputs,
        processed,
        &[ESTIMATES.name],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_dead_letters_poison_on_both_inputs_and_goes_on() {
    let url = "http://site.example/a.html";
    let link = DiscoveredLinks {
        page: PageRef::new(url, "site.example"),
        source: None,
        occurrences: 1,
        period: 1,
        depth: 0,
    };
    let estimate_url = "http://site.example/b.html";
    let outcome = RequestOutcome { period: 1, downloaded: true, changed: None, fetched_at_ms: unix_ms() };
    let event = ChangeEvent::request(estimate_url, "site.example", outcome);
    let mut estimator = recrawl_estimator::estimate::Estimator::new(
        parse_args::<recrawl_estimator::EstimateArgs>(&[]).settings(),
    );
    let applied = estimator.apply(&event, 0, &mut recrawl_common::StateStore::default(), unix_ms());
    let recrawl_estimator::Applied::New(estimate, _) = applied else { panic!("a first request estimates") };
    let estimate = *estimate;
    let future_link = DiscoveredLinks { period: bounds::MAX_PERIOD, ..link.clone() };
    let mut future_estimate = estimate.clone();
    future_estimate.last_request.period = bounds::MAX_PERIOD;
    let inputs = vec![
        input(LINKS.name, url, &link).and_from_the_future(&future_link),
        input(ESTIMATES.name, estimate_url, &estimate).and_from_the_future(&future_estimate),
    ];
    let processed = |stage: &RunningStage, _: &[Observed]| {
        metric(stage, r#"recrawl_scheduler_links_total{outcome="discovered",stage="scheduler"}"#) == Some(1.0)
            && metric(stage, r#"recrawl_scheduler_estimates_total{result="new",stage="scheduler"}"#)
                == Some(1.0)
    };
    poison_stage(
        "scheduler",
        &["--epoch-unix-ms", "0", "--period-ms", "3600000"],
        |flags, ctx| recrawl_scheduler::run(parse_args(&flags), ctx),
        inputs,
        processed,
        &[],
    )
    .await;
}
