//! The per-stage HTTP server: `/metrics` (Prometheus text), `/healthz` (the process and
//! its loop are alive), `/readyz` (the consumer has its assignment and state is restored).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::StageMetrics;

/// Liveness and readiness flags, shared between the loop and the server.
#[derive(Debug, Clone, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
    failed: Arc<AtomicBool>,
}

impl Health {
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed) && !self.is_failed()
    }

    /// The loop stopped on an error: liveness fails so an orchestrator restarts us.
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
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
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
