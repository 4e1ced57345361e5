//! Every long-running command stops on SIGTERM as on Ctrl-C, within a bound, broker or no
//! broker: the four stage binaries, `recrawl demo` (which stops its stages), `recrawl
//! simweb` (which writes its truth log) and `recrawl tail`. A demo killed outright leaves
//! no stage running.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use recrawl_common::KafkaArgs;
use recrawl_e2e::processes::{start_pipeline, Pipeline};
use recrawl_e2e::{
    binary, kafka_flags, parse_args, start_demo, unique_prefix, BoundedChild, Broker, RunningDemo,
};

/// The longest a stage with the test flags takes to stop (`stop_bound`): past this a
/// stopped stage hangs.
fn stage_exit_bound() -> Duration {
    recrawl_common::runtime::stop_bound(&parse_args(&kafka_flags("127.0.0.1:9092", "bound.")))
}

/// Sends `signal` and waits for the exit: its code, and how long it took.
fn stop(child: &mut Child, name: &str, signal: Signal, bound: Duration) -> (Option<i32>, Duration) {
    kill(Pid::from_raw(child.id() as i32), signal).expect("signal");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("status") {
            return (status.code(), started.elapsed());
        }
        assert!(started.elapsed() < bound, "{name} still running {bound:?} after {signal}");
        // An exit is only observable by looking again.
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_stage_binary_stops_on_sigterm_and_sigint_with_the_broker_up_and_gone() {
    let mut broker = Broker::restartable().await;
    let prefix = unique_prefix("signals");
    let flags = kafka_flags(&broker.bootstrap(), &prefix);
    let kafka: KafkaArgs = parse_args(&flags);
    broker.create_topics(&kafka, 2).await;
    let Pipeline { mut stages, web, client, _seeds, .. } = start_pipeline(&flags, &prefix, 11).await;

    // The broker up: a drained, committed, flushed exit 0, on either signal.
    for (stage, signal) in
        stages.iter_mut().zip([Signal::SIGTERM, Signal::SIGINT, Signal::SIGTERM, Signal::SIGINT])
    {
        let (code, took) = stop(&mut stage.child, stage.name, signal, stage_exit_bound());
        eprintln!("{} after {signal} with the broker up: exit {code:?} in {took:?}", stage.name);
        assert_eq!(code, Some(0), "{} exits 0 on {signal}", stage.name);
        stage.restart();
    }
    for stage in &mut stages {
        stage.ready(&client).await;
    }

    // The broker gone: the final commit cannot be confirmed, so the stage says so with a
    // non-zero code unless it had nothing to commit, but it exits, within the bound.
    if !broker.stop() {
        eprintln!("the broker-gone half is skipped: {broker:?} cannot be stopped by the test");
        return;
    }
    for stage in &mut stages {
        let (code, took) = stop(&mut stage.child, stage.name, Signal::SIGTERM, stage_exit_bound());
        eprintln!("{} after SIGTERM with the broker gone: exit {code:?} in {took:?}", stage.name);
        assert!(matches!(code, Some(0 | 1)), "{} exits with a code, not a signal: {code:?}", stage.name);
    }
    web.shutdown().expect("web");
}

/// `recrawl demo` stopped by SIGTERM (what `timeout`, systemd and Kubernetes send) stops
/// its four stage processes and waits for them, as Ctrl-C does.
#[test]
fn the_demo_forwards_sigterm_to_its_stages() {
    let RunningDemo { child: mut demo, lines, stage_pids: pids } =
        start_demo(["--periods", "1000", "--period-ms", "500", "--sites", "2", "--pages-per-site", "5"]);
    assert_eq!(pids.len(), 4, "the demo named its four stage processes");
    assert!(pids.iter().all(|&pid| running(pid)), "the stages run");
    let (code, took) = stop(&mut demo, "recrawl demo", Signal::SIGTERM, Duration::from_secs(60));
    eprintln!("demo after SIGTERM: exit {code:?} in {took:?}");
    assert_eq!(code, Some(0), "an interrupted demo still prints its summary and exits 0");
    let summary: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(summary.iter().any(|line| line.contains("fetch exit 0")), "the stages drained: {summary:?}");
    for pid in pids {
        assert!(!running(pid), "stage process {pid} outlived the demo");
    }
}

/// Whether `pid` runs: an exited process that nobody has reaped yet (a zombie) does not.
fn running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // "pid (command) state …": the command may hold spaces and parentheses.
    stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
}

