//! Taking access away through the CLI: personal API tokens, an operator's cut-off on the
//! server's host, a member removed and a grant revoked.

use super::harness::{Server, call_and_wait, set_up_demo, submit_call};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// Exit code of a run that was not authenticated.
const NOT_AUTHENTICATED: i32 = 3;

#[sqlx::test(migrations = false)]
async fn a_user_creates_and_revokes_a_token_with_the_cli(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();

    let created = cli
        .run(&["token", "create", "ci", "--expires-in", "90d"])
        .success();
    let secret = created.stdout.trim_end().to_owned();
    assert!(
        secret.starts_with("sy_") && !secret.contains(char::is_whitespace),
        "the secret alone on stdout: {:?}",
        created.stdout
    );
    assert!(
        created.stderr.contains("created token ci"),
        "{}",
        created.stderr
    );
    assert!(!created.stderr.contains(&secret), "{}", created.stderr);

    let ci = cli.with_token(Some(&secret));
    ci.run(&["workspace", "list"]).success();

    let listed = cli.run(&["--json", "token", "list"]).success().json();
    let tokens = listed.as_array().expect("a list");
    assert_eq!(tokens.len(), 2, "{listed}");
    let ci_token = tokens
        .iter()
        .find(|t| t["name"] == "ci")
        .expect("ci listed");
    assert!(ci_token["expires_at"].is_string(), "{listed}");
    assert!(!listed.to_string().contains(&secret), "{listed}");
    let table = cli.run(&["token", "list"]).success().stdout;
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("initial") && table.contains("ci"), "{table}");

    let id = ci_token["id"].as_str().unwrap();
    let revoked = cli.run(&["token", "revoke", id]).success();
    assert_eq!(
        revoked.stdout.trim_end(),
        format!("revoked token ci ({id})")
    );
    let refused = ci.run(&["workspace", "list"]).code(NOT_AUTHENTICATED);
    assert!(
        refused.stderr.contains("unauthenticated"),
        "{}",
        refused.stderr
    );
    cli.run(&["workspace", "list"]).success();

    // Bad input: a clear error, nothing created.
    let bad = cli
        .run(&["token", "create", "ci2", "--expires-in", "soon"])
        .code(2);
    assert!(bad.stderr.contains("not a duration"), "{}", bad.stderr);
    let after = cli.run(&["--json", "token", "list"]).success().json();
    assert_eq!(after.as_array().unwrap().len(), 2, "{after}");
}

#[sqlx::test(migrations = false)]
async fn an_operator_revokes_every_token_of_a_user(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let bob_token = server.create_user("bob").await;
    let bob = server.cli().with_token(Some(&bob_token));
    let second = bob.run(&["token", "create", "laptop"]).success();
    let bob_laptop = bob.with_token(Some(second.stdout.trim_end()));
    bob_laptop.run(&["workspace", "list"]).success();

    let printed = server
        .admin(&["admin", "revoke-token", "--user", "bob", "--all"])
        .await;
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 2, "one line per token: {printed}");
    assert!(
        lines.iter().all(|l| l.starts_with("revoked token ")),
        "{printed}"
    );

    bob.run(&["workspace", "list"]).code(NOT_AUTHENTICATED);
    bob_laptop
        .run(&["workspace", "list"])
        .code(NOT_AUTHENTICATED);
    // Alice, the owner, is untouched.
    server.cli().run(&["workspace", "list"]).success();
    // Nothing is left to revoke: said on stderr, nothing printed.
    let again = server
        .admin(&["admin", "revoke-token", "--user", "bob", "--all"])
        .await;
    assert!(again.is_empty(), "{again}");
}

