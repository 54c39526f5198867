//! Retiring and restoring connectors, connections and profiles. A retired object runs nothing:
//! retiring fails its queued and leased calls in the transaction that retires it, the submit
//! read refuses new calls (`db/submit.rs`), and the start ack refuses any call that slipped in
//! between ([`retired_code`], used by `db/calls/start.rs`). Running calls are left to finish.
//! Nothing is deleted; who retired or restored what, and when, is recorded in
//! `access_changes`.

use super::access_changes::{AccessAction, record};
use super::{Committed, Datastore, Wakeup};
use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::PgConnection;
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{
    CallId, ConnectionId, ConnectorId, ErrorCode, ProfileId, RunnerRef, UserId, WorkspaceId,
};

/// What is retired or restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retirable {
    /// An installation-wide connector, and so every connection of it.
    Connector(ConnectorId),
    /// A connection of a workspace, and its tools.
    Connection(WorkspaceId, ConnectionId),
    /// A profile of a workspace.
    Profile(WorkspaceId, ProfileId),
}

impl Retirable {
    /// The code a call refused because of it fails with.
    pub fn code(self) -> ErrorCode {
        match self {
            Retirable::Connector(_) => ErrorCode::ConnectorRetired,
            Retirable::Connection(..) => ErrorCode::ConnectionRetired,
            Retirable::Profile(..) => ErrorCode::ProfileRetired,
        }
    }

    fn workspace(self) -> Option<WorkspaceId> {
        match self {
            Retirable::Connector(_) => None,
            Retirable::Connection(ws, _) | Retirable::Profile(ws, _) => Some(ws),
        }
    }

    fn subject(self) -> serde_json::Value {
        match self {
            Retirable::Connector(id) => json!({"connector_id": id}),
            Retirable::Connection(_, id) => json!({"connection_id": id}),
            Retirable::Profile(_, id) => json!({"profile_id": id}),
        }
    }

    fn actions(self) -> (AccessAction, AccessAction) {
        match self {
            Retirable::Connector(_) => (
                AccessAction::ConnectorRetired,
                AccessAction::ConnectorRestored,
            ),
            Retirable::Connection(..) => (
                AccessAction::ConnectionRetired,
                AccessAction::ConnectionRestored,
            ),
            Retirable::Profile(..) => (AccessAction::ProfileRetired, AccessAction::ProfileRestored),
        }
    }
}

/// What retiring changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retired {
    /// False when it was retired already: nothing changed.
    pub changed: bool,
    /// The queued and leased calls failed with it.
    pub failed_calls: Vec<CallId>,
}

/// SQL: the code a call (`calls` row `c`) fails with because its connection, its connector or
/// its profile is retired — in that order — or NULL while all three are in service. Three
/// primary-key lookups.
pub(super) fn retired_code(c: &str) -> String {
    format!(
        "(SELECT CASE WHEN k.retired_at IS NOT NULL THEN 'connection_retired'
                      WHEN x.retired_at IS NOT NULL THEN 'connector_retired'
                      WHEN p.retired_at IS NOT NULL THEN 'profile_retired' END
          FROM connections k JOIN connectors x ON x.id = k.connector_id
               JOIN profiles p ON p.id = {c}.profile_id
          WHERE k.id = {c}.connection_id)"
    )
}

/// The message stored beside a call failed with a retirement code.
const RETIRED_MESSAGE: &str =
    "not run: its connection, connector or profile was retired before it was sent";

/// Sets `retired_at` and `retired_by` on the row (when it is not retired already), or clears
/// them (when it is). Returns whether it changed.
async fn mark(
    conn: &mut PgConnection,
    target: Retirable,
    by: UserId,
    retire: bool,
) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    macro_rules! marking {
        ($table:literal) => {
            (
                concat!(
                    "UPDATE ",
                    $table,
                    " SET retired_at = now(), retired_by = $2 WHERE id = $1 AND retired_at IS NULL RETURNING now()"
                ),
                concat!(
                    "UPDATE ",
                    $table,
                    " SET retired_at = NULL, retired_by = NULL WHERE id = $1 AND retired_at IS NOT NULL RETURNING now()"
                ),
            )
        };
    }
    let (id, (retiring, restoring)) = match target {
        Retirable::Connector(id) => (id.0, marking!("connectors")),
        Retirable::Connection(_, id) => (id.0, marking!("connections")),
        Retirable::Profile(_, id) => (id.0, marking!("profiles")),
    };
    let statement = if retire { retiring } else { restoring };
    sqlx::query_scalar(statement)
        .bind(id)
        .bind(by)
        .fetch_optional(conn)
        .await
}

