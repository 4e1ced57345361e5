use std::io::Write;

use anyhow::Context;
use clap::Parser;
use recrawl_scheduler::offline::Offline;

/// recrawl scheduler: each period, picks the URLs whose refresh buys the most freshness.
/// Without a subcommand it runs the stage.
#[derive(Debug, Parser)]
#[command(
    name = "recrawl-scheduler",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    offline: Option<Offline>,
    #[command(flatten)]
    args: Option<recrawl_scheduler::SchedulerArgs>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.offline {
        None => {
            let args = cli.args.context("the stage needs its flags (see --help)")?;
            recrawl_scheduler::main(args).await
        }
        Some(command) => {
            let output = recrawl_scheduler::offline::run(&command)?;
            std::io::stdout().lock().write_all(output.as_bytes())?;
            Ok(())
        }
    }
}
