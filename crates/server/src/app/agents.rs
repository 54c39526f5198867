//! Agents as principals: created by workspace admins, granted Use on profiles as a person is,
//! and configured per connection. An agent's token is accepted on `/mcp` only
//! ([`App::mcp_authenticate`]); everywhere else it is refused, so an agent can never approve,
//! classify or manage (migration `0024_agents.sql`).

use super::audit::Audit;
use super::auth::{already_exists, hash_token, new_token};
use super::{Actor, App};
use crate::db::{AgentConnectionRow, AgentRow, Key, NewAgent};
use crate::error::{AppError, AppResult};
use serde_json::json;
use switchyard_protocol::ErrorCode;
use switchyard_protocol::WorkspaceId;
use switchyard_protocol::agents::{
    AgentConnectionSettings, AgentConnectionView, AgentCreated, AgentDetail, AgentProfileView,
    AgentView, CreateAgent, EditAgent,
};
use switchyard_protocol::api::{ConnectionView, SetDeclared, SetPrefixTools};

/// Most globs in one of a connection's `include` or `exclude` lists.
const MAX_GLOBS: usize = 64;
/// Longest glob.
const MAX_GLOB_LEN: usize = 128;

impl App {
    /// Creates an agent (workspace admins) and returns it with its token, shown once.
    pub async fn agent_create(
        &self,
        actor: &Actor,
        ws: &str,
        req: CreateAgent,
    ) -> AppResult<AgentCreated> {
        let membership = self.admin_membership(actor, ws).await?;
        super::names::validate_name("agent", &req.name)?;
        let token = new_token().map_err(|e| AppError::Internal(format!("no randomness: {e}")))?;
        let workspace = &membership.workspace;
        let row = self
            .db
            .agent_create(NewAgent {
                workspace: workspace.id,
                name: &req.name,
                user_name: &agent_user_name(&req.name, &workspace.name),
                mode: req.mode,
                defer_all: req.defer_all,
                created_by: actor.user.id,
                token_hash: &hash_token(&token),
                declared: req.declared,
            })
            .await
            .map_err(|e| already_exists(e, "agent", &req.name))?;
        self.audit(
            Audit::by(actor, "agent.created")
                .workspace(workspace.id)
                .object("agent", Some(row.user_id.0), &row.name)
                .after(
                    json!({"mode": row.mode, "defer_all": row.defer_all, "declared": row.declared}),
                ),
        )
        .await;
        Ok(AgentCreated {
            agent: agent_view(&row),
            token,
        })
    }

    /// A workspace's agents (members).
    pub async fn agent_list(&self, actor: &Actor, ws: &str) -> AppResult<Vec<AgentView>> {
        let membership = self.membership(actor, ws).await?;
        let rows = self.db.agent_list(membership.workspace.id).await?;
        Ok(rows.iter().map(agent_view).collect())
    }

    /// An agent with the profiles it holds Use on and its per-connection settings (members).
    pub async fn agent_show(&self, actor: &Actor, ws: &str, agent: &str) -> AppResult<AgentDetail> {
        let membership = self.membership(actor, ws).await?;
        let row = self.find_agent(membership.workspace.id, agent).await?;
        self.agent_detail(&row).await
    }

    /// Changes an agent's mode, deferral or declared mark (workspace admins).
    pub async fn agent_edit(
        &self,
        actor: &Actor,
        ws: &str,
        agent: &str,
        req: EditAgent,
    ) -> AppResult<AgentView> {
        let membership = self.admin_membership(actor, ws).await?;
        let row = self.find_agent(membership.workspace.id, agent).await?;
        let mode = req.mode.unwrap_or(row.mode);
        let defer_all = req.defer_all.unwrap_or(row.defer_all);
        let declared = req.declared.unwrap_or(row.declared);
        if (mode, defer_all, declared) == (row.mode, row.defer_all, row.declared) {
            return Ok(agent_view(&row));
        }
        let after = self
            .db
            .agent_edit(row.user_id, (mode, defer_all, declared))
            .await?;
        self.audit(
            Audit::by(actor, "agent.changed")
                .workspace(row.workspace_id)
                .object("agent", Some(row.user_id.0), &row.name)
                .before(json!({"mode": row.mode, "defer_all": row.defer_all, "declared": row.declared}))
                .after(json!({"mode": after.mode, "defer_all": after.defer_all, "declared": after.declared})),
        )
        .await;
        Ok(agent_view(&after))
    }

