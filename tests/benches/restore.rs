//! Restoring each stateful stage from its compacted changelog at scale: N URLs' state
//! (`state.scheduler`, `state.estimator`, `state.diff`) produced as the stage writes it
//! (its key, encoding and headers, to the changelog partition of the key's input
//! partition), then the stage's release binary started on it, timed from the spawn to its
//! `/readyz` answering 200 and to its restored-records counter reaching N. Memory: the
//! process's `VmHWM` once ready. Baseline in the same run: the same stage started on an
//! empty changelog, start to ready (on tansu, most of it is the group's assignment).
//!
//! ```sh
//! cargo build --release --bin recrawl-scheduler --bin recrawl-estimator --bin recrawl-diff
//! RECRAWL_RESTORE_URLS=1000000 cargo bench -p recrawl-e2e --bench restore
//! ```
//!
//! Settings (environment):
//! - `RECRAWL_RESTORE_URLS`: URLs of the scheduler and the estimator (200,000);
//! - `RECRAWL_RESTORE_DIFF_URLS`: URLs of diff, whose records carry a 1,000-word page's
//!   hashes, 8 KB (20,000);
//! - `RECRAWL_RESTORE_STAGES`: which stages (`scheduler,estimator,diff`);
//! - `RECRAWL_RESTORE_PARTITIONS`: changelog partitions (16; on the embedded broker at
//!   least what keeps each partition under its 5 MiB, see below);
//! - `RECRAWL_RESTORE_PERF`: a directory; each restore is then recorded there with
//!   `perf record -g -p PID` from the spawn to ready;
//! - `RECRAWL_TEST_BROKERS`: an independent broker (tansu, Kafka) instead of the embedded
//!   one.
//!
//! The embedded broker (librdkafka's mock cluster) keeps at most 5 MiB and 100,000
//! message sets a partition (`rd_kafka_mock_partition_init`: `max_size = 1024 * 1024 *
//! 5`, `max_cnt = 100000`), dropping the oldest past either, and never compacts. The
//! bench gives it enough partitions to keep every record, and checks that each
//! partition still starts at offset 0 before the stage is started.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use recrawl_common::{KafkaArgs, StateStore};
use recrawl_diff::change::{DiffSettings, Differ};
use recrawl_diff::DiffState;
use recrawl_e2e::processes::status_kib;
use recrawl_e2e::{kafka_flags, message_headers, parse_args, series_sum, unique_prefix, Broker};
use recrawl_estimator::estimate::{Estimator, EstimatorState};
use recrawl_estimator::EstimateArgs;
use recrawl_scheduler::book::{Book, SchedulerState};
use recrawl_scheduler::hosts::Hosts;
use recrawl_schemas::envelope::kafka_headers;
use recrawl_schemas::{encode, ChangeEvent, FetchResult, Message, PageRef, RequestOutcome};

/// Records in flight from the bench's producer.
const IN_FLIGHT: usize = 20_000;
/// What the embedded broker keeps of a partition, with a margin under its 5 MiB.
const MOCK_PARTITION_BYTES: u64 = 4 << 20;
/// How long a stage has to become ready.
const READY_WITHIN: Duration = Duration::from_secs(1800);

/// URL `n`: 60 bytes, over 2,000 hosts of 200 sites, as the stages' memory tests.
fn url(n: u64) -> String {
    format!("http://www{}.site{}.example/section/{n:010}/page.html", n % 10, n % 200)
}

/// The changelog partition of `key` among `partitions`: the input partition librdkafka's
/// default partitioner (`consistent_random`: CRC-32 of the key) gives a record keyed by
/// the URL, which is where the stage writes the URL's state.
fn partition_of(key: &str, partitions: i32) -> i32 {
    let mut crc = flate2::Crc::new();
    crc.update(key.as_bytes());
    (crc.sum() % partitions.unsigned_abs()) as i32
}

fn encoded<S: Message>(state: &S) -> Vec<u8> {
    encode(state).expect("encode")
}

