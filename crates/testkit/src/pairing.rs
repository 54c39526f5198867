//! Pairing a device through the API, as `switchyard pair` and a member approving it do: the
//! device starts a pairing anonymously, the owner approves its code bound to a profile, the
//! device collects its credential. [`save_identity`] then stores the identity the way the CLI
//! does, in files under a configuration directory, for a `switchyard-mcp-runner` to use.

use crate::api::{Api, from_json};
use crate::error::{Error, Result};
use std::path::Path;
use switchyard_mcp_runner::identity::{DeviceIdentity, IdentityStore, KeyringChoice};
use switchyard_protocol::api::{
    ApproveDevice, PairingStarted, PairingStatus, PollPairing, StartPairing,
};
use switchyard_protocol::{DeviceId, WorkspaceId};

/// The device profile name identities are saved under (the runner's default).
pub const PROFILE: &str = "default";

/// A device paired and approved: who it is and its credential.
#[derive(Clone, Debug)]
pub struct Paired {
    /// The device.
    pub device_id: DeviceId,
    /// The workspace it belongs to.
    pub workspace_id: WorkspaceId,
    /// Its credential (shown once, at collection).
    pub credential: String,
}

/// Pairs a device named `name` into `workspace`, approved by `owner` and bound to `profile`.
pub async fn pair(owner: &Api, workspace: &str, name: &str, profile: &str) -> Result<Paired> {
    let anonymous = owner.with_token(None);
    let started: PairingStarted = from_json(
        anonymous
            .post(
                "/pairing",
                &StartPairing {
                    device_name: name.to_owned(),
                },
            )
            .await?,
        "pairing",
    )?;
    owner
        .post(
            &format!("/workspaces/{workspace}/devices/approve"),
            &ApproveDevice {
                code: started.code,
                profile: profile.to_owned(),
            },
        )
        .await?;
    let status = anonymous
        .post(
            &format!("/pairing/{}/poll", started.pairing_id),
            &PollPairing {
                poll_secret: started.poll_secret,
            },
        )
        .await?;
    match from_json(status, "pairing poll")? {
        PairingStatus::Approved {
            device_id,
            workspace_id,
            credential: Some(credential),
        } => Ok(Paired {
            device_id,
            workspace_id,
            credential,
        }),
        other => Err(Error::Setup(format!(
            "pairing {name} did not hand out a credential: {other:?}"
        ))),
    }
}

/// Saves `device`'s identity for `server_url` as profile [`PROFILE`] under `config_dir`, its
/// credential in a 0600 file (no keyring), as `SWITCHYARD_DEVICE_KEYRING=off` has the CLI do.
pub fn save_identity(config_dir: &Path, server_url: &str, device: &Paired) -> Result<()> {
    let store = IdentityStore::open(config_dir.to_owned(), KeyringChoice::Off)
        .map_err(|e| Error::Setup(format!("identity store: {e}")))?;
    store
        .save(&DeviceIdentity {
            profile: PROFILE.to_owned(),
            server_url: server_url.to_owned(),
            device_id: device.device_id,
            workspace_id: device.workspace_id,
            credential: device.credential.clone(),
        })
        .map_err(|e| Error::Setup(format!("saving the device identity: {e}")))?;
    Ok(())
}

/// Points the identity saved under `config_dir` at `server_url` (e.g. a proxy in front of the
/// server) from the runner's next start.
pub fn move_identity(config_dir: &Path, server_url: &str) -> Result<()> {
    let store = IdentityStore::open(config_dir.to_owned(), KeyringChoice::Off)
        .map_err(|e| Error::Setup(format!("identity store: {e}")))?;
    let mut identity = store
        .load(PROFILE)
        .map_err(|e| Error::Setup(format!("loading the device identity: {e}")))?
        .ok_or_else(|| Error::Setup(format!("no identity saved in {}", config_dir.display())))?;
    identity.server_url = server_url.to_owned();
    store
        .save(&identity)
        .map_err(|e| Error::Setup(format!("saving the device identity: {e}")))?;
    Ok(())
}
