//! Listing a central connection's credential destinations (where each resolves, whether its
//! value is there: references only) and setting a value through the API — only in a development
//! installation, where the server keeps values in the 0600 secrets file next to its bindings
//! file (`--dev-credential-values` with `--mcp-credentials-file`). Elsewhere values stay with
//! their provider, set where it lives, and this is refused (`credential_values_disabled`).
//!
//! The value is checked and written by the runner's own writer
//! ([`CredentialResolver::set_value`](switchyard_mcp_runner::credentials::CredentialResolver::set_value)):
//! never to the database, never logged, never in the answer or the audit entry, which name the
//! destination and its provider only.

use super::audit::Audit;
use super::{Actor, App};
use crate::error::{AppError, AppResult};
use serde_json::json;
use switchyard_mcp_runner::credentials::{
    CredentialStatus, Destination, Source, ValueState, ValueStore, ValueTarget,
};
use switchyard_protocol::ErrorCode;
use switchyard_protocol::api::{
    CredentialProvider, CredentialReference, CredentialValueSet, SetCredentialValue,
};
use switchyard_protocol::credential_status::{
    CredentialStatusList, CredentialStatusView, CredentialValueState,
};

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
        if !row.runner_ref.is_central() {
            return Err(AppError::refused(
                ErrorCode::ConnectionNotCentral,
                format!(
                    "connection `{}` runs on {}: its values live on that device; list them there \
                     with `switchyard credential list`",
                    row.name, row.runner_ref
                ),
            ));
        }
        let connector = self.db.connector_get(row.connector_id).await?;
        let statuses = self
            .credentials
            .statuses(row.id, &connector.spec())
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

    /// Whether this server keeps credential values set through the API (a development
    /// installation with a bindings file).
    pub fn credential_values_settable(&self) -> bool {
        self.config.credential_values && self.credentials.has_bindings_file()
    }

    /// Stores a value for destination `name` of central connection `connection` in the
    /// server's secrets file and binds the destination to it (workspace admins, development
    /// installations only). The runner's next call opens a new session with it and drains the
    /// sessions holding the old value.
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
        if !self.credential_values_settable() {
            return Err(AppError::refused(
                ErrorCode::CredentialValuesDisabled,
                "credential values are not set through the API in this installation: only a \
                 development server started with --dev-credential-values and \
                 --mcp-credentials-file keeps them (in its secrets file); set the value with its \
                 provider instead (docs/CREDENTIALS.md)",
            ));
        }
        if !row.runner_ref.is_central() {
            return Err(AppError::refused(
                ErrorCode::ConnectionNotCentral,
                format!(
                    "connection `{}` runs on {}: set its values on that device with `switchyard \
                     credential set`",
                    row.name, row.runner_ref
                ),
            ));
        }
        let connector = self.db.connector_get(row.connector_id).await?;
        let target = ValueTarget::New {
            store: ValueStore::SecretsFile,
            prefix: req.prefix,
        };
        let site = self
            .credentials
            .set_value(row.id, &connector.spec(), name, &req.value, &target)
            .map_err(|error| {
                AppError::refused(
                    ErrorCode::InvalidCredentials,
                    format!(
                        "connection `{}`: {error} ({}); nothing was stored",
                        row.name,
                        error.code()
                    ),
                )
            })?;
        drop(req.value);
        let destination = match &site.destination {
            Destination::Env(_) => "env",
            Destination::Header(_) => "header",
        };
        let key = match &site.reference.source {
            Source::SecretsFile { key } => key.clone(),
            // `ValueStore::SecretsFile` binds a secrets-file key, nothing else.
            Source::Environment { name } | Source::OsStore { account: name } => name.clone(),
        };
        self.audit(
            Audit::by(actor, "connection.credential_set")
                .workspace(row.workspace_id)
                .connection(row.id)
                .object("connection", Some(row.id.0), &row.name)
                .after(json!({
                    "destination": destination,
                    "name": name,
                    "provider": CredentialProvider::SecretsFile.as_str(),
                })),
        )
        .await;
        Ok(CredentialValueSet {
            connection_id: row.id,
            destination: destination.to_owned(),
            name: name.to_owned(),
            reference: CredentialReference {
                provider: CredentialProvider::SecretsFile,
                name: None,
                account: None,
                key: Some(key),
                prefix: site.reference.prefix,
            },
        })
    }
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
            }
            wire
        }),
        state,
        code,
        reason,
    }
}
