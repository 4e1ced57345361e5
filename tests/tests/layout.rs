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

/// The `src` directory of every crate in the repository.
fn crate_sources(root: &Path) -> Vec<PathBuf> {
    let mut pending = vec![root.to_path_buf()];
    let mut sources = Vec::new();
    while let Some(dir) = pending.pop() {
        if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
            sources.push(dir.join("src"));
        }
        for entry in std::fs::read_dir(&dir).expect("readable directory") {
            let path = entry.expect("directory entry").path();
            let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
            if path.is_dir() && !matches!(name, "target" | ".git" | "corpus" | "artifacts" | "src") {
                pending.push(path);
            }
        }
    }
    sources.sort();
    sources
}

/// The `.rs` files under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut pending = vec![dir.to_path_buf()];
    let mut files = Vec::new();
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// `text` without its `#[cfg(test)]` modules: rustfmt puts a top-level module's closing
/// brace alone at the start of a line.
fn without_test_modules(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let opens_test_module = lines[at] == "#[cfg(test)]"
            && lines.get(at + 1).is_some_and(|next| {
                ["mod ", "pub mod ", "pub(crate) mod "].iter().any(|opening| next.starts_with(opening))
            });
        if opens_test_module {
            at += 2;
            while at < lines.len() && lines[at] != "}" {
                at += 1;
            }
        } else {
            kept.push(lines[at]);
        }
        at += 1;
    }
    kept
}

/// No source file holds over 1,000 lines of code besides its tests (integration tests and
/// `#[cfg(test)]` modules): a file that long holds more than one concern.
#[test]
fn no_source_file_is_over_a_thousand_lines_besides_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("repository root");
    let mut long = BTreeSet::new();
    for src in crate_sources(root) {
        for file in rust_files(&src) {
            let relative = file.strip_prefix(root).expect("under the root").display().to_string();
            let text = std::fs::read_to_string(&file).expect("readable source");
            let lines = without_test_modules(&text).len();
            if lines > 1_000 {
                long.insert((relative, lines));
            }
        }
    }
    assert!(long.is_empty(), "split these by concern: {long:?}");
}

/// The module a source file is, as path segments from its crate root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src").with_extension("");
    let mut segments: Vec<String> =
        relative.components().map(|part| part.as_os_str().to_string_lossy().into_owned()).collect();
    if segments.last().is_some_and(|last| matches!(last.as_str(), "lib" | "main" | "mod")) {
        segments.pop();
    }
    segments
}

/// The modules of its crate that the code of `module` names, through `crate::` and
/// `super::` paths; re-exports (`pub use`) are a module's face, not its dependencies.
fn dependencies_of(module: &[String], code: &str, modules: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let mut code: String =
        code.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
    while let Some(start) = code.find("pub use ").or_else(|| code.find("pub(crate) use ")) {
        let end = code[start..].find(';').map_or(code.len(), |end| start + end + 1);
        code.replace_range(start..end, "");
    }
    let mut named = BTreeSet::new();
    for head in ["crate::", "super::"] {
        for (at, _) in code.match_indices(head) {
            if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let base: Vec<String> = if head == "crate::" {
                Vec::new()
            } else {
                module[..module.len().saturating_sub(1)].to_vec()
            };
            let rest = &code[at + head.len()..];
            let paths: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group.split('}').next().unwrap_or_default().split(',').collect(),
                None => vec![rest],
            };
            for path in paths {
                let mut segments = base.clone();
                for segment in path.trim().split("::") {
                    let ident: String =
                        segment.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    if ident.is_empty() || ident.len() != segment.len() && !segment.starts_with(&ident) {
                        break;
                    }
                    segments.push(ident);
                }
                let target =
                    (0..=segments.len()).rev().map(|n| segments[..n].to_vec()).find(|m| modules.contains(m));
                if let Some(target) = target.filter(|target| target.as_slice() != module) {
                    named.insert(target);
                }
            }
        }
    }
    named
}

