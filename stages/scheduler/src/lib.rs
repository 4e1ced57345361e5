//! The scheduler: keeps every known URL's staleness inputs (last download, size, server
//! response time) and its in-links, and at the start of each period publishes the picks
//! of `policy` to the fetch topic. It is the pipeline's clock: period t starts at
//! `epoch + t·period`.

pub mod policy;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use prometheus::{IntCounterVec, IntGauge, Opts};
use recrawl_common::runtime::{run_stage, Assignment, Emitter, RuntimeError, StageError};
use recrawl_common::service::run_service;
use recrawl_common::{unix_ms, InputRecord, KafkaArgs, ServiceArgs, Stage, StageContext, StateStore};
use recrawl_schemas::topics::{DEAD_LETTER, ESTIMATES, FETCH, LINKS};
use recrawl_schemas::{
    host_of, normalise_url, url_key, DiscoveredLinks, Format, Message, PageEstimate, PagePick, PickReason,
};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::policy::{quota, score, staleness, top_m, Horizon};

pub const STAGE: &str = "scheduler";
/// In-links remembered per URL (each linking page counted once); beyond this the
/// in-degree saturates, which keeps a hub's entry bounded.
pub const MAX_IN_LINKS: usize = 256;
/// 2026-01-01T00:00:00Z.
const DEFAULT_EPOCH_UNIX_MS: i64 = 1_767_225_600_000;

#[derive(Debug, Clone, Args)]
pub struct SchedulerArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub service: ServiceArgs,
    /// m: picks per period across all scheduler instances (each instance takes the share
    /// of the partitions it owns).
    #[arg(long, env = "RECRAWL_PICKS_PER_PERIOD", default_value_t = 100)]
    pub picks_per_period: usize,
    /// Length of a period, milliseconds.
    #[arg(long, env = "RECRAWL_PERIOD_MS", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub period_ms: u64,
    /// Start of period 0, Unix milliseconds; every instance must use the same value.
    #[arg(long, env = "RECRAWL_EPOCH_UNIX_MS", default_value_t = DEFAULT_EPOCH_UNIX_MS)]
    pub epoch_unix_ms: i64,
    /// T − t in the score: rolling:W (a constant window) or fixed:T (restarting horizons).
    #[arg(long, env = "RECRAWL_HORIZON", default_value = "rolling:10")]
    pub horizon: Horizon,
    /// Weight of the download-time term p·g (in periods) against staleness.
    #[arg(long, env = "RECRAWL_COST_WEIGHT", default_value_t = 1.0)]
    pub cost_weight: f64,
    /// Seed URLs, one per line (# starts a comment); published to the links topic at
    /// start, so each lands on the instance that owns it.
    #[arg(long, env = "RECRAWL_SEEDS")]
    pub seeds: Option<PathBuf>,
}

#[derive(Debug, Error)]
pub enum SeedError {
    #[error("--seeds {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("--seeds {path} line {line}: {reason}")]
    Url { path: String, line: usize, reason: String },
}

/// Reads a seed file into normalised URLs; a bad line is an error naming it.
pub fn read_seeds(path: &std::path::Path) -> Result<Vec<String>, SeedError> {
    let shown = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|source| SeedError::Read { path: shown.clone(), source })?;
    let mut seeds = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let url = normalise_url(line).map_err(|e| SeedError::Url {
            path: shown.clone(),
            line: index + 1,
            reason: e.to_string(),
        })?;
        seeds.push(url);
    }
    Ok(seeds)
}

/// What the scheduler keeps per URL (changelog `state.scheduler`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchedulerState {
    pub host: String,
    pub group: String,
    pub discovered_period: u64,
    /// Period of the latest estimate applied; older or equal ones are replays.
    pub last_estimate_period: Option<u64>,
    pub last_download_period: Option<u64>,
    /// Size and fetch time of the latest download: p_j and the sample for g_i.
    pub size_bytes: u64,
    pub latency_ms: f64,
    /// url_keys of the pages linking here (at most [`MAX_IN_LINKS`]); "seed" for a seed.
    pub in_links: Vec<String>,
}

