//! The offline command through the real binary (which `tests/tests/binaries.rs` also runs
//! as a stage).

use std::process::Command;

#[test]
fn links_resolves_against_the_base_in_document_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("page.html");
    std::fs::write(&page, r#"<a href="b.html">b</a><a href="/c/d.html">d</a><a href="b.html">again</a>"#)
        .expect("written");
    let output = Command::new(env!("CARGO_BIN_EXE_recrawl-fetch"))
        .args(["links", "--base", "http://example.com/dir/page.html"])
        .arg(&page)
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let links: Vec<String> = serde_json::from_slice(&output.stdout).expect("a JSON array");
    assert_eq!(links, ["http://example.com/dir/b.html", "http://example.com/c/d.html"]);
}
