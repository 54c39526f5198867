//! Receipt policies and receipt lookups (`reconcile`), and what a completion or a late receipt
//! records about an unknown call.
//!
//! A lookup is an ordinary call of kind `lookup` beside its unknown call: same connection,
//! runner and profile, its own request_id, and only the connection's approved policy tool with
//! the policy's arguments. It runs only while its unknown call is still unknown, unerased, and
//! the connection still reaches exactly the target the unknown call was dispatched to (checked
//! when it is requested and again when it is leased). Its completion records an observation
//! on the unknown call in the same transaction, and a certain answer settles it.
//!
//! `call_reconcile` queues the lookup (Use on the unknown call's profile; idempotent on its
//! request_id). The target it compares is the dispatch target `db::calls::lease` records;
//! `lookup_refusal` repeats the check at every lease (`app::dispatch::leasing`), and a refused
//! lookup is failed before anything is sent. The policy is `db::receipt_policies`; the lookup's
//! completion, and a late receipt, are recorded by `db::observations`
//! (`call_complete_with_effects`, `call_record_late_receipt`).

use super::calls::CompletionRecorded;
use super::names::digest;
use super::{Actor, App, views};
use crate::db::{
    CallOrigin, CallRow, Captured, Completed, CompletionEffects, LateReceipt, LeasedRow, NewCall,
    StoredCompletion,
};
use crate::error::{AppError, AppResult};
use crate::metrics::SettledBy;
use serde_json::{Value, json};
use switchyard_protocol::api::*;
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{CallId, CallState, ErrorCode, RunnerRef, UserId, WorkspaceId};
use uuid::Uuid;

/// The timeout of a receipt lookup: it is a read, and nothing waits on a slow one.
const LOOKUP_TIMEOUT_SECONDS: i32 = 60;

