//! The binary as an operator runs it. Also makes `cargo test --workspace` build the
//! binary that the end-to-end tests (tests/tests/archive.rs) start.

use std::process::{Command, Output};

fn recrawl_archive(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recrawl-archive")).args(args).output().expect("runs")
}

#[test]
fn surt_prints_each_urls_index_key() {
    let output = recrawl_archive(&["surt", "http://www.Example.com/a?b=1", "https://example.org:8443/"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<String> = String::from_utf8_lossy(&output.stdout).lines().map(str::to_owned).collect();
    assert_eq!(lines, vec!["com,example)/a?b=1".to_owned(), "org,example:8443)/".to_owned()]);
}

#[test]
fn a_bad_flag_fails_at_start_naming_it() {
    for (flag, value) in [("--warc-prefix", "a/b"), ("--gzip-level", "10"), ("--max-file-age-ms", "5")] {
        let output = recrawl_archive(&["--out", "file:///tmp/recrawl-archive-never", flag, value]);
        assert!(!output.status.success(), "{flag} {value} was accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(flag), "{flag}: {stderr}");
    }
}
