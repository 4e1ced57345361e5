//! The archive stage: keeps what is fetched, as WARC/1.1 files with a CDXJ index each, in
//! a directory or an S3-compatible store. A download is a `response` record (with its
//! `request`); a download whose payload the URL's last capture already holds is a
//! `revisit` referring to it, and so is a 304. Files are published whole before the input
//! offsets of their records are committed, so every downloaded or not-modified fetch
//! result is in exactly one published file (the README's "Archiving" says how).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::arithmetic_side_effects))]

pub mod capture;
pub mod cdxj;
pub mod files;
pub mod store;
pub mod surt;
pub mod warc;

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Display;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use flate2::Compression;
use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts};
use recrawl_common::http::Health;
use recrawl_common::metrics::registered;
use recrawl_common::runtime::{run_stage, DeadLetterKind, Emitter, RuntimeError, SetupError, StageError};
use recrawl_common::service::run_service;
use recrawl_common::{unix_ms, InputRecord, KafkaArgs, ServiceArgs, Stage, StageContext, StateStore};
use recrawl_schemas::topics::{DEAD_LETTER, FETCH_RESULTS};
use recrawl_schemas::{FetchOutcome, FetchResult};

use crate::capture::{archive, ArchiveState, Archived, Kind, SealedFile, SEALED_KEY};
use crate::cdxj::IndexEntry;
use crate::files::{index_name, warc_name, OpenFile, StagedFile, MAX_INDEX_BYTES};
use crate::store::{remove_staged_leftovers, Destination, StoreError};
use crate::warc::{Gzip, RecordType, WarcInfo};

pub const STAGE: &str = "archive";

const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Args)]
pub struct ArchiveArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Where the WARC files and their CDXJ indexes go: file:///absolute/dir, or
    /// s3://bucket/prefix (credentials, region and endpoint from the standard AWS
    /// environment variables).
    #[arg(long, env = "RECRAWL_ARCHIVE_OUT")]
    pub out: String,
    /// The S3-compatible store's endpoint (MinIO, Ceph, …), e.g. http://127.0.0.1:9000;
    /// default: AWS_ENDPOINT_URL, else AWS's.
    #[arg(long, env = "RECRAWL_ARCHIVE_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// Local directory files are written in before they are uploaded to an S3 store
    /// (the directory itself for file://); default: the system's temporary directory.
    #[arg(long, env = "RECRAWL_ARCHIVE_STAGING_DIR")]
    pub staging_dir: Option<PathBuf>,
    /// File names' PREFIX (PREFIX-TIMESTAMP-SERIAL-INSTANCE.warc.gz): letters, digits,
    /// '.', '_' and '-'.
    #[arg(long, env = "RECRAWL_ARCHIVE_WARC_PREFIX", default_value = "recrawl", value_parser = file_name_part)]
    pub warc_prefix: String,
    /// File names' INSTANCE, before the partition (-p3); default: the host name.
    #[arg(long, env = "RECRAWL_ARCHIVE_WARC_INSTANCE", value_parser = file_name_part)]
    pub warc_instance: Option<String>,
    /// The warcinfo record's `operator`: who runs the crawl (a name, an email address).
    #[arg(long, env = "RECRAWL_ARCHIVE_WARC_OPERATOR", value_parser = warc_field)]
    pub warc_operator: Option<String>,
    /// The warcinfo record's `description` of the crawl.
    #[arg(long, env = "RECRAWL_ARCHIVE_WARC_DESCRIPTION", value_parser = warc_field)]
    pub warc_description: Option<String>,
    /// A file is sealed and published once it holds this many bytes.
    #[arg(long, env = "RECRAWL_ARCHIVE_MAX_FILE_BYTES", default_value_t = 1 << 30,
          value_parser = clap::value_parser!(u64).range(4096..=1 << 40))]
    pub max_file_bytes: u64,
    /// ... or once it has been open this long, milliseconds: its records' input offsets
    /// are committed only then, so this bounds what a crash makes the stage write again.
    #[arg(long, env = "RECRAWL_ARCHIVE_MAX_FILE_AGE_MS", default_value_t = 900_000,
          value_parser = clap::value_parser!(u64).range(100..=86_400_000))]
    pub max_file_age_ms: u64,
    /// Also write the request record of each revisit (a 304's conditional request): by
    /// default only responses have theirs.
    #[arg(long, env = "RECRAWL_ARCHIVE_REVISIT_REQUESTS")]
    pub revisit_requests: bool,
    /// gzip level of the records, 0 (stored) to 9.
    #[arg(long, env = "RECRAWL_ARCHIVE_GZIP_LEVEL", default_value_t = 6,
          value_parser = clap::value_parser!(u32).range(0..=9))]
    pub gzip_level: u32,
}

