//! Capture exclusions: per connection or tool, keep nothing of a call but its disposition, or
//! drop named argument and result fields — before the result is bounded, stored, observed or
//! captured as evidence.
//!
//! Argument fields are top-level keys of the call's arguments. They travel with the call until
//! its runner has it (the queue is the database), and leave the retained arguments in the
//! transaction that records the completion. Result fields are top-level keys of the result's
//! `structuredContent`, and of any text content that is a JSON object; when a result field is
//! excluded and the result has `structuredContent`, its `content` is rebuilt as the one text
//! item MCP suggests (the filtered structured content, serialized), so an excluded value does
//! not survive in its text form. Free text that is not JSON is kept as the tool wrote it.
//!
//! Exclusions apply to completions recorded after they are set; what was stored before stays
//! until retention or erasure removes it.

use super::results::{RESULT_LIMIT, bound_result};
use super::{Actor, App, views};
use crate::db::{CaptureExclusionRow, Kept, NewCaptureExclusion, StoredCompletion};
use crate::error::{AppError, AppResult};
use serde_json::Value;
use std::collections::BTreeSet;
use switchyard_protocol::api::{CaptureExclusion, CaptureExclusionsView, SetCaptureExclusions};
use switchyard_protocol::{CallId, ErrorCode};

/// The most exclusions one connection holds.
const MAX_EXCLUSIONS: usize = 100;
/// The most fields one exclusion names, arguments and results together.
const MAX_FIELDS: usize = 100;
/// The longest field name.
const MAX_FIELD_LEN: usize = 200;

/// The exclusions that apply to one call, merged: any that keeps nothing wins; the fields are
/// the union.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CaptureRule {
    nothing: bool,
    arguments: BTreeSet<String>,
    results: BTreeSet<String>,
}

impl CaptureRule {
    /// The rule of `rows` (those that apply to one call), or `None` when there are none.
    pub(crate) fn of(rows: &[CaptureExclusionRow]) -> Option<CaptureRule> {
        if rows.is_empty() {
            return None;
        }
        let mut rule = CaptureRule::default();
        for row in rows {
            rule.nothing |= row.capture_nothing;
            rule.arguments
                .extend(row.drop_argument_fields.iter().cloned());
            rule.results.extend(row.drop_result_fields.iter().cloned());
        }
        Some(rule)
    }

    /// `completion` as this rule keeps it: its result filtered, then bounded again.
    pub(crate) fn apply(&self, mut completion: StoredCompletion) -> StoredCompletion {
        let unbounded = completion.unbounded.take();
        if self.nothing {
            // The error's code is the disposition; its message may quote the tool.
            completion.result = None;
            completion.result_truncated = false;
            completion.error_message = None;
            completion.kept = Kept::Nothing;
            return completion;
        }
        if !self.results.is_empty()
            && let Some(result) = unbounded.or(completion.result.take())
        {
            let (result, truncated) = bound_result(self.filter_result(result), RESULT_LIMIT);
            completion.result = Some(result);
            completion.result_truncated = truncated;
        }
        completion.kept = if self.arguments.is_empty() {
            Kept::All
        } else {
            Kept::AllBut {
                argument_fields: self.arguments.iter().cloned().collect(),
            }
        };
        completion
    }

    /// A `CallToolResult` without the excluded result fields.
    fn filter_result(&self, mut result: Value) -> Value {
        let Some(object) = result.as_object_mut() else {
            return result;
        };
        let structured = object.get_mut("structuredContent").map(|structured| {
            self.drop_fields(structured);
            structured.to_string()
        });
        if let Some(Value::Array(items)) = object.get_mut("content") {
            match structured {
                // MCP's compatibility form: the structured content, serialized, as text.
                Some(text) => {
                    *items = vec![serde_json::json!({"type": "text", "text": text})];
                }
                None => {
                    for item in items.iter_mut() {
                        self.filter_json_text(item);
                    }
                }
            }
        }
        result
    }