    /// Revokes an agent (workspace admins): its token stops working at once, its calls no
    /// runner has taken (queued, or awaiting approval) are cancelled, and its Use grants are
    /// taken, as `profile revoke` takes them. Revoking twice changes nothing.
    pub async fn agent_revoke(&self, actor: &Actor, ws: &str, agent: &str) -> AppResult<AgentView> {
        let membership = self.admin_membership(actor, ws).await?;
        let row = self.find_agent(membership.workspace.id, agent).await?;
        if row.revoked_at.is_some() {
            return Ok(agent_view(&row));
        }
        let profiles = self.db.agent_revoke(row.user_id, actor.user.id).await?;
        // What it submitted and no runner has taken will not run: queued calls and calls
        // waiting for a person are cancelled (one guarded update each, as `mcp cancel` does).
        for (workspace, call, connection, tool) in
            self.db.calls_waiting_of_submitter(row.user_id).await?
        {
            let effect = self.sent(self.db.call_cancel(workspace, call).await?);
            self.audit_cancel(actor, effect, (workspace, connection, call), &tool)
                .await;
        }
        let use_only = crate::db::Grants {
            use_: true,
            ..Default::default()
        };
        for profile in profiles {
            if let Some(profile) = self
                .db
                .profile_find(row.workspace_id, &Key::Id(profile.0))
                .await?
            {
                self.db
                    .grant_remove(&profile, row.user_id, use_only, actor.user.id)
                    .await?;
            }
        }
        self.audit(
            Audit::by(actor, "agent.revoked")
                .workspace(row.workspace_id)
                .object("agent", Some(row.user_id.0), &row.name),
        )
        .await;
        let after = self
            .find_agent(row.workspace_id, &row.user_id.0.to_string())
            .await?;
        Ok(agent_view(&after))
    }

    /// Replaces an agent's settings for one connection of its workspace (workspace admins).
    pub async fn agent_connection_set(
        &self,
        actor: &Actor,
        ws: &str,
        agent: &str,
        connection: &str,
        settings: AgentConnectionSettings,
    ) -> AppResult<AgentConnectionView> {
        let membership = self.admin_membership(actor, ws).await?;
        let row = self.find_agent(membership.workspace.id, agent).await?;
        let connection = self
            .find_connection(membership.workspace.id, connection)
            .await?;
        check_globs("include", &settings.include)?;
        check_globs("exclude", &settings.exclude)?;
        let before = self
            .db
            .agent_connections(row.user_id)
            .await?
            .into_iter()
            .find(|c| c.connection_id == connection.id)
            .map(|c| c.settings());
        self.db
            .agent_connection_set(row.user_id, connection.id, &settings, actor.user.id)
            .await?;
        if before.as_ref() != Some(&settings) {
            self.audit(
                Audit::by(actor, "agent.connection_changed")
                    .workspace(row.workspace_id)
                    .connection(connection.id)
                    .object("agent", Some(row.user_id.0), &row.name)
                    .before(json!({"connection": connection.name, "settings": before}))
                    .after(json!({"connection": connection.name, "settings": settings})),
            )
            .await;
        }
        Ok(AgentConnectionView {
            connection_id: connection.id,
            connection_name: connection.name,
            settings,
        })
    }

    /// Sets whether a connection's tools reach agents as `namespace__tool` or by their own
    /// names (the manage-integrations right: workspace admins and the owner).
    pub async fn connection_set_prefix_tools(
        &self,
        actor: &Actor,
        ws: &str,
        connection: &str,
        req: SetPrefixTools,
    ) -> AppResult<ConnectionView> {
        let membership = self.integrations_membership(actor, ws).await?;
        let row = self
            .find_connection(membership.workspace.id, connection)
            .await?;
        if row.prefix_tools != req.prefix_tools {
            self.db
                .connection_set_prefix_tools(row.id, req.prefix_tools)
                .await?;
            self.audit(
                Audit::by(actor, "connection.prefix_tools_changed")
                    .workspace(row.workspace_id)
                    .connection(row.id)
                    .object("connection", Some(row.id.0), &row.name)
                    .before(json!({"prefix_tools": row.prefix_tools}))
                    .after(json!({"prefix_tools": req.prefix_tools})),
            )
            .await;
        }
        let after = self.db.connection_get(row.id).await?;
        Ok(super::views::connection(&after))
    }

