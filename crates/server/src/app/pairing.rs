//! Pairing a companion device. The device asks for a pairing (no authentication) and shows a
//! short code; a workspace member approves the code, binding the device to a profile; the
//! device polls with its poll secret and collects its credential on the first poll after
//! approval. Codes expire after ten minutes and work once. Only hashes of the code, the poll
//! secret and the credential are stored, and unknown, expired, used and mistyped codes all get
//! the same answer, so the code space cannot be probed.

use super::auth::hash_token;
use super::principal::DEVICE_CREDENTIAL_PREFIX;
use super::{Actor, App, random_secret, views};
use crate::db::is_unique_violation;
use crate::error::{AppError, AppResult};
use std::time::Duration;
use switchyard_protocol::ErrorCode;
use switchyard_protocol::api::*;

/// The code alphabet: digits and capitals without the look-alikes 0/O, 1/I/L.
const CODE_ALPHABET: &[u8] = b"23456789ABCDEFGHJKMNPQRSTUVWXYZ";
/// Symbols in a code (shown as two groups of four).
const CODE_LEN: usize = 8;
/// How long a code works.
const PAIRING_TTL: Duration = Duration::from_secs(600);
/// Longest device name.
const MAX_DEVICE_NAME: usize = 100;
/// Fresh codes drawn before giving up on a (vanishingly unlikely) run of collisions.
const CODE_ATTEMPTS: usize = 5;

impl App {
    /// Starts a pairing: a fresh code and poll secret for the device to show and keep.
    pub async fn pairing_start(&self, req: StartPairing) -> AppResult<PairingStarted> {
        let device_name = req.device_name.trim();
        if device_name.is_empty()
            || device_name.chars().count() > MAX_DEVICE_NAME
            || device_name.chars().any(char::is_control)
        {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                format!(
                    "`device_name` must be 1–{MAX_DEVICE_NAME} printable characters, e.g. the host name"
                ),
            ));
        }
        let poll_secret = random_secret()?;
        for _ in 0..CODE_ATTEMPTS {
            let code = new_code()?;
            match self
                .db
                .pairing_create(
                    &hash_token(&code),
                    &hash_token(&poll_secret),
                    device_name,
                    PAIRING_TTL,
                )
                .await
            {
                Ok(row) => {
                    return Ok(PairingStarted {
                        pairing_id: row.id,
                        code: display_code(&code),
                        expires_at: row.expires_at,
                        poll_secret,
                    });
                }
                Err(e) if is_unique_violation(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(AppError::Internal(
            "could not draw an unused pairing code".into(),
        ))
    }

    /// Where a pairing stands, for the device holding its poll secret. The first poll after
    /// approval generates the device credential and returns it; later polls return none.
    pub async fn pairing_poll(&self, pairing: &str, req: PollPairing) -> AppResult<PairingStatus> {
        let id = uuid::Uuid::parse_str(pairing).map_err(|_| pairing_not_found())?;
        let row = self
            .db
            .pairing_find(id, &hash_token(&req.poll_secret))
            .await?
            .ok_or_else(pairing_not_found)?;
        match row.state.as_str() {
            "pending" if row.expired => Ok(PairingStatus::Expired),
            "pending" => Ok(PairingStatus::Pending {
                expires_at: row.expires_at,
            }),
            _ => {
                let credential = format!("{DEVICE_CREDENTIAL_PREFIX}{}", random_secret()?);
                let (device, credential) = match self
                    .db
                    .pairing_collect(row.id, &hash_token(&credential))
                    .await?
                {
                    Some(device) => (device, Some(credential)),
                    // Collected before: the credential is handed out once.
                    None => (
                        self.db
                            .device_by_pairing(row.id)
                            .await?
                            .ok_or_else(pairing_not_found)?,
                        None,
                    ),
                };
                Ok(PairingStatus::Approved {
                    device_id: device.id,
                    workspace_id: device.workspace_id,
                    credential,
                })
            }
        }
    }

    /// Approves a device's code (any workspace member holding Use on the profile), binding the
    /// new device to the workspace and that profile.
    pub async fn device_approve(
        &self,
        actor: &Actor,
        ws: &str,
        req: ApproveDevice,
    ) -> AppResult<DeviceView> {
        let membership = self.membership(actor, ws).await?;
        let profile = self
            .find_profile(membership.workspace.id, &req.profile)
            .await?;
        self.require_use(actor, &profile).await?;
        let code = normalize_code(&req.code).ok_or_else(pairing_not_found)?;
        let device = self
            .db
            .pairing_approve(
                &hash_token(&code),
                membership.workspace.id,
                profile.id,
                actor.user.id,
            )
            .await?
            .ok_or_else(pairing_not_found)?;
        // The pairing code and the device's credential never go in.
        self.audit(
            super::Audit::by(actor, "device.approved")
                .workspace(device.workspace_id)
                .object("device", Some(device.id.0), &device.name)
                .after(
                    serde_json::json!({"profile": profile.name, "approved_by": actor.user.name}),
                ),
        )
        .await;
        Ok(views::device(&device))
    }
}

/// The one answer for every code or pairing that cannot be used.
fn pairing_not_found() -> AppError {
    AppError::refused(
        ErrorCode::PairingNotFound,
        "no pending pairing matches; codes work once and expire after 10 minutes: start again on the device with `switchyard pair`",
    )
}

/// A fresh random code of [`CODE_LEN`] symbols. Bytes past the largest multiple of the
/// alphabet size are drawn again, so every symbol is equally likely.
fn new_code() -> AppResult<String> {
    let limit = (256 / CODE_ALPHABET.len() * CODE_ALPHABET.len()) as u8;
    let mut code = String::with_capacity(CODE_LEN);
    while code.len() < CODE_LEN {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)
            .map_err(|e| AppError::Internal(format!("no randomness: {e}")))?;
        for byte in bytes.into_iter().filter(|b| *b < limit) {
            if code.len() < CODE_LEN {
                code.push(char::from(
                    CODE_ALPHABET[usize::from(byte) % CODE_ALPHABET.len()],
                ));
            }
        }
    }
    Ok(code)
}