impl App {
    /// Approves a connection's receipt policy: a workspace admin who holds Manage on every
    /// profile that includes the connection (the calls it settles are theirs). The tool must
    /// be in the discovered catalog, whatever the connection's placement.
    pub async fn receipt_policy_set(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
        req: SetReceiptPolicy,
    ) -> AppResult<ReceiptPolicyView> {
        let membership = self.admin_membership(actor, ws).await?;
        let connection = self.find_connection(membership.workspace.id, key).await?;
        for profile in self.db.receipt_policy_profiles(connection.id).await? {
            if !self.db.grants_of(profile.id, actor.user.id).await?.manage {
                return Err(AppError::refused(
                    ErrorCode::Forbidden,
                    format!(
                        "approving a receipt policy for connection `{}` needs Manage on every profile that includes it; you lack it on `{}`",
                        connection.name, profile.name
                    ),
                ));
            }
        }
        if req.tool.is_empty() {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                "`tool` must name the connector's read-only lookup tool",
            ));
        }
        validate_template(&req.arguments)?;
        match self.db.tool_find(connection.id, &req.tool).await? {
            Some(tool) if tool.available => {}
            _ => {
                return Err(AppError::refused(
                    ErrorCode::ToolNotFound,
                    format!(
                        "connection `{}` offers no discovered tool `{}`; nothing was changed. `switchyard connection discover` refreshes its catalog (a device connection's, through its device's runner)",
                        connection.name, req.tool
                    ),
                ));
            }
        }
        let row = self
            .db
            .receipt_policy_set(connection.id, &req.tool, &req.arguments, actor.user.id)
            .await?;
        Ok(views::receipt_policy(&row))
    }

    /// A connection's receipt policy (any member).
    pub async fn receipt_policy_get(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
    ) -> AppResult<ReceiptPolicyView> {
        let membership = self.membership(actor, ws).await?;
        let connection = self.find_connection(membership.workspace.id, key).await?;
        match self.db.receipt_policy_get(connection.id).await? {
            Some(row) => Ok(views::receipt_policy(&row)),
            None => Err(policy_missing(&connection.name)),
        }
    }

    /// Queues the receipt lookup for an unknown call (Use on its profile), or returns the
    /// lookup already queued under this request_id. The bool is true when it was created now.
    pub async fn call_reconcile(
        &self,
        actor: &Actor,
        ws: &str,
        call: &str,
        req: ReconcileCall,
    ) -> AppResult<(ReconcileAnswer, bool)> {
        if let Some(session) = &req.client_session_id {
            super::names::validate_client_session_id(session)?;
        }
        let workspace = self.membership(actor, ws).await?.workspace.id;
        let row = self.call_row(workspace, call).await?;
        let profile = self.db.profile_get(row.profile_id).await?;
        self.require_use(actor, &profile).await?;
        if row.kind != CallKind::Tool {
            return Err(not_a_tool_call(&row, "reconcile"));
        }
        let payload_digest = digest(&json!({
            "kind": CallKind::Lookup.as_str(),
            "parent_call_id": row.id,
            "client_session_id": req.client_session_id,
        }));
        if let Some(existing) = self
            .db
            .call_find_by_request(workspace, req.request_id)
            .await?
        {
            return self
                .lookup_replay(&row, existing, &payload_digest, actor.user.id)
                .await
                .map(|answer| (answer, false));
        }
        self.require_settleable(&row)?;
        let connection = self.db.connection_get(row.connection_id).await?;
        let Some(policy) = self.db.receipt_policy_get(connection.id).await? else {
            return Err(policy_missing(&connection.name));
        };
        let connector = self.db.connector_get(connection.connector_id).await?;
        if !self
            .db
            .call_target_is_current(row.id, &self.central_bindings().await)
            .await?
        {
            return Err(config_changed(&connection.name));
        }
        super::retire::require_in_service(Some(&connection), &connector, Some(&profile))?;
        if !connector.is_runnable() {
            return Err(super::connections::not_approved(&connector.name));
        }
        self.require_runner_available(&connection).await?;
        if !self
            .db
            .profile_has_connection(profile.id, connection.id)
            .await?
        {
            return Err(AppError::refused(
                ErrorCode::ConnectionNotInProfile,
                format!(
                    "profile `{}` no longer includes connection `{}`",
                    profile.name, connection.name
                ),
            ));
        }
        let lookup = NewCall {
            id: CallId::new(),
            workspace_id: workspace,
            request_id: req.request_id,
            payload_digest: payload_digest.clone(),
            profile_id: row.profile_id,
            connection_id: connection.id,
            connection_revision: connection.revision,
            environment_id: row.environment_id,
            tool_name: policy.tool_name.clone(),
            arguments: fill_template(&policy.arguments.0, &placeholder_values(&row)),
            client_session_id: req.client_session_id,
            timeout_seconds: LOOKUP_TIMEOUT_SECONDS,
            runner_ref: connection.runner_ref,
            created_by: actor.user.id,
            origin: CallOrigin {
                lookup_of: Some(row.id),
                ..CallOrigin::default()
            },
        };
        let inserted = self.db.call_insert(&lookup).await?;
        match self.sent(inserted) {
            Some(inserted) => {
                let call = self.call_row(workspace, &row.id.to_string()).await?;
                Ok((
                    ReconcileAnswer {
                        lookup: views::call(&inserted),
                        call: self.call_view_full(&call).await?,
                    },
                    true,
                ))
            }
            // A concurrent request with the same request_id won the insert.
            None => match self
                .db
                .call_find_by_request(workspace, req.request_id)
                .await?
            {
                Some(existing) => self
                    .lookup_replay(&row, existing, &payload_digest, actor.user.id)
                    .await
                    .map(|answer| (answer, false)),
                None => Err(AppError::Internal(
                    "request_id conflict without a stored call".into(),
                )),
            },
        }
    }

    /// The answer for a request_id that was used before: the same lookup of the same call, or
    /// a conflict.
    async fn lookup_replay(
        &self,
        call: &CallRow,
        existing: CallRow,
        payload_digest: &[u8],
        submitter: UserId,
    ) -> AppResult<ReconcileAnswer> {
        if existing.parent_call_id != Some(call.id) || existing.payload_digest != payload_digest {
            // Another user's call is not named: request_ids are unique per workspace.
            let other = if existing.created_by == submitter {
                format!("call {}", existing.id)
            } else {
                "a call of another user".to_owned()
            };
            return Err(AppError::refused(
                ErrorCode::McpRequestConflict,
                format!(
                    "request_id {} was already used for {other}; use a fresh request_id for this lookup",
                    existing.request_id
                ),
            ));
        }
        Ok(ReconcileAnswer {
            lookup: views::call(&existing),
            call: self.call_view_full(call).await?,
        })
    }

    /// Refuses unless the call can still be settled: unknown, and its evidence not erased.
    pub(crate) fn require_settleable(&self, call: &CallRow) -> AppResult<()> {
        if call.evidence_erased_at.is_some() {
            return Err(AppError::refused(
                ErrorCode::CallErased,
                format!(
                    "the evidence of call {} was erased; it can no longer be reconciled or resolved",
                    call.id
                ),
            ));
        }
        if call.state != CallState::Unknown {
            return Err(AppError::refused(
                ErrorCode::McpReconcileNotUnknown,
                format!(
                    "call {} is {}, not unknown: there is nothing to settle",
                    call.id, call.state
                ),
            ));
        }
        Ok(())
    }

    /// A call of a workspace, or `call_not_found`.
    pub(crate) async fn call_row(&self, workspace: WorkspaceId, call: &str) -> AppResult<CallRow> {
        let id = super::sessions::parse_call_id(call)?;
        self.db.call_get(workspace, id).await?.ok_or_else(|| {
            AppError::refused(
                ErrorCode::CallNotFound,
                format!("no call `{call}` in this workspace"),
            )
        })
    }

    /// The central bindings file's `bindings` map (references only, keyed by connection id),
    /// `null` when nothing is bound, or a marker when the file cannot be read (lookups then
    /// fail closed). Part of the target a central call is dispatched to: see
    /// [`crate::db::Datastore::call_lease`].
    pub(crate) async fn central_bindings(&self) -> Value {
        central_bindings(self.config.credentials_file.as_deref()).await
    }

    /// What recording a completion implies beside the state change.
    pub(crate) fn completion_effects(
        &self,
        completion: &StoredCompletion,
        receipt: Option<Uuid>,
    ) -> CompletionEffects {
        CompletionEffects {
            lookup_reports: lookup_report(completion),
            bounds: self.config.evidence_queue,
            receipt,
        }
    }

    /// Logs what a recorded completion settled and captured.
    pub(crate) fn note_completed(&self, completed: &Completed) {
        if let (Some(parent), Some(outcome)) =
            (completed.call.parent_call_id, completed.settled_parent)
        {
            tracing::info!(call = %parent, lookup = %completed.call.id, outcome = outcome.as_str(), "receipt lookup settled an unknown call");
            self.metrics.unknown_settled(SettledBy::Lookup, outcome);
        }
        note_capture(completed.call.id, completed.captured);
    }

    /// Records a report about a call that is already unknown: a late receipt from the runner
    /// and epoch that started it (while that epoch is still the runner's) becomes an
    /// observation and settles the call when it is certain. A report for a call whose evidence
    /// was erased is fenced. `None` when it is neither: the caller decides as before.
    pub(crate) async fn record_late_receipt(
        &self,
        runner: RunnerRef,
        call: CallId,
        epoch: Epoch,
        completion: &StoredCompletion,
    ) -> AppResult<Option<CompletionRecorded>> {
        let reported = late_report(completion);
        let (late, captured) = self
            .db
            .call_record_late_receipt(
                call,
                runner,
                epoch,
                reported,
                completion,
                self.config.evidence_queue,
            )
            .await?;
        note_capture(call, captured);
        Ok(match late {
            LateReceipt::Settled(outcome) => {
                tracing::info!(%call, %runner, outcome = outcome.as_str(), "a late receipt settled an unknown call");
                self.metrics
                    .unknown_settled(SettledBy::LateReceipt, outcome);
                Some(CompletionRecorded::Recorded)
            }
            LateReceipt::Observed => Some(CompletionRecorded::Superseded),
            LateReceipt::Erased => Some(CompletionRecorded::Fenced),
            LateReceipt::NotLate if self.db.call_is_erased(call).await? => {
                Some(CompletionRecorded::Fenced)
            }
            LateReceipt::NotLate => None,
        })
    }
}

