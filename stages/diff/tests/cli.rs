//! The offline commands through the real binary.

use std::path::Path;
use std::process::{Command, Output};

fn recrawl_diff(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recrawl-diff")).args(args).output().expect("runs")
}

fn write(dir: &Path, name: &str, contents: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("written");
    path.to_string_lossy().into_owned()
}

fn score(args: &[&str]) -> serde_json::Value {
    let output = recrawl_diff(args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

#[test]
fn score_reproduces_the_papers_example_1_from_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = write(dir.path(), "a", "w1 w2 w2 w2 w3 w3 w4 w5 w2");
    let new = write(dir.path(), "b", "w3 w1 w4 w2 w3 w5 w5 w6 w6 w7");
    let json = score(&["score", &old, &new, "--words", "--s", "0.4", "--t", "0.9"]);
    assert_eq!((json["words_old"].as_u64(), json["words_new"].as_u64()), (Some(9), Some(10)));
    let ops = &json["ied_ops"];
    let counts: Vec<u64> = ["add", "drop", "copy", "shrink", "replace", "move"]
        .iter()
        .map(|op| ops[op].as_u64().expect("count"))
        .collect();
    assert_eq!(counts, vec![2, 0, 3, 4, 0, 1]);
    assert!((json["ied_cost"].as_f64().expect("cost") - 5.7).abs() < 1e-9);
    assert!((json["ied"].as_f64().expect("ied") - 0.57).abs() < 1e-9);
    assert_eq!(json["bw"].as_f64(), Some(1.0));
    assert!(json["cos_weighting"].as_str().is_some_and(|w| w.contains("term frequency only")));
}

#[test]
fn score_reads_html_by_default_and_ignores_markup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = write(dir.path(), "a.html", "<p>the quick brown fox</p><script>var x = 1;</script>");
    let new = write(dir.path(), "b.html", "<div>the <i>quick</i> brown fox</div><style>p {}</style>");
    let json = score(&["score", &old, &new]);
    assert_eq!((json["words_old"].as_u64(), json["words_new"].as_u64()), (Some(4), Some(4)));
    assert_eq!(
        (json["bw"].as_f64(), json["ied"].as_f64(), json["sh"].as_f64()),
        (Some(1.0), Some(0.0), Some(0.0))
    );
    let text = score(&["score", &old, &new, "--text", "--k", "3"]);
    assert!(text["words_old"].as_u64() > Some(4), "--text takes the markup's words too");
    assert_eq!(text["k"].as_u64(), Some(3));
}

#[test]
fn bad_parameters_fail_naming_the_flag() {
    let output = recrawl_diff(&["score", "a", "b", "--s", "1.5"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--ied-s") && stderr.contains("not in [0, 1]"), "{stderr}");
    let missing = recrawl_diff(&["score", "/nonexistent/a", "/nonexistent/b"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/a"));
}

#[test]
fn score_applies_the_stages_caps_unless_told_and_agrees_with_the_stage() {
    use recrawl_diff::change::{DiffSettings, Differ};
    use recrawl_schemas::FetchResult;

    let dir = tempfile::tempdir().expect("tempdir");
    let text = |replaced: usize| {
        (0..20_000)
            .map(|i| if i < replaced { format!("new{i}") } else { format!("w{i}") })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (old_text, new_text) = (text(0), text(2_000));
    let old = write(dir.path(), "a.txt", &old_text);
    let new = write(dir.path(), "b.txt", &new_text);
    let capped = score(&["score", &old, &new, "--text"]);
    assert_eq!((capped["words_old"].as_u64(), capped["truncated"].as_bool()), (Some(20_000), Some(true)));
    assert!(capped["compared_old"].as_u64().is_some_and(|n| n <= 7_000), "{capped}");
    // As the stage scores the same two downloads.
    let mut differ = Differ::new(DiffSettings::default());
    let mut kept = None;
    let page = |period, body: &str| FetchResult {
        content_type: Some("text/plain".into()),
        ..FetchResult::html_page("http://a.test/", "a.test", period, body)
    };
    differ.apply(&mut kept, &page(1, &old_text));
    let event = differ.apply(&mut kept, &page(2, &new_text));
    let degrees = event.degrees.expect("compared");
    // serde_json reads floats back to within an ulp.
    let same = |json: &serde_json::Value, stage: Option<f64>| {
        json.as_f64().zip(stage).is_some_and(|(json, stage)| (json - stage).abs() < 1e-12)
    };
    assert!(
        same(&capped["ied"], Some(degrees.ied)) && same(&capped["wd"], degrees.wd),
        "{capped} {degrees:?}"
    );
    // Lifted: every word, the exact tenth.
    let all = score(&["score", &old, &new, "--text", "--all-words"]);
    assert_eq!((all["compared_old"].as_u64(), all["truncated"].as_bool()), (Some(20_000), Some(false)));
    assert!((all["ied"].as_f64().expect("ied") - 0.1).abs() < 1e-9, "{all}");
    assert!((capped["ied"].as_f64().expect("ied") - 0.1).abs() < 0.03, "{capped}");
    let lifted = score(&["score", &old, &new, "--text", "--max-kept-words", "20000"]);
    assert_eq!(lifted["compared_new"].as_u64(), Some(20_000));
}
