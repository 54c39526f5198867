//! `GET /metrics` on the metrics listener (`--metrics-listen`): the Prometheus text format,
//! without authentication — the listener is reachable only where the operator binds it, and
//! nothing it answers is a secret (see `docs/OPERATIONS.md`). Its own router, never merged
//! into the API's, so it is not under `/api/v1` nor in the API's authorization matrix.

use crate::app::App;
use crate::http::ApiError;
use axum::Router;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;

/// The text format's content type.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The metrics listener's router: `/metrics` alone.
pub fn metrics_router(app: App) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(app)
}

async fn metrics(State(app): State<App>) -> Result<impl IntoResponse, ApiError> {
    let text = app.metrics_render().await?;
    Ok(([(CONTENT_TYPE, TEXT_FORMAT)], text))
}
