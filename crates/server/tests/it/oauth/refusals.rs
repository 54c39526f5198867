//! What is refused, and what is never kept: a callback from another issuer (before its code is
//! redeemed), an authorization server that never answers, settings a connection cannot take,
//! a kind change (which empties the credential), a server without an installation key; and a
//! token found nowhere — not in the database, the log or an API answer.

use super::*;
use std::process::{Command, Stdio};
use std::time::Instant;

#[sqlx::test(migrations = "../../migrations")]
async fn a_callback_from_another_issuer_is_refused_before_its_code_is_redeemed(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    let started = stack.start_authorization().await;
    let callback = stack.consent(&started).await;
    let mut forged = reqwest::Url::parse(&callback).unwrap();
    let pairs: Vec<(String, String)> = forged
        .query_pairs()
        .map(|(key, value)| {
            let value = if key == "iss" {
                "https://attacker.example".to_owned()
            } else {
                value.into_owned()
            };
            (key.into_owned(), value)
        })
        .collect();
    forged.query_pairs_mut().clear().extend_pairs(&pairs);

    let (status, page) = get_page(forged.as_str()).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("issuer_mismatch"), "{page}");
    assert_eq!(stack.token_requests("authorization_code").await, 0);
    assert_eq!(stack.auth_state().await, "needs_authorization");

    // The genuine answer still completes the flow: the forged one consumed nothing.
    let (status, page) = get_page(&callback).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(stack.auth_state().await, "authorized");
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_authorization_server_that_never_answers_times_out(pool: PgPool) {
    // Accepts connections and never answers on them.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let (url, _fixture) = http_fixture(
        &[
            "--oauth-issuer",
            &issuer,
            "--oauth-client-env",
            "FIXTURE_INTROSPECTION_CLIENT",
        ],
        &[("FIXTURE_INTROSPECTION_CLIENT", "rs:secret")],
    );
    let dir = scratch_dir("oauth-silent");
    let vault = Arc::new(KeyFile::load_or_create(&dir.join("installation.key")).unwrap());
    let server = TestServer::start_with(pool, |config| {
        config.app.installation_key = Some(vault);
        config.app.oauth_timeout = Duration::from_secs(1);
    })
    .await;
    let owner = &server.owner;
    add_remote(owner, &url).await;

    let began = Instant::now();
    let message = owner
        .post(&format!("{CONNECTION}/authorize"), json!({}))
        .await
        .refused(502, "authorization_failed");
    let took = began.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "bounded by the 1 s request timeout, took {took:?}"
    );
    assert!(message.contains(&issuer), "{message}");
    held.abort();
}

