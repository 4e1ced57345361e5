//! The archive stage through the broker: fetch results of a site on 127.0.0.1 (fetched by
//! the fetcher, so their exchanges are real) become WARC files that the web archiving
//! community's own tools read back: `warcio check` verifies every digest, `cdxj-indexer`
//! indexes each file as the stage did, and pywb replays the archived pages, revisits
//! included. Also: an S3-compatible store (moto's server), and `kill -9` mid-file.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::header::{CONTENT_ENCODING, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LOCATION};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use rdkafka::producer::{FutureProducer, FutureRecord};
use recrawl_common::KafkaArgs;
use recrawl_e2e::python::{python, python_imports};
use recrawl_e2e::{
    committed_offsets, kafka_flags, parse_args, refresh_pick, unique_prefix, Broker, RunningStage,
};
use recrawl_fetch::address::{parse_allowed_network, AddressPolicy, GuardedResolver};
use recrawl_fetch::http::{any_redirect, FetchConfig, Fetcher};
use recrawl_schemas::topics::FETCH_RESULTS;
use recrawl_schemas::{encode, host_of, FetchOutcome, FetchResult, TopicNames};
use serde_json::Value;

const PARTITIONS: i32 = 2;

/// The site: pages that stay, change, answer 304, fail, come gzip-encoded or chunked,
/// and a redirect.
fn site() -> Router {
    let changing = Arc::new(AtomicUsize::new(0));
    Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        let changing = changing.clone();
        async move { respond(&uri, &headers, &changing) }
    })
}

fn respond(uri: &Uri, headers: &HeaderMap, changing: &AtomicUsize) -> Response {
    let html = |body: String| ([(CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response();
    match uri.path() {
        "/robots.txt" => (StatusCode::NOT_FOUND, "").into_response(),
        "/same.html" => html(format!("<html><body><p>{}</p></body></html>", "unchanging words ".repeat(40))),
        // Changes at its third request.
        "/changing.html" => {
            let seen = changing.fetch_add(1, Ordering::SeqCst);
            html(format!("<p>version {}</p>", if seen < 2 { 1 } else { 2 }))
        }
        "/etag.html" if headers.get(IF_NONE_MATCH).is_some_and(|v| v == "\"e1\"") => {
            (StatusCode::NOT_MODIFIED, [(ETAG, "\"e1\"")]).into_response()
        }
        "/etag.html" => ([(CONTENT_TYPE, "text/html"), (ETAG, "\"e1\"")], "<p>validated</p>").into_response(),
        "/gone.html" => (StatusCode::NOT_FOUND, "gone").into_response(),
        "/gzip.html" => {
            use std::io::Write as _;
            let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gzip.write_all(b"<p>compressed on the wire</p>").expect("gzip");
            ([(CONTENT_TYPE, "text/html"), (CONTENT_ENCODING, "gzip")], gzip.finish().expect("gzip"))
                .into_response()
        }
        "/chunked.html" => {
            let chunks =
                ["<p>first chunk</p>", "<p>second chunk</p>"].map(|c| Ok::<_, std::io::Error>(c.to_owned()));
            let body = axum::body::Body::from_stream(futures::stream::iter(chunks));
            ([(CONTENT_TYPE, "text/html")], body).into_response()
        }
        "/moved" => (StatusCode::FOUND, [(LOCATION, "/same.html")]).into_response(),
        _ => (StatusCode::NOT_FOUND, "").into_response(),
    }
}

const PATHS: [&str; 7] =
    ["/same.html", "/changing.html", "/etag.html", "/gone.html", "/gzip.html", "/chunked.html", "/moved"];

/// Every path of the site fetched in `periods` periods, conditionally where an answer
/// gave an ETag, as the fetch stage would.
async fn fetch_site(periods: u64) -> Vec<FetchResult> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, site()).await });
    let loopback = parse_allowed_network("127.0.0.1").expect("network");
    let config = FetchConfig {
        resolver: GuardedResolver::new(AddressPolicy::new(vec![loopback]), Vec::new()),
        ..FetchConfig::default()
    };
    let fetcher = Fetcher::new(config).expect("fetcher");
    let mut last: HashMap<String, FetchResult> = HashMap::new();
    let mut results = Vec::new();
    for period in 1..=periods {
        for path in PATHS {
            let url = format!("http://{address}{path}");
            let result = fetcher.fetch(&refresh_pick(&url, period, last.get(&url)), &any_redirect).await;
            if result.etag.is_some() {
                last.insert(url, result.clone());
            }
            results.push(result);
        }
        // Distinct seconds: WARC dates, and the captures replay tools tell apart, are to the second.
        tokio::time::sleep(Duration::from_millis(1001)).await;
    }
    results
}

/// Produces `results` to fetch-results as the fetch stage does; the offset after each
/// partition's last record.
async fn produce_all(
    producer: &FutureProducer,
    names: &TopicNames,
    results: &[FetchResult],
) -> BTreeMap<i32, i64> {
    let mut ends = BTreeMap::new();
    let topic = names.name(FETCH_RESULTS.name);
    for result in results {
        let payload = encode(result).expect("encode");
        let headers = recrawl_e2e::message_headers::<FetchResult>();
        let key = FETCH_RESULTS.key(result);
        let record = FutureRecord::to(&topic).key(key.as_ref()).payload(&payload).headers(headers);
        let delivered = producer.send(record, Duration::from_secs(10)).await.expect("produced");
        ends.insert(delivered.partition, delivered.offset + 1);
    }
    ends
}

