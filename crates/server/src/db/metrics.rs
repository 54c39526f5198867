//! What `/metrics` reads at scrape time: the calls in each active state (from the queue's
//! partial indexes, so the cost follows the active calls, not the table), devices' last sight,
//! and connection namespaces. Never read on the call path.

use super::Datastore;
use chrono::{DateTime, Utc};
use switchyard_protocol::{ConnectionId, DeviceId};

/// The calls of one active state and placement.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ActiveCalls {
    /// `awaiting_approval`, `queued`, `leased` or `running`.
    pub state: String,
    /// Placed on the central runner (else on a device).
    pub central: bool,
    /// How many.
    pub count: i64,
    /// Seconds since the oldest of them was submitted.
    pub oldest_seconds: f64,
}

/// A device that is not revoked, and when it was last seen.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct DeviceSeen {
    /// The device.
    pub id: DeviceId,
    /// Its last request, as written (at most every 30 s).
    pub last_seen_at: Option<DateTime<Utc>>,
}

/// A connection's namespace.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ConnectionName {
    /// The connection.
    pub id: ConnectionId,
    /// Its namespace (a slug).
    pub namespace: String,
}

impl Datastore {
    /// The calls in each active state, by placement. Each arm names the predicate of the
    /// partial index that answers it (`calls_queued`, `calls_in_flight`, `calls_awaiting`).
    pub async fn metrics_active_calls(&self) -> Result<Vec<ActiveCalls>, sqlx::Error> {
        sqlx::query_as(
            "SELECT state, central, count(*) AS count,
                 COALESCE(extract(epoch FROM now() - min(created_at)), 0)::float8 AS oldest_seconds
             FROM (
                 SELECT 'queued' AS state, runner_ref = 'central' AS central, created_at FROM calls
                 WHERE lease_epoch IS NULL AND finished_at IS NULL AND NOT approval_held
                 UNION ALL
                 SELECT state, runner_ref = 'central', created_at FROM calls
                 WHERE lease_epoch IS NOT NULL AND finished_at IS NULL
                 UNION ALL
                 SELECT 'awaiting_approval', runner_ref = 'central', created_at FROM calls
                 WHERE approval_held
             ) active
             GROUP BY state, central",
        )
        .fetch_all(&self.pool)
        .await
    }

    /// Devices that are not revoked, with their last sight.
    pub async fn metrics_devices(&self) -> Result<Vec<DeviceSeen>, sqlx::Error> {
        sqlx::query_as("SELECT id, last_seen_at FROM devices WHERE revoked_at IS NULL")
            .fetch_all(&self.pool)
            .await
    }

    /// Every connection's namespace.
    pub async fn metrics_connection_names(&self) -> Result<Vec<ConnectionName>, sqlx::Error> {
        sqlx::query_as("SELECT id, namespace FROM connections")
            .fetch_all(&self.pool)
            .await
    }
}
