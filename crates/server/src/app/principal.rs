//! Devices as principals. A paired device authenticates with its device credential
//! (`sy_dev_…`), distinct from a user's personal API token: user endpoints refuse it and the
//! runner API refuses user tokens. A device belongs to one workspace and holds Use on exactly
//! the profile it was bound to when it was approved; a revoked device is refused at its next
//! request.

use super::auth::hash_token;
use super::dispatch::liveness::SEEN_EVERY;
use super::{Actor, App};
use crate::db::{DeviceRow, Key, ProfileRow, Submitter, WorkspaceRow};
use crate::error::{AppError, AppResult};
use switchyard_protocol::{DeviceId, ErrorCode, RunnerRef, UserId};

/// Prefix of every device credential, so a leaked one is easy to recognise and tell from a
/// personal API token.
pub const DEVICE_CREDENTIAL_PREFIX: &str = "sy_dev_";

/// The hash a device credential is stored under; anything that is not a device credential
/// (a personal API token, say) is `unauthenticated`.
pub(super) fn device_credential_hash(credential: &str) -> AppResult<Vec<u8>> {
    expect_device_credential(credential)?;
    Ok(hash_token(credential))
}

/// Refuses, without reading the database, what cannot be a device credential (a personal API
/// token, say). Whether a device holds it is for each request to check.
pub fn expect_device_credential(credential: &str) -> AppResult<()> {
    if credential.starts_with(DEVICE_CREDENTIAL_PREFIX) {
        Ok(())
    } else {
        Err(AppError::refused(
            ErrorCode::Unauthenticated,
            "this endpoint needs a device credential (`sy_dev_…`, from `switchyard pair`); personal API tokens are refused here",
        ))
    }
}

/// The answer to a device credential that no device holds.
fn unknown_device_credential() -> AppError {
    AppError::refused(
        ErrorCode::Unauthenticated,
        "the device credential is not valid; pair the device again with `switchyard pair`",
    )
}

/// The runner of a device (`device:<id>`).
pub fn device_runner_ref(device: DeviceId) -> RunnerRef {
    RunnerRef::Device(device)
}

/// An authenticated, unrevoked device.
#[derive(Clone, Debug)]
pub struct DeviceActor {
    /// The device.
    pub device: DeviceRow,
}

impl DeviceActor {
    /// The device's runner.
    pub fn runner_ref(&self) -> RunnerRef {
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
        let hash = device_credential_hash(credential)?;
        let device = self
            .by_credential(self.db.device_by_credential(&hash))
            .await?;
        self.admit_device(device).await
    }

    /// Runs a device request's first statement, one that checks the device credential itself
    /// (it finds nothing when no device holds the credential), in a device-read turn;
    /// `unauthenticated` when it found nothing.
    pub(super) async fn by_credential<T>(
        &self,
        statement: impl Future<Output = Result<Option<T>, sqlx::Error>>,
    ) -> AppResult<T> {
        let found = {
            let _turn = self.device_read_turn().await;
            statement.await?
        };
        found.ok_or_else(unknown_device_credential)
    }

    /// A turn at the database for a device request's first read (see `App::device_reads`).
    /// After the pool's own acquire timeout without one (the database is away, say) the read
    /// goes ahead without a turn and waits for a connection as any other read does, so a turn
    /// never makes a request wait longer than twice that timeout.
    pub(super) async fn device_read_turn(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        let patience = self.db.pool().options().get_acquire_timeout();
        // The semaphore is never closed.
        tokio::time::timeout(patience, self.dispatch.device_reads.acquire())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Admits the device a credential belongs to, unless it was revoked (`device_revoked`),
    /// and records that it was heard from.
    pub(super) async fn admit_device(&self, device: DeviceRow) -> AppResult<DeviceActor> {
        if let Some(revoked_at) = device.revoked_at {
            return Err(AppError::refused(
                ErrorCode::DeviceRevoked,
                format!(
                    "device `{}` was revoked at {revoked_at}; pair it again with `switchyard pair`",
                    device.name
                ),
            ));
        }
        if device.last_seen_at.is_none() {
            // A newly paired device's first request is written at once: it is what whoever
            // approved it waits to see. Later sightings go to the flusher with the heartbeats.
            self.db.device_touch(device.id, SEEN_EVERY).await?;
        } else {
            self.dispatch
                .liveness
                .device_seen(device.id, device.last_seen_at);
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
                .ok_or_else(|| principal.workspace_not_found(key)),
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
            Principal::Device(device) => device.require_use(profile),
        }
    }
}

impl DeviceActor {
    /// Refuses unless the device is bound to the profile.
    fn require_use(&self, profile: &ProfileRow) -> AppResult<()> {
        if self.device.profile_id == profile.id {
            Ok(())
        } else {
            Err(AppError::refused(
                ErrorCode::Forbidden,
                format!(
                    "device `{}` is bound to another profile than `{}`; it may use only its own",
                    self.device.name, profile.name
                ),
            ))
        }
    }
}

impl Principal {
    /// The principal as the datastore's submission read names it.
    pub(crate) fn submitter(&self) -> Submitter {
        match self {
            Principal::User(actor) => Submitter::User(actor.user.id),
            Principal::Device(device) => Submitter::Device(device.device.id),
        }
    }

    /// The user a call it submits is accounted to: the user, or the device's approver.
    pub(crate) fn accountable_user(&self) -> UserId {
        match self {
            Principal::User(actor) => actor.user.id,
            Principal::Device(device) => device.device.approved_by,
        }
    }

    /// The answer to asking for a workspace that is unknown or not the principal's.
    pub(crate) fn workspace_not_found(&self, key: &str) -> AppError {
        match self {
            Principal::User(_) => super::auth::not_a_member(key),
            Principal::Device(_) => AppError::refused(
                ErrorCode::WorkspaceNotFound,
                format!("no workspace `{key}` that this device belongs to"),
            ),
        }
    }

    /// [`App::require_use_by`] with the Use grant already read: the user's, or for a device its
    /// approver's (`user_holds_use`), which a device needs beside being bound to the profile.
    pub(crate) fn require_use_read(
        &self,
        profile: &ProfileRow,
        user_holds_use: bool,
    ) -> AppResult<()> {
        match self {
            Principal::User(_) => super::auth::require_user_use(user_holds_use, profile),
            Principal::Device(device) => {
                device.require_use(profile)?;
                if user_holds_use {
                    return Ok(());
                }
                Err(AppError::refused(
                    ErrorCode::Forbidden,
                    format!(
                        "the user who approved device `{}` no longer holds Use on profile `{}`; the device submits nothing until they do",
                        device.device.name, profile.name
                    ),
                ))
            }
        }
    }
}
