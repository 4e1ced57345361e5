use std::process::ExitCode;

use clap::Subcommand;
use recrawl_common::service::{block_on_main, parse_invocation, print_line, Invocation};

/// The binary's name, version and description; its flags and commands come from its types.
fn command() -> clap::Command {
    clap::Command::new("recrawl-archive").version(env!("CARGO_PKG_VERSION")).about(
        "recrawl archive: WARC files of the fetched pages, with revisit records and CDXJ \
         indexes, in a directory or an S3-compatible store. Without a command it runs the stage.",
    )
}

/// Offline commands.
#[derive(Debug, Subcommand)]
enum Offline {
    /// Prints the SURT key of each URL, as the index lines and pywb's lookups carry it.
    Surt {
        /// URLs.
        #[arg(required = true)]
        urls: Vec<String>,
    },
}

fn main() -> ExitCode {
    let command = command();
    block_on_main(async move {
        match parse_invocation::<recrawl_archive::ArchiveArgs, Offline>(command) {
            Invocation::Stage(args) => recrawl_archive::main(args).await,
            Invocation::Offline(Offline::Surt { urls }) => {
                for url in urls {
                    print_line(recrawl_archive::surt::surt(&url))?;
                }
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
        let cli = stage_cli::<recrawl_archive::ArchiveArgs, super::Offline>(super::command());
        assert_eq!(without_help(&cli), Vec::<String>::new());
        let about = cli.get_about().map(ToString::to_string).unwrap_or_default();
        assert!(about.starts_with("recrawl archive:"), "{about}");
    }
}
