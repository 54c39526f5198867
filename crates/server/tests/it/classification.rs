//! Tool classification: only a classified tool can be called; rediscovery reconciles the
//! catalog without ever changing a classification; classifying takes the manage-integrations
//! right (the route's matrix row is in `authz/`).

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// The tool `name` of a catalog (a discovery's `tools`, or the tools list).
#[track_caller]
fn tool<'a>(catalog: &'a Value, name: &str) -> &'a Value {
    catalog
        .as_array()
        .expect("a catalog")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name} in {catalog}"))
}

async fn discover(server: &TestServer, ws: &str) -> Value {
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/connections/fixture/discover"),
            json!({}),
        )
        .await
        .ok()["tools"]
        .clone()
}

#[sqlx::test(migrations = "../../migrations")]
async fn rediscovery_keeps_classifications_flags_changed_hints_and_refuses_what_cannot_run(
    pool: PgPool,
) {
    let scratch = scratch_dir("classify");
    let (hidden, annotations) = (scratch.path("hidden"), scratch.path("annotations"));
    // `cwd` is not offered at first; every tool that is gets classified by the setup.
    std::fs::write(&hidden, "cwd\n").unwrap();
    let server = TestServer::start(pool.clone()).await;
    let args = [
        "--hide-tools-file",
        &hidden,
        "--annotations-file",
        &annotations,
    ];
    let ws = setup_workspace(&server, "acme", &args).await.ws;
    let catalog = server
        .owner
        .get(&format!(
            "/api/v1/workspaces/{ws}/connections/fixture/tools"
        ))
        .await
        .ok();
    let echo = tool(&catalog, "echo");
    assert_eq!(echo["state"], "classified", "{echo}");
    assert_eq!(
        echo["classification"],
        json!({"side_effect": true, "risk": "low"})
    );
    assert_eq!(echo["hints"], json!({}), "the fixture's echo gives no hint");
    assert_eq!(
        echo["suggested"],
        json!({"side_effect": true, "risk": "high"}),
        "no hint: the fail-safe default"
    );
    let lookup = tool(&catalog, "lookup");
    assert_eq!(lookup["hints"]["readOnlyHint"], true, "{lookup}");
    assert_eq!(
        lookup["classification"],
        json!({"side_effect": false, "risk": "low"})
    );

    // The server now calls echo read-only, `cwd` appears and `big` vanishes.
    std::fs::write(&annotations, r#"{"echo": {"readOnlyHint": true}}"#).unwrap();
    std::fs::write(&hidden, "big\n").unwrap();
    let catalog = discover(&server, &ws).await;
    let echo = tool(&catalog, "echo");
    assert_eq!(echo["state"], "classified", "{echo}");
    assert_eq!(
        echo["classification"],
        json!({"side_effect": true, "risk": "low"}),
        "a hint never changes a classification"
    );
    assert_eq!(echo["needs_review"], true, "{echo}");
    assert_eq!(echo["hints"]["readOnlyHint"], true);
    assert_eq!(
        echo["suggested"],
        json!({"side_effect": false, "risk": "low"})
    );
    let noop = tool(&catalog, "noop");
    assert_eq!(
        (noop["state"].as_str(), noop["needs_review"].as_bool()),
        (Some("classified"), Some(false)),
        "unchanged: {noop}"
    );
    let cwd = tool(&catalog, "cwd");
    assert_eq!(cwd["state"], "unclassified", "new: {cwd}");
    assert!(cwd.get("classification").is_none(), "{cwd}");
    let big = tool(&catalog, "big");
    assert_eq!(big["state"], "unavailable", "{big}");
    assert_eq!(
        big["classification"],
        json!({"side_effect": true, "risk": "low"}),
        "kept for when it is back"
    );
    let events = server
        .owner
        .get(&format!(
            "/api/v1/workspaces/{ws}/connections/fixture/events"
        ))
        .await
        .ok();
    let last = events
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "discovery_succeeded")
        .expect("the rediscovery's event");
    assert_eq!(
        (
            &last["detail"]["added"],
            &last["detail"]["needing_review"],
            &last["detail"]["vanished"]
        ),
        (&json!(1), &json!(1), &json!(1)),
        "{last}"
    );

    // Unclassified, unavailable and unknown tools are refused, and nothing is queued.
    let calls = format!("/api/v1/workspaces/{ws}/calls");
    let stored = calls_stored(&pool).await;
    let message = server
        .owner
        .post(&calls, call_body("cwd", json!({})))
        .await
        .refused(409, "tool_unclassified");
    assert!(message.contains("switchyard tool classify"), "{message}");
    server
        .owner
        .post(&calls, call_body("big", json!({"bytes": 1})))
        .await
        .refused(409, "tool_unavailable");
    server
        .owner
        .post(&calls, call_body("nope", json!({})))
        .await
        .refused(404, "tool_not_found");
    assert_eq!(calls_stored(&pool).await, stored, "nothing queued");

    // The flagged tool still runs on its classification; classifying it again clears the flag.
    let call = server
        .owner
        .post(&calls, call_body("echo", json!({"text": "still"})))
        .await
        .ok();
    assert_eq!(
        server
            .owner
            .wait_call(&ws, call["id"].as_str().unwrap(), WAIT)
            .await["state"],
        "succeeded"
    );
    let echo = server
        .owner
        .classify(
            &ws,
            "fixture",
            "echo",
            json!({"side_effect": false, "risk": "low"}),
        )
        .await
        .ok();
    assert_eq!(
        (echo["needs_review"].as_bool(), &echo["classification"]),
        (Some(false), &json!({"side_effect": false, "risk": "low"})),
        "{echo}"
    );
    let cwd = server
        .owner
        .classify(
            &ws,
            "fixture",
            "cwd",
            json!({"side_effect": false, "risk": "medium"}),
        )
        .await
        .ok();
    assert_eq!(cwd["state"], "classified", "{cwd}");
    server
        .owner
        .post(&calls, call_body("cwd", json!({})))
        .await
        .ok();

    // Back in the next discovery, `big` runs on the classification it kept.
    std::fs::remove_file(&hidden).unwrap();
    let big = discover(&server, &ws).await;
    let big = tool(&big, "big");
    assert_eq!(
        (big["state"].as_str(), big["needs_review"].as_bool()),
        (Some("classified"), Some(false)),
        "{big}"
    );
    server
        .owner
        .post(&calls, call_body("big", json!({"bytes": 1})))
        .await
        .ok();
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_classification_needs_both_fields_an_admin_and_a_tool_in_the_catalog(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let ws = setup_workspace(&server, "acme", &[]).await.ws;
    let bob = server.user("bob").await;
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/members"),
            json!({"user": "bob"}),
        )
        .await
        .ok();
    let low = json!({"side_effect": true, "risk": "low"});
    bob.classify(&ws, "fixture", "echo", low.clone())
        .await
        .refused(403, "forbidden");
    for missing in [
        json!({"risk": "low"}),
        json!({"side_effect": true}),
        json!({"side_effect": true, "risk": "extreme"}),
    ] {
        let answer = server.owner.classify(&ws, "fixture", "echo", missing).await;
        assert_eq!(answer.status.as_u16(), 400, "{:?}", answer.body);
    }
    server
        .owner
        .classify(&ws, "fixture", "nope", low)
        .await
        .refused(404, "tool_not_found");
}

