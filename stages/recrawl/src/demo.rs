//! `recrawl demo`: the whole pipeline on one machine. Starts an embedded Kafka broker
//! (librdkafka's mock cluster on 127.0.0.1) unless `--brokers` names one, creates the
//! topics, serves the simulated web on 127.0.0.1, launches the four stages as separate
//! processes, prints one line per period with the freshness of what the pipeline stored
//! against the web's ground truth, then stops every process with SIGTERM and compares
//! the run with uniform crawling of the same web.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use recrawl_common::admin::create_topics;
use recrawl_common::config::parse_kafka_option;
use recrawl_common::http::{free_local_port, lost_its_port, PORT_RETRIES};
use recrawl_common::service::{print_line, stop_signal, StdoutError};
use recrawl_common::{unix_ms, KafkaArgs};
use recrawl_schemas::topics::{CHANGE_EVENTS, DEAD_LETTER, FETCH};
use recrawl_schemas::{TopicCatalogue, TopicNames};
use tokio::process::{Child, Command};

use crate::observe::{Observed, Observer, PeriodTally, Tally};
use crate::sim::measure::{CopyTracker, Measures};
use crate::sim::parse_fraction;
use crate::sim::server::{site_host, PageTruth, SimWebArgs, SimWebServer};
use crate::sim::simulate::{run_policy, PolicyResult, Refusing, SimConfig, SimPolicy, SimulatedWeb};
use crate::sim::web::{Truth, Web, WebParams, WorldKind};
use recrawl_scheduler::policy::{Policy, DEFAULT_POLICY};

pub const STAGES: [&str; 4] = ["fetch", "diff", "estimator", "scheduler"];
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// The demo's politeness delay between requests to a host, for fetch and the scheduler's
/// host caps alike: its periods are seconds long.
const DEMO_HOST_DELAY_MS: u64 = 100;

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Use this Kafka (host:port[,host:port]) instead of the embedded broker.
    // The text is also `--help`'s, where brackets are the usual mark of an optional part.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, env = "RECRAWL_BROKERS")]
    pub brokers: Option<String>,
    /// Prefix of every topic name and consumer group (default: a new one per run,
    /// recrawl-demo-<unix ms>.).
    // `--help`'s text too, where angle brackets mark a value to fill in.
    #[allow(rustdoc::invalid_html_tags)]
    #[arg(long, env = "RECRAWL_TOPIC_PREFIX")]
    pub topic_prefix: Option<String>,
    /// librdkafka property for every client, key=value (TLS, SASL for an existing Kafka).
    #[arg(long = "kafka-option", env = "RECRAWL_KAFKA_OPTIONS", value_delimiter = ';', value_parser = parse_kafka_option)]
    pub kafka_options: Vec<(String, String)>,
    /// Periods to run.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..))]
    pub periods: u64,
    /// Length of a period, milliseconds.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(200..))]
    pub period_ms: u64,
    /// Sites of the simulated web.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..1000))]
    pub sites: u32,
    /// Pages per site.
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..10_000))]
    pub pages_per_site: u32,
    /// Median changes per period of a page (rates are heavy-tailed around it).
    #[arg(long, default_value_t = 0.2, value_parser = crate::sim::parse_positive)]
    pub median_change_rate: f64,
    /// How the simulated web's pages change: web, periodic, bursty, drifting,
    /// heavy-tailed or mixed (`docs/algorithms/worlds.md`).
    #[arg(long, value_enum, default_value_t = WorldKind::Web)]
    pub world: WorldKind,
    /// Share of the simulated sites with a sitemap, named in robots.txt.
    #[arg(long, default_value_t = 0.0, value_parser = parse_fraction)]
    pub sitemaps: f64,
    /// Share of a sitemap site's pages that only its sitemap names.
    #[arg(long, default_value_t = 0.0, value_parser = parse_fraction)]
    pub sitemap_only_share: f64,
    /// Share of the simulated sites with an RSS feed of their latest changed pages, named
    /// in each page's head.
    #[arg(long, default_value_t = 0.0, value_parser = parse_fraction)]
    pub feeds: f64,
    /// Whether requests fail as the estimator paper's Table 1 says (default: on the `web`
    /// world only).
    #[arg(long, action = clap::ArgAction::Set)]
    pub failures: Option<bool>,
    /// m: picks per period (default: a fifth of the pages).
    #[arg(long)]
    pub picks_per_period: Option<usize>,
    /// Seed of the simulated web.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The URLs the crawl starts from: every page's (as a URL list gives them; then the
    /// pipeline knows what the uniform crawl it is compared with knows), or the sites' home
    /// pages (the rest is found by following links).
    #[arg(long, value_enum, default_value_t = DemoSeeds::All)]
    pub seeds: DemoSeeds,
    /// The scheduler's policy.
    #[arg(long, value_enum, default_value_t = DEFAULT_POLICY)]
    pub policy: Policy,
    /// Directory for the stages' logs (default: a new temporary directory, kept).
    #[arg(long)]
    pub log_dir: Option<PathBuf>,
}

