use clap::Parser;

/// recrawl diff: previous version of every page, change events from fetch results.
#[derive(Debug, Parser)]
#[command(name = "recrawl-diff", version)]
struct Cli {
    #[command(flatten)]
    args: recrawl_diff::DiffArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    recrawl_diff::main(Cli::parse().args).await
}
