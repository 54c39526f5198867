//! Listing a central connection's credential destinations (where each resolves, whether its
//! value is there: references only), setting a value through the API, and revoking them all.
//!
//! A value set here is checked (the destination against the connector, the value rules),
//! sealed with the installation key for its own row and stored in PostgreSQL
//! (`db/credential_values.rs`); it binds its destination (`{"provider": "installation"}`)
//! and is used from the next call on ([`App::central_launch`]). Without an installation key
//! (`--installation-key-file`) this is refused (`credential_values_disabled`). The value is
//! never logged, never in the answer or the audit entry, which name the destination and its
//! provider only.

use super::audit::Audit;
use super::{Actor, App};
use crate::db::{ConnectionRow, credential_context};
use crate::error::{AppError, AppResult};
use serde_json::json;
use switchyard_mcp_runner::credentials::{
    CredentialStatus, Destination, Source, ValueState, check_stored_value,
};
use switchyard_protocol::api::{
    CredentialProvider, CredentialReference, CredentialValueSet, SetCredentialValue,
};
use switchyard_protocol::credential_status::{
    CredentialStatusList, CredentialStatusView, CredentialValueState,
};
use switchyard_protocol::{ConnectionId, ErrorCode};

impl App {
    /// The credential destinations of central connection `connection` (workspace admins):
    /// each environment variable its connector declares or has bound, or each bound header,
    /// with where its value resolves and whether it is there. Values are read to check them
    /// and dropped; a device connection's live on its device and are refused here.
    pub async fn connection_credential_list(
        &self,
        actor: &Actor,
        ws: &str,
        connection: &str,
    ) -> AppResult<CredentialStatusList> {
        let membership = self.admin_membership(actor, ws).await?;
        let row = self
            .find_connection(membership.workspace.id, connection)
            .await?;
        require_central(
            &row,
            "its values live on that device; list them there with `switchyard credential list`",
        )?;
        self.credential_list_of(row).await
    }

    /// The credential list of central connection `row`.
    async fn credential_list_of(&self, row: ConnectionRow) -> AppResult<CredentialStatusList> {
        let connector = self.db.connector_get(row.connector_id).await?;
        let statuses = self
            .central_statuses(row.id, &connector.spec())
            .await?
            .map_err(|error| {
                AppError::refused(
                    ErrorCode::InvalidCredentials,
                    format!(
                        "connection `{}`: the server's credential bindings cannot be read: \
                         {error} ({})",
                        row.name,
                        error.code()
                    ),
                )
            })?;
        Ok(CredentialStatusList {
            connection_id: row.id,
            connection: row.name,
            values_settable: self.credential_values_settable(),
            credentials: statuses.iter().map(status_view).collect(),
        })
    }

    /// Whether this server keeps credential values set through the API (it has an
    /// installation key to seal them with).
    pub fn credential_values_settable(&self) -> bool {
        self.config.installation_key.is_some()
    }

    /// Seals a value for destination `name` of central connection `connection`, stores it and
    /// binds the destination to it (workspace admins, servers with an installation key). The
    /// runner's next call opens a new session with it and drains the sessions holding the old
    /// value (a new credential generation).
    pub async fn connection_credential_set(
        &self,
        actor: &Actor,
        ws: &str,
        connection: &str,
        name: &str,
        req: SetCredentialValue,
    ) -> AppResult<CredentialValueSet> {
        let membership = self.admin_membership(actor, ws).await?;
        let row = self
            .find_connection(membership.workspace.id, connection)
            .await?;
        let Some(keys) = self.config.installation_key.clone() else {
            return Err(AppError::refused(
                ErrorCode::CredentialValuesDisabled,
                "credential values are not set through the API on this server: it has no \
                 installation key to seal them with; start `switchyard-server serve` with \
                 --installation-key-file PATH (docs/CREDENTIALS.md), or set the value with its \
                 provider instead",
            ));
        };
        require_central(
            &row,
            "set its values on that device with `switchyard credential set`",
        )?;
        let connector = self.db.connector_get(row.connector_id).await?;
        let spec = connector.spec();
        let destination = match spec {
            switchyard_protocol::api::ConnectorSpec::Stdio { .. } => {
                Destination::Env(name.to_owned())
            }
            switchyard_protocol::api::ConnectorSpec::Http { .. } => {
                Destination::Header(name.to_owned())
            }
        };
        // No prefix given keeps the one the value had.
        let prefix = match req.prefix {
            Some(prefix) => Some(prefix),
            None => self
                .db
                .credential_value_list(row.id)
                .await?
                .into_iter()
                .find(|stored| stored.destination == destination)
                .and_then(|stored| stored.prefix),
        };
        let site =
            check_stored_value(row.id, &spec, name, &req.value, prefix).map_err(|error| {
                AppError::refused(
                    ErrorCode::InvalidCredentials,
                    format!(
                        "connection `{}`: {error} ({}); nothing was stored",
                        row.name,
                        error.code()
                    ),
                )
            })?;
        let context = credential_context(row.id, &site.destination);
        let stored = self
            .db
            .credential_value_store(
                row.id,
                &site.destination,
                site.reference.prefix.as_deref(),
                // Read again under the sealed-write lock: sealed with the newest key.
                || Ok(keys.reload()?.seal(&context, req.value.as_bytes())),
            )
            .await?;
        drop(req.value);
        stored.map_err(|error| {
            AppError::Internal(format!("the installation key file cannot be read: {error}"))
        })?;
        let destination = match &site.destination {
            Destination::Env(_) => "env",
            Destination::Header(_) => "header",
        };
        self.audit(
            Audit::by(actor, "connection.credential_set")
                .workspace(row.workspace_id)
                .connection(row.id)
                .object("connection", Some(row.id.0), &row.name)
                .after(json!({
                    "destination": destination,
                    "name": name,
                    "provider": CredentialProvider::Installation.as_str(),
                })),
        )
        .await;
        Ok(CredentialValueSet {
            connection_id: row.id,
            destination: destination.to_owned(),
            name: name.to_owned(),
            reference: CredentialReference {
                provider: CredentialProvider::Installation,
                name: None,
                account: None,
                key: None,
                prefix: site.reference.prefix,
            },
        })
    }

