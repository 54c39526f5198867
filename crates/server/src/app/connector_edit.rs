//! Changing a connector's transport or target (installation owners). Every change bumps the
//! connector's revision, so a stdio connector is inert again until an owner approves the new
//! command, and calls dispatched to the old target can no longer be reconciled by lookup.

use super::audit::spec_summary;
use super::{Actor, App, Audit, views};
use crate::error::AppResult;
use switchyard_protocol::api::*;

impl App {
    /// Replaces a connector's transport and target (owners only). The same spec again changes
    /// nothing. A new HTTP target is screened and must answer the MCP handshake, as when a
    /// connector is added; a refusal leaves the connector as it was.
    pub async fn connector_update(
        &self,
        actor: &Actor,
        key: &str,
        spec: ConnectorSpec,
    ) -> AppResult<ConnectorView> {
        self.require_owner(actor)?;
        let connector = self.find_connector(key).await?;
        super::connectors::validate_spec(&connector.name, &spec)?;
        if connector.spec() == spec {
            return Ok(views::connector(&connector));
        }
        self.screen_endpoint(&connector.name, &spec).await?;
        self.handshake_connector(&connector.name, &spec).await?;
        let row = self.db.connector_update(connector.id, &spec).await?;
        tracing::info!(connector = %row.name, revision = row.revision, "connector changed; it needs approval again if it runs a command");
        self.audit(
            Audit::by(actor, "connector.changed")
                .object("connector", Some(row.id.0), &row.name)
                .before(spec_summary(&connector))
                .after(spec_summary(&row)),
        )
        .await;
        Ok(views::connector(&row))
    }
}