impl Datastore {
    /// Retires `target` for `by`, in one transaction: marks it, retires a connection's tools,
    /// fails its queued and leased calls (nothing was sent for them; a running call is left to
    /// finish) and records the change. Retiring what is retired already changes nothing.
    pub async fn retire(
        &self,
        target: Retirable,
        by: UserId,
    ) -> Result<Committed<Retired>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let Some(at) = mark(&mut tx, target, by, true).await? else {
            return Ok(Committed::new(Retired::default()));
        };
        let code = target.code().as_str();
        // The queued and leased calls it names: nothing was sent for them.
        macro_rules! fail_calls_where {
            ($calls:literal) => {
                concat!(
                    "UPDATE calls SET state = 'failed', finished_at = now(), error_code = $2, error_message = $3
                     WHERE ",
                    $calls,
                    " AND state IN ('queued', 'leased') AND finished_at IS NULL RETURNING id"
                )
            };
        }
        let (fail, id) = match target {
            Retirable::Connector(id) => (
                fail_calls_where!(
                    "connection_id IN (SELECT id FROM connections WHERE connector_id = $1)"
                ),
                id.0,
            ),
            Retirable::Connection(_, id) => {
                sqlx::query("UPDATE tools SET retired_at = $2 WHERE connection_id = $1")
                    .bind(id)
                    .bind(at)
                    .execute(&mut *tx)
                    .await?;
                (fail_calls_where!("connection_id = $1"), id.0)
            }
            Retirable::Profile(_, id) => (fail_calls_where!("profile_id = $1"), id.0),
        };
        let failed_calls: Vec<CallId> = sqlx::query_scalar(fail)
            .bind(id)
            .bind(code)
            .bind(RETIRED_MESSAGE)
            .fetch_all(&mut *tx)
            .await?;
        let mut subject = target.subject();
        subject["failed_calls"] = json!(failed_calls.len());
        record(
            &mut tx,
            Some(by),
            target.actions().0,
            target.workspace(),
            subject,
        )
        .await?;
        tx.commit().await?;
        let wakeups = failed_calls
            .iter()
            .map(|&call| Wakeup::Settled {
                call,
                recorded: None,
            })
            .collect();
        Ok(Committed {
            value: Retired {
                changed: true,
                failed_calls,
            },
            wakeups,
        })
    }

    /// Restores a retired `target` for `by`, in one transaction, and records it. A restored
    /// connection's tools come back unusable: unclassified (their classification cleared),
    /// and every profile that includes the connection grants an empty set of its tools until
    /// someone sets them again. Returns whether it
    /// changed (restoring what is in service changes nothing).
    pub async fn restore(&self, target: Retirable, by: UserId) -> Result<bool, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        if mark(&mut tx, target, by, false).await?.is_none() {
            return Ok(false);
        }
        if let Retirable::Connection(_, id) = target {
            // Back unclassified: each must be classified again before it runs.
            sqlx::query(
                "UPDATE tools SET retired_at = NULL, side_effect = NULL, risk = NULL,
                     classified_by = NULL, classified_at = NULL, needs_review = false
                 WHERE connection_id = $1",
            )
            .bind(id)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE profile_connections SET tools = '{}', changed_by = $2, changed_at = now()
                 WHERE connection_id = $1",
            )
            .bind(id)
            .bind(by)
            .execute(&mut *tx)
            .await?;
        }
        record(
            &mut tx,
            Some(by),
            target.actions().1,
            target.workspace(),
            target.subject(),
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Fails a call leased under `epoch` whose start ack was refused because its connection,
    /// connector or profile is retired (see [`retired_code`]): `leased` → `failed` with that
    /// code, nothing was sent. Returns the code, or `None` when the call is not such a call.
    pub async fn call_fail_retired(
        &self,
        id: CallId,
        runner: RunnerRef,
        epoch: Epoch,
    ) -> Result<Committed<Option<String>>, sqlx::Error> {
        static STATEMENT: std::sync::LazyLock<std::sync::Arc<str>> =
            std::sync::LazyLock::new(|| {
                format!(
                    "UPDATE calls c SET state = 'failed', finished_at = now(),
                         error_code = {code}, error_message = $4
                     WHERE c.id = $1 AND c.state = 'leased' AND c.runner_ref = $2
                       AND c.lease_epoch = $3 AND {code} IS NOT NULL
                     RETURNING c.error_code",
                    code = retired_code("c"),
                )
                .into()
            });
        let code: Option<String> = sqlx::query_scalar(super::sql::text(&STATEMENT))
            .bind(id)
            .bind(runner)
            .bind(epoch)
            .bind(RETIRED_MESSAGE)
            .fetch_optional(&self.pool)
            .await?;
        let settled = code.is_some();
        Ok(Committed::new(code).waking_if(
            settled,
            Wakeup::Settled {
                call: id,
                recorded: None,
            },
        ))
    }
}
