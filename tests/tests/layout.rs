//! The crate graph: a stage crate builds on `common`, `model` and `schemas`, never on
//! another stage, so each stage can change and ship on its own. Read from `cargo metadata`,
//! the same graph cargo builds, with dev- and build-dependencies included.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

const STAGES: [&str; 4] = ["recrawl-fetch", "recrawl-diff", "recrawl-estimator", "recrawl-scheduler"];
/// Crates every stage may build on; none of them may depend on a stage.
const FOUNDATIONS: [&str; 3] = ["recrawl-common", "recrawl-model", "recrawl-schemas"];

fn workspace_dependencies() -> Vec<(String, BTreeSet<String>)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    packages
        .iter()
        .map(|package| {
            let name = package["name"].as_str().expect("name").to_owned();
            let dependencies = package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter_map(|dependency| dependency["name"].as_str())
                .filter(|name| name.starts_with("recrawl-"))
                .map(str::to_owned)
                .collect();
            (name, dependencies)
        })
        .collect()
}

#[test]
fn no_stage_crate_depends_on_another_stage() {
    let crates = workspace_dependencies();
    let names: BTreeSet<&str> = crates.iter().map(|(name, _)| name.as_str()).collect();
    for expected in STAGES.iter().chain(&FOUNDATIONS) {
        assert!(names.contains(expected), "{expected} is missing from the workspace: {names:?}");
    }
    let mut violations = Vec::new();
    for (name, dependencies) in &crates {
        let allowed: &[&str] = if STAGES.contains(&name.as_str()) {
            &FOUNDATIONS
        } else if FOUNDATIONS.contains(&name.as_str()) {
            // Foundations may build on each other (common uses schemas), not on a stage.
            &FOUNDATIONS
        } else {
            continue;
        };
        for dependency in dependencies {
            if !allowed.contains(&dependency.as_str()) {
                violations.push(format!("{name} depends on {dependency}"));
            }
        }
    }
    assert!(violations.is_empty(), "stage crates must build only on {FOUNDATIONS:?}: {violations:?}");
}
