//! The `recrawl` binary as a user runs it: the demo with its child processes, and
//! start-up rejection of bad settings.

use std::process::Command;

fn recrawl() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_recrawl"));
    // The demo must not pick up a broker or prefix from the environment of the test run.
    for (key, _) in std::env::vars() {
        if key.starts_with("RECRAWL_") {
            command.env_remove(key);
        }
    }
    command
}

#[test]
fn demo_runs_the_four_stage_processes_and_stops_them_cleanly() {
    let logs = tempfile::tempdir().expect("tempdir");
    let output = recrawl()
        .args(["demo", "--periods", "3", "--period-ms", "1000", "--sites", "2", "--pages-per-site", "5"])
        .arg("--log-dir")
        .arg(logs.path())
        .output()
        .expect("demo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let period_lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.split_whitespace().next().is_some_and(|w| w.parse::<u64>().is_ok()))
        .collect();
    assert_eq!(period_lines.len(), 3, "{stdout}");
    let summary = stdout.lines().find(|l| l.starts_with("summary:")).expect("summary line");
    for stage in ["fetch", "diff", "estimator", "scheduler"] {
        assert!(summary.contains(&format!("{stage} exit 0")), "{summary}");
        let log = std::fs::read_to_string(logs.path().join(format!("{stage}.log"))).expect("stage log");
        assert!(log.contains("SIGTERM: draining") && log.contains("stopped cleanly"), "{stage}:\n{log}");
    }
    // Something flowed: picks were published and fetched.
    let totals: Vec<u64> = period_lines
        .iter()
        .map(|l| l.split_whitespace().nth(2).and_then(|w| w.parse().ok()).expect("fetched column"))
        .collect();
    assert!(totals.iter().sum::<u64>() > 0, "{stdout}");
    // The summary adds up the table: picks, fetched, failed and changes columns.
    let column_sum = |column: usize| -> u64 {
        period_lines
            .iter()
            .map(|l| l.split_whitespace().nth(column).and_then(|w| w.parse::<u64>().ok()).unwrap_or(0))
            .sum()
    };
    for (column, name) in [(1, "picks"), (2, "fetched"), (3, "failed"), (4, "changes")] {
        assert!(
            summary.contains(&format!(" {} {name},", column_sum(column))),
            "the summary's {name} is not the table's sum {}:\n{stdout}",
            column_sum(column)
        );
    }
    // Freshness against the simulated web's truth, per period and against uniform crawling.
    let freshness: Vec<f64> = period_lines
        .iter()
        .map(|l| {
            l.split_whitespace()
                .nth(7)
                .and_then(|w| w.parse().ok())
                .unwrap_or_else(|| panic!("freshness column: {stdout}"))
        })
        .collect();
    assert!(freshness.iter().all(|f| (0.0..=1.0).contains(f)), "{stdout}");
    let comparison =
        stdout.lines().find(|l| l.starts_with("freshness against the truth")).expect("comparison line");
    assert!(comparison.contains("pipeline") && comparison.contains("uniform"), "{comparison}");
    let truth = std::fs::read_to_string(logs.path().join("truth.jsonl")).expect("truth log");
    assert_eq!(truth.lines().filter(|l| l.starts_with("{\"truth\"")).count(), 10, "one truth line per page");
    assert!(truth.lines().any(|l| l.starts_with("{\"served\"")));
}

/// The demo's pipeline and simulated uniform freshness against the simulated web's
/// truth, both knowing every URL and storing nothing at the start.
fn demo_against_uniform(args: &[&str]) -> (f64, f64) {
    let logs = tempfile::tempdir().expect("tempdir");
    let output =
        recrawl().arg("demo").args(args).arg("--log-dir").arg(logs.path()).output().expect("demo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let comparison =
        stdout.lines().find(|l| l.starts_with("freshness against the truth")).expect("comparison line");
    assert!(comparison.contains("both knew every URL and stored nothing at the start"), "{comparison}");
    let number_after = |marker: &str| -> f64 {
        let at =
            comparison.find(marker).unwrap_or_else(|| panic!("{marker:?} in {comparison}")) + marker.len();
        let number: String =
            comparison[at..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        number.parse().unwrap_or_else(|e| panic!("{e}: {marker:?} in {comparison}"))
    };
    (number_after("pipeline (policy freshness) "), number_after("as the pipeline's fell) "))
}

/// The demo as the README runs it, on defaults: measured against the simulated web's truth,
/// the pipeline's default policy keeps the store fresher than uniform crawling of the same
/// web at the same budget, both knowing every URL and storing nothing at the start.
#[test]
fn on_defaults_the_demo_pipeline_is_fresher_than_uniform_crawling() {
    let (pipeline, uniform) = demo_against_uniform(&[]);
    assert!(pipeline >= uniform, "pipeline {pipeline} < uniform {uniform}");
}

/// `--brokers` points the demo at an existing Kafka (CI: tansu) instead of the embedded one.
#[test]
fn demo_uses_an_existing_kafka_given_brokers() {
    let Ok(brokers) = std::env::var("RECRAWL_TEST_BROKERS") else {
        eprintln!("skipped: set RECRAWL_TEST_BROKERS to an independent broker (CI runs it against tansu)");
        return;
    };
    let prefix = format!("demo{}.", std::process::id());
    let output = recrawl()
        .args([
            "demo",
            "--brokers",
            &brokers,
            "--topic-prefix",
            &prefix,
            "--periods",
            "2",
            "--period-ms",
            "1000",
        ])
        .output()
        .expect("demo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains(&format!("Kafka at {brokers}\n")), "not the embedded broker: {stdout}");
    assert!(stdout.contains("summary:"), "{stdout}");
}

#[test]
fn a_stage_rejects_bad_settings_at_start_naming_them() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["stage", "diff", "--brokers", "127.0.0.1:1", "--kafka-option", "no.such.property=1"],
            "no.such.property",
        ),
        (&["stage", "diff", "--brokers", "127.0.0.1:1", "--kafka-option", "group.id=x"], "--group-id"),
        (&["stage", "scheduler", "--brokers", "127.0.0.1:1", "--horizon", "weekly"], "--horizon"),
        (&["stage", "fetch", "--brokers", "127.0.0.1:1", "--concurrency", "0"], "--concurrency"),
    ];
    for (args, named) in cases {
        let output = recrawl().args(args).output().expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} started");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
    }
    let output = recrawl()
        .args(["stage", "scheduler", "--brokers", "127.0.0.1:1", "--seeds", "/nonexistent/seeds.txt"])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--seeds /nonexistent/seeds.txt"));
}