fn file_name_part(text: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if text.is_empty() || text.len() > 64 || !text.chars().all(allowed) || text.starts_with('.') {
        return Err(format!("{text:?}: 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'"));
    }
    Ok(text.to_owned())
}

fn warc_field(text: &str) -> Result<String, String> {
    if !warc::is_field_value(text) || text.len() > 1024 {
        return Err("at most 1 KiB on one line".to_owned());
    }
    Ok(text.to_owned())
}

/// The host name, as a file name part; `localhost` if it has none that fits.
fn host_instance() -> String {
    let host = nix::unistd::gethostname().ok().and_then(|name| name.into_string().ok()).unwrap_or_default();
    let cleaned: String =
        host.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).take(64).collect();
    file_name_part(&cleaned).unwrap_or_else(|_| "localhost".to_owned())
}

#[derive(Debug, Clone)]
struct ArchiveMetrics {
    records: IntCounterVec,
    revisits: IntCounterVec,
    bytes: IntCounter,
    files: IntCounter,
    saved_bytes: IntCounter,
    skipped: IntCounterVec,
    store_errors: IntCounterVec,
    store_failing: IntGauge,
    open_files: IntGauge,
    unpublished_bytes: IntGauge,
}

/// Why a fetch result is not archived, besides its outcome: its records are already in a
/// published file (read again after a crash).
const SKIPPED_PUBLISHED: &str = "already_published";
const STORE_OPERATIONS: [&str; 4] = ["write", "seal", "publish", "lookup"];

impl ArchiveMetrics {
    fn register(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let records = registered(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "archive_records_total",
                    "WARC records written, by WARC-Type: warcinfo, request, response, revisit.",
                ),
                &["type"],
            )?,
        )?;
        let revisits = registered(
            registry,
            IntCounterVec::new(
                Opts::new("archive_revisits_total", "Revisit records by profile: identical_payload_digest (the payload the URL's last capture holds), server_not_modified (a 304)."),
                &["profile"],
            )?,
        )?;
        let bytes = registered(
            registry,
            IntCounter::new(
                "archive_bytes_total",
                "Bytes of WARC records written (gzip members, warcinfo included).",
            )?,
        )?;
        let files = registered(
            registry,
            IntCounter::new(
                "archive_files_published_total",
                "WARC files published, each with its CDXJ index.",
            )?,
        )?;
        let saved_bytes = registered(registry, IntCounter::new("archive_revisit_saved_bytes_total", "Payload bytes not stored again because a revisit record referred to an earlier capture (before compression).")?)?;
        let skipped = registered(
            registry,
            IntCounterVec::new(
                Opts::new("archive_results_skipped_total", "Fetch results not archived, by outcome (failures, robots denials, bodies not transferred), or already_published: read again after a crash, their records already in a published file."),
                &["reason"],
            )?,
        )?;
        let store_errors = registered(
            registry,
            IntCounterVec::new(
                Opts::new("archive_store_errors_total", "Failed operations on the staging disk or the destination, each retried: write, seal (flush to disk), publish (rename or upload), lookup."),
                &["operation"],
            )?,
        )?;
        let store_failing = registered(registry, IntGauge::new("archive_store_failing", "1 while writes or uploads fail and the stage waits, consuming nothing and committing nothing.")?)?;
        let open_files = registered(
            registry,
            IntGauge::new("archive_open_files", "Files being written or waiting to be published.")?,
        )?;
        let unpublished_bytes = registered(
            registry,
            IntGauge::new(
                "archive_unpublished_bytes",
                "Bytes written to files not yet published: what a crash would have the stage write again.",
            )?,
        )?;
        for kind in RecordType::ALL {
            records.with_label_values(&[kind.as_str()]).reset();
        }
        for profile in ["identical_payload_digest", "server_not_modified"] {
            revisits.with_label_values(&[profile]).reset();
        }
        for outcome in FetchOutcome::ALL.iter().map(|o| o.as_str()).chain([SKIPPED_PUBLISHED]) {
            skipped.with_label_values(&[outcome]).reset();
        }
        for operation in STORE_OPERATIONS {
            store_errors.with_label_values(&[operation]).reset();
        }
        Ok(Self {
            records,
            revisits,
            bytes,
            files,
            saved_bytes,
            skipped,
            store_errors,
            store_failing,
            open_files,
            unpublished_bytes,
        })
    }
}

