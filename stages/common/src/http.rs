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
}
