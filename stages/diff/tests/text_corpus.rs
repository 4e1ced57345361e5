//! The byte scanner behind `visible_text` against the html5ever tokenizer it replaced
//! (`support/html5ever_text.rs`): on generated markup mixing the constructs where they could
//! part (comments, script escapes, raw text, references, attributes), and on a corpus of
//! real pages.

#[path = "support/html5ever_text.rs"]
mod html5ever_text;

use std::io::Read;
use std::path::{Path, PathBuf};

use html5ever_text::visible_text_html5ever;
use proptest::prelude::*;
use recrawl_diff::text::{decode_body, visible_text, words};

/// Pieces of markup, text and references, chosen for the states where a scanner could go
/// wrong; concatenated at random they also cut each other (an unclosed quote, comment or tag).
const PIECES: &[&str] = &[
    "word",
    "Two",
    " ",
    "\n",
    "\r\n",
    "\t",
    "\u{A0}",
    "\u{3000}",
    "é",
    "한국",
    "\0",
    "\u{FEFF}",
    "<",
    ">",
    "</",
    "&",
    "&#",
    "&#x",
    "&amp;",
    "&amp",
    "&AMP",
    "&ampx",
    "&notin;",
    "&noti",
    "&notit;",
    "&lt3",
    "&nbsp",
    "&eacute;",
    "&#44032;",
    "&#xAC00",
    "&#x80;",
    "&#x81;",
    "&#150;",
    "&#0;",
    "&#xD800;",
    "&#1114112;",
    "&#99999999999;",
    "&#x;",
    "&;",
    "&bogus;",
    "&CounterClockwiseContourIntegral;",
    "&fjlig;",
    "<p>",
    "</p>",
    "<P class=x>",
    "<b>",
    "</b>",
    "<br/>",
    "<div\n>",
    "</DIV >",
    "<li>",
    "<td>",
    "<span>",
    "</template>",
    "<template>",
    "<script>",
    "<SCRIPT type=x>",
    "</script>",
    "</ScRiPt >",
    "</script/>",
    "</scripts>",
    "<script/>",
    "<!--",
    "-->",
    "--!>",
    "->",
    "-",
    "--",
    "<!-->",
    "<!--->",
    "<!-- c -->",
    "<!---->",
    "<script",
    "<style>",
    "</style>",
    "<title>",
    "</title>",
    "<textarea>",
    "</textarea>",
    "<xmp>",
    "</xmp>",
    "<noscript>",
    "</noscript>",
    "<iframe src='a>b'>",
    "</iframe>",
    "<noembed>",
    "<noframes>",
    "</noframes>",
    "<!DOCTYPE html>",
    "<!doctype html PUBLIC \"x>y\">",
    "<?php echo 1 ?>",
    "<![CDATA[x]]>",
    "<!x>",
    "</>",
    "</ x>",
    "</1>",
    "<1>",
    "<a href=\"x>y\" title='p>q' data=z>",
    "<a b='c'd=e/>",
    "<a =b>",
    "<a b=>",
    "<a\u{0}b>",
    "<h1>",
    "</h1>",
    "<a href=x",
    "'",
    "\"",
    "=",
    "/",
    "<plaintext>",
];

/// Single characters of markup and references, and tag names, for finer cuts.
const CHARS: &[&str] = &[
    "<", ">", "/", "!", "-", "&", "#", ";", "x", "X", "a", "m", "p", "0", "9", "=", "\"", "'", " ", "\n",
    "\0", "?", "é", "\u{A0}", "script", "SCRIPT", "style", "title", "template", "[CDATA[", "DOCTYPE",
];

fn page() -> impl Strategy<Value = String> {
    let piece = prop_oneof![prop::sample::select(PIECES), prop::sample::select(CHARS)];
    prop::collection::vec(piece, 0..60).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8192, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn scanner_gives_html5evers_text(html in page()) {
        prop_assert_eq!(visible_text(&html), visible_text_html5ever(&html), "{:?}", html);
    }
}

