use clap::Parser;

/// recrawl scheduler: each period, picks the URLs whose refresh buys the most freshness.
#[derive(Debug, Parser)]
#[command(name = "recrawl-scheduler", version)]
struct Cli {
    #[command(flatten)]
    args: recrawl_scheduler::SchedulerArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    recrawl_scheduler::main(Cli::parse().args).await
}