/// What the crawl knows at the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoSeeds {
    /// Every page's URL.
    All,
    /// Each site's home page.
    Home,
}

struct StageProcess {
    name: &'static str,
    child: Child,
    http: SocketAddr,
    launch: Launch,
}

/// How a stage is started, so it can be started again on another port: a port found
/// free can be taken (by any connection's ephemeral port) before the stage binds it.
struct Launch {
    args: Vec<String>,
    /// `RECRAWL_KAFKA_OPTIONS`, if any.
    kafka_options: Option<String>,
    log: PathBuf,
}

impl Launch {
    fn start(&self, name: &str, http: SocketAddr) -> anyhow::Result<Child> {
        let exe = std::env::current_exe().context("locating the recrawl executable")?;
        let log = std::fs::File::create(&self.log)?;
        let mut command = Command::new(exe);
        command
            .args(&self.args)
            .args(["--http-listen", &http.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        if let Some(options) = &self.kafka_options {
            command.env("RECRAWL_KAFKA_OPTIONS", options);
        }
        command.spawn().with_context(|| format!("starting the {name} stage"))
    }

    /// Whether the stage's start-up failed on its HTTP port being taken.
    fn lost_its_port(&self) -> bool {
        std::fs::read_to_string(&self.log).is_ok_and(|log| lost_its_port(&log))
    }
}

/// Runs the demo, printing progress to stdout.
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    // From here on SIGTERM and SIGINT stop the demo the same way: the stages are sent
    // SIGTERM and waited for, never left running.
    let stopped = stop_signal()?;
    tokio::pin!(stopped);
    // The mock cluster is !Send; it lives on this task for the whole run.
    let (mock, brokers) = broker(&args)?;
    print_line(format_args!(
        "recrawl demo: Kafka at {brokers}{}",
        if mock.is_some() { " (embedded)" } else { "" }
    ))?;
    // A run of its own: earlier runs' topics and consumer groups on the same cluster stay
    // out of it.
    let topic_prefix = args.topic_prefix.clone().unwrap_or_else(|| format!("recrawl-demo-{}.", unix_ms()));
    let kafka = KafkaArgs::with_defaults(&brokers, &topic_prefix, args.kafka_options.clone())?;
    let catalogue = TopicCatalogue::builtin();
    let created = match &mock {
        Some(mock) => create_topics_on_mock(mock, &catalogue, &kafka.cluster.topics())?,
        None => create_topics(&kafka.cluster, &catalogue, None).await.context("creating topics")?.len(),
    };
    print_line(format_args!("topics: {created} ready under prefix {topic_prefix:?}"))?;

    let log_dir = log_dir(&args)?;
    let joining = std::time::Instant::now();
    let mut processes = spawn_crawl_stages(&args, &kafka, &log_dir)?;
    tokio::select! {
        ready = wait_ready(&mut processes) => ready?,
        signal = stopped.as_mut() => {
            stop(&mut processes).await;
            bail!("{signal} before period 0: the stages were stopped");
        }
    }
    let joined = joining.elapsed();
    let lead = (joined * 3).max(Duration::from_secs(5));
    let epoch_unix_ms = unix_ms() + i64::try_from(lead.as_millis()).unwrap_or(i64::MAX);

    let simweb = SimWebServer::start(&web_args(&args, epoch_unix_ms, &log_dir)?)
        .await
        .context("starting the simulated web")?;
    let pages = simweb.web().len();
    let picks_per_period = args.picks_per_period.unwrap_or(pages.div_ceil(5));
    let seeds = log_dir.join("seeds.txt");
    let seed_urls = match args.seeds {
        DemoSeeds::All => (0..simweb.web().len())
            .filter_map(|page| u32::try_from(page).ok())
            .map(|page| simweb.url(page))
            .collect(),
        DemoSeeds::Home => simweb.home_urls(),
    };
    std::fs::write(&seeds, seed_urls.join("\n") + "\n")?;
    let scheduler_flags = scheduler_flags(&args, epoch_unix_ms, picks_per_period, &seeds);
    processes.push(spawn_stage("scheduler", &kafka, &scheduler_flags, &log_dir)?);
    let announced = print_line(format_args!(
        "simulated web: {} sites × {} pages on http://{} (truth at /_sim/truth, log {})",
        args.sites,
        args.pages_per_site,
        simweb.addr(),
        log_dir.join("truth.jsonl").display()
    ))
    .and_then(|()| {
        print_line(format_args!("stages: {} (logs in {})", describe(&processes), log_dir.display()))
    });

    // Whatever ends the run (a closed stdout too), the stages are stopped and waited for.
    let result = match announced {
        Ok(()) => watch(&args, &kafka, &mut processes, epoch_unix_ms, &simweb, stopped).await,
        Err(closed) => Err(closed.into()),
    };
    let stage_exits = stop(&mut processes).await;
    let (tally, totals, stored, periods_run) = result?;
    let interrupted = periods_run < args.periods;
    // The periods the run covered, whatever arrived in them.
    let horizon = periods_run;
    let truth = simweb.truth(horizon as f64);
    let pipeline = time_averaged(&truth, &stored, horizon as f64);
    let fetch_window = fetch_window(&stored);
    let uniform = simulated(simweb.web(), horizon, picks_per_period, Policy::Uniform, fetch_window);
    let simulated_policy = simulated(simweb.web(), horizon, picks_per_period, args.policy, fetch_window);
    simweb.shutdown()?;
    drop(mock);

    let printed = Summary {
        horizon,
        interrupted,
        totals: &totals,
        dead_letters: tally.dead_letters,
        stage_exits: &stage_exits,
        log_dir: &log_dir,
        pages,
        pipeline: &pipeline,
        uniform: &uniform,
        simulated_policy: &simulated_policy,
        fetch_window,
        picks_per_period,
        seeds: args.seeds,
        policy: args.policy,
    }
    .print();
    if stage_exits.iter().any(|(_, code)| *code != Some(0)) {
        bail!("a stage did not stop cleanly; see its log in {}", log_dir.display());
    }
    Ok(printed?)
}

/// The demo's last lines: what flowed, how the stages stopped, and the freshness the
/// pipeline reached against uniform crawling of the same web.
struct Summary<'a> {
    horizon: u64,
    interrupted: bool,
    totals: &'a PeriodTally,
    dead_letters: u64,
    stage_exits: &'a [(&'static str, Option<i32>)],
    log_dir: &'a Path,
    pages: usize,
    pipeline: &'a Measures,
    uniform: &'a PolicyResult,
    /// The pipeline's policy in the simulator, on the same web and budget.
    simulated_policy: &'a PolicyResult,
    /// The share of each period the simulated crawls spread their fetches over.
    fetch_window: f64,
    picks_per_period: usize,
    seeds: DemoSeeds,
    policy: Policy,
}

