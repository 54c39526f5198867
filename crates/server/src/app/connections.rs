//! Connections and their tool catalogs, including discovery against the real MCP server.

use super::audit::connection_summary;
use super::auth::already_exists;
use super::handshake::Screened;
use super::names::{derive_namespace, free_namespace, validate_name, validate_namespace};
use super::{Actor, App, Audit, views};
use crate::db::{ConnectionRow, Key};
use crate::error::{AppError, AppResult};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use switchyard_mcp_runner::SessionError;
use switchyard_mcp_runner::credentials::codes;
use switchyard_mcp_runner::endpoints::EndpointError;
use switchyard_mcp_runner::redact::Redactor;
use switchyard_mcp_runner::session::Discovery;
use switchyard_protocol::api::*;
use switchyard_protocol::runner::Submitter;
use switchyard_protocol::{ConnectionId, ErrorCode, WorkspaceId};

/// A discovery that failed: why the connection is unavailable, from the typed error (never
/// from its words), and the redacted message people and the log read.
#[derive(Clone, Debug)]
pub(crate) struct DiscoveryFailure {
    /// What `/mcp` tells clients: a refused or unresolvable credential needs authorization,
    /// anything else is unreachable.
    pub reason: UnavailableReason,
    /// What went wrong, redacted.
    pub message: String,
}

impl DiscoveryFailure {
    /// The failure of a session that would not open or list its tools, its message redacted
    /// by `redactor`: the server refusing the credential needs authorization.
    pub(crate) fn of_session(error: &SessionError, redactor: &Redactor) -> Self {
        let reason = match error {
            SessionError::Unauthorized { .. } => UnavailableReason::NeedsAuthorization,
            _ => UnavailableReason::Unreachable,
        };
        Self {
            reason,
            message: redactor.redact(&error.to_string()).into_owned(),
        }
    }

    /// The failure a device runner reported under its stable error `code` (`message` as it
    /// reported it): a credential code needs authorization.
    pub(crate) fn of_code(code: Option<&str>, message: String) -> Self {
        let reason = match code {
            Some(code) if codes::is_credential_failure(code) => {
                UnavailableReason::NeedsAuthorization
            }
            _ => UnavailableReason::Unreachable,
        };
        Self { reason, message }
    }
}

impl App {
    /// Places a connector in a workspace (workspace admins only), on the central runner or a
    /// paired device of the workspace.
    pub async fn connection_create(
        &self,
        actor: &Actor,
        ws: &str,
        req: CreateConnection,
    ) -> AppResult<ConnectionView> {
        let membership = self.admin_membership(actor, ws).await?;
        validate_name("connection", &req.name)?;
        let runner = self
            .connection_runner(membership.workspace.id, req.runner.as_deref())
            .await?;
        let connector = self.find_connector(&req.connector).await?;
        super::retire::require_in_service(None, &connector, None)?;
        let workspace = membership.workspace.id;
        let namespace = match req.namespace {
            Some(namespace) => {
                validate_namespace(&namespace)?;
                namespace
            }
            None => {
                let base = derive_namespace(&req.name);
                let taken = self.db.connection_namespaces(workspace, &base).await?;
                free_namespace(&base, &taken)
            }
        };
        let id = ConnectionId::new();
        let screened = match &req.credentials {
            None => None,
            Some(credentials) => {
                self.connection_names_free(workspace, &req.name, &namespace)
                    .await?;
                let spec = connector.spec();
                let screened = self
                    .screen_credentials(id, (&req.name, &spec), &runner, credentials)
                    .await?;
                // Checked: the binding goes in first, so the row never exists without it.
                self.credentials.bind(id, credentials).map_err(|e| {
                    AppError::refused(
                        ErrorCode::InvalidCredentials,
                        format!("connection `{}`: {e}; nothing was stored", req.name),
                    )
                })?;
                Some(screened)
            }
        };
        let created = self
            .db
            .connection_create(
                id,
                workspace,
                (&req.name, &namespace, req.declared),
                connector.id,
                runner,
            )
            .await;
        if created.is_err() && req.credentials.is_some() {
            self.unbind_unstored(id);
        }
        let row = created
            .map_err(|e| {
                if constraint(&e) == Some("connections_workspace_namespace") {
                    AppError::refused(
                        ErrorCode::AlreadyExists,
                        format!(
                            "namespace `{namespace}` is taken by another connection of this workspace; choose another with `namespace`"
                        ),
                    )
                } else {
                    already_exists(e, "connection", &req.name)
                }
            })?;
        let mut summary = connection_summary(&row);
        if let Some(credentials) = &req.credentials {
            summary["credentials"] = bound_summary(credentials);
        }
        self.audit(
            Audit::by(actor, "connection.created")
                .workspace(row.workspace_id)
                .connection(row.id)
                .object("connection", Some(row.id.0), &row.name)
                .after(summary),
        )
        .await;
        match screened {
            Some(Screened::Handshaken(Ok(found))) => {
                self.tool_catalog_reconcile(&row, &found).await?;
            }
            Some(Screened::Handshaken(Err(failure))) => {
                self.record_discovery_failure(&row, &failure).await?;
            }
            Some(Screened::Resolved) | None => return Ok(views::connection(&row)),
        }
        Ok(views::connection(&self.db.connection_get(row.id).await?))
    }

