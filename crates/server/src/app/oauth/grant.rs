//! What is sealed besides a grant ([`GrantRecord`], shared with device grants): an
//! authorization waiting for its callback ([`PendingRecord`]). Each is sealed for a context
//! that binds it to its row ([`crate::db::grant_context`], [`crate::db::pending_context`]),
//! so that `admin rotate-key` re-seals either from the row alone.

use rmcp::transport::auth::StoredAuthorizationState;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
pub(super) use switchyard_mcp_runner::oauth::{ClientRecord, GrantRecord, TokenFacts};

/// The key an authorization's `state` is stored under: its SHA-256 (the state itself is the
/// callback's capability, never stored).
pub(super) fn state_digest(state: &str) -> Vec<u8> {
    Sha256::digest(state.as_bytes()).to_vec()
}

/// A sealed authorization waiting for its callback.
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct PendingRecord {
    /// What rmcp keeps under the state: the PKCE verifier, the expected issuer.
    pub(super) state: StoredAuthorizationState,
    /// The client the flow began with.
    pub(super) client: ClientRecord,
    /// The connector URL the flow was for.
    pub(super) resource: String,
}
