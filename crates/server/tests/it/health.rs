use crate::harness::TestServer;
use sqlx::PgPool;

#[sqlx::test(migrations = "../../migrations")]
async fn health_and_readiness(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let anon = server.anonymous();
    assert_eq!(anon.get("/healthz").await.ok()["status"], "ok");
    assert_eq!(anon.get("/readyz").await.ok()["status"], "ready");
    server.stop().await;
}

#[sqlx::test(migrations = false)]
async fn not_ready_without_migrations(pool: PgPool) {
    sqlx::query("CREATE TABLE _sqlx_migrations (version bigint, success boolean)")
        .execute(&pool)
        .await
        .unwrap();
    let reason = switchyard_server::db::Datastore::new(pool)
        .readiness()
        .await
        .unwrap_err();
    assert!(reason.contains("switchyard-server migrate"), "{reason}");
}
