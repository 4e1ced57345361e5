//! `recrawl demo`: the whole pipeline on one machine. Starts an embedded Kafka broker
//! (librdkafka's mock cluster on 127.0.0.1) unless `--brokers` names one, creates the
//! topics, serves a small changing website on 127.0.0.1, launches the four stages as
//! separate processes, prints one line per period, then stops every process with SIGTERM
//! and prints a summary.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rdkafka::mocking::MockCluster;
use recrawl_common::admin::create_topics;
use recrawl_common::config::{parse_kafka_option, Compression};
use recrawl_common::{unix_ms, KafkaArgs};
use recrawl_schemas::topics::{CHANGE_EVENTS, DEAD_LETTER, FETCH};
use recrawl_schemas::{TopicCatalogue, TopicNames};
use tokio::process::{Child, Command};

use crate::observe::{Observer, Tally};
use crate::site::{DemoSite, SiteConfig};

pub const STAGES: [&str; 4] = ["fetch", "diff", "estimator", "scheduler"];
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
const READY_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Use this Kafka (host:port[,host:port]) instead of the embedded broker.
    #[arg(long, env = "RECRAWL_BROKERS")]
    pub brokers: Option<String>,
    /// Prefix of every topic name.
    #[arg(long, env = "RECRAWL_TOPIC_PREFIX", default_value = recrawl_schemas::topics::DEFAULT_TOPIC_PREFIX)]
    pub topic_prefix: String,
    /// librdkafka property for every client, key=value (TLS, SASL for an existing Kafka).
    #[arg(long = "kafka-option", env = "RECRAWL_KAFKA_OPTIONS", value_delimiter = ';', value_parser = parse_kafka_option)]
    pub kafka_options: Vec<(String, String)>,
    /// Periods to run.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub periods: u64,
    /// Length of a period, milliseconds.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(200..))]
    pub period_ms: u64,
    /// Ordinary pages on the demo website (plus a home page and one always-failing page).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..10_000))]
    pub pages: u64,
    /// m: picks per period.
    #[arg(long, default_value_t = 8)]
    pub picks_per_period: usize,
    /// Directory for the stages' logs (default: a new temporary directory, kept).
    #[arg(long)]
    pub log_dir: Option<PathBuf>,
}

struct StageProcess {
    name: &'static str,
    child: Child,
    http: SocketAddr,
}

