//! The OS keyring for device credentials: the Linux kernel keyring through `keyring-core` and
//! `linux-keyutils-keyring-store`, used from one dedicated thread.
//!
//! Linux keeps the session keyring in each *thread's* credentials, and a process started from a
//! plain shell may have none, in which case keyring calls fail with "access denied". So every
//! operation runs on a thread that first joins (or creates) a session keyring. The store adds
//! each entry to that session keyring *and* links it into the per-user persistent keyring, which
//! the store links into every session keyring it opens: that is how the runner, a different
//! process, finds the credential `switchyard pair` stored. Kernel keyrings do not survive a
//! reboot and persistent entries expire after days unused, so a missing entry is an expected
//! condition with its own error, not a bug.

use keyring_core::{CredentialStore, Entry};
use linux_keyutils::{KeyRing, KeyRingIdentifier};
use std::sync::{Arc, mpsc};
use std::thread;

/// The keyring service every device credential is stored under.
pub const KEYRING_SERVICE: &str = "switchyard";

type Reply<T> = mpsc::SyncSender<Result<T, String>>;

/// One operation on one entry, sent to the keyring thread with where to send its answer.
enum Request {
    Get {
        account: String,
        reply: Reply<Option<String>>,
    },
    Set {
        account: String,
        value: String,
        reply: Reply<()>,
    },
    Delete {
        account: String,
        reply: Reply<bool>,
    },
}

/// A handle on the keyring thread; the thread ends when the handle is dropped.
#[derive(Debug)]
pub(super) struct Keyring {
    requests: mpsc::Sender<Request>,
}

impl Keyring {
    /// Starts the keyring thread. Fails, with the reason, when the kernel keyring cannot be
    /// used at all (e.g. keyctl is blocked by a sandbox).
    pub fn start() -> Result<Keyring, String> {
        let (requests, inbox) = mpsc::channel::<Request>();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        thread::Builder::new()
            .name("switchyard-identity-keyring".to_owned())
            .spawn(move || match open_store() {
                Ok(store) => {
                    // The starter waits for this message, so its receiver still exists.
                    let _ = ready_tx.send(Ok(()));
                    serve(&store, inbox);
                }
                Err(reason) => {
                    let _ = ready_tx.send(Err(reason));
                }
            })
            .map_err(|error| format!("cannot start the keyring thread: {error}"))?;
        ready_rx.recv().map_err(|_| stopped())??;
        Ok(Keyring { requests })
    }

    /// The credential stored under `account`, if any.
    pub fn get(&self, account: &str) -> Result<Option<String>, String> {
        self.ask(|reply| Request::Get {
            account: account.to_owned(),
            reply,
        })
    }

    /// Stores `value` under `account`, replacing any earlier value.
    pub fn set(&self, account: &str, value: &str) -> Result<(), String> {
        self.ask(|reply| Request::Set {
            account: account.to_owned(),
            value: value.to_owned(),
            reply,
        })
    }

    /// Deletes the entry under `account`; returns whether there was one.
    pub fn delete(&self, account: &str) -> Result<bool, String> {
        self.ask(|reply| Request::Delete {
            account: account.to_owned(),
            reply,
        })
    }

    fn ask<T>(&self, request: impl FnOnce(Reply<T>) -> Request) -> Result<T, String> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.requests.send(request(reply)).map_err(|_| stopped())?;
        answer.recv().map_err(|_| stopped())?
    }
}

fn stopped() -> String {
    "the keyring thread has stopped".to_owned()
}

/// Joins or creates this thread's session keyring and opens the keyutils store on it.
fn open_store() -> Result<Arc<CredentialStore>, String> {
    KeyRing::from_special_id(KeyRingIdentifier::Session, true)
        .map_err(|error| format!("cannot join or create a session keyring: {error}"))?;
    let store: Arc<CredentialStore> =
        linux_keyutils_keyring_store::Store::new().map_err(describe)?;
    Ok(store)
}

/// Answers requests until the [`Keyring`] (the only sender) is dropped. An asker that gave up
/// is owed nothing, so failed replies are ignored.
fn serve(store: &Arc<CredentialStore>, inbox: mpsc::Receiver<Request>) {
    let entry =
        |account: &str| Entry::new_in_store(store, KEYRING_SERVICE, account).map_err(describe);
    for request in inbox {
        match request {
            Request::Get { account, reply } => {
                let answer = entry(&account).and_then(|e| match e.get_password() {
                    Ok(value) => Ok(Some(value)),
                    Err(keyring_core::Error::NoEntry) => Ok(None),
                    Err(error) => Err(describe(error)),
                });
                let _ = reply.send(answer);
            }
            Request::Set {
                account,
                value,
                reply,
            } => {
                let answer = entry(&account).and_then(|e| e.set_password(&value).map_err(describe));
                let _ = reply.send(answer);
            }
            Request::Delete { account, reply } => {
                let answer = entry(&account).and_then(|e| match e.delete_credential() {
                    Ok(()) => Ok(true),
                    Err(keyring_core::Error::NoEntry) => Ok(false),
                    Err(error) => Err(describe(error)),
                });
                let _ = reply.send(answer);
            }
        }
    }
}

/// Explains a keyring error without formatting data it may carry (some variants hold the raw
/// stored bytes).
fn describe(error: keyring_core::Error) -> String {
    use keyring_core::Error;
    match error {
        Error::NoStorageAccess(platform) => format!("access denied: {platform}"),
        Error::PlatformFailure(platform) => platform.to_string(),
        Error::BadEncoding(_) | Error::BadDataFormat(..) => {
            "the stored entry is not a text credential".to_owned()
        }
        Error::Invalid(what, why) => format!("{what}: {why}"),
        Error::TooLong(what, limit) => {
            format!("{what} is longer than the keyring's limit of {limit}")
        }
        Error::NoDefaultStore => "no keyring store is configured".to_owned(),
        _ => "unexpected keyring error".to_owned(),
    }
}
