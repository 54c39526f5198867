//! Taking things away from the inspector: retiring, placements, tokens, members and grants.

use super::*;

#[sqlx::test(migrations = "../../migrations")]
async fn an_admin_retires_and_restores_a_connection_from_its_page(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let bob = server.user("bob").await;
    server
        .owner
        .post("/api/v1/workspaces/acme/members", json!({"user": "bob"}))
        .await
        .ok();
    let page = "/workspaces/acme/connections/fixture";

    // A member sees no button, and is refused if they post anyway.
    let mut bob_web = WebClient::new(&server);
    let bob_csrf = bob_web.sign_in(bob.token()).await;
    let shown = bob_web.get(page).await;
    assert!(!shown.body.contains("/retire\""), "{}", shown.body);
    let refused = bob_web
        .post(&format!("{page}/retire"), &[("csrf", &bob_csrf)])
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(server.owner.token()).await;
    let without = web
        .post(&format!("{page}/retire"), &[("csrf", "f00d")])
        .await;
    assert_eq!(without.status, StatusCode::FORBIDDEN);
    assert!(
        server
            .owner
            .get("/api/v1/workspaces/acme/connections/fixture")
            .await
            .ok()
            .get("retired")
            .is_none()
    );
    let retired = web
        .post(&format!("{page}/retire"), &[("csrf", &csrf)])
        .await;
    assert_eq!(
        (retired.status, retired.location.as_deref()),
        (
            StatusCode::SEE_OTHER,
            Some("/workspaces/acme/connections/fixture?notice=retired")
        )
    );
    let list = web.get("/workspaces/acme").await;
    assert!(list.body.contains("badge muted\">retired"), "{}", list.body);
    let shown = web.get(page).await;
    assert!(
        shown.body.contains(&format!("action=\"{page}/restore\"")),
        "{}",
        shown.body
    );
    let restored = web
        .post(&format!("{page}/restore"), &[("csrf", &csrf)])
        .await;
    assert_eq!(restored.status, StatusCode::SEE_OTHER);
    let list = web.get("/workspaces/acme").await;
    assert!(
        !list.body.contains("badge muted\">retired"),
        "{}",
        list.body
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_devices_owner_accepts_a_placement_on_the_devices_page(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let (bob, device) = crate::placements::admin_places_on_bobs_device(&server).await;
    let accept = format!(
        "/workspaces/acme/devices/{}/placements/local/accept",
        device.id
    );

    // The admin who placed it sees no Accept button: it is not their device.
    let mut admin = WebClient::new(&server);
    let admin_csrf = admin.sign_in(server.owner.token()).await;
    let page = admin.get("/workspaces/acme/devices").await;
    assert!(!page.body.contains(&accept), "{}", page.body);
    assert!(page.body.contains("Nothing is placed on your devices"));

    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(bob.token()).await;
    let page = web.get("/workspaces/acme/devices").await;
    assert!(page.body.contains(&accept), "{}", page.body);
    assert!(
        page.body.contains(&fixture_bin()),
        "the owner sees what would run"
    );
    let digest = hidden(&page.body, "spec_digest").expect("the digest shown");

    // Without the CSRF token, or as the admin: nothing is written.
    let form = |csrf: &str| vec![("csrf", csrf.to_owned()), ("spec_digest", digest.clone())];
    assert_eq!(
        web.post_fields(&accept, form("f00d")).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        admin.post_fields(&accept, form(&admin_csrf)).await.status,
        StatusCode::FORBIDDEN
    );
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM placements")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);

    let done = web.post_fields(&accept, form(&csrf)).await;
    assert_eq!(
        done.location.as_deref(),
        Some("/workspaces/acme/devices?notice=placement-accepted")
    );
    let page = web.get(done.location.as_deref().unwrap()).await;
    assert!(page.body.contains("accepted"), "{}", page.body);
    assert!(
        !page.body.contains(&accept),
        "no Accept button once accepted"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_user_revokes_tokens_from_the_tokens_page(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let spare = server
        .owner
        .post("/api/v1/tokens", json!({"name": "laptop-cli"}))
        .await
        .ok();
    let spare_id = spare["token"]["id"].as_str().unwrap();
    let spare_client = Client::at(
        &format!("http://{}", server.addr),
        spare["secret"].as_str().unwrap(),
    );
    assert_eq!(spare_client.get("/api/v1/me").await.status, StatusCode::OK);

    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(server.owner.token()).await;
    let page = web.get("/tokens").await;
    let revoke = format!("/tokens/{spare_id}/revoke");
    assert!(page.body.contains("laptop-cli"), "{}", page.body);
    assert!(page.body.contains(&format!("action=\"{revoke}\"")));

    // Another user cannot revoke it: it is not theirs.
    let bob = server.user("bob").await;
    let mut bob_web = WebClient::new(&server);
    let bob_csrf = bob_web.sign_in(bob.token()).await;
    let refused = bob_web.post(&revoke, &[("csrf", &bob_csrf)]).await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND, "{}", refused.body);
    assert_eq!(spare_client.get("/api/v1/me").await.status, StatusCode::OK);

    let revoked = web.post(&revoke, &[("csrf", &csrf)]).await;
    assert_eq!(
        (revoked.status, revoked.location.as_deref()),
        (StatusCode::SEE_OTHER, Some("/tokens?notice=token-revoked"))
    );
    assert_eq!(
        spare_client.get("/api/v1/me").await.status,
        StatusCode::UNAUTHORIZED,
        "the revoked token is refused"
    );
    let page = web.get("/tokens").await;
    assert_eq!(
        page.status,
        StatusCode::OK,
        "this session's token still works"
    );
    assert!(!page.body.contains(&format!("action=\"{revoke}\"")));
    assert!(page.body.contains("badge muted\">revoked"), "{}", page.body);

    // Revoking the token this session signed in with ends the session.
    let own = bob_web.get("/tokens").await;
    let bob_tokens = bob.get("/api/v1/tokens").await.ok();
    let bob_id = bob_tokens[0]["id"].as_str().unwrap().to_owned();
    assert!(own.body.contains(&format!("/tokens/{bob_id}/revoke")));
    let ended = bob_web
        .post(&format!("/tokens/{bob_id}/revoke"), &[("csrf", &bob_csrf)])
        .await;
    assert_eq!(
        (ended.status, ended.location.as_deref()),
        (StatusCode::SEE_OTHER, Some("/sign-in?notice=token-revoked"))
    );
    assert!(
        bob_web
            .set_cookies
            .iter()
            .any(|c| c.starts_with("switchyard_session=;")),
        "{:?}",
        bob_web.set_cookies
    );
    let sign_in = bob_web.get("/sign-in?notice=token-revoked").await;
    assert!(
        sign_in.body.contains("you are signed out"),
        "{}",
        sign_in.body
    );
    assert_eq!(bob.get("/api/v1/me").await.status, StatusCode::UNAUTHORIZED);
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_admin_removes_members_and_revokes_grants_on_their_pages(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let bob = server.user("bob").await;
    let owner = &server.owner;
    owner
        .post("/api/v1/workspaces/acme/members", json!({"user": "bob"}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"user": "bob", "use": true, "manage": true}),
        )
        .await
        .ok();
    let members = "/workspaces/acme/members";
    let remove_bob = format!("{members}/bob/remove");
    let profile = "/workspaces/acme/profiles/main";
    let revoke = format!("{profile}/grants/revoke");

    // A plain member sees the lists but no buttons, and is refused if they post anyway.
    let mut bob_web = WebClient::new(&server);
    let bob_csrf = bob_web.sign_in(bob.token()).await;
    let shown = bob_web.get(members).await;
    assert!(shown.body.contains("bob") && !shown.body.contains("/remove\""));
    let shown = bob_web.get(profile).await;
    assert!(!shown.body.contains(&revoke), "{}", shown.body);
    let refused = bob_web
        .post(
            &revoke,
            &[("csrf", &bob_csrf), ("user", "owner"), ("grant", "use")],
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(owner.token()).await;
    let shown = web.get(profile).await;
    assert!(shown.body.contains(&format!("action=\"{revoke}\"")));
    assert!(
        shown.body.contains("Revoke Manage from bob"),
        "{}",
        shown.body
    );
    let bad = web
        .post(
            &revoke,
            &[("csrf", &csrf), ("user", "bob"), ("grant", "all")],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    let revoked = web
        .post(
            &revoke,
            &[("csrf", &csrf), ("user", "bob"), ("grant", "use")],
        )
        .await;
    assert_eq!(
        (revoked.status, revoked.location.as_deref()),
        (
            StatusCode::SEE_OTHER,
            Some("/workspaces/acme/profiles/main?notice=grant-revoked")
        )
    );
    let seen = owner
        .get("/api/v1/workspaces/acme/profiles/main")
        .await
        .ok();
    let bobs = seen["grants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["user_name"] == "bob")
        .expect("bob keeps Manage");
    assert_eq!(
        (&bobs["use"], &bobs["manage"]),
        (&json!(false), &json!(true))
    );

    // The only admin cannot be removed; the page says why.
    let shown = web.get(members).await;
    assert!(shown.body.contains(&format!("action=\"{remove_bob}\"")));
    let last = web
        .post(&format!("{members}/owner/remove"), &[("csrf", &csrf)])
        .await;
    assert_eq!(last.status, StatusCode::CONFLICT);
    assert!(last.body.contains("only admin"), "{}", last.body);

    let removed = web.post(&remove_bob, &[("csrf", &csrf)]).await;
    assert_eq!(
        (removed.status, removed.location.as_deref()),
        (
            StatusCode::SEE_OTHER,
            Some("/workspaces/acme/members?notice=member-removed")
        )
    );
    let listed = owner.get("/api/v1/workspaces/acme/members").await.ok();
    assert!(
        !listed.to_string().contains("\"bob\""),
        "bob is no member: {listed}"
    );
    let seen = owner
        .get("/api/v1/workspaces/acme/profiles/main")
        .await
        .ok();
    assert!(
        !seen.to_string().contains("\"bob\""),
        "nor holds grants: {seen}"
    );
    assert_eq!(bob_web.get(members).await.status, StatusCode::NOT_FOUND);
}
