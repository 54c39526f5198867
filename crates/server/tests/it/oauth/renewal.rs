//! Tokens renew themselves: before they expire (the rotated refresh token stored and used
//! next), once when the server refuses one (the call retried once), once across replicas
//! however many calls meet the expiry, and never again after the authorization server said
//! no for good.
//!
//! Access tokens here live a few seconds, and the tests wait for them to age: time passing is
//! what they are about, so they sleep past a token's lifetime rather than poll for it.

use super::*;
use futures::future::join_all;
use switchyard_server::app::oauth::grant_context;
use switchyard_server::vault::Sealed;
use switchyard_testkit::poll::{Bound, Check};

/// Access token lifetime in these tests: renewed once half of it is left.
const TTL: u64 = 4;

/// Sleeps until a token obtained now is due for renewal (and a little past, for the clocks).
async fn until_due() {
    tokio::time::sleep(Duration::from_secs(TTL / 2 + 1)).await;
}

/// The grant the server holds for `remote`, opened with the installation key.
async fn held_grant(stack: &Stack) -> Value {
    let id = stack.connection_id().await;
    let (key_id, nonce, ciphertext): (String, Vec<u8>, Vec<u8>) = sqlx::query_as(
        "SELECT key_id, nonce, ciphertext FROM oauth_grants WHERE connection_id = $1",
    )
    .bind(id)
    .fetch_one(&stack.server.pool)
    .await
    .unwrap();
    let sealed = Sealed {
        key_id,
        nonce,
        ciphertext,
    };
    let plain = stack
        .vault
        .open(&grant_context(id, "shared"), &sealed)
        .unwrap();
    serde_json::from_slice(&plain).unwrap()
}

/// The refresh token the server holds for `remote`.
async fn held_refresh_token(stack: &Stack) -> String {
    held_grant(stack).await["credentials"]["token_response"]["refresh_token"]
        .as_str()
        .expect("a refresh token")
        .to_owned()
}

/// The client id the server's grant for `remote` was obtained with.
async fn client_id(stack: &Stack) -> String {
    held_grant(stack).await["client"]["client_id"]
        .as_str()
        .expect("a client id")
        .to_owned()
}

/// Authorized, discovered and classified: ready for calls.
async fn authorized(pool: PgPool) -> Stack {
    let stack = stack(pool, TTL).await;
    stack.authorize().await;
    stack
        .server
        .owner
        .make_callable("acme", "remote", "main")
        .await;
    stack
}

