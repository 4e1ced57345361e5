use std::process::ExitCode;

use clap::{Parser, Subcommand};
use recrawl_common::service::{block_on_main, print, print_line};
use recrawl_lab::changes::{changes_report, ChangesArgs};
use recrawl_lab::criteria::{criteria, CriteriaArgs};
use recrawl_lab::evaluate::{evaluate_command, generate_command, EvaluateArgs, GenerateArgs};
use recrawl_lab::histories::{histories, HistoriesArgs};
use recrawl_lab::paper::{self, PaperArgs};

/// recrawl lab: the papers' experiments, reproduced with the stages' own code.
#[derive(Debug, Parser)]
#[command(name = "recrawl-lab", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Reproduce the papers' experiments on the simulated web (CSV, SVG, Markdown).
    Paper(PaperArgs),
    /// Reproduce the change-degree paper's experiment 2 (or 3 with --sizes): CSVs, SVG
    /// charts, a summary.
    Criteria(CriteriaArgs),
    /// The estimator paper's evaluation protocol on `group<TAB>history` lines, per group
    /// and model.
    Evaluate(EvaluateArgs),
    /// Synthetic `group<TAB>history` lines drawn from rate distributions.
    Generate(GenerateArgs),
    /// A world of the simulator's family as daily change histories, the format
    /// `recrawl sim --replay` reads.
    Histories(HistoriesArgs),
    /// A report of a run's change events (`recrawl tail change-events` JSON lines): change
    /// share per host over the periods, change degrees, hour of day, the most changed pages.
    Changes(ChangesArgs),
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Paper(args) => paper::run(&args)?,
        Command::Criteria(args) => {
            print(criteria(&args)?)?;
            print_line(format_args!("\nWritten to {}", args.out.display()))?;
        }
        Command::Evaluate(args) => print(evaluate_command(&args)?)?,
        Command::Generate(args) => print(generate_command(&args)?)?,
        Command::Histories(args) => print(histories(&args))?,
        Command::Changes(args) => {
            changes_report(&args)?;
            print_line(format_args!("Written to {}", args.out.display()))?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let command = Cli::parse().command;
    // The shared exit path: one line per error, and a closed stdout is not one.
    block_on_main(async move { run(command) })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use recrawl_common::service::without_help;

    #[test]
    fn every_flag_and_subcommand_has_help() {
        assert_eq!(without_help(&super::Cli::command()), Vec::<String>::new());
    }
}