impl Summary<'_> {
    fn print(&self) -> Result<(), StdoutError> {
        let Self { horizon, totals, pages, pipeline, uniform, picks_per_period, .. } = self;
        let knew = match self.seeds {
            DemoSeeds::All => "both knew every URL and stored nothing at the start",
            DemoSeeds::Home => "the pipeline knew the home pages and found the rest by their links, uniform crawling knew every URL; neither stored anything at the start",
        };
        let ahead = 100.0 * (pipeline.freshness() / uniform.freshness - 1.0);
        let exits: Vec<String> = self
            .stage_exits
            .iter()
            .map(|(name, code)| {
                format!("{name} {}", code.map_or("killed".to_owned(), |c| format!("exit {c}")))
            })
            .collect();
        print_line(format_args!(
            "summary: {horizon} periods{}, {} picks, {} fetched, {} failed, {} changes, mean change degree {}; {} dead letters; stages stopped: {}; logs in {}",
            if self.interrupted { " (interrupted)" } else { "" },
            totals.picks,
            totals.fetched,
            totals.failed,
            totals.changes,
            format_degree(totals.mean_degree()),
            self.dead_letters,
            exits.join(", "),
            self.log_dir.display(),
        ))?;
        print_line(format_args!(
            "freshness against the truth, averaged over the run and all {pages} pages (a page counts as stale until first stored; {knew}): pipeline (policy {}) {:.3} (age {:.2} periods, harmonic cost {:.2}) with {} requests; uniform crawling of the same web at {picks_per_period} picks a period (simulated, its fetches spread over the first {:.0} % of each period as the pipeline's fell) {:.3} (age {:.2}, harmonic cost {:.2}) with {} requests; the pipeline is {}; the pipeline's policy simulated likewise {:.3}",
            self.policy.as_str(),
            pipeline.freshness(),
            pipeline.age(),
            pipeline.harmonic_cost(),
            totals.fetched,
            100.0 * self.fetch_window,
            uniform.freshness,
            uniform.age,
            uniform.harmonic_cost,
            uniform.requests,
            if ahead.is_finite() {
                format!("{:.1} % {}", ahead.abs(), if ahead >= 0.0 { "fresher" } else { "less fresh" })
            } else {
                "cannot be compared".to_owned()
            },
            self.simulated_policy.freshness,
        ))
    }
}