/// Waits until the archive's group has committed every produced offset: every record is
/// in a published file.
async fn all_committed(kafka: &KafkaArgs, ends: &BTreeMap<i32, i64>) {
    let group = kafka.group_for("archive");
    let topic = kafka.cluster.topics().name(FETCH_RESULTS.name);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let committed = committed_offsets(kafka, &group, &topic, 0..PARTITIONS).await;
        if ends.iter().all(|(partition, end)| committed.get(partition) == Some(end)) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "committed {committed:?} of {ends:?}");
        // Commits are only observable by asking again.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every record of the WARC files in `dir`, as warcio reads them: one JSON object each.
const READ_RECORDS: &str = r#"
import json, sys, glob, os
from warcio.archiveiterator import ArchiveIterator
for path in sorted(glob.glob(os.path.join(sys.argv[1], '*.warc.gz'))):
    with open(path, 'rb') as f:
        for record in ArchiveIterator(f):
            h = record.rec_headers
            http = record.http_headers
            print(json.dumps({
                'file': os.path.basename(path), 'type': record.rec_type,
                'uri': h.get_header('WARC-Target-URI'), 'date': h.get_header('WARC-Date'),
                'profile': h.get_header('WARC-Profile'), 'id': h.get_header('WARC-Record-ID'),
                'refers_to': h.get_header('WARC-Refers-To'),
                'refers_to_uri': h.get_header('WARC-Refers-To-Target-URI'),
                'refers_to_date': h.get_header('WARC-Refers-To-Date'),
                'digest': h.get_header('WARC-Payload-Digest'),
                'status': http.get_statuscode() if http and record.rec_type != 'request' else None,
                'payload': record.content_stream().read().decode('utf-8', 'replace'),
            }))
"#;

fn records(dir: &Path) -> Vec<Value> {
    python(&["-c", READ_RECORDS, &dir.display().to_string()], dir)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

fn warc_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.to_string_lossy().ends_with(".warc.gz"))
        .collect();
    files.sort();
    files
}

/// `warcio check` on every file, and `cdxj-indexer`'s index of each equal to the stage's.
fn check_with_the_community_tools(dir: &Path) {
    let files = warc_files(dir);
    assert!(!files.is_empty(), "no WARC file published in {}", dir.display());
    for file in &files {
        let name = file.display().to_string();
        let checked = python(&["-m", "warcio.cli", "check", "-v", &name], dir);
        assert!(!checked.contains("digest fail"), "{checked}");
        let ours = std::fs::read_to_string(file.with_file_name(recrawl_archive::files::index_name(
            &file.file_name().expect("name").to_string_lossy(),
        )))
        .expect("the index beside the file");
        let theirs = python(&["-m", "cdxj_indexer.main", "--sort", &name], dir);
        assert_eq!(ours, theirs, "{name}: our index, then cdxj-indexer's");
    }
}

