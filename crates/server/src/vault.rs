//! The installation key: what seals the secrets the server itself must hold (central
//! connections' credential values, OAuth tokens) before they reach PostgreSQL.
//!
//! The key lives in a file of its own (`--installation-key-file`), a regular file owned by the
//! server's user with mode 0600 (checked at every load, as [`crate::private_file`] does), never
//! in the database: a dump of the database alone opens nothing. Sealing is AES-256-GCM with a
//! fresh random nonce per value and the value's *context* (say `credential:<connection>/<name>`)
//! as associated data, so a sealed value copied to another row does not open.
//!
//! The file holds one key per line, `switchyard-key v1 <id> <base64>`, the newest first; new
//! values are sealed with the newest, and every sealed value records its key's id. Rotation
//! (`switchyard-server admin rotate-key`) puts a new key first, re-seals every value, then
//! drops the old keys: a crash at any step leaves every value's key in the file.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What every key line starts with.
const KEY_LINE_PREFIX: &str = "switchyard-key v1";

/// A value sealed with the installation key, as it is stored.
#[derive(Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The id of the key that sealed it.
    pub key_id: String,
    /// The nonce, 12 bytes.
    pub nonce: Vec<u8>,
    /// The ciphertext with its 16-byte tag.
    pub ciphertext: Vec<u8>,
}

impl fmt::Debug for Sealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealed")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

/// Why the vault cannot be loaded or a value cannot be opened. Never holds a key or a value.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// The key file is missing, unsafe or unreadable.
    #[error("installation key file: {0}")]
    File(String),
    /// The key file is readable but not a key file.
    #[error("installation key file `{path}` line {line}: {problem}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A value was sealed with a key the file no longer holds.
    #[error(
        "a stored value was sealed with key `{0}`, which the installation key file does not hold"
    )]
    UnknownKey(String),
    /// A value does not open: changed, moved to another context, or sealed by another key.
    #[error("a stored value does not open with key `{0}`: it was changed or copied")]
    Tampered(String),
}

/// The installation's keys, newest first.
pub struct Vault {
    keys: Vec<InstallationKey>,
    random: SystemRandom,
}

struct InstallationKey {
    id: String,
    key: LessSafeKey,
}

impl fmt::Debug for Vault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|key| key.id.as_str()).collect();
        f.debug_struct("Vault").field("key_ids", &ids).finish()
    }
}

impl Vault {
    /// Loads the key file at `path`, creating it with one new key (mode 0600, never replacing
    /// a file) when it does not exist.
    pub fn load_or_create(path: &Path) -> Result<Vault, VaultError> {
        match fs::symlink_metadata(path) {
            Ok(_) => Vault::load(path),
            Err(error) if error.kind() == ErrorKind::NotFound => {
                let line = new_key_line(&SystemRandom::new())?;
                write_new_file(path, &line)?;
                Vault::load(path)
            }
            Err(error) => Err(VaultError::File(format!(
                "`{}` cannot be read: {error}",
                path.display()
            ))),
        }
    }