/// The broker: the one `--brokers` names, or an embedded one (returned, to keep it alive).
fn broker(args: &DemoArgs) -> anyhow::Result<(Option<MockCluster<'static, DefaultProducerContext>>, String)> {
    match &args.brokers {
        Some(brokers) => Ok((None, brokers.clone())),
        None => {
            let mock = MockCluster::new(1).context("starting the embedded Kafka broker")?;
            let brokers = mock.bootstrap_servers();
            Ok((Some(mock), brokers))
        }
    }
}

/// `--log-dir`, created, or a new temporary folder kept after the run.
fn log_dir(args: &DemoArgs) -> anyhow::Result<PathBuf> {
    match &args.log_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("--log-dir {}", dir.display()))?;
            Ok(dir.clone())
        }
        None => Ok(tempfile::Builder::new().prefix("recrawl-demo-").tempdir()?.keep()),
    }
}

/// fetch, diff and estimator, started first: period 0 is set once they own their
/// partitions, far enough ahead for the scheduler to join as they did.
fn spawn_crawl_stages(
    args: &DemoArgs,
    kafka: &KafkaArgs,
    log_dir: &Path,
) -> anyhow::Result<Vec<StageProcess>> {
    let mut processes = Vec::new();
    for name in ["fetch", "diff", "estimator"] {
        let mut extra: Vec<String> = Vec::new();
        if name == "estimator" {
            // Its rates are per period, as the scheduler plans; `Last-Modified` dates are times.
            extra.extend(["--period-ms".into(), args.period_ms.to_string()]);
        }
        if name == "fetch" {
            // The simulated web is on loopback, which the fetcher refuses unless allowed;
            // its host names resolve there. Pages that time out hold their requests for
            // 30 s: a 1 s timeout keeps a period's batch short.
            extra.extend(
                ["--allow-address", "127.0.0.1", "--request-timeout-ms", "1000", "--min-host-delay-ms"]
                    .map(String::from),
            );
            extra.push(DEMO_HOST_DELAY_MS.to_string());
            for site in 0..args.sites {
                extra.push("--resolve".into());
                extra.push(format!("{}=127.0.0.1", site_host(site)));
            }
        }
        processes.push(spawn_stage(name, kafka, &extra, log_dir)?);
    }
    Ok(processes)
}