fn stage_flags(flags: &[String], out: &str, extra: &[&str]) -> Vec<String> {
    let mut flags = flags.to_vec();
    flags.extend(["--out".to_owned(), out.to_owned()]);
    flags.extend(extra.iter().map(|s| (*s).to_owned()));
    flags
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_archive_writes_warc_files_the_community_s_tools_read_and_replay() {
    let tools = python_imports(&["warcio", "cdxj_indexer"], "the archive's WARC files and indexes");
    let results = fetch_site(3).await;
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("archive"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, PARTITIONS).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let dir = tempfile::tempdir().expect("dir");
    let out = format!("file://{}", dir.path().display());
    let archive_flags = stage_flags(&flags, &out, &["--max-file-bytes", "4096", "--max-file-age-ms", "1000"]);
    let stage = RunningStage::spawn("archive", |ctx| recrawl_archive::run(parse_args(&archive_flags), ctx));
    stage.ready().await;
    let ends = produce_all(&producer, &kafka.cluster.topics(), &results).await;
    all_committed(&kafka, &ends).await;
    stage.stop().await.expect("a clean stop");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().ends_with(".open"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    if !tools {
        return;
    }
    check_with_the_community_tools(dir.path());
    let records = records(dir.path());
    let archived: Vec<&FetchResult> = results
        .iter()
        .filter(|r| matches!(r.outcome, FetchOutcome::Downloaded | FetchOutcome::NotModified))
        .collect();
    let captures: Vec<&Value> =
        records.iter().filter(|r| matches!(r["type"].as_str(), Some("response" | "revisit"))).collect();
    assert_eq!(captures.len(), archived.len(), "one response or revisit per download: {captures:#?}");
    for file in warc_files(dir.path()) {
        let name = file.file_name().expect("name").to_string_lossy().into_owned();
        let first = records.iter().find(|r| r["file"] == name.as_str()).expect("records");
        assert_eq!(first["type"], "warcinfo", "{name} starts with its warcinfo");
    }
    // What each URL became over the three periods.
    let kinds = |path: &str| -> Vec<String> {
        captures
            .iter()
            .filter(|r| r["uri"].as_str().is_some_and(|uri| uri.ends_with(path)))
            .map(|r| {
                format!(
                    "{}{}",
                    r["type"].as_str().unwrap_or(""),
                    r["profile"].as_str().map_or("", |p| if p.ends_with("server-not-modified") {
                        ":304"
                    } else {
                        ":same"
                    })
                )
            })
            .collect()
    };
    assert_eq!(kinds("/changing.html"), ["response", "revisit:same", "response"]);
    assert_eq!(kinds("/etag.html"), ["response", "revisit:304", "revisit:304"]);
    assert_eq!(kinds("/gzip.html"), ["response", "revisit:same", "revisit:same"]);
    // The redirect's captures are of where it led; /same.html's own came first.
    assert_eq!(kinds("/same.html").len(), 6);
    assert!(kinds("/gone.html").is_empty(), "a 404 is not archived");
    let requests: Vec<&Value> = records.iter().filter(|r| r["type"] == "request").collect();
    let responses = captures.iter().filter(|r| r["type"] == "response").count();
    assert_eq!(requests.len(), responses, "each response has its request, revisits none by default");
    // Every revisit refers to a response in the files, by id, target and date.
    for revisit in captures.iter().filter(|r| r["type"] == "revisit" && !r["refers_to"].is_null()) {
        let original =
            captures.iter().find(|r| r["id"] == revisit["refers_to"]).expect("the capture referred to");
        assert_eq!(
            (&original["type"], &original["uri"], &original["date"]),
            (&Value::from("response"), &revisit["refers_to_uri"], &revisit["refers_to_date"])
        );
        assert_eq!(original["digest"], revisit["digest"]);
    }
    let gzip = captures
        .iter()
        .find(|r| r["uri"].as_str().is_some_and(|u| u.ends_with("/gzip.html")))
        .expect("gzip page");
    assert_eq!(gzip["payload"], "<p>compressed on the wire</p>");
    let chunked = captures
        .iter()
        .find(|r| r["uri"].as_str().is_some_and(|u| u.ends_with("/chunked.html")))
        .expect("chunked page");
    assert_eq!(chunked["payload"], "<p>first chunk</p><p>second chunk</p>");
    replay_with_pywb(dir.path(), &captures).await;
}

/// pywb, given the files and their indexes as a collection, serves each page as archived,
/// also at the time of a revisit (the payload of the capture it refers to).
async fn replay_with_pywb(dir: &Path, captures: &[&Value]) {
    if !python_imports(&["pywb"], "replaying the archive with pywb") {
        return;
    }
    let config = tempfile::tempdir().expect("pywb's directory");
    let collection =
        format!("collections:\n  archive:\n    index_paths: {0}/\n    archive_paths: {0}/\n", dir.display());
    std::fs::write(config.path().join("config.yaml"), collection).expect("pywb's config");
    let (_pywb, port) = python_server(
        &["-c", "from pywb.apps.cli import wayback; wayback()", "--bind", "127.0.0.1", "--port"],
        config.path(),
        "pywb",
    )
    .await;
    let client = reqwest::Client::new();
    let replay = |timestamp: String, uri: &str| {
        let url = format!("http://127.0.0.1:{port}/archive/{timestamp}id_/{uri}");
        let client = client.clone();
        async move {
            let answer = client.get(&url).send().await.ok()?;
            Some((answer.status().as_u16(), answer.text().await.ok()?))
        }
    };
    let timestamp = |capture: &Value| {
        capture["date"].as_str().unwrap_or("").chars().filter(char::is_ascii_digit).collect::<String>()
    };
    let mut replayed = 0;
    for capture in captures {
        let uri = capture["uri"].as_str().expect("uri");
        let expected = match (capture["type"].as_str(), capture["profile"].as_str()) {
            (Some("response"), _) => capture["payload"].clone(),
            (Some("revisit"), Some(profile)) if profile.ends_with("identical-payload-digest") => {
                captures.iter().find(|c| c["id"] == capture["refers_to"]).expect("referred to")["payload"]
                    .clone()
            }
            _ => continue,
        };
        let answer = replay(timestamp(capture), uri).await;
        assert_eq!(
            answer,
            Some((200, expected.as_str().unwrap_or("").to_owned())),
            "pywb's replay of {uri} at {}",
            capture["date"]
        );
        replayed += 1;
    }
    assert!(replayed >= 10, "{replayed} captures replayed");
}

/// A child process killed when the test lets go of it, passing or failing: no server or
/// stage outlives its test.
#[derive(Debug)]
struct Owned(Child);

impl std::ops::Deref for Owned {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Owned {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The stage as its binary, with `env` added to its environment, its log appended to `log`;
/// also the address of its `/metrics`.
fn spawn_archive(args: &[String], env: &[(&str, String)], log: &Path) -> (Owned, std::net::SocketAddr) {
    let http = recrawl_common::http::free_local_port().expect("port");
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log).expect("log");
    let child = Command::new(recrawl_e2e::binary("recrawl-archive"))
        .args(args)
        .args(["--http-listen", &http.to_string()])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("recrawl-archive starts");
    (Owned(child), http)
}

/// The sum of the stage binary's series named `name` (0 while it does not answer).
async fn metric(client: &reqwest::Client, http: std::net::SocketAddr, name: &str) -> usize {
    let Ok(answer) = client.get(format!("http://{http}/metrics")).send().await else { return 0 };
    recrawl_e2e::series_sum(&answer.text().await.unwrap_or_default(), name) as usize
}

/// Waits until the stage's `/readyz` answers 200: it owns its partitions (the embedded
/// broker keeps only the last few MiB of a partition: records sent before would be gone).
async fn ready(client: &reqwest::Client, http: std::net::SocketAddr, stage: &mut Owned) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    // Readiness is only observable by asking again.
    loop {
        assert!(stage.try_wait().expect("status").is_none(), "the archive stage exited before it was ready");
        let answer = client.get(format!("http://{http}/readyz")).send().await;
        if answer.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "the archive stage not ready within 90 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `count` bytes no compressor shrinks, different for each `seed` (splitmix64).
fn incompressible(seed: u64, count: usize) -> Vec<u8> {
    let mut state = seed;
    let mut bytes = Vec::with_capacity(count + 8);
    while bytes.len() < count {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        bytes.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    bytes.truncate(count);
    bytes
}

/// A downloaded result of `url` at `fetched_at_ms`, its body `body`.
fn download(url: &str, fetched_at_ms: i64, body: Vec<u8>) -> FetchResult {
    FetchResult { fetched_at_ms, ..FetchResult::html_page(url, &host_of(url).expect("host"), 1, body) }
}

/// An S3-compatible store on 127.0.0.1: CI's (`RECRAWL_TEST_TANSU_S3`), else a moto
/// server of this test's; `None` (the test skipped) where there is neither.
async fn s3_store(dir: &Path) -> Option<(String, Option<Owned>)> {
    if let Ok(endpoint) = std::env::var(recrawl_e2e::TANSU_S3_ENV) {
        if !endpoint.is_empty() {
            return Some((endpoint.trim_end_matches('/').to_owned(), None));
        }
    }
    if !python_imports(&["moto.server", "boto3"], "the archive's S3 destination") {
        return None;
    }
    let (moto, port) =
        python_server(&["-c", "from moto.server import main; main()", "-H", "127.0.0.1", "-p"], dir, "moto")
            .await;
    Some((format!("http://127.0.0.1:{port}"), Some(moto)))
}

/// A Python HTTP server of the test's, once it answers, and its port: `args` end with the
/// flag that takes the port, and its log is `NAME.log` in `dir`. The port is found free and
/// let go, so another socket may take it before the server binds; a server that stops
/// saying so is started again on another.
async fn python_server(args: &[&str], dir: &Path, name: &str) -> (Owned, String) {
    // Bounded, so a socket that took the port and never answers cannot hold the test.
    let client = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().expect("client");
    let log_path = dir.join(format!("{name}.log"));
    for _ in 0..=recrawl_common::http::PORT_RETRIES {
        let port = recrawl_common::http::free_local_port().expect("port").port().to_string();
        let log = std::fs::File::create(&log_path).expect("log");
        let mut server = Owned(
            Command::new("python3")
                .args(args)
                .arg(&port)
                .current_dir(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|error| panic!("{name} starts: {error}")),
        );
        // A server starting is only observable by asking it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if server.try_wait().expect("status").is_some() {
                let output = std::fs::read_to_string(&log_path).unwrap_or_default();
                assert!(output.contains("Address already in use"), "{name} exited: {output}");
                break;
            }
            if client.get(format!("http://127.0.0.1:{port}/")).send().await.is_ok() {
                return (server, port);
            }
            assert!(tokio::time::Instant::now() < deadline, "{name} did not answer within 60 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    panic!("{name} lost its port {} times", recrawl_common::http::PORT_RETRIES + 1)
}

/// Lists the objects of a bucket under a prefix, `KEY SIZE` a line, and downloads them.
const DOWNLOAD_BUCKET: &str = r#"
import sys, os, boto3
endpoint, bucket, prefix, out = sys.argv[1:5]
s3 = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id='testing',
                  aws_secret_access_key='testing', region_name='us-east-1')
for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get('Contents', []):
    s3.download_file(bucket, item['Key'], os.path.join(out, item['Key'][len(prefix):]))
    print(item['Key'], item['Size'])
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_archive_uploads_its_files_to_an_s3_store_in_parts() {
    let scratch = tempfile::tempdir().expect("dir");
    // Held to the end: dropped, moto's server (if the test started one) stops.
    let Some((endpoint, _moto)) = s3_store(scratch.path()).await else { return };
    let client = reqwest::Client::new();
    let bucket = format!("archive-{}", std::process::id());
    // A server starting is only observable by asking it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let created = loop {
        match client.put(format!("{endpoint}/{bucket}")).send().await {
            Ok(answer) => break answer,
            Err(error) => {
                assert!(tokio::time::Instant::now() < deadline, "no S3 store at {endpoint}: {error}")
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(created.status().is_success(), "creating {bucket}: {}", created.status());

    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("archive-s3"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, PARTITIONS).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let staging = scratch.path().join("staging");
    let out = format!("s3://{bucket}/warc/");
    let staging_flag = staging.display().to_string();
    let args = stage_flags(
        &flags,
        &out,
        &[
            "--s3-endpoint",
            &endpoint,
            "--staging-dir",
            &staging_flag,
            "--max-file-bytes",
            "9437184",
            // Long enough that on a loaded machine the first file of each partition rolls
            // at its size (past one 8 MiB part), not its age; the last ones roll by age.
            "--max-file-age-ms",
            "30000",
        ],
    );
    let env = [
        ("AWS_ACCESS_KEY_ID", "testing".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "testing".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
    ];
    let (mut stage, http) = spawn_archive(&args, &env, &scratch.path().join("archive.log"));
    ready(&client, http, &mut stage).await;
    // 24 pages of 1 MiB that gzip cannot shrink: each partition's file passes the 8 MiB
    // of one part, so it goes up in several.
    let results: Vec<FetchResult> = (0..24)
        .map(|i| {
            download(
                &format!("http://s3.example/{i}.html"),
                1_780_000_000_000 + i,
                incompressible(i as u64 + 1, 1 << 20),
            )
        })
        .collect();
    // One at a time, each read before the next: the embedded broker keeps only the last
    // 5 MB of a partition.
    let mut ends = BTreeMap::new();
    for (sent, result) in results.iter().enumerate() {
        ends.extend(produce_all(&producer, &kafka.cluster.topics(), std::slice::from_ref(result)).await);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        // How far the stage has read is only observable by asking again.
        while metric(&client, http, "recrawl_records_in_total").await < sent + 1 {
            assert!(tokio::time::Instant::now() < deadline, "the stage read {sent} of {} results", sent + 1);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    all_committed(&kafka, &ends).await;
    assert!(recrawl_e2e::terminate(&mut stage, Duration::from_secs(30)), "stopped on SIGTERM");
    assert_eq!(
        stage.wait().expect("status").code(),
        Some(0),
        "{}",
        std::fs::read_to_string(scratch.path().join("archive.log")).unwrap_or_default()
    );

    // Signed requests: the store answers no other.
    let downloaded = scratch.path().join("downloaded");
    std::fs::create_dir_all(&downloaded).expect("dir");
    let listed = python(
        &["-c", DOWNLOAD_BUCKET, &endpoint, &bucket, "warc/", &downloaded.display().to_string()],
        scratch.path(),
    );
    let sizes: BTreeMap<String, usize> = listed
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(key, size)| (key.to_owned(), size.parse().expect("a size")))
        .collect();
    let keys: Vec<&String> = sizes.keys().collect();
    let largest = sizes.values().copied().max().unwrap_or(0);
    let warcs = keys.iter().filter(|key| key.ends_with(".warc.gz")).count();
    assert!(warcs >= 2, "{keys:?}");
    assert_eq!(keys.len(), 2 * warcs, "each file with its index: {keys:?}");
    assert!(
        largest > 8 << 20,
        "a file large enough for a multipart upload: {sizes:?}\n{}",
        std::fs::read_to_string(scratch.path().join("archive.log")).unwrap_or_default()
    );
    assert!(std::fs::read_dir(&staging).expect("staging").next().is_none(), "nothing left staged");
    if python_imports(&["warcio", "cdxj_indexer"], "the archive's files on S3") {
        check_with_the_community_tools(&downloaded);
        let responses = records(&downloaded).iter().filter(|r| r["type"] == "response").count();
        assert_eq!(responses, results.len());
    }
}

/// `rounds` rounds of fetch results of `urls` URLs, as a recrawl makes them: mostly
/// downloads of one of two versions (so revisits and responses), some 304s, some
/// failures; each round a second after the last, so every capture has its own date.
fn recrawl_results(urls: usize, rounds: usize, first_round: usize) -> Vec<FetchResult> {
    let mut results = Vec::new();
    for round in first_round..first_round + rounds {
        for page in 0..urls {
            let url = format!("http://crash{}.example/{page}.html", page % 3);
            let at = 1_780_000_000_000 + (round as i64) * 1000;
            let version = (round / 4 + page) % 2;
            let body =
                format!("<p>page {page} version {version}</p>{}", "filler text ".repeat(100 + page * 7));
            let mut result = download(&url, at, body.into_bytes());
            match (round + page) % 7 {
                0 => {
                    result.outcome = FetchOutcome::NotModified;
                    result.http_status = Some(304);
                    result.body.clear();
                    result.size_bytes = 0;
                }
                3 => {
                    result.outcome = FetchOutcome::Timeout;
                    result.http_status = None;
                    result.body.clear();
                    result.size_bytes = 0;
                }
                _ => {}
            }
            results.push(result);
        }
    }
    results
}

/// Fails unless every downloaded or not-modified result of `results` is in exactly one
/// response or revisit record of the WARC files in `dir`, and nothing else is.
fn exactly_once(dir: &Path, results: &[FetchResult]) {
    let mut expected: BTreeMap<(String, String), usize> = BTreeMap::new();
    for result in
        results.iter().filter(|r| matches!(r.outcome, FetchOutcome::Downloaded | FetchOutcome::NotModified))
    {
        *expected
            .entry((result.url.clone(), recrawl_archive::warc::warc_date(result.fetched_at_ms)))
            .or_default() += 1;
    }
    let mut found: BTreeMap<(String, String), usize> = BTreeMap::new();
    for record in records(dir).iter().filter(|r| matches!(r["type"].as_str(), Some("response" | "revisit"))) {
        let key = (
            record["uri"].as_str().unwrap_or("").to_owned(),
            record["date"].as_str().unwrap_or("").to_owned(),
        );
        *found.entry(key).or_default() += 1;
    }
    let wrong: Vec<_> = expected
        .iter()
        .map(|(key, &count)| (key, count, found.get(key).copied().unwrap_or(0)))
        .filter(|(_, expected, found)| expected != found)
        .collect();
    assert!(wrong.is_empty(), "(capture, results, records) that differ: {wrong:?}");
    assert_eq!(found.len(), expected.len(), "records of no result");
}

/// What a crash between publishing a file and committing its offsets leaves, and what one
/// between sealing a file and publishing it leaves: either way, restarted, the stage has
/// every result in exactly one file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_either_crash_window_writes_nothing_twice_and_loses_nothing() {
    if !python_imports(&["warcio"], "reading the archive back after a crash") {
        return;
    }
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("archive-windows"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, PARTITIONS).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let dir = tempfile::tempdir().expect("dir");
    let out = format!("file://{}", dir.path().display());
    let args = stage_flags(&flags, &out, &["--max-file-bytes", "8192"]);
    // A restart in a new group reads from the start, as one whose commits were lost would.
    let run = |results: &[FetchResult], group: &str, on_the_topic: usize| {
        let results = results.to_vec();
        let mut args = args.clone();
        args.extend(["--group-id".to_owned(), format!("{}archive-{group}", kafka.cluster.topic_prefix)]);
        let kafka = parse_args::<recrawl_archive::ArchiveArgs>(&args).kafka;
        let producer = producer.clone();
        async move {
            let stage = RunningStage::spawn("archive", |ctx| recrawl_archive::run(parse_args(&args), ctx));
            stage.ready().await;
            let ends = produce_all(&producer, &kafka.cluster.topics(), &results).await;
            let series = format!(
                "recrawl_records_in_total{{topic=\"{}\",stage=\"archive\"}}",
                kafka.cluster.topics().name(FETCH_RESULTS.name)
            );
            let read = || recrawl_e2e::metric(&stage, &series).unwrap_or(0.0) as usize;
            recrawl_e2e::wait_for("the stage reads every result", || read() >= on_the_topic).await;
            // The last files are sealed and published on the way out, their offsets committed.
            stage.stop().await.expect("a clean stop");
            all_committed(&kafka, &ends).await;
            ends
        }
    };
    let first = recrawl_results(12, 6, 0);
    run(&first, "first", first.len()).await;
    exactly_once(dir.path(), &first);

    // Published, not committed: read again from the start.
    let second = recrawl_results(12, 3, 6);
    run(&second, "second", first.len() + second.len()).await;
    let mut all = first.clone();
    all.extend(second.iter().cloned());
    exactly_once(dir.path(), &all);

    // Sealed (its name in the changelog), never published: the newest file of each
    // partition gone, its index left behind, the offsets back at the start.
    let mut newest: BTreeMap<String, PathBuf> = BTreeMap::new();
    for file in warc_files(dir.path()) {
        let name = file.file_name().expect("name").to_string_lossy().into_owned();
        let partition = name.rsplit_once("-p").map(|(_, p)| p.to_owned()).expect("a partition");
        newest.insert(partition, file);
    }
    for file in newest.values() {
        std::fs::remove_file(file).expect("removed");
    }
    let third = recrawl_results(12, 2, 9);
    run(&third, "third", all.len() + third.len()).await;
    all.extend(third.iter().cloned());
    exactly_once(dir.path(), &all);
    for file in newest.values() {
        let index = file.with_file_name(recrawl_archive::files::index_name(
            &file.file_name().expect("name").to_string_lossy(),
        ));
        assert!(!index.exists(), "the index of a file never published is removed: {}", index.display());
    }
    for file in warc_files(dir.path()) {
        let checked = python(&["-m", "warcio.cli", "check", &file.display().to_string()], dir.path());
        assert!(!checked.contains("fail"), "{checked}");
    }
}

/// The files being written with records in them (more than a WARC header's worth).
fn open_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.to_string_lossy().ends_with(".warc.gz.open"))
        .filter(|path| std::fs::metadata(path).is_ok_and(|m| m.len() > 1024))
        .collect()
}

/// `kill -9` of the stage's process while it writes a file: restarted, it discards the
/// unpublished file, writes its records again, and every downloaded or not-modified result
/// on the topic is in exactly one published WARC record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_file_loses_nothing_and_doubles_nothing() {
    if !python_imports(&["warcio"], "reading the archive back after kill -9") {
        return;
    }
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("archive-kill"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, PARTITIONS).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let dir = tempfile::tempdir().expect("dir");
    let scratch = tempfile::tempdir().expect("scratch");
    let log = scratch.path().join("archive.log");
    let out = format!("file://{}", dir.path().display());
    let args = stage_flags(&flags, &out, &["--max-file-bytes", "16384", "--max-file-age-ms", "1500"]);
    let client = reqwest::Client::new();
    let (mut stage, http) = spawn_archive(&args, &[], &log);
    ready(&client, http, &mut stage).await;

    let before = recrawl_results(16, 8, 0);
    let mut ends = produce_all(&producer, &kafka.cluster.topics(), &before).await;
    // Mid-file: files published, another being written with records in it. The stage
    // publishes files by age too, so the files are judged while it is frozen (SIGSTOP):
    // what is open then is what the kill interrupts.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(stage.id()).expect("pid"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let open = loop {
        let read = metric(&client, http, "recrawl_records_in_total").await;
        if read >= before.len() / 2 {
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP");
            let open = open_files(dir.path());
            if !warc_files(dir.path()).is_empty() && !open.is_empty() {
                break open;
            }
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).expect("SIGCONT");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no file published and another open: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        // The files are only observable by looking again.
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    stage.kill().expect("kill -9");
    stage.wait().expect("reaped");

    let after = recrawl_results(16, 4, 8);
    ends.extend(produce_all(&producer, &kafka.cluster.topics(), &after).await);
    let (mut restarted, http) = spawn_archive(&args, &[], &log);
    ready(&client, http, &mut restarted).await;
    // Every file published, by size or age, its offsets committed.
    all_committed(&kafka, &ends).await;
    assert!(recrawl_e2e::terminate(&mut restarted, Duration::from_secs(30)), "stopped on SIGTERM");
    assert_eq!(
        restarted.wait().expect("status").code(),
        Some(0),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    for file in &open {
        let name = file.file_name().expect("name").to_string_lossy().trim_end_matches(".open").to_owned();
        assert!(!file.exists(), "{name}, open at the kill, was left in the staging directory");
        assert!(!dir.path().join(&name).exists(), "{name}, open at the kill, was published");
    }
    let mut all = before;
    all.extend(after);
    exactly_once(dir.path(), &all);
    for file in warc_files(dir.path()) {
        let checked = python(&["-m", "warcio.cli", "check", &file.display().to_string()], dir.path());
        assert!(!checked.contains("fail"), "{checked}");
    }
}

/// The SURT keys of the index lines are the `surt` package's (pywb and cdxj-indexer key
/// captures by it), on URLs chosen to reach each of its rules.
#[test]
fn surt_keys_are_the_surt_package_s() {
    if !python_imports(&["surt"], "the archive's SURT keys") {
        return;
    }
    let hosts = [
        "example.com",
        "WWW.Example.COM",
        "www12.example.co.uk",
        "127.0.0.1",
        "010.0.0.1",
        "3232235777",
        "[::1]",
        "sub.domain.example.org.",
    ];
    let ports = ["", ":80", ":443", ":8080"];
    let paths = [
        "",
        "/",
        "/A/b/../C/./d.html",
        "/a//b/",
        "/%7euser/%c3%a9t%C3%A9",
        "/a%2520b",
        "/x/(abcdefghijklmnopqrstuvwx)/p.aspx",
        "/a b",
        "/%",
    ];
    let queries = [
        "",
        "?",
        "?b=2&a=1&A=0",
        "?a&a=&b",
        "?jsessionid=0123456789ABCDEF0123456789abcdef&x=1",
        "?x=%41%2541",
        "?q=caf%C3%A9#frag",
    ];
    let mut urls = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        for (j, port) in ports.iter().enumerate() {
            let scheme = if (i + j) % 2 == 0 { "http" } else { "https" };
            for (k, path) in paths.iter().enumerate() {
                let query = queries[(i + j + k) % queries.len()];
                urls.push(format!("{scheme}://{host}{port}{path}{query}"));
            }
        }
    }
    let script = "import sys, surt\nfor url in sys.argv[1:]:\n    print(surt.surt(url))";
    let mut args = vec!["-c", script];
    args.extend(urls.iter().map(String::as_str));
    let theirs = python(&args, Path::new("."));
    let differ: Vec<(&String, String, &str)> = urls
        .iter()
        .zip(theirs.lines())
        .map(|(url, key)| (url, recrawl_archive::surt::surt(url), key))
        .filter(|(_, ours, theirs)| ours != theirs)
        .collect();
    assert_eq!(theirs.lines().count(), urls.len());
    assert!(differ.is_empty(), "(url, ours, surt's): {differ:#?}");
}

/// Waits until the stage says its store fails, then checks it holds: not ready, the
/// failures counted. Returns the group's committed offsets of `fetch-results` then.
async fn held_back(
    client: &reqwest::Client,
    http: std::net::SocketAddr,
    log: &Path,
    kafka: &KafkaArgs,
) -> HashMap<i32, i64> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while metric(client, http, "recrawl_archive_store_failing").await != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the store's failure unnoticed: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        // A gauge is only observable by asking again.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ready_now = client.get(format!("http://{http}/readyz")).send().await.expect("readyz").status();
    assert_eq!(ready_now.as_u16(), 503, "not ready while the store fails");
    assert!(metric(client, http, "recrawl_archive_store_errors_total").await > 0);
    let group = kafka.group_for("archive");
    let topic = kafka.cluster.topics().name(FETCH_RESULTS.name);
    committed_offsets(kafka, &group, &topic, 0..PARTITIONS).await
}

/// An S3 store that is not there stops the stage where it is: not ready, failing, nothing
/// committed; once the store is up it goes on by itself, and every result is in one file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_store_holds_the_stage_until_it_is_back() {
    if !python_imports(&["moto.server", "boto3", "warcio"], "the archive riding out a store outage") {
        return;
    }
    let scratch = tempfile::tempdir().expect("dir");
    let port = recrawl_common::http::free_local_port().expect("port").port().to_string();
    let endpoint = format!("http://127.0.0.1:{port}");
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("archive-outage"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, PARTITIONS).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let staging = scratch.path().join("staging").display().to_string();
    let args = stage_flags(
        &flags,
        "s3://outage/warc",
        &[
            "--s3-endpoint",
            &endpoint,
            "--staging-dir",
            &staging,
            "--max-file-age-ms",
            "1000",
            "--outage-timeout-ms",
            "240000",
        ],
    );
    let env = [
        ("AWS_ACCESS_KEY_ID", "testing".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "testing".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
    ];
    let log = scratch.path().join("archive.log");
    let (mut stage, http) = spawn_archive(&args, &env, &log);
    let client = reqwest::Client::new();
    ready(&client, http, &mut stage).await;
    let results = recrawl_results(6, 4, 0);
    let ends = produce_all(&producer, &kafka.cluster.topics(), &results).await;

    // No store: the first file cannot be published, nor any after it.
    let committed = held_back(&client, http, &log, &kafka).await;
    assert!(
        ends.iter().all(|(partition, end)| committed.get(partition).is_none_or(|next| next < end)),
        "nothing held in an unpublished file is committed: {committed:?} of {ends:?}"
    );

    // The store comes up, its bucket made: the stage goes on by itself.
    let moto_log = std::fs::File::create(scratch.path().join("moto.log")).expect("log");
    let _moto = Owned(
        Command::new("python3")
            .args(["-c", "from moto.server import main; main()", "-H", "127.0.0.1", "-p", &port])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(moto_log)
            .spawn()
            .expect("moto starts"),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    // A server starting is only observable by asking it.
    while !client.put(format!("{endpoint}/outage")).send().await.is_ok_and(|a| a.status().is_success()) {
        assert!(tokio::time::Instant::now() < deadline, "moto did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    all_committed(&kafka, &ends).await;
    assert_eq!(metric(&client, http, "recrawl_archive_store_failing").await, 0);
    ready(&client, http, &mut stage).await;
    assert!(recrawl_e2e::terminate(&mut stage, Duration::from_secs(30)), "stopped on SIGTERM");
    let downloaded = scratch.path().join("downloaded");
    std::fs::create_dir_all(&downloaded).expect("dir");
    python(
        &["-c", DOWNLOAD_BUCKET, &endpoint, "outage", "warc/", &downloaded.display().to_string()],
        scratch.path(),
    );
    exactly_once(&downloaded, &results);
}

/// A full disk stops the stage where it is, as an unreachable store does: not ready,
/// failing, nothing committed past what is published; once space is freed it goes on by
/// itself, and every result is in exactly one file. The disk is a 2 MiB tmpfs mounted in a
/// user and mount namespace of the stage's own (`unshare`), nearly filled beforehand; the
/// test reaches it through `/proc/PID/root`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_holds_the_stage_until_space_is_freed() {
    if !python_imports(&["warcio"], "reading the archive back after a full disk") {
        return;
    }
    let namespaces = Command::new("unshare").args(["-rm", "true"]).status();
    if !namespaces.is_ok_and(|status| status.success()) {
        eprintln!("skipped: no unprivileged user namespaces here (`unshare -rm`) to mount a small disk in");
        return;
    }
    let scratch = tempfile::tempdir().expect("dir");
    let disk = scratch.path().join("disk");
    std::fs::create_dir_all(&disk).expect("dir");
    let broker = Broker::start();
    let flags = kafka_flags(&broker.bootstrap(), &unique_prefix("archive-disk-full"));
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, PARTITIONS).await;
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let out = disk.join("warc");
    let args = stage_flags(
        &flags,
        &format!("file://{}", out.display()),
        &["--max-file-age-ms", "1000", "--outage-timeout-ms", "240000"],
    );
    let http = recrawl_common::http::free_local_port().expect("port");
    let log = scratch.path().join("archive.log");
    // The tmpfs holds 2 MiB, of which the filler leaves about 200 KiB: less than the results.
    let mount = "mount -t tmpfs -o size=2m tmpfs \"$0\" && mkdir \"$0/warc\" \
                 && head -c 1900000 /dev/zero > \"$0/filler\" && exec \"$@\"";
    let child = Command::new("unshare")
        .args(["-rm", "--", "sh", "-c", mount])
        .arg(&disk)
        .arg(recrawl_e2e::binary("recrawl-archive"))
        .args(&args)
        .args(["--http-listen", &http.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("unshare starts");
    let mut stage = Owned(child);
    // The stage's view of its disk (`exec` made it the process spawned).
    let seen =
        PathBuf::from(format!("/proc/{}/root", stage.0.id())).join(disk.strip_prefix("/").expect("absolute"));
    let client = reqwest::Client::new();
    ready(&client, http, &mut stage).await;
    let results: Vec<FetchResult> = (0..30)
        .map(|i| {
            let url = format!("http://site{}.example/page-{i}.html", i % 3);
            download(&url, 1_780_000_000_000 + i * 1000, incompressible(i as u64, 20_000))
        })
        .collect();
    let ends = produce_all(&producer, &kafka.cluster.topics(), &results).await;

    // Some files are published before the disk fills; the rest are held.
    let committed = held_back(&client, http, &log, &kafka).await;
    assert!(
        ends.iter().any(|(partition, end)| committed.get(partition).is_none_or(|next| next < end)),
        "the results the full disk holds back are not committed: {committed:?} of {ends:?}"
    );

    std::fs::remove_file(seen.join("filler")).expect("the filler removed");
    all_committed(&kafka, &ends).await;
    assert_eq!(metric(&client, http, "recrawl_archive_store_failing").await, 0);
    ready(&client, http, &mut stage).await;
    // The disk goes with the stage's namespace: its files are copied out first.
    let kept = scratch.path().join("kept");
    std::fs::create_dir_all(&kept).expect("dir");
    for entry in std::fs::read_dir(seen.join("warc")).expect("the stage's files") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, kept.join(path.file_name().expect("name"))).expect("copied");
    }
    assert!(recrawl_e2e::terminate(&mut stage, Duration::from_secs(30)), "stopped on SIGTERM");
    exactly_once(&kept, &results);
    check_with_the_community_tools(&kept);
}
