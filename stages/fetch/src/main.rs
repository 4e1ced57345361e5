use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use recrawl_common::links::LinkRules;
use recrawl_common::service::{block_on_main, parse_invocation, print, Invocation};

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

/// The binary's name, version and description; its flags and commands come from its types.
fn command() -> clap::Command {
    clap::Command::new("recrawl-fetch").version(env!("CARGO_PKG_VERSION")).about(
        "recrawl fetch: fetches picked URLs over HTTP, emits results and links. Without a \
         command it runs the stage.",
    )
}

fn main() -> ExitCode {
    let command = command();
    block_on_main(async move {
        match parse_invocation::<recrawl_fetch::FetchArgs, Offline>(command) {
            Invocation::Stage(args) => recrawl_fetch::main(args).await,
            Invocation::Offline(Offline::Links { base, file, rules, max_links }) => {
                let html = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
                let filter = recrawl_fetch::links::LinkFilter { rules, max_links };
                print(recrawl_fetch::links::links_json(&base, &html, &filter))?;
                Ok(())
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use recrawl_common::service::{stage_cli, without_help};

    #[test]
    fn every_flag_and_subcommand_has_help() {
        let cli = stage_cli::<recrawl_fetch::FetchArgs, super::Offline>(super::command());
        assert_eq!(without_help(&cli), Vec::<String>::new());
    }
}
