//! The paper's evaluation protocol (`docs/algorithms/estimator.md` §5) for every model, and a
//! generator of synthetic histories to run it on; `recrawl-lab evaluate` and `generate`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use recrawl::sim::web::draw_rate;
use recrawl_estimator::offline::{distribution, DistributionError};
use serde::Serialize;
use thiserror::Error;

use recrawl_model::history::{replay_figure, Symbol};
use recrawl_model::prediction::{
    fine_bin, predict, CoarseShares, Eligibility, Kind, Model, PreparedPrior, Prior, RateHistogram,
    MAX_FUTURE,
};

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EvaluateError {
    #[error("line {line}: expected group<TAB>history")]
    MissingTab { line: usize },
    #[error("group {group}: a history of {found} crawls among histories of {expected}")]
    LengthMismatch { group: String, expected: usize, found: usize },
    #[error("group {group}: {crawls} crawls, the protocol needs at least {needed}")]
    TooShort { group: String, crawls: usize, needed: usize },
    #[error("the {kind} distribution to generate from has no weight in any bin")]
    EmptyDistribution { kind: Kind },
}

/// Reads `group<TAB>history` lines; blank lines and `#` comments are skipped.
pub fn parse_histories(text: &str) -> Result<Vec<(String, String)>, EvaluateError> {
    text.lines()
        .zip(1..)
        .filter(|(line, _)| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|(line, number)| {
            let (group, history) = line.split_once('\t').ok_or(EvaluateError::MissingTab { line: number })?;
            Ok((group.to_owned(), history.to_owned()))
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
pub struct EvaluateConfig {
    pub kind: Kind,
    pub models: Vec<Model>,
    /// Requests (comparisons) a prediction conditions on.
    pub window: u32,
    /// Requests (comparisons) predicted: the last `future` crawls.
    pub future: u32,
    pub eligibility: Eligibility,
}

impl Default for EvaluateConfig {
    /// The paper's protocol, every model.
    fn default() -> Self {
        Self {
            kind: Kind::Dr,
            models: vec![Model::Paper, Model::BetaBinomial, Model::Poisson],
            window: 5,
            future: 5,
            eligibility: Eligibility::PAPER,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvaluateReport {
    pub kind: Kind,
    pub window: u32,
    pub future: u32,
    /// One row per group and model, groups in name order.
    pub rows: Vec<EvaluateRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvaluateRow {
    pub group: String,
    pub model: Model,
    /// Eligible URLs in the group's distribution (from the crawls before the predicted ones).
    pub distribution_urls: u64,
    /// URLs predicted: requested (DR) or downloaded (MR) in every crawl of the protocol.
    pub n: u64,
    /// Of them, predicted with the uniform fallback prior.
    pub uniform_priors: u64,
    /// Expected number of URLs with c successes (changes), c = 0..=future.
    pub predicted: Vec<f64>,
    pub actual: Vec<u64>,
    /// Σ_c |predicted_c − actual_c| / 2 / n; `None` when n = 0.
    pub misprediction_rate: Option<f64>,
}

/// Runs the protocol on every group of `histories` (Figure 1 strings). A URL's
/// prediction depends only on its count in the window, so each model predicts once per
/// count.
pub fn evaluate(
    histories: &[(String, String)],
    config: &EvaluateConfig,
) -> Result<EvaluateReport, EvaluateError> {
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (group, history) in histories {
        groups.entry(group).or_default().push(history);
    }
    let mut rows = Vec::new();
    for (group, histories) in groups {
        let tally = tally_group(group, &histories, config)?;
        let prior = PreparedPrior::new(&tally.distribution, config.window.saturating_add(config.future));
        for &model in &config.models {
            rows.push(tally.row(group, model, &prior, config));
        }
    }
    Ok(EvaluateReport { kind: config.kind, window: config.window, future: config.future, rows })
}

/// What the protocol needs from a group's histories.
struct GroupTally {
    distribution: RateHistogram,
    /// URLs predicted, by their successes (changes) in the window.
    by_window_count: Vec<u64>,
    /// URLs predicted, by their successes (changes) in the future crawls.
    actual: Vec<u64>,
}

fn tally_group(
    group: &str,
    histories: &[&str],
    config: &EvaluateConfig,
) -> Result<GroupTally, EvaluateError> {
    let crawls = histories.first().map_or(0, |history| history.chars().count());
    let (window, future) = (config.window as usize, config.future as usize);
    // MR compares each download with the one before: one more crawl than comparisons.
    let protocol = window + future + usize::from(config.kind == Kind::Mr);
    if crawls < protocol {
        return Err(EvaluateError::TooShort { group: group.to_owned(), crawls, needed: protocol });
    }
    let known = crawls - future;
    let mut tally = GroupTally {
        distribution: RateHistogram::new(),
        by_window_count: vec![0; window + 1],
        actual: vec![0; future + 1],
    };
    for history in histories {
        let found = history.chars().count();
        if found != crawls {
            return Err(EvaluateError::LengthMismatch { group: group.to_owned(), expected: crawls, found });
        }
        let known_end = history.char_indices().nth(known).map_or(history.len(), |(at, _)| at);
        let rates = replay_figure(&history[..known_end]).rates(known as u64);
        if let Some(rate) = config.eligibility.eligible_rate(config.kind, &rates) {
            tally.distribution.add(fine_bin(rate));
        }
        let symbols: Vec<Symbol> = history.chars().skip(crawls - protocol).map(Symbol::parse).collect();
        let outcomes = match config.kind {
            Kind::Dr => request_outcomes(&symbols),
            Kind::Mr => comparison_outcomes(&symbols),
        };
        if let Some(outcomes) = outcomes {
            let (past, coming) = outcomes.split_at(window);
            tally.by_window_count[past.iter().filter(|yes| **yes).count()] += 1;
            tally.actual[coming.iter().filter(|yes| **yes).count()] += 1;
        }
    }
    Ok(tally)
}

/// Downloaded or not at each crawl; `None` unless every crawl is a request.
fn request_outcomes(symbols: &[Symbol]) -> Option<Vec<bool>> {
    symbols
        .iter()
        .map(|symbol| match symbol {
            Symbol::Skipped => None,
            Symbol::Failed => Some(false),
            Symbol::Downloaded(_) => Some(true),
        })
        .collect()
}

/// Changed or not between consecutive crawls; `None` unless every crawl is a download.
fn comparison_outcomes(symbols: &[Symbol]) -> Option<Vec<bool>> {
    let contents: Vec<char> = symbols
        .iter()
        .map(|symbol| match symbol {
            Symbol::Downloaded(content) => Some(*content),
            Symbol::Skipped | Symbol::Failed => None,
        })
        .collect::<Option<_>>()?;
    Some(contents.windows(2).map(|pair| pair[0] != pair[1]).collect())
}

impl GroupTally {
    fn row(&self, group: &str, model: Model, prior: &PreparedPrior, config: &EvaluateConfig) -> EvaluateRow {
        let mut predicted = vec![0.0; self.actual.len()];
        let mut uniform_priors = 0;
        for (yes, &urls) in (0..).zip(&self.by_window_count) {
            if urls == 0 {
                continue;
            }
            let prediction = predict(model, config.kind, prior, yes, config.window - yes, config.future);
            for (expected, probability) in predicted.iter_mut().zip(&prediction.probabilities) {
                *expected += urls as f64 * probability;
            }
            if prediction.prior == Prior::Uniform {
                uniform_priors += urls;
            }
        }
        let n: u64 = self.actual.iter().sum();
        let distance: f64 = predicted
            .iter()
            .zip(&self.actual)
            .map(|(expected, actual)| (expected - *actual as f64).abs())
            .sum();
        EvaluateRow {
            group: group.to_owned(),
            model,
            distribution_urls: self.distribution.total(),
            n,
            uniform_priors,
            misprediction_rate: (n > 0).then(|| distance / 2.0 / n as f64),
            predicted,
            actual: self.actual.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct GenerateConfig {
    pub group: String,
    pub urls: usize,
    pub crawls: usize,
    /// Distribution of the URLs' download probability.
    pub dr_shares: CoarseShares,
    /// Distribution of the URLs' probability of a change between two downloads.
    pub mr_shares: CoarseShares,
    pub seed: u64,
}

/// Synthetic `group<TAB>history` pairs: each URL draws a download probability θ and a
/// change probability from the distributions (a coarse bin by its share, then uniformly
/// within it; exactly 0 or 1 for the end bins), then is requested at every crawl. The same
/// seed gives the same histories.
pub fn generate(config: &GenerateConfig) -> Result<Vec<(String, String)>, EvaluateError> {
    for (kind, shares) in [(Kind::Dr, &config.dr_shares), (Kind::Mr, &config.mr_shares)] {
        if shares.is_empty() {
            return Err(EvaluateError::EmptyDistribution { kind });
        }
    }
    let mut rng = Pcg64::seed_from_u64(config.seed);
    let histories = (0..config.urls)
        .map(|_| {
            let download = draw_rate(&config.dr_shares, &mut rng);
            let change = draw_rate(&config.mr_shares, &mut rng);
            let mut content: Option<u8> = None;
            let history = (0..config.crawls)
                .map(|_| {
                    if rng.random::<f64>() >= download {
                        return '!';
                    }
                    let next = match content {
                        None => 0,
                        // A change shows as the next letter: different from the previous download.
                        Some(previous) if rng.random::<f64>() < change => (previous + 1) % 26,
                        Some(previous) => previous,
                    };
                    content = Some(next);
                    char::from(b'a' + next)
                })
                .collect();
            (config.group.clone(), history)
        })
        .collect();
    Ok(histories)
}

/// `recrawl-lab evaluate`: the §5 protocol on `group<TAB>history` lines.
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
    #[arg(long, default_value_t = Eligibility::PAPER.min_request_rate, value_parser = recrawl_common::config::unit_interval)]
    pub min_request_rate: f64,
    /// Least download (DR) or change (MR) recall of a URL counted in its group's distribution.
    #[arg(long, default_value_t = Eligibility::PAPER.min_recall, value_parser = recrawl_common::config::unit_interval)]
    pub min_recall: f64,
}

/// `recrawl-lab generate`: synthetic `group<TAB>history` lines.
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

/// Why `evaluate` or `generate` cannot run.
#[derive(Debug, Error)]
pub enum CommandError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Histories { path: PathBuf, source: EvaluateError },
    #[error(transparent)]
    Evaluate(#[from] EvaluateError),
    #[error(transparent)]
    Distribution(#[from] DistributionError),
    #[error("writing the output: {0}")]
    Output(#[from] serde_json::Error),
}

/// Runs `evaluate`; returns the report as pretty JSON with a trailing newline.
pub fn evaluate_command(args: &EvaluateArgs) -> Result<String, CommandError> {
    let path = &args.histories;
    let text =
        std::fs::read_to_string(path).map_err(|source| CommandError::Read { path: path.clone(), source })?;
    let histories =
        parse_histories(&text).map_err(|source| CommandError::Histories { path: path.clone(), source })?;
    let mut json = serde_json::to_string_pretty(&evaluate(&histories, &evaluate_config(args))?)?;
    json.push('\n');
    Ok(json)
}

/// Runs `generate`; returns the lines.
pub fn generate_command(args: &GenerateArgs) -> Result<String, CommandError> {
    let lines = generate(&generate_config(args)?)?;
    Ok(lines.iter().map(|(group, history)| format!("{group}\t{history}\n")).collect())
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

pub fn generate_config(args: &GenerateArgs) -> Result<GenerateConfig, DistributionError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use recrawl_model::prediction::{PAPER_POPULAR, SYNTHETIC_MR};

    fn histories(lines: &[(&str, &str)]) -> Vec<(String, String)> {
        lines.iter().map(|(group, history)| (group.to_string(), history.to_string())).collect()
    }

    fn config(kind: Kind, models: &[Model], window: u32, future: u32) -> EvaluateConfig {
        EvaluateConfig { kind, models: models.to_vec(), window, future, ..EvaluateConfig::default() }
    }

    #[test]
    fn parses_lines_and_names_the_bad_one() {
        let text = "# group\thistory\n\npopular\taa!a\nrandom\t..b!\r\n";
        assert_eq!(parse_histories(text), Ok(histories(&[("popular", "aa!a"), ("random", "..b!")])));
        assert_eq!(parse_histories("g\taaa\n\ng aaa\n"), Err(EvaluateError::MissingTab { line: 3 }));
    }

    #[test]
    fn download_protocol_by_hand() {
        // Window 2, future 2: the distribution is built from crawls 1–3 (K = 3).
        let set = histories(&[
            ("g", "aaaaa"), // prefix DR 1 → bin 100; window 2 successes; future 2
            ("g", "a!a!a"), // prefix DR 2/3 → bin 66; window 1 (! a); future 1 (! a)
            ("g", "aa.!!"), // prefix DR 1 → bin 100; skipped in the window: not predicted
            ("g", "!!!!!"), // prefix DR 0 → bin 0; window 0; future 0
        ]);
        let report = evaluate(&set, &config(Kind::Dr, &[Model::Paper], 2, 2)).unwrap();
        let row = &report.rows[0];
        assert_eq!((row.n, row.distribution_urls), (3, 4));
        assert_eq!(row.actual, [1, 1, 1]);
        // Coarse shares: {0} 1/4, 0.60–0.69 1/4 (0.025 per step), {1} 2/4.
        // a = 2, b = 0 → x = 2/4, 3/4, 4/4: only x = 1 has weight → [0, 0, 1].
        // a = 1, b = 1 → x = 1/4, 2/4, 3/4: no weight → uniform [1/3, 1/3, 1/3].
        // a = 0, b = 2 → x = 0, 1/4, 2/4: only x = 0 → [1, 0, 0].
        let third = 1.0 / 3.0;
        let expected = [1.0 + third, third, 1.0 + third];
        for (p, e) in row.predicted.iter().zip(expected) {
            assert!((p - e).abs() < 1e-12, "{:?}", row.predicted);
        }
        assert_eq!(row.uniform_priors, 1);
        let distance = 2.0 * third + 2.0 * third;
        assert!((row.misprediction_rate.unwrap() - distance / 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn modification_protocol_compares_across_the_boundary() {
        // Window 2 comparisons over crawls 2–4, future 2 over crawls 4–6.
        let set = histories(&[("g", "xaabbc"), ("g", "xaaaaa"), ("g", "xa!aaa")]);
        let report = evaluate(&set, &config(Kind::Mr, &[Model::Poisson], 2, 2)).unwrap();
        let row = &report.rows[0];
        // "xaabbc": window a→a, a→b (1 change); future b→b, b→c (1). "xaaaaa": 0 and 0.
        assert_eq!((row.n, row.actual.clone()), (2, vec![1, 1, 0]));
        assert_eq!(row.uniform_priors, 0);
        // Poisson: 1 change in 2 → p = 1/2.5; 0 changes → p = 0.
        let p = 1.0 / 2.5;
        let expected = [(1.0 - p) * (1.0 - p) + 1.0, 2.0 * p * (1.0 - p), p * p];
        for (got, want) in row.predicted.iter().zip(expected) {
            assert!((got - want).abs() < 1e-12);
        }
    }

    #[test]
    fn every_group_and_model_gets_a_row() {
        let set = histories(&[("b", "aaaaaa"), ("a", "a!a!a!"), ("b", "!!!!!!")]);
        let report = evaluate(&set, &config(Kind::Dr, &[Model::Paper, Model::Poisson], 2, 2)).unwrap();
        let rows: Vec<(&str, Model)> =
            report.rows.iter().map(|row| (row.group.as_str(), row.model)).collect();
        assert_eq!(
            rows,
            [("a", Model::Paper), ("a", Model::Poisson), ("b", Model::Paper), ("b", Model::Poisson)]
        );
        assert!(report
            .rows
            .iter()
            .all(|row| (row.predicted.iter().sum::<f64>() - row.n as f64).abs() < 1e-9));
    }

    #[test]
    fn histories_must_fit_the_protocol() {
        let mismatched = histories(&[("g", "aaaaaa"), ("h", "aaa"), ("g", "aaaaa")]);
        assert_eq!(
            evaluate(&mismatched, &config(Kind::Dr, &[Model::Paper], 2, 2)),
            Err(EvaluateError::LengthMismatch { group: "g".into(), expected: 6, found: 5 })
        );
        let short = histories(&[("g", "aaaa")]);
        assert_eq!(
            evaluate(&short, &config(Kind::Mr, &[Model::Paper], 2, 2)),
            Err(EvaluateError::TooShort { group: "g".into(), crawls: 4, needed: 5 })
        );
    }

    fn popular(urls: usize, seed: u64) -> GenerateConfig {
        GenerateConfig {
            group: "popular".into(),
            urls,
            crawls: 55,
            dr_shares: PAPER_POPULAR,
            mr_shares: SYNTHETIC_MR,
            seed,
        }
    }

    #[test]
    fn generation_is_reproducible() {
        let first = generate(&popular(50, 7)).unwrap();
        assert_eq!(first, generate(&popular(50, 7)).unwrap());
        assert_ne!(first, generate(&popular(50, 8)).unwrap());
        assert!(first.iter().all(|(group, history)| group == "popular" && history.chars().count() == 55));
        assert!(first.iter().all(|(_, history)| history.chars().all(|c| c == '!' || c.is_ascii_lowercase())));
    }

    #[test]
    fn generated_histories_follow_table_1() {
        let generated = generate(&popular(20_000, 1)).unwrap();
        let always = generated.iter().filter(|(_, history)| !history.contains('!')).count() as f64 / 20_000.0;
        // {1} always downloads; a θ drawn in 0.90–0.99 does so 55 times with probability
        // ∫ θ⁵⁵ dθ / 0.1 over [0.9, 1) = (1 − 0.9⁵⁶) / 5.6.
        let shares = PAPER_POPULAR.values();
        let expected = (shares[11] + shares[10] * (1.0 - 0.9f64.powi(56)) / 5.6) / PAPER_POPULAR.total();
        assert!((always - expected).abs() < 0.02, "{always} vs {expected}");
        let never = generated.iter().filter(|(_, history)| history.chars().all(|c| c == '!')).count() as f64;
        assert!((never / 20_000.0 - 0.2201).abs() < 0.02);
    }

    #[test]
    fn an_empty_distribution_cannot_be_drawn_from() {
        let empty = CoarseShares::new(&[0.0; 12]).unwrap();
        let config = GenerateConfig { mr_shares: empty, ..popular(1, 1) };
        assert_eq!(generate(&config), Err(EvaluateError::EmptyDistribution { kind: Kind::Mr }));
    }

    mod commands {
        use clap::Parser;

        use super::super::*;

        #[derive(Debug, Parser)]
        enum Cli {
            Evaluate(EvaluateArgs),
            Generate(GenerateArgs),
        }

        fn run(args: &[&str]) -> Result<String, CommandError> {
            match Cli::try_parse_from(std::iter::once("recrawl-lab").chain(args.iter().copied())).unwrap() {
                Cli::Evaluate(args) => evaluate_command(&args),
                Cli::Generate(args) => generate_command(&args),
            }
        }

        fn output(args: &[&str]) -> serde_json::Value {
            serde_json::from_str(&run(args).unwrap()).unwrap()
        }

        #[test]
        fn generate_then_evaluate() {
            let generated = run(&["generate", "--group", "popular", "--urls", "300", "--seed", "3"]).unwrap();
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
            let error = run(&["evaluate", "--histories", histories.to_str().unwrap(), "--kind", "dr"])
                .unwrap_err()
                .to_string();
            assert!(error.contains("broken.tsv") && error.contains("line 2"), "{error}");
            assert!(Cli::try_parse_from([
                "recrawl-lab",
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

        #[test]
        fn table_1_is_not_an_mr_distribution() {
            let table_1_as_mr = ["generate", "--group", "g", "--urls", "1", "--mr", "paper-popular"];
            assert!(matches!(
                run(&table_1_as_mr),
                Err(CommandError::Distribution(DistributionError::Unknown { .. }))
            ));
        }
    }
}
