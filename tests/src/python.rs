//! The Python tools analysts and CI use on recrawl's output: `check-jsonschema` on the
//! records a run produced, and the recipes of `docs/analysts.md` (confluent-kafka, DuckDB).
//! Where python3 cannot import one, the check says so and is skipped, unless
//! `RECRAWL_REQUIRE_PYTHON_TOOLS` is set, as `.ci/run` does.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::output_within;

pub const REQUIRE_PYTHON_TOOLS_ENV: &str = "RECRAWL_REQUIRE_PYTHON_TOOLS";

/// Longest a tool may run: a recipe's consumer waits for its group's assignment, which
/// tansu takes ~20 s to give.
const COMMAND_LIMIT: Duration = Duration::from_secs(300);

/// Whether python3 imports every one of `modules`; if not, `what` was not tested.
pub fn python_imports(modules: &[&str], what: &str) -> bool {
    let imported = Command::new("python3")
        .arg("-c")
        .arg(format!("import {}", modules.join(", ")))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !imported {
        assert!(
            std::env::var_os(REQUIRE_PYTHON_TOOLS_ENV).is_none(),
            "{REQUIRE_PYTHON_TOOLS_ENV} is set but python3 cannot import {modules:?}"
        );
        eprintln!(
            "SKIPPED: python3 cannot import {modules:?} (see .ci/run's pip installs): {what} was not tested"
        );
    }
    imported
}

/// Runs `python3 args…` in `dir` and returns its standard output; fails on a non-zero exit.
pub fn python(args: &[&str], dir: &Path) -> String {
    let output = output_within(Command::new("python3").args(args).current_dir(dir), COMMAND_LIMIT);
    succeeded(&format!("python3 {args:?}"), output)
}

/// Validates each of `instances` (JSON files) against the JSON Schema `schema`, as
/// `.ci/run` validates the fixtures. Returns false where check-jsonschema is missing.
pub fn check_jsonschema(schema: &Path, instances: &[PathBuf]) -> bool {
    if !python_imports(&["check_jsonschema"], "validation of the records against their schemas") {
        return false;
    }
    let mut command = Command::new("python3");
    command.args(["-m", "check_jsonschema", "--schemafile"]).arg(schema).args(instances);
    let output = output_within(&mut command, COMMAND_LIMIT);
    succeeded(&format!("check-jsonschema --schemafile {}", schema.display()), output);
    true
}

fn succeeded(what: &str, output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what}: {}\n{stdout}\n{stderr}", output.status);
    stdout
}
