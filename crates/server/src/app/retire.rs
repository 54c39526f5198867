//! Retiring and restoring connectors, connections and profiles, by whoever may create them:
//! an installation owner for connectors, a workspace admin for connections and profiles.
//!
//! A retired object runs nothing and accepts nothing new: its queued and leased calls fail
//! with `connector_retired`, `connection_retired` or `profile_retired`, submissions are refused
//! with that code, and a start ack that finds it retired fails the call instead (the one gate
//! both the central runner and device runners pass). A running call is left to finish. It
//! stays listed and readable, with every call, event and result that names it.
//!
//! Retiring a connection empties the credentials the server keeps for it
//! ([`App::credentials_empty`]): its sealed values and every holder's OAuth grant. Its
//! credential bindings (references, in a runner's bindings file on the runner's host) stay
//! where they are.

use super::{Actor, App, Audit, views};
use crate::db::{ConnectionRow, ConnectorRow, ProfileRow, Retirable, Retired};
use crate::error::AppResult;
use serde_json::json;
use switchyard_protocol::api::*;
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{CallId, CallState, ErrorCode, RunnerRef};

impl App {
    /// Retires a connection and its tools (workspace admins only); the server empties the
    /// credentials it keeps for the connection: its sealed values and every OAuth grant.
    pub async fn connection_retire(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
    ) -> AppResult<ConnectionView> {
        let membership = self.admin_membership(actor, ws).await?;
        let connection = self.find_connection(membership.workspace.id, key).await?;
        let target = Retirable::Connection(membership.workspace.id, connection.id);
        let changed = self.retire(target, actor).await?.changed;
        // A retired connection forgets the credentials the server keeps for it. Run on every
        // retire, so that a retire cut off before or during this is finished by the next one.
        let emptied = self.credentials_empty(connection.id).await?;
        if changed {
            self.audit(
                Audit::by(actor, "connection.retired")
                    .workspace(membership.workspace.id)
                    .connection(connection.id)
                    .object("connection", Some(connection.id.0), &connection.name)
                    .before(json!({"retired": false}))
                    .after(
                        json!({"retired": true, "credential_values_deleted": emptied.values,
                        "oauth_grants_deleted": emptied.grants}),
                    ),
            )
            .await;
        }
        Ok(views::connection(
            &self.db.connection_get(connection.id).await?,
        ))
    }

    /// Restores a retired connection (workspace admins only). Its tools come back unusable:
    /// every profile that includes it grants none of them until `set-tools` names them.
    pub async fn connection_restore(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
    ) -> AppResult<ConnectionView> {
        let membership = self.admin_membership(actor, ws).await?;
        let connection = self.find_connection(membership.workspace.id, key).await?;
        let target = Retirable::Connection(membership.workspace.id, connection.id);
        if self.db.restore(target, actor.user.id).await? {
            self.audit(
                Audit::by(actor, "connection.restored")
                    .workspace(membership.workspace.id)
                    .connection(connection.id)
                    .object("connection", Some(connection.id.0), &connection.name)
                    .before(json!({"retired": true}))
                    .after(json!({"retired": false})),
            )
            .await;
        }
        Ok(views::connection(
            &self.db.connection_get(connection.id).await?,
        ))
    }

    /// Retires a connector, and so every connection of it (installation owners only).
    pub async fn connector_retire(&self, actor: &Actor, key: &str) -> AppResult<ConnectorView> {
        self.require_owner(actor)?;
        let connector = self.find_connector(key).await?;
        if self
            .retire(Retirable::Connector(connector.id), actor)
            .await?
            .changed
        {
            self.audit(
                Audit::by(actor, "connector.retired")
                    .object("connector", Some(connector.id.0), &connector.name)
                    .before(json!({"retired": false}))
                    .after(json!({"retired": true})),
            )
            .await;
        }
        Ok(views::connector(
            &self.db.connector_get(connector.id).await?,
        ))
    }

    /// Restores a retired connector (installation owners only).
    pub async fn connector_restore(&self, actor: &Actor, key: &str) -> AppResult<ConnectorView> {
        self.require_owner(actor)?;
        let connector = self.find_connector(key).await?;
        if self
            .db
            .restore(Retirable::Connector(connector.id), actor.user.id)
            .await?
        {
            self.audit(
                Audit::by(actor, "connector.restored")
                    .object("connector", Some(connector.id.0), &connector.name)
                    .before(json!({"retired": true}))
                    .after(json!({"retired": false})),
            )
            .await;
        }
        Ok(views::connector(
            &self.db.connector_get(connector.id).await?,
        ))
    }

