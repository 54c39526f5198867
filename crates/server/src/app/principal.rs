//! Devices as principals. A paired device authenticates with its device credential
//! (`sy_dev_…`), distinct from a user's personal API token: user endpoints refuse it and the
//! runner API refuses user tokens. A device belongs to one workspace and holds Use on exactly
//! the profile it was bound to when it was approved; a revoked device is refused at its next
//! request.

use super::auth::hash_token;
use super::{Actor, App};
use crate::db::{DeviceRow, Key, ProfileRow, WorkspaceRow};
use crate::error::{AppError, AppResult};
use std::time::Duration;
use switchyard_protocol::ErrorCode;
use uuid::Uuid;

/// Prefix of every device credential, so a leaked one is easy to recognise and tell from a
/// personal API token.
pub const DEVICE_CREDENTIAL_PREFIX: &str = "sy_dev_";

/// A device's `last_seen_at` is written at most this often, so a busy device does not write
/// on every request.
const SEEN_EVERY: Duration = Duration::from_secs(30);

/// The runner reference of a device: `device:<id>`.
pub fn device_runner_ref(device: Uuid) -> String {
    format!("device:{device}")
}

/// An authenticated, unrevoked device.
#[derive(Clone, Debug)]
pub struct DeviceActor {
    /// The device.
    pub device: DeviceRow,
}

impl DeviceActor {
    /// The device's runner reference.
    pub fn runner_ref(&self) -> String {
        device_runner_ref(self.device.id)
    }
}

/// Who is asking, on the endpoints both users and devices may call (calls and operations).
#[derive(Clone, Debug)]
pub enum Principal {
    /// A user with a personal API token.
    User(Actor),
    /// A paired device with its device credential.
    Device(DeviceActor),
}

impl App {
    /// Authenticates a device credential. Unknown credentials and user tokens are
    /// `unauthenticated`; a revoked device is `device_revoked`.
    pub async fn authenticate_device(&self, credential: &str) -> AppResult<DeviceActor> {
        if !credential.starts_with(DEVICE_CREDENTIAL_PREFIX) {
            return Err(AppError::refused(
                ErrorCode::Unauthenticated,
                "this endpoint needs a device credential (`sy_dev_…`, from `switchyard pair`); personal API tokens are refused here",
            ));
        }
        let Some(device) = self
            .db
            .device_by_credential(&hash_token(credential))
            .await?
        else {
            return Err(AppError::refused(
                ErrorCode::Unauthenticated,
                "the device credential is not valid; pair the device again with `switchyard pair`",
            ));
        };
        if let Some(revoked_at) = device.revoked_at {
            return Err(AppError::refused(
                ErrorCode::DeviceRevoked,
                format!(
                    "device `{}` was revoked at {revoked_at}; pair it again with `switchyard pair`",
                    device.name
                ),
            ));
        }
        let stale = device.last_seen_at.is_none_or(|seen| {
            chrono::Utc::now()
                .signed_duration_since(seen)
                .to_std()
                .is_ok_and(|age| age >= SEEN_EVERY)
        });
        if stale {
            self.db.device_touch(device.id, SEEN_EVERY).await?;
        }
        Ok(DeviceActor { device })
    }

    /// Authenticates a bearer token as a user or, when it is a device credential, a device.
    pub async fn authenticate_principal(&self, token: &str) -> AppResult<Principal> {
        if token.starts_with(DEVICE_CREDENTIAL_PREFIX) {
            Ok(Principal::Device(self.authenticate_device(token).await?))
        } else {
            Ok(Principal::User(self.authenticate(token).await?))
        }
    }

    /// The workspace named by `key`: one the user is a member of, or the device's own.
    /// Anything else looks unknown (404).
    pub(crate) async fn principal_workspace(
        &self,
        principal: &Principal,
        key: &str,
    ) -> AppResult<WorkspaceRow> {
        match principal {
            Principal::User(actor) => Ok(self.membership(actor, key).await?.workspace),
            Principal::Device(device) => self
                .db
                .workspace_find_for_device(&Key::parse(key), device.device.id)
                .await?
                .ok_or_else(|| {
                    AppError::refused(
                        ErrorCode::WorkspaceNotFound,
                        format!("no workspace `{key}` that this device belongs to"),
                    )
                }),
        }
    }

    /// Refuses unless the principal holds Use on the profile right now: a user through a
    /// grant, a device by being bound to it.
    pub(crate) async fn require_use_by(
        &self,
        principal: &Principal,
        profile: &ProfileRow,
    ) -> AppResult<()> {
        match principal {
            Principal::User(actor) => self.require_use(actor, profile).await,
            Principal::Device(device) if device.device.profile_id == profile.id => Ok(()),
            Principal::Device(device) => Err(AppError::refused(
                ErrorCode::Forbidden,
                format!(
                    "device `{}` is bound to another profile than `{}`; it may use only its own",
                    device.device.name, profile.name
                ),
            )),
        }
    }
}
