//! The paper's effectiveness experiments (`docs/algorithms/change-degree.md` §1, §4): documents
//! changed by one kind of change at a time (`recrawl_diff::criteria`), each metric's degree
//! against the kind's reference degree. Experiment 2 varies the share of changed words in a
//! 1,000-word document (Figure 7); experiment 3 varies the document size with a quarter
//! changed (Figure 8).

mod files;
mod trials;

pub use files::{kind_chart, kind_csv, summary_csv, summary_markdown, write_report, Axis};
pub use trials::{by_share_changed, by_size, deviation, Deviation, Trial};

use std::path::PathBuf;

use clap::Args;
use recrawl_diff::change::Differ;
use recrawl_diff::CompareArgs;

use crate::report::ReportError;

#[derive(Debug, Args)]
pub struct CriteriaArgs {
    /// Words in the document of experiment 2.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(20..=1_000_000))]
    pub words: u64,
    /// Experiment 3 instead: 2² … 2¹³ words, a quarter changed.
    #[arg(long)]
    pub sizes: bool,
    /// Directory for the CSVs, charts and summary.
    #[arg(long, default_value = "criteria")]
    pub out: PathBuf,
    /// The reference's copy/shrink weight α.
    #[arg(long, default_value_t = 0.75, value_parser = recrawl_common::config::unit_interval)]
    pub alpha: f64,
    /// The reference's move weight β.
    #[arg(long, default_value_t = 0.75, value_parser = recrawl_common::config::unit_interval)]
    pub beta: f64,
    #[command(flatten)]
    pub compare: CompareArgs,
}

/// Runs `criteria`; returns the Markdown summary it wrote.
pub fn criteria(args: &CriteriaArgs) -> Result<String, ReportError> {
    let differ = Differ::new(args.compare.settings());
    let (s, t, k) = (args.compare.s, args.compare.t, args.compare.k);
    let (trials, axis, title) = if args.sizes {
        (
            by_size(&differ, args.alpha, args.beta),
            Axis::Words,
            format!(
                "Experiment 3: 2² … 2¹³ words, a quarter changed (α = {}, β = {}, s = {s}, t = {t}, {k}-SH)",
                args.alpha, args.beta
            ),
        )
    } else {
        (
            by_share_changed(&differ, args.words as usize, args.alpha, args.beta),
            Axis::ShareChanged,
            format!(
                "Experiment 2: {} words, 5 % … 95 % changed (α = {}, β = {}, s = {s}, t = {t}, {k}-SH)",
                args.words, args.alpha, args.beta
            ),
        )
    };
    write_report(&trials, axis, &title, &args.out)
}
