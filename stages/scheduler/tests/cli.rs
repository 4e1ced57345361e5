//! The offline commands through the real binary (which `tests/tests/binaries.rs` also runs
//! as a stage).

use std::process::Command;

#[test]
fn groups_puts_three_changes_a_week_on_monday_wednesday_friday() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rates = dir.path().join("rates.jsonl");
    std::fs::write(&rates, "{\"url\":\"http://a.example/x.html\",\"weekly_rate\":3.0}\n").expect("written");
    let output = Command::new(env!("CARGO_BIN_EXE_recrawl-scheduler"))
        .args(["groups", "--rates"])
        .arg(&rates)
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(plan["urls"][0]["group6"], "G3");
    assert_eq!(plan["urls"][0]["weekday_names"], serde_json::json!(["Mon", "Wed", "Fri"]));
}
