//! `switchyard pair --server URL [--profile NAME] [--name DEVICE_NAME]`: pair this machine
//! with a server as a device.
//!
//! The device asks for a pairing code (no authentication), shows it, and polls once a second
//! until a workspace member approves the code or it expires. The device credential arrives in
//! the first poll answer after approval, exactly once, and goes straight into the identity
//! store (OS keyring or a 0600 file); it is never printed. With `--json` stdout carries one
//! JSON object per line: the code first, the stored identity last.
//!
//! The identity store is opened before pairing starts, so a store that cannot be used fails
//! before a credential is issued that would have nowhere to go.

use crate::cli::PairArgs;
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::Output;
use chrono::{DateTime, Duration as Span, Utc};
use serde::Serialize;
use std::io::Write;
use std::time::Duration;
use switchyard_mcp_runner::identity::{
    CredentialLocation, DeviceIdentity, IdentityStore, KeyringChoice, KeyringStatus, select_profile,
};
use switchyard_protocol::api::{PairingStarted, PairingStatus, PollPairing, StartPairing};
use switchyard_protocol::{DeviceId, WorkspaceId};
use tokio::signal::unix::{SignalKind, signal};

/// How often the device asks whether its code was approved.
const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How long past the code's expiry the device keeps asking, in case the clocks differ; the
/// server's `expired` answer normally ends the wait first.
const EXPIRY_GRACE_SECONDS: i64 = 30;

/// The first `--json` line: what to approve.
#[derive(Serialize)]
struct CodeLine<'a> {
    code: &'a str,
    expires_at: DateTime<Utc>,
    pairing_id: String,
}

/// The last `--json` line: what was stored (never the credential).
#[derive(Serialize)]
struct PairedLine<'a> {
    device_id: DeviceId,
    workspace_id: WorkspaceId,
    profile: &'a str,
    credential_store: &'static str,
}

/// An approved pairing with its one-time credential.
struct Approved {
    device_id: DeviceId,
    workspace_id: WorkspaceId,
    credential: String,
}

/// Runs `switchyard pair`.
pub async fn run(out: Output, args: PairArgs) -> Result<(), CliError> {
    let profile = select_profile(args.profile.as_deref()).map_err(CliError::IdentityStore)?;
    let keyring = KeyringChoice::from_env().map_err(CliError::IdentityStore)?;
    let store = IdentityStore::open(IdentityStore::default_location(), keyring)
        .map_err(CliError::IdentityStore)?;
    let client = Client::anonymous(&args.server)?;
    if let Ok(Some(previous)) = store.load(&profile) {
        eprintln!(
            "note: profile `{profile}` holds device {} of {}; pairing replaces it (revoke the old \
             device with `switchyard device revoke {} {}`)",
            previous.device_id, previous.server_url, previous.workspace_id, previous.device_id
        );
    }
    // Registered before the code is shown, so Ctrl-C at any point of the wait is ours to handle.
    let mut interrupt = signal(SignalKind::interrupt())
        .map_err(|error| CliError::Usage(format!("cannot watch for Ctrl-C: {error}")))?;

    let device_name = args.name.unwrap_or_else(host_name);
    let started: PairingStarted = client
        .post(&["pairing"], Body::of(&StartPairing { device_name }))
        .await?
        .parse()?;
    show_code(out, &started, &profile);

    let approved = tokio::select! {
        approved = wait_for_approval(&client, &started) => approved?,
        _ = interrupt.recv() => {
            return Err(CliError::Interrupted {
                detail: "; the device was not paired",
            });
        }
    };

    let identity = DeviceIdentity {
        profile: profile.clone(),
        server_url: client.server_url(),
        device_id: approved.device_id,
        workspace_id: approved.workspace_id,
        credential: approved.credential,
    };
    let location = store.save(&identity).map_err(|error| {
        eprintln!(
            "note: device {} was approved but could not be stored; revoke it with `switchyard \
             device revoke {} {}` and pair again",
            identity.device_id, identity.workspace_id, identity.device_id
        );
        CliError::IdentityStore(error)
    })?;
    show_paired(out, &identity, &location, &store.keyring_status());
    Ok(())
}