#[sqlx::test(migrations = false)]
async fn an_admin_revokes_use_and_removes_a_member(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let alice = server.cli();
    set_up_demo(&alice);
    let bob = alice.with_token(Some(&server.create_user("bob").await));
    alice
        .run(&["workspace", "member", "add", "demo", "--user", "bob"])
        .success();
    let granted = alice
        .run(&["profile", "grant", "demo", "main", "--user", "bob", "--use"])
        .success();
    assert!(granted.stdout.contains("bob"), "{}", granted.stdout);
    call_and_wait(&bob, "echo", serde_json::json!({"text": "bob may"}), 0);

    let revoked = alice
        .run(&[
            "profile", "revoke", "demo", "main", "--user", "bob", "--use",
        ])
        .success();
    assert!(
        revoked.stdout.starts_with("grants on profile main:"),
        "{}",
        revoked.stdout
    );
    assert!(!revoked.stdout.contains("bob"), "{}", revoked.stdout);
    let call = submit_call(
        "main",
        "fx",
        "echo",
        serde_json::json!({"text": "bob may not"}),
    );
    let refused = bob
        .run_with_stdin(&["mcp", "call", "demo", "-"], call.to_string().as_bytes())
        .code(4);
    assert!(refused.stderr.contains("forbidden"), "{}", refused.stderr);

    let removed = alice
        .run(&["workspace", "member", "remove", "demo", "bob"])
        .success();
    assert_eq!(
        removed.stdout.trim_end(),
        "removed bob from workspace demo, with 0 grants"
    );
    let members = alice
        .run(&["workspace", "member", "list", "demo"])
        .success();
    assert!(
        members.stdout.contains("alice") && !members.stdout.contains("bob"),
        "{}",
        members.stdout
    );
    let gone = bob.run(&["mcp", "status", "demo"]).code(4);
    assert!(
        gone.stderr.contains("workspace_not_found"),
        "{}",
        gone.stderr
    );
    let last = alice
        .run(&["workspace", "member", "remove", "demo", "alice"])
        .code(4);
    assert!(last.stderr.contains("last_admin"), "{}", last.stderr);
}

#[sqlx::test(migrations = false)]
async fn a_profile_grants_exact_tools_from_the_cli(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let alice = server.cli();
    set_up_demo(&alice);
    alice
        .run(&[
            "profile",
            "create",
            "demo",
            "narrow",
            "--connection",
            "fx",
            "--tools",
            "echo",
        ])
        .success();
    let set = alice
        .run(&[
            "profile",
            "set-tools",
            "demo",
            "narrow",
            "--connection",
            "fx",
            "--tools",
            "echo,fail",
        ])
        .success();
    assert!(set.stdout.contains("fx: echo, fail"), "{}", set.stdout);
    let whole = alice
        .run(&[
            "profile",
            "set-tools",
            "demo",
            "narrow",
            "--connection",
            "fx",
            "--all",
        ])
        .success();
    assert!(whole.stdout.contains("fx: every tool"), "{}", whole.stdout);
    let unknown = alice
        .run(&[
            "profile",
            "set-tools",
            "demo",
            "narrow",
            "--connection",
            "fx",
            "--tools",
            "nope",
        ])
        .code(4);
    assert!(
        unknown.stderr.contains("tool_not_found"),
        "{}",
        unknown.stderr
    );
    // Neither or both of --tools and --all is a usage error.
    alice
        .run(&[
            "profile",
            "set-tools",
            "demo",
            "narrow",
            "--connection",
            "fx",
        ])
        .code(2);
}

#[sqlx::test(migrations = false)]
async fn the_server_reads_its_database_url_from_a_private_file(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    use sqlx::ConnectOptions;
    use std::os::unix::fs::PermissionsExt;
    let url = db.to_url_lossy().to_string();
    let dir = crate::harness::scratch("cli", "database_url_file");
    let file = dir.join("database-url");
    std::fs::write(&file, format!("{url}\n")).unwrap();
    let server = crate::harness::binary(switchyard_testkit::bins::SERVER);
    let migrate = || {
        std::process::Command::new(&server)
            .arg("migrate")
            .env_remove("DATABASE_URL")
            .env("DATABASE_URL_FILE", &file)
            .output()
            .expect("switchyard-server runs")
    };

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = migrate();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("chmod 600"), "{stderr}");
    assert!(!stderr.contains(&url), "the URL is never echoed: {stderr}");

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let applied = migrate();
    let stderr = String::from_utf8_lossy(&applied.stderr);
    assert!(applied.status.success(), "{stderr}");
    assert!(stderr.contains("migrations applied"), "{stderr}");
}