impl Message for SchedulerState {
    const NAME: &'static str = "SchedulerState";
    const FORMAT: Format = Format::Bincode;
}

#[derive(Debug)]
struct SchedulerMetrics {
    picks: IntCounterVec,
    period: IntGauge,
}

impl SchedulerMetrics {
    fn register(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let picks = IntCounterVec::new(
            Opts::new("scheduler_picks_total", "Picks published, by reason."),
            &["reason"],
        )?;
        let period = IntGauge::new("scheduler_period", "The latest period picks were published for.")?;
        registry.register(Box::new(picks.clone()))?;
        registry.register(Box::new(period.clone()))?;
        Ok(Self { picks, period })
    }
}

#[derive(Debug)]
pub struct Scheduler {
    picks_per_period: usize,
    period_ms: u64,
    epoch_unix_ms: i64,
    horizon: Horizon,
    cost_weight: f64,
    pending_seeds: Vec<String>,
    next_period: u64,
    metrics: SchedulerMetrics,
}

impl Scheduler {
    /// The period running at Unix time `now_ms`, `None` before the epoch.
    fn period_at(&self, now_ms: i64) -> Option<u64> {
        (now_ms >= self.epoch_unix_ms).then(|| ((now_ms - self.epoch_unix_ms) as u64) / self.period_ms)
    }

    fn apply_link(&self, link: &DiscoveredLinks, partition: i32, state: &mut StateStore<SchedulerState>) {
        let source = link.source_key.clone().unwrap_or_else(|| "seed".to_owned());
        let known = state.get(partition, &link.url);
        if known.is_some_and(|s| s.in_links.contains(&source) || s.in_links.len() >= MAX_IN_LINKS) {
            return;
        }
        let entry = state.get_or_insert_with(partition, &link.url, || new_entry(&link.host, link.period));
        entry.in_links.push(source);
    }

    fn apply_estimate(
        &self,
        estimate: &PageEstimate,
        partition: i32,
        state: &mut StateStore<SchedulerState>,
    ) {
        if state
            .get(partition, &estimate.url)
            .is_some_and(|s| s.last_estimate_period >= Some(estimate.period))
        {
            return;
        }
        let entry =
            state.get_or_insert_with(partition, &estimate.url, || new_entry(&estimate.host, estimate.period));
        entry.group.clone_from(&estimate.group);
        entry.last_estimate_period = Some(estimate.period);
        let request = &estimate.last_request;
        if request.downloaded {
            entry.last_download_period = Some(request.period);
            entry.size_bytes = request.size_bytes;
            entry.latency_ms = request.latency_ms;
        }
    }

    /// The picks for `period` among the URLs of `assignment`.
    fn picks(
        &self,
        period: u64,
        state: &StateStore<SchedulerState>,
        assignment: &Assignment,
    ) -> Vec<PagePick> {
        let m = quota(self.picks_per_period, &assignment.partitions, assignment.total);
        // g_i: mean milliseconds per byte over the host's downloaded pages.
        let mut per_host: HashMap<&str, (f64, u32)> = HashMap::new();
        for (_, _, page) in state.iter() {
            if page.last_download_period.is_some() && page.size_bytes > 0 {
                let sample = per_host.entry(page.host.as_str()).or_default();
                sample.0 += page.latency_ms / page.size_bytes as f64;
                sample.1 += 1;
            }
        }
        let remaining = self.horizon.remaining(period);
        let pages: Vec<(&str, &SchedulerState)> = state.iter().map(|(_, url, page)| (url, page)).collect();
        let mut candidates: Vec<(f64, (&str, usize))> = pages
            .iter()
            .enumerate()
            .map(|(index, (url, page))| {
                let ms_per_byte =
                    per_host.get(page.host.as_str()).map_or(0.0, |(sum, n)| sum / f64::from(*n));
                let cost_periods =
                    self.cost_weight * page.size_bytes as f64 * ms_per_byte / self.period_ms as f64;
                let s = staleness(period, page.last_download_period, page.discovered_period);
                (score(remaining, s, cost_periods), (*url, index))
            })
            .collect();
        top_m(&mut candidates, m);
        candidates
            .into_iter()
            .map(|(score, (url, index))| {
                let page = pages[index].1;
                PagePick {
                    url: url.to_owned(),
                    url_key: url_key(url),
                    host: page.host.clone(),
                    group: page.group.clone(),
                    period,
                    reason: if page.last_estimate_period.is_some() {
                        PickReason::Refresh
                    } else {
                        PickReason::Discovery
                    },
                    score,
                }
            })
            .collect()
    }
}

