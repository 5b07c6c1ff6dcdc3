//! The host's HTTP endpoint: `/metrics` (Prometheus text format), `/healthz` and `/readyz`.

mod readiness;

pub use readiness::{Gate, Readiness};

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

/// 200 `ok` once every readiness check passes, else 503 naming the ones that do not, and why.
async fn readyz(State(served): State<Arc<Served>>) -> (StatusCode, String) {
    match served.readiness.why_not() {
        None => (StatusCode::OK, "ok".into()),
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        crate::tls::install_crypto_provider();
        let response = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    #[tokio::test]
    async fn readyz_says_why_the_host_is_not_ready_while_healthz_answers() {
        let readiness = Readiness::default();
        let slurm = readiness.gate("slurm", "waiting for Slurm: slurmrestd answered HTTP 200 to ping: no slurmctld");
        let addr = serve("127.0.0.1:0".parse().unwrap(), Registry::default(), readiness).await.unwrap();
        assert_eq!(get(addr, "/healthz").await, (200, "ok".into()));
        let (status, body) = get(addr, "/readyz").await;
        assert_eq!(status, 503);
        assert_eq!(body, "not ready: slurm: waiting for Slurm: slurmrestd answered HTTP 200 to ping: no slurmctld");
        assert_eq!(get(addr, "/metrics").await.0, 200, "metrics are served while not ready");
        slurm.open();
        assert_eq!(get(addr, "/readyz").await, (200, "ok".into()));
    }
}