/// What the stage holds of one input partition.
#[derive(Debug)]
struct PartitionFiles {
    /// The input topic, with its prefix, for the offsets handed back.
    topic: String,
    /// Records below this offset are in a published file already.
    skip_below: i64,
    open: Option<OpenFile>,
    /// Sealed, in order, their sealing in the changelog: published next.
    sealed: VecDeque<StagedFile>,
    /// Past every file: records that made none (not archived) while files were waiting.
    unfiled_next: Option<i64>,
}

/// Retries a failing operation on the disk or the store with back-off, the stage not ready
/// meanwhile, until the outage timeout.
#[derive(Debug)]
struct Retry {
    started: tokio::time::Instant,
    backoff: Duration,
    said: Option<String>,
}

impl Retry {
    fn new() -> Self {
        Self { started: tokio::time::Instant::now(), backoff: FIRST_BACKOFF, said: None }
    }
}

#[derive(Debug)]
pub struct Archive {
    destination: Destination,
    info: WarcInfo,
    prefix: String,
    instance: String,
    max_file_bytes: u64,
    max_file_age: Duration,
    gzip: Gzip,
    revisit_requests: bool,
    outage: Duration,
    serial: u64,
    partitions: BTreeMap<i32, PartitionFiles>,
    durable: Vec<(String, i32, i64)>,
    metrics: ArchiveMetrics,
    health: Health,
}

impl Archive {
    pub fn new(
        args: &ArchiveArgs,
        health: Health,
        registry: &prometheus::Registry,
    ) -> Result<Self, SetupError> {
        let destination =
            Destination::open(&args.out, args.s3_endpoint.as_deref(), args.staging_dir.as_deref())
                .map_err(SetupError::settings)?;
        let metrics = ArchiveMetrics::register(registry)
            .map_err(|source| SetupError::Metrics { stage: STAGE, source })?;
        let hostname = host_instance();
        Ok(Self {
            destination,
            info: WarcInfo {
                software: format!("recrawl-archive/{}", env!("CARGO_PKG_VERSION")),
                operator: args.warc_operator.clone(),
                description: args.warc_description.clone(),
                hostname: hostname.clone(),
            },
            prefix: args.warc_prefix.clone(),
            instance: args.warc_instance.clone().unwrap_or(hostname),
            max_file_bytes: args.max_file_bytes,
            max_file_age: Duration::from_millis(args.max_file_age_ms),
            gzip: Gzip::new(Compression::new(args.gzip_level)),
            revisit_requests: args.revisit_requests,
            // Stops short of the outage timeout, within which the runtime's own retries
            // of the batch's changelog must also fit before max.poll.interval.ms.
            outage: Duration::from_millis(args.kafka.outage_timeout_ms / 2),
            serial: 0,
            partitions: BTreeMap::new(),
            durable: Vec::new(),
            metrics,
            health,
        })
    }