/// What a stage's changelog record of URL `n` holds.
trait Generator {
    fn record(&mut self, n: u64) -> (String, Vec<u8>);
    /// Starts again, over `partitions` changelog partitions.
    fn restart(&mut self, _partitions: i32) {}
}

/// A tracked URL, as the scheduler's memory test makes one, with validators; its slot is
/// its order of discovery in its partition.
struct SchedulerRecords {
    template: SchedulerState,
    slots: Vec<u32>,
}

impl SchedulerRecords {
    fn new() -> Self {
        let (mut book, mut hosts) = (Book::default(), Hosts::default());
        let first = url(0);
        let host = recrawl_schemas::host_of(&first).expect("host");
        let slot =
            book.add_tracked(&mut hosts, &first, &host, Some(1), 20_000, 0.3, 0.9, Some(0.05)).expect("room");
        let mut template = book.record(slot);
        template.etag = Some("\"5f3a9c-1b2c4d\"".to_owned());
        template.last_modified = Some("Tue, 01 Dec 2026 10:00:00 GMT".to_owned());
        Self { template, slots: vec![0] }
    }
}

impl Generator for SchedulerRecords {
    fn record(&mut self, n: u64) -> (String, Vec<u8>) {
        let key = url(n);
        let partition = partition_of(&key, self.slots.len() as i32) as usize;
        let slot = self.slots[partition];
        self.slots[partition] = slot.saturating_add(1);
        let state = SchedulerState { slot, discovered: 1 + (n % 30) as u32, ..self.template.clone() };
        let payload = encoded(&state);
        (key, payload)
    }

    fn restart(&mut self, partitions: i32) {
        self.slots = vec![0; partitions.unsigned_abs() as usize];
    }
}

/// URLs after 30 daily requests, a third of them changed, as the estimator's memory test
/// makes them: 3,000 made by the estimator itself, URL `n` the one of `n % 3000` (same
/// host, site and history) under its own URL.
struct EstimatorRecords {
    templates: Vec<EstimatorState>,
}

const ESTIMATOR_TEMPLATES: u64 = 3_000;

impl EstimatorRecords {
    fn new() -> Self {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: EstimateArgs,
        }
        let mut estimator = Estimator::new(Cli::parse_from(["estimator"]).args.settings());
        let mut state: StateStore<EstimatorState> = StateStore::default();
        // 2026-11-01 and a day a request.
        let start_ms = 1_793_491_200_000i64;
        for day in 0..30u64 {
            for n in 0..ESTIMATOR_TEMPLATES {
                let url = url(n);
                let changed = (day > 0).then_some((n + day) % 3 == 0);
                let fetched_at_ms = start_ms + day as i64 * 86_400_000;
                let outcome = RequestOutcome { period: day + 1, downloaded: true, changed, fetched_at_ms };
                let host = recrawl_schemas::host_of(&url).expect("host");
                let event =
                    ChangeEvent { first_seen: day == 0, ..ChangeEvent::request(&url, &host, outcome) };
                let _ = estimator.apply(&event, 0, &mut state, fetched_at_ms);
            }
            let _ = state.take_dirty();
            let _ = estimator.take_partials(start_ms + day as i64 * 86_400_000);
        }
        let templates = (0..ESTIMATOR_TEMPLATES)
            .map(|n| state.get(0, &url(n)).expect("a template's state").clone())
            .collect();
        Self { templates }
    }
}

impl Generator for EstimatorRecords {
    fn record(&mut self, n: u64) -> (String, Vec<u8>) {
        let key = url(n);
        let mut state = self.templates[(n % ESTIMATOR_TEMPLATES) as usize].clone();
        if let Some(response) = state.last_response.as_mut() {
            response.page = PageRef::of_url(&key).expect("url");
        }
        let payload = encoded(&state);
        (key, payload)
    }
}

/// Pages of 1,000 words of prose (a vocabulary of 5,000), as diff's memory test makes
/// them, kept by the differ at the defaults: 1,000 distinct versions, URL `n` keeping
/// version `n % 1000`.
struct DiffRecords {
    payloads: Vec<Vec<u8>>,
}

const DIFF_VERSIONS: u64 = 1_000;

