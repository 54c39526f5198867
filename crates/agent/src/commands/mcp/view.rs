//! Calls for people: a call's details and the text of its MCP `CallToolResult`.
//!
//! The result is read as plain JSON (not rmcp types): text contents are printed as they are,
//! anything else is summarized as `[image/png, 1234 bytes]` so binary data never reaches a
//! terminal.

use crate::output::{fields, opt_time, time};
use serde_json::Value;
use switchyard_protocol::api::{
    CallKind, CallView, ObservationSource, ObservationView, ResolutionSource,
};

/// Aligned details of one call; `connection` is the connection's display name.
pub fn details(call: &CallView, connection: &str) -> String {
    let mut pairs = vec![
        ("call", call.id.to_string()),
        ("state", call.state.to_string()),
        ("tool", call.tool_name.clone()),
        ("connection", connection.to_owned()),
        ("runner", call.runner.clone()),
        ("request_id", call.request_id.to_string()),
        ("created", time(&call.created_at)),
        ("leased", opt_time(call.leased_at.as_ref())),
        ("started", opt_time(call.started_at.as_ref())),
        ("finished", opt_time(call.finished_at.as_ref())),
    ];
    if call.state == switchyard_protocol::CallState::AwaitingApproval {
        pairs.push((
            "awaits approval",
            format!(
                "`switchyard approval show {} {}`",
                call.workspace_id, call.id
            ),
        ));
    }
    if let Some(at) = &call.cancel_requested_at {
        pairs.push(("cancel requested at", time(at)));
    }
    if let (CallKind::Lookup, Some(parent)) = (call.kind, call.parent_call_id) {
        pairs.push(("receipt lookup for", parent.to_string()));
    }
    if let Some(outcome) = call.resolution_outcome {
        pairs.push(("resolved as", outcome.as_str().to_owned()));
    }
    if let Some(at) = &call.erased_at {
        pairs.push(("evidence erased", time(at)));
    }
    if let Some(error) = &call.error {
        // Retention erases the message and keeps the code.
        let shown = if error.message.is_empty() {
            format!("[{}]", error.code)
        } else {
            format!("[{}] {}", error.code, error.message)
        };
        pairs.push(("error", shown));
    }
    let mut text = fields(&pairs);
    text.push_str(&settlement(call));
    if let Some(at) = &call.retention_expired_at {
        text.push_str(&format!(
            "inputs and result expired at {} (minimal disposition)\n",
            time(at)
        ));
        return text;
    }
    match &call.result {
        Some(result) => {
            let heading = if call.result_truncated {
                "result (truncated):"
            } else {
                "result:"
            };
            text.push_str(heading);
            text.push('\n');
            text.push_str(&result_text(result));
        }
        None if call.state.is_terminal() => text.push_str("result: not retained\n"),
        None => {}
    }
    text
}

/// What was recorded beside an unknown call: observations, its resolution and its lineage.
/// Empty for a call with none of them.
fn settlement(call: &CallView) -> String {
    let mut text = String::new();
    if !call.observations.is_empty() {
        text.push_str("observations:\n");
        for observation in &call.observations {
            text.push_str(&format!(
                "  {}  {}\n",
                time(&observation.recorded_at),
                observation_line(observation)
            ));
        }
    }
    if let Some(resolution) = &call.resolution {
        let by = match (
            resolution.source,
            resolution.resolved_by,
            resolution.observation_id,
        ) {
            (ResolutionSource::Caller, Some(user), _) => format!("by user {user}"),
            (_, _, Some(observation)) => format!("by observation {observation}"),
            _ => "by observation".to_owned(),
        };
        text.push_str(&format!(
            "resolution: {} {by} at {}",
            resolution.outcome.as_str(),
            time(&resolution.resolved_at)
        ));
        if let Some(evidence) = resolution.source_version_id {
            text.push_str(&format!(", citing evidence {evidence}"));
        }
        text.push('\n');
        match (&resolution.explanation, &resolution.explanation_removed_at) {
            (Some(explanation), _) => text.push_str(&format!("explanation: {explanation}\n")),
            (None, Some(at)) => text.push_str(&format!("explanation: removed at {}\n", time(at))),
            (None, None) => {}
        }
    }
    if let Some(lineage) = &call.lineage {
        let join = |ids: Vec<String>| {
            if ids.is_empty() {
                "-".to_owned()
            } else {
                ids.join(", ")
            }
        };
        let lines = [
            (
                "lookups",
                join(
                    lineage
                        .lookup_call_ids
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                ),
            ),
            (
                "receipts",
                join(
                    lineage
                        .receipt_ids
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                ),
            ),
            (
                "evidence",
                join(
                    lineage
                        .evidence_ids
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                ),
            ),
        ];
        if lines.iter().any(|(_, ids)| ids != "-") {
            text.push_str("lineage:\n");
            for (kind, ids) in lines {
                text.push_str(&format!("  {kind}: {ids}\n"));
            }
        }
    }
    text
}

