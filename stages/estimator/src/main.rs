use std::process::ExitCode;

use recrawl_common::service::{block_on_main, parse_invocation, print, Invocation};
use recrawl_estimator::offline::Offline;

/// The binary's name, version and description; its flags and commands come from its types.
fn command() -> clap::Command {
    clap::Command::new("recrawl-estimator").version(env!("CARGO_PKG_VERSION")).about(
        "recrawl estimator: per-URL download and modification rates, forecasts and refresh \
         plans from the change events. Without a command it runs the stage.",
    )
}

fn main() -> ExitCode {
    let command = command();
    block_on_main(async move {
        match parse_invocation::<recrawl_estimator::EstimatorArgs, Offline>(command) {
            Invocation::Stage(args) => recrawl_estimator::main(args).await,
            Invocation::Offline(command) => {
                print(recrawl_estimator::offline::run(&command)?)?;
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
        let cli = stage_cli::<recrawl_estimator::EstimatorArgs, super::Offline>(super::command());
        assert_eq!(without_help(&cli), Vec::<String>::new());
    }
}
