//! The offline commands: a URL's rates (`stats`) and one prediction (`predict`). They run
//! the stage's own code; [`run`] returns the text to print. The paper's evaluation and its
//! synthetic histories are in `recrawl-lab`.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde::Serialize;
use thiserror::Error;

use recrawl_model::history::replay_figure;
use recrawl_model::prediction::{
    named_distribution, predict, BinsError, CoarseShares, Kind, Model, PreparedPrior, Prior,
    DISTRIBUTION_NAMES, MAX_FUTURE,
};

#[derive(Debug, Subcommand)]
pub enum Offline {
    /// The rates of one history written as in the paper's Figure 1 (`.` not requested,
    /// `!` failed, any other character: downloaded content).
    Stats(StatsArgs),
    /// The distribution of successes (changes) over the next requests (comparisons).
    Predict(PredictArgs),
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// One URL's crawls as in the paper's Figure 1: `.` not requested, `!` failed, any
    /// other character a download with that content (e.g. '!u.!uuvv.w!ww..w').
    #[arg(long)]
    pub history: String,
    /// Crawls of the group so far (K); the history's length by default.
    #[arg(long)]
    pub crawls: Option<u64>,
}

#[derive(Debug, Args)]
pub struct PredictArgs {
    /// What to predict: dr, downloads among requests; mr, changes among comparisons.
    #[arg(long, value_enum)]
    pub kind: Kind,
    /// Successes (changes) among the latest requests (comparisons).
    #[arg(long)]
    pub yes: u32,
    /// Failures (non-changes) among them.
    #[arg(long)]
    pub no: u32,
    /// Requests (comparisons) to predict.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_FUTURE)))]
    pub future: u32,
    /// The group distribution: paper-popular, paper-random, synthetic, or a JSON file
    /// holding the 12 coarse bin shares (percent or fractions).
    #[arg(long)]
    pub dist: String,
    /// How the prediction uses the group distribution (default: the paper's, which this
    /// command reproduces; the stage's default is beta-binomial).
    #[arg(long, value_enum, default_value_t = Model::Paper)]
    pub model: Model,
}

/// Why a distribution named on the command line cannot be read.
#[derive(Debug, Error)]
pub enum DistributionError {
    #[error("{name}: neither a named distribution ({known}) nor a readable file: {source}")]
    Unknown { name: String, known: String, source: std::io::Error },
    #[error("{path}: expected a JSON array of 12 numbers: {source}")]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("{path}: {source}")]
    Shares { path: PathBuf, source: BinsError },
}

#[derive(Debug, Error)]
pub enum OfflineError {
    #[error(transparent)]
    Distribution(#[from] DistributionError),
    #[error("writing the output: {0}")]
    Output(#[from] serde_json::Error),
}

/// Runs a command; returns the text to print (JSON with a trailing newline, or lines).
pub fn run(command: &Offline) -> Result<String, OfflineError> {
    match command {
        Offline::Stats(args) => json(&stats(args)),
        Offline::Predict(args) => json(&predict_command(args)?),
    }
}

fn json(value: &impl Serialize) -> Result<String, OfflineError> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}

/// The `stats` output: the rates of `docs/algorithms/estimator.md` §2, null where undefined.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub crawls: u64,
    pub requests: u32,
    pub request_rate: Option<f64>,
    pub successes: u32,
    pub failures: u32,
    pub dr: Option<f64>,
    pub download_recall: Option<f64>,
    pub changes: u32,
    pub mr: Option<f64>,
    pub change_recall: Option<f64>,
}

pub fn stats(args: &StatsArgs) -> Stats {
    let crawls = args.crawls.unwrap_or(args.history.chars().count() as u64);
    let page = replay_figure(&args.history);
    let rates = page.rates(crawls);
    Stats {
        crawls,
        requests: page.requests,
        request_rate: rates.request_rate,
        successes: page.successes,
        failures: page.failures,
        dr: rates.download_rate,
        download_recall: rates.download_recall,
        changes: page.changes,
        mr: rates.modification_rate,
        change_recall: rates.change_recall,
    }
}

/// The `predict` output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictOutput {
    pub probabilities: Vec<f64>,
    pub model: Model,
    pub prior: Prior,
}

pub fn predict_command(args: &PredictArgs) -> Result<PredictOutput, OfflineError> {
    let shares = distribution(&args.dist, &DISTRIBUTION_NAMES)?;
    let max_exponent = args.yes.saturating_add(args.no).saturating_add(args.future);
    let prior = PreparedPrior::from_coarse_shares(&shares, max_exponent);
    let prediction = predict(args.model, args.kind, &prior, args.yes, args.no, args.future);
    Ok(PredictOutput { probabilities: prediction.probabilities, model: args.model, prior: prediction.prior })
}