/// Runs the demo, printing progress to stdout.
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    // The mock cluster is !Send; it lives on this task for the whole run.
    let mock = match &args.brokers {
        Some(_) => None,
        None => Some(MockCluster::new(1).context("starting the embedded Kafka broker")?),
    };
    let brokers = match (&args.brokers, &mock) {
        (Some(brokers), _) => brokers.clone(),
        (None, Some(mock)) => mock.bootstrap_servers(),
        (None, None) => bail!("no broker"),
    };
    println!("recrawl demo: Kafka at {brokers}{}", if mock.is_some() { " (embedded)" } else { "" });
    let kafka = KafkaArgs {
        brokers: brokers.clone(),
        topic_prefix: args.topic_prefix.clone(),
        group_id: None,
        kafka_options: args.kafka_options.clone(),
        compression: Compression::Lz4,
        batch_size: 500,
        batch_linger_ms: 5,
        drain_timeout_ms: 10_000,
        restore_settle_ms: 250,
    };
    let catalogue = TopicCatalogue::builtin();
    let created = match &mock {
        Some(mock) => create_topics_on_mock(mock, &catalogue, &kafka.topics())?,
        None => create_topics(&kafka, &catalogue, None).await.context("creating topics")?.len(),
    };
    println!("topics: {created} ready under prefix {:?}", args.topic_prefix);

    let site = DemoSite::start(SiteConfig {
        pages: args.pages as usize,
        change_every: vec![1, 2, 3, 5, 0],
        failing_pages: 1,
        links_per_page: 3,
    })
    .await
    .context("starting the demo website")?;
    println!("website: {} ({} pages, one always failing)", site.home_url(), args.pages + 2);

    let log_dir = match &args.log_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("--log-dir {}", dir.display()))?;
            dir.clone()
        }
        None => tempfile::Builder::new().prefix("recrawl-demo-").tempdir()?.keep(),
    };
    let seeds = log_dir.join("seeds.txt");
    std::fs::write(&seeds, format!("{}\n", site.home_url()))?;

    // Period 0 starts once the stages have had time to join their groups.
    let epoch_unix_ms = unix_ms() + 5_000;
    let mut processes = Vec::new();
    for name in STAGES {
        let mut extra: Vec<String> = Vec::new();
        if name == "fetch" {
            // The demo site is on loopback, which the fetcher refuses unless allowed; it is
            // one host serving every pick, so it gets no politeness delay.
            extra.extend(["--allow-address", "127.0.0.1", "--min-host-delay-ms", "0"].map(String::from));
        }
        if name == "scheduler" {
            extra.extend([
                "--period-ms".into(),
                args.period_ms.to_string(),
                "--epoch-unix-ms".into(),
                epoch_unix_ms.to_string(),
                "--picks-per-period".into(),
                args.picks_per_period.to_string(),
                "--seeds".into(),
                seeds.display().to_string(),
            ]);
        }
        processes.push(spawn_stage(name, &kafka, &extra, &log_dir)?);
    }
    println!("stages: {} (logs in {})", describe(&processes), log_dir.display());

    let result = watch(&args, &kafka, &mut processes, epoch_unix_ms).await;
    let stage_exits = stop(&mut processes).await;
    site.shutdown();
    drop(mock);
    let (tally, interrupted) = result?;

    let totals = tally.totals();
    let exits: Vec<String> = stage_exits
        .iter()
        .map(|(name, code)| format!("{name} {}", code.map_or("killed".to_owned(), |c| format!("exit {c}"))))
        .collect();
    println!(
        "summary: {} periods{}, {} picks, {} fetched, {} failed, {} changes, mean change degree {}; {} dead letters; stages stopped: {}; logs in {}",
        tally.periods.len().min(args.periods as usize),
        if interrupted { " (interrupted)" } else { "" },
        totals.picks,
        totals.fetched,
        totals.failed,
        totals.changes,
        format_degree(totals.mean_degree()),
        tally.dead_letters,
        exits.join(", "),
        log_dir.display(),
    );
    if stage_exits.iter().any(|(_, code)| *code != Some(0)) {
        bail!("a stage did not stop cleanly; see its log in {}", log_dir.display());
    }
    Ok(())
}

/// librdkafka's mock broker has no CreateTopics handler, so the embedded broker gets its
/// topics through the mock API (compaction and retention do not apply there).
pub fn create_topics_on_mock<C: rdkafka::ClientContext>(
    mock: &MockCluster<'_, C>,
    catalogue: &TopicCatalogue,
    names: &TopicNames,
) -> anyhow::Result<usize> {
    for topic in &catalogue.topics {
        let name = names.name(&topic.name);
        mock.create_topic(&name, topic.partitions, 1).with_context(|| format!("creating topic {name}"))?;
    }
    Ok(catalogue.topics.len())
}

fn describe(processes: &[StageProcess]) -> String {
    processes
        .iter()
        .map(|p| format!("{} pid {} http://{}", p.name, p.child.id().unwrap_or(0), p.http))
        .collect::<Vec<_>>()
        .join(", ")
}

fn free_port() -> anyhow::Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// Starts a stage as a child process of this executable (`recrawl stage NAME`), which
/// runs the same entry point as the stage's own binary.
fn spawn_stage(
    name: &'static str,
    kafka: &KafkaArgs,
    extra: &[String],
    log_dir: &Path,
) -> anyhow::Result<StageProcess> {
    let exe = std::env::current_exe().context("locating the recrawl executable")?;
    let http = free_port()?;
    let log = std::fs::File::create(log_dir.join(format!("{name}.log")))?;
    let mut command = Command::new(exe);
    command
        .args(["stage", name, "--brokers", &kafka.brokers, "--topic-prefix", &kafka.topic_prefix])
        .args(["--http-listen", &http.to_string()])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true);
    for (key, value) in &kafka.kafka_options {
        command.arg("--kafka-option").arg(format!("{key}={value}"));
    }
    let child = command.spawn().with_context(|| format!("starting the {name} stage"))?;
    Ok(StageProcess { name, child, http })
}

