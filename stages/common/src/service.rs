//! Process plumbing shared by every stage binary: the command line, tracing, the health
//! server, signals, and the exit code.

use std::fmt::Display;
use std::future::Future;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::Resettable;
use clap::{Args, Command, Subcommand};

use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

use crate::config::{ConfigError, LogFormat, ServiceArgs};
use crate::http;
use crate::runtime::StageContext;

/// Installs the tracing subscriber; a bad `--log` filter is reported naming the flag.
pub fn init_tracing(args: &ServiceArgs) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(&args.log).map_err(|e| anyhow::anyhow!("--log {:?}: {e}", args.log))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let installed = match args.log_format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("installing the log subscriber: {e}"))
}

/// Cancels `token` on the first SIGTERM or SIGINT.
pub fn cancel_on_signal(token: CancellationToken) -> anyhow::Result<()> {
    let stopped = stop_signal()?;
    tokio::spawn(async move {
        let name = stopped.await;
        tracing::info!("{name}: draining");
        token.cancel();
    });
    Ok(())
}

/// How often a stage started with `--parent-pid` looks at its parent: an ended parent
/// gives no signal.
const PARENT_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Cancels `token` once `parent` is no longer this process's parent: it ended, and this
/// process was handed to another (init or a subreaper). A parent that ended before this
/// began is caught at the first check.
pub fn cancel_when_orphaned(parent: u32, token: CancellationToken) {
    tokio::spawn(async move {
        let mut checks = tokio::time::interval(PARENT_CHECK_INTERVAL);
        loop {
            tokio::select! {
                _ = checks.tick() => {}
                () = token.cancelled() => return,
            }
            if std::os::unix::process::parent_id() != parent {
                tracing::warn!(parent, "the parent process ended: draining");
                token.cancel();
                return;
            }
        }
    });
}

/// Completes with the signal's name on the first SIGTERM or SIGINT. Every long-running
/// command waits on this rather than on Ctrl-C alone: `timeout`, systemd and Kubernetes
/// stop a process with SIGTERM. The handlers are installed before this returns, so a
/// signal that arrives before the future is polled is not lost.
pub fn stop_signal() -> std::io::Result<impl Future<Output = &'static str>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    })
}

/// The body of every stage's `main`: tracing, `/metrics` `/healthz` `/readyz`, signal
/// handling, then `run` until it returns.
pub async fn run_service<F, Fut, E>(stage: &'static str, service: &ServiceArgs, run: F) -> anyhow::Result<()>
where
    F: FnOnce(StageContext) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    init_tracing(service)?;
    crate::descriptors::raise_descriptor_limit();
    let ctx = StageContext::new(stage);
    cancel_on_signal(ctx.shutdown.clone())?;
    if let Some(parent) = service.parent_pid {
        cancel_when_orphaned(parent, ctx.shutdown.clone());
    }
    let server_shutdown = CancellationToken::new();
    let bound =
        http::serve(service.http_listen, ctx.metrics.clone(), ctx.health.clone(), server_shutdown.clone())
            .await?;
    tracing::info!(stage, %bound, "serving /metrics /healthz /readyz");
    let result = run(ctx).await;
    server_shutdown.cancel();
    match result {
        Ok(()) => {
            tracing::info!(stage, "stopped cleanly");
            Ok(())
        }
        Err(error) => {
            let error = anyhow::Error::from(error);
            tracing::error!(stage, error = %describe(&error), "stopped on error");
            Err(Logged(error).into())
        }
    }
}

/// An error already written to the log: the exit code says it again, the terminal not.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Logged(anyhow::Error);

/// How a stage binary was invoked: the stage with its flags, or an offline command.
#[derive(Debug)]
pub enum Invocation<A, O> {
    Stage(A),
    Offline(O),
}

/// Parses a stage binary's command line: `BIN [flags]` runs the stage, `BIN COMMAND …` an
/// offline command; exits with clap's message on a bad one. (clap's derive cannot make
/// flattened stage flags optional beside subcommands: their nested groups never count as
/// present, so the stage flags always came back empty.)
pub fn parse_invocation<A: Args, O: Subcommand>(command: Command) -> Invocation<A, O> {
    let mut command = stage_cli::<A, O>(command);
    let mut matches =
        command.clone().try_get_matches().unwrap_or_else(|error| exit_on_parse_error(error, &mut command));
    let parsed = if matches.subcommand_name().is_some() {
        O::from_arg_matches_mut(&mut matches).map(Invocation::Offline)
    } else {
        A::from_arg_matches_mut(&mut matches).map(Invocation::Stage)
    };
    parsed.unwrap_or_else(|error| exit_on_parse_error(error, &mut command))
}