    /// A text content item whose text is a JSON object, without the excluded fields.
    fn filter_json_text(&self, item: &mut Value) {
        let Some(Value::String(text)) = item.get_mut("text") else {
            return;
        };
        if let Ok(mut parsed @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
            self.drop_fields(&mut parsed);
            *text = parsed.to_string();
        }
    }

    fn drop_fields(&self, value: &mut Value) {
        if let Value::Object(map) = value {
            map.retain(|key, _| !self.results.contains(key));
        }
    }
}

impl App {
    /// A connection's capture exclusions (any member).
    pub async fn capture_exclusions_get(
        &self,
        actor: &Actor,
        ws: &str,
        connection: &str,
    ) -> AppResult<CaptureExclusionsView> {
        let workspace = self.membership(actor, ws).await?.workspace.id;
        let connection = self.find_connection(workspace, connection).await?;
        let rows = self.db.capture_exclusion_list(connection.id).await?;
        Ok(views::capture_exclusions(connection.id, &rows))
    }

    /// Replaces a connection's capture exclusions (workspace admins). They apply to
    /// completions recorded from now on.
    pub async fn capture_exclusions_set(
        &self,
        actor: &Actor,
        ws: &str,
        connection: &str,
        req: SetCaptureExclusions,
    ) -> AppResult<CaptureExclusionsView> {
        let workspace = self.admin_membership(actor, ws).await?.workspace.id;
        let connection = self.find_connection(workspace, connection).await?;
        let exclusions = checked(req.exclusions)?;
        let rows = self
            .db
            .capture_exclusion_replace(connection.id, &exclusions, actor.user.id)
            .await?;
        tracing::info!(connection = %connection.id, by = %actor.user.id, exclusions = rows.len(), "set capture exclusions");
        Ok(views::capture_exclusions(connection.id, &rows))
    }

    /// `completion` as the capture exclusions of its call keep it (unchanged when none apply).
    pub(crate) async fn apply_capture_exclusions(
        &self,
        call: CallId,
        completion: StoredCompletion,
    ) -> AppResult<StoredCompletion> {
        let rows = self.db.capture_exclusions_of_call(call).await?;
        Ok(match CaptureRule::of(&rows) {
            Some(rule) => rule.apply(completion),
            None => completion,
        })
    }
}

fn invalid(message: String) -> AppError {
    AppError::refused(ErrorCode::InvalidRequest, message)
}

/// The exclusions to store, or what is wrong with them.
fn checked(exclusions: Vec<CaptureExclusion>) -> AppResult<Vec<NewCaptureExclusion>> {
    if exclusions.len() > MAX_EXCLUSIONS {
        return Err(invalid(format!(
            "a connection holds at most {MAX_EXCLUSIONS} capture exclusions"
        )));
    }
    let mut tools = BTreeSet::new();
    let mut out = Vec::with_capacity(exclusions.len());
    for e in exclusions {
        let tool = e.tool.unwrap_or_default();
        let which = if tool.is_empty() {
            "the connection-wide exclusion".to_owned()
        } else {
            format!("the exclusion of tool `{tool}`")
        };
        if !tools.insert(tool.clone()) {
            return Err(invalid(format!(
                "{which} is given twice; give each tool (and the connection, `tool` absent) once"
            )));
        }
        let fields = e.drop_argument_fields.len() + e.drop_result_fields.len();
        if e.capture_nothing && fields > 0 {
            return Err(invalid(format!(
                "{which} keeps nothing (`capture_nothing`) and also names fields to drop: give one or the other"
            )));
        }
        if !e.capture_nothing && fields == 0 {
            return Err(invalid(format!(
                "{which} excludes nothing: set `capture_nothing`, or name `drop_argument_fields` or `drop_result_fields`"
            )));
        }
        if fields > MAX_FIELDS {
            return Err(invalid(format!(
                "{which} names {fields} fields; at most {MAX_FIELDS}"
            )));
        }
        for field in e.drop_argument_fields.iter().chain(&e.drop_result_fields) {
            if field.is_empty() || field.len() > MAX_FIELD_LEN {
                return Err(invalid(format!(
                    "{which}: a field name must be 1–{MAX_FIELD_LEN} bytes, not `{field}`"
                )));
            }
        }
        out.push(NewCaptureExclusion {
            tool_name: tool,
            capture_nothing: e.capture_nothing,
            drop_argument_fields: e.drop_argument_fields,
            drop_result_fields: e.drop_result_fields,
        });
    }
    Ok(out)
}