    /// Retires a profile (workspace admins only): nothing is submitted through it; its grants
    /// stay, inert.
    pub async fn profile_retire(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
    ) -> AppResult<ProfileView> {
        let membership = self.admin_membership(actor, ws).await?;
        let profile = self.find_profile(membership.workspace.id, key).await?;
        let retired = self
            .retire(
                Retirable::Profile(membership.workspace.id, profile.id),
                actor,
            )
            .await?;
        if retired.changed {
            self.audit(
                Audit::by(actor, "profile.retired")
                    .workspace(membership.workspace.id)
                    .object("profile", Some(profile.id.0), &profile.name)
                    .before(json!({"retired": false}))
                    .after(json!({"retired": true})),
            )
            .await;
        }
        let profile = self.db.profile_get(profile.id).await?;
        self.profile_view(&profile).await
    }

    /// Restores a retired profile (workspace admins only).
    pub async fn profile_restore(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
    ) -> AppResult<ProfileView> {
        let membership = self.admin_membership(actor, ws).await?;
        let profile = self.find_profile(membership.workspace.id, key).await?;
        if self
            .db
            .restore(
                Retirable::Profile(membership.workspace.id, profile.id),
                actor.user.id,
            )
            .await?
        {
            self.audit(
                Audit::by(actor, "profile.restored")
                    .workspace(membership.workspace.id)
                    .object("profile", Some(profile.id.0), &profile.name)
                    .before(json!({"retired": true}))
                    .after(json!({"retired": false})),
            )
            .await;
        }
        let profile = self.db.profile_get(profile.id).await?;
        self.profile_view(&profile).await
    }

    async fn retire(&self, target: Retirable, actor: &Actor) -> AppResult<Retired> {
        let retired = self.sent(self.db.retire(target, actor.user.id).await?);
        let failed = retired.failed_calls.len() as u64;
        self.metrics.calls_finished(CallState::Failed, failed);
        if retired.changed {
            tracing::info!(?target, by = %actor.user.name, failed_calls = retired.failed_calls.len(), "retired");
        }
        Ok(retired)
    }

    /// After a start ack that did not start call `id`: fails it if it was refused because its
    /// connection, connector or profile is retired, and returns why (the runner abandons it;
    /// nothing was sent). `None` when that is not why.
    pub(crate) async fn call_fail_retired(
        &self,
        id: CallId,
        runner: RunnerRef,
        epoch: Epoch,
    ) -> AppResult<Option<String>> {
        let code = self
            .sent(self.db.call_fail_retired(id, runner, epoch).await?)
            .map(|code| {
                self.metrics.calls_finished(CallState::Failed, 1);
                format!(
                    "{code}: its connection, connector or profile was retired; nothing was sent"
                )
            });
        Ok(code)
    }
}

/// Refuses to run anything on `connection` (of `connector`; through `profile`, when there is
/// one) while any of them is retired, naming them in the order the start ack does.
pub(crate) fn require_in_service(
    connection: Option<&ConnectionRow>,
    connector: &ConnectorRow,
    profile: Option<&ProfileRow>,
) -> AppResult<()> {
    if let Some(connection) = connection.filter(|c| c.retired_at.is_some()) {
        return Err(refused_retired(
            ErrorCode::ConnectionRetired,
            &connection.name,
        ));
    }
    if connector.retired_at.is_some() {
        return Err(refused_retired(
            ErrorCode::ConnectorRetired,
            &connector.name,
        ));
    }
    if let Some(profile) = profile.filter(|p| p.retired_at.is_some()) {
        return Err(refused_retired(ErrorCode::ProfileRetired, &profile.name));
    }
    Ok(())
}

/// The refusal of a submission through a retired object.
pub(crate) fn refused_retired(code: ErrorCode, name: &str) -> crate::error::AppError {
    let what = match code {
        ErrorCode::ConnectorRetired => "connector",
        ErrorCode::ProfileRetired => "profile",
        _ => "connection",
    };
    crate::error::AppError::refused(
        code,
        format!(
            "{what} `{name}` is retired and runs nothing; a workspace admin (an installation owner for a connector) may `restore` it"
        ),
    )
}
