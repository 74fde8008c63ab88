//! `/metrics`, `/healthz` and `/readyz` (ready once every engine's caches are synced).

use std::{net::SocketAddr, sync::Arc};

use axum::{Router, extract::State, http::StatusCode, routing::get};

use crate::engine::Ctx;

pub async fn serve(address: SocketAddr, ctx: Arc<Ctx>) -> anyhow::Result<()> {
    let app = Router::new()
        .route(
            "/metrics",
            get(|State(ctx): State<Arc<Ctx>>| async move { ctx.metrics.render() }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(ctx): State<Arc<Ctx>>| async move {
                if ctx.synced() {
                    (StatusCode::OK, "ok")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
                }
            }),
        )
        .with_state(ctx);
    let listener = tokio::net::TcpListener::bind(address).await?;
    axum::serve(listener, app).await?;
    Ok(())
}
