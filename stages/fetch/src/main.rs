use clap::Parser;

/// recrawl fetch: fetches picked URLs over HTTP, emits results and links.
#[derive(Debug, Parser)]
#[command(name = "recrawl-fetch", version)]
struct Cli {
    #[command(flatten)]
    args: recrawl_fetch::FetchArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    recrawl_fetch::main(Cli::parse().args).await
}
