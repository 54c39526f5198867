//! The Credentials section of a central connection's page over plain HTTP: the statuses, and on
//! a server with an installation key a masked form whose value the next call uses — while no
//! page or answer ever holds it; without `--installation-key-file` no form, and a line on how
//! to enable it.

use super::*;
use crate::credential_values::{CANARY, declared_connection};
use crate::evidence::run_to_end;

const PAGE: &str = "/workspaces/acme/connections/fixture";
const FORM: &str = "/workspaces/acme/connections/fixture/credentials/API_TOKEN";

/// The state shown for destination `name` on a connection page.
#[track_caller]
fn shown_state<'a>(body: &'a str, name: &str) -> &'a str {
    let row = &body[body
        .find(&format!("<tr data-credential=\"{name}\">"))
        .unwrap_or_else(|| panic!("no credential row {name}: {body}"))..];
    let marker = "data-credential-state>";
    let state = &row[row.find(marker).unwrap() + marker.len()..];
    &state[..state.find('<').unwrap()]
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_masked_form_sets_a_value_the_next_call_uses_and_no_page_shows(pool: PgPool) {
    let scratch = scratch_dir("web-credentials");
    let file = scratch.join("central.mcp-bindings.json");
    let keys = installation_key(&scratch);
    let server = TestServer::start_with(pool, move |c| {
        c.app.credentials_file = Some(file);
        c.app.installation_key = Some(keys);
    })
    .await;
    declared_connection(&server).await;
    let owner = &server.owner;

    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(owner.token()).await;
    let page = web.get(PAGE).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(shown_state(&page.body, "API_TOKEN"), "unbound");
    assert!(
        page.body.contains(&format!(r#"action="{FORM}""#))
            && page
                .body
                .contains(r#"<input type="password" autocomplete="off""#),
        "no masked form: {}",
        page.body
    );

    // Without the CSRF token nothing is set.
    let forged = web.post(FORM, &[("csrf", ""), ("value", CANARY)]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);

    // A refused value comes back with the app's message, without the value.
    let refused = web.post(FORM, &[("csrf", &csrf), ("value", "zq9")]).await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.body
    );
    assert!(
        refused.body.contains("credential_invalid"),
        "{}",
        refused.body
    );
    assert!(!refused.body.contains("zq9"), "{}", refused.body);

    let set = web.post(FORM, &[("csrf", &csrf), ("value", CANARY)]).await;
    assert_eq!(set.status, StatusCode::SEE_OTHER, "{}", set.body);
    assert!(!set.body.contains(CANARY));
    let back = set.location.expect("a redirect to the connection page");
    assert!(back.starts_with(PAGE), "{back}");
    let page = web.get(&back).await;
    assert_eq!(shown_state(&page.body, "API_TOKEN"), "present");
    assert!(!page.body.contains(CANARY), "{}", page.body);

    // The runner uses it: the fixture's `env` tool reads it (redacted in the result).
    owner.make_callable("acme", "fixture", "main").await;
    let call = run_to_end(&server, "acme", "env", json!({"name": "API_TOKEN"})).await;
    assert_eq!(call["state"], "succeeded", "{call}");
    assert_eq!(result_text(&call), "[REDACTED]", "{call}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn without_an_installation_key_no_form_is_shown(pool: PgPool) {
    let scratch = scratch_dir("web-credentials-off");
    let file = scratch.join("central.mcp-bindings.json");
    let server = TestServer::start_with(pool, move |c| c.app.credentials_file = Some(file)).await;
    declared_connection(&server).await;

    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(server.owner.token()).await;
    let page = web.get(PAGE).await;
    assert_eq!(shown_state(&page.body, "API_TOKEN"), "unbound");
    assert!(!page.body.contains(r#"type="password""#), "{}", page.body);
    assert!(
        page.body.contains("--installation-key-file"),
        "no line on how to enable it: {}",
        page.body
    );

    let refused = web.post(FORM, &[("csrf", &csrf), ("value", CANARY)]).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert!(!refused.body.contains(CANARY), "{}", refused.body);
    assert!(!scratch.join("central.mcp-secrets.json").exists());
}