fn new_entry(host: &str, period: u64) -> SchedulerState {
    SchedulerState {
        host: host.to_owned(),
        group: host.to_owned(),
        discovered_period: period,
        last_estimate_period: None,
        last_download_period: None,
        size_bytes: 0,
        latency_ms: 0.0,
        in_links: Vec::new(),
    }
}

impl Stage for Scheduler {
    type State = SchedulerState;

    fn name(&self) -> &'static str {
        STAGE
    }

    fn input_topics(&self) -> Vec<&'static str> {
        vec![ESTIMATES, LINKS]
    }

    fn output_topics(&self) -> Vec<&'static str> {
        vec![FETCH, LINKS, DEAD_LETTER]
    }

    fn stateful(&self) -> bool {
        true
    }

    async fn handle(
        &mut self,
        batch: Vec<InputRecord>,
        state: &mut StateStore<SchedulerState>,
        out: &mut Emitter,
    ) -> Result<(), StageError> {
        let links_topic = out.topics().name(LINKS);
        for record in batch {
            if record.topic == links_topic {
                if let Some(link) = out.decode_keyed(&record, |l: &DiscoveredLinks| &l.url) {
                    self.apply_link(&link, record.partition, state);
                }
            } else if let Some(estimate) = out.decode_keyed(&record, |e: &PageEstimate| &e.url) {
                self.apply_estimate(&estimate, record.partition, state);
            }
        }
        Ok(())
    }

    fn next_tick(&self) -> Option<tokio::time::Instant> {
        if !self.pending_seeds.is_empty() {
            return Some(tokio::time::Instant::now());
        }
        let start_ms = self.epoch_unix_ms + (self.next_period * self.period_ms) as i64;
        let wait = Duration::from_millis(start_ms.saturating_sub(unix_ms()).max(0) as u64);
        Some(tokio::time::Instant::now() + wait)
    }

    async fn tick(
        &mut self,
        state: &mut StateStore<SchedulerState>,
        assignment: &Assignment,
        out: &mut Emitter,
    ) -> Result<(), StageError> {
        if !self.pending_seeds.is_empty() {
            let period = self.period_at(unix_ms()).unwrap_or(0);
            for url in std::mem::take(&mut self.pending_seeds) {
                let Ok(host) = host_of(&url) else { continue };
                let seed = DiscoveredLinks {
                    url_key: url_key(&url),
                    url,
                    host,
                    source_url: None,
                    source_key: None,
                    occurrences: 1,
                    period,
                };
                out.send(LINKS, &seed.url, &seed)?;
            }
            return Ok(());
        }
        let Some(period) = self.period_at(unix_ms()) else { return Ok(()) };
        if period < self.next_period {
            return Ok(());
        }
        let picks = self.picks(period, state, assignment);
        for pick in &picks {
            out.send(FETCH, &pick.host, pick)?;
            let reason = match pick.reason {
                PickReason::Refresh => "refresh",
                PickReason::Discovery => "discovery",
            };
            self.metrics.picks.with_label_values(&[reason]).inc();
        }
        tracing::info!(period, picks = picks.len(), known = state.len(), "period picks published");
        self.metrics.period.set(period as i64);
        self.next_period = period + 1;
        Ok(())
    }
}

