//! The per-stage HTTP server: `/metrics` (Prometheus text), `/healthz` (the process and
//! its loop are alive), `/readyz` (the consumer has its assignment and state is restored).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use std::collections::VecDeque;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
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
///
/// Drawn below the kernel's ephemeral range where that range is known: the ports the
/// kernel hands out itself (to a bind of port 0, and as every outgoing connection's local
/// port) come from that range, so a port chosen there and let go is soon taken by any of
/// them, while one drawn at random below it is taken only by a service starting there or
/// a launcher drawing the same.
pub fn free_local_port() -> std::io::Result<SocketAddr> {
    if let Some(below) = ephemeral_range_start() {
        let ports = LEAST_DRAWN_PORT..below;
        for _ in 0..DRAWS {
            let draw = std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), ());
            let span = u64::from(ports.end.saturating_sub(ports.start));
            let offset = draw.checked_rem(span).and_then(|offset| u16::try_from(offset).ok()).unwrap_or(0);
            let port = ports.start.saturating_add(offset);
            if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", port)) {
                return listener.local_addr();
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()
}

/// The lowest port [`free_local_port`] draws: above the registered services most machines
/// run.
const LEAST_DRAWN_PORT: u16 = 10_000;

/// Ports [`free_local_port`] tries below the ephemeral range before it asks the kernel.
const DRAWS: u32 = 16;

/// The first port of the kernel's ephemeral range (Linux), where it leaves at least a
/// thousand ports above [`LEAST_DRAWN_PORT`] to draw from.
fn ephemeral_range_start() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let start: u16 = range.split_whitespace().next()?.parse().ok()?;
    (start >= LEAST_DRAWN_PORT.saturating_add(1_000)).then_some(start)
}

/// Times a launcher that lost a stage's port starts it again on another.
pub const PORT_RETRIES: u32 = 3;

/// Whether a stage's output says it stopped because its `--http-listen` port was taken.
/// A launcher that chose the port beforehand, as [`free_local_port`] does, can
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

/// Connections the endpoint serves at once. Probes and a scrape need a handful; at the
/// cap, a new connection takes the place of the oldest that has not sent a request (else
/// of the oldest), so idle connections cannot keep a probe out.
pub const MAX_CONNECTIONS: usize = 64;

/// How long a client may take to send a request's headers before its connection closes.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Descriptors held back for the endpoint: when the process has none left to accept a
/// connection with (fetch's sockets took them), one is let go for it, so probes are still
/// answered; refilled as they close.
const RESERVED_DESCRIPTORS: usize = 8;

/// How long accepting pauses after an error that a retry cannot fix at once.
const ACCEPT_PAUSE: Duration = Duration::from_millis(20);

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
    let state = ServerState { metrics, health };
    tokio::spawn(accept_loop(listener, state, shutdown));
    Ok(bound)
}

/// The connections being served, in the order they were accepted.
#[derive(Default)]
struct Connections {
    next_id: u64,
    open: VecDeque<Connection>,
}

struct Connection {
    id: u64,
    /// Whether it has sent a request: until then it is the first to make room.
    requested: Arc<AtomicBool>,
    close: CancellationToken,
}

impl Connections {
    /// Registers a new connection, closing one if the endpoint is at its cap.
    fn admit(&mut self) -> (u64, Arc<AtomicBool>, CancellationToken) {
        if self.open.len() >= MAX_CONNECTIONS {
            let idle = self.open.iter().position(|c| !c.requested.load(Ordering::Relaxed)).unwrap_or(0);
            if let Some(evicted) = self.open.remove(idle) {
                evicted.close.cancel();
            }
        }
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let (requested, close) = (Arc::new(AtomicBool::new(false)), CancellationToken::new());
        self.open.push_back(Connection { id, requested: requested.clone(), close: close.clone() });
        (id, requested, close)
    }

    fn remove(&mut self, id: u64) {
        self.open.retain(|c| c.id != id);
    }
}

/// Spare descriptors (of /dev/null), let go one at a time when accepting finds none.
struct Reserve(Vec<std::fs::File>);

impl Reserve {
    fn refill(&mut self) {
        while self.0.len() < RESERVED_DESCRIPTORS {
            match std::fs::File::open("/dev/null") {
                Ok(file) => self.0.push(file),
                Err(_) => return,
            }
        }
    }
}