/// `K7QM3XTD` → `K7QM-3XTD`.
fn display_code(code: &str) -> String {
    let (head, tail) = code.split_at(CODE_LEN / 2);
    format!("{head}-{tail}")
}

/// The code as typed (any case, with or without the dash and spaces) in its stored form, or
/// `None` when it cannot be a code.
fn normalize_code(typed: &str) -> Option<String> {
    let code: String = typed
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .map(|c| c.to_ascii_uppercase())
        .collect();
    let valid = code.len() == CODE_LEN && code.bytes().all(|b| CODE_ALPHABET.contains(&b));
    valid.then_some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_use_the_unambiguous_alphabet_and_read_back() {
        for _ in 0..200 {
            let code = new_code().unwrap();
            assert_eq!(code.len(), CODE_LEN);
            assert!(code.bytes().all(|b| CODE_ALPHABET.contains(&b)), "{code}");
            let shown = display_code(&code);
            assert_eq!(shown.len(), CODE_LEN + 1);
            assert_eq!(normalize_code(&shown).as_deref(), Some(code.as_str()));
            assert_eq!(
                normalize_code(&shown.to_lowercase()).as_deref(),
                Some(code.as_str())
            );
        }
    }

    #[test]
    fn malformed_codes_are_no_codes() {
        for typed in [
            "",
            "ABCD-EFG",
            "ABCD-EFGHJ",
            "ABCD-EFG0",
            "ABCD-EFGI",
            "ABCD_EFGH",
        ] {
            assert_eq!(normalize_code(typed), None, "{typed:?}");
        }
        assert_eq!(normalize_code(" abcd efgh ").as_deref(), Some("ABCDEFGH"));
    }
}
