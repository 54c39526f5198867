//! Connection namespaces: given or derived on create, checked, unique in a workspace, shown in
//! the view; and derived for connections that existed before migration 0021.

use crate::harness::*;
use serde_json::json;
use sqlx::PgPool;
use switchyard_server::db::MIGRATOR;
use uuid::Uuid;

async fn setup(server: &TestServer) {
    let owner = &server.owner;
    owner
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "fx", "transport": "stdio", "command": fixture_bin(), "args": ["stdio"]}),
        )
        .await
        .ok();
}

async fn create(server: &TestServer, body: serde_json::Value) -> Answer {
    server
        .owner
        .post("/api/v1/workspaces/acme/connections", body)
        .await
}

#[sqlx::test(migrations = "../../migrations")]
async fn namespaces_are_given_or_derived_checked_and_unique(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup(&server).await;
    let given = create(
        &server,
        json!({"name": "GitHub-Prod", "connector": "fx", "namespace": "gh"}),
    )
    .await
    .ok();
    assert_eq!(given["namespace"], "gh");
    let derived = create(&server, json!({"name": "GitHub-Prod.2", "connector": "fx"}))
        .await
        .ok();
    assert_eq!(derived["namespace"], "github_prod_2");
    // A derived slug already taken gets the first free suffix.
    create(&server, json!({"name": "files", "connector": "fx"}))
        .await
        .ok();
    let again = create(&server, json!({"name": "Files", "connector": "fx"}))
        .await
        .ok();
    assert_eq!(again["namespace"], "files_2");

    for bad in ["G", "Git-Hub", "a", "much_too_long_a_namespace_x"] {
        let message = create(
            &server,
            json!({"name": "bad", "connector": "fx", "namespace": bad}),
        )
        .await
        .refused(400, "invalid_namespace");
        assert!(message.contains("2–24 characters"), "{message}");
    }
    let message = create(
        &server,
        json!({"name": "other", "connector": "fx", "namespace": "gh"}),
    )
    .await
    .refused(409, "already_exists");
    assert!(message.contains("namespace `gh`"), "{message}");

    let list = server
        .owner
        .get("/api/v1/workspaces/acme/connections")
        .await
        .ok();
    let mut namespaces: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["namespace"].as_str().unwrap())
        .collect();
    namespaces.sort_unstable();
    assert_eq!(namespaces, ["files", "files_2", "gh", "github_prod_2"]);
    let one = server
        .owner
        .get("/api/v1/workspaces/acme/connections/gh")
        .await;
    // Namespaces are not names: the connection is found by its name only.
    one.refused(404, "connection_not_found");
}

#[sqlx::test(migrations = false)]
async fn migration_0021_derives_a_unique_namespace_for_existing_connections(pool: PgPool) {
    for migration in MIGRATOR.iter().filter(|m| m.version < 21) {
        sqlx::raw_sql(migration.sql.clone())
            .execute(&pool)
            .await
            .unwrap();
    }
    let user = Uuid::now_v7();
    let connector = Uuid::now_v7();
    let (acme, other) = (Uuid::now_v7(), Uuid::now_v7());
    sqlx::query("INSERT INTO users (id, name) VALUES ($1, 'u')")
        .bind(user)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO connectors (id, name, transport, url) VALUES ($1, 'k', 'http', 'https://example.test/mcp')")
        .bind(connector)
        .execute(&pool)
        .await
        .unwrap();
    for (id, name) in [(acme, "acme"), (other, "other")] {
        sqlx::query("INSERT INTO workspaces (id, name, created_by) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(name)
            .bind(user)
            .execute(&pool)
            .await
            .unwrap();
    }
    // In creation order: the oldest keeps the plain slug.
    let rows = [
        (acme, "GitHub"),
        (acme, "github"),
        (acme, "git-hub"),
        (acme, "git_hub"),
        (acme, "x"),
        (acme, "a-very-long-connection-name-indeed"),
        (acme, "a-very-long-connection-name-indeed-2"),
        (other, "github"),
    ];
    for (i, (workspace, name)) in rows.iter().enumerate() {
        sqlx::query(
            "INSERT INTO connections (id, workspace_id, name, connector_id, runner_ref, created_at)
             VALUES ($1, $2, $3, $4, 'central', now() + make_interval(secs => $5))",
        )
        .bind(Uuid::now_v7())
        .bind(workspace)
        .bind(name)
        .bind(connector)
        .bind(i as f64)
        .execute(&pool)
        .await
        .unwrap();
    }
    let migration = MIGRATOR.iter().find(|m| m.version == 21).unwrap();
    sqlx::raw_sql(migration.sql.clone())
        .execute(&pool)
        .await
        .unwrap();

    let derived: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT w.name, c.name, c.namespace FROM connections c
         JOIN workspaces w ON w.id = c.workspace_id ORDER BY c.created_at",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let derived: Vec<(&str, &str, &str)> = derived
        .iter()
        .map(|(w, c, n)| (w.as_str(), c.as_str(), n.as_str()))
        .collect();
    assert_eq!(
        derived,
        [
            ("acme", "GitHub", "github"),
            ("acme", "github", "github_2"),
            ("acme", "git-hub", "git_hub"),
            ("acme", "git_hub", "git_hub_2"),
            ("acme", "x", "x_"),
            (
                "acme",
                "a-very-long-connection-name-indeed",
                "a_very_long_connection_n"
            ),
            (
                "acme",
                "a-very-long-connection-name-indeed-2",
                "a_very_long_connection_2"
            ),
            ("other", "github", "github"),
        ]
    );
    // The column is now required, checked and unique per workspace.
    let duplicate =
        sqlx::query("UPDATE connections SET namespace = 'github' WHERE name = 'git-hub'")
            .execute(&pool)
            .await;
    assert!(duplicate.is_err());
    let malformed = sqlx::query("UPDATE connections SET namespace = 'Bad-Slug' WHERE name = 'x'")
        .execute(&pool)
        .await;
    assert!(malformed.is_err());
}
