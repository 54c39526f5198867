//! The trace a call belongs to: the span of its submission (child of the API request's span,
//! or of the `_meta.traceparent` an agent sent on `/mcp`), the trace context stored with the
//! call for its runner to continue, and the spans of its waits — approval, queue — recorded
//! once they are over, with their real start and end.

use super::REQUEST;
use crate::db::TraceParent;
use chrono::{DateTime, Utc};
use switchyard_mcp_runner::telemetry::context::{self, record_interval};
use switchyard_protocol::CallId;
use uuid::Uuid;

/// The span of one submission; `trace` (an agent's `_meta.traceparent`) is its parent when
/// given, else the current span (the API request's).
pub(super) fn submission_span(trace: Option<&TraceParent>) -> tracing::Span {
    let span = tracing::info_span!(
        "submit",
        otel.name = "submit call",
        call_id = tracing::field::Empty,
    );
    context::adopt(&span, trace.map(TraceParent::as_str));
    span
}

/// The trace context to store with the new call `call` (submitted inside its
/// [`submission_span`], which learns its id): the submission span's when spans are exported,
/// else the one the client sent (`trace`, or the request's `traceparent` header), else one in
/// the request's trace. Outside any request (none to continue) it is `None`.
pub(super) fn call_trace(call: CallId, trace: Option<TraceParent>) -> Option<TraceParent> {
    let span = tracing::Span::current();
    span.record("call_id", tracing::field::display(call));
    if let Some(own) = context::traceparent_of(&span).and_then(|t| TraceParent::parse(&t)) {
        return Some(own);
    }
    trace.or_else(|| {
        REQUEST
            .try_with(|request| {
                let sent = request.traceparent.as_deref().and_then(TraceParent::parse);
                sent.or_else(|| {
                    let trace_id = request.trace_id.as_deref()?;
                    let parent_id = &Uuid::new_v4().simple().to_string()[..16];
                    TraceParent::parse(&format!("00-{trace_id}-{parent_id}-01"))
                })
            })
            .ok()
            .flatten()
    })
}

/// Records a wait of call `call` that is over: `name` from `since` to now, in the trace of
/// `trace` (the call's stored context). Nothing without an exporter.
pub(crate) fn record_wait(
    name: &'static str,
    call: CallId,
    trace: Option<&str>,
    since: DateTime<Utc>,
    attributes: &[(&'static str, String)],
) {
    let Some(trace) = trace else { return };
    if !switchyard_mcp_runner::telemetry::exporting() {
        return;
    }
    let mut all = vec![("call_id", call.to_string())];
    all.extend_from_slice(attributes);
    record_interval(
        name,
        trace,
        since.into(),
        std::time::SystemTime::now(),
        &all,
    );
}