/// A reclassification's audit entry says what it replaced; a retired connection's tools cannot
/// be classified (restoring it asks for each classification again).
#[sqlx::test(migrations = "../../migrations")]
async fn a_reclassification_is_audited_with_what_it_replaced_and_retired_tools_refuse(
    pool: PgPool,
) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let owner = &server.owner;
    owner
        .classify(
            "acme",
            "fixture",
            "echo",
            json!({"side_effect": true, "risk": "high"}),
        )
        .await
        .ok();
    let entries = owner
        .get("/api/v1/workspaces/acme/audit?connection=fixture")
        .await
        .ok();
    let newest = &entries[0];
    assert_eq!(newest["action"], "tool.classified", "{entries}");
    assert_eq!(newest["object"]["name"], "echo", "{newest}");
    assert_eq!(
        newest["after"],
        json!({"side_effect": true, "risk": "high"}),
        "{newest}"
    );
    // setup_workspace classified it first, as the fixture's hints suggest.
    assert!(newest["before"]["risk"].is_string(), "{newest}");
    assert_ne!(newest["before"], newest["after"], "{newest}");

    owner
        .post(
            "/api/v1/workspaces/acme/connections/fixture/retire",
            json!({}),
        )
        .await
        .ok();
    let message = owner
        .classify(
            "acme",
            "fixture",
            "echo",
            json!({"side_effect": false, "risk": "low"}),
        )
        .await
        .refused(409, "connection_retired");
    assert!(message.contains("restore"), "{message}");
}
