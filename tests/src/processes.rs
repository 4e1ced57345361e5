//! The four stage binaries as processes, started as the README's "Pointing it at an
//! existing Kafka" shows (`recrawl-fetch --brokers … --http-listen …`), and the simulated
//! web they crawl: the harness of the tests that run the binaries (chaos, operate).

use std::io::{Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use recrawl::sim::server::{site_host, SimWebArgs, SimWebServer};
use recrawl::sim::web::{WebParams, WorldKind};
use recrawl_common::unix_ms;

use crate::binary;
use crate::hostile::HOSTILITIES;

pub const SITES: u32 = 3;
pub const PERIOD_MS: u64 = 1500;

#[derive(Debug)]
pub struct Stage {
    pub name: &'static str,
    pub args: Vec<String>,
    pub http: SocketAddr,
    pub child: Child,
    /// What runs: the stage's binary, or a launcher given it as an argument.
    program: String,
    /// Where this process's output begins in the stage's log, which its restarts share.
    log_from: u64,
}

pub fn free_port() -> SocketAddr {
    recrawl_common::http::free_local_port().expect("free port")
}

impl Stage {
    pub fn start(name: &'static str, args: Vec<String>) -> Self {
        Self::start_on(name, args, free_port())
    }

    /// Starts the stage with at most `descriptors` file descriptors, soft and hard, as
    /// `ulimit -n` gives (util-linux's `prlimit` sets them and runs it in its place).
    pub fn start_limited(name: &'static str, args: Vec<String>, descriptors: u64) -> Self {
        let mut limited = vec![format!("--nofile={descriptors}:{descriptors}"), "--".to_owned()];
        limited.push(binary(&format!("recrawl-{name}")).display().to_string());
        limited.extend(args);
        let (http, program) = (free_port(), "prlimit".to_owned());
        let (child, log_from) = spawn_program(&program, name, &limited, http);
        Self { name, args: limited, http, child, program, log_from }
    }

    /// Starts the stage serving HTTP on `http`; [`Stage::ready`] starts it again on
    /// another port if that one was taken.
    pub fn start_on(name: &'static str, args: Vec<String>, http: SocketAddr) -> Self {
        let program = binary(&format!("recrawl-{name}")).display().to_string();
        let (child, log_from) = spawn_program(&program, name, &args, http);
        Self { name, args, http, child, program, log_from }
    }

    pub fn restart(&mut self) {
        (self.child, self.log_from) = spawn_program(&self.program, self.name, &self.args, self.http);
    }

    /// Whether the process exited because its port, found free and let go, was taken by
    /// another socket before it bound it.
    fn lost_its_port(&self) -> bool {
        self.output().is_ok_and(|output| recrawl_common::http::lost_its_port(&output))
    }

    /// What this process has written to the stage's log (which other tests' instances of
    /// the stage may share).
    fn output(&self) -> std::io::Result<String> {
        let mut output = String::new();
        let mut log = std::fs::File::open(log_path(self.name))?;
        log.seek(SeekFrom::Start(self.log_from))?;
        log.read_to_string(&mut output)?;
        Ok(output)
    }

    /// The last `count` warnings and errors in `Stage::output`, for a failure's report.
    pub fn warnings(&self, count: usize) -> Vec<String> {
        let output = self.output().unwrap_or_else(|error| format!("- ERROR reading the log: {error}"));
        last_warnings(&output, count)
    }

    /// One more instance of this stage, in the same group under instance id `ID-n`.
    pub fn another(&self, n: usize) -> Self {
        let mut args = self.args.clone();
        let id = args.iter().position(|a| a == "--instance-id").map(|i| i + 1).expect("an instance id");
        args[id] = format!("{}-{n}", args[id]);
        Self::start(self.name, args)
    }

    /// Waits until `/readyz` answers 200: the stage owns its partitions, state restored.
    pub async fn ready(&mut self, client: &reqwest::Client) -> Duration {
        self.ready_within(client, Duration::from_secs(90)).await
    }

    pub async fn ready_within(&mut self, client: &reqwest::Client, limit: Duration) -> Duration {
        let started = Instant::now();
        let mut port_retries = recrawl_common::http::PORT_RETRIES;
        // Readiness is only observable by asking again.
        loop {
            if let Some(status) = self.child.try_wait().expect("status") {
                assert!(
                    port_retries > 0 && self.lost_its_port(),
                    "{} exited before it was ready: {status}",
                    self.name
                );
                port_retries -= 1;
                self.http = free_port();
                self.restart();
                continue;
            }
            let answer = client.get(format!("http://{}/readyz", self.http)).send().await;
            if answer.is_ok_and(|r| r.status().is_success()) {
                return started.elapsed();
            }
            assert!(started.elapsed() < limit, "{} not ready within {limit:?}", self.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The process's peak resident memory, from /proc.
    pub fn peak_memory_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    /// The process's resident memory now, from /proc.
    pub fn memory_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        status_kib(self.child.id(), field)
    }

    /// The input partitions this instance owns, from its gauges (one series per input
    /// topic); none while it does not answer (starting, or gone).
    pub async fn assigned_partitions(&self, client: &reqwest::Client) -> Option<i64> {
        let answer = client.get(format!("http://{}/metrics", self.http)).send().await.ok()?;
        let metrics = answer.text().await.ok()?;
        // `recrawl_assigned_partitions{stage="…",topic="…"} N`
        let series = metrics.lines().filter_map(|line| {
            let rest = line.strip_prefix("recrawl_assigned_partitions")?;
            rest.starts_with(['{', ' ']).then(|| rest.rsplit(' ').next()?.parse::<i64>().ok()).flatten()
        });
        series.reduce(|a, b| a + b).or(Some(0))
    }

    /// Assignments its consumer group has given it (`recrawl_group_assignments_total`);
    /// none while it does not answer.
    pub async fn group_assignments(&self, client: &reqwest::Client) -> Option<u64> {
        let answer = client.get(format!("http://{}/metrics", self.http)).send().await.ok()?;
        let metrics = answer.text().await.ok()?;
        metrics.lines().find_map(|line| {
            let rest = line.strip_prefix("recrawl_group_assignments_total")?;
            rest.starts_with(['{', ' ']).then(|| rest.rsplit(' ').next()?.parse().ok()).flatten()
        })
    }

    pub async fn metrics(&self, client: &reqwest::Client) -> String {
        client
            .get(format!("http://{}/metrics", self.http))
            .send()
            .await
            .expect("scrape")
            .text()
            .await
            .expect("text")
    }

    pub fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), signal).expect("signal");
    }

    /// SIGTERM, then the exit code once the stage has drained, committed and flushed.
    pub fn stop(mut self) -> Option<i32> {
        self.signal(Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("status") {
                return status.code();
            }
            assert!(Instant::now() < deadline, "{} did not exit within 30 s of SIGTERM", self.name);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A failing test does not leave its stages running.
impl Drop for Stage {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `NAME.log` in `RECRAWL_TEST_LOG_DIR` (or the system's temporary directory).
fn log_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("RECRAWL_TEST_LOG_DIR").map_or_else(std::env::temp_dir, Into::into);
    dir.join(format!("{name}.log"))
}

/// Starts `recrawl-NAME`, its output appended to its log: the process, and where its
/// output begins in the log.
/// `program` with `args` and the stage's `--http-listen`, its output in the stage's log.
fn spawn_program(program: &str, name: &str, args: &[String], http: SocketAddr) -> (Child, u64) {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log_path(name)).expect("stage log");
    let log_from = log.metadata().expect("stage log").len();
    let child = Command::new(program)
        .args(args)
        .args(["--http-listen", &http.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("stage binary starts");
    (child, log_from)
}

/// The four stages as processes, started as the README shows, and the simulated web they
/// crawl: fetch, diff and estimator first, then the web and the scheduler, whose period 0
/// starts 2 s after they are ready.
#[derive(Debug)]
pub struct Pipeline {
    pub stages: Vec<Stage>,
    pub web: SimWebServer,
    pub client: reqwest::Client,
    /// When period 0 starts, in Unix milliseconds.
    pub epoch: i64,
    pub _seeds: tempfile::TempDir,
}

pub async fn start_pipeline(flags: &[String], prefix: &str, seed: u64) -> Pipeline {
    let client =
        reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build().expect("client");
    let with = |name: &str, extra: &[String]| {
        let mut args = flags.to_vec();
        args.extend(["--instance-id".to_owned(), format!("{prefix}{name}")]);
        args.extend(extra.iter().cloned());
        args
    };
    let mut fetch_flags: Vec<String> =
        ["--allow-address", "127.0.0.1", "--min-host-delay-ms", "0", "--request-timeout-ms", "1000"]
            .map(String::from)
            .to_vec();
    let hosts = (0..SITES).map(site_host).chain(HOSTILITIES.iter().map(|h| h.host.to_owned()));
    for host in hosts {
        fetch_flags.extend(["--resolve".to_owned(), format!("{host}=127.0.0.1")]);
    }
    let mut stages = vec![
        Stage::start("fetch", with("fetch", &fetch_flags)),
        Stage::start("diff", with("diff", &[])),
        Stage::start("estimator", with("estimator", &["--period-ms".to_owned(), PERIOD_MS.to_string()])),
    ];
    for stage in &mut stages {
        stage.ready(&client).await;
    }
    let epoch = unix_ms() + 2_000;
    let web = SimWebServer::start(&SimWebArgs {
        seed,
        sites: SITES,
        pages_per_site: 6,
        period_ms: PERIOD_MS,
        period_minutes: 60.0,
        median_change_rate: 0.5,
        korean_share: 0.3,
        epoch_unix_ms: Some(epoch),
        latency_scale: 0.0,
        hold_ms: 500,
        truthful_dates_share: WebParams::default().truthful_dates_share,
        response_dates_share: WebParams::default().response_dates_share,
        stuck_dates_share: WebParams::default().stuck_dates_share,
        world: WorldKind::Web,
        sitemaps: 0.0,
        sitemap_only_share: 0.0,
        feeds: 0.0,
        failures: None,
        run_periods: WebParams::default().run_periods,
        listen: "127.0.0.1:0".parse().expect("address"),
        truth_log: None,
    })
    .await
    .expect("simulated web");
    let dir = tempfile::tempdir().expect("tempdir");
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.home_urls().join("\n")).expect("seeds");
    let scheduler_flags = [
        "--seeds".to_owned(),
        seeds.display().to_string(),
        "--period-ms".to_owned(),
        PERIOD_MS.to_string(),
        "--picks-per-period".to_owned(),
        "6".to_owned(),
        "--epoch-unix-ms".to_owned(),
        epoch.to_string(),
        "--policy".to_owned(),
        "uniform".to_owned(),
        // As fetch's: the hosts' picks follow its pace.
        "--min-host-delay-ms".to_owned(),
        "0".to_owned(),
    ];
    stages.push(Stage::start("scheduler", with("scheduler", &scheduler_flags)));
    stages[3].ready(&client).await;
    Pipeline { stages, web, client, epoch, _seeds: dir }
}

/// The last `count` lines of `output` logged at WARN or ERROR.
fn last_warnings(output: &str, count: usize) -> Vec<String> {
    let mut lines: Vec<String> = output
        .lines()
        // `<time> <LEVEL> <target>: <message>`, as the stages log for people.
        .filter(|line| matches!(line.split_whitespace().nth(1), Some("WARN" | "ERROR")))
        .map(str::to_owned)
        .collect();
    lines.drain(..lines.len().saturating_sub(count));
    lines
}

/// A field of `/proc/PID/status` in KiB (`field` with its colon, e.g. `VmHWM:`); 0 where
/// the process or the field is gone.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::last_warnings;

    #[test]
    fn a_report_keeps_the_last_warnings_and_errors() {
        let log = "t  INFO a: ready\nt  WARN a: one\nt ERROR a: two\nt  INFO a: WARN in a message\nt  WARN a: three\n";
        assert_eq!(last_warnings(log, 2), ["t ERROR a: two", "t  WARN a: three"]);
        assert_eq!(last_warnings(log, 10).len(), 3);
    }
}
