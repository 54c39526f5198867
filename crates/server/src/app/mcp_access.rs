//! Who may use `/mcp`, and whose its sessions are. A request is authenticated by its bearer
//! token alone, on every request: a person's personal API token or an agent's token (both are
//! users' tokens); a device credential is refused. A session (`Mcp-Session-Id`) belongs to the
//! principal who started it: for anyone else it does not exist.

use super::mcp_catalog_cache::CatalogGeneration;
use super::principal::DEVICE_CREDENTIAL_PREFIX;
use super::{Actor, App, hash_token};
use crate::error::{AppError, AppResult};
use switchyard_protocol::ErrorCode;

impl App {
    /// Authenticates the bearer token of an `/mcp` request: any user's live token (a person's
    /// API token, or an agent's); a device credential is refused (`unauthenticated`). A
    /// request naming a session must be its starter's (`mcp_session_not_found` otherwise).
    /// One read, whichever it is, which also reads the generation of the catalogs the request
    /// may be answered from ([`App::mcp_catalog_at`]).
    pub async fn mcp_authenticate(
        &self,
        token: &str,
        session: Option<&str>,
    ) -> AppResult<(Actor, CatalogGeneration)> {
        if token.starts_with(DEVICE_CREDENTIAL_PREFIX) {
            return Err(AppError::refused(
                ErrorCode::Unauthenticated,
                "a device credential cannot be used on /mcp; use an agent token (`switchyard agent create`) or your personal API token",
            ));
        }
        match self
            .db
            .mcp_principal_in_session(&hash_token(token), session)
            .await?
        {
            None => Err(AppError::refused(
                ErrorCode::Unauthenticated,
                "the token is not valid (revoked, expired, never issued, or its agent was revoked); use an agent token (`switchyard agent create`) or your personal API token",
            )),
            Some(found) => match session {
                Some(id) if !found.session_owned => Err(session_not_found(id)),
                _ => Ok((
                    Actor { user: found.user },
                    CatalogGeneration::read(found.catalog_generation),
                )),
            },
        }
    }

    /// Records that `actor` started the `/mcp` session `id`, whose handshake was just stored.
    pub async fn mcp_session_claim(&self, actor: &Actor, id: &str) -> AppResult<()> {
        if self.db.mcp_session_claim(id, actor.user.id).await? {
            Ok(())
        } else {
            Err(AppError::Internal(format!(
                "the /mcp session {id} was not stored with its handshake"
            )))
        }
    }
}

/// The answer to a session id that is not the asker's, or no longer exists.
fn session_not_found(id: &str) -> AppError {
    AppError::refused(
        ErrorCode::McpSessionNotFound,
        format!(
            "no /mcp session `{id}` of yours (it ended, or was never started); start a new one with `initialize`"
        ),
    )
}
