//! The offline command `score`: every degree of change between two documents, by the
//! stage's own comparison code. The paper's `criteria` experiments are in `recrawl-lab`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use recrawl_schemas::IedOps;
use serde::Serialize;
use xxhash_rust::xxh3::{xxh3_128, xxh3_64};

use crate::change::{DiffSettings, Differ};
use crate::sample::{at_level, sample};
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
    /// Compare every word, past --max-words and --max-kept-words (by default the stage's
    /// caps apply, so the scores are the stage's).
    #[arg(long)]
    pub all_words: bool,
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
    /// Words compared of each: the first --max-words, sampled as the stage keeps them
    /// past --max-kept-words.
    pub compared_old: usize,
    pub compared_new: usize,
    /// Whether only part of a document's words were compared.
    pub truncated: bool,
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

/// `words` as the stage keeps them: the first `max_words`, sampled to `max_kept_words`.
fn as_kept(mut words: Vec<u64>, settings: &DiffSettings) -> (u8, Vec<u64>) {
    words.truncate(settings.max_words);
    sample(words, settings.max_kept_words)
}

/// Scores two documents given as bytes, under the stage's caps unless `all_words`.
pub fn score(old: &[u8], new: &[u8], input: InputKind, compare: &CompareArgs, all_words: bool) -> Score {
    let mut settings = compare.settings();
    if all_words {
        (settings.max_words, settings.max_kept_words) = (usize::MAX, usize::MAX);
    }
    let (old_words, new_words) = (read_words(old, input, &settings), read_words(new, input, &settings));
    let (words_old, words_new) = (old_words.len(), new_words.len());
    let ((old_level, old_kept), (new_level, new_kept)) =
        (as_kept(old_words, &settings), as_kept(new_words, &settings));
    let level = old_level.max(new_level);
    let (old_kept, new_kept) = (at_level(&old_kept, old_level, level), at_level(&new_kept, new_level, level));
    let truncated = old_kept.len() < words_old || new_kept.len() < words_new;
    let differ = Differ::new(settings.clone());
    let degrees = differ.degrees(&old_kept, &new_kept, xxh3_128(old) != xxh3_128(new), truncated);
    Score {
        words_old,
        words_new,
        compared_old: old_kept.len(),
        compared_new: new_kept.len(),
        truncated,
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
