use std::io::Write;
use std::process::ExitCode;

use recrawl_common::service::{block_on_main, parse_invocation, Invocation};
use recrawl_scheduler::offline::Offline;

fn main() -> ExitCode {
    let command = clap::Command::new("recrawl-scheduler").version(env!("CARGO_PKG_VERSION")).about(
        "recrawl scheduler: each period, picks the URLs whose refresh buys the most \
         freshness. Without a command it runs the stage.",
    );
    block_on_main(async move {
        match parse_invocation::<recrawl_scheduler::SchedulerArgs, Offline>(command) {
            Invocation::Stage(args) => recrawl_scheduler::main(args).await,
            Invocation::Offline(command) => {
                let output = recrawl_scheduler::offline::run(&command)?;
                std::io::stdout().lock().write_all(output.as_bytes())?;
                Ok(())
            }
        }
    })
}