    /// Takes the binding of connection `id` out of the bindings file again: its row could not
    /// be stored. A failure is logged (the binding names a connection that does not exist,
    /// which binds nothing).
    fn unbind_unstored(&self, id: ConnectionId) {
        if let Err(error) = self.credentials.unbind(id) {
            tracing::error!(connection = %id, %error, "could not remove the binding of a connection that was not stored");
        }
    }

    /// Records that discovering `connection` failed: on the connection (why, and the
    /// redacted message), as its event.
    async fn record_discovery_failure(
        &self,
        connection: &ConnectionRow,
        failure: &DiscoveryFailure,
    ) -> AppResult<()> {
        let DiscoveryFailure { reason, message } = failure;
        self.db
            .connection_discovery_failed(connection.id, *reason, message)
            .await?;
        let detail = serde_json::json!({"error": message, "reason": reason});
        self.db
            .event_record(connection.id, "discovery_failed", &detail, None)
            .await?;
        Ok(())
    }

    /// The connections of a workspace.
    pub async fn connection_list(&self, actor: &Actor, ws: &str) -> AppResult<Vec<ConnectionView>> {
        let membership = self.membership(actor, ws).await?;
        let views = self
            .db
            .connection_list(membership.workspace.id)
            .await?
            .iter()
            .map(views::connection)
            .collect();
        self.with_own_grants(actor, views).await
    }

    /// `views` with each central per-person connection's (`credential = user`) auth state
    /// as `actor`'s own grant stands: `authorized` (when obtained or last renewed) or
    /// `needs_authorization`.
    async fn with_own_grants(
        &self,
        actor: &Actor,
        mut views: Vec<ConnectionView>,
    ) -> AppResult<Vec<ConnectionView>> {
        let personal = |view: &ConnectionView| {
            view.runner == "central"
                && view
                    .auth
                    .as_ref()
                    .is_some_and(|auth| auth.credential == CredentialHolder::User)
        };
        let ids: Vec<ConnectionId> = views.iter().filter(|v| personal(v)).map(|v| v.id).collect();
        if ids.is_empty() {
            return Ok(views);
        }
        let held: HashMap<ConnectionId, DateTime<Utc>> = self
            .db
            .oauth_grants_held(&ids, &actor.user.id.to_string())
            .await?
            .into_iter()
            .collect();
        for view in views.iter_mut().filter(|v| personal(v)) {
            let at = held.get(&view.id).copied();
            if let Some(auth) = view.auth.as_mut() {
                auth.state = if at.is_some() {
                    AuthState::Authorized
                } else {
                    AuthState::NeedsAuthorization
                };
                auth.authorized_at = at;
            }
        }
        Ok(views)
    }

