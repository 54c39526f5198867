//! `credential = "user"` on a central connection: each person authorizes their own grant, and
//! a call sends the grant of the person it runs for — never another's.

use super::*;

/// Calls `echo` on `remote` as `who` with `text`; the settled call.
async fn echo_as(who: &Client, text: &str) -> Value {
    let call = who
        .post(
            "/api/v1/workspaces/acme/calls",
            json!({"request_id": uuid::Uuid::new_v4(), "profile_id": "main",
                   "connection_id": "remote", "tool_name": "echo",
                   "arguments": {"text": text}}),
        )
        .await
        .ok();
    who.wait_call(
        "acme",
        call["id"].as_str().unwrap(),
        Duration::from_secs(60),
    )
    .await
}

/// `who`'s view of the connection's auth state.
async fn state_seen_by(who: &Client) -> String {
    who.get(CONNECTION).await.ok()["auth"]["state"]
        .as_str()
        .unwrap_or("<none>")
        .to_owned()
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_per_person_connection_sends_each_callers_own_grant(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    let owner = &stack.server.owner;
    owner
        .put(
            &format!("{CONNECTION}/auth"),
            json!({"kind": "oauth", "credential": "user"}),
        )
        .await
        .ok();
    let bob = stack.server.member("acme", "bob", "member").await;

    // The owner authorizes their own grant: authorized for them, not for bob.
    stack.authorize().await;
    assert_eq!(state_seen_by(owner).await, "authorized");
    assert_eq!(state_seen_by(&bob).await, "needs_authorization");
    owner.make_callable("acme", "remote", "main").await;
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"user": "bob", "use": true}),
        )
        .await
        .ok();

    let mine = echo_as(owner, "the owner's").await;
    assert_eq!(mine["state"], "succeeded", "{mine}");
    // Bob may use the profile, but the owner's grant is not his to send.
    let bobs = echo_as(&bob, "bob's, unauthorized").await;
    assert_eq!(
        (bobs["state"].as_str(), bobs["error"]["code"].as_str()),
        (Some("failed"), Some("credential_caller_unauthorized")),
        "{bobs}"
    );
    assert!(
        bobs["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("per person"),
        "{bobs}"
    );

    // A member authorizes their own grant of a per-person connection.
    let started = bob
        .post(&format!("{CONNECTION}/authorize"), json!({}))
        .await
        .ok();
    let callback = stack.consent(&started).await;
    let (status, page) = get_page(&callback).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(state_seen_by(&bob).await, "authorized");
    let bobs = echo_as(&bob, "bob's own").await;
    assert_eq!(bobs["state"], "succeeded", "{bobs}");
    assert_eq!(stack.token_requests("authorization_code").await, 2);

    // A member removed from the workspace takes their grant with them, and the authorization
    // they started and never finished.
    let pool = &stack.server.pool;
    let count = |sql: &'static str| async move {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(pool)
            .await
            .unwrap()
    };
    let personal_grants = "SELECT count(*) FROM oauth_grants WHERE holder <> 'shared'";
    let pending = "SELECT count(*) FROM oauth_pending";
    assert_eq!(count(personal_grants).await, 2);
    bob.post(&format!("{CONNECTION}/authorize"), json!({}))
        .await
        .ok();
    assert_eq!(count(pending).await, 1, "bob's unfinished authorization");
    owner
        .post("/api/v1/workspaces/acme/members/bob/remove", json!({}))
        .await
        .ok();
    assert_eq!(count(personal_grants).await, 1, "the owner's alone");
    assert_eq!(count(pending).await, 0, "bob's went with him");

    // Revoking empties every person's grant.
    owner
        .post(&format!("{CONNECTION}/credentials/revoke"), json!({}))
        .await
        .ok();
    assert_eq!(state_seen_by(owner).await, "needs_authorization");
    assert_eq!(count(personal_grants).await, 0);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_member_may_not_authorize_the_shared_grant(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    let bob = stack.server.member("acme", "bob", "member").await;
    bob.post(&format!("{CONNECTION}/authorize"), json!({}))
        .await
        .refused(403, "forbidden");
}
