//! Placements: a device owner's decision on a connection placed on their device
//! (`migrations/0016_placements.sql`). No row is a pending placement; a row is the owner's last
//! decision, accepted for one spec digest or declined. Whether an accepted placement still
//! holds is computed against the connector's spec as it is now ([`Consent::of`]).

use super::connectors::spec_of;
use super::{Datastore, Key};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use sqlx::types::Json;
use switchyard_protocol::api::{ConnectorSpec, PlacementState, SpecDigest};
use switchyard_protocol::{ConnectionId, DeviceId, UserId, WorkspaceId};

/// SQL: the spec of the connector `x` as one `jsonb` array, read back as [`SpecColumns`].
macro_rules! spec_array {
    () => {
        "jsonb_build_array(x.transport, x.command, x.args, x.env_names, x.url)"
    };
}
pub(super) use spec_array;

/// A connector's spec as `spec_array!` reads it: transport, command, arguments, variable
/// names, URL.
#[derive(Clone, Debug, Deserialize)]
pub struct SpecColumns(
    String,
    Option<String>,
    Vec<String>,
    Vec<String>,
    Option<String>,
);

impl SpecColumns {
    /// The spec.
    pub fn spec(&self) -> ConnectorSpec {
        let SpecColumns(transport, command, args, env, url) = self;
        spec_of(transport, command.as_deref(), args, env, url.as_deref())
    }
}

/// Whether a connection placed on a device may run there now, as far as its owner's consent
/// goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Consent {
    /// Accepted for the connector's current spec.
    Accepted,
    /// Never accepted, or declined.
    Pending,
    /// Accepted for another spec: the connector was edited since.
    SpecChanged,
}

impl Consent {
    /// The consent a placement whose owner accepted `accepted` (`None`: never, or declined)
    /// gives the connector's current `spec`.
    pub fn of(spec: &ConnectorSpec, accepted: Option<&SpecDigest>) -> Consent {
        match accepted {
            None => Consent::Pending,
            Some(accepted) if *accepted == spec.digest() => Consent::Accepted,
            Some(_) => Consent::SpecChanged,
        }
    }
}

/// A connection placed on a device, with its owner's last decision.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct PlacementRow {
    /// The device.
    pub device_id: DeviceId,
    /// Its name.
    pub device_name: String,
    /// The connection.
    pub connection_id: ConnectionId,
    /// Its name.
    pub connection_name: String,
    /// Its connector's name.
    pub connector_name: String,
    /// The connector's spec now.
    pub spec: Json<SpecColumns>,
    /// `accepted`, `declined`, or `None`: never decided.
    pub state: Option<String>,
    /// The digest accepted, when accepted.
    pub spec_digest: Option<SpecDigest>,
    /// Who decided.
    pub decided_by: Option<UserId>,
    /// When.
    pub decided_at: Option<DateTime<Utc>>,
}

impl PlacementRow {
    /// Where the placement stands for the connector's current spec.
    pub fn state(&self) -> PlacementState {
        match Consent::of(&self.spec.0.spec(), self.spec_digest.as_ref()) {
            Consent::Accepted => PlacementState::Accepted,
            Consent::SpecChanged => PlacementState::SpecChanged,
            Consent::Pending if self.state.as_deref() == Some("declined") => {
                PlacementState::Declined
            }
            Consent::Pending => PlacementState::Pending,
        }
    }
}

/// An owner's decision on a placement.
#[derive(Clone, Debug)]
pub enum Decision {
    /// Run the connection on the device while its spec has this digest.
    Accept(SpecDigest),
    /// Do not run it.
    Decline,
}

/// `SELECT` of the connections placed on unrevoked devices of a workspace (`$1`) whose owner
/// is `$2`, with their decisions, followed by the given clauses.
macro_rules! select_placement {
    ($clauses:literal) => {
        concat!(
            "SELECT d.id AS device_id, d.name AS device_name, cn.id AS connection_id,
                 cn.name AS connection_name, x.name AS connector_name,
                 ",
            spec_array!(),
            " AS spec, pl.state, pl.spec_digest, pl.decided_by, pl.decided_at
             FROM connections cn
             JOIN devices d ON d.id = cn.runner_device_id AND d.workspace_id = cn.workspace_id
             JOIN connectors x ON x.id = cn.connector_id
             LEFT JOIN placements pl ON pl.connection_id = cn.id AND pl.device_id = d.id
             WHERE cn.workspace_id = $1 AND d.approved_by = $2 AND d.revoked_at IS NULL ",
            $clauses
        )
    };
}

impl Datastore {
    /// The connections placed on the unrevoked devices of `workspace` that `owner` approved,
    /// by device and connection name.
    pub async fn placement_list(
        &self,
        workspace: WorkspaceId,
        owner: UserId,
    ) -> Result<Vec<PlacementRow>, sqlx::Error> {
        sqlx::query_as(select_placement!("ORDER BY d.name, d.id, cn.name"))
            .bind(workspace)
            .bind(owner)
            .fetch_all(&self.pool)
            .await
    }

    /// The connection `connection` (id or name) placed on `device`, an unrevoked device of
    /// `workspace` that `owner` approved.
    pub async fn placement_find(
        &self,
        workspace: WorkspaceId,
        owner: UserId,
        device: DeviceId,
        connection: &Key<'_>,
    ) -> Result<Option<PlacementRow>, sqlx::Error> {
        sqlx::query_as(select_placement!(
            "AND d.id = $3 AND (cn.id = $4 OR cn.name = $5)"
        ))
        .bind(workspace)
        .bind(owner)
        .bind(device)
        .bind(connection.id())
        .bind(connection.name())
        .fetch_optional(&self.pool)
        .await
    }

    /// Records `owner`'s decision on `connection`, placed on `device` (of `workspace`), in one
    /// statement that also checks that the connection is placed there and that the device is
    /// unrevoked and `owner`'s. False when it is not (nothing is written).
    pub async fn placement_decide(
        &self,
        workspace: WorkspaceId,
        owner: UserId,
        device: DeviceId,
        connection: ConnectionId,
        decision: &Decision,
    ) -> Result<bool, sqlx::Error> {
        let (state, digest) = match decision {
            Decision::Accept(digest) => ("accepted", Some(digest)),
            Decision::Decline => ("declined", None),
        };
        let done = sqlx::query(
            "INSERT INTO placements (connection_id, device_id, state, spec_digest, decided_by)
             SELECT cn.id, d.id, $5, $6, d.approved_by
             FROM connections cn JOIN devices d ON d.id = cn.runner_device_id
             WHERE cn.workspace_id = $1 AND d.workspace_id = $1 AND d.approved_by = $2
               AND d.id = $3 AND cn.id = $4 AND d.revoked_at IS NULL
             ON CONFLICT (connection_id) DO UPDATE SET device_id = EXCLUDED.device_id,
                 state = EXCLUDED.state, spec_digest = EXCLUDED.spec_digest,
                 decided_by = EXCLUDED.decided_by, decided_at = now()",
        )
        .bind(workspace)
        .bind(owner)
        .bind(device)
        .bind(connection)
        .bind(state)
        .bind(digest)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}
