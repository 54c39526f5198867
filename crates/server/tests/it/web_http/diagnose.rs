//! The Diagnose button of a connection's page over plain HTTP: the same checks as the API, in
//! order, with the failure class and the server's stderr tail; CSRF enforced.

use super::*;

/// The status shown for check `check` on a diagnosis page, after checking the checks are
/// listed in the API's order.
#[track_caller]
fn shown_status<'a>(body: &'a str, check: &str) -> &'a str {
    let order: Vec<&str> = body
        .match_indices("<tr data-check=\"")
        .map(|(at, marker)| {
            let rest = &body[at + marker.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect();
    assert_eq!(
        order,
        [
            "enabled",
            "approved",
            "transport",
            "credentials",
            "catalog",
            "grants",
            "handshake"
        ],
        "{body}"
    );
    let row = &body[body.find(&format!("<tr data-check=\"{check}\">")).unwrap()..];
    let marker = "data-check-status>";
    let status = &row[row.find(marker).unwrap() + marker.len()..];
    &status[..status.find('<').unwrap()]
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_diagnose_button_shows_the_checks_in_order(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let owner = &server.owner;
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "broken", "transport": "stdio", "command": "/bin/sh",
                   "args": ["-c", "echo 'cannot open /srv/tool.db' >&2; exit 1"]}),
        )
        .await
        .ok();
    owner
        .post("/api/v1/connectors/broken/approve", json!({}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "broken", "connector": "broken"}),
        )
        .await
        .ok();

    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(owner.token()).await;
    let page = web.get("/workspaces/acme/connections/fixture").await;
    assert!(
        page.body
            .contains(r#"action="/workspaces/acme/connections/fixture/diagnose""#),
        "no Diagnose button: {}",
        page.body
    );

    let refused = web
        .post(
            "/workspaces/acme/connections/fixture/diagnose",
            &[("csrf", "")],
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    let healthy = web
        .post(
            "/workspaces/acme/connections/fixture/diagnose",
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(healthy.status, StatusCode::OK, "{}", healthy.body);
    assert!(
        healthy.body.contains("data-diagnosis>all passed<"),
        "{}",
        healthy.body
    );
    assert_eq!(shown_status(&healthy.body, "handshake"), "passed");

    let broken = web
        .post(
            "/workspaces/acme/connections/broken/diagnose",
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(broken.status, StatusCode::OK, "{}", broken.body);
    assert_eq!(shown_status(&broken.body, "handshake"), "failed");
    assert_eq!(shown_status(&broken.body, "grants"), "failed");
    assert!(
        broken.body.contains("<code data-failure>not_mcp</code>"),
        "{}",
        broken.body
    );
    assert!(
        broken.body.contains("cannot open /srv/tool.db"),
        "the stderr tail is shown: {}",
        broken.body
    );
}