/// One observation on one line, e.g. `lookup 0192…: applied` or
/// `late receipt from device:… (epoch 3): applied`; an erased one says so.
pub fn observation_line(observation: &ObservationView) -> String {
    let source = match (observation.source, observation.lookup_call_id) {
        (ObservationSource::Lookup, Some(lookup)) => format!("lookup {lookup}"),
        (ObservationSource::Lookup, None) => "lookup".to_owned(),
        (ObservationSource::LateReceipt, _) => format!(
            "late receipt from {}{}",
            observation.runner,
            observation
                .epoch
                .map(|e| format!(" (epoch {e})"))
                .unwrap_or_default()
        ),
    };
    let erased = if observation.erased_at.is_some() {
        " (output erased)"
    } else {
        ""
    };
    format!(
        "{source}: {}{erased}",
        observation.reported.as_str().replace('_', " ")
    )
}

/// The text of a `CallToolResult`: text contents joined by newlines, other contents summarized.
/// A result without content shows its `structuredContent` as JSON.
pub fn result_text(result: &Value) -> String {
    let contents = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if contents.is_empty() {
        return result
            .get("structuredContent")
            .map(Value::to_string)
            .unwrap_or_default();
    }
    contents
        .iter()
        .map(content_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// One content item as text.
fn content_text(item: &Value) -> String {
    let str_field = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let kind = str_field(item, "type").unwrap_or_else(|| "unknown".to_owned());
    match kind.as_str() {
        "text" => str_field(item, "text").unwrap_or_default(),
        "image" | "audio" => {
            let mime = str_field(item, "mimeType").unwrap_or(kind);
            let size = item
                .get("data")
                .and_then(Value::as_str)
                .map(base64_len)
                .unwrap_or(0);
            format!("[{mime}, {size} bytes]")
        }
        "resource" => {
            let resource = item.get("resource").unwrap_or(&Value::Null);
            let uri = str_field(resource, "uri").unwrap_or_default();
            let mime = str_field(resource, "mimeType").unwrap_or_else(|| "unknown type".to_owned());
            let size = match (str_field(resource, "text"), str_field(resource, "blob")) {
                (Some(text), _) => text.len(),
                (None, Some(blob)) => base64_len(&blob),
                (None, None) => 0,
            };
            format!("[resource {uri}, {mime}, {size} bytes]")
        }
        "resource_link" => format!(
            "[resource link {}]",
            str_field(item, "uri").unwrap_or_default()
        ),
        other => format!("[{other} content]"),
    }
}

/// Decoded length of base64 text, without decoding it.
fn base64_len(data: &str) -> usize {
    let len = data.trim_end().len();
    let padding = data
        .trim_end()
        .bytes()
        .rev()
        .take_while(|b| *b == b'=')
        .count()
        .min(2);
    (len - padding) * 3 / 4
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::json;
    use switchyard_protocol::CallState;
    use switchyard_protocol::api::{CallError, LineageView, ResolutionOutcome};

    /// A finished call as the server would show it, from its JSON form.
    pub(in crate::commands::mcp) fn finished_call() -> CallView {
        serde_json::from_value(json!({
            "id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5e",
            "workspace_id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5f",
            "request_id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d60",
            "profile_id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d61",
            "connection_id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d62",
            "environment_id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d63",
            "tool_name": "slow",
            "client_session_id": null,
            "timeout_seconds": 30,
            "state": "succeeded",
            "runner": "central",
            "arguments": {"seconds": 1},
            "result": {"content": [{"type": "text", "text": "done"}]},
            "result_truncated": false,
            "error": null,
            "created_at": "2025-01-02T03:04:05Z",
            "leased_at": "2025-01-02T03:04:05Z",
            "started_at": "2025-01-02T03:04:06Z",
            "finished_at": "2025-01-02T03:04:07Z",
            "cancel_requested_at": null,
            "retention_expired_at": null
        }))
        .expect("a CallView")
    }

    #[test]
    fn cancel_request_is_shown_when_set() {
        let mut call = finished_call();
        assert!(!details(&call, "fx").contains("cancel requested"));
        call.cancel_requested_at = call.started_at;
        let text = details(&call, "fx");
        assert!(
            text.lines().any(
                |l| l.starts_with("cancel requested at") && l.ends_with("2025-01-02T03:04:06Z")
            ),
            "{text}"
        );
        assert!(text.ends_with("result:\ndone"), "{text}");
    }

    #[test]
    fn expired_call_shows_its_minimal_disposition() {
        let mut call = finished_call();
        call.state = CallState::ToolError;
        call.arguments = None;
        call.result = None;
        call.error = Some(CallError {
            code: "tool_error".into(),
            message: String::new(),
        });
        call.retention_expired_at = call.finished_at;
        let text = details(&call, "fx");
        assert!(
            text.ends_with(
                "inputs and result expired at 2025-01-02T03:04:07Z (minimal disposition)\n"
            ),
            "{text}"
        );
        assert!(text.lines().any(|l| l.ends_with(" [tool_error]")), "{text}");
        assert!(!text.contains("not retained"), "{text}");
    }

    #[test]
    fn a_resolved_call_shows_its_observations_resolution_and_lineage() {
        let mut call = finished_call();
        call.state = CallState::Resolved;
        call.result = None;
        call.error = Some(CallError {
            code: "transport_closed".into(),
            message: "the server went away".into(),
        });
        call.resolution_outcome = Some(ResolutionOutcome::Succeeded);
        call.observations = vec![
            serde_json::from_value(json!({
                "id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d70", "source": "lookup",
                "reported": "applied", "lookup_call_id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d71",
                "runner": "central", "epoch": 4, "output": null,
                "recorded_at": "2025-01-02T03:05:00Z", "erased_at": null
            }))
            .expect("an ObservationView"),
        ];
        call.resolution = Some(
            serde_json::from_value(json!({
                "outcome": "succeeded", "source": "observation",
                "observation_id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d70", "source_version_id": null,
                "explanation": null, "explanation_removed_at": null, "resolved_by": null,
                "request_id": null, "resolved_at": "2025-01-02T03:05:00Z"
            }))
            .expect("a ResolutionView"),
        );
        call.lineage = Some(LineageView {
            lookup_call_ids: vec!["0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d71".parse().expect("id")],
            ..LineageView::default()
        });
        let text = details(&call, "fx");
        assert!(
            text.lines()
                .any(|l| l.starts_with("resolved as") && l.ends_with(" succeeded")),
            "{text}"
        );
        assert!(
            text.contains(
                "observations:\n  2025-01-02T03:05:00Z  lookup 0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d71: applied\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "resolution: succeeded by observation 0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d70 at 2025-01-02T03:05:00Z\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "lineage:\n  lookups: 0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d71\n  receipts: -\n  evidence: -\n"
            ),
            "{text}"
        );
        assert!(
            text.lines().any(|l| l.starts_with("error")
                && l.ends_with("[transport_closed] the server went away")),
            "{text}"
        );
    }

    #[test]
    fn text_is_joined_and_binary_summarized() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "QUJDRA=="},
            {"type": "audio", "mimeType": "audio/wav", "data": "QUJD"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "12345"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b"},
            {"type": "text", "text": "bye"}
        ]});
        assert_eq!(
            result_text(&result),
            "hello\n[image/png, 4 bytes]\n[audio/wav, 3 bytes]\n[resource file:///a.txt, text/plain, 5 bytes]\n[resource link file:///b]\nbye"
        );
    }

    #[test]
    fn structured_content_shows_when_there_is_no_content() {
        assert_eq!(
            result_text(&json!({"content": [], "structuredContent": {"n": 1}})),
            r#"{"n":1}"#
        );
        assert_eq!(result_text(&json!({})), "");
    }

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_len(""), 0);
        assert_eq!(base64_len("QQ=="), 1);
        assert_eq!(base64_len("QUI="), 2);
        assert_eq!(base64_len("QUJDRA"), 4);
    }
}