    /// Records a failure of `operation` and waits before the next attempt; an error once
    /// the store has failed for longer than the outage allows.
    async fn failed(
        &self,
        retry: &mut Retry,
        operation: &'static str,
        error: impl Display,
    ) -> Result<(), StageError> {
        self.metrics.store_errors.with_label_values(&[operation]).inc();
        let error = error.to_string();
        if retry.started.elapsed() > self.outage {
            self.metrics.store_failing.set(0);
            return Err(StageError::Durability(format!(
                "the archive's files could not be written or published for {:?}: {error}",
                retry.started.elapsed()
            )));
        }
        if retry.said.as_deref() != Some(error.as_str()) {
            tracing::warn!(operation, %error, "archive store failing; consuming nothing until it is back");
            retry.said = Some(error);
        }
        self.health.set_ready(false);
        self.metrics.store_failing.set(1);
        tokio::time::sleep(retry.backoff).await;
        retry.backoff = retry.backoff.saturating_mul(2).min(MAX_BACKOFF);
        Ok(())
    }

    fn recovered(&self, retry: &Retry) {
        if retry.said.is_some() {
            tracing::info!(after = ?retry.started.elapsed(), "archive store back");
            self.metrics.store_failing.set(0);
            self.health.set_ready(true);
        }
    }

    /// The files of `partition`, after what a crash or an earlier owner left is cleared:
    /// files never published deleted, and the input the last published one holds skipped.
    async fn partition(
        &mut self,
        partition: i32,
        topic: &str,
        state: &StateStore<ArchiveState>,
    ) -> Result<&mut PartitionFiles, StageError> {
        if !self.partitions.contains_key(&partition) {
            let skip_below = self.recover(partition, state).await?;
            let files = PartitionFiles {
                topic: topic.to_owned(),
                skip_below,
                open: None,
                sealed: VecDeque::new(),
                unfiled_next: None,
            };
            self.partitions.insert(partition, files);
        }
        self.partitions
            .get_mut(&partition)
            .ok_or_else(|| StageError::Durability(format!("partition {partition}'s files vanished")))
    }

    async fn recover(&self, partition: i32, state: &StateStore<ArchiveState>) -> Result<i64, StageError> {
        let mut retry = Retry::new();
        loop {
            let staging = self.destination.staging_dir();
            match remove_staged_leftovers(staging, &self.prefix, partition) {
                Ok(0) => break,
                Ok(removed) => {
                    tracing::info!(partition, removed, "removed files a crash left unpublished");
                    break;
                }
                Err(error) => {
                    self.failed(&mut retry, "write", format!("cleaning {}: {error}", staging.display()))
                        .await?
                }
            }
        }
        let Some(ArchiveState::Sealed(sealed)) = state.get(partition, SEALED_KEY) else {
            self.recovered(&retry);
            return Ok(0);
        };
        loop {
            let published = match self.destination.exists(&sealed.name).await {
                Ok(true) => Ok(sealed.next_offset),
                // Sealed but never published: its records are written again, and an index
                // published ahead of it goes.
                Ok(false) => {
                    self.destination.remove(&index_name(&sealed.name)).await.map(|()| sealed.first_offset)
                }
                Err(error) => Err(error),
            };
            match published {
                Ok(skip_below) => {
                    self.recovered(&retry);
                    tracing::info!(partition, file = %sealed.name, skip_below, "last sealed file checked");
                    return Ok(skip_below);
                }
                Err(error) => self.failed(&mut retry, "lookup", error).await?,
            }
        }
    }

    /// Input `offset` of `partition` is handled and made no record: its offset is durable
    /// once every file before it is.
    fn covered(&mut self, partition: i32, offset: i64) {
        let next = offset.saturating_add(1);
        let Some(files) = self.partitions.get_mut(&partition) else { return };
        if let Some(open) = &mut files.open {
            open.next_offset = next;
        } else if !files.sealed.is_empty() {
            files.unfiled_next = Some(next);
        } else {
            self.durable.push((files.topic.clone(), partition, next));
        }
    }

