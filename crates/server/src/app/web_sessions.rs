//! Browser sessions of the web UI: a personal API token, pasted once, is exchanged for a random
//! session id that only the browser holds (in an HttpOnly cookie). The database keeps the id's
//! hash and a per-session CSRF token; revoking the API token ends its sessions.

use super::auth::hash_token;
use super::{Actor, App};
use crate::db::{SessionTimes, WebSessionRow};
use crate::error::{AppError, AppResult};
use switchyard_protocol::ErrorCode;

/// A live browser session.
#[derive(Clone, Debug)]
pub struct WebSession {
    /// Who is signed in.
    pub actor: Actor,
    /// The token every form of this session must carry.
    pub csrf_token: String,
}

/// A session just created: the id goes to the browser once and is never stored.
#[derive(Clone)]
pub struct NewWebSession {
    /// The session id for the cookie.
    pub session_id: String,
    /// The session.
    pub session: WebSession,
}

impl std::fmt::Debug for NewWebSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The session id is a bearer secret: never print it.
        f.debug_struct("NewWebSession")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

/// A random value for session ids and CSRF tokens: 32 bytes as hex.
pub fn random_secret() -> AppResult<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| AppError::Internal(format!("no randomness: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn signed_out() -> AppError {
    AppError::refused(
        ErrorCode::Unauthenticated,
        "you are signed out; sign in with your personal API token",
    )
}

fn web_session(row: WebSessionRow) -> WebSession {
    WebSession {
        actor: Actor { user: row.user },
        csrf_token: row.csrf_token,
    }
}

impl App {
    /// Signs in with a personal API token: creates a session bound to that token.
    pub async fn web_session_start(
        &self,
        token: &str,
        times: SessionTimes,
    ) -> AppResult<NewWebSession> {
        let session_id = random_secret()?;
        let csrf_token = random_secret()?;
        let row = self
            .db
            .web_session_insert(
                &hash_token(&session_id),
                &hash_token(token.trim()),
                &csrf_token,
                times,
            )
            .await?
            .ok_or_else(|| {
                AppError::refused(
                    ErrorCode::Unauthenticated,
                    "that token is not valid (or was revoked)",
                )
            })?;
        Ok(NewWebSession {
            session_id,
            session: web_session(row),
        })
    }

    /// The live session with this id, its expiry slid forward.
    pub async fn web_session_resume(
        &self,
        session_id: &str,
        times: SessionTimes,
    ) -> AppResult<WebSession> {
        self.db
            .web_session_touch(&hash_token(session_id), times)
            .await?
            .map(web_session)
            .ok_or_else(signed_out)
    }

    /// Refuses unless the session is still live; does not slide its expiry.
    pub async fn web_session_require_live(&self, session_id: &str) -> AppResult<()> {
        if self.db.web_session_live(&hash_token(session_id)).await? {
            Ok(())
        } else {
            Err(signed_out())
        }
    }

    /// Signs out: the session ends on the server, whatever the browser keeps.
    pub async fn web_session_end(&self, session_id: &str) -> AppResult<()> {
        self.db.web_session_delete(&hash_token(session_id)).await?;
        Ok(())
    }
}
