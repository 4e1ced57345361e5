use std::path::PathBuf;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use recrawl_common::admin::{create_topics, TopicOutcome};
use recrawl_common::config::ClusterArgs;
use recrawl_common::service::print_line;
use recrawl_common::KafkaArgs;
use recrawl_schemas::TopicCatalogue;

/// recrawl: keeps copies of web pages fresh by predicting change and scheduling fetches
/// where they buy the most freshness.
#[derive(Debug, Parser)]
#[command(name = "recrawl", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the whole pipeline locally: embedded Kafka, a demo website, the four stages.
    Demo(recrawl::demo::DemoArgs),
    /// Compare scheduling policies on a simulated web (or replayed histories); the papers'
    /// experiments are `recrawl-lab paper`.
    Sim(recrawl::sim::SimArgs),
    /// Serve the simulated web on 127.0.0.1 (one virtual host per site) with its ground truth.
    Simweb(recrawl::sim::server::SimWebArgs),
    /// Topic administration.
    Topics {
        #[command(subcommand)]
        command: TopicsCommand,
    },
    /// Run one stage (the same entry point as its own binary, recrawl-NAME).
    Stage {
        #[command(subcommand)]
        stage: StageCommand,
    },
    /// Print a topic's messages as JSON lines or a table, from the beginning to where the
    /// topic ends (or on, with --follow), filtered by host, change, degree and age.
    Tail(recrawl::tail::TailArgs),
    /// Dead letters: list them, and re-publish chosen ones to their original topic.
    Dlq {
        #[command(subcommand)]
        command: DlqCommand,
    },
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// Print the dead letters (all, or those selected) as JSON lines, without their values.
    List {
        #[command(flatten)]
        kafka: KafkaArgs,
        #[command(flatten)]
        selection: recrawl::dlq::Selection,
    },
    /// Re-publish the selected dead letters' original records to the topic they belong on,
    /// after the cause is fixed. Prints what it would do unless --confirm is given.
    Replay {
        #[command(flatten)]
        kafka: KafkaArgs,
        #[command(flatten)]
        selection: recrawl::dlq::Selection,
        /// Publish; without it, a dry run.
        #[arg(long, env = "RECRAWL_DLQ_CONFIRM")]
        confirm: bool,
    },
}

#[derive(Debug, Subcommand)]
enum TopicsCommand {
    /// Create the topics of the catalogue (existing ones are left as they are).
    Create {
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Topic catalogue (default: the deploy/topics.toml built into this binary).
        #[arg(long, env = "RECRAWL_TOPICS_FILE")]
        file: Option<PathBuf>,
        /// Override the catalogue's replication factor.
        #[arg(long)]
        replication_factor: Option<i32>,
    },
}

#[derive(Debug, Subcommand)]
enum StageCommand {
    // Boxed: the fetch and scheduler flags outweigh the other variants many times over.
    /// The fetch stage: picks → HTTP → fetch results and links (as recrawl-fetch).
    Fetch(Box<recrawl_fetch::FetchArgs>),
    /// The diff stage: fetch results → change events with change degrees (as recrawl-diff).
    Diff(recrawl_diff::DiffArgs),
    /// The estimator stage: change events → per-page estimates and group distributions
    /// (as recrawl-estimator).
    Estimator(recrawl_estimator::EstimatorArgs),
    /// The scheduler stage: estimates and links → each period's picks (as
    /// recrawl-scheduler).
    Scheduler(Box<recrawl_scheduler::SchedulerArgs>),
    /// The archive stage: fetch results → WARC files with revisits and CDXJ indexes, in a
    /// directory or an S3-compatible store (as recrawl-archive).
    Archive(Box<recrawl_archive::ArchiveArgs>),
}