/// `recrawl demo` killed outright (SIGKILL, the out-of-memory killer) cannot stop its
/// stages, and a stage outlives a broker outage by design: each stage sees its parent go
/// (`--parent-pid`) and stops on its own.
#[test]
fn the_stages_of_a_demo_killed_outright_stop_on_their_own() {
    let logs = tempfile::tempdir().expect("temporary directory");
    let mut args = ["--periods", "1000", "--period-ms", "500", "--sites", "2", "--pages-per-site", "5"]
        .map(std::ffi::OsString::from)
        .to_vec();
    args.extend(["--log-dir".into(), logs.path().into()]);
    let RunningDemo { child: mut demo, stage_pids: pids, .. } = start_demo(args);
    assert_eq!(pids.len(), 4, "the demo named its four stage processes");
    let (code, _) = stop(&mut demo, "recrawl demo", Signal::SIGKILL, Duration::from_secs(10));
    assert_eq!(code, None, "the demo was killed");
    // The parent check's second, then a drain with the broker gone.
    let bound = stage_exit_bound() + Duration::from_secs(2);
    let started = Instant::now();
    while pids.iter().any(|&pid| running(pid)) {
        if started.elapsed() > bound {
            let left: Vec<i32> = pids.iter().copied().filter(|&pid| running(pid)).collect();
            for &pid in &left {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            panic!("stage processes {left:?} still ran {bound:?} after the demo was killed");
        }
        // An exit is only observable by looking again.
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("the stages stopped {:?} after the demo was killed", started.elapsed());
    for stage in ["fetch", "diff", "estimator", "scheduler"] {
        let log = std::fs::read_to_string(logs.path().join(format!("{stage}.log"))).expect("stage log");
        assert!(log.contains("the parent process ended: draining"), "{stage}:\n{log}");
    }
}

#[test]
fn simweb_writes_its_truth_log_on_sigterm() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let truth = dir.path().join("truth.jsonl");
    let mut simweb = BoundedChild::spawn(
        Command::new(binary("recrawl"))
            .args([
                "simweb",
                "--listen",
                "127.0.0.1:0",
                "--sites",
                "2",
                "--pages-per-site",
                "3",
                "--truth-log",
            ])
            .arg(&truth)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
        Duration::from_secs(60),
    );
    let mut lines = BufReader::new(simweb.stdout.take().expect("stdout")).lines();
    let first = lines.next().expect("a first line").expect("simweb output");
    assert!(first.starts_with("simulated web:"), "simweb serves: {first}");
    let (code, _) = stop(&mut simweb, "recrawl simweb", Signal::SIGTERM, Duration::from_secs(10));
    assert_eq!(code, Some(0));
    let written = std::fs::read_to_string(&truth).expect("the truth log was written");
    assert_eq!(written.lines().filter(|line| line.starts_with("{\"truth\"")).count(), 6, "one line per page");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_stops_on_sigterm() {
    let broker = Broker::start();
    let prefix = unique_prefix("signals-tail");
    let flags = kafka_flags(&broker.bootstrap(), &prefix);
    broker.create_topics(&parse_args::<KafkaArgs>(&flags), 2).await;
    let mut tail = BoundedChild::spawn(
        Command::new(binary("recrawl"))
            .args([
                "tail",
                "change-events",
                "--follow",
                "--brokers",
                &broker.bootstrap(),
                "--topic-prefix",
                &prefix,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
        Duration::from_secs(60),
    );
    // Its first line says it is reading: the handler is installed by then.
    let first = BufReader::new(tail.stderr.take().expect("stderr")).lines().next();
    let first = first.expect("a first line").expect("tail output");
    assert!(first.starts_with("reading "), "{first}");
    let (code, _) = stop(&mut tail, "recrawl tail", Signal::SIGTERM, Duration::from_secs(10));
    assert_eq!(code, Some(0));
}
