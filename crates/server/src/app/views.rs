//! Conversions from datastore rows to protocol views: the only place server types become
//! wire types.

use crate::db::{CallRow, ConnectionRow, ConnectorRow, EnvironmentRow, Grants, MemberRow, ToolRow, UserRow, WorkspaceRow};
use switchyard_protocol::api::*;
use switchyard_protocol::CallState;

pub(crate) fn user(row: &UserRow) -> UserView {
    UserView { id: row.id.into(), name: row.name.clone(), is_owner: row.is_owner }
}

pub(crate) fn workspace(row: &WorkspaceRow) -> WorkspaceView {
    WorkspaceView { id: row.id.into(), name: row.name.clone(), created_at: row.created_at }
}

pub(crate) fn member(row: &MemberRow) -> MemberView {
    MemberView {
        workspace_id: row.workspace_id.into(),
        user_id: row.user_id.into(),
        user_name: row.user_name.clone(),
        role: if row.role == "admin" { MemberRole::Admin } else { MemberRole::Member },
    }
}

pub(crate) fn environment(row: &EnvironmentRow) -> EnvironmentView {
    EnvironmentView { id: row.id.into(), workspace_id: row.workspace_id.into(), name: row.name.clone() }
}

pub(crate) fn connector(row: &ConnectorRow) -> ConnectorView {
    ConnectorView {
        id: row.id.into(),
        name: row.name.clone(),
        spec: row.spec(),
        revision: row.revision,
        approved: row.is_runnable(),
        created_at: row.created_at,
    }
}

pub(crate) fn connection(row: &ConnectionRow) -> ConnectionView {
    ConnectionView {
        id: row.id.into(),
        workspace_id: row.workspace_id.into(),
        name: row.name.clone(),
        connector_id: row.connector_id.into(),
        connector_name: row.connector_name.clone(),
        runner: row.runner_ref.clone(),
        revision: row.revision,
        last_discovery_at: row.last_discovery_at,
        last_discovery_error: row.last_discovery_error.clone(),
        created_at: row.created_at,
    }
}

pub(crate) fn tool(row: &ToolRow) -> ToolView {
    ToolView {
        name: row.name.clone(),
        description: row.description.clone(),
        input_schema: row.input_schema.0.clone(),
        annotations: row.annotations.as_ref().map(|a| a.0.clone()),
        available: row.available,
        discovered_at: row.discovered_at,
    }
}

pub(crate) fn grant(user_id: uuid::Uuid, user_name: &str, grants: Grants) -> GrantView {
    GrantView {
        user_id: user_id.into(),
        user_name: user_name.to_owned(),
        use_: grants.use_,
        manage: grants.manage,
        share: grants.share,
    }
}

pub(crate) fn call(row: &CallRow) -> CallView {
    CallView {
        id: row.id.into(),
        workspace_id: row.workspace_id.into(),
        request_id: row.request_id.into(),
        profile_id: row.profile_id.into(),
        connection_id: row.connection_id.into(),
        environment_id: row.environment_id.into(),
        tool_name: row.tool_name.clone(),
        client_session_id: row.client_session_id.clone(),
        timeout_seconds: u32::try_from(row.timeout_seconds).unwrap_or(DEFAULT_TIMEOUT_SECONDS),
        // The column's CHECK constraint admits only known names.
        state: row.state.parse().unwrap_or(CallState::Unknown),
        runner: row.runner_ref.clone(),
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
    }
}

pub(crate) fn event(row: &crate::db::EventRow) -> ConnectionEventView {
    ConnectionEventView {
        id: row.id,
        connection_id: row.connection_id.into(),
        kind: row.kind.clone(),
        detail: row.detail.0.clone(),
        runner: row.runner_ref.clone(),
        at: row.at,
    }
}
