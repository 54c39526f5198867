//! Resolving a central connection's launch — the one place that decides what a central
//! session is started with: the connector's spec, the server's bindings file (references,
//! `--mcp-credentials-file`), and the values the server keeps sealed in PostgreSQL
//! (`installation` references, `db/credential_values.rs`), read and opened afresh at every
//! resolution so that a value set or revoked takes effect at the next call.
//!
//! The central runner, tool discovery, diagnosis and the credential listing all resolve
//! through here. A header the server itself supplies for every session of a connection (an
//! OAuth bearer token) is added after the bound values (`app/oauth/renew.rs`).
//!
//! Guarantees: a value that does not open (sealed for another row, with a key the file no
//! longer holds, or with no installation key configured) fails the resolution closed with a
//! `credential_unavailable` error naming the destination, never the value; opened values live
//! only in the launch (and the runner's redactor), never in a log or an answer.

use super::App;
use crate::db::credential_context;
use crate::error::AppResult;
use std::sync::Arc;
use switchyard_mcp_runner::SessionLaunch;
use switchyard_mcp_runner::credentials::{CredentialError, CredentialStatus, StoredValues};
use switchyard_mcp_runner::executor::LaunchResolver;
use switchyard_protocol::ConnectionId;
use switchyard_protocol::api::{CallError, ConnectorSpec};
use switchyard_protocol::runner::LeasedCall;

impl App {
    /// The launch for central connection `connection` placed from connector `spec`: its
    /// bindings with every bound value resolved. The outer error is the server's (the
    /// database failed); the inner one is the connection's credentials'.
    pub async fn central_launch(
        &self,
        connection: ConnectionId,
        spec: &ConnectorSpec,
    ) -> AppResult<Result<SessionLaunch, CredentialError>> {
        let stored = self.stored_values(connection).await?;
        // An OAuth connection's bearer token is added after this, by the runner's resolver
        // and by discovery (`App::with_oauth_token`), into `launch.headers`, so that the
        // runner's redactor knows it too.
        Ok(self.credentials.resolve_with(connection, spec, &stored))
    }

    /// Each destination of central connection `connection` (placed from `spec`) with where
    /// its value resolves and whether it is there; values are opened to check them and
    /// dropped.
    pub(super) async fn central_statuses(
        &self,
        connection: ConnectionId,
        spec: &ConnectorSpec,
    ) -> AppResult<Result<Vec<CredentialStatus>, CredentialError>> {
        let stored = self.stored_values(connection).await?;
        Ok(self.credentials.statuses_with(connection, spec, &stored))
    }

    /// The central runner's launch resolver: [`App::central_launch`] for each leased call,
    /// with an OAuth connection's access token ([`super::oauth::CentralLaunch`]).
    pub fn central_launch_resolver(&self) -> LaunchResolver {
        Arc::new(super::oauth::CentralLaunch::new(self.clone()))
    }

    /// [`App::central_launch`] for a leased call, the database's failure as the call's.
    pub(super) async fn central_call_launch(
        &self,
        call: &LeasedCall,
    ) -> Result<SessionLaunch, CallError> {
        let connection = call.connection.connection_id;
        match self.central_launch(connection, &call.connection.spec).await {
            Ok(launch) => launch.map_err(CallError::from),
            Err(error) => {
                tracing::error!(%connection, %error, "cannot read the connection's stored credentials");
                Err(CallError {
                    code: switchyard_mcp_runner::credentials::codes::UNAVAILABLE.to_owned(),
                    message: "the server cannot read the connection's stored credentials now \
                              (a database error, in the server log); nothing was sent"
                        .to_owned(),
                })
            }
        }
    }

    /// The values the server keeps for `connection`, each opened for its own row (or the
    /// reason it does not open).
    async fn stored_values(&self, connection: ConnectionId) -> AppResult<StoredValues> {
        let rows = self.db.credential_value_list(connection).await?;
        let mut stored = StoredValues::default();
        for row in rows {
            let value = match &self.config.installation_key {
                None => Err(
                    "the server has no installation key to open it: start it with \
                             --installation-key-file"
                        .to_owned(),
                ),
                Some(keys) => keys
                    .open(
                        &credential_context(row.connection_id, &row.destination),
                        &row.sealed,
                    )
                    .map_err(|error| error.to_string())
                    .and_then(|bytes| {
                        String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())
                    }),
            };
            if let Err(reason) = &value {
                tracing::warn!(%connection, destination = %row.destination, %reason, "a stored credential value does not open");
            }
            stored.insert(row.destination, row.prefix, value);
        }
        Ok(stored)
    }
}
