//! `recrawl dlq list` and `recrawl dlq replay`, run as the binary a user runs, against a
//! diff stage on the broker: the stage's own dead letters are listed with their origin and
//! chosen by it; a dry run publishes nothing; a confirmed replay puts the original key and
//! bytes back on the original topic, where the stage reads them again. A dead letter whose
//! record the stage accepts now (here: one an older build had refused, written as a stage
//! writes it) becomes a change event once replayed.

use std::process::{Command, Output};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use recrawl::observe::{Observed, Observer};
use recrawl_common::KafkaArgs;
use recrawl_e2e::{binary, kafka_flags, output_within, parse_args, unique_prefix, Broker, RunningStage};
use recrawl_schemas::topics::{dead_letter_headers, CHANGE_EVENTS, DEAD_LETTER, FETCH_RESULTS};
use recrawl_schemas::{encode, FetchResult};

fn recrawl(args: &[String]) -> Output {
    output_within(Command::new(binary("recrawl")).args(args), Duration::from_secs(120))
}

/// `recrawl dlq …`'s JSON lines.
fn dlq(flags: &[String], command: &[&str]) -> Vec<serde_json::Value> {
    let mut args: Vec<String> = ["dlq"].iter().chain(command).map(|s| (*s).to_owned()).collect();
    args.extend(flags.iter().cloned());
    let output = recrawl(&args);
    assert!(output.status.success(), "recrawl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

/// Records on `topic` so far, over its partitions.
fn records(kafka: &KafkaArgs, topic: &str) -> i64 {
    let reader: BaseConsumer =
        recrawl_common::kafka::reader_config(&kafka.cluster, "dlq-test").create().expect("reader");
    (0..2)
        .map(|p| {
            let (low, high) = reader.fetch_watermarks(topic, p, Duration::from_secs(10)).expect("watermarks");
            high - low
        })
        .sum()
}

/// The next `count` dead letters and change events the observer sees.
async fn next_dead_letters(observer: &Observer, count: usize) -> Vec<recrawl::observe::DeadLetter> {
    let mut letters = Vec::new();
    while letters.len() < count {
        let next = tokio::time::timeout(Duration::from_secs(60), observer.next()).await;
        if let Observed::DeadLetter(letter) = next.expect("a dead letter within a minute").expect("observed")
        {
            letters.push(letter);
        }
    }
    letters
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_listed_chosen_and_replayed_to_their_topic() {
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("dlq"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    let results = kafka.cluster.topics().name(FETCH_RESULTS.name);
    let dead_letter = kafka.cluster.topics().name(DEAD_LETTER);
    let cli_flags: Vec<String> =
        ["--brokers", &kafka.cluster.brokers, "--topic-prefix", kafka.cluster.topics().prefix()]
            .map(str::to_owned)
            .to_vec();
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let observer = Observer::new(&kafka.cluster, &[DEAD_LETTER, CHANGE_EVENTS.name]).await.expect("observer");
    let diff = RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(&flags), ctx));
    diff.ready().await;

    // Two records the stage cannot read.
    for (key, value) in [("bad-1", b"not an envelope".to_vec()), ("bad-2", vec![0xC5, 1, 0, 99, 1, 2])] {
        let record = FutureRecord::to(&results).key(key).payload(&value);
        producer.send(record, Duration::from_secs(10)).await.expect("produced");
    }
    let letters = next_dead_letters(&observer, 2).await;
    let listed = dlq(&cli_flags, &["list"]);
    assert_eq!(listed.len(), 2, "{listed:?}");
    for (line, letter) in listed.iter().zip(&letters) {
        assert_eq!(line["topic"], results.as_str());
        assert_eq!(line["stage"], "diff");
        assert_eq!(line["partition"], letter.source_partition.expect("partition"));
        assert_eq!(line["offset"], letter.source_offset.expect("offset"));
    }
    let kinds: Vec<&str> = listed.iter().filter_map(|l| l["kind"].as_str()).collect();
    assert!(kinds.contains(&"undecodable") && kinds.contains(&"schema_version"), "{kinds:?}");
    let only = dlq(&cli_flags, &["list", "--kind", "undecodable"]);
    assert_eq!(only.len(), 1);
    assert_eq!(only[0]["key"], "bad-1");

    // A dry run chooses by origin and publishes nothing.
    let bad_1 = letters.iter().find(|l| l.key == b"bad-1").expect("bad-1");
    let (partition, offset) = (bad_1.source_partition.expect("p"), bad_1.source_offset.expect("o"));
    let before = records(&kafka, &results);
    let by_origin = [
        "replay",
        "--topic",
        FETCH_RESULTS.name,
        "--partition",
        &partition.to_string(),
        "--offset",
        &offset.to_string(),
    ];
    let dry = dlq(&cli_flags, &by_origin);
    assert_eq!(dry.len(), 1);
    assert_eq!(dry[0]["replay"], "dry run");
    assert_eq!(records(&kafka, &results), before, "a dry run publishes nothing");

    // Confirmed: the original key and bytes go back on fetch-results, and the stage reads
    // them again (and, the record being what it was, dead-letters it again).
    let confirmed = dlq(&cli_flags, &[&by_origin[..], &["--confirm"]].concat());
    assert_eq!(confirmed[0]["replay"], "published");
    assert_eq!(records(&kafka, &results), before + 1);
    let again = next_dead_letters(&observer, 1).await.remove(0);
    assert_eq!(
        (again.key.as_slice(), again.value.as_slice()),
        (bad_1.key.as_slice(), bad_1.value.as_slice())
    );
    assert_eq!(again.source_topic, results);
    assert_ne!(again.source_offset, bad_1.source_offset, "read again from its new offset");

    // A dead letter whose record the stage accepts now is processed once replayed.
    let page = FetchResult::html_page("http://fixed.example/", "fixed.example", 1, "<p>fixed page</p>");
    let payload = encode(&page).expect("encode");
    let headers = [
        (dead_letter_headers::REASON, "schema version 1 not readable by this build"),
        (dead_letter_headers::KIND, "schema_version"),
        (dead_letter_headers::STAGE, "diff"),
        (dead_letter_headers::TOPIC, results.as_str()),
        (dead_letter_headers::PARTITION, "0"),
        (dead_letter_headers::OFFSET, "12345"),
    ]
    .iter()
    .fold(OwnedHeaders::new(), |h, (key, value)| h.insert(Header { key, value: Some(*value) }));
    let record = FutureRecord::to(&dead_letter).key(&page.url).payload(&payload).headers(headers);
    producer.send(record, Duration::from_secs(10)).await.expect("produced");
    next_dead_letters(&observer, 1).await;
    let replayed = dlq(&cli_flags, &["replay", "--key", &page.url, "--confirm"]);
    assert_eq!(replayed.len(), 1, "{replayed:?}");
    let event = loop {
        let next = tokio::time::timeout(Duration::from_secs(60), observer.next()).await;
        if let Observed::Change(event) = next.expect("a change event within a minute").expect("observed") {
            break event;
        }
    };
    assert_eq!(event.page.url, page.url);

    // Replay refuses to run without a selection.
    let refused = recrawl(&[&["dlq".to_owned(), "replay".to_owned()][..], &cli_flags].concat());
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("needs a selection"), "{refused:?}");

    diff.stop().await.expect("diff stops");
}