/// A stage binary's command line: the stage's flags, or one of its offline commands.
pub fn stage_cli<A: Args, O: Subcommand>(command: Command) -> Command {
    // A flattened argument struct's doc comment would replace the binary's description.
    let (about, long_about) = (command.get_about().cloned(), command.get_long_about().cloned());
    let reset = |text: Option<clap::builder::StyledStr>| text.map_or(Resettable::Reset, Resettable::Value);
    hide_env_values(O::augment_subcommands(A::augment_args(command)))
        .about(reset(about))
        .long_about(reset(long_about))
        .args_conflicts_with_subcommands(true)
        .subcommand_negates_reqs(true)
}

/// Every argument and subcommand of `command`, recursively, that has no help text, as
/// `command sub --flag` paths: a test of each binary requires none.
pub fn without_help(command: &Command) -> Vec<String> {
    let mut missing = Vec::new();
    let name = command.get_name();
    for arg in command.get_arguments() {
        let builtin = matches!(arg.get_id().as_str(), "help" | "version");
        if !builtin && arg.get_help().is_none() && arg.get_long_help().is_none() {
            let shown = arg.get_long().map_or_else(|| arg.get_id().to_string(), |long| format!("--{long}"));
            missing.push(format!("{name} {shown}"));
        }
    }
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        if sub.get_about().is_none() && sub.get_long_about().is_none() {
            missing.push(format!("{name} {}", sub.get_name()));
        }
        missing.extend(without_help(sub).into_iter().map(|path| format!("{name} {path}")));
    }
    missing
}

/// Prints a command-line error and exits 2, as clap does, except that a value refused by
/// one of recrawl's own parsers is reported by its message alone: clap's quotes the raw
/// value, and a malformed `--kafka-option` may hold a password (recrawl's messages name
/// the flag and redact secrets).
pub fn exit_on_parse_error(error: clap::Error, command: &mut Command) -> ! {
    use std::error::Error as _;
    if error.kind() == clap::error::ErrorKind::ValueValidation {
        if let Some(ours) = error.source().and_then(|cause| cause.downcast_ref::<ConfigError>()) {
            eprintln!("error: {ours}\n\nFor more information, try '--help'.");
            std::process::exit(2);
        }
    }
    error.format(command).exit()
}

/// `command` and its subcommands with every option's environment value left out of
/// `--help`: clap shows them by default, and RECRAWL_KAFKA_OPTIONS can hold a password.
pub fn hide_env_values(command: Command) -> Command {
    command.mut_args(|arg| arg.hide_env_values(true)).mut_subcommands(hide_env_values)
}

/// How long the runtime may keep blocking threads after `main` returned: a Kafka call
/// stuck on an unreachable broker must not keep the process alive.
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(1);

/// Runs `main` on a multi-threaded runtime and turns its outcome into the exit code,
/// printing the error (with its causes, once) on failure.
pub fn block_on_main(main: impl Future<Output = anyhow::Result<()>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("Error: starting the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(main);
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.is::<Logged>() => ExitCode::FAILURE,
        // The reader had all it wanted (`recrawl tail … | head`): not a failure.
        Err(error) if matches!(error.downcast_ref(), Some(StdoutError::Closed)) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: {}", describe(&error));
            ExitCode::FAILURE
        }
    }
}

/// Writing a command's output to standard output failed.
#[derive(Debug, thiserror::Error)]
pub enum StdoutError {
    /// The reader closed the pipe; [`block_on_main`] then exits 0 without a word, as Unix
    /// tools do, where `println!` would panic.
    #[error("standard output was closed by its reader")]
    Closed,
    #[error("writing to standard output: {0}")]
    Write(#[source] std::io::Error),
}

/// Writes `text` to standard output, flushed, so a closed pipe is an error the command
/// returns rather than a panic.
pub fn print(text: impl Display) -> Result<(), StdoutError> {
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{text}").and_then(|()| stdout.flush()).map_err(|error| match error.kind() {
        std::io::ErrorKind::BrokenPipe => StdoutError::Closed,
        _ => StdoutError::Write(error),
    })
}

/// [`print()`] and a newline.
pub fn print_line(line: impl Display) -> Result<(), StdoutError> {
    print(format_args!("{line}\n"))
}

/// The error and the causes it does not already say, on one line.
fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
