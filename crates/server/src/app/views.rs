//! Conversions from datastore rows to protocol views: the only place server types become
//! wire types.

use crate::db::{
    CallRow, ConnectionAuthColumns, ConnectionRow, ConnectorRow, EnvironmentRow, Grants, MemberRow,
    ToolRow, UserRow, WorkspaceRow,
};
use chrono::{DateTime, Utc};
use switchyard_protocol::api::*;
use switchyard_protocol::approval::ApprovalState;
use switchyard_protocol::{CallState, ConnectionId, UserId, WorkspaceId};

/// When and by whom an object was retired, if it is.
pub(crate) fn retired(at: Option<DateTime<Utc>>, by: Option<UserId>) -> Option<RetiredView> {
    at.map(|at| RetiredView { at, by })
}

pub(crate) fn user(row: &UserRow) -> UserView {
    UserView {
        id: row.id,
        name: row.name.clone(),
        is_owner: row.is_owner,
    }
}

pub(crate) fn workspace(row: &WorkspaceRow) -> WorkspaceView {
    WorkspaceView {
        id: row.id,
        name: row.name.clone(),
        created_at: row.created_at,
    }
}

pub(crate) fn member(row: &MemberRow) -> MemberView {
    MemberView {
        workspace_id: row.workspace_id,
        user_id: row.user_id,
        user_name: row.user_name.clone(),
        role: if row.role == "admin" {
            MemberRole::Admin
        } else {
            MemberRole::Member
        },
    }
}

pub(crate) fn environment(row: &EnvironmentRow) -> EnvironmentView {
    EnvironmentView {
        id: row.id,
        workspace_id: row.workspace_id,
        name: row.name.clone(),
    }
}

/// A connector as an installation owner sees it: its whole target.
pub(crate) fn connector(row: &ConnectorRow) -> ConnectorView {
    connector_for(row, true)
}

/// A connector as a reader sees it: the target (command, arguments, URL) only to those who may
/// manage connectors, the transport to everyone.
pub(crate) fn connector_for(row: &ConnectorRow, manages: bool) -> ConnectorView {
    let spec = row.spec();
    ConnectorView {
        id: row.id,
        name: row.name.clone(),
        target: if manages {
            ConnectorTarget::Shown(spec)
        } else {
            ConnectorTarget::Withheld {
                transport: spec.transport(),
            }
        },
        revision: row.revision,
        approved: row.is_runnable(),
        created_at: row.created_at,
        retired: retired(row.retired_at, row.retired_by),
    }
}

pub(crate) fn connection(row: &ConnectionRow) -> ConnectionView {
    ConnectionView {
        id: row.id,
        workspace_id: row.workspace_id,
        name: row.name.clone(),
        namespace: row.namespace.clone(),
        connector_id: row.connector_id,
        connector_name: row.connector_name.clone(),
        runner: row.runner_ref.to_string(),
        revision: row.revision,
        last_discovery_at: row.last_discovery_at,
        last_discovery_error: row.last_discovery_error.clone(),
        created_at: row.created_at,
        retired: retired(row.retired_at, row.retired_by),
        prefix_tools: row.prefix_tools,
        declared: row.declared,
        auth: connection_auth(&row.auth),
    }
}

/// A connection's auth settings and state, once it has a `connection_auth` row.
pub(crate) fn connection_auth(auth: &ConnectionAuthColumns) -> Option<ConnectionAuthView> {
    Some(ConnectionAuthView {
        state: auth.auth_state?,
        kind: auth.auth_kind,
        scopes: auth.auth_scopes.clone().unwrap_or_default(),
        client_id_env: auth.auth_client_id_env.clone(),
        client_secret_env: auth.auth_client_secret_env.clone(),
        credential: auth.auth_credential.unwrap_or_default(),
        authorized_at: auth.auth_authorized_at,
        header: auth.auth_header.clone(),
    })
}

pub(crate) fn tool(row: &ToolRow) -> ToolView {
    let annotations = row.annotations.as_ref().map(|a| a.0.clone());
    let hints = ToolHints::from_annotations(annotations.as_ref());
    let classification = row.classification();
    ToolView {
        name: row.name.clone(),
        description: row.description.clone(),
        input_schema: row.input_schema.0.clone(),
        annotations,
        hints,
        state: ToolState::derive(row.retired, row.available, classification.is_some()),
        classification,
        suggested: hints.suggested(),
        needs_review: row.needs_review,
        available: row.available,
        discovered_at: row.discovered_at,
        retired: row.retired,
    }
}