async fn wait_ready(processes: &mut [StageProcess]) -> anyhow::Result<()> {
    let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build()?;
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    for process in processes.iter_mut() {
        let url = format!("http://{}/readyz", process.http);
        loop {
            if let Some(status) = process.child.try_wait()? {
                bail!("the {} stage exited during start-up ({status}); see its log", process.name);
            }
            let ready = client.get(&url).send().await.is_ok_and(|r| r.status().is_success());
            if ready {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                bail!("the {} stage was not ready within {READY_TIMEOUT:?}", process.name);
            }
            // Readiness is only observable by asking again.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Prints a line per period until `args.periods` have been shown; returns the tally and
/// whether the user interrupted.
async fn watch(
    args: &DemoArgs,
    kafka: &KafkaArgs,
    processes: &mut [StageProcess],
    epoch_unix_ms: i64,
) -> anyhow::Result<(Tally, bool)> {
    wait_ready(processes).await?;
    println!("all stages ready; period 0 starts in {} ms", (epoch_unix_ms - unix_ms()).max(0));
    let observer = Observer::new(kafka, &[FETCH, CHANGE_EVENTS, DEAD_LETTER]).await?;
    let mut tally = Tally::default();
    let mut next_to_print = 0u64;
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    println!(
        "{:>6} {:>6} {:>8} {:>7} {:>8} {:>12}",
        "period", "picks", "fetched", "failed", "changes", "mean degree"
    );
    let period_start = |p: u64| epoch_unix_ms + (p * args.period_ms) as i64;
    while next_to_print < args.periods {
        tokio::select! {
            observed = observer.next() => tally.record(&observed?),
            _ = tokio::signal::ctrl_c() => return Ok((tally, true)),
            _ = ticker.tick() => {
                for process in processes.iter_mut() {
                    if let Some(status) = process.child.try_wait()? {
                        bail!("the {} stage exited ({status}); see its log", process.name);
                    }
                }
                let now = unix_ms();
                let period = tally.periods.get(&next_to_print).cloned().unwrap_or_default();
                // A period is shown once it is over and every pick has its change event,
                // or a whole period later with what arrived.
                let over = now >= period_start(next_to_print + 1);
                let overdue = now >= period_start(next_to_print + 2);
                if (over && period.is_complete()) || overdue {
                    println!(
                        "{:>6} {:>6} {:>8} {:>7} {:>8} {:>12}{}",
                        next_to_print,
                        period.picks,
                        period.fetched,
                        period.failed,
                        period.changes,
                        format_degree(period.mean_degree()),
                        if period.fetched < period.picks { "  (results still arriving)" } else { "" },
                    );
                    next_to_print += 1;
                }
            }
        }
    }
    Ok((tally, false))
}

fn format_degree(degree: Option<f64>) -> String {
    degree.map_or_else(|| "-".to_owned(), |d| format!("{d:.3}"))
}

/// SIGTERM to every stage, then waits for each to drain and exit.
async fn stop(processes: &mut [StageProcess]) -> Vec<(&'static str, Option<i32>)> {
    for process in processes.iter() {
        if let Some(pid) = process.child.id() {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
        }
    }
    let mut exits = Vec::new();
    for process in processes.iter_mut() {
        let code = match tokio::time::timeout(STOP_TIMEOUT, process.child.wait()).await {
            Ok(Ok(status)) => status.code(),
            _ => {
                let _ = process.child.kill().await;
                None
            }
        };
        exits.push((process.name, code));
    }
    exits
}
