//! [`IdentityStore`]: saving, loading, listing and removing identity profiles in one
//! configuration directory, with each credential in the OS keyring or a private file.

use super::error::IdentityError;
use super::files::{
    Privacy, check_private_dir, ensure_private_dir, read_private, remove_if_present, write_private,
};
use super::keyring::{KEYRING_SERVICE, Keyring};
use super::profile::validate_profile;
use super::{
    CONFIG_DIR_VAR, CredentialLocation, CredentialStoreKind, DeviceIdentity, KEYRING_VAR,
    KeyringChoice, ProfileRecord,
};
use reqwest::Url;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use switchyard_protocol::ids::DeviceId;

/// Longest accepted credential.
const MAX_CREDENTIAL: usize = 4096;
/// Largest accepted record file.
const MAX_RECORD: u64 = 64 * 1024;

/// Whether the OS keyring is in use, as far as this store knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyringStatus {
    /// Turned off with `SWITCHYARD_DEVICE_KEYRING=off`.
    Off,
    /// Could not be used; credentials go to files.
    Unavailable {
        /// Why.
        reason: String,
    },
    /// Usable.
    Available,
}

/// The keyring as this store holds it.
enum KeyringState {
    Off,
    Unavailable(String),
    Ready(Keyring),
}

/// The identity profiles in one configuration directory.
pub struct IdentityStore {
    devices_dir: PathBuf,
    // A failed write downgrades a ready keyring to unavailable, so later saves go straight to
    // files and the caller can say why.
    keyring: Mutex<KeyringState>,
}

impl std::fmt::Debug for IdentityStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityStore")
            .field("devices_dir", &self.devices_dir)
            .field("keyring", &self.keyring_status())
            .finish()
    }
}

impl IdentityStore {
    /// Opens the profiles under `config_dir`. Nothing is created yet; an existing `devices`
    /// directory that is not private to this user is refused now, before anything is paired.
    /// With [`KeyringChoice::Auto`] the OS keyring is tried at once; if it cannot be used,
    /// credentials go to files ([`IdentityStore::keyring_status`] says why).
    pub fn open(config_dir: PathBuf, keyring: KeyringChoice) -> Result<Self, IdentityError> {
        let devices_dir = config_dir.join("devices");
        check_private_dir(&devices_dir)?;
        let keyring = match keyring {
            KeyringChoice::Off => KeyringState::Off,
            KeyringChoice::Auto => match Keyring::start() {
                Ok(keyring) => KeyringState::Ready(keyring),
                Err(reason) => KeyringState::Unavailable(reason),
            },
        };
        Ok(IdentityStore {
            devices_dir,
            keyring: Mutex::new(keyring),
        })
    }

    /// The configuration directory: `$SWITCHYARD_CONFIG_DIR`, else
    /// `$XDG_CONFIG_HOME/switchyard`, else `~/.config/switchyard`.
    pub fn default_location() -> PathBuf {
        let var = |name| std::env::var_os(name);
        resolve_location(var(CONFIG_DIR_VAR), var("XDG_CONFIG_HOME"), var("HOME"))
            .or_else(|| {
                // No usable HOME: ask the user database.
                nix::unistd::User::from_uid(nix::unistd::geteuid())
                    .ok()
                    .flatten()
                    .map(|user| user.dir.join(".config").join("switchyard"))
            })
            // Nothing says where home is; the working directory is the only place left.
            .unwrap_or_else(|| PathBuf::from(".switchyard"))
    }

    /// Whether the OS keyring is in use.
    pub fn keyring_status(&self) -> KeyringStatus {
        match &*self.state() {
            KeyringState::Off => KeyringStatus::Off,
            KeyringState::Unavailable(reason) => KeyringStatus::Unavailable {
                reason: reason.clone(),
            },
            KeyringState::Ready(_) => KeyringStatus::Available,
        }
    }

