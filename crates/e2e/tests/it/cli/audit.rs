//! `switchyard audit`: listing who changed what, exporting the log as JSON lines, and verifying
//! its chain — intact, then broken by a superuser who turned the table's refusal off, which
//! `audit verify` reports with exit 8, naming the entry.

use super::harness::{Server, set_up_demo};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// Exit code of `audit verify` on a broken chain.
const BROKEN: i32 = 8;

#[sqlx::test(migrations = false)]
async fn an_admin_lists_exports_and_verifies_the_audit_log(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let alice = server.cli();
    set_up_demo(&alice);

    let listed = alice.run(&["audit", "list", "demo"]).success().stdout;
    assert!(listed.contains("connection.created"), "{listed}");
    let exported = alice.run(&["audit", "export", "demo"]).success().stdout;
    let seqs: Vec<i64> = exported
        .lines()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line).unwrap()["seq"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(
        seqs,
        (1..=i64::try_from(seqs.len()).unwrap()).collect::<Vec<_>>(),
        "{exported}"
    );
    let intact = alice.run(&["audit", "verify", "demo"]).success().stdout;
    assert!(intact.starts_with("intact"), "{intact}");
    // The connectors live in the installation's own log, which its owner reads the same way.
    let installation = alice
        .run(&["audit", "list", "--installation"])
        .success()
        .stdout;
    assert!(installation.contains("connector.created"), "{installation}");
    assert!(
        !installation.contains("connection.created"),
        "{installation}"
    );
    let intact = alice
        .run(&["audit", "verify", "--installation"])
        .success()
        .stdout;
    assert!(intact.starts_with("intact"), "{intact}");

    let pool = PgPoolOptions::new().connect_with(db).await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE audit_log SET object_name = 'nothing to see' WHERE seq = 2
         AND chain = (SELECT id FROM workspaces WHERE name = 'demo')",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let broken = alice.run(&["audit", "verify", "demo"]).code(BROKEN).stderr;
    assert!(
        broken.contains("error[audit_broken]") && broken.contains("entry 2"),
        "{broken}"
    );
}
