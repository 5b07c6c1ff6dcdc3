//! The host's HTTP endpoint: `/metrics` (Prometheus text format), `/healthz` and `/readyz`.

mod readiness;

pub use readiness::Readiness;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

struct Served {
    registry: Registry,
    readiness: Readiness,
}

/// Binds `addr` and serves until the process ends. Returns the bound address (useful with port 0).
pub async fn serve(addr: SocketAddr, registry: Registry, readiness: Readiness) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await.with_context(|| format!("--http-addr {addr}: cannot listen"))?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(Arc::new(Served { registry, readiness }));
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "the HTTP endpoint stopped");
        }
    });
    tracing::info!(addr = %bound, "serving /metrics, /healthz and /readyz");
    Ok(bound)
}

async fn metrics(State(served): State<Arc<Served>>) -> impl IntoResponse {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &served.registry) {
        Ok(()) => (StatusCode::OK, [(header::CONTENT_TYPE, OPENMETRICS)], body),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, [(header::CONTENT_TYPE, "text/plain")], error.to_string()),
    }
}

/// 200 `ok` once every readiness check passes, else 503 naming the ones that do not.
async fn readyz(State(served): State<Arc<Served>>) -> (StatusCode, String) {
    match served.readiness.pending() {
        pending if pending.is_empty() => (StatusCode::OK, "ok".into()),
        pending => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {}", pending.join(", "))),
    }
}
