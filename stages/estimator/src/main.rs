use std::io::Write;
use std::process::ExitCode;

use recrawl_common::service::{block_on_main, parse_invocation, Invocation};
use recrawl_estimator::offline::Offline;

fn main() -> ExitCode {
    let command = clap::Command::new("recrawl-estimator").version(env!("CARGO_PKG_VERSION")).about(
        "recrawl estimator: per-URL download and modification rates, forecasts and refresh \
         plans from the change events. Without a command it runs the stage.",
    );
    block_on_main(async move {
        match parse_invocation::<recrawl_estimator::EstimatorArgs, Offline>(command) {
            Invocation::Stage(args) => recrawl_estimator::main(args).await,
            Invocation::Offline(command) => {
                let output = recrawl_estimator::offline::run(&command)?;
                std::io::stdout().lock().write_all(output.as_bytes())?;
                Ok(())
            }
        }
    })
}