    /// Saves `identity` under its profile, replacing any earlier one, and says where the
    /// credential went: the OS keyring when usable, else a 0600 file.
    pub fn save(&self, identity: &DeviceIdentity) -> Result<CredentialLocation, IdentityError> {
        let profile = identity.profile.as_str();
        validate_profile(profile)?;
        validate_server_url(&identity.server_url)?;
        validate_credential(&identity.credential)?;
        ensure_private_dir(&self.devices_dir)?;
        // A previous record that cannot be read is simply replaced.
        let previous = self.read_record(profile).ok().flatten();

        let location = self.store_credential(identity)?;
        let record = ProfileRecord {
            profile: profile.to_owned(),
            server_url: identity.server_url.clone(),
            device_id: identity.device_id,
            workspace_id: identity.workspace_id,
            credential_store: location.kind(),
        };
        // Serializing a struct of strings and UUIDs cannot fail.
        let mut json = serde_json::to_vec_pretty(&record).unwrap_or_default();
        json.push(b'\n');
        if let Err(error) = write_private(&self.devices_dir, &record_name(profile), &json) {
            // The previous record still names the previous credential; drop the orphan.
            if let CredentialLocation::OsKeyring { account, .. } = &location
                && let KeyringState::Ready(keyring) = &*self.state()
            {
                let _ = keyring.delete(account);
            }
            return Err(error);
        }

        // The new profile is in place; whatever held the old credential goes. Failing to clean
        // up leaves an unreachable entry behind, which does not make the save fail.
        if location.kind() == CredentialStoreKind::OsKeyring {
            let _ = remove_if_present(&self.credential_path(profile));
        }
        if let Some(previous) = previous
            && previous.credential_store == CredentialStoreKind::OsKeyring
        {
            let old = keyring_account(profile, &previous.device_id, &previous.server_url);
            if !matches!(&location, CredentialLocation::OsKeyring { account, .. } if *account == old)
                && let KeyringState::Ready(keyring) = &*self.state()
            {
                let _ = keyring.delete(&old);
            }
        }
        Ok(location)
    }

    /// Loads the identity saved under `profile`; `None` when there is none. A record whose
    /// credential is gone (keyring cleared by a reboot, file deleted) is an error that says to
    /// pair again.
    pub fn load(&self, profile: &str) -> Result<Option<DeviceIdentity>, IdentityError> {
        validate_profile(profile)?;
        if !check_private_dir(&self.devices_dir)? {
            return Ok(None);
        }
        let Some(record) = self.read_record(profile)? else {
            return Ok(None);
        };
        let credential = match record.credential_store {
            CredentialStoreKind::File => self.read_credential_file(profile)?,
            CredentialStoreKind::OsKeyring => self.read_keyring(&record)?,
        };
        validate_credential(&credential)?;
        Ok(Some(DeviceIdentity {
            profile: record.profile,
            server_url: record.server_url,
            device_id: record.device_id,
            workspace_id: record.workspace_id,
            credential,
        }))
    }

    /// Removes the profile and its credential; returns whether anything was there. A keyring
    /// entry is deleted when the keyring is usable; otherwise it is left to expire.
    pub fn remove(&self, profile: &str) -> Result<bool, IdentityError> {
        validate_profile(profile)?;
        if !check_private_dir(&self.devices_dir)? {
            return Ok(false);
        }
        let record = match self.read_record(profile) {
            Ok(record) => record,
            // A damaged record is removed all the same.
            Err(IdentityError::Corrupt { .. }) => None,
            Err(error) => return Err(error),
        };
        let mut found = false;
        if let Some(record) = &record
            && record.credential_store == CredentialStoreKind::OsKeyring
            && let KeyringState::Ready(keyring) = &*self.state()
        {
            let account = keyring_account(profile, &record.device_id, &record.server_url);
            found |= keyring
                .delete(&account)
                .map_err(|reason| IdentityError::Keyring { reason })?;
        }
        found |= remove_if_present(&self.credential_path(profile))?;
        found |= remove_if_present(&self.devices_dir.join(record_name(profile)))?;
        Ok(found)
    }

