//! The crate graph: a stage crate builds on `common`, `model` and `schemas`, never on
//! another stage, so each stage can change and ship on its own; research tooling stays in
//! `recrawl-lab`, out of every binary that runs a stage. Read from `cargo metadata`,
//! the same graph cargo builds, with dev- and build-dependencies included.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const STAGES: [&str; 5] =
    ["recrawl-fetch", "recrawl-diff", "recrawl-estimator", "recrawl-scheduler", "recrawl-archive"];
/// Crates every stage may build on; none of them may depend on a stage.
const FOUNDATIONS: [&str; 3] = ["recrawl-common", "recrawl-model", "recrawl-schemas"];
/// What only research tooling needs (charts): never linked into a stage binary.
const LAB_ONLY: [&str; 2] = ["plotters", "recrawl-lab"];

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
                .filter(|name| name.starts_with("recrawl") || LAB_ONLY.contains(name))
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
    let launcher = crates.iter().find(|(name, _)| name == "recrawl").map(|(_, dependencies)| dependencies);
    let lab_in_launcher: Vec<_> =
        launcher.into_iter().flatten().filter(|d| LAB_ONLY.contains(&d.as_str())).collect();
    assert!(lab_in_launcher.is_empty(), "the recrawl binary runs stages too: {lab_in_launcher:?}");
}

/// Files under `root` (the repository) that people read or the code documents itself in,
/// skipping build output.
fn documented_files(root: &Path) -> Vec<PathBuf> {
    let mut pending = vec![root.to_path_buf()];
    let mut files = Vec::new();
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable directory") {
            let path = entry.expect("directory entry").path();
            let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
            if path.is_dir() {
                if !matches!(name, "target" | ".git" | "corpus" | "artifacts") {
                    pending.push(path);
                }
            } else if matches!(
                path.extension().and_then(|ext| ext.to_str()),
                Some("rs" | "md" | "json" | "toml")
            ) {
                files.push(path);
            }
        }
    }
    files
}

/// Every algorithm page the code, schemas and docs cite exists in the repository, and
/// nothing points outside it: a user who clones recrawl can read what the code cites.
#[test]
fn every_cited_algorithm_page_is_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("repository root");
    let mut cited = BTreeSet::new();
    // Spelled in parts so that this file does not match itself.
    let outside_folders = [["shared", "spec"].join("/"), ["shared", "seeds"].join("/")];
    let mut outside = Vec::new();
    for file in documented_files(root) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let relative = file.strip_prefix(root).expect("under the root").display().to_string();
        for (at, _) in text.match_indices("docs/algorithms/") {
            let page: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '.' | '_'))
                .collect();
            let page = page.trim_end_matches('.');
            if page.ends_with(".md") {
                cited.insert((page.to_owned(), relative.clone()));
            }
        }
        if outside_folders.iter().any(|folder| text.contains(folder.as_str())) {
            outside.push(relative);
        }
    }
    assert!(outside.is_empty(), "files citing documents outside the repository: {outside:?}");
    let missing: Vec<_> = cited.iter().filter(|(page, _)| !root.join(page).is_file()).collect();
    assert!(missing.is_empty(), "cited pages missing from docs/algorithms: {missing:?}");
    let pages: BTreeSet<&str> = cited.iter().map(|(page, _)| page.as_str()).collect();
    assert!(pages.len() >= 6, "every algorithm page is cited somewhere: {pages:?}");
}