/// The exclusion a row holds, as the API shows it.
pub(crate) fn exclusion_view(row: &CaptureExclusionRow) -> CaptureExclusion {
    CaptureExclusion {
        tool: Some(row.tool_name.clone()).filter(|t| !t.is_empty()),
        capture_nothing: row.capture_nothing,
        drop_argument_fields: row.drop_argument_fields.clone(),
        drop_result_fields: row.drop_result_fields.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchyard_protocol::CallState;
    use switchyard_protocol::api::CallError;
    use switchyard_protocol::runner::Completion;

    fn rule(nothing: bool, arguments: &[&str], results: &[&str]) -> CaptureRule {
        CaptureRule {
            nothing,
            arguments: arguments.iter().map(|s| s.to_string()).collect(),
            results: results.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn finished(result: Value) -> StoredCompletion {
        crate::app::calls::stored_completion(Completion::Succeeded { result })
    }

    #[test]
    fn an_excluded_structured_field_leaves_the_text_too() {
        let result = json!({
            "content": [{"type": "text", "text": "token=s3cret"}],
            "structuredContent": {"token": "s3cret", "id": 7},
            "isError": false
        });
        let kept = rule(false, &["password"], &["token"]).apply(finished(result));
        let stored = kept.result.unwrap();
        assert!(!stored.to_string().contains("s3cret"), "{stored}");
        assert_eq!(stored["structuredContent"], json!({"id": 7}));
        assert_eq!(stored["content"][0]["text"], r#"{"id":7}"#);
        assert_eq!(
            kept.kept,
            Kept::AllBut {
                argument_fields: vec!["password".into()]
            }
        );
    }

    #[test]
    fn json_text_loses_the_field_and_free_text_stays() {
        let result = json!({"content": [
            {"type": "text", "text": r#"{"token":"s3cret","ok":true}"#},
            {"type": "text", "text": "plain words"}
        ]});
        let stored = rule(false, &[], &["token"])
            .apply(finished(result))
            .result
            .unwrap();
        assert_eq!(stored["content"][0]["text"], r#"{"ok":true}"#);
        assert_eq!(stored["content"][1]["text"], "plain words");
    }

    #[test]
    fn fields_are_dropped_before_a_big_result_is_cut() {
        let big = "x".repeat(2 * RESULT_LIMIT);
        let result = json!({
            "content": [{"type": "text", "text": format!("{{\"token\":\"s3cret\",\"big\":\"{big}\"}}")}],
        });
        let completion = finished(result);
        assert!(completion.result_truncated, "the fixture is cut unfiltered");
        let stored = rule(false, &[], &["token"]).apply(completion);
        assert!(stored.result_truncated);
        assert!(!stored.result.unwrap().to_string().contains("s3cret"));
    }

    #[test]
    fn capture_nothing_keeps_only_the_disposition() {
        let kept = rule(true, &[], &[]).apply(finished(json!({"content": []})));
        assert_eq!(kept.result, None);
        assert_eq!(kept.kept, Kept::Nothing);
        assert_eq!(kept.state, CallState::Succeeded);
        assert!(!kept.capturable());

        let lost = crate::app::calls::stored_completion(Completion::Unknown {
            error: CallError {
                code: "transport_closed".into(),
                message: "the server said: s3cret".into(),
            },
        });
        let kept = rule(true, &[], &[]).apply(lost);
        assert_eq!(
            (kept.state, kept.error_code.as_deref(), kept.error_message),
            (CallState::Unknown, Some("transport_closed"), None)
        );
    }
}
