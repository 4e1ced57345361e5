//! Replays every committed fuzz input on stable: `fuzz/corpus/TARGET/*` (what the fuzzer
//! kept as covering the code) and `fuzz/regressions/TARGET/*` (inputs that once crashed).

use std::collections::BTreeMap;
use std::panic::catch_unwind;
use std::path::{Path, PathBuf};

use recrawl_fuzz::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// Runs every file under `dir/TARGET/` through that target; returns the inputs run per
/// target and the failures as `path: message`.
fn replay(dir: &Path) -> (BTreeMap<&'static str, usize>, Vec<String>) {
    let mut ran = BTreeMap::new();
    let mut failures = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return (ran, failures) };
    for entry in entries {
        let path = entry.expect("a readable directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let Some(&(target, run)) = TARGETS.iter().find(|(target, _)| *target == name) else {
            panic!("{} has no target function in recrawl_fuzz::TARGETS", path.display());
        };
        for input in std::fs::read_dir(&path).expect("a readable target directory") {
            let file = input.expect("a readable directory entry").path();
            let data = std::fs::read(&file).expect("a readable input");
            if let Err(panic) = catch_unwind(|| run(&data)) {
                let message = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                failures.push(format!("{}: {message}", file.display()));
            }
            *ran.entry(target).or_insert(0) += 1;
        }
    }
    (ran, failures)
}

#[test]
fn every_target_passes_its_corpus_and_regressions() {
    let (corpus, mut failures) = replay(&fuzz_dir().join("corpus"));
    let (regressions, regression_failures) = replay(&fuzz_dir().join("regressions"));
    failures.extend(regression_failures);
    assert!(failures.is_empty(), "inputs that fail:\n{}", failures.join("\n"));
    for (target, _) in TARGETS {
        let inputs = corpus.get(target).copied().unwrap_or(0);
        assert!(inputs > 0, "fuzz/corpus/{target} has no input");
        println!(
            "{target}: {inputs} corpus inputs, {} regressions",
            regressions.get(target).copied().unwrap_or(0)
        );
    }
}
