//! The per-stage HTTP server: `/metrics` (Prometheus text), `/healthz` (the process and
//! its loop are alive), `/readyz` (the consumer has its assignment and state is restored).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::StageMetrics;

/// What a stage says when the port of `--http-listen` is taken.
const PORT_TAKEN: &str = "the port is taken";

/// Why the `--http-listen` address could not be served.
#[derive(Debug, thiserror::Error)]
pub struct ListenError {
    address: SocketAddr,
    source: std::io::Error,
}

impl std::fmt::Display for ListenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--http-listen {}: ", self.address)?;
        if self.source.kind() == std::io::ErrorKind::AddrInUse {
            write!(f, "{PORT_TAKEN}: ")?;
        }
        write!(f, "{}", self.source)
    }
}

/// A port on 127.0.0.1 free now, for a launcher to give a stage; it may be taken before
/// the stage binds it (see [`lost_its_port`]).
pub fn free_local_port() -> std::io::Result<SocketAddr> {
    std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()
}

/// Times a launcher that lost a stage's port starts it again on another.
pub const PORT_RETRIES: u32 = 3;

/// Whether a stage's output says it stopped because its `--http-listen` port was taken.
/// A launcher that chose the port beforehand, by binding port 0 and letting it go, can
/// lose it to any socket meanwhile; it may start the stage again on another.
pub fn lost_its_port(output: &str) -> bool {
    output.lines().any(|line| line.contains("--http-listen") && line.contains(PORT_TAKEN))
}

/// Liveness and readiness, shared between the loop, the Kafka clients and the server.
#[derive(Debug, Clone, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
    failed: Arc<AtomicBool>,
    /// Since when the Kafka clients have been failing to reach the cluster.
    kafka_down_since: Arc<Mutex<Option<Instant>>>,
}

impl Health {
    /// The loop owns its partitions with their state restored (or owns none by choice).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Ready, and the cluster reachable: the stage can make progress.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed) && !self.is_failed() && self.kafka_down_for().is_none()
    }

    /// A client failed to reach the cluster or to deliver; the first report starts the
    /// outage clock.
    pub fn kafka_down(&self, why: &str) {
        let mut since = self.kafka_down_since.lock().unwrap_or_else(PoisonError::into_inner);
        if since.is_none() {
            tracing::warn!(why, "Kafka unreachable; retrying until it is back or the outage timeout passes");
            *since = Some(Instant::now());
        }
    }

    /// A client reached the cluster.
    pub fn kafka_up(&self) {
        let since = self.kafka_down_since.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(since) = since {
            tracing::info!(after = ?since.elapsed(), "Kafka reachable again");
        }
    }

    /// How long the current outage has lasted, if there is one.
    pub fn kafka_down_for(&self) -> Option<Duration> {
        self.kafka_down_since.lock().unwrap_or_else(PoisonError::into_inner).map(|since| since.elapsed())
    }

    /// The loop stopped on an error, or is stuck past its deadline: liveness fails so an
    /// orchestrator restarts us.
    pub fn set_failed(&self) {
        self.failed.store(true, Ordering::Relaxed);
    }

    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }
}

#[derive(Clone)]
struct ServerState {
    metrics: StageMetrics,
    health: Health,
}

/// Binds `addr` and serves until `shutdown`; returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    metrics: StageMetrics,
    health: Health,
    shutdown: CancellationToken,
) -> Result<SocketAddr, ListenError> {
    let failed = |source| ListenError { address: addr, source };
    let listener = TcpListener::bind(addr).await.map_err(failed)?;
    let bound = listener.local_addr().map_err(failed)?;
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(ServerState { metrics, health });
    tokio::spawn(async move {
        let result = axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await;
        if let Err(error) = result {
            tracing::error!(%error, "health server stopped");
        }
    });
    Ok(bound)
}

async fn metrics_handler(State(state): State<ServerState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render())
}

async fn healthz(State(state): State<ServerState>) -> impl IntoResponse {
    if state.health.is_failed() {
        (StatusCode::SERVICE_UNAVAILABLE, "failed\n")
    } else {
        (StatusCode::OK, "ok\n")
    }
}

async fn readyz(State(state): State<ServerState>) -> impl IntoResponse {
    if state.health.is_ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serves_metrics_liveness_and_readiness() {
        let metrics = StageMetrics::new("fetch");
        metrics.errors.with_label_values(&["decode"]).inc();
        let health = Health::default();
        let shutdown = CancellationToken::new();
        let addr =
            serve("127.0.0.1:0".parse().unwrap(), metrics, health.clone(), shutdown.clone()).await.unwrap();
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let get = |path: &'static str| {
            let client = client.clone();
            async move {
                let response = client.get(format!("http://{addr}{path}")).send().await.unwrap();
                (response.status().as_u16(), response.text().await.unwrap())
            }
        };
        assert_eq!(get("/healthz").await.0, 200);
        assert_eq!(get("/readyz").await.0, 503);
        health.set_ready(true);
        assert_eq!(get("/readyz").await.0, 200);
        let (status, body) = get("/metrics").await;
        assert_eq!(status, 200);
        assert!(body.contains(r#"recrawl_errors_total{kind="decode",stage="fetch"} 1"#), "{body}");
        health.set_failed();
        assert_eq!(get("/healthz").await.0, 503);
        assert_eq!(get("/readyz").await.0, 503);
        shutdown.cancel();
    }

    #[tokio::test]
    async fn a_taken_port_is_told_from_other_failures() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = taken.local_addr().unwrap();
        let serve_on =
            |address| serve(address, StageMetrics::new("fetch"), Health::default(), CancellationToken::new());
        let error = serve_on(address).await.unwrap_err().to_string();
        assert!(lost_its_port(&format!("Error: {error}\n")), "{error}");
        // An address this machine does not have fails otherwise.
        let error = serve_on("192.0.2.1:80".parse().unwrap()).await.unwrap_err().to_string();
        assert!(error.contains("--http-listen") && !lost_its_port(&error), "{error}");
        assert!(!lost_its_port("Error: --brokers: no broker answered\n"));
    }
}
