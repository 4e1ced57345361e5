use std::process::ExitCode;

use anyhow::Context;
use recrawl_common::service::{block_on_main, parse_invocation, print_line, Invocation};
use recrawl_diff::offline::{score, Offline};

/// The binary's name, version and description; its flags and commands come from its types.
fn command() -> clap::Command {
    clap::Command::new("recrawl-diff").version(env!("CARGO_PKG_VERSION")).about(
        "recrawl diff: previous version of every page, change events from fetch results. \
         Without a command it runs the stage.",
    )
}

fn main() -> ExitCode {
    let command = command();
    block_on_main(async move {
        match parse_invocation::<recrawl_diff::DiffArgs, Offline>(command) {
            Invocation::Stage(args) => recrawl_diff::main(args).await,
            Invocation::Offline(Offline::Score(args)) => {
                let read = |path: &std::path::Path| {
                    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
                };
                let result =
                    score(&read(&args.old)?, &read(&args.new)?, args.input(), &args.compare, args.all_words);
                print_line(serde_json::to_string(&result)?)?;
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
        let cli = stage_cli::<recrawl_diff::DiffArgs, super::Offline>(super::command());
        assert_eq!(without_help(&cli), Vec::<String>::new());
        let about = cli.get_about().map(ToString::to_string).unwrap_or_default();
        assert!(about.starts_with("recrawl diff:"), "{about}");
    }
}
