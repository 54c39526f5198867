//! Paired devices of a workspace: listing and revocation. A revoked device keeps its row (so
//! its credential is answered `device_revoked`, not "unknown") and its runner lease ends at
//! once, so the sweeper settles what it held.
//!
//! A revoked device is refused at its next request (`app::principal`), and its start ack and
//! receipt upload check the credential in their own statement (`db::calls::start`,
//! `db::calls::complete`), so nothing it sends after revocation changes a call.

use super::principal::device_runner_ref;
use super::{Actor, App, Audit, views};
use crate::db::{ConnectionRow, DeviceRow};
use crate::error::{AppError, AppResult};
use serde_json::json;
use switchyard_protocol::api::*;
use switchyard_protocol::{DeviceId, ErrorCode, RunnerRef, WorkspaceId};

impl App {
    /// The devices of a workspace, revoked ones included (any member).
    pub async fn device_list(&self, actor: &Actor, ws: &str) -> AppResult<Vec<DeviceView>> {
        let membership = self.membership(actor, ws).await?;
        Ok(self
            .db
            .device_list(membership.workspace.id)
            .await?
            .iter()
            .map(views::device)
            .collect())
    }

    /// Revokes a device (a workspace admin, or the user who approved it).
    pub async fn device_revoke(
        &self,
        actor: &Actor,
        ws: &str,
        device: &str,
    ) -> AppResult<DeviceView> {
        let membership = self.membership(actor, ws).await?;
        let workspace = membership.workspace.id;
        let row = self.find_device(workspace, device).await?;
        if !membership.is_admin && row.approved_by != actor.user.id {
            return Err(AppError::refused(
                ErrorCode::Forbidden,
                format!(
                    "only a workspace admin or the user who approved device `{}` may revoke it",
                    row.name
                ),
            ));
        }
        let revoked = self
            .db
            .device_revoke(workspace, row.id, actor.user.id, device_runner_ref(row.id))
            .await?
            .ok_or_else(|| device_not_found(device))?;
        if row.revoked_at.is_none() {
            self.audit(
                Audit::by(actor, "device.revoked")
                    .workspace(workspace)
                    .object("device", Some(row.id.0), &row.name)
                    .before(json!({"revoked": false}))
                    .after(json!({"revoked": true})),
            )
            .await;
        }
        Ok(views::device(&revoked))
    }

    /// The runner a new connection is placed on: `central` when none is named, or
    /// `device:<id>` naming an unrevoked device of the workspace.
    pub(crate) async fn connection_runner(
        &self,
        workspace: WorkspaceId,
        requested: Option<&str>,
    ) -> AppResult<RunnerRef> {
        let requested = requested.unwrap_or(CENTRAL_RUNNER);
        let device = match requested.parse::<RunnerRef>() {
            Ok(RunnerRef::Central) => return Ok(RunnerRef::Central),
            Ok(RunnerRef::Device(id)) => self.db.device_get(workspace, id).await?,
            Err(_) => None,
        };
        match device {
            Some(device) if device.revoked_at.is_none() => Ok(RunnerRef::Device(device.id)),
            Some(device) => Err(AppError::refused(
                ErrorCode::InvalidRequest,
                format!(
                    "device `{}` ({requested}) was revoked; pair a device again or use `central`",
                    device.name
                ),
            )),
            None => Err(AppError::refused(
                ErrorCode::InvalidRequest,
                format!(
                    "runner `{requested}` is not available; use `central` or `device:<id>` of a paired device of this workspace (GET /api/v1/workspaces/{{ws}}/devices)"
                ),
            )),
        }
    }

    /// Refuses a call on a connection placed on a device that was revoked (or is gone): its
    /// calls could only wait in the queue until they expire.
    pub(crate) async fn require_runner_available(
        &self,
        connection: &ConnectionRow,
    ) -> AppResult<()> {
        let Some(device) = connection.runner_ref.device() else {
            return Ok(());
        };
        match self.db.device_get(connection.workspace_id, device).await? {
            Some(row) if row.revoked_at.is_none() => Ok(()),
            _ => Err(runner_gone(&connection.name, connection.runner_ref)),
        }
    }

    /// A device of a workspace by id (or `device:<id>`).
    pub(crate) async fn find_device(
        &self,
        workspace: WorkspaceId,
        key: &str,
    ) -> AppResult<DeviceRow> {
        let id: DeviceId = key
            .strip_prefix("device:")
            .unwrap_or(key)
            .parse()
            .map_err(|_| device_not_found(key))?;
        self.db
            .device_get(workspace, id)
            .await?
            .ok_or_else(|| device_not_found(key))
    }
}

/// A call on connection `connection`, placed on a device (`runner_ref`) that was revoked or is
/// gone, is refused.
pub(crate) fn runner_gone(connection: &str, runner_ref: RunnerRef) -> AppError {
    AppError::refused(
        ErrorCode::DeviceNotFound,
        format!(
            "connection `{connection}` is placed on {runner_ref}, which was revoked; place the connector on another runner"
        ),
    )
}

fn device_not_found(key: &str) -> AppError {
    AppError::refused(
        ErrorCode::DeviceNotFound,
        format!("no device `{key}` in this workspace"),
    )
}
