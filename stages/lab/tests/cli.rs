//! The lab's commands through the real binary.

use std::process::{Command, Output};

fn recrawl_lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recrawl-lab")).args(args).output().expect("runs")
}

#[test]
fn criteria_writes_the_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("report");
    let output = recrawl_lab(&["criteria", "--words", "200", "--out", &out.to_string_lossy()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(summary.contains("| ied |") && summary.contains("200 words"), "{summary}");
    for file in ["summary.csv", "summary.md", "add.csv", "move.svg"] {
        assert!(out.join(file).is_file(), "{file}");
    }
}

#[test]
fn paper_reproduces_one_experiment_and_says_how_to_regenerate_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().to_string_lossy().into_owned();
    let output = recrawl_lab(&["paper", "refresh-groups", "--out", &out, "--scale", "0.05"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report = std::fs::read_to_string(dir.path().join("refresh-groups/README.md")).expect("report");
    assert!(report.contains("--bin recrawl-lab -- paper refresh-groups"), "{report}");
    for file in ["groups.csv", "comparison.csv", "freshness.svg"] {
        assert!(dir.path().join("refresh-groups").join(file).is_file(), "{file}");
    }
}

#[test]
fn generate_writes_histories_evaluate_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let generated = recrawl_lab(&["generate", "--group", "popular", "--urls", "50"]);
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    let histories = dir.path().join("histories.tsv");
    std::fs::write(&histories, &generated.stdout).expect("written");
    let evaluated = recrawl_lab(&["evaluate", "--histories", &histories.to_string_lossy(), "--kind", "dr"]);
    assert!(evaluated.status.success(), "{}", String::from_utf8_lossy(&evaluated.stderr));
    let report: serde_json::Value = serde_json::from_slice(&evaluated.stdout).expect("JSON");
    assert_eq!(report["rows"].as_array().map(Vec::len), Some(3), "{report}");
    let missing = recrawl_lab(&["evaluate", "--histories", "/nonexistent/h.tsv", "--kind", "dr"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/h.tsv"));
}
