//! The `_meta` every dispatched `tools/call` carries, so a cooperating MCP server can
//! deduplicate by request id or keep receipts, and correlate the call in its own traces.

use serde_json::{Map, Value};
use switchyard_protocol::runner::LeasedCall;

/// The `_meta` key carrying the call's request id (for receipt lookups and deduplication).
pub const REQUEST_ID_META_KEY: &str = "io.switchyard/request_id";
/// The `_meta` key carrying a W3C trace context.
pub const TRACEPARENT_META_KEY: &str = "traceparent";

/// `_meta` for a call: its request id and a W3C `traceparent` — the one its client sent (or
/// the server's span of its submission), so the MCP server's spans join the client's trace,
/// else `00-<trace id>-<parent id>-01` whose
/// trace id is the call id and whose parent id is taken from the request id, so retries of
/// one request share a trace.
pub fn call_meta(call: &LeasedCall) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(
        REQUEST_ID_META_KEY.to_owned(),
        Value::String(call.request_id.to_string()),
    );
    meta.insert(
        TRACEPARENT_META_KEY.to_owned(),
        Value::String(traceparent_for(call)),
    );
    meta
}

/// The trace context a call runs in: its client's, else one derived from its ids.
pub fn traceparent_for(call: &LeasedCall) -> String {
    call.traceparent
        .clone()
        .unwrap_or_else(|| derived_traceparent(call))
}

/// The `traceparent` of a call whose client sent none.
fn derived_traceparent(call: &LeasedCall) -> String {
    let trace_id = call.call_id.0.simple().to_string();
    let parent_id = call.request_id.0.simple().to_string()[..16].to_owned();
    // W3C forbids all-zero ids; UUIDs from the server never are, but a client-chosen request id
    // could be. Fall back to the call id's other half then.
    let parent_id = if parent_id.bytes().all(|b| b == b'0') {
        trace_id[16..].to_owned()
    } else {
        parent_id
    };
    format!("00-{trace_id}-{parent_id}-01")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchyard_protocol::api::ConnectorSpec;
    use switchyard_protocol::runner::{ConnectionTarget, Epoch};
    use switchyard_protocol::{CallId, ConnectionId, RequestId};

    fn call(request_id: uuid::Uuid) -> LeasedCall {
        LeasedCall {
            traceparent: None,
            call_id: CallId(uuid::Uuid::parse_str("0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5e").unwrap()),
            request_id: RequestId(request_id),
            epoch: Epoch(1),
            connection: ConnectionTarget {
                connection_id: ConnectionId::new(),
                revision: 1,
                spec: ConnectorSpec::Http {
                    url: "http://127.0.0.1:1/mcp".into(),
                },
                accepted_spec_digest: None,
                auth_kind: None,
            },
            tool_name: "echo".into(),
            arguments: json!({}),
            timeout_seconds: 1,
            client_session_id: None,
            profile_id: switchyard_protocol::ProfileId::new(),
            submitter: switchyard_protocol::runner::Submitter::User(
                switchyard_protocol::UserId::new(),
            ),
            kind: Default::default(),
        }
    }

    #[test]
    fn meta_carries_the_request_id_and_a_valid_traceparent() {
        let request = uuid::Uuid::parse_str("11112222-3333-4444-5555-666677778888").unwrap();
        let meta = call_meta(&call(request));
        assert_eq!(
            meta[REQUEST_ID_META_KEY],
            json!("11112222-3333-4444-5555-666677778888")
        );
        assert_eq!(
            meta[TRACEPARENT_META_KEY],
            json!("00-0192f0c47d4e7a109c1e3f1a2b3c4d5e-1111222233334444-01")
        );
    }

    #[test]
    fn the_client_s_traceparent_is_sent_on_as_it_came() {
        let mut leased = call(uuid::Uuid::new_v4());
        let theirs = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        leased.traceparent = Some(theirs.to_owned());
        assert_eq!(call_meta(&leased)[TRACEPARENT_META_KEY], json!(theirs));
    }

    #[test]
    fn an_all_zero_request_id_still_gives_a_valid_parent_id() {
        let meta = call_meta(&call(uuid::Uuid::nil()));
        assert_eq!(
            meta[TRACEPARENT_META_KEY],
            json!("00-0192f0c47d4e7a109c1e3f1a2b3c4d5e-9c1e3f1a2b3c4d5e-01")
        );
    }
}
