use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use recrawl_lab::criteria::{criteria, CriteriaArgs};
use recrawl_lab::evaluate::{evaluate_command, generate_command, EvaluateArgs, GenerateArgs};
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
}

fn run(command: Command) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match command {
        Command::Paper(args) => paper::run(&args)?,
        Command::Criteria(args) => {
            write!(stdout, "{}", criteria(&args)?)?;
            writeln!(stdout, "\nWritten to {}", args.out.display())?;
        }
        Command::Evaluate(args) => stdout.write_all(evaluate_command(&args)?.as_bytes())?,
        Command::Generate(args) => stdout.write_all(generate_command(&args)?.as_bytes())?,
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: {error:#}");
            ExitCode::FAILURE
        }
    }
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