/// One of the `known` named distributions, else a JSON file of shares.
pub fn distribution(name_or_path: &str, known: &[&str]) -> Result<CoarseShares, DistributionError> {
    if let Some(shares) = known.contains(&name_or_path).then(|| named_distribution(name_or_path)).flatten() {
        return Ok(shares);
    }
    let path = Path::new(name_or_path);
    let text = std::fs::read_to_string(path).map_err(|source| DistributionError::Unknown {
        name: name_or_path.to_owned(),
        known: known.join(", "),
        source,
    })?;
    let values: Vec<f64> = serde_json::from_str(&text)
        .map_err(|source| DistributionError::Json { path: path.to_owned(), source })?;
    CoarseShares::new(&values).map_err(|source| DistributionError::Shares { path: path.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        offline: Offline,
    }

    fn parse(args: &[&str]) -> Offline {
        Cli::try_parse_from(std::iter::once("recrawl-estimator").chain(args.iter().copied())).unwrap().offline
    }

    fn output(args: &[&str]) -> serde_json::Value {
        serde_json::from_str(&run(&parse(args)).unwrap()).unwrap()
    }

    #[test]
    fn stats_of_figure_1_d() {
        let stats = output(&["stats", "--history", "!u.!uuvv.w!ww..w"]);
        assert_eq!((stats["requests"].as_u64(), stats["changes"].as_u64()), (Some(12), Some(2)));
        assert_eq!((stats["dr"].as_f64(), stats["mr"].as_f64()), (Some(0.75), Some(0.25)));
        assert_eq!(stats["change_recall"].as_f64(), Some(8.0 / 15.0));
        assert_eq!(stats["crawls"].as_u64(), Some(16));
        let early = output(&["stats", "--history", "!", "--crawls", "3"]);
        assert_eq!((early["mr"].is_null(), early["download_recall"].as_f64()), (true, Some(1.0 / 3.0)));
    }

    #[test]
    fn predict_figure_2() {
        let args = [
            "predict",
            "--kind",
            "dr",
            "--yes",
            "0",
            "--no",
            "2",
            "--future",
            "3",
            "--dist",
            "paper-popular",
        ];
        let prediction = output(&args);
        let probabilities: Vec<f64> = serde_json::from_value(prediction["probabilities"].clone()).unwrap();
        assert_eq!(probabilities.len(), 4);
        assert_eq!((probabilities[0] * 1e4).round(), 9992.0);
        assert!((probabilities.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(
            (prediction["model"].as_str(), prediction["prior"].as_str()),
            (Some("paper"), Some("group"))
        );
    }

    #[test]
    fn predict_from_a_file_in_percent() {
        let dir = tempfile::tempdir().unwrap();
        let percent = dir.path().join("popular.json");
        std::fs::write(
            &percent,
            "[22.01, 0.06, 0.04, 0.06, 0.04, 0.05, 0.07, 0.07, 0.09, 0.33, 9.53, 67.66]",
        )
        .unwrap();
        let file = percent.to_str().unwrap();
        for model in ["paper", "beta-binomial"] {
            let args =
                ["predict", "--kind", "mr", "--yes", "0", "--no", "2", "--future", "3", "--model", model];
            let from_file = output(&[&args[..], &["--dist", file]].concat());
            let named = output(&[&args[..], &["--dist", "paper-popular"]].concat());
            let (a, b): (Vec<f64>, Vec<f64>) = (
                serde_json::from_value(from_file["probabilities"].clone()).unwrap(),
                serde_json::from_value(named["probabilities"].clone()).unwrap(),
            );
            assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-12), "{model}: {a:?} vs {b:?}");
        }
    }

    #[test]
    fn predict_reports_a_uniform_fallback_and_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        let zeros = dir.path().join("zeros.json");
        std::fs::write(&zeros, serde_json::to_string(&[0.0; 12]).unwrap()).unwrap();
        let args = ["predict", "--kind", "dr", "--yes", "1", "--no", "1", "--future", "1", "--dist"];
        let fallback = output(&[&args[..], &[zeros.to_str().unwrap()]].concat());
        assert_eq!(fallback["prior"].as_str(), Some("uniform"));
        assert_eq!(fallback["probabilities"], serde_json::json!([0.5, 0.5]));

        let short = dir.path().join("short.json");
        std::fs::write(&short, "[1, 2, 3]").unwrap();
        let error = run(&parse(&[&args[..], &[short.to_str().unwrap()]].concat())).unwrap_err();
        assert!(matches!(
            error,
            OfflineError::Distribution(DistributionError::Shares {
                source: BinsError::CoarseLength { found: 3 },
                ..
            })
        ));
        assert!(error.to_string().contains("short.json"), "{error}");

        let missing = dir.path().join("paper-populr");
        let error = run(&parse(&[&args[..], &[missing.to_str().unwrap()]].concat())).unwrap_err();
        assert!(error.to_string().contains("paper-populr") && error.to_string().contains("paper-popular"));
    }
}
