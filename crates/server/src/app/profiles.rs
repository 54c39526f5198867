//! Execution profiles and their grants. Grants are independent: workspace admin, Manage and
//! Share never imply Use.

use super::auth::already_exists;
use super::mcp_catalog::route_conflicts;
use super::names::validate_name;
use super::{Actor, App, Audit, views};
use crate::db::{Grants, Key, NewProfile, ProfileRow, UserRow};
use crate::error::{AppError, AppResult};
use serde_json::json;
use switchyard_protocol::agents::PrincipalKind;
use switchyard_protocol::api::*;
use switchyard_protocol::{ErrorCode, WorkspaceId};

impl App {
    /// Creates a profile (workspace admins only). The creator receives Manage and Share, not Use.
    pub async fn profile_create(
        &self,
        actor: &Actor,
        ws: &str,
        req: CreateProfile,
    ) -> AppResult<ProfileView> {
        let membership = self.admin_membership(actor, ws).await?;
        let workspace = membership.workspace.id;
        validate_name("profile", &req.name)?;
        let environment_key = req.environment.as_deref().unwrap_or(DEFAULT_ENVIRONMENT);
        let environment = self.find_environment(workspace, environment_key).await?;
        let mut connections = Vec::with_capacity(req.connections.len());
        for key in &req.connections {
            let connection = self.find_connection(workspace, key).await?;
            if connection.retired_at.is_some() {
                return Err(super::retire::refused_retired(
                    ErrorCode::ConnectionRetired,
                    &connection.name,
                ));
            }
            connections.push(connection.id);
        }
        if let Some(tools) = &req.tools {
            let [connection] = connections[..] else {
                return Err(AppError::refused(
                    ErrorCode::InvalidRequest,
                    "`tools` names tools of one connection: give exactly one connection with it, and set the tools of others with `PUT …/connections/{connection}/tools`",
                ));
            };
            self.check_tool_set(connection, tools).await?;
        }
        let creator = Grants {
            use_: false,
            manage: true,
            share: true,
            approve: false,
        };
        let row = self
            .db
            .profile_create(NewProfile {
                workspace,
                environment: environment.id,
                name: &req.name,
                connections: &connections,
                tools: req.tools.as_deref(),
                creator: actor.user.id,
                creator_grants: creator,
            })
            .await
            .map_err(|e| already_exists(e, "profile", &req.name))?;
        let view = self.profile_view(&row).await?;
        self.audit(
            Audit::by(actor, "profile.created")
                .workspace(workspace)
                .object("profile", Some(row.id.0), &row.name)
                .after(json!({
                    "environment": environment.name,
                    "connections": req.connections,
                    "tools": req.tools,
                    "creator_grants": creator.kinds(),
                })),
        )
        .await;
        Ok(view)
    }

    /// The profiles of a workspace.
    pub async fn profile_list(&self, actor: &Actor, ws: &str) -> AppResult<Vec<ProfileView>> {
        let membership = self.membership(actor, ws).await?;
        let mut views = Vec::new();
        for row in self.db.profile_list(membership.workspace.id).await? {
            views.push(self.profile_view(&row).await?);
        }
        Ok(views)
    }

    /// One profile.
    pub async fn profile_get(&self, actor: &Actor, ws: &str, key: &str) -> AppResult<ProfileView> {
        let membership = self.membership(actor, ws).await?;
        let row = self.find_profile(membership.workspace.id, key).await?;
        self.profile_view(&row).await
    }

