//! The client span of one `tools/call`, named and attributed as the OpenTelemetry semantic
//! conventions for MCP say (`tools/call {tool}`, `mcp.method.name`, `gen_ai.tool.name`,
//! `jsonrpc.request.id`, `network.transport`, `error.type`), whose context is what the MCP
//! server receives in `_meta.traceparent` when spans are exported.

use crate::meta::TRACEPARENT_META_KEY;
use crate::session::Dispatch;
use crate::telemetry::context::traceparent_of;
use serde_json::{Map, Value};

/// The span of a `tools/call` of `tool` over `transport` (`pipe` for stdio, `tcp` for HTTP),
/// child of the current span (the call's). When spans are exported, `meta`'s
/// `traceparent` becomes this span's, so the MCP server's spans are its children.
pub(crate) fn open(
    tool: &str,
    transport: &'static str,
    meta: &mut Map<String, Value>,
) -> tracing::Span {
    let name = format!("tools/call {tool}");
    let span = tracing::info_span!(
        "tools/call",
        otel.name = name.as_str(),
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        "mcp.method.name" = "tools/call",
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = tool,
        "network.transport" = transport,
        "jsonrpc.request.id" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
    );
    if let Some(traceparent) = traceparent_of(&span) {
        meta.insert(TRACEPARENT_META_KEY.to_owned(), Value::String(traceparent));
    }
    span
}

/// Records on `span` how the call ended: `error.type` (a JSON-RPC error's code, `tool_error`
/// for an `isError` result, else what went wrong) and an error status, unless it succeeded.
pub(crate) fn record_outcome(span: &tracing::Span, dispatch: &Dispatch) {
    let error_type = match dispatch {
        Dispatch::Answered {
            is_error: false, ..
        } => return,
        Dispatch::Answered { is_error: true, .. } => "tool_error".to_owned(),
        Dispatch::Rejected { code, .. } => code.to_string(),
        Dispatch::TimedOut => "timeout".to_owned(),
        Dispatch::Cancelled => "cancelled".to_owned(),
        Dispatch::Lost { .. } => "lost".to_owned(),
        Dispatch::NotSent { .. } => "not_sent".to_owned(),
        Dispatch::Oversized { .. } => "oversized".to_owned(),
    };
    span.record("error.type", error_type.as_str());
    span.record("otel.status_code", "ERROR");
}
