//! The MCP `initialize` handshake made before anything is stored (`docs/GOVERNANCE.md`): an
//! HTTP connector being added must answer it, and a central connection placed with its
//! credentials is resolved and checked with them before its row and its binding are written.

use super::App;
use super::connections::DiscoveryFailure;
use super::connectors::endpoint_blocked;
use crate::db::Key;
use crate::error::{AppError, AppResult};
use switchyard_mcp_runner::SessionError;
use switchyard_mcp_runner::credentials::{ConnectionBinding, CredentialError};
use switchyard_mcp_runner::endpoints::EndpointError;
use switchyard_mcp_runner::launch::SessionLaunch;
use switchyard_mcp_runner::redact::Redactor;
use switchyard_mcp_runner::session::{Discovery, McpSession, initialize_then_discover};
use switchyard_protocol::api::{ConnectionCredentials, ConnectorSpec};
use switchyard_protocol::{ConnectionId, ErrorCode, RunnerRef, WorkspaceId};

/// What checking a placement's credentials found, once nothing refused it.
pub(super) enum Screened {
    /// A stdio connection: its references resolved; it is not started (its connector may
    /// still need an owner's approval).
    Resolved,
    /// An HTTP connection: the handshake passed with the credentials; this is what listing
    /// its tools gave (the failure's message is redacted).
    Handshaken(Result<Discovery, DiscoveryFailure>),
}

impl App {
    /// Refuses an HTTP connector whose endpoint does not complete the MCP `initialize`
    /// handshake within the discovery deadline (`handshake_failed`; `endpoint_blocked` for a
    /// redirect the guard refuses). No credential is sent: connectors carry none, so an
    /// endpoint that answers with an authentication challenge (401, or 403 with
    /// `WWW-Authenticate`) passes — it speaks MCP and wants a credential, which is checked
    /// when a connection is placed with one. Stdio connectors are not started here.
    pub(super) async fn handshake_connector(
        &self,
        name: &str,
        spec: &ConnectorSpec,
    ) -> AppResult<()> {
        if !matches!(spec, ConnectorSpec::Http { .. }) {
            return Ok(());
        }
        let launch = SessionLaunch {
            spec: spec.clone(),
            env: Vec::new(),
            headers: Vec::new(),
        };
        match McpSession::open(
            &launch,
            &self.config.endpoints,
            self.config.discovery_deadline,
        )
        .await
        {
            Ok(session) => {
                session.close().await;
                Ok(())
            }
            Err(SessionError::Unauthorized { .. }) => Ok(()),
            Err(error) => Err(handshake_refused(
                name,
                "connector",
                &error.to_string(),
                error,
            )),
        }
    }

    /// Refuses a connector name that is taken, before any endpoint is contacted.
    pub(super) async fn connector_name_free(&self, name: &str) -> AppResult<()> {
        if self.db.connector_find(&Key::Name(name)).await?.is_some() {
            return Err(AppError::refused(
                ErrorCode::AlreadyExists,
                format!("a connector named `{name}` already exists"),
            ));
        }
        Ok(())
    }

    /// Refuses a connection name or explicit namespace that is taken in `workspace`, before
    /// any endpoint is contacted (the insert checks again, against a race).
    pub(super) async fn connection_names_free(
        &self,
        workspace: WorkspaceId,
        name: &str,
        namespace: &str,
    ) -> AppResult<()> {
        if self
            .db
            .connection_find(workspace, &Key::Name(name))
            .await?
            .is_some()
        {
            return Err(AppError::refused(
                ErrorCode::AlreadyExists,
                format!("a connection named `{name}` already exists"),
            ));
        }
        let taken = self.db.connection_namespaces(workspace, namespace).await?;
        if taken.iter().any(|t| t == namespace) {
            return Err(AppError::refused(
                ErrorCode::AlreadyExists,
                format!(
                    "namespace `{namespace}` is taken by another connection of this workspace; choose another with `namespace`"
                ),
            ));
        }
        Ok(())
    }

    /// Checks the credentials a connection `id` (not stored yet) of connector `spec` is placed
    /// with: central placements only, a bindings file to hold them, every reference valid and
    /// resolving to a usable value, and — HTTP — the MCP handshake passing with them (then its
    /// tools are listed in the same session). Any refusal leaves nothing behind: nothing has
    /// been written yet.
    pub(super) async fn screen_credentials(
        &self,
        id: ConnectionId,
        (connection, spec): (&str, &ConnectorSpec),
        runner: &RunnerRef,
        credentials: &ConnectionCredentials,
    ) -> AppResult<Screened> {
        if !runner.is_central() {
            return Err(AppError::refused(
                ErrorCode::InvalidCredentials,
                format!(
                    "connection `{connection}` is placed on a device: its credentials are bound on the device (in the device runner's bindings file, docs/CREDENTIALS.md), not sent to the server; place it without `credentials`"
                ),
            ));
        }
        if !self.credentials.has_bindings_file() {
            return Err(credentials_refused(
                connection,
                &CredentialError::NoBindingsFile { connection: id },
            ));
        }
        let binding = ConnectionBinding::from_credentials(credentials).map_err(|why| {
            AppError::refused(
                ErrorCode::InvalidCredentials,
                format!("connection `{connection}`: {why}; nothing was stored"),
            )
        })?;
        if binding.is_empty() {
            return Err(AppError::refused(
                ErrorCode::InvalidCredentials,
                format!(
                    "connection `{connection}`: `credentials` binds nothing; give `env` or `headers` references, or leave `credentials` out"
                ),
            ));
        }
        let launch = self
            .credentials
            .resolve_supplied(id, spec, &binding)
            .map_err(|e| credentials_refused(connection, &e))?;
        if !matches!(spec, ConnectorSpec::Http { .. }) {
            return Ok(Screened::Resolved);
        }
        // A server's error can echo what it was sent: redact before anyone sees it.
        let redactor = Redactor::for_launch(&launch);
        let redacted = |error: &SessionError| redactor.redact(&error.to_string()).into_owned();
        match initialize_then_discover(
            &launch,
            &self.config.endpoints,
            self.config.discovery_deadline,
        )
        .await
        {
            Ok(listed) => {
                Ok(Screened::Handshaken(listed.map_err(|error| {
                    DiscoveryFailure::of_session(&error, &redactor)
                })))
            }
            Err(error) => Err(handshake_refused(
                connection,
                "connection",
                &redacted(&error),
                error,
            )),
        }
    }
}

/// The refusal of `kind` `name` whose handshake failed with `error` (described by `message`,
/// redacted where it needs to be).
fn handshake_refused(name: &str, kind: &str, message: &str, error: SessionError) -> AppError {
    match error {
        SessionError::Endpoint(blocked @ EndpointError::Blocked { .. }) => {
            endpoint_blocked(name, &blocked)
        }
        SessionError::Unauthorized { .. } => AppError::refused(
            ErrorCode::HandshakeFailed,
            format!(
                "{kind} `{name}`: the MCP server refused the credential ({message}); check that the references point at the right values; nothing was stored"
            ),
        ),
        _ => AppError::refused(
            ErrorCode::HandshakeFailed,
            format!("{kind} `{name}`: the MCP handshake failed: {message}; nothing was stored"),
        ),
    }
}

/// The refusal of connection `name`'s credentials (`invalid_credentials`, naming the runner's
/// `credential_*` reason). The message names references, never a value.
fn credentials_refused(name: &str, error: &CredentialError) -> AppError {
    AppError::refused(
        ErrorCode::InvalidCredentials,
        format!(
            "connection `{name}`: {error} ({}); nothing was stored",
            error.code()
        ),
    )
}
