//! rmcp's [`SessionStore`] on PostgreSQL: a session's `initialize` parameters, so that a
//! replica that does not hold the session in memory replays its handshake and serves it.

use crate::app::App;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};

/// The `mcp_sessions` table, as rmcp's session store.
#[derive(Clone, Debug)]
pub(super) struct PgSessionStore {
    app: App,
}

impl PgSessionStore {
    /// A store over the app's datastore.
    pub(super) fn new(app: App) -> Self {
        Self { app }
    }
}

#[async_trait::async_trait]
impl SessionStore for PgSessionStore {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(params) = self.app.db().mcp_session_load(session_id).await? else {
            return Ok(None);
        };
        Ok(Some(SessionState::new(serde_json::from_value(params)?)))
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let params = serde_json::to_value(&state.initialize_params)?;
        self.app.db().mcp_session_store(session_id, &params).await?;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.app.db().mcp_session_delete(session_id).await?;
        Ok(())
    }
}