/// The simulated web the demo crawls, its period 0 at `epoch_unix_ms`.
fn web_args(args: &DemoArgs, epoch_unix_ms: i64, log_dir: &Path) -> anyhow::Result<SimWebArgs> {
    Ok(SimWebArgs {
        seed: args.seed,
        sites: args.sites,
        pages_per_site: args.pages_per_site,
        period_ms: args.period_ms,
        period_minutes: 60.0,
        median_change_rate: args.median_change_rate,
        korean_share: 0.3,
        epoch_unix_ms: Some(epoch_unix_ms),
        latency_scale: 0.25,
        hold_ms: 30_000,
        truthful_dates_share: WebParams::default().truthful_dates_share,
        response_dates_share: WebParams::default().response_dates_share,
        stuck_dates_share: WebParams::default().stuck_dates_share,
        world: args.world,
        sitemaps: args.sitemaps,
        sitemap_only_share: args.sitemap_only_share,
        feeds: args.feeds,
        failures: args.failures,
        run_periods: args.periods as f64,
        listen: "127.0.0.1:0".parse()?,
        truth_log: Some(log_dir.join("truth.jsonl")),
    })
}

fn scheduler_flags(
    args: &DemoArgs,
    epoch_unix_ms: i64,
    picks_per_period: usize,
    seeds: &Path,
) -> [String; 14] {
    [
        "--period-ms".into(),
        args.period_ms.to_string(),
        "--epoch-unix-ms".into(),
        epoch_unix_ms.to_string(),
        "--picks-per-period".into(),
        picks_per_period.to_string(),
        "--seeds".into(),
        seeds.display().to_string(),
        "--discovery-share".into(),
        match args.seeds {
            // The frontier holds only the seeds, and a page never stored is surely stale:
            // every pick may go to them until each was fetched once.
            DemoSeeds::All => "1".into(),
            // The run is short: half the picks go to discovering the web.
            DemoSeeds::Home => "0.5".into(),
        },
        "--policy".into(),
        args.policy.as_str().into(),
        // As the fetch stage's below: the host caps follow it.
        "--min-host-delay-ms".into(),
        DEMO_HOST_DELAY_MS.to_string(),
    ]
}

/// The share of a period, from its start, over which evenly spread fetches land on
/// average where the pipeline's did: twice their mean offset into their period. The
/// pipeline fetches a period's picks as soon as it can, so a simulation spreading them
/// over the whole period would store each page later and look less fresh.
fn fetch_window(stored: &Stored) -> f64 {
    let (sum, count) =
        stored.values().flatten().fold((0.0, 0u32), |(sum, count), t| (sum + t.fract(), count + 1));
    if count == 0 {
        return 1.0;
    }
    (2.0 * sum / f64::from(count)).clamp(f64::EPSILON, 1.0)
}

/// The simulated web as a crawler that obeys robots.txt meets it, as the pipeline's fetch
/// does: a page its site disallows never downloads (a pick of it is spent all the same),
/// so the simulated crawls the pipeline is compared with keep no copy of it either.
fn polite(web: &Web, horizon: u64) -> Refusing<SimulatedWeb<'_>, impl Fn(u32, u64) -> bool + Sync + '_> {
    let world = SimulatedWeb { truth: Truth::of_web(web, horizon as f64), web };
    Refusing { world, refuses: move |page: u32, _period: u64| web.page(page).private }
}

/// `policy` run by the simulator over the same web at the same budget, every URL known
/// and nothing stored at the start, its fetches within the first `fetch_window` of each
/// period: what the pipeline's freshness is compared with.
fn simulated(
    web: &Web,
    horizon: u64,
    picks_per_period: usize,
    policy: Policy,
    fetch_window: f64,
) -> PolicyResult {
    let world = polite(web, horizon);
    run_policy(
        &world,
        SimPolicy::Scheduler(policy),
        &SimConfig {
            periods: horizon,
            budget: picks_per_period as f64 / web.len() as f64,
            cold_start: true,
            threads: 1,
            fetch_window,
            ..SimConfig::default()
        },
    )
}

/// The times (periods) at which the pipeline stored each page, from its change events.
type Stored = HashMap<u32, Vec<f64>>;

/// Share of the web's pages whose stored copy is the live version at `at`.
fn freshness_at(truth: &[PageTruth], stored: &Stored, at: f64) -> f64 {
    let fresh = truth
        .iter()
        .filter(|page| {
            let last = stored
                .get(&page.page)
                .and_then(|times| times.iter().copied().filter(|&t| t <= at).reduce(f64::max));
            last.is_some_and(|last| !page.changes.iter().any(|&t| t > last && t <= at))
        })
        .count();
    fresh as f64 / truth.len().max(1) as f64
}