    /// Writes the records of `result`, read at `record`'s offset.
    async fn write(
        &mut self,
        record: &InputRecord,
        result: &FetchResult,
        state: &mut StateStore<ArchiveState>,
    ) -> Result<(), StageError> {
        let partition = record.partition;
        let key = recrawl_schemas::url_key(&result.url);
        let last = match state.get(partition, &key) {
            Some(ArchiveState::Capture(capture)) => Some(capture.clone()),
            _ => None,
        };
        let (name, warcinfo_id) = self.open_file(partition, record).await?;
        let Some(archived) =
            archive(result, last.as_ref(), record.offset, &warcinfo_id, self.revisit_requests)
        else {
            self.covered(partition, record.offset);
            return Ok(());
        };
        let (members, index_offset, index_length) = self.members(&archived, partition)?;
        let mut retry = Retry::new();
        loop {
            let Some(open) = self.partitions.get_mut(&partition).and_then(|files| files.open.as_mut()) else {
                return Err(StageError::Durability(format!("partition {partition}'s open file vanished")));
            };
            let start = open.len();
            match open.append(&members) {
                Ok(()) => {
                    open.next_offset = record.offset.saturating_add(1);
                    let entry = IndexEntry {
                        target_uri: archived.target_uri,
                        date_ms: archived.fetched_at_ms,
                        mime: archived.mime.as_deref(),
                        status: Some(archived.status),
                        digest: &archived.digest,
                        length: index_length,
                        offset: start.saturating_add(index_offset),
                        filename: &name,
                    };
                    open.index(entry.line());
                    break;
                }
                Err(error) => self.failed(&mut retry, "write", format!("{name}: {error}")).await?,
            }
        }
        self.recovered(&retry);
        self.metrics.bytes.inc_by(members.len() as u64);
        for written in &archived.records {
            self.metrics.records.with_label_values(&[written.kind.as_str()]).inc();
        }
        match archived.kind {
            Kind::Response => {}
            Kind::Revisit => self.metrics.revisits.with_label_values(&["identical_payload_digest"]).inc(),
            Kind::NotModified => self.metrics.revisits.with_label_values(&["server_not_modified"]).inc(),
        }
        self.metrics.saved_bytes.inc_by(archived.saved_bytes);
        if let Some(capture) = archived.capture {
            set(state, partition, &key, ArchiveState::Capture(capture));
        }
        let full =
            self.partitions.get(&partition).and_then(|files| files.open.as_ref()).is_some_and(|open| {
                open.len() >= self.max_file_bytes || open.index_bytes() >= MAX_INDEX_BYTES
            });
        if full {
            self.seal(partition, state).await?;
        }
        Ok(())
    }

    /// The gzip members of `archived`'s records, with the offset and length within them
    /// of the last one (the response or revisit, which the index names).
    fn members(
        &mut self,
        archived: &Archived<'_>,
        partition: i32,
    ) -> Result<(Vec<u8>, u64, u64), StageError> {
        let mut members = Vec::new();
        let mut last_start = 0;
        for written in &archived.records {
            last_start = members.len();
            written.write_gzip(&mut self.gzip, &mut members).map_err(|error| {
                StageError::Durability(format!("compressing a record of partition {partition}: {error}"))
            })?;
        }
        let last_length = members.len().saturating_sub(last_start) as u64;
        Ok((members, last_start as u64, last_length))
    }

    /// The name and warcinfo id of `partition`'s open file, which is created if need be.
    async fn open_file(
        &mut self,
        partition: i32,
        record: &InputRecord,
    ) -> Result<(String, String), StageError> {
        let exists = self.partitions.get(&partition).and_then(|files| files.open.as_ref());
        if let Some(open) = exists {
            return Ok((open.name.clone(), open.warcinfo_id.clone()));
        }
        let mut retry = Retry::new();
        let open = loop {
            let now = unix_ms();
            let name = warc_name(&self.prefix, now, self.serial, &self.instance, partition);
            let dir = self.destination.staging_dir().to_path_buf();
            match OpenFile::create(&dir, name.clone(), &self.info, now, record.offset, &mut self.gzip) {
                Ok(open) => break open,
                Err(error) => self.failed(&mut retry, "write", format!("{name}: {error}")).await?,
            }
        };
        self.recovered(&retry);
        self.serial = self.serial.saturating_add(1);
        self.metrics.records.with_label_values(&[RecordType::Warcinfo.as_str()]).inc();
        self.metrics.bytes.inc_by(open.len());
        let names = (open.name.clone(), open.warcinfo_id.clone());
        if let Some(files) = self.partitions.get_mut(&partition) {
            files.open = Some(open);
        }
        self.refresh_gauges();
        Ok(names)
    }

