//! Workspaces, members and environments.

use super::auth::already_exists;
use super::names::validate_name;
use super::{Actor, App, Audit, views};
use crate::db::MemberRemoval;
use crate::error::{AppError, AppResult};
use serde_json::json;
use switchyard_protocol::ErrorCode;
use switchyard_protocol::api::*;

impl App {
    /// Creates a workspace; the creator becomes its admin.
    pub async fn workspace_create(
        &self,
        actor: &Actor,
        req: CreateWorkspace,
    ) -> AppResult<WorkspaceView> {
        validate_name("workspace", &req.name)?;
        let row = self
            .db
            .workspace_create(&req.name, actor.user.id)
            .await
            .map_err(|e| already_exists(e, "workspace", &req.name))?;
        self.audit(
            Audit::by(actor, "workspace.created")
                .workspace(row.id)
                .object("workspace", Some(row.id.0), &row.name)
                .after(json!({"name": row.name, "admin": actor.user.name})),
        )
        .await;
        Ok(views::workspace(&row))
    }

    /// The workspaces the actor belongs to.
    pub async fn workspace_list(&self, actor: &Actor) -> AppResult<Vec<WorkspaceView>> {
        Ok(self
            .db
            .workspace_list_for_member(actor.user.id)
            .await?
            .iter()
            .map(views::workspace)
            .collect())
    }

    /// One workspace the actor belongs to.
    pub async fn workspace_get(&self, actor: &Actor, ws: &str) -> AppResult<WorkspaceView> {
        Ok(views::workspace(
            &self.membership(actor, ws).await?.workspace,
        ))
    }

    /// Adds a member (workspace admins only).
    pub async fn member_add(
        &self,
        actor: &Actor,
        ws: &str,
        req: AddMember,
    ) -> AppResult<MemberView> {
        let membership = self.admin_membership(actor, ws).await?;
        let user = self.find_user(&req.user).await?;
        let role = match req.role {
            MemberRole::Admin => "admin",
            MemberRole::Member => "member",
        };
        let member = self
            .db
            .member_upsert(membership.workspace.id, user.id, role)
            .await?;
        self.audit(
            Audit::by(actor, "member.added")
                .workspace(membership.workspace.id)
                .object("member", Some(user.id.0), &user.name)
                .after(json!({"user": user.name, "role": member.role})),
        )
        .await;
        Ok(views::member(&member))
    }

    /// Removes a member and their grants on the workspace's profiles (workspace admins only).
    /// Their calls, and the devices they approved, stay readable; the devices submit nothing
    /// once their approver lost Use. The only admin cannot be removed.
    pub async fn member_remove(
        &self,
        actor: &Actor,
        ws: &str,
        user: &str,
    ) -> AppResult<RemovedMember> {
        let membership = self.admin_membership(actor, ws).await?;
        let user = self.find_user(user).await?;
        match self
            .db
            .member_remove(membership.workspace.id, user.id, actor.user.id)
            .await?
        {
            Some(MemberRemoval::Removed {
                member,
                grants_removed,
            }) => {
                self.audit(
                    Audit::by(actor, "member.removed")
                        .workspace(membership.workspace.id)
                        .object("member", Some(user.id.0), &user.name)
                        .before(json!({"user": user.name, "role": member.role}))
                        .after(json!({"grants_removed": grants_removed})),
                )
                .await;
                Ok(RemovedMember {
                    member: views::member(&member),
                    grants_removed,
                })
            }
            Some(MemberRemoval::LastAdmin) => Err(AppError::refused(
                ErrorCode::LastAdmin,
                format!(
                    "`{}` is the only admin of workspace `{}`; make another member admin first (`switchyard workspace member add {} USER --admin`)",
                    user.name, membership.workspace.name, membership.workspace.name
                ),
            )),
            None => Err(AppError::refused(
                ErrorCode::MemberNotFound,
                format!(
                    "`{}` is not a member of workspace `{}`",
                    user.name, membership.workspace.name
                ),
            )),
        }
    }

    /// The members of a workspace.
    pub async fn member_list(&self, actor: &Actor, ws: &str) -> AppResult<Vec<MemberView>> {
        let membership = self.membership(actor, ws).await?;
        Ok(self
            .db
            .member_list(membership.workspace.id)
            .await?
            .iter()
            .map(views::member)
            .collect())
    }

    /// Creates an environment (workspace admins only).
    pub async fn environment_create(
        &self,
        actor: &Actor,
        ws: &str,
        req: CreateEnvironment,
    ) -> AppResult<EnvironmentView> {
        let membership = self.admin_membership(actor, ws).await?;
        validate_name("environment", &req.name)?;
        let row = self
            .db
            .environment_create(membership.workspace.id, &req.name)
            .await
            .map_err(|e| already_exists(e, "environment", &req.name))?;
        self.audit(
            Audit::by(actor, "environment.created")
                .workspace(membership.workspace.id)
                .object("environment", Some(row.id.0), &row.name)
                .after(json!({"name": row.name})),
        )
        .await;
        Ok(views::environment(&row))
    }

    /// The environments of a workspace.
    pub async fn environment_list(
        &self,
        actor: &Actor,
        ws: &str,
    ) -> AppResult<Vec<EnvironmentView>> {
        let membership = self.membership(actor, ws).await?;
        Ok(self
            .db
            .environment_list(membership.workspace.id)
            .await?
            .iter()
            .map(views::environment)
            .collect())
    }
}
