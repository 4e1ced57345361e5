//! The diff stage's throughput through the embedded broker: batches of 4,000 fetch results (1,000-word
//! pages, half of them a changed version of the page before) produced to `fetch-results`,
//! timed until as many change events have been read back from `change-events`.
//!
//! Baseline in the same run, `broker_round_trip`: the same fetch results produced and read
//! back through the broker with no stage in between; the difference is the stage's cost.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rdkafka::producer::{FutureProducer, FutureRecord};
use recrawl::observe::{Observed, Observer};
use recrawl_common::KafkaArgs;
use recrawl_e2e::{kafka_flags, parse_args, unique_prefix, Broker, RunningStage};
use recrawl_schemas::topics::{CHANGE_EVENTS, FETCH_RESULTS};
use recrawl_schemas::{encode, FetchResult};

const PAGES: u64 = 200;
/// Results per iteration: enough that the producer's linger and the consumer's fetch wait
/// are a small part of the time.
const BATCH: u64 = 4000;

fn fetch_result(sequence: u64) -> FetchResult {
    let (page, period) = (sequence % PAGES, 1 + sequence / PAGES);
    let url = format!("http://site{}.example/page{page}.html", page % 20);
    // Every other period changes one paragraph of fifty words.
    let variant = period / 2;
    let paragraphs: String = (0..20)
        .map(|p| {
            let words: Vec<String> = (0..50)
                .map(|w| if p == 7 { format!("v{variant}w{w}") } else { format!("p{page}w{}", p * 50 + w) })
                .collect();
            format!("<p>{}</p>", words.join(" "))
        })
        .collect();
    let body = format!("<html><head><title>page {page}</title></head><body>{paragraphs}</body></html>");
    FetchResult::html_page(&url, &format!("site{}.example", page % 20), period, body)
}

async fn produce(producer: &FutureProducer, topic: &str, sequences: std::ops::Range<u64>) {
    let sends = sequences.map(|sequence| {
        let result = fetch_result(sequence);
        let payload = encode(&result).expect("encode");
        let headers = recrawl_e2e::message_headers::<FetchResult>();
        async move {
            let record = FutureRecord::to(topic).key(&result.url).payload(&payload).headers(headers);
            producer.send(record, Duration::from_secs(30)).await.expect("produced");
        }
    });
    futures::future::join_all(sends).await;
}

async fn read(observer: &Observer, count: u64) {
    let mut seen = 0;
    while seen < count {
        match observer.next().await.expect("observer") {
            Observed::Change(_) | Observed::Result(_) => seen += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Results in flight at most: the mock broker keeps about 5 MB per partition, so a producer far ahead
/// of the consumer would lose records before they are read.
const WINDOW: u64 = 2000;

/// Produces `range` and reads as many outputs, one window ahead.
async fn round_trip(
    producer: &FutureProducer,
    topic: &str,
    observer: &Observer,
    range: std::ops::Range<u64>,
) {
    let mut start = range.start;
    let mut unread = 0;
    while start < range.end {
        let end = (start + WINDOW).min(range.end);
        tokio::join!(produce(producer, topic, start..end), read(observer, unread));
        unread = end - start;
        start = end;
    }
    read(observer, unread).await;
}

fn bench(c: &mut Criterion) {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let broker = Broker::start();
    let mut group = c.benchmark_group("diff_stage_1000_words");
    group.throughput(Throughput::Elements(BATCH)).sample_size(10).measurement_time(Duration::from_secs(45));

    // The stage, running for the whole benchmark.
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("bench-diff"));
    let kafka: KafkaArgs = parse_args(&flags);
    let (producer, observer, stage) = runtime.block_on(async {
        broker.create_topics(&kafka, 4).await;
        let producer: FutureProducer =
            recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
        let observer = Observer::new(&kafka.cluster, &[CHANGE_EVENTS.name]).await.expect("observer");
        let stage = RunningStage::spawn("diff", |ctx| recrawl_diff::run(parse_args(&flags), ctx));
        stage.ready().await;
        (producer, observer, stage)
    });
    let topic = kafka.cluster.topics().name(FETCH_RESULTS.name);
    let mut next = 0u64;
    group.bench_function("through_the_stage", |b| {
        b.iter_custom(|iterations| {
            let count = iterations * BATCH;
            let range = next..next + count;
            next += count;
            runtime.block_on(async {
                let started = Instant::now();
                round_trip(&producer, &topic, &observer, range).await;
                started.elapsed()
            })
        })
    });

    let floor_flags = kafka_flags(&broker.bootstrap(), &unique_prefix("bench-floor"));
    let floor: KafkaArgs = parse_args(&floor_flags);
    let floor_topic = floor.cluster.topics().name(FETCH_RESULTS.name);
    let floor_observer = runtime.block_on(async {
        broker.create_topics(&floor, 4).await;
        Observer::new(&floor.cluster, &[FETCH_RESULTS.name]).await.expect("observer")
    });
    let mut floor_next = 0u64;
    group.bench_function("broker_round_trip", |b| {
        b.iter_custom(|iterations| {
            let count = iterations * BATCH;
            let range = floor_next..floor_next + count;
            floor_next += count;
            runtime.block_on(async {
                let started = Instant::now();
                round_trip(&producer, &floor_topic, &floor_observer, range).await;
                started.elapsed()
            })
        })
    });
    group.finish();
    runtime.block_on(stage.stop()).expect("the stage stops cleanly");
    drop(broker);
}

criterion_group!(benches, bench);
criterion_main!(benches);
