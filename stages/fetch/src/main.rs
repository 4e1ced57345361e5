use std::io::Write;

use anyhow::Context;
use clap::{Parser, Subcommand};
use recrawl_common::links::LinkRules;

/// recrawl fetch: fetches picked URLs over HTTP, emits results and links. Without a
/// subcommand it runs the stage.
#[derive(Debug, Parser)]
#[command(
    name = "recrawl-fetch",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    offline: Option<Offline>,
    #[command(flatten)]
    args: Option<recrawl_fetch::FetchArgs>,
}

#[derive(Debug, Subcommand)]
enum Offline {
    /// Prints, as a JSON array, the normalised links the stage would publish for an HTML
    /// file fetched from --base: document order, deduplicated, after the link rules. The
    /// links inside its <frame> documents, which the stage fetches, are not included.
    Links {
        /// The URL the file was fetched from; relative links resolve against it.
        #[arg(long)]
        base: url::Url,
        /// The HTML file.
        file: std::path::PathBuf,
        #[command(flatten)]
        rules: LinkRules,
        /// Most distinct links taken from the page.
        #[arg(long, default_value_t = 1000)]
        max_links: usize,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.offline {
        None => recrawl_fetch::main(cli.args.context("the stage needs its flags (see --help)")?).await,
        Some(Offline::Links { base, file, rules, max_links }) => {
            let html = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let filter = recrawl_fetch::links::LinkFilter { rules, max_links };
            let json = recrawl_fetch::links::links_json(&base, &html, &filter);
            std::io::stdout().lock().write_all(json.as_bytes())?;
            Ok(())
        }
    }
}
