use clap::Parser;

/// recrawl estimator: per-URL download and modification rates from the change events.
#[derive(Debug, Parser)]
#[command(name = "recrawl-estimator", version)]
struct Cli {
    #[command(flatten)]
    args: recrawl_estimator::EstimatorArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    recrawl_estimator::main(Cli::parse().args).await
}
