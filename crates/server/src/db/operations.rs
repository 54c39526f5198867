//! Operations: immutable scopes (workspace, environment, profile, task) that device calls run
//! under. Created once, never updated.

use super::Datastore;
use chrono::{DateTime, Utc};
use switchyard_protocol::{DeviceId, EnvironmentId, OperationId, ProfileId, UserId, WorkspaceId};
use uuid::Uuid;

/// A row of `operations`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct OperationRow {
    /// Id.
    pub id: OperationId,
    /// Workspace.
    pub workspace_id: WorkspaceId,
    /// Environment.
    pub environment_id: EnvironmentId,
    /// Profile.
    pub profile_id: ProfileId,
    /// Task label.
    pub task: String,
    /// The device that began it, if a device did.
    pub device_id: Option<DeviceId>,
    /// The user who began it, if a user did.
    pub created_by: Option<UserId>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// Who begins an operation: exactly one of a user and a device.
#[derive(Clone, Copy, Debug)]
pub enum OperationOwner {
    /// A user.
    User(UserId),
    /// A paired device.
    Device(DeviceId),
}

impl Datastore {
    /// Creates an operation.
    pub async fn operation_create(
        &self,
        workspace: WorkspaceId,
        environment: EnvironmentId,
        profile: ProfileId,
        task: &str,
        owner: OperationOwner,
    ) -> Result<OperationRow, sqlx::Error> {
        let (user, device) = match owner {
            OperationOwner::User(user) => (Some(user), None),
            OperationOwner::Device(device) => (None, Some(device)),
        };
        sqlx::query_as(
            "INSERT INTO operations (id, workspace_id, environment_id, profile_id, task, device_id, created_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *",
        )
        .bind(Uuid::now_v7())
        .bind(workspace)
        .bind(environment)
        .bind(profile)
        .bind(task)
        .bind(device)
        .bind(user)
        .fetch_one(&self.pool)
        .await
    }
}
