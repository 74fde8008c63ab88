//! `/metrics`, `/healthz` and `/readyz` (ready once every engine's caches are synced; the
//! body says why not).

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
                match ctx.readiness() {
                    Ok(()) => (StatusCode::OK, "ok".to_string()),
                    Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why.to_string()),
                }
            }),
        )
        .with_state(ctx);
    let listener = tokio::net::TcpListener::bind(address).await?;
    axum::serve(listener, app).await?;
    Ok(())
}
