//! Operations: immutable scopes (environment, profile, task) that calls run under. A device
//! must name one for every call it submits, and the call must stay inside it; a user may name
//! one (then the same rules hold) or none.

use super::principal::Principal;
use super::{App, views};
use crate::db::{OperationOwner, OperationScope, ProfileRow};
use crate::error::{AppError, AppResult};
use switchyard_protocol::api::*;
use switchyard_protocol::{EnvironmentId, ErrorCode, OperationId};

/// Longest task label, in characters.
const MAX_TASK: usize = 500;

impl App {
    /// Begins an operation: a user holding Use on the profile, or a device bound to it. The
    /// environment must be the profile's.
    pub async fn operation_begin(
        &self,
        principal: &Principal,
        ws: &str,
        req: BeginOperation,
    ) -> AppResult<OperationView> {
        let workspace = self.principal_workspace(principal, ws).await?.id;
        let task = req.task.trim();
        if task.is_empty() || task.chars().count() > MAX_TASK {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                format!("`task` must say what the work is for in 1–{MAX_TASK} characters"),
            ));
        }
        let profile = self.find_profile(workspace, &req.profile).await?;
        self.require_use_by(principal, &profile).await?;
        let environment = self.find_environment(workspace, &req.environment).await?;
        if environment.id != profile.environment_id {
            return Err(AppError::refused(
                ErrorCode::EnvironmentMismatch,
                format!(
                    "profile `{}` runs in another environment than `{}`",
                    profile.name, environment.name
                ),
            ));
        }
        let owner = match principal {
            Principal::User(actor) => OperationOwner::User(actor.user.id),
            Principal::Device(device) => OperationOwner::Device(device.device.id),
        };
        let row = self
            .db
            .operation_create(workspace, environment.id, profile.id, task, owner)
            .await?;
        Ok(views::operation(&row))
    }
}

/// The operation a call runs under, checked against the call: required for a device (and then
/// one of its profile), and matching the call's profile and environment. `found` is the
/// operation `requested` names, as the submission read it from the call's workspace.
pub(crate) fn call_operation(
    principal: &Principal,
    requested: Option<OperationId>,
    found: Option<&OperationScope>,
    profile: &ProfileRow,
    environment: EnvironmentId,
) -> AppResult<Option<OperationId>> {
    let Some(id) = requested else {
        return match principal {
            Principal::Device(_) => Err(AppError::refused(
                ErrorCode::OperationRequired,
                "a device must run calls under an operation: begin one (POST /api/v1/workspaces/{ws}/operations) and send its id as `operation_id`",
            )),
            Principal::User(_) => Ok(None),
        };
    };
    let not_found = || {
        AppError::refused(
            ErrorCode::OperationNotFound,
            format!("no operation `{id}` in this workspace"),
        )
    };
    let operation = found
        .filter(|operation| operation.id == id)
        .ok_or_else(not_found)?;
    if let Principal::Device(device) = principal
        && operation.profile_id != device.device.profile_id
    {
        return Err(not_found());
    }
    if operation.profile_id != profile.id || operation.environment_id != environment {
        return Err(AppError::refused(
            ErrorCode::OperationMismatch,
            format!(
                "operation `{id}` is scoped to another profile or environment than this call's"
            ),
        ));
    }
    Ok(Some(operation.id))
}