#[sqlx::test(migrations = "../../migrations")]
async fn settings_a_central_connection_cannot_take_are_refused(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    let owner = &stack.server.owner;
    let auth = format!("{CONNECTION}/auth");
    owner
        .put(
            &auth,
            json!({"kind": "oauth", "client_id_env": "not a name"}),
        )
        .await
        .refused(400, "invalid_request");
    owner
        .put(
            &auth,
            json!({"client_secret_env": "SWITCHYARD_OAUTH_SECRET"}),
        )
        .await
        .refused(400, "invalid_request");
    // Only the OAuth namespace of the server's environment can be named: not its database URL.
    for settings in [
        json!({"kind": "oauth", "client_id_env": "DATABASE_URL"}),
        json!({"client_id_env": "SWITCHYARD_OAUTH_ID", "client_secret_env": "HOME"}),
    ] {
        let message = owner
            .put(&auth, settings)
            .await
            .refused(400, "oauth_env_refused");
        assert!(message.contains("SWITCHYARD_OAUTH_"), "{message}");
    }
    owner
        .put(&auth, json!({"kind": "token", "scopes": ["mcp:tools"]}))
        .await
        .refused(400, "invalid_request");
    // A header is where a static token goes: only under `token`, and one a token may take.
    for settings in [
        json!({"kind": "oauth", "header": "X-Api-Key"}),
        json!({"header": "X-Api-Key"}),
    ] {
        let message = owner
            .put(&auth, settings)
            .await
            .refused(400, "invalid_request");
        assert!(message.contains("needs `kind` `token`"), "{message}");
    }
    for (header, why) in [
        ("Host", "owned by HTTP or the MCP transport"),
        ("X Api Key", "not an HTTP header name"),
    ] {
        let message = owner
            .put(&auth, json!({"kind": "token", "header": header}))
            .await
            .refused(400, "invalid_request");
        assert!(message.contains(why), "{message}");
    }
    assert_eq!(
        stack.connection().await["auth"],
        Value::Null,
        "nothing stored"
    );

    // Settings stored before the namespace existed are checked again when authorizing: the
    // value never reaches an authorization URL.
    let id = stack.connection_id().await;
    sqlx::query(
        "INSERT INTO connection_auth (connection_id, kind, client_id_env)
         VALUES ($1, 'oauth', 'DATABASE_URL')",
    )
    .bind(id)
    .execute(&stack.server.pool)
    .await
    .unwrap();
    let message = owner
        .post(&format!("{CONNECTION}/authorize"), json!({}))
        .await
        .refused(400, "oauth_env_refused");
    let database_url = std::env::var("DATABASE_URL").unwrap();
    assert!(!message.contains(&database_url), "{message}");
    sqlx::query("DELETE FROM connection_auth WHERE connection_id = $1")
        .bind(id)
        .execute(&stack.server.pool)
        .await
        .unwrap();

    let member = stack.server.member("acme", "bob", "member").await;
    member
        .put(&auth, json!({"kind": "oauth"}))
        .await
        .refused(403, "forbidden");
    member
        .post(&format!("{CONNECTION}/authorize"), json!({}))
        .await
        .refused(403, "forbidden");

    let view = owner
        .put(&auth, json!({"kind": "oauth", "scopes": ["mcp:tools"]}))
        .await
        .ok();
    assert_eq!(
        view["auth"],
        json!({"kind": "oauth", "scopes": ["mcp:tools"], "credential": "shared",
               "state": "needs_authorization"})
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_token_connection_keeps_the_header_its_token_goes_in(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    let owner = &stack.server.owner;
    let auth = format!("{CONNECTION}/auth");
    let view = owner
        .put(&auth, json!({"kind": "token", "header": "X-Api-Key"}))
        .await
        .ok();
    assert_eq!(
        view["auth"],
        json!({"kind": "token", "scopes": [], "credential": "shared",
               "state": "needs_authorization", "header": "X-Api-Key"})
    );
    // The kind left out is the one it has: another header is taken.
    let view = owner
        .put(&auth, json!({"header": "PRIVATE-TOKEN"}))
        .await
        .ok();
    assert_eq!(view["auth"]["header"], "PRIVATE-TOKEN", "{view}");
    // `Authorization` is the default, kept as no header; leaving it out clears it.
    let view = owner
        .put(&auth, json!({"kind": "token", "header": "authorization"}))
        .await
        .ok();
    assert_eq!(view["auth"].get("header"), None, "{view}");
    owner
        .put(&auth, json!({"kind": "token", "header": "X-Api-Key"}))
        .await
        .ok();
    let view = owner.put(&auth, json!({"kind": "token"})).await.ok();
    assert_eq!(view["auth"].get("header"), None, "{view}");
    // The token set for a header is emptied when the header changes, or the kind.
    let credentials = format!("{CONNECTION}/credentials");
    let held = |list: Value| -> Vec<String> {
        list["credentials"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["state"] == "present")
            .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    owner
        .put(&auth, json!({"kind": "token", "header": "X-Api-Key"}))
        .await
        .ok();
    owner
        .put(
            &format!("{credentials}/X-Api-Key"),
            json!({"value": "token-for-x-api-key-5a1e"}),
        )
        .await
        .ok();
    assert_eq!(held(owner.get(&credentials).await.ok()), ["X-Api-Key"]);
    owner
        .put(&auth, json!({"kind": "token", "header": "PRIVATE-TOKEN"}))
        .await
        .ok();
    assert!(held(owner.get(&credentials).await.ok()).is_empty());
    owner
        .put(
            &format!("{credentials}/PRIVATE-TOKEN"),
            json!({"value": "token-for-private-token-5a1e"}),
        )
        .await
        .ok();
    // Another kind takes none.
    let view = owner.put(&auth, json!({"kind": "oauth"})).await.ok();
    assert!(held(owner.get(&credentials).await.ok()).is_empty());
    assert_eq!(
        (view["auth"]["kind"].as_str(), view["auth"].get("header")),
        (Some("oauth"), None),
        "{view}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn changing_the_kind_empties_the_credential(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    stack.authorize().await;
    let owner = &stack.server.owner;
    owner.make_callable("acme", "remote", "main").await;
    let auth = format!("{CONNECTION}/auth");
    // Setting what it already is keeps the grant; so does leaving the discovered kind out.
    owner.put(&auth, json!({"kind": "oauth"})).await.ok();
    assert_eq!(stack.auth_state().await, "authorized");
    let view = owner
        .put(&auth, json!({"scopes": ["mcp:tools"]}))
        .await
        .ok();
    assert_eq!(view["auth"]["kind"], "oauth", "{view}");
    assert_eq!(stack.auth_state().await, "authorized");

    owner.put(&auth, json!({"kind": "token"})).await.ok();
    assert_eq!(stack.auth_state().await, "needs_authorization");
    let grants: i64 = sqlx::query_scalar("SELECT count(*) FROM oauth_grants")
        .fetch_one(&stack.server.pool)
        .await
        .unwrap();
    assert_eq!(grants, 0);
    owner
        .post(&format!("{CONNECTION}/authorize"), json!({}))
        .await
        .refused(422, "authorization_unsupported");

    owner.put(&auth, json!({"kind": "oauth"})).await.ok();
    let call = stack.echo("not authorized").await;
    assert_eq!(
        (call["state"].as_str(), call["error"]["code"].as_str()),
        (Some("failed"), Some("credential_missing")),
        "{call}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_server_without_an_installation_key_refuses_to_authorize(pool: PgPool) {
    let stack = stack_with(pool, 3600, |config| config.app.installation_key = None).await;
    let message = stack
        .server
        .owner
        .post(&format!("{CONNECTION}/authorize"), json!({}))
        .await
        .refused(409, "vault_not_configured");
    assert!(message.contains("--installation-key-file"), "{message}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn tokens_are_found_in_no_dump_log_or_answer(pool: PgPool) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = scratch_dir("oauth-canary");
    let auth = OAuthServer::start(dir.dir(), 3600).expect("oidc-provider starts");
    let (id, secret) = auth.resource_server();
    let introspection = format!("{id}:{secret}");
    let (url, _fixture) = http_fixture(
        &[
            "--oauth-issuer",
            auth.issuer(),
            "--oauth-client-env",
            "FIXTURE_INTROSPECTION_CLIENT",
        ],
        &[("FIXTURE_INTROSPECTION_CLIENT", introspection.as_str())],
    );
    let key_file = dir.join("installation.key");
    let app = App::new(Datastore::new(pool.clone()), AppConfig::default());
    let (_, token) = app.user_create("owner", true).await.unwrap();
    let log = dir.join("server.log");
    let mut server = Command::new(env!("CARGO_BIN_EXE_switchyard-server"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(["--allow-endpoint", "127.0.0.1"])
        .arg("--installation-key-file")
        .arg(&key_file)
        .env("DATABASE_URL", database_url_of(&pool))
        .env("SWITCHYARD_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let base = read_announcement(&mut server, "listening on");
    let server = ChildGuard(server);
    let owner = Client::at(&base, &token);
    let connection = add_remote(&owner, &url).await;
    let started = owner
        .post(&format!("{CONNECTION}/authorize"), json!({}))
        .await
        .ok();
    let callback = consent(
        started["authorization_url"].as_str().unwrap(),
        &format!("{base}/mcp/callback"),
    )
    .await;
    let (status, page) = get_page(&callback).await;
    assert_eq!(status, 200, "{page}");
    owner.make_callable("acme", "remote", "main").await;
    let call = owner
        .post(
            "/api/v1/workspaces/acme/calls",
            json!({"request_id": uuid::Uuid::new_v4(), "profile_id": "main",
                   "connection_id": "remote", "tool_name": "echo",
                   "arguments": {"text": "canary call"}}),
        )
        .await
        .ok();
    let call = owner
        .wait_call(
            "acme",
            call["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(call["state"], "succeeded", "{call}");

    // The tokens, read as another replica with the key file would.
    let vault = Arc::new(KeyFile::load_or_create(&key_file).unwrap());
    let replica = App::new(
        Datastore::new(pool.clone()),
        AppConfig {
            installation_key: Some(Arc::clone(&vault)),
            ..test_app_config()
        },
    );
    let connection_id = connection["id"].as_str().unwrap().parse().unwrap();
    let access = replica
        .oauth_bearer(connection_id, &url, None)
        .await
        .unwrap()
        .unwrap();
    let (key_id, nonce, ciphertext): (String, Vec<u8>, Vec<u8>) =
        sqlx::query_as("SELECT key_id, nonce, ciphertext FROM oauth_grants")
            .fetch_one(&pool)
            .await
            .unwrap();
    let grant: Value = serde_json::from_slice(
        &vault
            .open(
                &switchyard_server::app::oauth::grant_context(connection_id, "shared"),
                &switchyard_server::vault::Sealed {
                    key_id,
                    nonce,
                    ciphertext,
                },
            )
            .unwrap(),
    )
    .unwrap();
    let refresh = grant["credentials"]["token_response"]["refresh_token"]
        .as_str()
        .unwrap()
        .to_owned();

    let answers = [
        owner.get(CONNECTION).await.ok().to_string(),
        owner
            .get("/api/v1/workspaces/acme/connections")
            .await
            .ok()
            .to_string(),
        owner
            .get("/api/v1/workspaces/acme/audit")
            .await
            .ok()
            .to_string(),
        call.to_string(),
        page,
    ];
    drop(server);
    let dump = dump_database(&pool).await;
    assert!(dump.contains("canary call"), "the dump holds the results");
    let logs = std::fs::read_to_string(&log).unwrap();
    assert!(logs.contains("listening"), "the server log was captured");
    for (what, secret) in [("access token", &access), ("refresh token", &refresh)] {
        assert!(
            !dump.contains(secret.as_str()),
            "the {what} reached the database"
        );
        assert!(
            !logs.contains(secret.as_str()),
            "the {what} reached the log"
        );
        for answer in &answers {
            assert!(
                !answer.contains(secret.as_str()),
                "the {what} reached an answer"
            );
        }
    }
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_grant_is_not_sent_to_a_url_it_was_not_obtained_for(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    stack.authorize().await;
    let owner = &stack.server.owner;
    owner.make_callable("acme", "remote", "main").await;

    // Another MCP server behind the same authorization server: the connector now points there.
    let (id, secret) = stack.auth.resource_server();
    let introspection = format!("{id}:{secret}");
    let (moved, _other) = http_fixture(
        &[
            "--oauth-issuer",
            stack.auth.issuer(),
            "--oauth-client-env",
            "FIXTURE_INTROSPECTION_CLIENT",
        ],
        &[("FIXTURE_INTROSPECTION_CLIENT", introspection.as_str())],
    );
    owner
        .send(
            reqwest::Method::PATCH,
            "/api/v1/connectors/remote",
            Some(json!({"transport": "http", "url": moved})),
        )
        .await
        .ok();

    let call = stack.echo("elsewhere").await;
    assert_eq!(
        (call["state"].as_str(), call["error"]["code"].as_str()),
        (Some("failed"), Some("credential_missing")),
        "{call}"
    );
    assert!(
        call["error"]["message"]
            .as_str()
            .unwrap()
            .contains("changed its URL"),
        "{call}"
    );
    assert_eq!(stack.auth_state().await, "needs_authorization");
}

#[sqlx::test(migrations = "../../migrations")]
async fn two_callbacks_with_one_state_redeem_its_code_once(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    let started = stack.start_authorization().await;
    let callback = stack.consent(&started).await;

    let (first, second) = tokio::join!(get_page(&callback), get_page(&callback));
    let mut statuses = [first.0, second.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 400], "{first:?} {second:?}");
    let refused = if first.0 == 400 { &first.1 } else { &second.1 };
    assert!(refused.contains("authorization_state_invalid"), "{refused}");
    assert_eq!(stack.token_requests("authorization_code").await, 1);
    assert_eq!(stack.auth_state().await, "authorized");
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_authorization_begun_before_a_revoke_or_kind_change_grants_nothing(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    let owner = &stack.server.owner;

    let started = stack.start_authorization().await;
    let callback = stack.consent(&started).await;
    owner
        .post(&format!("{CONNECTION}/credentials/revoke"), json!({}))
        .await
        .ok();
    let (status, page) = get_page(&callback).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("authorization_state_invalid"), "{page}");

    let started = stack.start_authorization().await;
    let callback = stack.consent(&started).await;
    owner
        .put(&format!("{CONNECTION}/auth"), json!({"kind": "token"}))
        .await
        .ok();
    let (status, page) = get_page(&callback).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("authorization_state_invalid"), "{page}");

    assert_eq!(stack.token_requests("authorization_code").await, 0);
    assert_eq!(stack.auth_state().await, "needs_authorization");
    let grants: i64 = sqlx::query_scalar("SELECT count(*) FROM oauth_grants")
        .fetch_one(&stack.server.pool)
        .await
        .unwrap();
    assert_eq!(grants, 0);
}

#[sqlx::test(migrations = "../../migrations")]
async fn declined_consent_is_a_refusal_not_a_server_failure(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    let started = stack.start_authorization().await;
    let mut declined =
        reqwest::Url::parse(&format!("http://{}/mcp/callback", stack.server.addr)).unwrap();
    declined
        .query_pairs_mut()
        .append_pair("error", "access_denied")
        .append_pair("state", started["state"].as_str().unwrap())
        .append_pair("iss", stack.auth.issuer());

    let (status, page) = get_page(declined.as_str()).await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("authorization_declined"), "{page}");
    assert_eq!(stack.token_requests("authorization_code").await, 0);
    assert_eq!(stack.auth_state().await, "needs_authorization");
}
