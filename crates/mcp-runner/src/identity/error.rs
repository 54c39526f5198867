//! Why a device identity could not be saved, loaded or removed.
//!
//! Messages name profiles, paths and keyring accounts, never a credential: they are printed by
//! the CLI and logged by the runner.

use std::path::PathBuf;

/// An identity-store failure.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// A profile name breaks the naming rule.
    #[error(
        "`{name}` is not a valid device profile name: use 1–64 characters from A-Z, a-z, 0-9, \
         `.`, `_` and `-`"
    )]
    InvalidProfile {
        /// The name as given.
        name: String,
    },
    /// The server URL of an identity is not an http(s) base URL.
    #[error("`{url}` is not a usable server URL: {reason}")]
    InvalidServerUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A credential is empty, too long, or holds characters an HTTP header cannot carry.
    #[error("the device credential is not a printable token of 1–4096 ASCII characters")]
    InvalidCredential,
    /// `SWITCHYARD_DEVICE_KEYRING` holds something other than `off` or `auto`.
    #[error(
        "SWITCHYARD_DEVICE_KEYRING is `{value}`: use `off` (keep credentials in files) or `auto`"
    )]
    InvalidKeyringSetting {
        /// The value as set.
        value: String,
    },
    /// A file or directory could not be created, read, written or removed.
    #[error("cannot {action} `{}`: {source}", path.display())]
    Io {
        /// What was being done (`read`, `create`, …).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// A directory or file is not private to this user, so it is not trusted.
    #[error("`{}` is refused: {problem}; {fix}", path.display())]
    Unsafe {
        /// The path involved.
        path: PathBuf,
        /// What is wrong (owner, mode, kind).
        problem: String,
        /// How to fix it.
        fix: String,
    },
    /// A profile file is not valid JSON of the expected shape.
    #[error("device profile file `{}` is invalid: {detail}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong (the file holds no secret, so the parser's message is safe to show).
        detail: String,
    },
    /// The profile's credential is gone: a kernel keyring entry vanishes on reboot and expires
    /// after days unused; a credential file may have been deleted.
    #[error(
        "the device credential of profile `{profile}` is missing from {location}; pair again with \
         `switchyard pair --server URL --profile {profile}`"
    )]
    CredentialMissing {
        /// The profile.
        profile: String,
        /// Where it was expected.
        location: String,
    },
    /// The profile's credential is in the OS keyring, which cannot be used now.
    #[error("the device credential of profile `{profile}` is in the OS keyring, which {reason}")]
    KeyringUnusable {
        /// The profile.
        profile: String,
        /// Why the keyring cannot be used (turned off, or unavailable and why).
        reason: String,
    },
    /// The OS keyring refused an operation.
    #[error("the OS keyring failed: {reason}")]
    Keyring {
        /// The keyring's explanation (never the stored data).
        reason: String,
    },
}