#[test]
fn sim_prints_every_policy_as_json() {
    let output = recrawl()
        .args(["sim", "--pages", "2000", "--periods", "12", "--budget", "0.25", "--seed", "4", "--json"])
        .output()
        .expect("sim runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let policies = report["policies"].as_array().expect("policies");
    let names: Vec<&str> = policies.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "optimum",
            "clairvoyant",
            "proportional",
            "uniform",
            "paper",
            "change-aware",
            "nutch-adaptive",
            "lambda-crawl",
            "groups",
            "freshness"
        ]
    );
    for policy in policies {
        for field in ["freshness", "age", "harmonic_cost", "ratio_to_optimum", "ratio_to_clairvoyant"] {
            assert!(policy[field].as_f64().is_some_and(f64::is_finite), "{field}: {policy}");
        }
        assert!(policy["requests"].as_u64().is_some_and(|r| r <= 12 * 500), "{policy}");
        assert!(policy["wasted_requests"].as_u64().is_some(), "{policy}");
    }
    assert_eq!(policies[0]["ratio_to_optimum"].as_f64(), Some(1.0));
    // The same seed gives the same figures.
    let again = recrawl()
        .args([
            "sim",
            "--pages",
            "2000",
            "--periods",
            "12",
            "--budget",
            "0.25",
            "--seed",
            "4",
            "--json",
            "--policies",
            "uniform",
        ])
        .output()
        .expect("sim runs");
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).expect("JSON");
    assert_eq!(again["policies"][0]["freshness"], policies[3]["freshness"]);
    // The report says how the web's servers date their pages, the table too.
    assert_eq!(
        report["last_modified"],
        serde_json::json!({"truthful": 0.4, "response_time": 0.2, "stuck": 0.0})
    );
    let table = recrawl()
        .args(["sim", "--pages", "500", "--periods", "3", "--policies", "uniform"])
        .args(["--truthful-dates-share", "0.5", "--response-dates-share", "0", "--stuck-dates-share", "0.25"])
        .output()
        .expect("sim runs");
    let first_line = String::from_utf8_lossy(&table.stdout).lines().next().unwrap_or_default().to_owned();
    assert!(
        first_line.contains(
            "Last-Modified: 50 % of sites date changes, 0 % send the response time, 25 % a date that never moves"
        ),
        "{first_line}"
    );
    let too_many = recrawl()
        .args(["sim", "--pages", "500", "--periods", "3", "--policies", "uniform"])
        .args(["--truthful-dates-share", "0.6", "--stuck-dates-share", "0.5"])
        .output()
        .expect("sim runs");
    let stderr = String::from_utf8_lossy(&too_many.stderr);
    assert!(!too_many.status.success() && stderr.contains("--stuck-dates-share"), "{stderr}");
    // Shares that add up to 1 are taken, whatever their sum rounds to (here just over 1).
    let all = recrawl()
        .args(["sim", "--pages", "500", "--periods", "3", "--policies", "uniform"])
        .args([
            "--truthful-dates-share",
            "0.33",
            "--response-dates-share",
            "0.56",
            "--stuck-dates-share",
            "0.11",
        ])
        .output()
        .expect("sim runs");
    assert!(all.status.success(), "{}", String::from_utf8_lossy(&all.stderr));
}

