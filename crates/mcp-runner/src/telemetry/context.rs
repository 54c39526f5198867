//! W3C trace context across processes: a span adopts the `traceparent` a caller sent as its
//! parent, a span's own context is written out as a `traceparent` (for the calls row, the
//! MCP server's `_meta`), and spans of waits that outlive any one task (a call's queue wait)
//! are recorded afterwards with their real start and end.
//!
//! Every function here does nothing (or answers `None`) unless [`super::exporting`].

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{SpanKind, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::collections::HashMap;
use std::time::SystemTime;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The W3C header (and `_meta` key) carrying a trace context.
const TRACEPARENT: &str = "traceparent";

/// The trace id (32 lower-case hex digits) of a `traceparent`, if it is a valid one.
pub fn trace_id(traceparent: &str) -> Option<&str> {
    let mut parts = traceparent.split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    (version == "00"
        && hex(trace, 32)
        && trace.bytes().any(|b| b != b'0')
        && hex(parent, 16)
        && hex(flags, 2)
        && parts.next().is_none())
    .then_some(trace)
}

/// The context a `traceparent` names, as the parent of a local span.
fn remote_parent(traceparent: &str) -> Context {
    let carrier = HashMap::from([(TRACEPARENT.to_owned(), traceparent.to_owned())]);
    TraceContextPropagator::new().extract(&carrier)
}

/// Makes `traceparent` (a caller's) the parent of `span`, which must not have been entered
/// yet. A malformed one is ignored: the span then continues the current trace.
pub fn adopt(span: &tracing::Span, traceparent: Option<&str>) {
    if !super::exporting() {
        return;
    }
    if let Some(traceparent) = traceparent.filter(|t| trace_id(t).is_some()) {
        // Fails only when the span is disabled for the exporter; it is then not exported.
        let _ = span.set_parent(remote_parent(traceparent));
    }
}

/// `span`'s own context as a `traceparent`, for a process downstream to continue the trace.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    if !super::exporting() {
        return None;
    }
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// The trace id `span` is exported under.
pub fn exported_trace_id(span: &tracing::Span) -> Option<String> {
    if !super::exporting() {
        return None;
    }
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

/// Renames `span`'s exported span (a name known only once it runs, such as an HTTP route).
pub fn rename(span: &tracing::Span, name: String) {
    if super::exporting() {
        span.context().span().update_name(name);
    }
}

/// A span already over, from `start` to `end`, child of `traceparent`: a wait that no task
/// was in for its whole length (a call's queue wait, its approval wait).
pub fn record_interval(
    name: &'static str,
    traceparent: &str,
    start: SystemTime,
    end: SystemTime,
    attributes: &[(&'static str, String)],
) {
    if !super::exporting() || trace_id(traceparent).is_none() {
        return;
    }
    let tracer = opentelemetry::global::tracer("switchyard");
    let mut span = tracer
        .span_builder(name)
        .with_kind(SpanKind::Internal)
        .with_start_time(start)
        .with_attributes(
            attributes
                .iter()
                .map(|(key, value)| KeyValue::new(*key, value.clone())),
        )
        .start_with_context(&tracer, &remote_parent(traceparent));
    opentelemetry::trace::Span::end_with_timestamp(&mut span, end);
}

#[cfg(test)]
mod tests {
    use super::trace_id;

    #[test]
    fn only_a_valid_traceparent_has_a_trace_id() {
        assert_eq!(
            trace_id("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        for invalid in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "garbage",
        ] {
            assert_eq!(trace_id(invalid), None, "{invalid}");
        }
    }
}
