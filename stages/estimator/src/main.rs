use std::io::Write;

use anyhow::Context;
use clap::Parser;
use recrawl_estimator::offline::Offline;

/// recrawl estimator: per-URL download and modification rates, forecasts and refresh
/// plans from the change events. Without a subcommand it runs the stage.
#[derive(Debug, Parser)]
#[command(
    name = "recrawl-estimator",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    offline: Option<Offline>,
    #[command(flatten)]
    args: Option<recrawl_estimator::EstimatorArgs>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.offline {
        None => {
            let args = cli.args.context("the stage needs its flags (see --help)")?;
            recrawl_estimator::main(args).await
        }
        Some(command) => {
            let output = recrawl_estimator::offline::run(&command)?;
            std::io::stdout().lock().write_all(output.as_bytes())?;
            Ok(())
        }
    }
}