pub(crate) fn grant(user_id: UserId, user_name: &str, grants: Grants) -> GrantView {
    GrantView {
        user_id,
        user_name: user_name.to_owned(),
        use_: grants.use_,
        manage: grants.manage,
        share: grants.share,
        approve: grants.approve,
    }
}

pub(crate) fn call(row: &CallRow) -> CallView {
    CallView {
        id: row.id,
        workspace_id: row.workspace_id,
        request_id: row.request_id,
        profile_id: row.profile_id,
        connection_id: row.connection_id,
        environment_id: row.environment_id,
        tool_name: row.tool_name.clone(),
        client_session_id: row.client_session_id.clone(),
        timeout_seconds: u32::try_from(row.timeout_seconds).unwrap_or(DEFAULT_TIMEOUT_SECONDS),
        state: row.state,
        runner: row.runner_ref.to_string(),
        arguments: row.arguments.as_ref().map(|a| a.0.clone()),
        result: row.result.as_ref().map(|r| r.0.clone()),
        result_truncated: row.result_truncated,
        error: row.error_code.as_ref().map(|code| CallError {
            code: code.clone(),
            message: row.error_message.clone().unwrap_or_default(),
        }),
        created_at: row.created_at,
        leased_at: row.leased_at,
        started_at: row.started_at,
        finished_at: row.finished_at,
        cancel_requested_at: row.cancel_requested_at,
        retention_expired_at: row.retention_expired_at,
        kind: row.kind,
        parent_call_id: row.parent_call_id,
        resolution_outcome: row.resolution_outcome,
        attempts: Vec::new(),
        observations: Vec::new(),
        resolution: None,
        lineage: None,
        erased_at: row.evidence_erased_at,
    }
}

/// A call as the history list shows it: no arguments, result or error message.
pub(crate) fn call_summary(row: &CallRow) -> CallSummary {
    CallSummary {
        id: row.id,
        workspace_id: row.workspace_id,
        request_id: row.request_id,
        profile_id: row.profile_id,
        connection_id: row.connection_id,
        environment_id: row.environment_id,
        tool_name: row.tool_name.clone(),
        kind: row.kind,
        parent_call_id: row.parent_call_id,
        state: row.state,
        resolution_outcome: row.resolution_outcome,
        runner: row.runner_ref.to_string(),
        submitted_by: row.created_by,
        submitted_by_device: row.submitted_by_device,
        error_code: row.error_code.clone(),
        created_at: row.created_at,
        started_at: row.started_at,
        finished_at: row.finished_at,
        retention_expired_at: row.retention_expired_at,
        erased_at: row.evidence_erased_at,
    }
}

/// The attempt a call made, if it was ever started.
pub(crate) fn attempt(row: &CallRow) -> Option<AttemptView> {
    row.started_at?;
    Some(AttemptView {
        runner: row.runner_ref.to_string(),
        epoch: row.lease_epoch.map(|epoch| epoch.0),
        connector_revision: row.connector_revision,
        leased_at: row.leased_at,
        started_at: row.started_at,
        finished_at: row.finished_at,
        error: row.error_code.as_ref().map(|code| CallError {
            code: code.clone(),
            message: row.error_message.clone().unwrap_or_default(),
        }),
    })
}

pub(crate) fn observation(row: &crate::db::ObservationRow) -> ObservationView {
    ObservationView {
        id: row.id,
        source: if row.source == "lookup" {
            ObservationSource::Lookup
        } else {
            ObservationSource::LateReceipt
        },
        // The column's CHECK constraint admits only known names.
        reported: Reported::parse(&row.reported).unwrap_or(Reported::Unknown),
        lookup_call_id: row.lookup_call_id,
        runner: row.runner_ref.to_string(),
        epoch: row.epoch,
        output: row.output.as_ref().map(|o| o.0.clone()),
        recorded_at: row.recorded_at,
        erased_at: row.erased_at,
    }
}