/// The measures of what the pipeline stored over [0, horizon), each page stale until its
/// first download.
fn time_averaged(truth: &[PageTruth], stored: &Stored, horizon: f64) -> Measures {
    let mut measures = Measures::default();
    for page in truth {
        let mut tracker = CopyTracker::new();
        tracker.changed(0.0, &mut measures);
        let mut downloads: Vec<f64> = stored.get(&page.page).cloned().unwrap_or_default();
        downloads.retain(|&t| t < horizon);
        downloads.sort_by(f64::total_cmp);
        let mut changes = page.changes.iter().copied().filter(|&t| t < horizon).peekable();
        for at in downloads {
            while let Some(change) = changes.next_if(|&t| t <= at) {
                tracker.changed(change, &mut measures);
            }
            tracker.fetched(at, true, &mut measures);
        }
        changes.for_each(|change| tracker.changed(change, &mut measures));
        tracker.finish(horizon, &mut measures);
    }
    measures
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

/// Starts a stage as a child process of this executable (`recrawl stage NAME`), which
/// runs the same entry point as the stage's own binary.
fn spawn_stage(
    name: &'static str,
    kafka: &KafkaArgs,
    extra: &[String],
    log_dir: &Path,
) -> anyhow::Result<StageProcess> {
    let mut args: Vec<String> = [
        "stage",
        name,
        "--brokers",
        &kafka.cluster.brokers,
        "--topic-prefix",
        &kafka.cluster.topic_prefix,
        "--instance-id",
        &format!("demo-{name}"),
        "--parent-pid",
        &std::process::id().to_string(),
    ]
    .map(String::from)
    .into();
    args.extend_from_slice(extra);
    // Through the environment, not the command line, which any local user can read
    // (ps): the options may hold a password.
    let kafka_options = (!kafka.cluster.kafka_options.is_empty()).then(|| {
        let options: Vec<String> =
            kafka.cluster.kafka_options.iter().map(|(key, value)| format!("{key}={value}")).collect();
        options.join(";")
    });
    let launch = Launch { args, kafka_options, log: log_dir.join(format!("{name}.log")) };
    let http = free_local_port()?;
    let child = launch.start(name, http)?;
    Ok(StageProcess { name, child, http, launch })
}

async fn wait_ready(processes: &mut [StageProcess]) -> anyhow::Result<()> {
    let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build()?;
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    for process in processes.iter_mut() {
        let mut port_retries = PORT_RETRIES;
        loop {
            if let Some(status) = process.child.try_wait()? {
                if process.launch.lost_its_port() && port_retries > 0 {
                    port_retries -= 1;
                    process.http = free_local_port()?;
                    process.child = process.launch.start(process.name, process.http)?;
                    continue;
                }
                bail!("the {} stage exited during start-up ({status}); see its log", process.name);
            }
            let url = format!("http://{}/readyz", process.http);
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

/// Prints a line per period until `args.periods` have been shown; returns the tally, the
/// sum of the rows shown, when the pipeline stored each page, and the periods shown (fewer
/// if the user interrupted).
async fn watch(
    args: &DemoArgs,
    kafka: &KafkaArgs,
    processes: &mut [StageProcess],
    epoch_unix_ms: i64,
    simweb: &SimWebServer,
    mut stopped: Pin<&mut impl Future<Output = &'static str>>,
) -> anyhow::Result<(Tally, PeriodTally, Stored, u64)> {
    tokio::select! {
        ready = wait_ready(processes) => ready?,
        signal = stopped.as_mut() => bail!("{signal} before period 0"),
    }
    let lead_ms = epoch_unix_ms - unix_ms();
    if lead_ms <= 0 {
        bail!(
            "the scheduler owned its partitions only {} ms after period 0 began; this broker assigns partitions slowly: run again",
            -lead_ms
        );
    }
    print_line(format_args!("all stages own their partitions; period 0 starts in {lead_ms} ms"))?;
    let observer = Observer::new(&kafka.cluster, &[FETCH.name, CHANGE_EVENTS.name, DEAD_LETTER]).await?;
    let mut tally = Tally::default();
    // What the table showed, row by row: the summary adds up these rows, not the picks
    // published while the stages stopped or results that arrived after their row.
    let mut shown = PeriodTally::default();
    let mut stored = Stored::new();
    let mut next_to_print = 0u64;
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    print_line(format_args!(
        "{:>6} {:>6} {:>8} {:>7} {:>8} {:>12} {:>7} {:>10}",
        "period", "picks", "fetched", "failed", "changes", "mean degree", "stored", "freshness"
    ))?;
    let period_start = |p: u64| epoch_unix_ms + (p * args.period_ms) as i64;
    while next_to_print < args.periods {
        tokio::select! {
            observed = observer.next() => {
                let observed = observed?;
                if let Observed::Change(event) = &observed {
                    if let (true, Some(page)) = (event.downloaded, simweb.page_of(&event.page.url)) {
                        stored.entry(page).or_default().push(simweb.period_at(event.fetched_at_ms));
                    }
                }
                tally.record(&observed);
            }
            _ = stopped.as_mut() => return Ok((tally, shown, stored, next_to_print)),
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
                    let end = (next_to_print + 1) as f64;
                    let freshness = freshness_at(&simweb.truth(end), &stored, end);
                    print_line(format_args!(
                        "{:>6} {:>6} {:>8} {:>7} {:>8} {:>12} {:>7} {:>10.3}{}",
                        next_to_print,
                        period.picks,
                        period.fetched,
                        period.failed,
                        period.changes,
                        format_degree(period.mean_degree()),
                        stored.len(),
                        freshness,
                        if period.fetched < period.picks { "  (results still arriving)" } else { "" },
                    ))?;
                    shown.add(&period);
                    next_to_print += 1;
                }
            }
        }
    }
    Ok((tally, shown, stored, next_to_print))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::simulate::World;

    #[tokio::test]
    async fn a_stage_that_lost_its_port_is_told_from_one_that_failed_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let launch = Launch { args: Vec::new(), kafka_options: None, log: dir.path().join("stage.log") };
        assert!(!launch.lost_its_port(), "no log yet");
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let metrics = recrawl_common::metrics::StageMetrics::new("diff");
        let error = recrawl_common::http::serve(
            taken.local_addr().unwrap(),
            metrics,
            recrawl_common::http::Health::default(),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap_err();
        std::fs::write(&launch.log, format!("Error: {error}\n")).unwrap();
        assert!(launch.lost_its_port());
        std::fs::write(&launch.log, "Error: --brokers: no broker answered\n").unwrap();
        assert!(!launch.lost_its_port());
    }

    /// The simulated crawls the pipeline is compared with store no page robots.txt
    /// denies: the pipeline's fetch never can.
    #[test]
    fn the_comparison_crawls_keep_no_copy_of_a_page_robots_txt_denies() {
        let web = Web::generate(WebParams {
            sites: 10,
            pages_per_site: 50,
            failures: false,
            ..WebParams::default()
        });
        let private: Vec<u32> = (0..web.len() as u32).filter(|&page| web.page(page).private).collect();
        assert!(!private.is_empty(), "the web has pages its robots.txt denies");
        let polite = polite(&web, 10);
        assert!(private.iter().all(|&page| (0..10).all(|period| !polite.downloads(page, period))));
        let open = (0..web.len() as u32).find(|page| !private.contains(page)).expect("a public page");
        assert!(polite.downloads(open, 0), "without failures, a public page downloads");
        let result = simulated(&web, 10, 100, Policy::Uniform, 1.0);
        let everywhere = run_policy(
            &SimulatedWeb { truth: Truth::of_web(&web, 10.0), web: &web },
            SimPolicy::Scheduler(Policy::Uniform),
            &SimConfig { periods: 10, budget: 0.2, cold_start: true, threads: 1, ..SimConfig::default() },
        );
        assert!(
            result.freshness < everywhere.freshness,
            "{} against {}",
            result.freshness,
            everywhere.freshness
        );
    }

    #[test]
    fn the_fetch_window_puts_the_mean_fetch_where_the_pipelines_was() {
        let stored = Stored::from([(0, vec![0.1, 1.3]), (1, vec![2.2])]);
        assert!((fetch_window(&stored) - 0.4).abs() < 1e-12, "{}", fetch_window(&stored));
        assert_eq!(fetch_window(&Stored::new()), 1.0, "nothing fetched: the whole period");
        assert_eq!(fetch_window(&Stored::from([(0, vec![0.9, 1.8])])), 1.0, "at most the whole period");
    }
}
