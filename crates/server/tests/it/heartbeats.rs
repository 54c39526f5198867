//! Heartbeats kept in memory. An idle device heartbeat writes nothing by itself: each server
//! process holds the renewals it answered and writes them in batches (in these tests, whose
//! flush interval is longer than the test, when it stops), never reviving a lease that was
//! released, revoked or taken over in between. A stale epoch is refused at once by every
//! replica, and a lease with less than half its length left is renewed at once.

use crate::devices::*;
use crate::harness::*;
use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::PgPool;
use std::time::Duration;
use switchyard_server::serve::ServeConfig;
use uuid::Uuid;

/// A lease long enough, and a flush interval long enough (a quarter of it), that nothing is
/// flushed before the server stops.
fn flush_at_stop(config: &mut ServeConfig) {
    config.app.runner_lease_ttl = Duration::from_secs(3600);
    config.sweeper.heartbeat_flush = Duration::from_secs(900);
}

/// The lease row as PostgreSQL holds it; `version` (the row's `xmin`) changes at every write.
#[derive(Debug, PartialEq, sqlx::FromRow)]
struct LeaseRow {
    version: String,
    epoch: i64,
    expires_at: DateTime<Utc>,
}

async fn lease_row(pool: &PgPool, runner: &str) -> LeaseRow {
    sqlx::query_as(
        "SELECT xmin::text AS version, epoch, expires_at FROM runner_leases WHERE runner_ref = $1",
    )
    .bind(runner)
    .fetch_one(pool)
    .await
    .expect("the lease row")
}

async fn last_seen(pool: &PgPool, device: &Device) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT last_seen_at FROM devices WHERE id = $1::uuid")
        .bind(&device.id)
        .fetch_one(pool)
        .await
        .expect("the device row")
}

async fn heartbeat(device: &Device, epoch: i64) -> Answer {
    device
        .client
        .post(
            "/api/v1/runner/heartbeat",
            json!({"epoch": epoch, "active": []}),
        )
        .await
}

#[sqlx::test(migrations = "../../migrations")]
async fn idle_heartbeats_write_nothing_until_the_flush(pool: PgPool) {
    let server = TestServer::start_with(pool.clone(), flush_at_stop).await;
    setup_workspace(&server, "acme", &[]).await;
    let device = pair_device(&server, "acme", "main").await;
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    // The device was last seen an hour ago, as far as the database knows.
    sqlx::query("UPDATE devices SET last_seen_at = now() - interval '1 hour' WHERE id = $1::uuid")
        .bind(&device.id)
        .execute(&pool)
        .await
        .unwrap();
    let seen_before = last_seen(&pool, &device).await;
    let before = lease_row(&pool, &device.runner).await;

    for _ in 0..20 {
        assert_eq!(
            heartbeat(&device, epoch).await.ok(),
            json!({"cancel": [], "release": []})
        );
    }
    assert_eq!(
        lease_row(&pool, &device.runner).await,
        before,
        "a heartbeat rewrote the lease row"
    );
    assert_eq!(
        last_seen(&pool, &device).await,
        seen_before,
        "a request wrote last_seen_at"
    );

    // Stopping writes what the server held: one new version of the lease row, renewed from the
    // last heartbeat, and the device's sighting.
    server.stop().await;
    let after = lease_row(&pool, &device.runner).await;
    assert_ne!(after.version, before.version);
    assert_eq!(after.epoch, epoch);
    assert!(
        after.expires_at > before.expires_at,
        "{after:?} is not later than {before:?}"
    );
    assert!(last_seen(&pool, &device).await > seen_before);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_lease_with_less_than_half_its_length_left_is_renewed_at_once(pool: PgPool) {
    let server = TestServer::start_with(pool.clone(), flush_at_stop).await;
    setup_workspace(&server, "acme", &[]).await;
    let device = pair_device(&server, "acme", "main").await;
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    sqlx::query(
        "UPDATE runner_leases SET expires_at = now() + interval '20 minutes' WHERE runner_ref = $1",
    )
    .bind(&device.runner)
    .execute(&pool)
    .await
    .unwrap();
    heartbeat(&device, epoch).await.ok();
    let left: f64 = sqlx::query_scalar("SELECT EXTRACT(EPOCH FROM expires_at - now())::float8 FROM runner_leases WHERE runner_ref = $1")
        .bind(&device.runner)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(
        left > 50.0 * 60.0,
        "the lease was not renewed for an hour at once: {left} s left"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn replicas_refuse_a_stale_epoch_at_once_and_their_late_flushes_change_nothing(pool: PgPool) {
    let a = TestServer::start_with(pool.clone(), flush_at_stop).await;
    let b = TestServer::replica_with(&a, flush_at_stop).await;
    setup_workspace(&a, "acme", &[]).await;
    let on_a = pair_device(&a, "acme", "main").await;
    let on_b = Device {
        id: on_a.id.clone(),
        runner: on_a.runner.clone(),
        credential: on_a.credential.clone(),
        client: client_with(&b, &on_a.credential),
    };
    let old = acquire_lease(&on_a, Uuid::new_v4()).await;
    heartbeat(&on_a, old).await.ok();
    heartbeat(&on_b, old).await.ok();

    // The process gives its lease up through B, and another one takes the runner over
    // through A. Both replicas refuse the old epoch at once, whatever they hold in memory.
    let released = on_b
        .client
        .post("/api/v1/runner/lease/release", json!({"epoch": old}))
        .await;
    assert_eq!(released.status.as_u16(), 204);
    heartbeat(&on_a, old).await.refused(409, "runner_fenced");
    heartbeat(&on_b, old).await.refused(409, "runner_fenced");
    let new = acquire_lease(&on_a, Uuid::new_v4()).await;
    assert!(new > old);
    heartbeat(&on_b, old).await.refused(409, "runner_fenced");
    let taken_over = lease_row(&pool, &on_a.runner).await;

    // Each replica flushes the old epoch's renewals it held: the new lease is untouched.
    b.stop().await;
    a.stop().await;
    assert_eq!(lease_row(&pool, &on_a.runner).await, taken_over);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_revoked_devices_renewals_do_not_revive_its_lease(pool: PgPool) {
    let server = TestServer::start_with(pool.clone(), flush_at_stop).await;
    setup_workspace(&server, "acme", &[]).await;
    let device = pair_device(&server, "acme", "main").await;
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    heartbeat(&device, epoch).await.ok();

    server
        .owner
        .post(
            &format!("/api/v1/workspaces/acme/devices/{}/revoke", device.id),
            json!({}),
        )
        .await
        .ok();
    heartbeat(&device, epoch)
        .await
        .refused(401, "device_revoked");
    let revoked = lease_row(&pool, &device.runner).await;
    server.stop().await;
    let after = lease_row(&pool, &device.runner).await;
    assert_eq!(after, revoked);
    let live: bool =
        sqlx::query_scalar("SELECT expires_at > now() FROM runner_leases WHERE runner_ref = $1")
            .bind(&device.runner)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(!live, "the revoked device's lease is live again");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_heartbeat_with_an_unknown_credential_is_refused(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let device = pair_device(&server, "acme", "main").await;
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    let stranger = Device {
        client: client_with(&server, "sy_dev_not-a-credential"),
        ..device
    };
    heartbeat(&stranger, epoch)
        .await
        .refused(401, "unauthenticated");
}
