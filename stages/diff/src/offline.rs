//! The offline command `score`: every degree of change between two documents, by the
//! stage's own comparison code. The paper's `criteria` experiments are in `recrawl-lab`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use recrawl_schemas::IedOps;
use serde::Serialize;
use xxhash_rust::xxh3::{xxh3_128, xxh3_64};

use crate::change::{DiffSettings, Differ};
use crate::text::{page_words, word_hashes};
use crate::CompareArgs;

#[derive(Debug, Subcommand)]
pub enum Offline {
    /// Every degree of change between two documents, as one JSON object.
    Score(ScoreArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputKind {
    /// HTML: charset detected, visible text extracted, then words.
    Html,
    /// Plain UTF-8 text, split into words.
    Text,
    /// Whitespace-separated tokens taken as they are (test vectors such as `w1 w2 w2`).
    Words,
}

#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// The old version.
    pub old: PathBuf,
    /// The new version.
    pub new: PathBuf,
    /// Read the files as HTML (the default).
    #[arg(long, conflicts_with_all = ["text", "words"])]
    pub html: bool,
    /// Read the files as plain text.
    #[arg(long, conflicts_with = "words")]
    pub text: bool,
    /// Read the files as whitespace-separated tokens.
    #[arg(long)]
    pub words: bool,
    #[command(flatten)]
    pub compare: CompareArgs,
}

impl ScoreArgs {
    pub fn input(&self) -> InputKind {
        match (self.text, self.words) {
            (true, _) => InputKind::Text,
            (_, true) => InputKind::Words,
            _ => InputKind::Html,
        }
    }
}

/// The `score` output.
#[derive(Debug, Serialize, PartialEq)]
pub struct Score {
    pub words_old: usize,
    pub words_new: usize,
    pub bw: f64,
    pub cos: f64,
    /// How COS weighted terms: one pair has no corpus, so term frequencies only.
    pub cos_weighting: &'static str,
    pub wd: f64,
    pub ed: f64,
    pub sh: f64,
    pub k: u32,
    pub ied: f64,
    pub ied_cost: f64,
    pub ied_ops: IedOps,
    pub s: f64,
    pub t: f64,
}

/// The word hashes of one input file.
pub fn read_words(bytes: &[u8], input: InputKind, settings: &DiffSettings) -> Vec<u64> {
    match input {
        InputKind::Html => page_words(bytes, None, settings.case_fold).words,
        InputKind::Text => word_hashes(&String::from_utf8_lossy(bytes), settings.case_fold),
        InputKind::Words => {
            String::from_utf8_lossy(bytes).split_whitespace().map(|w| xxh3_64(w.as_bytes())).collect()
        }
    }
}

/// Scores two documents given as bytes.
pub fn score(old: &[u8], new: &[u8], input: InputKind, compare: &CompareArgs) -> Score {
    let settings = compare.settings();
    let (old_words, new_words) = (read_words(old, input, &settings), read_words(new, input, &settings));
    let differ = Differ::new(settings.clone());
    let degrees = differ.degrees(&old_words, &new_words, xxh3_128(old) != xxh3_128(new), false);
    Score {
        words_old: old_words.len(),
        words_new: new_words.len(),
        bw: degrees.bw,
        cos: degrees.cos.unwrap_or_default(),
        cos_weighting: "term frequency only (no corpus)",
        wd: degrees.wd.unwrap_or_default(),
        ed: degrees.ed.unwrap_or_default(),
        sh: degrees.sh.unwrap_or_default(),
        k: settings.shingle_k,
        ied: degrees.ied,
        ied_cost: degrees.ied_cost,
        ied_ops: degrees.ied_ops,
        s: settings.costs.s,
        t: settings.costs.t,
    }
}