fn main() -> std::process::ExitCode {
    let mut cli = recrawl_common::service::hide_env_values(Cli::command());
    let parsed =
        cli.try_get_matches_from_mut(std::env::args_os()).and_then(|matches| Cli::from_arg_matches(&matches));
    let command = match parsed {
        Ok(parsed) => parsed.command,
        Err(error) => recrawl_common::service::exit_on_parse_error(error, &mut cli),
    };
    recrawl_common::service::block_on_main(run(command))
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Demo(args) => recrawl::demo::run(args).await,
        Command::Sim(args) => recrawl::sim::run(args).await,
        Command::Simweb(args) => recrawl::sim::server::run(args).await,
        Command::Topics { command: TopicsCommand::Create { cluster, file, replication_factor } } => {
            cluster.check_kafka_options()?;
            let catalogue = match file {
                Some(path) => {
                    let text = std::fs::read_to_string(&path)
                        .with_context(|| format!("--file {}", path.display()))?;
                    TopicCatalogue::parse(&text).with_context(|| format!("--file {}", path.display()))?
                }
                None => TopicCatalogue::builtin(),
            };
            for (topic, outcome) in create_topics(&cluster, &catalogue, replication_factor).await? {
                let said = match outcome {
                    TopicOutcome::Created => "created",
                    TopicOutcome::AlreadyExists => "exists",
                };
                print_line(format_args!("{said:>8} {topic}"))?;
            }
            Ok(())
        }
        Command::Stage { stage } => match stage {
            StageCommand::Fetch(args) => recrawl_fetch::main(*args).await,
            StageCommand::Diff(args) => recrawl_diff::main(args).await,
            StageCommand::Estimator(args) => recrawl_estimator::main(args).await,
            StageCommand::Scheduler(args) => recrawl_scheduler::main(*args).await,
            StageCommand::Archive(args) => recrawl_archive::main(*args).await,
        },
        Command::Dlq { command: DlqCommand::List { kafka, selection } } => {
            let prefix = kafka.cluster.topics().prefix().to_owned();
            for letter in recrawl::dlq::read_all(&kafka).await? {
                if selection.matches(&letter, &prefix) {
                    print_line(letter.to_json())?;
                }
            }
            Ok(())
        }
        Command::Dlq { command: DlqCommand::Replay { kafka, selection, confirm } } => {
            let chosen = recrawl::dlq::replay(&kafka, &selection, confirm).await?;
            let mut replayed = 0;
            for (letter, unreplayable) in &chosen {
                let mut line = letter.to_json();
                line["replay"] = match unreplayable {
                    Some(why) => format!("skipped: {why}").into(),
                    None if confirm => "published".into(),
                    None => "dry run".into(),
                };
                replayed += usize::from(unreplayable.is_none());
                print_line(line)?;
            }
            if confirm {
                eprintln!("re-published {replayed} of {} dead letters chosen", chosen.len());
            } else {
                eprintln!(
                    "dry run: {replayed} of {} dead letters chosen would be re-published; add --confirm",
                    chosen.len()
                );
            }
            Ok(())
        }
        Command::Tail(args) => {
            args.cluster.check_kafka_options()?;
            match recrawl::tail::run(&args).await {
                // As itself, so that a closed pipe ends the command quietly.
                Err(recrawl::tail::TailError::Stdout(error)) => Err(error.into()),
                tailed => Ok(tailed?),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_and_subcommand_has_help() {
        assert_eq!(recrawl_common::service::without_help(&Cli::command()), Vec::<String>::new());
    }

    /// What runs as a service (the simulated web, each stage) is configured by its
    /// environment as well as its flags, as a container wants.
    #[test]
    fn every_service_flag_has_an_environment_variable() {
        let cli = Cli::command();
        let stage = cli.find_subcommand("stage").expect("stage");
        let services =
            std::iter::once(cli.find_subcommand("simweb").expect("simweb")).chain(stage.get_subcommands());
        let without: Vec<String> = services
            .flat_map(|command| {
                command
                    .get_arguments()
                    .filter(|arg| arg.get_long().is_some_and(|long| !["help", "version"].contains(&long)))
                    .filter(|arg| arg.get_env().is_none())
                    .map(|arg| format!("{} --{}", command.get_name(), arg.get_long().unwrap_or_default()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(without, Vec::<String>::new());
    }
}