async fn accept_loop(listener: TcpListener, state: ServerState, shutdown: CancellationToken) {
    let connections = Arc::new(Mutex::new(Connections::default()));
    let mut reserve = Reserve(Vec::new());
    let mut warned_out_of_descriptors = false;
    loop {
        reserve.refill();
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) if crate::descriptors::out_of_descriptors(&error) => {
                if !warned_out_of_descriptors {
                    tracing::warn!(%error, "out of file descriptors: /metrics /healthz /readyz use their reserve");
                    warned_out_of_descriptors = true;
                }
                if reserve.0.pop().is_none() {
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                }
                continue;
            }
            Err(error) => {
                tracing::debug!(%error, "accepting a connection failed");
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let (id, requested, close) = lock(&connections).admit();
        let (state, connections, shutdown) = (state.clone(), connections.clone(), shutdown.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                requested.store(true, Ordering::Relaxed);
                std::future::ready(Ok::<_, std::convert::Infallible>(respond(&state, &request)))
            });
            let mut builder = http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT).max_buf_size(16 * 1024);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                // Made room for a newer one: dropped.
                () = close.cancelled() => {}
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(HEADER_READ_TIMEOUT, connection).await;
                }
            }
            lock(&connections).remove(id);
        });
    }
}

fn lock(connections: &Mutex<Connections>) -> std::sync::MutexGuard<'_, Connections> {
    connections.lock().unwrap_or_else(PoisonError::into_inner)
}

fn respond(state: &ServerState, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match request.uri().path() {
        "/metrics" => (StatusCode::OK, "text/plain; version=0.0.4", state.metrics.render()),
        "/healthz" if state.health.is_failed() => (StatusCode::SERVICE_UNAVAILABLE, TEXT, "failed\n".into()),
        "/healthz" => (StatusCode::OK, TEXT, "ok\n".into()),
        "/readyz" if state.health.is_ready() => (StatusCode::OK, TEXT, "ready\n".into()),
        "/readyz" => (StatusCode::SERVICE_UNAVAILABLE, TEXT, "not ready\n".into()),
        _ => (StatusCode::NOT_FOUND, TEXT, "not found\n".into()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

const TEXT: &str = "text/plain; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_is_drawn_below_the_kernel_s_own_and_can_be_bound() {
        let ports: Vec<u16> = (0..20).map(|_| free_local_port().unwrap().port()).collect();
        for &port in &ports {
            std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        }
        if let Some(start) = ephemeral_range_start() {
            assert!(ports.iter().all(|&port| (LEAST_DRAWN_PORT..start).contains(&port)), "{ports:?}");
            let mut distinct = ports.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert!(distinct.len() > 15, "drawn at random: {ports:?}");
        }
    }

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
    async fn idle_and_slow_connections_cannot_keep_a_probe_out() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let shutdown = CancellationToken::new();
        let addr = serve(
            "127.0.0.1:0".parse().unwrap(),
            StageMetrics::new("fetch"),
            Health::default(),
            shutdown.clone(),
        )
        .await
        .unwrap();
        // Five times the cap of connections that never send a request.
        let mut idle = Vec::new();
        for _ in 0..5 * MAX_CONNECTIONS {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        for _ in 0..3 {
            let response = client.get(format!("http://{addr}/healthz")).send().await.unwrap();
            assert_eq!(response.status().as_u16(), 200);
        }
        // At most the cap are served: the others were closed to make room.
        let mut closed = 0;
        for stream in &mut idle {
            let mut byte = [0u8; 1];
            if matches!(
                tokio::time::timeout(Duration::from_secs(10), stream.read(&mut byte)).await,
                Ok(Ok(0) | Err(_))
            ) {
                closed += 1;
            }
        }
        assert!(closed >= 4 * MAX_CONNECTIONS, "{closed} closed");
        // A client that sends part of its headers and stops is let go.
        let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
        let mut rest = Vec::new();
        let ended = tokio::time::timeout(HEADER_READ_TIMEOUT * 5, slow.read_to_end(&mut rest)).await;
        assert!(ended.is_ok(), "closed after the header-read timeout");
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