    /// Seals `partition`'s open file and notes it in the state, to be published once the
    /// state is in the changelog.
    async fn seal(&mut self, partition: i32, state: &mut StateStore<ArchiveState>) -> Result<(), StageError> {
        let mut retry = Retry::new();
        let staged = loop {
            let Some(open) = self.partitions.get_mut(&partition).and_then(|files| files.open.as_mut()) else {
                return Ok(());
            };
            match open.seal() {
                Ok(staged) => break staged,
                Err(error) => {
                    let name = open.name.clone();
                    self.failed(&mut retry, "seal", format!("{name}: {error}")).await?;
                }
            }
        };
        self.recovered(&retry);
        let sealed = ArchiveState::Sealed(SealedFile {
            name: staged.name.clone(),
            first_offset: staged.first_offset,
            next_offset: staged.next_offset,
        });
        set(state, partition, SEALED_KEY, sealed);
        if let Some(files) = self.partitions.get_mut(&partition) {
            files.open = None;
            files.sealed.push_back(staged);
        }
        Ok(())
    }

    /// Publishes every sealed file (sealed in an earlier call, so its sealing is in the
    /// changelog) and hands back the input offsets it held.
    async fn publish_sealed(&mut self) -> Result<(), StageError> {
        let partitions: Vec<i32> = self.partitions.keys().copied().collect();
        for partition in partitions {
            // Out of the queue while it is published; should the store stay away past the
            // outage, the stage stops and the next owner writes its records again.
            while let Some(mut staged) =
                self.partitions.get_mut(&partition).and_then(|files| files.sealed.pop_front())
            {
                let mut retry = Retry::new();
                loop {
                    match publish(&self.destination, &mut staged).await {
                        Ok(()) => break,
                        Err(error) => self.failed(&mut retry, "publish", error).await?,
                    }
                }
                self.recovered(&retry);
                let Some(files) = self.partitions.get_mut(&partition) else { break };
                tracing::info!(file = %self.destination.location(&staged.name), bytes = staged.bytes, "published");
                self.metrics.files.inc();
                self.durable.push((files.topic.clone(), partition, staged.next_offset));
                if files.sealed.is_empty() {
                    if let Some(next) = files.unfiled_next.take() {
                        self.durable.push((files.topic.clone(), partition, next));
                    }
                }
            }
        }
        self.refresh_gauges();
        Ok(())
    }

    /// Seals every open file opened at least the longest a file may stay open before `now`.
    async fn seal_aged(&mut self, state: &mut StateStore<ArchiveState>, all: bool) -> Result<(), StageError> {
        let aged: Vec<i32> = self
            .partitions
            .iter()
            .filter(|(_, files)| {
                files.open.as_ref().is_some_and(|open| all || open.opened.elapsed() >= self.max_file_age)
            })
            .map(|(&partition, _)| partition)
            .collect();
        for partition in aged {
            self.seal(partition, state).await?;
        }
        self.refresh_gauges();
        Ok(())
    }

    fn refresh_gauges(&self) {
        let files = self.partitions.values();
        let open = files
            .clone()
            .map(|files| usize::from(files.open.is_some()).saturating_add(files.sealed.len()))
            .sum::<usize>();
        let bytes = files
            .map(|files| {
                files
                    .open
                    .as_ref()
                    .map_or(0, OpenFile::len)
                    .saturating_add(files.sealed.iter().map(|s| s.bytes).sum())
            })
            .sum::<u64>();
        self.metrics.open_files.set(i64::try_from(open).unwrap_or(i64::MAX));
        self.metrics.unpublished_bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}

/// Sets `key`'s state, to be written to the changelog.
fn set(state: &mut StateStore<ArchiveState>, partition: i32, key: &str, value: ArchiveState) {
    let slot = state.get_or_insert_with(partition, key, || value.clone());
    *slot = value;
}

/// Publishes `staged`'s index, then the file itself: a published file always has its
/// index, and an index whose file was never published is removed by the recovery.
async fn publish(destination: &Destination, staged: &mut StagedFile) -> Result<(), StoreError> {
    if !staged.index_published {
        destination.publish(&staged.staged_index, &staged.index_name).await?;
        staged.index_published = true;
    }
    destination.publish(&staged.staged, &staged.name).await
}

impl Stage for Archive {
    type State = ArchiveState;