/// Runs the scheduler until `ctx.shutdown`.
pub async fn run(args: SchedulerArgs, ctx: StageContext) -> Result<(), RuntimeError> {
    let pending_seeds = match &args.seeds {
        Some(path) => read_seeds(path).map_err(|e| StageError::Other(e.to_string()))?,
        None => Vec::new(),
    };
    let metrics = SchedulerMetrics::register(ctx.metrics.registry())
        .map_err(|e| StageError::Other(format!("registering scheduler metrics: {e}")))?;
    let mut scheduler = Scheduler {
        picks_per_period: args.picks_per_period,
        period_ms: args.period_ms,
        epoch_unix_ms: args.epoch_unix_ms,
        horizon: args.horizon,
        cost_weight: args.cost_weight,
        pending_seeds,
        next_period: 0,
        metrics,
    };
    // A restarted instance starts with the next period: the running one's picks were
    // already published.
    scheduler.next_period = scheduler.period_at(unix_ms()).map_or(0, |p| p + 1);
    run_stage(scheduler, &args.kafka, ctx).await
}

/// The process entry point shared by `recrawl-scheduler` and `recrawl stage scheduler`.
pub async fn main(args: SchedulerArgs) -> anyhow::Result<()> {
    let service = args.service.clone();
    run_service(STAGE, &service, |ctx| run(args, ctx)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scheduler(m: usize) -> Scheduler {
        Scheduler {
            picks_per_period: m,
            period_ms: 1000,
            epoch_unix_ms: 0,
            horizon: Horizon::Rolling(10),
            cost_weight: 1.0,
            pending_seeds: Vec::new(),
            next_period: 0,
            metrics: SchedulerMetrics::register(&prometheus::Registry::new()).unwrap(),
        }
    }

    fn downloaded(host: &str, period: u64, size_bytes: u64, latency_ms: f64) -> SchedulerState {
        SchedulerState {
            last_estimate_period: Some(period),
            last_download_period: Some(period),
            size_bytes,
            latency_ms,
            ..new_entry(host, 0)
        }
    }

    #[test]
    fn equally_stale_pages_go_to_the_faster_server_and_new_pages_are_discoveries() {
        let mut state = StateStore::default();
        // Same size, same staleness; the slow server needs 2 s per page (2 periods).
        *state.get_or_insert_with(0, "http://slow/a", || new_entry("slow", 0)) =
            downloaded("slow", 3, 1000, 2000.0);
        *state.get_or_insert_with(0, "http://fast/a", || new_entry("fast", 0)) =
            downloaded("fast", 3, 1000, 10.0);
        state.get_or_insert_with(1, "http://fast/new", || new_entry("fast", 6));
        let assignment = Assignment { partitions: vec![0, 1], total: 2 };

        let picks = scheduler(1).picks(7, &state, &assignment);
        assert_eq!(picks.len(), 1);
        assert_eq!(picks[0].url, "http://fast/a");
        assert_eq!(picks[0].reason, PickReason::Refresh);
        // s = 7 − 3 − 1 = 3, T − t = 10, cost = 1000 B · 0.01 ms/B / 1000 ms = 0.01 periods.
        assert!((picks[0].score - (30.0 - 0.01)).abs() < 1e-9, "{}", picks[0].score);

        let picks = scheduler(3).picks(7, &state, &assignment);
        let urls: Vec<&str> = picks.iter().map(|p| p.url.as_str()).collect();
        assert_eq!(urls, ["http://fast/a", "http://slow/a", "http://fast/new"]);
        assert_eq!(picks[2].reason, PickReason::Discovery);
    }

    #[test]
    fn an_instance_picks_only_its_partitions_share() {
        let mut state = StateStore::default();
        for i in 0..10 {
            state.get_or_insert_with(0, &format!("http://h/{i}"), || new_entry("h", 0));
        }
        // m = 5 over 4 partitions: partition 0 carries 5/4 + 1 = 2.
        let picks = scheduler(5).picks(3, &state, &Assignment { partitions: vec![0], total: 4 });
        assert_eq!(picks.len(), 2);
    }

    #[test]
    fn seed_files_are_normalised_and_bad_lines_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seeds.txt");
        std::fs::write(&path, "# comment\nHTTP://Example.com:80/a#x\n\n  https://b.example/  # trailing\n")
            .unwrap();
        assert_eq!(read_seeds(&path).unwrap(), ["http://example.com/a", "https://b.example/"]);
        std::fs::write(&path, "http://ok.example/\nftp://nope.example/\n").unwrap();
        let error = read_seeds(&path).unwrap_err().to_string();
        assert!(error.contains("line 2") && error.contains("ftp"), "{error}");
    }
}