#[test]
fn sim_at_several_budgets_says_what_each_policy_needs_to_be_as_fresh_as_uniform() {
    let args = ["sim", "--pages", "2000", "--periods", "20", "--budget", "0.05,0.2,0.4", "--seed", "3"];
    let policies = ["--policies", "uniform,lambda-crawl,optimum"];
    let output = recrawl().args(args).args(policies).arg("--json").output().expect("sim runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON object a line"))
        .collect();
    assert_eq!(lines.len(), 4, "one line a budget and the comparison");
    let last = &lines[3];
    assert_eq!(last["reference"], "uniform");
    let needs = last["requests_to_match"].as_array().expect("requests_to_match");
    let cells: Vec<(&str, f64)> = needs
        .iter()
        .map(|n| (n["policy"].as_str().unwrap_or(""), n["budget"].as_f64().unwrap_or(0.0)))
        .collect();
    assert_eq!(
        cells,
        [
            ("lambda-crawl", 0.05),
            ("lambda-crawl", 0.2),
            ("lambda-crawl", 0.4),
            ("optimum", 0.05),
            ("optimum", 0.2),
            ("optimum", 0.4)
        ]
    );
    for need in needs {
        assert!(need["share"].as_f64().is_some_and(|share| share.is_finite() && share > 0.0), "{need}");
        assert!(["exact", "at-most", "more-than"].contains(&need["bound"].as_str().unwrap_or("")), "{need}");
    }
    // The share is of uniform's requests at that budget: the optimum's largest budget
    // run bounds what it can be said to need there.
    let uniform_requests = |line: &serde_json::Value| line["policies"][0]["requests"].as_f64().unwrap_or(0.0);
    let optimum_most = lines[2]["policies"][2]["requests"].as_f64().unwrap_or(0.0);
    for (index, need) in needs.iter().enumerate().skip(3) {
        let share = need["share"].as_f64().unwrap_or(0.0);
        assert!(share * uniform_requests(&lines[index - 3]) <= optimum_most + 1e-6, "{need}");
    }
    let table = recrawl().args(args).args(policies).output().expect("sim runs");
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("Requests to be as fresh as uniform"), "{table}");
    assert!(
        table.lines().any(|line| line.starts_with("lambda-crawl") && line.split_whitespace().count() == 4),
        "{table}"
    );
    // One budget: nothing to interpolate, no comparison.
    let one =
        recrawl().args(["sim", "--pages", "500", "--periods", "5", "--json"]).output().expect("sim runs");
    assert_eq!(String::from_utf8_lossy(&one.stdout).lines().count(), 1);
}