/// Why a just-leased receipt lookup must not run (error code and message), or `None` for a
/// call that is not a lookup or may run: a lookup runs only while its unknown call is still
/// unknown, unerased, and was dispatched to the very target the lookup was just recorded as
/// dispatched to. A refused lookup is failed before anything is sent.
pub(crate) fn lookup_refusal(call: &LeasedRow) -> Option<(&'static str, &'static str)> {
    call.parent_call_id?;
    match &call.parent {
        Some(parent) if parent.evidence_erased_at.is_some() => Some((
            "call_erased",
            "the evidence of the call it looks up was erased",
        )),
        Some(parent) if parent.state != CallState::Unknown => Some((
            "mcp_reconcile_not_unknown",
            "the call it looks up is no longer unknown",
        )),
        Some(parent) if parent.target_digest.as_deref() == Some(call.target_digest.as_slice()) => {
            None
        }
        _ => Some((
            "mcp_reconcile_config_changed",
            "the connection's configuration changed since the call it looks up ran; the lookup would ask another target",
        )),
    }
}

/// Logs evidence that a full queue kept from being captured (it is also counted).
fn note_capture(call: CallId, captured: Captured) {
    if captured == Captured::Dropped {
        tracing::warn!(%call, "the workspace's pending-evidence queue is full: this result was not captured as evidence");
    }
}