#[track_caller]
fn assert_succeeded(call: &Value, text: &str) {
    assert_eq!(
        (call["state"].as_str(), result_text(call).as_str()),
        (Some("succeeded"), text),
        "{call}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_token_is_renewed_before_it_expires_and_the_rotated_refresh_token_is_used_next(
    pool: PgPool,
) {
    let stack = authorized(pool).await;
    let first_refresh = held_refresh_token(&stack).await;
    let renewals = stack.token_requests("refresh_token").await;

    until_due().await;
    assert_succeeded(&stack.echo("renewed before").await, "renewed before");
    assert_eq!(stack.token_requests("refresh_token").await, renewals + 1);
    let second_refresh = held_refresh_token(&stack).await;
    assert_ne!(
        first_refresh, second_refresh,
        "the rotated refresh token is stored"
    );

    // The authorization server consumed the first refresh token: only the stored rotated one
    // renews the next time.
    until_due().await;
    assert_succeeded(&stack.echo("renewed again").await, "renewed again");
    assert_eq!(stack.token_requests("refresh_token").await, renewals + 2);
    assert_eq!(stack.auth_state().await, "authorized");
    let metrics = reqwest::get(stack.server.metrics_url())
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let ok = format!(
        "switchyard_oauth_renewals_total{{result=\"ok\"}} {}",
        renewals + 2
    );
    assert!(metrics.contains(&ok), "{metrics}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_token_the_server_refuses_is_renewed_once_and_the_call_sent_again(pool: PgPool) {
    let stack = authorized(pool).await;
    assert_succeeded(&stack.echo("warm").await, "warm");
    let renewals = stack.token_requests("refresh_token").await;

    // The authorization server forgets the access token the warm session sends: the fixture
    // now answers it 401, while the refresh token still renews.
    let token = stack.held_token().await;
    stack.auth.forget_access_tokens().await.unwrap();

    assert_succeeded(&stack.echo("after a refusal").await, "after a refusal");
    assert_eq!(stack.token_requests("refresh_token").await, renewals + 1);
    assert_ne!(stack.held_token().await, token);
    assert_eq!(stack.auth_state().await, "authorized");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_rejected_refresh_token_needs_authorization_after_one_request(pool: PgPool) {
    let stack = authorized(pool).await;
    let renewals = stack.token_requests("refresh_token").await;
    stack.auth.revoke_refresh_tokens().await.unwrap();

    until_due().await;
    let call = stack.echo("never sent").await;
    assert_eq!(
        (call["state"].as_str(), call["error"]["code"].as_str()),
        (Some("failed"), Some("credential_auth_required")),
        "{call}"
    );
    assert_eq!(stack.token_requests("refresh_token").await, renewals + 1);
    assert_eq!(stack.auth_state().await, "auth_required");

    // No retry storm: the next calls fail at once, without asking the authorization server.
    for text in ["again", "and again"] {
        let call = stack.echo(text).await;
        assert_eq!(call["error"]["code"], "credential_auth_required", "{call}");
    }
    assert_eq!(stack.token_requests("refresh_token").await, renewals + 1);

    // Authorizing again repairs it.
    stack.authorize().await;
    assert_succeeded(&stack.echo("authorized again").await, "authorized again");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_forgotten_registration_needs_authorization_and_authorizing_registers_anew(pool: PgPool) {
    let stack = authorized(pool).await;
    assert_succeeded(&stack.echo("warm").await, "warm");
    let forgotten = client_id(&stack).await;
    let renewals = stack.token_requests("refresh_token").await;
    stack.auth.forget_client(&forgotten).await.unwrap();

    // Its tokens no longer pass introspection; renewing finds the client unknown.
    let call = stack.echo("never sent").await;
    assert_eq!(
        (call["state"].as_str(), call["error"]["code"].as_str()),
        (Some("failed"), Some("credential_auth_required")),
        "{call}"
    );
    assert!(
        call["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no longer knows the client"),
        "{call}"
    );
    assert_eq!(stack.token_requests("refresh_token").await, renewals + 1);
    assert_eq!(stack.auth_state().await, "auth_required");

    stack.authorize().await;
    assert_ne!(
        client_id(&stack).await,
        forgotten,
        "a new client is registered"
    );
    assert_succeeded(&stack.echo("repaired").await, "repaired");
}

#[sqlx::test(migrations = "../../migrations")]
async fn twenty_calls_at_expiry_on_two_replicas_make_one_token_request(pool: PgPool) {
    let stack = authorized(pool).await;
    let before = stack.held_token().await;
    let renewals = stack.token_requests("refresh_token").await;
    let id = stack.connection_id().await;
    let replicas = [stack.replica_app(), stack.replica_app()];

    until_due().await;
    let tokens = join_all((0..20).map(|i| {
        let app = &replicas[i % 2];
        let url = stack.url.clone();
        async move { app.oauth_bearer(id, &url, None).await }
    }))
    .await;
    let tokens: Vec<String> = tokens
        .into_iter()
        .map(|token| token.expect("a token").expect("an OAuth connection"))
        .collect();
    assert_eq!(stack.token_requests("refresh_token").await, renewals + 1);
    assert!(
        tokens
            .iter()
            .all(|token| *token == tokens[0] && *token != before),
        "every call got the one renewed token"
    );
}

/// The advisory lock key the server's sealed writes share (`db/sealed.rs`).
const SEALED_WRITE_LOCK: i64 = 0x5357_5345_414c_4544;

#[sqlx::test(migrations = "../../migrations")]
async fn a_renewal_in_flight_does_not_undo_a_revoke(pool: PgPool) {
    let stack = authorized(pool).await;
    let renewals = stack.token_requests("refresh_token").await;
    let id = stack.connection_id().await;
    let app = stack.replica_app();

    // Holding the sealed-write lock stops the renewal right before it stores its token.
    let mut rotation = stack.server.pool.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(SEALED_WRITE_LOCK)
        .execute(&mut *rotation)
        .await
        .unwrap();
    until_due().await;
    let renewing = tokio::spawn({
        let app = app.clone();
        let url = stack.url.clone();
        async move { app.oauth_bearer(id, &url, None).await }
    });
    Bound::new(Duration::from_secs(30), Duration::from_millis(20))
        .until(async || {
            Ok(
                if stack.token_requests("refresh_token").await == renewals + 1 {
                    Check::Done(())
                } else {
                    Check::NotYet("the authorization server has not answered the refresh".into())
                },
            )
        })
        .await
        .unwrap();
    // Revoked while the renewed token waits to be stored.
    assert_eq!(app.oauth_grants_forget(id).await.unwrap(), 1);
    rotation.commit().await.unwrap();

    let error = renewing
        .await
        .unwrap()
        .expect_err("the renewed token is discarded");
    assert_eq!(error.code, "credential_missing", "{}", error.message);
    assert!(error.message.contains("revoked"), "{}", error.message);
    let grants: i64 = sqlx::query_scalar("SELECT count(*) FROM oauth_grants")
        .fetch_one(&stack.server.pool)
        .await
        .unwrap();
    assert_eq!(grants, 0, "the revoke stands");
    assert_eq!(stack.auth_state().await, "needs_authorization");
}

#[sqlx::test(migrations = "../../migrations")]
async fn twenty_calls_meeting_a_rejected_refresh_token_make_one_token_request(pool: PgPool) {
    let stack = authorized(pool).await;
    let renewals = stack.token_requests("refresh_token").await;
    let id = stack.connection_id().await;
    let replicas = [stack.replica_app(), stack.replica_app()];
    stack.auth.revoke_refresh_tokens().await.unwrap();

    until_due().await;
    let answers = join_all((0..20).map(|i| {
        let app = &replicas[i % 2];
        let url = stack.url.clone();
        async move { app.oauth_bearer(id, &url, None).await }
    }))
    .await;
    for answer in answers {
        let error = answer.expect_err("no token");
        assert_eq!(error.code, "credential_auth_required", "{}", error.message);
    }
    assert_eq!(
        stack.token_requests("refresh_token").await,
        renewals + 1,
        "the waiters did not send the rejected refresh token again"
    );
    assert_eq!(stack.auth_state().await, "auth_required");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_renewal_waits_for_a_held_grant_lock_only_as_long_as_the_oauth_timeout(pool: PgPool) {
    let stack = authorized(pool).await;
    let renewals = stack.token_requests("refresh_token").await;
    let id = stack.connection_id().await;
    let bound = Duration::from_secs(1);
    let app = App::new(
        Datastore::new(stack.server.pool.clone()),
        AppConfig {
            installation_key: Some(Arc::clone(&stack.vault)),
            oauth_timeout: bound,
            ..test_app_config()
        },
    );
    let token = stack.held_token().await;

    // Another renewal (here: the test) holds the grant's lock and does not let go.
    let mut holder = stack.server.pool.acquire().await.unwrap();
    sqlx::query(
        "SELECT pg_advisory_lock(hashtextextended('oauth-grant:' || $1::text || '/shared', 0))",
    )
    .bind(id)
    .execute(&mut *holder)
    .await
    .unwrap();
    // The MCP server refused the token: it needs renewing now.
    let started = std::time::Instant::now();
    let error = app
        .oauth_bearer(id, &stack.url, Some(&token))
        .await
        .expect_err("no token while the lock is held");
    let waited = started.elapsed();
    assert_eq!(error.code, "credential_renewal_failed", "{}", error.message);
    assert!(
        error.message.contains("held its grant"),
        "{}",
        error.message
    );
    assert!(
        waited >= bound && waited < bound * 5,
        "waited {waited:?} for a lock bounded at {bound:?}"
    );
    assert_eq!(stack.token_requests("refresh_token").await, renewals);
    assert_eq!(stack.auth_state().await, "authorized", "nothing changed");

    // Let go: another replica renews at once, on connections the failed wait gave back.
    sqlx::query("SELECT pg_advisory_unlock_all()")
        .execute(&mut *holder)
        .await
        .unwrap();
    let renewed = stack
        .replica_app()
        .oauth_bearer(id, &stack.url, Some(&token))
        .await
        .expect("renewed")
        .expect("an OAuth connection");
    assert_ne!(renewed, token);
    assert_eq!(stack.token_requests("refresh_token").await, renewals + 1);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_client_secret_dynamic_registration_answers_is_kept_sealed_and_sent(pool: PgPool) {
    let stack = stack(pool, TTL).await;
    // The authorization server registers a confidential client though a public one is asked
    // for: redeeming the code and refreshing need its secret.
    stack.auth.register_confidential_clients().await.unwrap();
    stack.authorize().await;
    let secret = held_grant(&stack).await["client"]["registered_secret"]
        .as_str()
        .expect("the registered secret is kept with the grant")
        .to_owned();
    assert_eq!(stack.token_requests("authorization_code").await, 1);
    let in_clear: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM oauth_grants WHERE position(convert_to($1, 'UTF8') IN ciphertext) > 0",
    )
    .bind(&secret)
    .fetch_one(&stack.server.pool)
    .await
    .unwrap();
    assert_eq!(in_clear, 0, "sealed");

    stack
        .server
        .owner
        .make_callable("acme", "remote", "main")
        .await;
    let renewals = stack.token_requests("refresh_token").await;
    stack.auth.forget_access_tokens().await.unwrap();
    assert_succeeded(
        &stack.echo("refreshed with the secret").await,
        "refreshed with the secret",
    );
    assert_eq!(stack.token_requests("refresh_token").await, renewals + 1);
    assert_eq!(stack.auth_state().await, "authorized");
}
