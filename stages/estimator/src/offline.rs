//! The offline commands: a URL's rates (`stats`), one prediction (`predict`), the paper's
//! evaluation (`evaluate`) and synthetic histories for it (`generate`). They run the
//! stage's own code; [`run`] returns the text to print.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;
use thiserror::Error;

use crate::evaluate::{evaluate, generate, parse_histories, EvaluateConfig, EvaluateError, GenerateConfig};
use recrawl_model::history::replay_figure;
use recrawl_model::prediction::{
    named_distribution, predict, BinsError, CoarseShares, Eligibility, Kind, Model, PreparedPrior, Prior,
    DISTRIBUTION_NAMES, MAX_FUTURE,
};

#[derive(Debug, Subcommand)]
pub enum Offline {
    /// The rates of one history written as in the paper's Figure 1 (`.` not requested,
    /// `!` failed, any other character: downloaded content).
    Stats(StatsArgs),
    /// The distribution of successes (changes) over the next requests (comparisons).
    Predict(PredictArgs),
    /// The paper's evaluation protocol on `group<TAB>history` lines, per group and model.
    Evaluate(EvaluateArgs),
    /// Synthetic `group<TAB>history` lines drawn from rate distributions.
    Generate(GenerateArgs),
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
    /// How the prediction uses the group distribution (default: the paper's).
    #[arg(long, value_enum, default_value_t)]
    pub model: Model,
}

#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// `group<TAB>history` lines; blank lines and `#` comments are skipped.
    #[arg(long)]
    pub histories: PathBuf,
    /// What to predict: dr, downloads among requests; mr, changes among comparisons.
    #[arg(long, value_enum)]
    pub kind: Kind,
    /// One model only; all of them by default.
    #[arg(long, value_enum)]
    pub model: Option<Model>,
    /// Requests (comparisons) a prediction conditions on.
    #[arg(long, default_value_t = 5)]
    pub window: u32,
    /// Requests (comparisons) predicted: the last crawls of the histories.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_FUTURE)))]
    pub future: u32,
    /// Least request rate of a URL counted in its group's distribution.
    #[arg(long, default_value_t = Eligibility::default().min_request_rate, value_parser = recrawl_common::config::unit_interval)]
    pub min_request_rate: f64,
    /// Least download (DR) or change (MR) recall of a URL counted in its group's distribution.
    #[arg(long, default_value_t = Eligibility::default().min_recall, value_parser = recrawl_common::config::unit_interval)]
    pub min_recall: f64,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The group name written before each history (e.g. popular).
    #[arg(long)]
    pub group: String,
    /// Histories to generate, one URL each.
    #[arg(long)]
    pub urls: usize,
    /// Crawls in each history (the paper's protocol: 55 daily crawls).
    #[arg(long, default_value_t = 55)]
    pub crawls: usize,
    /// Download rate distribution: paper-popular, paper-random, or a JSON file of 12 shares.
    #[arg(long, default_value = "paper-popular")]
    pub dr: String,
    /// Modification rate distribution: synthetic (an assumption: the paper published
    /// none) or a JSON file of 12 shares.
    #[arg(long, default_value = "synthetic")]
    pub mr: String,
    /// Seed of the random draws: the same seed, the same histories.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug, Error)]