    /// One connection.
    pub async fn connection_get(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
    ) -> AppResult<ConnectionView> {
        let membership = self.membership(actor, ws).await?;
        let view = views::connection(&self.find_connection(membership.workspace.id, key).await?);
        let mut views = self.with_own_grants(actor, vec![view]).await?;
        Ok(views.remove(0))
    }

    /// The cached tool catalog of a connection.
    pub async fn tool_list(&self, actor: &Actor, ws: &str, key: &str) -> AppResult<Vec<ToolView>> {
        let membership = self.membership(actor, ws).await?;
        let connection = self.find_connection(membership.workspace.id, key).await?;
        Ok(self
            .db
            .tool_list(connection.id)
            .await?
            .iter()
            .map(views::tool)
            .collect())
    }

    /// Discovers the connection's tools (initialize + paginated tools/list within the
    /// discovery deadline) and reconciles the cached catalog (workspace admins only). A
    /// connection placed on a device is discovered by the device's runner: this waits up to
    /// `wait` (at most 25 s) for it (see `app/device_discovery.rs`).
    pub async fn connection_discover(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
        wait: std::time::Duration,
    ) -> AppResult<DiscoveryView> {
        let membership = self.admin_membership(actor, ws).await?;
        let connection = self.find_connection(membership.workspace.id, key).await?;
        let connector = self.db.connector_get(connection.connector_id).await?;
        super::retire::require_in_service(Some(&connection), &connector, None)?;
        if !connector.is_runnable() {
            return Err(not_approved(&connector.name));
        }
        if !connection.runner_ref.is_central() {
            // Its server runs on the device, with the device's credentials: its runner lists
            // the tools (`app/device_discovery.rs`).
            return self
                .device_discover(actor, &connection, &connector, wait)
                .await;
        }
        let mut code = ErrorCode::DiscoveryFailed;
        let resolved = match self
            .central_launch(connection.id, &connector.spec())
            .await?
        {
            // An OAuth connection's access token goes with its bound credentials.
            Ok(launch) => self
                .with_oauth_token(
                    connection.id,
                    launch,
                    None,
                    Some(Submitter::User(actor.user.id)),
                )
                .await
                .map(|(launch, _)| launch)
                .map_err(|e| e.message),
            Err(e) => Err(e.to_string()),
        };
        let discovered = match resolved {
            Ok(launch) => {
                // A failing server's stderr can echo what it was given: redact before keeping it.
                let redactor = Redactor::for_launch(&launch);
                switchyard_mcp_runner::session::discover(
                    &launch,
                    &self.config.endpoints,
                    self.config.discovery_deadline,
                )
                .await
                .map_err(|e| {
                    if matches!(e, SessionError::Endpoint(EndpointError::Blocked { .. })) {
                        code = ErrorCode::EndpointBlocked;
                    }
                    DiscoveryFailure::of_session(&e, &redactor)
                })
            }
            Err(message) => Err(DiscoveryFailure {
                reason: UnavailableReason::NeedsAuthorization,
                message,
            }),
        };
        match discovered {
            Ok(found) => self.tool_catalog_reconcile(&connection, &found).await,
            Err(failure) => {
                self.record_discovery_failure(&connection, &failure).await?;
                Err(AppError::refused(
                    code,
                    format!(
                        "discovery of `{}` failed: {}",
                        connection.name, failure.message
                    ),
                ))
            }
        }
    }