impl DiffRecords {
    fn new() -> Self {
        let mut differ = Differ::new(DiffSettings::default());
        let payloads = (0..DIFF_VERSIONS)
            .map(|n| {
                let text: Vec<String> = (0..1_000u64)
                    .map(|i| format!("w{}", (n << 32 | i).wrapping_mul(0x9E37_79B9_7F4A_7C15) % 5_000))
                    .collect();
                let result = FetchResult {
                    content_type: Some("text/plain".into()),
                    ..FetchResult::html_page(&url(n), "a.test", 1, text.join(" "))
                };
                let mut state = DiffState { last_period: 1, version: None, applied_before: Some(0) };
                differ.apply(&mut state.version, &result);
                encoded(&state)
            })
            .collect();
        Self { payloads }
    }
}

impl Generator for DiffRecords {
    fn record(&mut self, n: u64) -> (String, Vec<u8>) {
        (url(n), self.payloads[(n % DIFF_VERSIONS) as usize].clone())
    }
}

/// Produces `urls` records of `generator` to `topic` with the stages' producer settings,
/// each to its key's partition; the bytes of keys, values and headers.
async fn produce<S: Message>(
    kafka: &KafkaArgs,
    topic: &str,
    partitions: i32,
    urls: u64,
    generator: &mut dyn Generator,
) -> u64 {
    let producer: FutureProducer = recrawl_common::kafka::producer_config(kafka).create().expect("producer");
    let header_bytes: u64 =
        kafka_headers::<S>().iter().map(|(name, value)| (name.len() + value.len()) as u64).sum();
    let mut bytes = 0u64;
    let mut n = 0u64;
    let started = Instant::now();
    while n < urls {
        let end = (n + IN_FLIGHT as u64).min(urls);
        let records: Vec<(String, Vec<u8>)> = (n..end).map(|n| generator.record(n)).collect();
        bytes += records.iter().map(|(k, v)| (k.len() + v.len()) as u64 + header_bytes).sum::<u64>();
        let sends = records.iter().map(|(key, payload)| {
            let record = FutureRecord::to(topic)
                .key(key.as_str())
                .payload(payload)
                .headers(message_headers::<S>())
                .partition(partition_of(key, partitions));
            producer.send(record, Duration::from_secs(120))
        });
        for sent in futures::future::join_all(sends).await {
            sent.map_err(|(e, _)| e).expect("produced");
        }
        n = end;
        if n.is_multiple_of(1_000_000) || n == urls {
            eprintln!("  produced {n} records in {:.1} s", started.elapsed().as_secs_f64());
        }
    }
    bytes
}

/// Low and high watermarks of each partition of `topic`.
async fn watermarks(kafka: &KafkaArgs, topic: &str, partitions: i32) -> Vec<(i64, i64)> {
    let reader: BaseConsumer =
        recrawl_common::kafka::reader_config(&kafka.cluster, "restore-bench").create().expect("reader");
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        (0..partitions)
            .map(|p| reader.fetch_watermarks(&topic, p, Duration::from_secs(30)).expect("watermarks"))
            .collect()
    })
    .await
    .expect("joined")
}

struct Started {
    ready: Duration,
    /// When the restored-records counter was first seen at the records produced.
    counted: Option<Duration>,
    /// The stage's own `state_restore_seconds` (sum).
    restore_seconds: f64,
    peak_kb: u64,
    rss_kb: u64,
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        recrawl_e2e::terminate(&mut self.0, Duration::from_secs(30));
    }
}

