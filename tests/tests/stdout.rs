//! A reader that stops reading (`recrawl tail … | head`) ends a command quietly, exit 0,
//! as with any Unix tool: no panic, no error line, and the demo still stops its stages.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use rdkafka::producer::{FutureProducer, FutureRecord};
use recrawl_common::KafkaArgs;
use recrawl_e2e::{binary, kafka_flags, parse_args, repository_file, unique_prefix, BoundedChild, Broker};

/// Runs `command` with a standard output whose reader is already gone, so its first write
/// fails, whenever it comes.
fn run_with_closed_stdout(mut command: Command) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    BoundedChild::spawn(
        command.stdin(Stdio::null()).stdout(writer).stderr(Stdio::piped()),
        Duration::from_secs(120),
    )
    .wait_with_output()
}

fn assert_quiet_success(what: &str, output: &Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what}: {}\n{stderr}", output.status);
    assert!(!stderr.contains("panicked") && !stderr.contains("Error"), "{what}:\n{stderr}");
}

#[test]
fn commands_that_print_stop_quietly_when_stdout_is_closed() {
    let examples = repository_file("docs/examples");
    let example = |name: &str| examples.join(name).display().to_string();
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("recrawl", vec!["sim".into(), "--pages".into(), "300".into(), "--periods".into(), "5".into()]),
        (
            "recrawl",
            vec![
                "sim".into(),
                "--pages".into(),
                "300".into(),
                "--periods".into(),
                "5".into(),
                "--json".into(),
            ],
        ),
        (
            "recrawl",
            vec!["simweb".into(), "--sites".into(), "1".into(), "--pages-per-site".into(), "2".into()],
        ),
        ("recrawl-diff", vec!["score".into(), example("old.html"), example("new.html")]),
        (
            "recrawl-fetch",
            vec!["links".into(), "--base".into(), "http://example.com/".into(), example("page.html")],
        ),
        ("recrawl-estimator", vec!["stats".into(), "--history".into(), "!u.!uuvv.w!ww..w".into()]),
        (
            "recrawl-scheduler",
            vec![
                "plan".into(),
                "--pages".into(),
                example("pages.jsonl"),
                "--policy".into(),
                "paper".into(),
                "--m".into(),
                "3".into(),
            ],
        ),
    ];
    for (name, args) in cases {
        let mut command = Command::new(binary(name));
        command.args(&args);
        assert_quiet_success(&format!("{name} {}", args.join(" ")), &run_with_closed_stdout(command));
    }
}

#[tokio::test]
async fn tail_stops_quietly_when_stdout_is_closed() {
    let broker = Broker::start();
    let prefix = unique_prefix("stdout-tail");
    let flags = kafka_flags(&broker.bootstrap(), &prefix);
    let kafka = parse_args::<KafkaArgs>(&flags);
    broker.create_topics(&kafka, 2).await;
    // Anything on the topic makes tail print a line (this one as undecodable).
    let producer: FutureProducer = recrawl_common::kafka::producer_config(&kafka).create().expect("producer");
    let topic = format!("{prefix}change-events");
    producer
        .send(FutureRecord::to(&topic).key("k").payload("not an event"), Duration::from_secs(10))
        .await
        .expect("produced");
    let mut tail = Command::new(binary("recrawl"));
    // Following: only the closed pipe can end it.
    tail.args([
        "tail",
        "change-events",
        "--follow",
        "--brokers",
        &broker.bootstrap(),
        "--topic-prefix",
        &prefix,
    ]);
    let output = tokio::task::spawn_blocking(move || run_with_closed_stdout(tail)).await.expect("tail");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}\n{stderr}", output.status);
    assert!(stderr.starts_with("reading ") && !stderr.contains("panicked"), "{stderr}");
}

/// `recrawl demo | head -4`: the demo stops at its next line, and stops its stages cleanly
/// first.
#[test]
fn demo_stops_its_stages_when_stdout_is_closed_mid_run() {
    let logs = tempfile::tempdir().expect("tempdir");
    let mut command = Command::new(binary("recrawl"));
    // The embedded broker: nothing from the test run's environment.
    for (key, _) in std::env::vars() {
        if key.starts_with("RECRAWL_") {
            command.env_remove(key);
        }
    }
    command
        .args(["demo", "--periods", "3", "--period-ms", "1000", "--sites", "1", "--pages-per-site", "5"])
        .arg("--log-dir")
        .arg(logs.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut demo = BoundedChild::spawn(&mut command, Duration::from_secs(120));
    let mut lines = BufReader::new(demo.stdout.take().expect("stdout")).lines();
    // Up to the line that says the four stages run; then the reader goes.
    loop {
        let line = lines.next().expect("the demo said its stages ran").expect("demo output");
        if line.starts_with("stages: ") {
            break;
        }
    }
    drop(lines);
    let output = demo.wait_with_output();
    assert_quiet_success("recrawl demo", &output);
    for stage in ["fetch", "diff", "estimator", "scheduler"] {
        let log = std::fs::read_to_string(logs.path().join(format!("{stage}.log"))).expect("stage log");
        assert!(log.contains("SIGTERM: draining") && log.contains("stopped cleanly"), "{stage}:\n{log}");
    }
}