    const NAME: &'static str = STAGE;
    const INPUTS: &'static [&'static str] = &[FETCH_RESULTS.name];
    const OUTPUTS: &'static [&'static str] = &[DEAD_LETTER];
    const HOLDS_OFFSETS: bool = true;

    async fn handle(
        &mut self,
        batch: Vec<InputRecord>,
        state: &mut StateStore<ArchiveState>,
        out: &mut Emitter,
    ) -> Result<(), StageError> {
        self.publish_sealed().await?;
        for record in batch {
            let skip_below = self.partition(record.partition, &record.topic, state).await?.skip_below;
            let Some(result) = out.decode_keyed(&record, FETCH_RESULTS) else {
                self.covered(record.partition, record.offset);
                continue;
            };
            if !matches!(result.outcome, FetchOutcome::Downloaded | FetchOutcome::NotModified) {
                self.metrics.skipped.with_label_values(&[result.outcome.as_str()]).inc();
                self.covered(record.partition, record.offset);
                continue;
            }
            if let Some(reason) = capture::unwritable(&result) {
                out.dead_letter(&record, DeadLetterKind::Invalid, reason);
                self.covered(record.partition, record.offset);
                continue;
            }
            if record.offset < skip_below {
                self.metrics.skipped.with_label_values(&[SKIPPED_PUBLISHED]).inc();
                self.covered(record.partition, record.offset);
                continue;
            }
            self.write(&record, &result, state).await?;
        }
        self.refresh_gauges();
        Ok(())
    }

    fn next_tick(&self) -> Option<tokio::time::Instant> {
        if self.partitions.values().any(|files| !files.sealed.is_empty()) {
            return Some(tokio::time::Instant::now());
        }
        self.partitions
            .values()
            .filter_map(|files| files.open.as_ref())
            .filter_map(|open| open.opened.checked_add(self.max_file_age))
            .min()
    }

    async fn tick(
        &mut self,
        state: &mut StateStore<ArchiveState>,
        _assignment: &recrawl_common::runtime::Assignment,
        _out: &mut Emitter,
    ) -> Result<(), StageError> {
        self.publish_sealed().await?;
        self.seal_aged(state, false).await
    }

    async fn finish(
        &mut self,
        state: &mut StateStore<ArchiveState>,
        _out: &mut Emitter,
    ) -> Result<bool, StageError> {
        self.publish_sealed().await?;
        self.seal_aged(state, true).await?;
        Ok(self.partitions.values().all(|files| files.sealed.is_empty()))
    }

    fn take_durable(&mut self) -> Vec<(String, i32, i64)> {
        std::mem::take(&mut self.durable)
    }

    fn on_revoked(&mut self, partition: i32, _state: &StateStore<ArchiveState>) {
        // The partition's next owner writes these records again, from the last commit.
        if let Some(files) = self.partitions.remove(&partition) {
            if let Some(open) = &files.open {
                open.discard();
            }
            for staged in &files.sealed {
                staged.discard();
            }
        }
        self.refresh_gauges();
    }

    fn state_keys(&self, state: &StateStore<ArchiveState>) -> usize {
        state.len()
    }
}

/// Runs the archive stage until `ctx.shutdown`.
pub async fn run(args: ArchiveArgs, ctx: StageContext) -> Result<(), RuntimeError> {
    let archive = Archive::new(&args, ctx.health.clone(), ctx.metrics.registry())?;
    run_stage(archive, &args.kafka, ctx).await
}

/// The process entry point shared by `recrawl-archive` and `recrawl stage archive`.
pub async fn main(args: ArchiveArgs) -> anyhow::Result<()> {
    let service = args.service.clone();
    run_service(STAGE, &service, |ctx| run(args, ctx)).await
}
