//! The four standalone binaries, started as the README's "Pointing it at an existing
//! Kafka" shows (`recrawl-fetch --brokers … --http-listen …`), against a broker and the
//! simulated web: they become ready, the crawl flows through every stage, counters are
//! exported from the start, a `kill -9`ed stage restarted under its instance id gets its
//! partitions back and goes on, and SIGTERM stops every one with exit 0.

use std::collections::HashSet;
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use recrawl::observe::{Observed, Observer};
use recrawl::sim::server::{site_host, SimWebArgs, SimWebServer};
use recrawl_common::{unix_ms, KafkaArgs};
use recrawl_e2e::{binary, kafka_flags, parse_args, unique_prefix, Broker};
use recrawl_schemas::topics::{CHANGE_EVENTS, ESTIMATES, FETCH};

const SITES: u32 = 3;
const PERIOD_MS: u64 = 1500;

struct Stage {
    name: &'static str,
    args: Vec<String>,
    http: SocketAddr,
    child: Child,
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port")
}

impl Stage {
    fn start(name: &'static str, args: Vec<String>) -> Self {
        let http = free_port();
        let child = spawn(name, &args, http);
        Self { name, args, http, child }
    }

    fn restart(&mut self) {
        self.child = spawn(self.name, &self.args, self.http);
    }

    /// Waits until `/readyz` answers 200: the stage owns its partitions, state restored.
    async fn ready(&mut self, client: &reqwest::Client) -> Duration {
        let started = Instant::now();
        // Readiness is only observable by asking again.
        loop {
            assert!(
                self.child.try_wait().expect("status").is_none(),
                "{} exited before it was ready",
                self.name
            );
            let answer = client.get(format!("http://{}/readyz", self.http)).send().await;
            if answer.is_ok_and(|r| r.status().is_success()) {
                return started.elapsed();
            }
            assert!(started.elapsed() < Duration::from_secs(90), "{} not ready within 90 s", self.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn metrics(&self, client: &reqwest::Client) -> String {
        client
            .get(format!("http://{}/metrics", self.http))
            .send()
            .await
            .expect("scrape")
            .text()
            .await
            .expect("text")
    }

    fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), signal).expect("signal");
    }

    /// SIGTERM, then the exit code once the stage has drained, committed and flushed.
    fn stop(mut self) -> Option<i32> {
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

fn spawn(name: &str, args: &[String], http: SocketAddr) -> Child {
    Command::new(binary(&format!("recrawl-{name}")))
        .args(args)
        .args(["--http-listen", &http.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("stage binary starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standalone_binaries_run_the_pipeline_and_restart_in_seconds() {
    let broker = Broker::start();
    let prefix = unique_prefix("binaries");
    let flags = kafka_flags(&broker.bootstrap(), &prefix);
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    let client =
        reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build().expect("client");

    let with = |name: &str, extra: &[String]| {
        let mut args = flags.clone();
        args.extend(["--instance-id".to_owned(), format!("{prefix}{name}")]);
        args.extend(extra.iter().cloned());
        args
    };
    let mut fetch_flags: Vec<String> =
        ["--allow-address", "127.0.0.1", "--min-host-delay-ms", "0", "--request-timeout-ms", "1000"]
            .map(String::from)
            .to_vec();
    for site in 0..SITES {
        fetch_flags.extend(["--resolve".to_owned(), format!("{}=127.0.0.1", site_host(site))]);
    }
    let mut stages = vec![
        Stage::start("fetch", with("fetch", &fetch_flags)),
        Stage::start("diff", with("diff", &[])),
        Stage::start("estimator", with("estimator", &[])),
    ];
    for stage in &mut stages {
        stage.ready(&client).await;
    }
    // Every counter the runtime can move is exported before its first increment.
    for stage in &stages {
        let metrics = stage.metrics(&client).await;
        for series in [
            r#"recrawl_errors_total{kind="consume""#,
            r#"recrawl_errors_total{kind="dead_letter_refused""#,
            r#"recrawl_dead_letters_total{kind="undecodable""#,
            r#"recrawl_dead_letters_total{kind="unproducible""#,
        ] {
            assert!(metrics.contains(series), "{} does not export {series}", stage.name);
        }
    }

    let epoch = unix_ms() + 2_000;
    let web = SimWebServer::start(&SimWebArgs {
        seed: 3,
        sites: SITES,
        pages_per_site: 6,
        period_ms: PERIOD_MS,
        period_minutes: 60.0,
        median_change_rate: 0.5,
        korean_share: 0.3,
        epoch_unix_ms: Some(epoch),
        latency_scale: 0.0,
        hold_ms: 500,
        listen: "127.0.0.1:0".parse().expect("address"),
        truth_log: None,
    })
    .await
    .expect("simulated web");
    let dir = tempfile::tempdir().expect("tempdir");
    let seeds = dir.path().join("seeds.txt");
    std::fs::write(&seeds, web.home_urls().join("\n")).expect("seeds");
    let scheduler_flags: Vec<String> = [
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
    ]
    .to_vec();
    stages.push(Stage::start("scheduler", with("scheduler", &scheduler_flags)));
    stages[3].ready(&client).await;

    // The crawl reaches every stage: picks, then their change events and estimates.
    let observer = Observer::new(&kafka, &[FETCH, CHANGE_EVENTS, ESTIMATES]).await.expect("observer");
    let mut estimated: HashSet<(String, u64)> = HashSet::new();
    let mut changes_after: Option<usize> = None;
    let mut changes = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut restart_took = None;
    while changes_after.is_none_or(|before| changes <= before) {
        let observed = tokio::time::timeout_at(deadline, observer.next())
            .await
            .unwrap_or_else(|_| {
                panic!("the pipeline stalled: {changes} change events, {} estimates", estimated.len())
            })
            .expect("observer");
        match observed {
            Observed::Change(_) => changes += 1,
            Observed::Estimate(estimate) => {
                estimated.insert((estimate.url, estimate.period));
            }
            _ => {}
        }
        // Once the crawl flows, kill diff mid-period and restart it under its instance id.
        if restart_took.is_none() && estimated.len() >= 6 {
            stages[1].signal(Signal::SIGKILL);
            let _ = stages[1].child.wait();
            stages[1].restart();
            let took = stages[1].ready(&client).await;
            eprintln!("diff restarted under its instance id: ready again after {took:?}");
            restart_took = Some(took);
            changes_after = Some(changes);
        }
    }
    assert!(restart_took.is_some());

    for stage in stages {
        let name = stage.name;
        assert_eq!(stage.stop(), Some(0), "{name} exits 0 after SIGTERM");
    }
    web.shutdown().expect("web");
}