/// Starts `recrawl-STAGE` with `flags`, waits until it is ready, and stops it.
async fn start(stage: &str, flags: &[String], records: u64, perf: Option<&std::path::Path>) -> Started {
    let client =
        reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(5)).build().expect("client");
    let http: SocketAddr = recrawl_common::http::free_local_port().expect("port");
    let log = tempfile::NamedTempFile::new().expect("log");
    let started = Instant::now();
    let child = Command::new(recrawl_e2e::binary(&format!("recrawl-{stage}")))
        .args(flags)
        .args(["--http-listen", &http.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("log"))
        .spawn()
        .expect("the stage starts");
    let mut child = Killed(child);
    let pid = child.0.id();
    let mut recorder = perf.map(|dir| {
        let out = dir.join(format!("{stage}-{records}.perf.data"));
        Killed(
            Command::new("perf")
                .args(["record", "-g", "-q", "-o"])
                .arg(&out)
                .args(["-p", &pid.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("perf"),
        )
    });
    let metric_names = ["recrawl_state_restored_records_total", "state_restored_records_total"];
    let mut counted = None;
    // Readiness and the counter are only observable by asking again.
    let ready = loop {
        if let Some(status) = child.0.try_wait().expect("status") {
            panic!(
                "recrawl-{stage} exited ({status}) before it was ready: {}",
                std::fs::read_to_string(log.path()).unwrap_or_default()
            );
        }
        assert!(started.elapsed() < READY_WITHIN, "recrawl-{stage} not ready within {READY_WITHIN:?}");
        if counted.is_none() && records > 0 {
            if let Ok(answer) = client.get(format!("http://{http}/metrics")).send().await {
                let text = answer.text().await.unwrap_or_default();
                if metric_names.iter().map(|name| series_sum(&text, name)).fold(0.0, f64::max)
                    >= records as f64
                {
                    counted = Some(started.elapsed());
                }
            }
        }
        let answer = client.get(format!("http://{http}/readyz")).send().await;
        if answer.is_ok_and(|r| r.status().is_success()) {
            break started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (peak_kb, rss_kb) = (status_kib(pid, "VmHWM:"), status_kib(pid, "VmRSS:"));
    if let Some(recorder) = recorder.as_mut() {
        // perf writes its file on SIGINT.
        let perf_pid = nix::unistd::Pid::from_raw(recorder.0.id() as i32);
        let _ = nix::sys::signal::kill(perf_pid, nix::sys::signal::Signal::SIGINT);
        let _ = recorder.0.wait();
    }
    let text = match client.get(format!("http://{http}/metrics")).send().await {
        Ok(answer) => answer.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    let restore_seconds = ["recrawl_state_restore_seconds_sum", "state_restore_seconds_sum"]
        .iter()
        .map(|name| series_sum(&text, name))
        .fold(0.0, f64::max);
    if records > 0 && counted.is_none() {
        let read = metric_names.iter().map(|name| series_sum(&text, name)).fold(0.0, f64::max);
        if read >= records as f64 {
            counted = Some(ready);
        } else {
            eprintln!("  warning: ready with {read} of {records} records restored");
        }
    }
    drop(child);
    Started { ready, counted, restore_seconds, peak_kb, rss_kb }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.replace(['_', ','], "").parse().ok()).unwrap_or(default)
}

/// Topics under a new prefix with `partitions`, and the stage's flags.
async fn prepare(broker: &Broker, stage: &str, partitions: i32) -> (KafkaArgs, Vec<String>) {
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix(&format!("restore-{stage}")));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, partitions).await;
    (kafka, flags)
}

async fn bench_stage<S: Message>(
    broker: &Broker,
    stage: &str,
    urls: u64,
    generator: &mut dyn Generator,
    perf: Option<&std::path::Path>,
) {
    let mock = matches!(broker, Broker::Mock(_));
    let sample: u64 = (0..100).map(|n| generator.record(n)).map(|(k, v)| (k.len() + v.len()) as u64).sum();
    let per_record = sample / 100 + 64;
    let mut partitions = i32::try_from(env_u64("RECRAWL_RESTORE_PARTITIONS", 16)).expect("partitions");
    if mock {
        let needed = (urls * per_record).div_ceil(MOCK_PARTITION_BYTES);
        partitions = partitions.max(i32::try_from(needed).expect("partitions"));
    }
    generator.restart(partitions);
    // The baseline first: the same stage, the same partitions, an empty changelog.
    let (_, empty_flags) = prepare(broker, stage, partitions).await;
    let baseline = start(stage, &empty_flags, 0, None).await;

    let (kafka, flags) = prepare(broker, stage, partitions).await;
    let topic = kafka.cluster.topics().state(stage);
    let produced = Instant::now();
    let bytes = produce::<S>(&kafka, &topic, partitions, urls, generator).await;
    let produce_seconds = produced.elapsed().as_secs_f64();
    let marks = watermarks(&kafka, &topic, partitions).await;
    let kept: i64 = marks.iter().map(|(low, high)| high - low).sum();
    // The embedded broker drops the oldest past its limits: a restore of what it kept
    // would measure fewer URLs than asked. An independent broker that lost acknowledged
    // records is reported, and the stage is timed on what it kept.
    let trimmed = marks.iter().any(|&(low, _)| low != 0);
    assert!(
        !(mock && (trimmed || kept != urls as i64)),
        "the broker kept {kept} of {urls} records ({marks:?})"
    );
    if kept != urls as i64 || trimmed {
        eprintln!("  warning: the broker kept {kept} of {urls} acknowledged records (watermarks {marks:?})");
    }
    let restored = u64::try_from(kept).unwrap_or(0);
    let run = start(stage, &flags, restored, perf).await;
    let restore = run.ready.saturating_sub(baseline.ready).as_secs_f64();
    let line = format!(
        "{stage} | {} | {restored} | {partitions} | {:.0} | {:.2} s | {} | {:.2} s | {:.2} s | {:.0} | {:.0} | {:.1} MB | {:.0} | {:.1} MB (produced in {produce_seconds:.1} s)",
        if mock { "embedded" } else { "external" },
        bytes as f64 / urls as f64,
        run.ready.as_secs_f64(),
        run.counted.map_or("-".to_owned(), |d| format!("{:.2} s", d.as_secs_f64())),
        run.restore_seconds,
        baseline.ready.as_secs_f64(),
        restored as f64 / run.restore_seconds.max(1e-9),
        restored as f64 / restore.max(1e-9),
        run.peak_kb as f64 / 1024.0,
        (run.peak_kb.saturating_sub(baseline.peak_kb) * 1024) as f64 / restored.max(1) as f64,
        baseline.peak_kb as f64 / 1024.0,
    );
    println!("{line}");
    let _ = std::io::stdout().flush();
    eprintln!(
        "  {stage}: VmRSS at ready {:.1} MB, baseline VmRSS {:.1} MB",
        run.rss_kb as f64 / 1024.0,
        baseline.rss_kb as f64 / 1024.0
    );
}

fn main() {
    // `cargo bench` passes `--bench`; this bench takes no arguments.
    let urls = env_u64("RECRAWL_RESTORE_URLS", 200_000);
    let diff_urls = env_u64("RECRAWL_RESTORE_DIFF_URLS", 20_000);
    let stages =
        std::env::var("RECRAWL_RESTORE_STAGES").unwrap_or_else(|_| "scheduler,estimator,diff".into());
    let perf = std::env::var_os("RECRAWL_RESTORE_PERF").map(std::path::PathBuf::from);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let broker = Broker::start();
    println!(
        "stage | broker | URLs | partitions | changelog bytes/URL | ready | restored count at N | restore (stage's histogram) | baseline ready | records/s (histogram) | records/s (ready − baseline) | peak RSS | peak over baseline, bytes/URL | baseline peak RSS"
    );
    runtime.block_on(async {
        for stage in stages.split(',').map(str::trim) {
            match stage {
                "scheduler" => {
                    let mut generator = SchedulerRecords::new();
                    bench_stage::<SchedulerState>(&broker, stage, urls, &mut generator, perf.as_deref())
                        .await;
                }
                "estimator" => {
                    let mut generator = EstimatorRecords::new();
                    bench_stage::<EstimatorState>(&broker, stage, urls, &mut generator, perf.as_deref())
                        .await;
                }
                "diff" => {
                    let mut generator = DiffRecords::new();
                    bench_stage::<DiffState>(&broker, stage, diff_urls, &mut generator, perf.as_deref())
                        .await;
                }
                other => panic!("unknown stage {other}: scheduler, estimator or diff"),
            }
        }
    });
    drop(broker);
}
