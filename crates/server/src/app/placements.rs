//! A device owner decides what runs on the device. A connection placed on a paired device is
//! a *pending placement* until the device's owner — the user who approved its pairing, and no
//! one else: not a workspace admin, not an installation owner — accepts it, for the launch spec
//! they were shown ([`SpecDigest`]). Until then, and again once the connector's spec changes,
//! calls on it are refused at submission (`placement_pending`, `spec_changed`: checked in the
//! submit read, [`require_consent`]), and the device runner refuses a leased call whose spec is
//! not the accepted one (`mcp-runner/src/device/pins.rs`).

use super::{Actor, App, Audit, views};
use crate::db::{Consent, Decision, Key, PlacementRow, SubmitConnection};
use crate::error::{AppError, AppResult};
use switchyard_protocol::api::*;
use switchyard_protocol::{ErrorCode, RunnerRef, WorkspaceId};

impl App {
    /// The connections placed on the caller's own unrevoked devices of a workspace, pending and
    /// decided, each with the spec it would launch (any member; others' devices are not
    /// listed).
    pub async fn placement_list(&self, actor: &Actor, ws: &str) -> AppResult<Vec<PlacementView>> {
        let membership = self.membership(actor, ws).await?;
        Ok(self
            .db
            .placement_list(membership.workspace.id, actor.user.id)
            .await?
            .iter()
            .map(views::placement)
            .collect())
    }

    /// Accepts connection `connection` on device `device` for the spec whose digest the owner
    /// was shown (the device's owner only). A spec changed since is refused `spec_changed`.
    pub async fn placement_accept(
        &self,
        actor: &Actor,
        ws: &str,
        (device, connection): (&str, &str),
        req: AcceptPlacement,
    ) -> AppResult<PlacementView> {
        let (workspace, row) = self.owned_placement(actor, ws, device, connection).await?;
        if row.spec.0.spec().digest() != req.spec_digest {
            return Err(AppError::refused(
                ErrorCode::SpecChanged,
                format!(
                    "connection `{}` launches another spec than the one you were shown (digest {}); read it again with `switchyard device placements {ws}` and accept what it shows",
                    row.connection_name, req.spec_digest
                ),
            ));
        }
        self.placement_decide(actor, workspace, &row, Decision::Accept(req.spec_digest))
            .await
    }

    /// Declines connection `connection` on device `device` (the device's owner only): its
    /// calls are refused until the owner accepts it.
    pub async fn placement_decline(
        &self,
        actor: &Actor,
        ws: &str,
        (device, connection): (&str, &str),
    ) -> AppResult<PlacementView> {
        let (workspace, row) = self.owned_placement(actor, ws, device, connection).await?;
        self.placement_decide(actor, workspace, &row, Decision::Decline)
            .await
    }

    /// Records the decision, and answers the placement as it is then.
    async fn placement_decide(
        &self,
        actor: &Actor,
        workspace: WorkspaceId,
        row: &PlacementRow,
        decision: Decision,
    ) -> AppResult<PlacementView> {
        let decided = self
            .db
            .placement_decide(
                workspace,
                actor.user.id,
                row.device_id,
                row.connection_id,
                &decision,
            )
            .await?;
        let now = if decided {
            let connection = Key::Id(row.connection_id.0);
            self.db
                .placement_find(workspace, actor.user.id, row.device_id, &connection)
                .await?
        } else {
            None
        };
        // Revoked, or the connection gone, since it was read: nothing was written.
        let now = now.ok_or_else(|| device_gone(&row.device_name))?;
        tracing::info!(device = %now.device_id, connection = %now.connection_id, state = ?now.state(), "placement decided by the device's owner");
        let action = match decision {
            Decision::Accept(_) => "placement.accepted",
            Decision::Decline => "placement.declined",
        };
        let summary = |p: &PlacementRow| {
            serde_json::json!({
                "device": p.device_name,
                "connection": p.connection_name,
                "state": p.state(),
                "spec_digest": p.spec.0.spec().digest(),
            })
        };
        self.audit(
            Audit::by(actor, action)
                .workspace(workspace)
                .connection(now.connection_id)
                .object(
                    "placement",
                    Some(now.device_id.0),
                    &format!("{} on {}", now.connection_name, now.device_name),
                )
                .before(summary(row))
                .after(summary(&now)),
        )
        .await;
        Ok(views::placement(&now))
    }

    /// The placement of `connection` (id or name) on `device` (id or `device:<id>`), which must
    /// be an unrevoked device of the workspace that the caller approved.
    async fn owned_placement(
        &self,
        actor: &Actor,
        ws: &str,
        device: &str,
        connection: &str,
    ) -> AppResult<(WorkspaceId, PlacementRow)> {
        let membership = self.membership(actor, ws).await?;
        let workspace = membership.workspace.id;
        let device = self.find_device(workspace, device).await?;
        if device.approved_by != actor.user.id {
            return Err(AppError::refused(
                ErrorCode::Forbidden,
                format!(
                    "only the owner of device `{}` (the user who approved its pairing) decides what runs on it",
                    device.name
                ),
            ));
        }
        if device.revoked_at.is_some() {
            return Err(device_gone(&device.name));
        }
        let row = self
            .db
            .placement_find(workspace, actor.user.id, device.id, &Key::parse(connection))
            .await?
            .ok_or_else(|| {
                AppError::refused(
                    ErrorCode::ConnectionNotFound,
                    format!(
                        "no connection `{connection}` is placed on device `{}`",
                        device.name
                    ),
                )
            })?;
        Ok((workspace, row))
    }
}

/// Refuses a call on a connection placed on a device whose owner has not accepted the
/// placement for the connector's current spec.
pub(crate) fn require_consent(connection: &SubmitConnection) -> AppResult<()> {
    require_consent_of(
        connection.consent,
        &connection.name,
        &connection.connector_name,
        connection.runner_ref,
    )
}

/// [`require_consent`] for what it reads: the placement's `consent` (`None`: central) of
/// connection `name`, its connector and runner.
pub(crate) fn require_consent_of(
    consent: Option<Consent>,
    name: &str,
    connector: &str,
    runner_ref: RunnerRef,
) -> AppResult<()> {
    match consent {
        None | Some(Consent::Accepted) => Ok(()),
        Some(Consent::Pending) => Err(AppError::refused(
            ErrorCode::PlacementPending,
            format!(
                "connection `{name}` is placed on {runner_ref} and its owner (the user who approved the device) has not accepted it; they accept it with `switchyard device accept`"
            ),
        )),
        Some(Consent::SpecChanged) => Err(AppError::refused(
            ErrorCode::SpecChanged,
            format!(
                "connector `{connector}` changed since the owner of {runner_ref} accepted connection `{name}` on it; nothing runs there until they accept the new spec with `switchyard device accept`"
            ),
        )),
    }
}

/// The device was revoked: nothing runs on it, so there is nothing to decide.
fn device_gone(name: &str) -> AppError {
    AppError::refused(
        ErrorCode::DeviceNotFound,
        format!("device `{name}` was revoked: nothing runs on it any more"),
    )
}
