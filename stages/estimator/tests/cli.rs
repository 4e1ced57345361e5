//! The offline commands through the real binary (which `tests/tests/binaries.rs` also runs
//! as a stage).

use std::process::Command;

#[test]
fn stats_gives_figure_1s_rates_for_url_d() {
    let output = Command::new(env!("CARGO_BIN_EXE_recrawl-estimator"))
        .args(["stats", "--history", "!u.!uuvv.w!ww..w"])
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!((stats["requests"].as_u64(), stats["successes"].as_u64()), (Some(12), Some(9)));
    assert_eq!((stats["dr"].as_f64(), stats["mr"].as_f64()), (Some(0.75), Some(0.25)));
}