    /// Loads the key file at `path`, which must exist and be private to the server's user.
    pub fn load(path: &Path) -> Result<Vault, VaultError> {
        let text = crate::private_file::read_private_file(path).map_err(VaultError::File)?;
        let mut keys = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let malformed = |problem| VaultError::Malformed {
                path: path.to_owned(),
                line: index + 1,
                problem,
            };
            let rest = line
                .strip_prefix(KEY_LINE_PREFIX)
                .ok_or_else(|| malformed("expected `switchyard-key v1 <id> <base64 key>`"))?;
            let mut fields = rest.split_whitespace();
            let (Some(id), Some(encoded), None) = (fields.next(), fields.next(), fields.next())
            else {
                return Err(malformed("expected `switchyard-key v1 <id> <base64 key>`"));
            };
            let bytes = BASE64
                .decode(encoded)
                .map_err(|_| malformed("the key is not base64"))?;
            let key = UnboundKey::new(&AES_256_GCM, &bytes)
                .map_err(|_| malformed("the key is not 32 bytes"))?;
            if keys.iter().any(|known: &InstallationKey| known.id == id) {
                return Err(malformed("a key id appears twice"));
            }
            keys.push(InstallationKey {
                id: id.to_owned(),
                key: LessSafeKey::new(key),
            });
        }
        if keys.is_empty() {
            return Err(VaultError::File(format!(
                "`{}` holds no key; remove it to have a new one made, or restore it from backup",
                path.display()
            )));
        }
        Ok(Vault {
            keys,
            random: SystemRandom::new(),
        })
    }

    /// The id of the key new values are sealed with.
    pub fn current_key_id(&self) -> &str {
        &self.keys[0].id
    }

    /// Seals `plaintext` for `context` with the newest key.
    pub fn seal(&self, context: &str, plaintext: &[u8]) -> Sealed {
        let current = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .expect("the system's random source failed");
        let mut ciphertext = plaintext.to_vec();
        current
            .key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut ciphertext,
            )
            .expect("AES-256-GCM seals any value shorter than 64 GiB");
        Sealed {
            key_id: current.id.clone(),
            nonce: nonce.to_vec(),
            ciphertext,
        }
    }

    /// Opens a value sealed for `context`.
    pub fn open(&self, context: &str, sealed: &Sealed) -> Result<Vec<u8>, VaultError> {
        let key = self
            .keys
            .iter()
            .find(|key| key.id == sealed.key_id)
            .ok_or_else(|| VaultError::UnknownKey(sealed.key_id.clone()))?;
        let tampered = || VaultError::Tampered(sealed.key_id.clone());
        let nonce = Nonce::try_assume_unique_for_key(&sealed.nonce).map_err(|_| tampered())?;
        let mut buffer = sealed.ciphertext.clone();
        let plaintext = key
            .key
            .open_in_place(nonce, Aad::from(context.as_bytes()), &mut buffer)
            .map_err(|_| tampered())?;
        Ok(plaintext.to_vec())
    }

    /// Whether `sealed` was sealed with the newest key (rotation re-seals the others).
    pub fn is_current(&self, sealed: &Sealed) -> bool {
        sealed.key_id == self.keys[0].id
    }

    /// Puts a new key first in the file at `path` (replaced atomically; the old keys stay, so
    /// every stored value still opens) and answers the vault that seals with it.
    pub fn add_key(path: &Path) -> Result<Vault, VaultError> {
        let text = crate::private_file::read_private_file(path).map_err(VaultError::File)?;
        Vault::load(path)?;
        let line = new_key_line(&SystemRandom::new())?;
        replace_file(path, &format!("{line}{text}\n"))?;
        Vault::load(path)
    }

    /// Keeps only the newest key in the file at `path`; call it once no value is sealed with
    /// another.
    pub fn drop_old_keys(path: &Path) -> Result<Vault, VaultError> {
        let vault = Vault::load(path)?;
        let text = crate::private_file::read_private_file(path).map_err(VaultError::File)?;
        let current = text
            .lines()
            .map(str::trim)
            .find(|line| line.starts_with(KEY_LINE_PREFIX))
            .expect("a loaded key file has a key line");
        replace_file(path, &format!("{current}\n"))?;
        drop(vault);
        Vault::load(path)
    }
}

/// The key file a running server uses: loaded at start, read again before a value is sealed
/// (so it is sealed with the newest key, even one another process just added) and when a
/// stored value names a key this copy does not hold (`admin rotate-key` ran meanwhile).
pub struct KeyFile {
    path: PathBuf,
    vault: std::sync::RwLock<std::sync::Arc<Vault>>,
}

impl fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl KeyFile {
    /// Loads the key file at `path`, creating it when missing ([`Vault::load_or_create`]).
    pub fn load_or_create(path: &Path) -> Result<KeyFile, VaultError> {
        let vault = Vault::load_or_create(path)?;
        Ok(KeyFile {
            path: path.to_owned(),
            vault: std::sync::RwLock::new(std::sync::Arc::new(vault)),
        })
    }

