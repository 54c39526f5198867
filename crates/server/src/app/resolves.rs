//! The resolves that this process's submissions were accepted on, by what they named. A
//! submission that names the same things again makes its call from the remembered resolve and
//! inserts it in the statement that resolves it anew ([`Datastore::call_submit_speculated`]):
//! the insert happens only if that resolve reads the same (its fingerprint), so what is
//! remembered is a guess that saves a round trip, never a permission. A stale guess costs the
//! statement that finds it stale; what that statement read is then decided on as usual, and
//! remembered. A resolve is fingerprinted (and remembered) only when its keys are not
//! remembered yet, or by that statement: submissions that share batches do not pay for it.
//!
//! [`Datastore::call_submit_speculated`]: crate::db::Datastore::call_submit_speculated

use crate::db::{SubmitContext, SubmitKeys, Submitter, SubmitterKey};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

/// How many resolves are remembered; past it, all are forgotten and remembered afresh.
const REMEMBERED_MAX: usize = 1024;

/// What a submission names, but its request_id: the keys of a resolve.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct ResolveKey {
    submitter: SubmitterId,
    workspace: String,
    profile: String,
    connection: String,
    environment: Option<String>,
    operation: Option<Uuid>,
    tool_name: String,
}

/// Who submits, as a resolve's key: the principal, or the hash of the API token presented.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum SubmitterId {
    User(Uuid),
    Device(Uuid),
    Token(Vec<u8>),
}

impl ResolveKey {
    /// The key of `keys` (`ws`, `profile`, `connection` and `environment` as the request
    /// spelled them, which `keys` parsed).
    pub(super) fn new(
        keys: &SubmitKeys<'_>,
        ws: &str,
        profile: &str,
        connection: &str,
        environment: Option<&str>,
    ) -> Self {
        Self {
            submitter: match keys.submitter {
                SubmitterKey::Known(Submitter::User(id)) => SubmitterId::User(id),
                SubmitterKey::Known(Submitter::Device(id)) => SubmitterId::Device(id),
                SubmitterKey::UserToken(hash) => SubmitterId::Token(hash.to_vec()),
            },
            workspace: ws.to_owned(),
            profile: profile.to_owned(),
            connection: connection.to_owned(),
            environment: environment.map(str::to_owned),
            operation: keys.operation,
            tool_name: keys.tool_name.to_owned(),
        }
    }
}

/// The accepted resolves remembered, each without the call stored under its request_id.
#[derive(Debug, Default)]
pub(super) struct Resolves {
    accepted: Mutex<HashMap<ResolveKey, Arc<SubmitContext>>>,
}

impl Resolves {
    /// The resolve last accepted for `key`.
    pub(super) fn get(&self, key: &ResolveKey) -> Option<Arc<SubmitContext>> {
        self.lock().get(key).cloned()
    }

    /// Remembers `context`, on which a submission named by `key` was accepted as a new call,
    /// if it has its fingerprint.
    pub(super) fn remember(&self, key: ResolveKey, mut context: SubmitContext) {
        if context.fingerprint.is_none() {
            return;
        }
        context.existing = None;
        let mut accepted = self.lock();
        if accepted.len() >= REMEMBERED_MAX && !accepted.contains_key(&key) {
            accepted.clear();
        }
        accepted.insert(key, Arc::new(context));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ResolveKey, Arc<SubmitContext>>> {
        self.accepted.lock().unwrap_or_else(|e| e.into_inner())
    }
}
