//! Process plumbing shared by every stage binary: tracing, the health server, signals,
//! and the exit code.

use std::future::Future;
use std::io::IsTerminal;

use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, ServiceArgs};
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
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: draining"),
            _ = int.recv() => tracing::info!("SIGINT: draining"),
        }
        token.cancel();
    });
    Ok(())
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
    let ctx = StageContext::new(stage);
    cancel_on_signal(ctx.shutdown.clone())?;
    let server_shutdown = CancellationToken::new();
    let bound =
        http::serve(service.http_listen, ctx.metrics.clone(), ctx.health.clone(), server_shutdown.clone())
            .await
            .map_err(|e| anyhow::anyhow!("--http-listen {}: {e}", service.http_listen))?;
    tracing::info!(stage, %bound, "serving /metrics /healthz /readyz");
    let result = run(ctx).await;
    server_shutdown.cancel();
    match result {
        Ok(()) => {
            tracing::info!(stage, "stopped cleanly");
            Ok(())
        }
        Err(error) => {
            tracing::error!(stage, %error, "stopped on error");
            Err(error.into())
        }
    }
}