pub(crate) fn resolution(row: &crate::db::ResolutionRow) -> ResolutionView {
    ResolutionView {
        // The column's CHECK constraint admits only known names.
        outcome: ResolutionOutcome::parse(&row.outcome).unwrap_or(ResolutionOutcome::Failed),
        source: if row.source == "caller" {
            ResolutionSource::Caller
        } else {
            ResolutionSource::Observation
        },
        observation_id: row.observation_id,
        source_version_id: row.evidence_id,
        explanation: row.explanation.clone(),
        explanation_removed_at: row.explanation_removed_at,
        resolved_by: row.resolved_by,
        request_id: row.request_id,
        resolved_at: row.resolved_at,
    }
}

pub(crate) fn receipt_policy(row: &crate::db::ReceiptPolicyRow) -> ReceiptPolicyView {
    ReceiptPolicyView {
        connection_id: row.connection_id,
        tool: row.tool_name.clone(),
        arguments: row.arguments.0.clone(),
        approved_by: row.approved_by,
        approved_at: row.approved_at,
    }
}

/// A connection's capture exclusions.
pub(crate) fn capture_exclusions(
    connection: ConnectionId,
    rows: &[crate::db::CaptureExclusionRow],
) -> CaptureExclusionsView {
    CaptureExclusionsView {
        connection_id: connection,
        exclusions: rows.iter().map(super::capture::exclusion_view).collect(),
        updated_at: rows.iter().map(|r| r.updated_at).max(),
    }
}

/// A workspace's capture policy; no row means it was never set (off, empty queue, the default
/// retention).
pub(crate) fn capture_policy(
    workspace: WorkspaceId,
    row: Option<&crate::db::CapturePolicyRow>,
) -> CapturePolicyView {
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    CapturePolicyView {
        workspace_id: workspace,
        capture_managed_tool_results: row.is_some_and(|r| r.capture_managed_tool_results),
        pending_records: row.map_or(0, |r| count(i64::from(r.pending_records))),
        pending_bytes: row.map_or(0, |r| count(r.pending_bytes)),
        dropped: row.map_or(0, |r| count(r.dropped)),
        expired: row.map_or(0, |r| count(r.expired)),
        evidence_retention_days: row.map_or(DEFAULT_EVIDENCE_RETENTION_DAYS, |r| {
            u32::try_from(r.evidence_retention_days).unwrap_or(DEFAULT_EVIDENCE_RETENTION_DAYS)
        }),
        updated_at: row.and_then(|r| r.updated_at),
    }
}

pub(crate) fn evidence(row: &crate::db::EvidenceRow) -> EvidenceView {
    EvidenceView {
        id: row.id,
        workspace_id: row.workspace_id,
        call_id: row.call_id,
        request_id: row.request_id,
        kind: if row.kind == CallKind::Lookup.as_str() {
            CallKind::Lookup
        } else {
            CallKind::Tool
        },
        profile_id: row.profile_id,
        environment_id: row.environment_id,
        operation_id: row.operation_id,
        tool_name: row.tool_name.clone(),
        connection_id: row.connection_id,
        connector_id: row.connector_id,
        connector_revision: row.connector_revision,
        runner: row.runner_ref.to_string(),
        // The column's CHECK constraint admits only succeeded, tool_error and resolved.
        outcome: row.outcome.parse().unwrap_or(CallState::Resolved),
        resolution_outcome: row
            .resolution_outcome
            .as_deref()
            .and_then(ResolutionOutcome::parse),
        output: row.output.as_ref().map(|o| o.0.clone()),
        output_truncated: row.output_truncated,
        lineage: row.lineage.0.clone(),
        captured_at: row.captured_at,
        published_at: row.published_at,
        erased_at: row.erased_at,
    }
}

pub(crate) fn event(row: &crate::db::EventRow) -> ConnectionEventView {
    ConnectionEventView {
        id: row.id,
        connection_id: row.connection_id,
        kind: row.kind.clone(),
        detail: row.detail.0.clone(),
        runner: row.runner_ref.map(|runner| runner.to_string()),
        at: row.at,
    }
}

pub(crate) fn placement(row: &crate::db::PlacementRow) -> PlacementView {
    let spec = row.spec.0.spec();
    PlacementView {
        device_id: row.device_id,
        device_name: row.device_name.clone(),
        connection_id: row.connection_id,
        connection_name: row.connection_name.clone(),
        connector_name: row.connector_name.clone(),
        spec_digest: spec.digest(),
        spec,
        state: row.state(),
        accepted_digest: row.spec_digest.clone(),
        decided_by: row.decided_by,
        decided_at: row.decided_at,
    }
}