    /// Reconciles a connection's cached catalog with the tools a discovery listed (see
    /// [`crate::db::Datastore::tool_catalog_reconcile`]: new tools unclassified, classified
    /// ones kept and flagged when their annotations changed, vanished ones unavailable),
    /// records the discovery as the connection's event, and answers the catalog after it.
    /// Whoever discovered the tools — the server for a central connection, a device runner
    /// for its own — calls this; it authorizes nothing.
    pub(crate) async fn tool_catalog_reconcile(
        &self,
        connection: &ConnectionRow,
        found: &Discovery,
    ) -> AppResult<DiscoveryView> {
        let changes = self.db.tool_catalog_reconcile(connection.id, found).await?;
        let detail = serde_json::json!({
            "tools": found.tools.len(),
            "added": changes.added,
            "needing_review": changes.needing_review,
            "vanished": changes.vanished,
        });
        self.db
            .event_record(connection.id, "discovery_succeeded", &detail, None)
            .await?;
        Ok(DiscoveryView {
            connection_id: connection.id,
            tools: self
                .db
                .tool_list(connection.id)
                .await?
                .iter()
                .map(views::tool)
                .collect(),
        })
    }

    /// Classifies a tool of a connection (the installation owner and workspace admins only):
    /// records the two mandatory fields, clears the review flag, and answers the tool. An
    /// unavailable tool can be classified (it keeps it for when it is back); a retired
    /// connection's cannot (`connection_retired`: restoring it asks for each classification
    /// again).
    pub async fn tool_classify(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
        tool: &str,
        classification: ToolClassification,
    ) -> AppResult<ToolView> {
        let membership = self.integrations_membership(actor, ws).await?;
        let connection = self.find_connection(membership.workspace.id, key).await?;
        if connection.retired_at.is_some() {
            return Err(super::retire::refused_retired(
                ErrorCode::ConnectionRetired,
                &connection.name,
            ));
        }
        let classified = self
            .db
            .tool_classify(connection.id, tool, classification, actor.user.id)
            .await?
            .ok_or_else(|| {
                AppError::refused(
                    ErrorCode::ToolNotFound,
                    format!(
                        "connection `{}` has no discovered tool `{tool}`; run `switchyard connection discover` to refresh the catalog",
                        connection.name
                    ),
                )
            })?;
        let mut entry = Audit::by(actor, "tool.classified")
            .workspace(membership.workspace.id)
            .connection(connection.id)
            .object("tool", None, tool)
            .after(serde_json::json!(classification));
        if let Some(was) = classified.was() {
            entry = entry.before(serde_json::json!(was));
        }
        self.audit(entry).await;
        Ok(views::tool(&classified.tool))
    }

    pub(crate) async fn find_connection(
        &self,
        workspace: WorkspaceId,
        key: &str,
    ) -> AppResult<ConnectionRow> {
        self.db
            .connection_find(workspace, &Key::parse(key))
            .await?
            .ok_or_else(|| connection_not_found(key))
    }
}

/// What an audit entry says about bound credentials: each destination and its reference's
/// provider, never a reference's name or a value.
fn bound_summary(credentials: &ConnectionCredentials) -> serde_json::Value {
    let providers = |references: &std::collections::BTreeMap<String, CredentialReference>| {
        references
            .iter()
            .map(|(name, reference)| (name.clone(), reference.provider.as_str().into()))
            .collect::<serde_json::Map<_, _>>()
    };
    serde_json::json!({
        "env": providers(&credentials.env),
        "headers": providers(&credentials.headers),
    })
}

/// The constraint a database error names, if any.
fn constraint(error: &sqlx::Error) -> Option<&str> {
    error.as_database_error().and_then(|e| e.constraint())
}

/// No connection `key` (id or name) in the workspace.
pub(crate) fn connection_not_found(key: &str) -> AppError {
    AppError::refused(
        ErrorCode::ConnectionNotFound,
        format!("no connection `{key}` in this workspace"),
    )
}

pub(crate) fn not_approved(connector: &str) -> AppError {
    AppError::refused(
        ErrorCode::ConnectorNotApproved,
        format!(
            "connector `{connector}` runs a command that is not approved; an installation owner must run `switchyard connector approve {connector}`"
        ),
    )
}