/// Asks every [`POLL_INTERVAL`] until the code is approved or expires. A server that cannot
/// be reached for a moment is asked again; anything it refuses ends the wait.
async fn wait_for_approval(
    client: &Client,
    started: &PairingStarted,
) -> Result<Approved, CliError> {
    let id = started.pairing_id.to_string();
    let poll = PollPairing {
        poll_secret: started.poll_secret.clone(),
    };
    let give_up = started.expires_at + Span::seconds(EXPIRY_GRACE_SECONDS);
    let expired = || CliError::PairingExpired {
        code: started.code.clone(),
    };
    let mut warned = false;
    loop {
        match client
            .post(&["pairing", &id, "poll"], Body::of(&poll))
            .await
        {
            Ok(reply) => match reply.parse::<PairingStatus>()? {
                PairingStatus::Pending { .. } => {}
                PairingStatus::Approved {
                    device_id,
                    workspace_id,
                    credential: Some(credential),
                } => {
                    return Ok(Approved {
                        device_id,
                        workspace_id,
                        credential,
                    });
                }
                PairingStatus::Approved {
                    device_id,
                    credential: None,
                    ..
                } => {
                    return Err(CliError::PairingCollected {
                        code: started.code.clone(),
                        device: device_id.to_string(),
                    });
                }
                PairingStatus::Expired => return Err(expired()),
            },
            Err(error @ (CliError::Unreachable { .. } | CliError::Server { .. })) => {
                if !warned {
                    eprintln!("note: {error}; still waiting");
                    warned = true;
                }
            }
            Err(error) => return Err(error),
        }
        if Utc::now() > give_up {
            return Err(expired());
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Prints the code: a line for people, or the first JSON line.
fn show_code(out: Output, started: &PairingStarted, profile: &str) {
    if out.is_json() {
        print_line(&CodeLine {
            code: &started.code,
            expires_at: started.expires_at,
            pairing_id: started.pairing_id.to_string(),
        });
        return;
    }
    println!(
        "Pairing code: {code} (expires {at} UTC). Approve it with: switchyard device approve WS \
         {code} --profile PROFILE",
        code = started.code,
        at = started.expires_at.format("%H:%M:%S"),
    );
    let _ = std::io::stdout().flush();
    eprintln!("waiting for approval as profile `{profile}` (Ctrl-C to cancel)…");
}

/// Prints what was stored: lines for people, or the last JSON line.
fn show_paired(
    out: Output,
    identity: &DeviceIdentity,
    location: &CredentialLocation,
    keyring: &KeyringStatus,
) {
    if out.is_json() {
        print_line(&PairedLine {
            device_id: identity.device_id,
            workspace_id: identity.workspace_id,
            profile: &identity.profile,
            credential_store: location.kind().as_str(),
        });
        return;
    }
    println!(
        "Paired: device {} in workspace {}, stored as profile `{}`.",
        identity.device_id, identity.workspace_id, identity.profile
    );
    let why = match (location, keyring) {
        (CredentialLocation::File { .. }, KeyringStatus::Off) => {
            " (SWITCHYARD_DEVICE_KEYRING=off)".to_owned()
        }
        (CredentialLocation::File { .. }, KeyringStatus::Unavailable { reason }) => {
            format!(" (the OS keyring is unavailable: {reason})")
        }
        _ => String::new(),
    };
    println!("Device credential stored in {location}{why}.");
}

/// Prints one compact JSON object as a line and flushes it, so a reader sees it at once.
fn print_line(value: &impl Serialize) {
    // These lines are structs of strings, ids and times: serializing cannot fail.
    let line = serde_json::to_string(value).unwrap_or_default();
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// This machine's host name, the default device name.
fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "device".to_owned())
}