fn policy_missing(connection: &str) -> AppError {
    AppError::refused(
        ErrorCode::ReceiptPolicyMissing,
        format!(
            "connection `{connection}` has no approved receipt policy; a workspace admin with Manage on its profiles sets one with `switchyard connection receipt-policy`"
        ),
    )
}

fn config_changed(connection: &str) -> AppError {
    AppError::refused(
        ErrorCode::McpReconcileConfigChanged,
        format!(
            "connection `{connection}` changed (revision, command, URL, runner or credential binding) since the call ran; a lookup now would ask another target, so the call can only be resolved with evidence (`switchyard mcp resolve`)"
        ),
    )
}

fn not_a_tool_call(call: &CallRow, verb: &str) -> AppError {
    AppError::refused(
        ErrorCode::InvalidRequest,
        format!(
            "call {} is a receipt lookup; {verb} the call it looks up ({}) instead",
            call.id,
            call.parent_call_id
                .map(|p| p.to_string())
                .unwrap_or_default()
        ),
    )
}

/// Refuses a lookup argument template that is not an object or names an unknown placeholder.
fn validate_template(arguments: &Value) -> AppResult<()> {
    if !arguments.is_object() {
        return Err(AppError::refused(
            ErrorCode::InvalidArguments,
            "`arguments` must be a JSON object, e.g. {\"request_id\": \"{{request_id}}\"}",
        ));
    }
    let mut strings = Vec::new();
    collect_strings(arguments, &mut strings);
    for text in strings {
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            let after = &rest[start..];
            let Some(end) = after.find("}}") else { break };
            let placeholder = &after[..end + 2];
            if !RECEIPT_PLACEHOLDERS.contains(&placeholder) {
                return Err(AppError::refused(
                    ErrorCode::InvalidArguments,
                    format!(
                        "unknown placeholder `{placeholder}`; use {}",
                        RECEIPT_PLACEHOLDERS.join(", ")
                    ),
                ));
            }
            rest = &after[end + 2..];
        }
    }
    Ok(())
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// The placeholder values of an unknown call.
fn placeholder_values(call: &CallRow) -> [(&'static str, String); 3] {
    [
        ("{{request_id}}", call.request_id.to_string()),
        ("{{call_id}}", call.id.to_string()),
        ("{{tool_name}}", call.tool_name.clone()),
    ]
}

/// The template with placeholders replaced in string values only (keys and other values are
/// kept as they are), so a value can never change the arguments' shape.
fn fill_template(template: &Value, values: &[(&'static str, String)]) -> Value {
    match template {
        Value::String(text) => Value::String(
            values
                .iter()
                .fold(text.clone(), |acc, (key, value)| acc.replace(key, value)),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| fill_template(v, values)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill_template(v, values)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What a receipt lookup's completion reports: `structuredContent.applied` when present, else
/// a text answer of exactly `applied` or `not applied`; anything else (including an error or
/// an uncertain lookup) is `unknown`.
pub(crate) fn lookup_report(completion: &StoredCompletion) -> Reported {
    let Some(result) = completion
        .result
        .as_ref()
        .filter(|_| completion.state == CallState::Succeeded)
    else {
        return Reported::Unknown;
    };
    if let Some(applied) = result
        .get("structuredContent")
        .and_then(|s| s.get("applied"))
    {
        return match applied.as_bool() {
            Some(true) => Reported::Applied,
            Some(false) => Reported::NotApplied,
            None => Reported::Unknown,
        };
    }
    let text: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    match text.concat().trim() {
        "applied" => Reported::Applied,
        "not applied" => Reported::NotApplied,
        _ => Reported::Unknown,
    }
}

/// What a late receipt reports: a result means the effect happened, a tool error that the
/// server answered with an error, a certain failure that nothing was sent.
fn late_report(completion: &StoredCompletion) -> Reported {
    match completion.state {
        CallState::Succeeded => Reported::Applied,
        CallState::ToolError => Reported::Failed,
        CallState::Failed => Reported::NotApplied,
        _ => Reported::Unknown,
    }
}

/// The `bindings` map of the central credentials file at `path` (see
/// [`App::central_bindings`]).
pub(crate) async fn central_bindings(path: Option<&std::path::Path>) -> Value {
    let Some(path) = path else {
        return Value::Null;
    };
    match tokio::fs::read_to_string(path).await {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(file) => file.get("bindings").cloned().unwrap_or(Value::Null),
            Err(_) => json!("unreadable"),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Null,
        Err(_) => json!("unreadable"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{ConnectorRow, LookedUpCall};

    fn succeeded(result: Value) -> StoredCompletion {
        StoredCompletion {
            state: CallState::Succeeded,
            result: Some(result),
            result_truncated: false,
            unbounded: None,
            error_code: None,
            error_message: None,
            kept: crate::db::Kept::All,
            credential_refused: false,
        }
    }

    #[test]
    fn lookups_are_read_from_structured_content_then_text() {
        let text = |t: &str| json!({"content": [{"type": "text", "text": t}]});
        assert_eq!(
            lookup_report(&succeeded(
                json!({"structuredContent": {"applied": true}, "content": [{"type": "text", "text": "not applied"}]})
            )),
            Reported::Applied
        );
        assert_eq!(
            lookup_report(&succeeded(json!({"structuredContent": {"applied": false}}))),
            Reported::NotApplied
        );
        assert_eq!(
            lookup_report(&succeeded(json!({"structuredContent": {"applied": "yes"}}))),
            Reported::Unknown
        );
        assert_eq!(
            lookup_report(&succeeded(text("applied"))),
            Reported::Applied
        );
        assert_eq!(
            lookup_report(&succeeded(text(" not applied\n"))),
            Reported::NotApplied
        );
        assert_eq!(
            lookup_report(&succeeded(text("probably applied"))),
            Reported::Unknown
        );
        let mut error = succeeded(text("applied"));
        error.state = CallState::ToolError;
        assert_eq!(lookup_report(&error), Reported::Unknown);
    }

    fn leased_lookup(parent: Option<LookedUpCall>) -> LeasedRow {
        let connector = ConnectorRow {
            id: switchyard_protocol::ConnectorId(Uuid::nil()),
            name: "fixture".into(),
            transport: "stdio".into(),
            command: Some("fixture".into()),
            args: sqlx::types::Json(Vec::new()),
            env_names: sqlx::types::Json(Vec::new()),
            url: None,
            revision: 1,
            approved_revision: Some(1),
            created_at: chrono::Utc::now(),
            retired_at: None,
            retired_by: None,
        };
        LeasedRow {
            traceparent: None,
            id: CallId::new(),
            created_at: chrono::Utc::now(),
            request_id: Default::default(),
            connection_id: Default::default(),
            connection_revision: 1,
            connector,
            tool_name: "lookup".into(),
            arguments: None,
            timeout_seconds: 60,
            client_session_id: None,
            profile_id: Default::default(),
            created_by: Default::default(),
            submitted_by_device: None,
            target_digest: vec![1; 32],
            parent_call_id: Some(CallId::new()),
            kind: CallKind::Lookup,
            parent,
            accepted_spec_digest: None,
            auth_kind: None,
        }
    }

    #[test]
    fn a_lookup_runs_only_for_an_unknown_unerased_call_dispatched_to_the_same_target() {
        let parent = |state: &str, digest: Option<u8>, erased: bool| LookedUpCall {
            state: state.parse().expect("a state"),
            target_digest: digest.map(|d| vec![d; 32]),
            evidence_erased_at: erased.then(chrono::Utc::now),
        };
        let code = |row: &LeasedRow| lookup_refusal(row).map(|(code, _)| code);
        assert_eq!(
            code(&leased_lookup(Some(parent("unknown", Some(1), false)))),
            None
        );
        assert_eq!(
            code(&leased_lookup(Some(parent("unknown", Some(1), true)))),
            Some("call_erased")
        );
        assert_eq!(
            code(&leased_lookup(Some(parent("resolved", Some(1), false)))),
            Some("mcp_reconcile_not_unknown")
        );
        assert_eq!(
            code(&leased_lookup(Some(parent("unknown", Some(2), false)))),
            Some("mcp_reconcile_config_changed")
        );
        assert_eq!(
            code(&leased_lookup(Some(parent("unknown", None, false)))),
            Some("mcp_reconcile_config_changed")
        );
        assert_eq!(
            code(&leased_lookup(None)),
            Some("mcp_reconcile_config_changed"),
            "its call is gone"
        );
        let mut tool_call = leased_lookup(None);
        tool_call.parent_call_id = None;
        assert_eq!(code(&tool_call), None, "an ordinary call is no lookup");
    }

    #[test]
    fn late_receipts_report_their_outcome() {
        let mut completion = succeeded(json!({}));
        let cases = [
            (CallState::Succeeded, Reported::Applied),
            (CallState::ToolError, Reported::Failed),
            (CallState::Failed, Reported::NotApplied),
            (CallState::Unknown, Reported::Unknown),
        ];
        for (state, reported) in cases {
            completion.state = state;
            assert_eq!(late_report(&completion), reported, "{state}");
        }
    }

    #[test]
    fn templates_fill_string_values_only() {
        let values = [
            ("{{request_id}}", "r-1".to_owned()),
            ("{{call_id}}", "c-1".to_owned()),
            ("{{tool_name}}", "count".to_owned()),
        ];
        let template = json!({"request_id": "{{request_id}}", "{{call_id}}": 1, "nested": ["id={{call_id}}/{{tool_name}}", true]});
        assert!(validate_template(&template).is_ok());
        assert_eq!(
            fill_template(&template, &values),
            json!({"request_id": "r-1", "{{call_id}}": 1, "nested": ["id=c-1/count", true]})
        );
        assert!(validate_template(&json!({"x": "{{secret}}"})).is_err());
        assert!(validate_template(&json!(["{{request_id}}"])).is_err());
    }
}