    /// The saved profiles (non-secret parts only), sorted by name.
    pub fn list(&self) -> Result<Vec<ProfileRecord>, IdentityError> {
        if !check_private_dir(&self.devices_dir)? {
            return Ok(Vec::new());
        }
        let entries = std::fs::read_dir(&self.devices_dir).map_err(|source| IdentityError::Io {
            action: "list",
            path: self.devices_dir.clone(),
            source,
        })?;
        let mut records = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| IdentityError::Io {
                action: "list",
                path: self.devices_dir.clone(),
                source,
            })?;
            let name = entry.file_name();
            let Some(profile) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if validate_profile(profile).is_err() {
                continue;
            }
            if let Some(record) = self.read_record(profile)? {
                records.push(record);
            }
        }
        records.sort_by(|a, b| a.profile.cmp(&b.profile));
        Ok(records)
    }

    fn state(&self) -> MutexGuard<'_, KeyringState> {
        // The state is replaced whole, never left half-changed, so a poisoned lock is usable.
        self.keyring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn credential_path(&self, profile: &str) -> PathBuf {
        self.devices_dir.join(format!("{profile}.credential"))
    }

    /// Puts the credential in the keyring when it is usable, else in the credential file.
    fn store_credential(
        &self,
        identity: &DeviceIdentity,
    ) -> Result<CredentialLocation, IdentityError> {
        let mut state = self.state();
        if let KeyringState::Ready(keyring) = &*state {
            let account =
                keyring_account(&identity.profile, &identity.device_id, &identity.server_url);
            match keyring.set(&account, &identity.credential) {
                Ok(()) => {
                    return Ok(CredentialLocation::OsKeyring {
                        service: KEYRING_SERVICE,
                        account,
                    });
                }
                // The credential is handed out once: keep it in a file rather than lose it.
                Err(reason) => *state = KeyringState::Unavailable(reason),
            }
        }
        drop(state);
        let name = format!("{}.credential", identity.profile);
        write_private(&self.devices_dir, &name, identity.credential.as_bytes())?;
        Ok(CredentialLocation::File {
            path: self.devices_dir.join(name),
        })
    }

    fn read_record(&self, profile: &str) -> Result<Option<ProfileRecord>, IdentityError> {
        let path = self.devices_dir.join(record_name(profile));
        let Some(bytes) = read_private(&path, Privacy::Trusted, MAX_RECORD)? else {
            return Ok(None);
        };
        let corrupt = |detail: String| IdentityError::Corrupt {
            path: path.clone(),
            detail,
        };
        let record: ProfileRecord =
            serde_json::from_slice(&bytes).map_err(|error| corrupt(error.to_string()))?;
        if record.profile != profile {
            return Err(corrupt(format!(
                "it names profile `{}`, not `{profile}`",
                record.profile
            )));
        }
        validate_server_url(&record.server_url).map_err(|error| corrupt(error.to_string()))?;
        Ok(Some(record))
    }

    fn read_credential_file(&self, profile: &str) -> Result<String, IdentityError> {
        let path = self.credential_path(profile);
        let bytes =
            read_private(&path, Privacy::Secret, MAX_CREDENTIAL as u64 + 1)?.ok_or_else(|| {
                IdentityError::CredentialMissing {
                    profile: profile.to_owned(),
                    location: path.display().to_string(),
                }
            })?;
        let text = String::from_utf8(bytes).map_err(|_| IdentityError::InvalidCredential)?;
        // Tolerates a final newline added by an editor.
        Ok(text.trim_end_matches(['\n', '\r']).to_owned())
    }

    fn read_keyring(&self, record: &ProfileRecord) -> Result<String, IdentityError> {
        let profile = record.profile.as_str();
        let account = keyring_account(profile, &record.device_id, &record.server_url);
        let unusable = |reason: String| IdentityError::KeyringUnusable {
            profile: profile.to_owned(),
            reason,
        };
        match &*self.state() {
            KeyringState::Off => Err(unusable(format!("is turned off ({KEYRING_VAR}=off)"))),
            KeyringState::Unavailable(why) => Err(unusable(format!("is unavailable: {why}"))),
            KeyringState::Ready(keyring) => keyring
                .get(&account)
                .map_err(|reason| IdentityError::Keyring { reason })?
                .ok_or_else(|| IdentityError::CredentialMissing {
                    profile: profile.to_owned(),
                    location: format!(
                        "the OS keyring (service `{KEYRING_SERVICE}`, account `{account}`; kernel \
                         keyrings are cleared on reboot and expire after days unused)"
                    ),
                }),
        }
    }
}

/// `<profile>.json`.
fn record_name(profile: &str) -> String {
    format!("{profile}.json")
}

