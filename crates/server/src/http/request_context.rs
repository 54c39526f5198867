//! Every request's id and trace id: `x-request-id` when the client sent a usable one, else a
//! fresh UUID; the trace id of a W3C `traceparent`, else a fresh one. Both are answered in
//! `x-request-id` / `x-trace-id`, set for the request's task ([`REQUEST`]) so the audit log
//! records them, and on the request's span (`request_id`, `trace_id`): in every log line of
//! the request, and exported as the trace's server span when an OTLP endpoint is configured.

use crate::app::{REQUEST, RequestContext};
use axum::extract::{MatchedPath, Request};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use switchyard_mcp_runner::telemetry::context;
use tracing::Instrument;
use uuid::Uuid;

/// The longest client-chosen request id kept.
const MAX_REQUEST_ID: usize = 128;

/// The middleware: reads or makes the ids, serves the request inside them (and inside its
/// span, whose parent is the client's `traceparent`), answers them.
pub async fn track(request: Request, next: Next) -> Response {
    let headers = request.headers();
    let request_id = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty() && v.len() <= MAX_REQUEST_ID && v.bytes().all(|b| b.is_ascii_graphic())
        })
        .map_or_else(|| Uuid::new_v4().to_string(), str::to_owned);
    let traceparent = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned());
    let span = request_span(&request, &request_id);
    context::adopt(&span, traceparent.as_deref());
    // The exported span's trace (the client's, or a new one), else the client's, else fresh.
    let trace_id = context::exported_trace_id(&span)
        .or_else(|| traceparent.as_deref().and_then(trace_id_of))
        .unwrap_or_else(|| Uuid::new_v4().simple().to_string());
    span.record("trace_id", trace_id.as_str());
    let context = RequestContext {
        request_id: Some(request_id.clone()),
        trace_id: Some(trace_id.clone()),
        traceparent,
    };
    let mut response = REQUEST
        .scope(context, next.run(request).instrument(span.clone()))
        .await;
    span.record("http.response.status_code", response.status().as_u16());
    let answer = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        answer.insert("x-request-id", v);
    }
    if let Ok(v) = HeaderValue::from_str(&trace_id) {
        answer.insert("x-trace-id", v);
    }
    response
}

/// The server span of `request`, named by its method until [`name_span`] knows its route.
fn request_span(request: &Request, request_id: &str) -> tracing::Span {
    let method = request.method().as_str();
    tracing::info_span!(
        "request",
        otel.name = method,
        otel.kind = "server",
        "http.request.method" = method,
        "url.path" = request.uri().path(),
        "http.route" = tracing::field::Empty,
        "http.response.status_code" = tracing::field::Empty,
        request_id,
        trace_id = tracing::field::Empty,
    )
}

/// The route middleware (run once a route matched, inside [`track`]'s span): names the
/// request's span `METHOD route` (the route's pattern, never its ids), as the HTTP semantic
/// conventions say, and records `http.route`.
pub async fn name_span(request: Request, next: Next) -> Response {
    if let Some(route) = request.extensions().get::<MatchedPath>() {
        let span = tracing::Span::current();
        span.record("http.route", route.as_str());
        context::rename(&span, format!("{} {}", request.method(), route.as_str()));
    }
    next.run(request).await
}

/// The trace id of a `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), unless it is all zeros.
fn trace_id_of(traceparent: &str) -> Option<String> {
    let mut parts = traceparent.trim().split('-');
    let (_version, trace) = (parts.next()?, parts.next()?);
    (trace.len() == 32
        && trace.bytes().all(|b| b.is_ascii_hexdigit())
        && trace.bytes().any(|b| b != b'0'))
    .then(|| trace.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::trace_id_of;

    #[test]
    fn a_traceparent_gives_its_trace_id_and_nonsense_gives_none() {
        assert_eq!(
            trace_id_of("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(
            trace_id_of("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(trace_id_of("garbage"), None);
    }
}