#[test]
fn sim_replays_a_history_file_and_rejects_bad_input_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let history = dir.path().join("urlid_offset_history.txt");
    std::fs::write(
        &history,
        "1\t0\t[[1,0],[1,1],[1,0],[1,1]]\n2\t0\t[[1,1],[1,1],[1,1],[1,1]]\n3\t0\t[[2,0],[2,0]]\n",
    )
    .expect("write");
    let output = recrawl()
        .args(["sim", "--json", "--budget", "0.5", "--replay"])
        .arg(&history)
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["pages"], 3);
    assert_eq!(report["changes"], 6);
    std::fs::write(&history, "1\t0\t[[1,0],[1]]\n").expect("write");
    let output = recrawl().args(["sim", "--replay"]).arg(&history).output().expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("--replay") && stderr.contains("line 1"), "{stderr}");
    let output = recrawl().args(["sim", "--budget", "0"]).output().expect("runs");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--budget"));
}

#[test]
fn sim_runs_each_budget_of_a_list() {
    let output = recrawl()
        .args([
            "sim",
            "--pages",
            "500",
            "--periods",
            "5",
            "--budget",
            "0.1,0.3",
            "--policies",
            "uniform",
            "--json",
        ])
        .output()
        .expect("sim runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let reports: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON object per line"))
        .collect();
    let budgets: Vec<f64> = reports.iter().filter_map(|r| r["budget"].as_f64()).collect();
    assert_eq!(budgets, [0.1, 0.3]);
    // A budget three times larger buys three times the requests.
    let requests: Vec<u64> = reports.iter().filter_map(|r| r["policies"][0]["requests"].as_u64()).collect();
    assert_eq!(requests, [250, 750]);
}

#[test]
fn sim_runs_every_world_of_the_family_and_ends_with_their_table() {
    let args = ["sim", "--pages", "1000", "--periods", "8", "--budget", "0.1", "--world", "all"];
    let policies = ["--policies", "optimum,clairvoyant,uniform,freshness,lambda-crawl"];
    let output = recrawl().args(args).args(policies).arg("--json").output().expect("sim runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let worlds: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("a JSON object per line"))
        .map(|report| report["world"].as_str().expect("each report names its world").to_owned())
        .collect();
    assert_eq!(worlds, ["web", "periodic", "bursty", "drifting", "heavy-tailed", "mixed"]);
    let table = recrawl().args(args).args(policies).output().expect("sim runs");
    let table = String::from_utf8_lossy(&table.stdout);
    let summary = table.split("Every world").nth(1).expect("the worlds' table");
    for world in ["web", "periodic", "bursty", "drifting", "heavy-tailed", "mixed"] {
        let line = summary.lines().find(|line| line.starts_with(world)).expect(world);
        let best_other = line.split_whitespace().rev().nth(1).expect("the best other learned policy");
        assert!(
            ["uniform", "lambda-crawl"].contains(&best_other),
            "neither the default nor a reference: {line}"
        );
    }
    let output = recrawl().args(["sim", "--world", "lunar"]).output().expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--world") && stderr.contains("heavy-tailed"), "{stderr}");
}

/// Rates, shares and scales that make no sense are refused at start, naming the flag,
/// where they used to run a web of NaN rates or a Korean share of 5.
#[test]
fn absurd_simulation_settings_are_refused_naming_the_flag() {
    for (command, flag, value) in [
        ("simweb", "--median-change-rate", "nan"),
        ("simweb", "--median-change-rate", "-1"),
        ("simweb", "--korean-share", "5"),
        ("simweb", "--period-minutes", "0"),
        ("simweb", "--latency-scale", "inf"),
        ("sim", "--period-minutes", "nan"),
        ("sim", "--min-recall", "-0.5"),
        ("demo", "--median-change-rate", "0"),
    ] {
        let output = recrawl().args([command, &format!("{flag}={value}")]).output().expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command} {flag}={value}: {stderr}");
        assert!(stderr.contains(flag), "{command} {flag}={value}: {stderr}");
    }
}