#[test]
fn script_escapes_and_comments_end_where_html5ever_ends_them() {
    for html in [
        "<script><!--\ndocument.write('<script src=x></script>');\n//--></script>after",
        "<script><!--<script>x</script>y--></script>after",
        "<script><!-- </script>after",
        "<script><!--<script></script></script>hidden-->more</script>after",
        "<script><!--<scriptx></script>after",
        "<script>a<!-- b --> </script>after",
        "<p>a<!-- b -- c --!>d<!--->e<!-->f<!---->g",
        "<title>a &amp b</title><textarea>&lt;p&gt;</textarea><xmp>&amp;<b></xmp>",
        "<template><p>x<template>y</template>z</template>w",
    ] {
        assert_eq!(visible_text(html), visible_text_html5ever(html), "{html}");
    }
}

/// Where the corpus of real pages is: `RECRAWL_TEXT_CORPUS`, else
/// `tests/corpus/article-extraction-benchmark` in the workspace, else
/// `shared/corpus/article-extraction-benchmark` beside a folder above it.
fn corpus_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("RECRAWL_TEXT_CORPUS") {
        return Some(PathBuf::from(dir));
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest.ancestors().nth(2)?;
    let in_tree = workspace.join("tests/corpus/article-extraction-benchmark");
    if in_tree.is_dir() {
        return Some(in_tree);
    }
    workspace
        .ancestors()
        .map(|dir| dir.join("shared/corpus/article-extraction-benchmark"))
        .find(|d| d.is_dir())
}

/// The pages of the corpus (`*.html` or `*.html.gz`, in the folder or its `html/`), by name.
fn corpus_pages(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let html = dir.join("html");
    let dir = if html.is_dir() { html } else { dir.to_path_buf() };
    let mut pages: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display())).path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if name.ends_with(".html.gz") {
                let mut html = Vec::new();
                let unzipped = flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut html);
                unzipped.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                Some((name, html))
            } else {
                name.ends_with(".html").then_some((name, bytes))
            }
        })
        .collect();
    pages.sort();
    pages
}

/// Every page of the corpus has the same words from both; at most 1 % may differ, each
/// listed. On the 181 pages of the article extraction benchmark none differ: the two give
/// the same text, byte for byte, on every page.
#[test]
fn scanner_gives_html5evers_words_on_real_pages() {
    let Some(dir) = corpus_dir() else {
        assert!(
            std::env::var_os("RECRAWL_REQUIRE_TEXT_CORPUS").is_none(),
            "RECRAWL_REQUIRE_TEXT_CORPUS is set and no corpus was found"
        );
        eprintln!("no corpus of real pages (RECRAWL_TEXT_CORPUS, tests/corpus/, shared/corpus/): skipped");
        return;
    };
    let pages = corpus_pages(&dir);
    assert!(!pages.is_empty(), "no pages in {}", dir.display());
    let mut differing = Vec::new();
    let mut same_text = 0;
    for (name, body) in &pages {
        let decoded = decode_body(body, None);
        let (new, old) = (visible_text(&decoded.text), visible_text_html5ever(&decoded.text));
        same_text += usize::from(new == old);
        let (new_words, old_words): (Vec<&str>, Vec<&str>) = (words(&new).collect(), words(&old).collect());
        if new_words != old_words {
            let at = new_words.iter().zip(&old_words).take_while(|(a, b)| a == b).count();
            let context = |w: &[&str]| w[at.saturating_sub(3)..(at + 5).min(w.len())].join(" ");
            differing.push(format!(
                "{name}: word {at} of {}/{}: scanner «{}», html5ever «{}»",
                new_words.len(),
                old_words.len(),
                context(&new_words),
                context(&old_words)
            ));
        }
    }
    eprintln!(
        "{} pages: {} with different words, {} with byte-identical text",
        pages.len(),
        differing.len(),
        same_text
    );
    for line in &differing {
        eprintln!("  {line}");
    }
    assert!(differing.len() * 100 <= pages.len(), "more than 1 % of pages differ:\n{}", differing.join("\n"));
}
