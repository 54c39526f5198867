//! `switchyard auth`, `list` and `revoke` against a server holding an installation key, a real
//! authorization server (`oidc-provider`) and the fixture as the OAuth-protected MCP server:
//! `auth` prints the consent URL and returns once the browser's consent reached the server; a
//! static token is read from stdin, never from the command line, and set in the connection's
//! header; a connection may be named `mcp.<id>`, as a file names it.

use super::harness::*;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use switchyard_testkit::oauth_server::{OAuthServer, consent};

/// Follows the authorization server's redirects as a browser would, consent being
/// automated, and lands on the server's callback: its status.
async fn consent_in_browser(authorization_url: &str, callback: &str) -> u16 {
    let landing = consent(authorization_url, |url| url.as_str().starts_with(callback)).await;
    reqwest::get(&landing)
        .await
        .expect("the server's callback answers")
        .status()
        .as_u16()
}

/// A server holding an installation key (in `dir`), with workspace `acme` and its central
/// connection `remote` to the MCP server at `url`.
async fn remote_connection(db: &PgConnectOptions, dir: &std::path::Path, url: &str) -> Server {
    let key = dir.join("installation.key");
    let server = Server::start_with_env(
        db,
        &[(
            "SWITCHYARD_INSTALLATION_KEY_FILE",
            key.to_str().expect("a UTF-8 path"),
        )],
    )
    .await;
    let cli = server.cli();
    cli.run(&["workspace", "create", "acme"]).success();
    cli.run(&["connector", "add", "remote", "--http", url])
        .success();
    cli.run(&[
        "connection",
        "create",
        "acme",
        "remote",
        "--connector",
        "remote",
    ])
    .success();
    server
}

#[sqlx::test(migrations = false)]
async fn auth_waits_for_the_consent_then_list_and_revoke_show_where_it_stands(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let dir = scratch_dir("oauth");
    let auth = OAuthServer::start(&dir, 3600).expect("oidc-provider starts");
    let remote = HttpFixture::protected_by(&auth);
    let server = remote_connection(&db, &dir, &remote.url).await;
    let cli = server.cli();
    let listed = cli.run(&["list", "acme"]).success();
    assert!(
        listed.stdout.contains("remote") && listed.stdout.contains("discovered"),
        "{}",
        listed.stdout
    );

    let mut waiting = cli.start(&["auth", "acme", "remote"]);
    let authorization_url = loop {
        let line = waiting.next_line();
        if let Some(url) = line.trim().strip_prefix(auth.issuer()) {
            break format!("{}{url}", auth.issuer());
        }
    };
    let callback = format!("{}/mcp/callback", server.url().trim_end_matches('/'));
    assert_eq!(consent_in_browser(&authorization_url, &callback).await, 200);
    let done = waiting.finish();
    assert_eq!(done.code, Some(0), "{}", done.stderr);
    assert!(
        done.stdout.contains("connection remote is authorized"),
        "{}",
        done.stdout
    );

    let listed = cli.run(&["--json", "list", "acme"]).success().json();
    assert_eq!(listed[0]["auth"]["state"], "authorized", "{listed}");
    let listed = cli.run(&["list", "acme"]).success();
    assert!(listed.stdout.contains("oauth"), "{}", listed.stdout);

    let revoked = cli.run(&["revoke", "acme", "remote"]).success();
    assert!(
        revoked.stdout.contains("needs authorization again"),
        "{}",
        revoked.stdout
    );
    let listed = cli.run(&["--json", "list", "acme"]).success().json();
    assert_eq!(
        listed[0]["auth"]["state"], "needs_authorization",
        "{listed}"
    );
}

#[sqlx::test(migrations = false)]
async fn auth_reads_a_static_token_from_stdin_for_a_token_connection(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let dir = scratch_dir("auth-token");
    let remote = HttpFixture::start(
        &["--bearer-env", "FIXTURE_TOKEN"],
        &[("FIXTURE_TOKEN", "auth-token-5e2a")],
    );
    let server = remote_connection(&db, &dir, &remote.url).await;
    let cli = server.cli();
    server
        .api()
        .put(
            "/workspaces/acme/connections/remote/auth",
            &serde_json::json!({"kind": "token"}),
        )
        .await
        .expect("auth settings");

    // `mcp.<id>`, as the file names the server, is connection `<id>`.
    let set = cli
        .run_with_stdin(&["auth", "acme", "mcp.remote"], b"auth-token-5e2a\n")
        .success();
    assert!(set.stdout.contains("kept by the server"), "{}", set.stdout);
    assert!(!set.stdout.contains("auth-token-5e2a") && !set.stderr.contains("auth-token-5e2a"));
    let discovered = cli
        .run(&["connection", "discover", "acme", "remote"])
        .success();
    assert!(discovered.stdout.contains("echo"), "{}", discovered.stdout);

    // The header the connection declares is where the next token goes; `--header` overrides it.
    server
        .api()
        .put(
            "/workspaces/acme/connections/remote/auth",
            &serde_json::json!({"kind": "token", "header": "X-Api-Key"}),
        )
        .await
        .expect("auth settings");
    let set = cli
        .run_with_stdin(&["auth", "acme", "remote"], b"api-key-77c1\n")
        .success();
    assert!(
        set.stdout.contains("sent in header `X-Api-Key`"),
        "{}",
        set.stdout
    );
    let listed = server
        .api()
        .get("/workspaces/acme/connections/remote/credentials")
        .await
        .expect("the credential list");
    let present: Vec<&str> = listed["credentials"]
        .as_array()
        .expect("credentials")
        .iter()
        .filter(|c| c["state"] == "present")
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(present.contains(&"X-Api-Key"), "{listed}");
    let set = cli
        .run_with_stdin(
            &["auth", "acme", "remote", "--header", "Authorization"],
            b"auth-token-5e2a\n",
        )
        .success();
    assert!(
        set.stdout.contains("sent in header `Authorization`"),
        "{}",
        set.stdout
    );

    let revoked = cli.run(&["revoke", "acme", "mcp.remote"]).success();
    assert!(
        revoked
            .stdout
            .contains("connection remote: its credentials were emptied"),
        "{}",
        revoked.stdout
    );
    let unknown = cli.run(&["revoke", "acme", "mcp.nothing"]).code(4);
    assert!(
        unknown.stderr.contains("error[connection_not_found]")
            && unknown.stderr.contains("`nothing`"),
        "{}",
        unknown.stderr
    );
}