    /// Marks a connection declared by a file, or not (workspace admins): `switchyard apply`
    /// retires only declared connections whose section left the file.
    pub async fn connection_set_declared(
        &self,
        actor: &Actor,
        ws: &str,
        connection: &str,
        req: SetDeclared,
    ) -> AppResult<ConnectionView> {
        let membership = self.admin_membership(actor, ws).await?;
        let row = self
            .find_connection(membership.workspace.id, connection)
            .await?;
        if row.declared != req.declared {
            self.db
                .connection_set_declared(row.id, req.declared)
                .await?;
            self.audit(
                Audit::by(actor, "connection.declared_changed")
                    .workspace(row.workspace_id)
                    .connection(row.id)
                    .object("connection", Some(row.id.0), &row.name)
                    .before(json!({"declared": row.declared}))
                    .after(json!({"declared": req.declared})),
            )
            .await;
        }
        let after = self.db.connection_get(row.id).await?;
        Ok(super::views::connection(&after))
    }

    /// The agent of the workspace named by `key` (id or name).
    pub(crate) async fn find_agent(
        &self,
        workspace: WorkspaceId,
        key: &str,
    ) -> AppResult<AgentRow> {
        self.db
            .agent_find(workspace, &Key::parse(key))
            .await?
            .ok_or_else(|| {
                AppError::refused(
                    ErrorCode::AgentNotFound,
                    format!(
                        "no agent `{key}` in this workspace; `switchyard agent list` shows them"
                    ),
                )
            })
    }

    async fn agent_detail(&self, row: &AgentRow) -> AppResult<AgentDetail> {
        let profiles = self
            .db
            .agent_use_profiles(row.workspace_id, row.user_id)
            .await?
            .into_iter()
            .map(|(id, name)| AgentProfileView { id, name })
            .collect();
        let connections = self
            .db
            .agent_connections(row.user_id)
            .await?
            .iter()
            .map(connection_view)
            .collect();
        Ok(AgentDetail {
            agent: agent_view(row),
            profiles,
            connections,
        })
    }
}

/// An agent's user name: `<agent>@<workspace>`, which no person's name can be.
fn agent_user_name(agent: &str, workspace: &str) -> String {
    format!("{agent}@{workspace}")
}

/// Refuses a glob list that is too long, or a glob that is empty, too long or has characters
/// no tool name has.
fn check_globs(list: &str, globs: &[String]) -> AppResult<()> {
    let invalid = |message: String| AppError::refused(ErrorCode::InvalidRequest, message);
    if globs.len() > MAX_GLOBS {
        return Err(invalid(format!(
            "`{list}` has {} globs; at most {MAX_GLOBS}",
            globs.len()
        )));
    }
    for glob in globs {
        let printable = glob.chars().all(|c| !c.is_control() && !c.is_whitespace());
        if glob.is_empty() || glob.len() > MAX_GLOB_LEN || !printable {
            return Err(invalid(format!(
                "`{list}` glob `{}` is not valid: use 1–{MAX_GLOB_LEN} characters without spaces (`*` matches any run, `?` one character)",
                glob.escape_debug()
            )));
        }
    }
    Ok(())
}

/// An agent as the wire shows it.
pub(crate) fn agent_view(row: &AgentRow) -> AgentView {
    AgentView {
        id: row.user_id,
        workspace_id: row.workspace_id,
        name: row.name.clone(),
        mode: row.mode,
        defer_all: row.defer_all,
        created_at: row.created_at,
        revoked_at: row.revoked_at,
        declared: row.declared,
    }
}

fn connection_view(row: &AgentConnectionRow) -> AgentConnectionView {
    AgentConnectionView {
        connection_id: row.connection_id,
        connection_name: row.connection_name.clone(),
        settings: row.settings(),
    }
}