pub(crate) fn device(row: &crate::db::DeviceRow) -> DeviceView {
    DeviceView {
        id: row.id,
        workspace_id: row.workspace_id,
        name: row.name.clone(),
        runner: super::principal::device_runner_ref(row.id).to_string(),
        profile_id: row.profile_id,
        approved_by: row.approved_by,
        created_at: row.created_at,
        last_seen_at: row.last_seen_at,
        revoked_at: row.revoked_at,
    }
}

pub(crate) fn token(row: &crate::db::TokenRow) -> TokenView {
    TokenView {
        id: row.id,
        name: row.name.clone(),
        created_at: row.created_at,
        expires_at: row.expires_at,
        revoked_at: row.revoked_at,
    }
}

pub(crate) fn operation(row: &crate::db::OperationRow) -> OperationView {
    OperationView {
        id: row.id,
        workspace_id: row.workspace_id,
        environment_id: row.environment_id,
        profile_id: row.profile_id,
        task: row.task.clone(),
        device_id: row.device_id,
        created_at: row.created_at,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn audit_entry(row: &crate::db::AuditRow) -> AuditEntryView {
    AuditEntryView {
        seq: row.seq,
        at: row.at,
        workspace_id: row.workspace_id.map(WorkspaceId),
        actor: AuditActorView {
            kind: match row.actor_kind.as_str() {
                "user" => AuditActorKind::User,
                "device" => AuditActorKind::Device,
                _ => AuditActorKind::System,
            },
            id: row.actor_id,
            name: row.actor_name.clone(),
        },
        action: row.action.clone(),
        object: AuditObjectView {
            kind: row.object_kind.clone(),
            id: row.object_id,
            name: row.object_name.clone(),
        },
        connection_id: row.connection_id.map(ConnectionId),
        before: row.before.as_ref().map(|j| j.0.clone()),
        after: row.after.as_ref().map(|j| j.0.clone()),
        request_id: row.request_id.clone(),
        trace_id: row.trace_id.clone(),
        call_id: row.call_id.map(switchyard_protocol::CallId),
        prev_hash: row.prev_hash.as_deref().map(hex),
        hash: hex(&row.hash),
    }
}

/// A question as `reader` sees it: whether they may answer it is theirs.
pub(crate) fn approval(
    row: &crate::db::ApprovalRow,
    reader: UserId,
) -> switchyard_protocol::approval::ApprovalView {
    use std::fmt::Write;
    let mut payload_digest = String::with_capacity(row.payload_digest.len() * 2);
    for byte in &row.payload_digest {
        let _ = write!(payload_digest, "{byte:02x}");
    }
    switchyard_protocol::approval::ApprovalView {
        call_id: row.call_id,
        workspace_id: row.workspace_id,
        request_id: row.request_id,
        profile_id: row.profile_id,
        profile_name: row.profile_name.clone(),
        connection_id: row.connection_id,
        connection_name: row.connection_name.clone(),
        tool_name: row.tool_name.clone(),
        arguments: row.arguments.as_ref().map(|a| a.0.clone()),
        payload_digest,
        asked_by: row.asked_by,
        asked_by_name: row.asked_by_name.clone(),
        asked_by_device: row.asked_by_device,
        asked_at: row.asked_at,
        why: row.why,
        policy: row.policy,
        state: row.state,
        call_state: row.call_state,
        expires_at: row.expires_at,
        decided_by: row.decided_by,
        decided_by_name: row.decided_by_name.clone(),
        decided_at: row.decided_at,
        reason: row.reason.clone(),
        may_answer: row.state == ApprovalState::Pending
            && row.reader_may_approve
            && row.asked_by != reader,
    }
}

pub(crate) fn approval_policy(
    row: &crate::db::ApprovalPolicyRow,
) -> switchyard_protocol::approval::ApprovalPolicyView {
    switchyard_protocol::approval::ApprovalPolicyView {
        connection_id: row.connection_id,
        connection_name: row.connection_name.clone(),
        tool: row.tool.clone(),
        policy: row.policy,
    }
}
