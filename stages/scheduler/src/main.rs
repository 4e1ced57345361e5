use std::process::ExitCode;

use recrawl_common::service::{block_on_main, parse_invocation, print, Invocation};
use recrawl_scheduler::offline::Offline;

/// The binary's name, version and description; its flags and commands come from its types.
fn command() -> clap::Command {
    clap::Command::new("recrawl-scheduler").version(env!("CARGO_PKG_VERSION")).about(
        "recrawl scheduler: each period, picks the URLs whose refresh buys the most \
         freshness. Without a command it runs the stage.",
    )
}

fn main() -> ExitCode {
    let command = command();
    block_on_main(async move {
        match parse_invocation::<recrawl_scheduler::SchedulerArgs, Offline>(command) {
            Invocation::Stage(args) => recrawl_scheduler::main(args).await,
            Invocation::Offline(command) => {
                print(recrawl_scheduler::offline::run(&command)?)?;
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
        let cli = stage_cli::<recrawl_scheduler::SchedulerArgs, super::Offline>(super::command());
        assert_eq!(without_help(&cli), Vec::<String>::new());
    }
}