    /// Empties central connection `connection`'s credentials — every value the server keeps
    /// for it, whoever set it, and every holder's OAuth grant (it then needs authorization) —
    /// and keeps its declaration (connector, bindings file references, auth settings);
    /// answers the credential list (workspace admins). Its next call finds the values missing
    /// and fails before anything is sent.
    pub async fn connection_credentials_revoke(
        &self,
        actor: &Actor,
        ws: &str,
        connection: &str,
    ) -> AppResult<CredentialStatusList> {
        let membership = self.admin_membership(actor, ws).await?;
        let row = self
            .find_connection(membership.workspace.id, connection)
            .await?;
        require_central(
            &row,
            "its values live on that device; remove them there with `switchyard credential`",
        )?;
        let emptied = self.credentials_empty(row.id).await?;
        self.audit(
            Audit::by(actor, "connection.credentials_revoked")
                .workspace(row.workspace_id)
                .connection(row.id)
                .object("connection", Some(row.id.0), &row.name)
                .after(json!({ "values_deleted": emptied.values,
                    "oauth_grants_deleted": emptied.grants })),
        )
        .await;
        self.credential_list_of(row).await
    }

    /// Empties `connection`'s credentials as the server keeps them: deletes every sealed
    /// value, whoever set it, and forgets every holder's OAuth grant (the connection then
    /// needs authorization). Its declaration (connector, bindings, auth settings) stays. What
    /// revoking and retiring a connection share; no authorization, no audit entry: the
    /// caller does both. Each half is idempotent, so a caller cut off between them finishes
    /// the job by calling it again.
    pub async fn credentials_empty(&self, connection: ConnectionId) -> AppResult<Emptied> {
        let values = self.db.credential_value_delete_all(connection).await?;
        let grants = self.oauth_grants_forget(connection).await?;
        Ok(Emptied { values, grants })
    }
}

/// What [`App::credentials_empty`] deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Emptied {
    /// Sealed credential values.
    pub values: u64,
    /// OAuth grants (every holder's).
    pub grants: u64,
}

/// Refuses a connection that runs on a device: `what` says where its values are handled.
fn require_central(row: &ConnectionRow, what: &str) -> AppResult<()> {
    if row.runner_ref.is_central() {
        return Ok(());
    }
    Err(AppError::refused(
        ErrorCode::ConnectionNotCentral,
        format!(
            "connection `{}` runs on {}: {what}",
            row.name, row.runner_ref
        ),
    ))
}

/// A destination's status as the API shows it: its reference, never its value.
fn status_view(status: &CredentialStatus) -> CredentialStatusView {
    let (destination, name) = match &status.destination {
        Destination::Env(name) => ("env", name),
        Destination::Header(name) => ("header", name),
    };
    let (state, code, reason) = match &status.state {
        ValueState::Unbound => (CredentialValueState::Unbound, None, None),
        ValueState::Present => (CredentialValueState::Present, None, None),
        ValueState::Missing => (CredentialValueState::Missing, None, None),
        ValueState::Unusable { code, reason } => (
            CredentialValueState::Unusable,
            Some((*code).to_owned()),
            Some(reason.clone()),
        ),
    };
    CredentialStatusView {
        destination: destination.to_owned(),
        name: name.clone(),
        reference: status.reference.as_ref().map(|reference| {
            let mut wire = CredentialReference {
                provider: CredentialProvider::Environment,
                name: None,
                account: None,
                key: None,
                prefix: reference.prefix.clone(),
            };
            match &reference.source {
                Source::Environment { name } => wire.name = Some(name.clone()),
                Source::OsStore { account } => {
                    wire.provider = CredentialProvider::OsStore;
                    wire.account = Some(account.clone());
                }
                Source::SecretsFile { key } => {
                    wire.provider = CredentialProvider::SecretsFile;
                    wire.key = Some(key.clone());
                }
                Source::Installation => wire.provider = CredentialProvider::Installation,
            }
            wire
        }),
        state,
        code,
        reason,
    }
}
