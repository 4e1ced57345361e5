use std::io::Write;

use anyhow::Context;
use clap::Parser;
use recrawl_diff::offline::{criteria, score, Offline};

/// recrawl diff: previous version of every page, change events from fetch results.
/// Without a subcommand it runs the stage.
#[derive(Debug, Parser)]
#[command(
    name = "recrawl-diff",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    offline: Option<Offline>,
    #[command(flatten)]
    args: Option<recrawl_diff::DiffArgs>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.offline {
        None => {
            let args = cli.args.context("the stage needs its flags (see --help)")?;
            recrawl_diff::main(args).await
        }
        Some(Offline::Score(args)) => {
            let read = |path: &std::path::Path| {
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))
            };
            let result = score(&read(&args.old)?, &read(&args.new)?, args.input(), &args.compare);
            let mut stdout = std::io::stdout().lock();
            serde_json::to_writer(&mut stdout, &result)?;
            writeln!(stdout)?;
            Ok(())
        }
        Some(Offline::Criteria(args)) => {
            print!("{}", criteria(&args)?);
            println!("\nWritten to {}", args.out.display());
            Ok(())
        }
    }
}