pub enum OfflineError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{name}: neither a named distribution ({known}) nor a readable file: {source}")]
    Distribution { name: String, known: String, source: std::io::Error },
    #[error("{path}: expected a JSON array of 12 numbers: {source}")]
    SharesJson { path: PathBuf, source: serde_json::Error },
    #[error("{path}: {source}")]
    Shares { path: PathBuf, source: BinsError },
    #[error("{path}: {source}")]
    Histories { path: PathBuf, source: EvaluateError },
    #[error(transparent)]
    Evaluate(#[from] EvaluateError),
    #[error("writing the output: {0}")]
    Output(#[from] serde_json::Error),
}

/// Runs a command; returns the text to print (JSON with a trailing newline, or lines).
pub fn run(command: &Offline) -> Result<String, OfflineError> {
    match command {
        Offline::Stats(args) => json(&stats(args)),
        Offline::Predict(args) => json(&predict_command(args)?),
        Offline::Evaluate(args) => {
            let path = &args.histories;
            let text = std::fs::read_to_string(path)
                .map_err(|source| OfflineError::Read { path: path.clone(), source })?;
            let histories = parse_histories(&text)
                .map_err(|source| OfflineError::Histories { path: path.clone(), source })?;
            json(&evaluate(&histories, &evaluate_config(args))?)
        }
        Offline::Generate(args) => {
            let lines = generate(&generate_config(args)?)?;
            Ok(lines.iter().map(|(group, history)| format!("{group}\t{history}\n")).collect())
        }
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

pub fn evaluate_config(args: &EvaluateArgs) -> EvaluateConfig {
    EvaluateConfig {
        kind: args.kind,
        models: args.model.map_or_else(|| Model::value_variants().to_vec(), |model| vec![model]),
        window: args.window,
        future: args.future,
        eligibility: Eligibility { min_request_rate: args.min_request_rate, min_recall: args.min_recall },
    }
}

pub fn generate_config(args: &GenerateArgs) -> Result<GenerateConfig, OfflineError> {
    Ok(GenerateConfig {
        group: args.group.clone(),
        urls: args.urls,
        crawls: args.crawls,
        // Table 1 is DR data only: the paper's MR table is a misprint of it.
        dr_shares: distribution(&args.dr, &["paper-popular", "paper-random"])?,
        mr_shares: distribution(&args.mr, &["synthetic"])?,
        seed: args.seed,
    })
}

/// One of the `known` named distributions, else a JSON file of shares.
fn distribution(name_or_path: &str, known: &[&str]) -> Result<CoarseShares, OfflineError> {
    if let Some(shares) = known.contains(&name_or_path).then(|| named_distribution(name_or_path)).flatten() {
        return Ok(shares);
    }
    let path = Path::new(name_or_path);
    let text = std::fs::read_to_string(path).map_err(|source| OfflineError::Distribution {
        name: name_or_path.to_owned(),
        known: known.join(", "),
        source,
    })?;
    let values: Vec<f64> = serde_json::from_str(&text)
        .map_err(|source| OfflineError::SharesJson { path: path.to_owned(), source })?;
    CoarseShares::new(&values).map_err(|source| OfflineError::Shares { path: path.to_owned(), source })
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
        assert!(matches!(error, OfflineError::Shares { source: BinsError::CoarseLength { found: 3 }, .. }));
        assert!(error.to_string().contains("short.json"), "{error}");

        let missing = dir.path().join("paper-populr");
        let error = run(&parse(&[&args[..], &[missing.to_str().unwrap()]].concat())).unwrap_err();
        assert!(error.to_string().contains("paper-populr") && error.to_string().contains("paper-popular"));
        let table_1_as_mr = ["generate", "--group", "g", "--urls", "1", "--mr", "paper-popular"];
        assert!(matches!(run(&parse(&table_1_as_mr)), Err(OfflineError::Distribution { .. })));
    }

    #[test]
    fn generate_then_evaluate() {
        let generated =
            run(&parse(&["generate", "--group", "popular", "--urls", "300", "--seed", "3"])).unwrap();
        assert_eq!(generated.lines().count(), 300);
        assert!(generated
            .lines()
            .all(|line| line.starts_with("popular\t") && line.len() == "popular\t".len() + 55));
        let dir = tempfile::tempdir().unwrap();
        let histories = dir.path().join("histories.tsv");
        std::fs::write(&histories, &generated).unwrap();
        let report = output(&["evaluate", "--histories", histories.to_str().unwrap(), "--kind", "dr"]);
        let rows = report["rows"].as_array().unwrap();
        let models: Vec<&str> = rows.iter().filter_map(|row| row["model"].as_str()).collect();
        assert_eq!(models, ["paper", "beta-binomial", "poisson"]);
        assert!(rows
            .iter()
            .all(|row| row["n"].as_u64() == Some(300) && row["misprediction_rate"].is_number()));
        let paper_only = output(&[
            "evaluate",
            "--histories",
            histories.to_str().unwrap(),
            "--kind",
            "mr",
            "--model",
            "paper",
        ]);
        assert_eq!(paper_only["rows"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn evaluate_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let histories = dir.path().join("broken.tsv");
        std::fs::write(&histories, "g\taaaaaaaaaaa\ng aaaaaaaaaaa\n").unwrap();
        let error = run(&parse(&["evaluate", "--histories", histories.to_str().unwrap(), "--kind", "dr"]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("broken.tsv") && error.contains("line 2"), "{error}");
        assert!(Cli::try_parse_from([
            "x",
            "evaluate",
            "--histories",
            "h",
            "--kind",
            "dr",
            "--min-recall",
            "2"
        ])
        .is_err());
    }
}