    /// Adds grants on a profile (holders of Share only) to a member of the workspace.
    pub async fn profile_grant(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
        req: GrantRequest,
    ) -> AppResult<ProfileView> {
        let membership = self.membership(actor, ws).await?;
        let profile = self.find_profile(membership.workspace.id, key).await?;
        if !self.db.grants_of(profile.id, actor.user.id).await?.share {
            return Err(AppError::refused(
                ErrorCode::Forbidden,
                format!(
                    "you need the Share grant on profile `{}` to grant access",
                    profile.name
                ),
            ));
        }
        let grants = named_grants(&req)?;
        let user = self.grantee(membership.workspace.id, &req).await?;
        if user.kind == PrincipalKind::Agent {
            self.check_agent_grant(&user, &profile, grants).await?;
        }
        if grants.use_ && user.id == actor.user.id && !actor.user.is_owner {
            return Err(AppError::refused(
                ErrorCode::Forbidden,
                format!(
                    "you cannot grant yourself Use on profile `{}`: Manage and Share never imply Use; ask another holder of Share or the installation owner",
                    profile.name
                ),
            ));
        }
        if self
            .db
            .workspace_find_for_member(&Key::Id(membership.workspace.id.0), user.id)
            .await?
            .is_none()
        {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                format!(
                    "`{}` is not a member of this workspace; add them first (`switchyard workspace member add`)",
                    user.name
                ),
            ));
        }
        let before = self.db.grants_of(profile.id, user.id).await?;
        self.db
            .grant_add(profile.id, user.id, grants, actor.user.id)
            .await?;
        self.audit_grants(actor, &profile, &user, before).await?;
        self.profile_view(&profile).await
    }

    /// Takes grants on a profile from a user (holders of Share, and workspace admins). Taking
    /// a grant the user does not hold changes nothing; taking Use stops their next call.
    pub async fn profile_revoke(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
        req: GrantRequest,
    ) -> AppResult<ProfileView> {
        let membership = self.membership(actor, ws).await?;
        let profile = self.find_profile(membership.workspace.id, key).await?;
        if !membership.is_admin && !self.db.grants_of(profile.id, actor.user.id).await?.share {
            return Err(AppError::refused(
                ErrorCode::Forbidden,
                format!(
                    "you need the Share grant on profile `{}`, or to be a workspace admin, to revoke access",
                    profile.name
                ),
            ));
        }
        let grants = named_grants(&req)?;
        let user = self.grantee(membership.workspace.id, &req).await?;
        let before = self.db.grants_of(profile.id, user.id).await?;
        self.db
            .grant_remove(&profile, user.id, grants, actor.user.id)
            .await?;
        self.audit_grants(actor, &profile, &user, before).await?;
        self.profile_view(&profile).await
    }

    /// Replaces the set of a connection's tools the profile grants (holders of Manage); `None`
    /// grants the connection whole.
    pub async fn profile_set_tools(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
        connection: &str,
        req: SetTools,
    ) -> AppResult<ProfileView> {
        let membership = self.membership(actor, ws).await?;
        let profile = self.find_profile(membership.workspace.id, key).await?;
        if !self.db.grants_of(profile.id, actor.user.id).await?.manage {
            return Err(AppError::refused(
                ErrorCode::Forbidden,
                format!(
                    "you need the Manage grant on profile `{}` to change its tools",
                    profile.name
                ),
            ));
        }
        let connection = self
            .find_connection(membership.workspace.id, connection)
            .await?;
        if let Some(tools) = &req.tools {
            self.check_tool_set(connection.id, tools).await?;
        }
        let set = self
            .db
            .profile_set_tools(
                profile.id,
                connection.id,
                req.tools.as_deref(),
                actor.user.id,
            )
            .await?;
        if !set {
            return Err(AppError::refused(
                ErrorCode::ConnectionNotInProfile,
                format!(
                    "profile `{}` does not include connection `{}`",
                    profile.name, connection.name
                ),
            ));
        }
        self.audit(
            Audit::by(actor, "profile.tools_set")
                .workspace(membership.workspace.id)
                .connection(connection.id)
                .object("profile", Some(profile.id.0), &profile.name)
                .after(json!({"connection": connection.name, "tools": req.tools})),
        )
        .await;
        self.profile_view(&profile).await
    }

    /// Records a change of `user`'s grants on `profile` (`grant.changed`), when there was one.
    async fn audit_grants(
        &self,
        actor: &Actor,
        profile: &ProfileRow,
        user: &UserRow,
        before: Grants,
    ) -> AppResult<()> {
        let after = self.db.grants_of(profile.id, user.id).await?;
        if after != before {
            self.audit(
                Audit::by(actor, "grant.changed")
                    .workspace(profile.workspace_id)
                    .object("grant", Some(user.id.0), &format!("{} on {}", user.name, profile.name))
                    .before(json!({"user": user.name, "profile": profile.name, "grants": before.kinds()}))
                    .after(json!({"user": user.name, "profile": profile.name, "grants": after.kinds()})),
            )
            .await;
        }
        Ok(())
    }

    /// Refuses a set of tools that is empty, repeats a name, or names a tool the connection's
    /// catalog does not list, whatever its placement (a device's catalog is discovered by its
    /// runner; one not discovered yet lists nothing).
    async fn check_tool_set(
        &self,
        connection: switchyard_protocol::ConnectionId,
        tools: &[String],
    ) -> AppResult<()> {
        let invalid = |message: String| AppError::refused(ErrorCode::InvalidRequest, message);
        if tools.is_empty() {
            return Err(invalid(
                "`tools` is empty: name at least one tool, or send `null` to grant the connection whole".to_owned(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(repeated) = tools.iter().find(|tool| !seen.insert(tool.as_str())) {
            return Err(invalid(format!("`tools` names `{repeated}` twice")));
        }
        let catalog = self.db.tool_list(connection).await?;
        match tools
            .iter()
            .find(|tool| !catalog.iter().any(|t| &t.name == *tool))
        {
            Some(unknown) => Err(AppError::refused(
                ErrorCode::ToolNotFound,
                format!(
                    "the connection's catalog has no tool `{unknown}`; nothing was changed. `switchyard connection tools` lists the catalog, `switchyard connection discover` refreshes it"
                ),
            )),
            None => Ok(()),
        }
    }

    pub(super) async fn profile_view(&self, row: &ProfileRow) -> AppResult<ProfileView> {
        Ok(ProfileView {
            id: row.id,
            workspace_id: row.workspace_id,
            name: row.name.clone(),
            environment_id: row.environment_id,
            connection_ids: self.db.profile_connection_ids(row.id).await?,
            tools: self
                .db
                .profile_tool_sets(row.id)
                .await?
                .into_iter()
                .collect(),
            grants: self
                .db
                .grant_list(row.id)
                .await?
                .into_iter()
                .map(|(id, name, grants)| views::grant(id, &name, grants))
                .collect(),
            retired: views::retired(row.retired_at, row.retired_by),
        })
    }

    /// Whom a grant request names: a person (`user`) or an agent of the workspace (`agent`),
    /// exactly one of them.
    async fn grantee(&self, workspace: WorkspaceId, req: &GrantRequest) -> AppResult<UserRow> {
        match (&req.user, &req.agent) {
            (Some(user), None) => self.find_user(user).await,
            (None, Some(agent)) => {
                let agent = self.find_agent(workspace, agent).await?;
                self.db
                    .user_find(&Key::Id(agent.user_id.0))
                    .await?
                    .ok_or_else(|| {
                        AppError::Internal(format!("agent {} has no user", agent.user_id))
                    })
            }
            _ => Err(AppError::refused(
                ErrorCode::InvalidRequest,
                "name exactly one grantee: `user` (a person) or `agent`",
            )),
        }
    }

    /// Refuses a grant to an agent of anything but Use, to a revoked agent, or one that would
    /// reach a connection through two profiles that grant it differently.
    async fn check_agent_grant(
        &self,
        agent: &UserRow,
        profile: &ProfileRow,
        grants: Grants,
    ) -> AppResult<()> {
        if grants.manage || grants.share || grants.approve {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                "an agent can hold Use only: it never manages, shares or approves",
            ));
        }
        let row = self.db.agent_of_user(agent.id).await?;
        if row.is_some_and(|row| row.revoked_at.is_some()) {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                format!("agent `{}` is revoked; create a new one", agent.name),
            ));
        }
        // The catalog's own rule, over the routes the agent holds and those the grant adds.
        let (held, added) = tokio::try_join!(
            self.db.mcp_routes(agent.id),
            self.db.mcp_routes_of_profile(profile.id)
        )?;
        if let Some((route, other)) = route_conflicts(&held, &added).into_iter().next() {
            return Err(AppError::refused(
                ErrorCode::ConflictingRoutes,
                format!(
                    "agent `{}` already reaches connection `{}` through profile `{}`, which grants it differently (tools, environment or approval policy); grant one profile per connection, or make them grant it alike",
                    agent.name, route.connection_name, other.profile_name
                ),
            ));
        }
        Ok(())
    }

    pub(crate) async fn find_profile(
        &self,
        workspace: WorkspaceId,
        key: &str,
    ) -> AppResult<ProfileRow> {
        self.db
            .profile_find(workspace, &Key::parse(key))
            .await?
            .ok_or_else(|| profile_not_found(key))
    }

    pub(crate) async fn find_environment(
        &self,
        workspace: WorkspaceId,
        key: &str,
    ) -> AppResult<crate::db::EnvironmentRow> {
        self.db
            .environment_find(workspace, &Key::parse(key))
            .await?
            .ok_or_else(|| environment_not_found(key))
    }
}

/// No profile `key` (id or name) in the workspace.
pub(crate) fn profile_not_found(key: &str) -> AppError {
    AppError::refused(
        ErrorCode::ProfileNotFound,
        format!("no profile `{key}` in this workspace"),
    )
}

/// No environment `key` (id or name) in the workspace.
pub(crate) fn environment_not_found(key: &str) -> AppError {
    AppError::refused(
        ErrorCode::EnvironmentNotFound,
        format!("no environment `{key}` in this workspace"),
    )
}

/// The grants a grant or revoke request names: at least one.
fn named_grants(req: &GrantRequest) -> AppResult<Grants> {
    let grants = Grants {
        use_: req.use_,
        manage: req.manage,
        share: req.share,
        approve: req.approve,
    };
    if grants == Grants::default() {
        return Err(AppError::refused(
            ErrorCode::InvalidRequest,
            "name at least one of `use`, `manage`, `share`, `approve`",
        ));
    }
    Ok(grants)
}