/// No two modules of a crate need each other, but in the frozen schema 1 (`v1` reads into
/// `messages`' types, which read `v1`'s records): a cycle makes neither understandable
/// without the other.
#[test]
fn no_module_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("repository root");
    let mut cycles = Vec::new();
    for src in crate_sources(root) {
        let files = rust_files(&src);
        let modules: BTreeSet<Vec<String>> = files.iter().map(|file| module_of(&src, file)).collect();
        let mut edges: std::collections::BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = Default::default();
        for file in &files {
            let module = module_of(&src, file);
            let text = std::fs::read_to_string(file).expect("readable source");
            let code = without_test_modules(&text).join("\n");
            edges.entry(module.clone()).or_default().extend(dependencies_of(&module, &code, &modules));
        }
        let reach = |from: &Vec<String>| {
            let mut seen = BTreeSet::new();
            let mut pending = vec![from.clone()];
            while let Some(module) = pending.pop() {
                for next in edges.get(&module).into_iter().flatten() {
                    if seen.insert(next.clone()) {
                        pending.push(next.clone());
                    }
                }
            }
            seen
        };
        let reachable: std::collections::BTreeMap<_, _> =
            modules.iter().map(|m| (m.clone(), reach(m))).collect();
        let crate_name = src.parent().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned());
        let mut placed = BTreeSet::new();
        for module in &modules {
            if placed.contains(module) || !reachable[module].contains(module) {
                continue;
            }
            let cycle: Vec<String> = modules
                .iter()
                .filter(|other| reachable[module].contains(*other) && reachable[*other].contains(module))
                .map(|member| {
                    placed.insert(member.clone());
                    member.join("::")
                })
                .collect();
            cycles.push(format!("{}: {}", crate_name.clone().unwrap_or_default(), cycle.join(" ↔ ")));
        }
    }
    assert_eq!(cycles, ["schemas: messages::change ↔ messages::estimate ↔ v1"], "module cycles");
}

/// GitHub's anchor of a Markdown heading.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// `text` without its fenced code blocks.
fn outside_code_blocks(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// Every relative link of every Markdown file names a file that exists and, into a
/// Markdown file, one of its headings: links are how a reader finds the figures
/// (`BENCHMARKS.md` to its log) and the docs.
#[test]
fn every_markdown_link_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("repository root");
    let markdown = |path: &Path| path.extension().is_some_and(|ext| ext == "md");
    let anchors = |file: &Path| -> BTreeSet<String> {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
        outside_code_blocks(&text)
            .into_iter()
            .filter_map(|line| line.strip_prefix('#').map(|heading| heading.trim_start_matches('#')))
            .map(|heading| {
                let anchor = anchor_of(heading);
                let count = seen.entry(anchor.clone()).or_default();
                *count += 1;
                if *count == 1 {
                    anchor
                } else {
                    format!("{anchor}-{}", *count - 1)
                }
            })
            .collect()
    };
    let mut broken = Vec::new();
    let mut links = 0;
    for file in documented_files(root).into_iter().filter(|file| markdown(file)) {
        let text = std::fs::read_to_string(&file).expect("readable Markdown");
        for line in outside_code_blocks(&text) {
            for (at, _) in line.match_indices("](") {
                let link = line[at + 2..].split(')').next().unwrap_or_default();
                if link.contains("://")
                    || link.starts_with("mailto:")
                    || link.contains(' ')
                    || link.is_empty()
                {
                    continue;
                }
                links += 1;
                let (path, anchor) = link.split_once('#').unwrap_or((link, ""));
                let target = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().expect("a directory").join(path)
                };
                let shown =
                    || format!("{}: {link}", file.strip_prefix(root).expect("under the root").display());
                if !target.exists() {
                    broken.push(format!("{} (no such file)", shown()));
                } else if !anchor.is_empty() && markdown(&target) && !anchors(&target).contains(anchor) {
                    broken.push(format!("{} (no such heading)", shown()));
                }
            }
        }
    }
    assert!(links > 100, "links found: {links}");
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}
