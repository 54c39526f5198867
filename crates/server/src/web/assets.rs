//! The UI's static files, embedded in the binary.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};

const CSS: &str = include_str!("static/app.css");
const JS: &str = include_str!("static/app.js");
const FAVICON: &str = include_str!("static/favicon.svg");

/// `GET /static/{file}`.
pub(super) async fn file(Path(file): Path<String>) -> Response {
    let (body, content_type) = match file.as_str() {
        "app.css" => (CSS, "text/css; charset=utf-8"),
        "app.js" => (JS, "text/javascript; charset=utf-8"),
        "favicon.svg" => (FAVICON, "image/svg+xml"),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    // Revalidated on every use: the files change with the binary, and they are small.
    (
        [(CONTENT_TYPE, content_type), (CACHE_CONTROL, "no-cache")],
        body,
    )
        .into_response()
}
