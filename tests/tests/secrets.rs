//! No secret passed to recrawl is ever printed: not by `--help` (clap shows environment
//! values), not in an error about a Kafka option, not on a child process's command line.

use std::process::Command;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use recrawl_e2e::{binary, output_within, start_demo, RunningDemo};

const SECRET: &str = "hunter2-do-not-print";
const STAGES: [&str; 4] = ["recrawl-fetch", "recrawl-diff", "recrawl-estimator", "recrawl-scheduler"];

fn run(program: &str, args: &[&str], options_env: Option<&str>) -> (Option<i32>, String) {
    let mut command = Command::new(binary(program));
    command.args(args);
    for (key, _) in std::env::vars() {
        if key.starts_with("RECRAWL_") {
            command.env_remove(key);
        }
    }
    if let Some(options) = options_env {
        command.env("RECRAWL_KAFKA_OPTIONS", options);
    }
    let output = output_within(&mut command, Duration::from_secs(120));
    let text =
        String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    (output.status.code(), text)
}

#[test]
fn help_never_shows_the_kafka_options_from_the_environment() {
    let options = format!("sasl.username=me;sasl.password={SECRET}");
    let mut helps: Vec<(&str, Vec<&str>)> = STAGES.iter().map(|stage| (*stage, vec!["--help"])).collect();
    for command in [
        vec!["stage", "diff", "--help"],
        vec!["stage", "scheduler", "--help"],
        vec!["topics", "create", "--help"],
        vec!["tail", "--help"],
        vec!["dlq", "list", "--help"],
        vec!["demo", "--help"],
    ] {
        helps.push(("recrawl", command));
    }
    for (program, args) in helps {
        let (code, text) = run(program, &args, Some(&options));
        assert_eq!(code, Some(0), "{program} {args:?}: {text}");
        assert!(text.contains("RECRAWL_KAFKA_OPTIONS"), "{program} {args:?} names the variable: {text}");
        assert!(!text.contains(SECRET), "{program} {args:?} printed the secret:\n{text}");
    }
}

#[test]
fn a_refused_kafka_option_is_reported_once_without_its_secret_value() {
    for stage in STAGES {
        // Misspelled: librdkafka refuses the property; its own message would print the
        // value after the name, twice over.
        let option = format!("sasl.pasword={SECRET}");
        let (code, text) = run(stage, &["--brokers", "127.0.0.1:1", "--kafka-option", &option], None);
        assert_eq!(code, Some(1), "{stage}: {text}");
        assert!(!text.contains(SECRET), "{stage} printed the secret:\n{text}");
        assert_eq!(
            text.matches("No such configuration property").count(),
            1,
            "{stage} said it once:\n{text}"
        );
        assert!(text.contains("--kafka-option sasl.pasword=***"), "{stage} names the option:\n{text}");
        // Malformed: clap's own message would quote the whole argument.
        let option = format!("--kafka-option=sasl.password:{SECRET}");
        let (code, text) = run(stage, &["--brokers", "127.0.0.1:1", &option], None);
        assert_eq!(code, Some(2), "{stage}: {text}");
        assert!(!text.contains(SECRET), "{stage} printed the secret:\n{text}");
        assert!(text.contains("expected key=value"), "{stage}: {text}");
    }
    // A value that cannot be a secret is shown, so the user sees what was wrong.
    let (_, text) =
        run("recrawl-diff", &["--brokers", "127.0.0.1:1", "--kafka-option", "compression.level=abc"], None);
    assert!(text.contains("compression.level=abc"), "{text}");
}

/// The demo hands its Kafka options to its stage processes through the environment: a
/// command line is readable by every local user (`ps`).
#[test]
fn the_demo_keeps_secrets_off_its_stages_command_lines() {
    let option = format!("sasl.password={SECRET}");
    // By the table's header each stage has long been running its own program.
    let RunningDemo { child: mut demo, lines, stage_pids: pids } =
        start_demo(["--periods", "1000", "--sites", "2", "--pages-per-site", "3", "--kafka-option", &option]);
    assert_eq!(pids.len(), 4);
    for pid in pids {
        let command_line =
            std::fs::read(format!("/proc/{pid}/cmdline")).expect("a running stage's command line");
        let command_line = String::from_utf8_lossy(&command_line).replace('\0', " ");
        assert!(command_line.contains("stage"), "{command_line}");
        assert!(!command_line.contains(SECRET), "the secret is on a command line: {command_line}");
    }
    kill(Pid::from_raw(demo.id() as i32), Signal::SIGTERM).expect("signal");
    // Read to the end: the demo prints its summary on the way out.
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.iter().any(|line| line.starts_with("summary:")), "{rest:?}");
    assert_eq!(demo.wait().expect("exit").code(), Some(0));
}