    /// Loads the key file at `path`, creating it only when it is missing and no value is
    /// sealed yet (`sealed_values`, [`crate::db::Datastore::sealed_values_count`]): a new key
    /// cannot open what the lost one sealed, so a missing file then stops the server.
    pub fn load_or_create_for(path: &Path, sealed_values: u64) -> Result<KeyFile, VaultError> {
        let missing =
            matches!(fs::symlink_metadata(path), Err(e) if e.kind() == ErrorKind::NotFound);
        if missing && sealed_values > 0 {
            return Err(VaultError::File(format!(
                "installation key file missing: `{}` does not exist, but the database holds \
                 {sealed_values} value(s) sealed with it; restore it from backup (a new key \
                 cannot open them)",
                path.display()
            )));
        }
        KeyFile::load_or_create(path)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The keys as the file holds them now (read again).
    pub fn reload(&self) -> Result<std::sync::Arc<Vault>, VaultError> {
        let vault = std::sync::Arc::new(Vault::load(&self.path)?);
        *self
            .vault
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = std::sync::Arc::clone(&vault);
        Ok(vault)
    }

    /// Opens a value sealed for `context`, reading the file again once if the value names a
    /// key not loaded yet.
    pub fn open(&self, context: &str, sealed: &Sealed) -> Result<Vec<u8>, VaultError> {
        let vault = std::sync::Arc::clone(
            &self
                .vault
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        match vault.open(context, sealed) {
            Err(VaultError::UnknownKey(_)) => self.reload()?.open(context, sealed),
            opened => opened,
        }
    }
}

/// A new key line with a random id and key.
fn new_key_line(random: &SystemRandom) -> Result<String, VaultError> {
    let mut key = [0u8; 32];
    let mut id = [0u8; 4];
    random
        .fill(&mut key)
        .and_then(|()| random.fill(&mut id))
        .map_err(|_| VaultError::File("the system's random source failed".to_owned()))?;
    let id: String = id.iter().map(|byte| format!("{byte:02x}")).collect();
    Ok(format!("{KEY_LINE_PREFIX} {id} {}\n", BASE64.encode(key)))
}

/// Writes `text` to a new 0600 file at `path`, synced; never replaces one.
fn write_new_file(path: &Path, text: &str) -> Result<(), VaultError> {
    let io = |error: std::io::Error| {
        VaultError::File(format!("`{}` cannot be written: {error}", path.display()))
    };
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

/// Replaces the file at `path` with `text`: a fresh 0600 file beside it, synced, renamed over.
fn replace_file(path: &Path, text: &str) -> Result<(), VaultError> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".new");
    let temporary = PathBuf::from(temporary);
    match fs::remove_file(&temporary) {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) => {
            return Err(VaultError::File(format!(
                "`{}` cannot be removed: {error}",
                temporary.display()
            )));
        }
    }
    write_new_file(&temporary, text)?;
    fs::rename(&temporary, path).map_err(|error| {
        VaultError::File(format!("`{}` cannot be replaced: {error}", path.display()))
    })?;
    if let Some(directory) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        // The rename is durable once the directory is synced.
        File::open(directory)
            .and_then(|directory| directory.sync_all())
            .map_err(|error| {
                VaultError::File(format!(
                    "`{}` cannot be synced: {error}",
                    directory.display()
                ))
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use switchyard_testkit::scratch::Scratch;

    #[test]
    fn a_new_key_file_is_private_and_values_open_only_in_their_context() {
        let dir = Scratch::new("vault").unwrap();
        let path = dir.join("installation.key");
        let vault = Vault::load_or_create(&path).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let sealed = vault.seal("credential:a/TOKEN", b"canary-value");
        assert!(
            !sealed
                .ciphertext
                .windows(b"canary-value".len())
                .any(|window| window == b"canary-value")
        );
        assert_eq!(
            vault.open("credential:a/TOKEN", &sealed).unwrap(),
            b"canary-value"
        );
        assert!(matches!(
            vault.open("credential:b/TOKEN", &sealed),
            Err(VaultError::Tampered(_))
        ));
        // Loading again reads the same key.
        let again = Vault::load_or_create(&path).unwrap();
        assert_eq!(again.current_key_id(), vault.current_key_id());
        assert_eq!(
            again.open("credential:a/TOKEN", &sealed).unwrap(),
            b"canary-value"
        );
    }

    #[test]
    fn rotation_keeps_old_values_open_until_the_old_keys_are_dropped() {
        let dir = Scratch::new("vault-rotate").unwrap();
        let path = dir.join("installation.key");
        let old = Vault::load_or_create(&path).unwrap();
        let sealed = old.seal("ctx", b"value");

        let rotated = Vault::add_key(&path).unwrap();
        assert_ne!(rotated.current_key_id(), old.current_key_id());
        assert!(!rotated.is_current(&sealed));
        let value = rotated.open("ctx", &sealed).unwrap();
        let resealed = rotated.seal("ctx", &value);
        assert!(rotated.is_current(&resealed));

        let trimmed = Vault::drop_old_keys(&path).unwrap();
        assert_eq!(trimmed.open("ctx", &resealed).unwrap(), b"value");
        assert!(matches!(
            trimmed.open("ctx", &sealed),
            Err(VaultError::UnknownKey(_))
        ));
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_loose_or_malformed_key_file_is_refused_without_echoing_it() {
        let dir = Scratch::new("vault-refused").unwrap();
        let loose = dir.join("loose.key");
        Vault::load_or_create(&loose).unwrap();
        fs::set_permissions(&loose, fs::Permissions::from_mode(0o644)).unwrap();
        let error = Vault::load(&loose).unwrap_err().to_string();
        assert!(error.contains("chmod 600"), "{error}");

        let malformed = dir.join("malformed.key");
        write_new_file(&malformed, "switchyard-key v1 abc not-base64!\n").unwrap();
        let error = Vault::load(&malformed).unwrap_err().to_string();
        assert!(
            error.contains("line 1") && !error.contains("not-base64!"),
            "{error}"
        );

        let empty = dir.join("empty.key");
        write_new_file(&empty, "# nothing\n").unwrap();
        assert!(
            Vault::load(&empty)
                .unwrap_err()
                .to_string()
                .contains("holds no key")
        );
    }

    #[test]
    fn a_missing_key_file_is_not_recreated_while_values_need_it() {
        let dir = Scratch::new("vault").unwrap();
        let path = dir.join("lost.key");
        let Err(error) = KeyFile::load_or_create_for(&path, 3) else {
            panic!("refused");
        };
        let error = error.to_string();
        assert!(error.contains("restore it from backup"), "{error}");
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(!path.exists(), "no new key was made");
        KeyFile::load_or_create_for(&path, 0).expect("a first key is made");
        assert!(path.exists());
    }
}