/// The keyring account of one identity. The device id and server URL make it unique across
/// configuration directories and servers, so pairing anew never overwrites a credential that
/// another profile still uses.
fn keyring_account(profile: &str, device: &DeviceId, server_url: &str) -> String {
    format!("{profile}/{device}@{server_url}")
}

/// `config` if set, else `xdg/switchyard` (absolute only, as the XDG spec asks), else
/// `home/.config/switchyard`; empty values count as unset.
fn resolve_location(
    config: Option<OsString>,
    xdg: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    let set = |value: Option<OsString>| value.filter(|v| !v.is_empty()).map(PathBuf::from);
    set(config)
        .or_else(|| {
            set(xdg)
                .filter(|p| p.is_absolute())
                .map(|p| p.join("switchyard"))
        })
        .or_else(|| set(home).map(|h| h.join(".config").join("switchyard")))
}

/// An http(s) base URL without credentials, query or fragment.
fn validate_server_url(url: &str) -> Result<(), IdentityError> {
    let bad = |reason: &str| IdentityError::InvalidServerUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let parsed = Url::parse(url).map_err(|error| bad(&error.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if parsed.cannot_be_a_base() || parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad(
            "give the server's base URL, e.g. https://switchyard.example.com",
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("it must not contain a user name or password"));
    }
    Ok(())
}

/// 1–4096 printable ASCII characters without spaces: what a bearer token can carry.
fn validate_credential(credential: &str) -> Result<(), IdentityError> {
    let valid = (1..=MAX_CREDENTIAL).contains(&credential.len())
        && credential.bytes().all(|b| b.is_ascii_graphic());
    if valid {
        Ok(())
    } else {
        Err(IdentityError::InvalidCredential)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::sync::atomic::{AtomicU32, Ordering};
    use switchyard_protocol::ids::WorkspaceId;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let path = std::env::temp_dir().join(format!(
                "switchyard-identity-{}-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed),
                uuid::Uuid::new_v4()
            ));
            std::fs::create_dir_all(&path).expect("create temp dir");
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn identity(profile: &str, credential: &str) -> DeviceIdentity {
        DeviceIdentity {
            profile: profile.to_owned(),
            server_url: "http://127.0.0.1:8787".to_owned(),
            device_id: DeviceId::new(),
            workspace_id: WorkspaceId::new(),
            credential: credential.to_owned(),
        }
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).expect("stat").permissions().mode() & 0o7777
    }

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    fn file_store(dir: &TempDir) -> IdentityStore {
        IdentityStore::open(dir.0.join("config"), KeyringChoice::Off).expect("open")
    }

    #[test]
    fn a_saved_identity_loads_back_from_private_files() {
        let dir = TempDir::new();
        let store = file_store(&dir);
        assert_eq!(store.keyring_status(), KeyringStatus::Off);
        assert!(store.load("default").expect("load").is_none());

        let saved = identity("default", "sy_dev_canary-0001");
        let location = store.save(&saved).expect("save");
        let devices = dir.0.join("config").join("devices");
        let credential_file = devices.join("default.credential");
        assert_eq!(
            location,
            CredentialLocation::File {
                path: credential_file.clone()
            }
        );
        assert_eq!(mode(&devices), 0o700);
        assert_eq!(mode(&dir.0.join("config")), 0o700);
        assert_eq!(mode(&credential_file), 0o600);
        assert_eq!(mode(&devices.join("default.json")), 0o600);
        let record = std::fs::read_to_string(devices.join("default.json")).expect("record");
        assert!(!record.contains("canary"), "{record}");
        assert!(
            record.contains("\"credential_store\": \"file\""),
            "{record}"
        );

        let loaded = store.load("default").expect("load").expect("present");
        assert_eq!(loaded, saved);
        // A second store (another process, later) sees the same.
        assert_eq!(file_store(&dir).load("default").expect("load"), Some(saved));
    }

    #[test]
    fn saving_again_replaces_the_profile() {
        let dir = TempDir::new();
        let store = file_store(&dir);
        store.save(&identity("p", "sy_dev_first")).expect("save");
        let second = identity("p", "sy_dev_second");
        store.save(&second).expect("save");
        assert_eq!(store.load("p").expect("load"), Some(second));
        let names: Vec<String> = std::fs::read_dir(dir.0.join("config").join("devices"))
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "no temporaries left: {names:?}");
    }

    #[test]
    fn profiles_are_listed_and_removed() {
        let dir = TempDir::new();
        let store = file_store(&dir);
        assert!(store.list().expect("list").is_empty());
        let a = identity("a-laptop", "sy_dev_aaaa");
        let b = identity("b.server", "sy_dev_bbbb");
        store.save(&b).expect("save");
        store.save(&a).expect("save");
        let listed = store.list().expect("list");
        let names: Vec<&str> = listed.iter().map(|r| r.profile.as_str()).collect();
        assert_eq!(names, ["a-laptop", "b.server"]);
        assert_eq!(listed[0].device_id, a.device_id);
        assert_eq!(listed[0].credential_store, CredentialStoreKind::File);

        assert!(store.remove("a-laptop").expect("remove"));
        assert!(!store.remove("a-laptop").expect("remove again"));
        assert!(store.load("a-laptop").expect("load").is_none());
        assert!(!dir.0.join("config/devices/a-laptop.credential").exists());
        assert_eq!(store.list().expect("list").len(), 1);
    }

    #[test]
    fn wider_modes_are_refused_with_the_fix() {
        let dir = TempDir::new();
        let store = file_store(&dir);
        store.save(&identity("default", "sy_dev_x")).expect("save");
        let devices = dir.0.join("config").join("devices");

        chmod(&devices.join("default.credential"), 0o644);
        let err = store
            .load("default")
            .expect_err("world-readable credential");
        let text = err.to_string();
        assert!(
            text.contains("default.credential") && text.contains("0644"),
            "{text}"
        );
        assert!(text.contains("chmod 600"), "{text}");
        chmod(&devices.join("default.credential"), 0o600);

        chmod(&devices.join("default.json"), 0o666);
        let text = store
            .load("default")
            .expect_err("writable record")
            .to_string();
        assert!(
            text.contains("default.json") && text.contains("0666"),
            "{text}"
        );
        chmod(&devices.join("default.json"), 0o600);

        chmod(&devices, 0o755);
        let text = store
            .load("default")
            .expect_err("open directory")
            .to_string();
        assert!(
            text.contains("0755") && text.contains("chmod 700"),
            "{text}"
        );
        let text = IdentityStore::open(dir.0.join("config"), KeyringChoice::Off)
            .expect_err("open refuses it too")
            .to_string();
        assert!(text.contains("chmod 700"), "{text}");
        chmod(&devices, 0o700);

        // Narrower is fine.
        chmod(&devices.join("default.credential"), 0o400);
        assert!(store.load("default").expect("load").is_some());
    }

    #[test]
    fn a_linked_credential_file_is_refused() {
        let dir = TempDir::new();
        let store = file_store(&dir);
        store.save(&identity("default", "sy_dev_x")).expect("save");
        let devices = dir.0.join("config").join("devices");
        let elsewhere = dir.0.join("elsewhere");
        std::fs::write(&elsewhere, "sy_dev_planted").expect("write");
        chmod(&elsewhere, 0o600);
        std::fs::remove_file(devices.join("default.credential")).expect("rm");
        std::os::unix::fs::symlink(&elsewhere, devices.join("default.credential")).expect("ln");
        let text = store.load("default").expect_err("link").to_string();
        assert!(text.contains("symbolic link"), "{text}");
    }

    #[test]
    fn a_missing_credential_says_to_pair_again() {
        let dir = TempDir::new();
        let store = file_store(&dir);
        store.save(&identity("work", "sy_dev_x")).expect("save");
        std::fs::remove_file(dir.0.join("config/devices/work.credential")).expect("rm");
        let text = store.load("work").expect_err("missing").to_string();
        assert!(
            text.contains("switchyard pair --server URL --profile work"),
            "{text}"
        );
    }

    #[test]
    fn bad_inputs_are_refused_before_anything_is_written() {
        let dir = TempDir::new();
        let store = file_store(&dir);
        let mut bad_name = identity("../up", "sy_dev_x");
        assert!(matches!(
            store.save(&bad_name),
            Err(IdentityError::InvalidProfile { .. })
        ));
        bad_name.profile = "ok".into();
        bad_name.server_url = "https://user:pw@example.test".into();
        assert!(matches!(
            store.save(&bad_name),
            Err(IdentityError::InvalidServerUrl { .. })
        ));
        bad_name.server_url = "ftp://example.test".into();
        assert!(matches!(
            store.save(&bad_name),
            Err(IdentityError::InvalidServerUrl { .. })
        ));
        for credential in ["", "with space", "new\nline", &"x".repeat(4097)] {
            let err = store
                .save(&identity("ok", credential))
                .expect_err("bad credential");
            assert!(matches!(err, IdentityError::InvalidCredential));
            assert!(!err.to_string().contains(credential) || credential.is_empty());
        }
        assert!(!dir.0.join("config").exists());
        assert!(store.load("no/slash").is_err());
    }

    #[test]
    fn a_record_for_another_profile_is_corrupt() {
        let dir = TempDir::new();
        let store = file_store(&dir);
        store.save(&identity("one", "sy_dev_x")).expect("save");
        let devices = dir.0.join("config/devices");
        std::fs::copy(devices.join("one.json"), devices.join("two.json")).expect("copy");
        chmod(&devices.join("two.json"), 0o600);
        let err = store.load("two").expect_err("mismatch");
        assert!(err.to_string().contains("names profile `one`"), "{err}");
        // Removing still works on a damaged record.
        assert!(store.remove("two").expect("remove"));
    }

    #[test]
    fn the_location_follows_the_environment_order() {
        let os = |s: &str| Some(OsString::from(s));
        assert_eq!(
            resolve_location(os("/c"), os("/x"), os("/h")),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(
            resolve_location(os(""), os("/x"), os("/h")),
            Some(PathBuf::from("/x/switchyard"))
        );
        assert_eq!(
            resolve_location(None, os("relative"), os("/h")),
            Some(PathBuf::from("/h/.config/switchyard"))
        );
        assert_eq!(resolve_location(None, None, None), None);
    }

    /// The real kernel keyring: a credential saved by one store is found by another whose
    /// keyring thread has its own session keyring, as a runner process started later would.
    #[test]
    fn the_kernel_keyring_holds_the_credential_when_available() {
        let dir = TempDir::new();
        let store = IdentityStore::open(dir.0.join("config"), KeyringChoice::Auto).expect("open");
        assert_eq!(store.keyring_status(), KeyringStatus::Available);
        // Unique per run: the user's keyring is shared by every test and process.
        let profile = format!("test-{}", uuid::Uuid::new_v4().simple());
        let canary = format!("sy_dev_canary_{}", uuid::Uuid::new_v4().simple());
        let saved = identity(&profile, &canary);
        let location = store.save(&saved).expect("save");
        let CredentialLocation::OsKeyring { service, account } = &location else {
            panic!("not in the keyring: {location:?}");
        };
        assert_eq!(*service, "switchyard");
        assert!(
            account.starts_with(&profile) && account.contains("127.0.0.1:8787"),
            "{account}"
        );
        let devices = dir.0.join("config/devices");
        assert!(!devices.join(format!("{profile}.credential")).exists());
        let record =
            std::fs::read_to_string(devices.join(format!("{profile}.json"))).expect("record");
        assert!(
            !record.contains(&canary) && record.contains("os_keyring"),
            "{record}"
        );

        let other = IdentityStore::open(dir.0.join("config"), KeyringChoice::Auto).expect("open");
        assert_eq!(other.load(&profile).expect("load"), Some(saved.clone()));

        // Re-pairing the profile replaces the entry; the old one is deleted.
        let again = identity(&profile, "sy_dev_second");
        store.save(&again).expect("save again");
        assert_eq!(other.load(&profile).expect("load"), Some(again));
        let old = keyring_account(&profile, &saved.device_id, &saved.server_url);
        let state = other.state();
        let KeyringState::Ready(keyring) = &*state else {
            panic!("keyring not ready");
        };
        assert_eq!(keyring.get(&old).expect("get"), None);
        drop(state);

        // With the keyring off, the record is found but its credential cannot be read.
        let off = IdentityStore::open(dir.0.join("config"), KeyringChoice::Off).expect("open");
        let text = off.load(&profile).expect_err("keyring off").to_string();
        assert!(text.contains("SWITCHYARD_DEVICE_KEYRING=off"), "{text}");

        assert!(store.remove(&profile).expect("remove"));
        assert_eq!(other.load(&profile).expect("load"), None);
    }
}
