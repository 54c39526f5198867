//! The world the authorization matrix asks about, built once through the API as people would:
//! two workspaces, a user for each role, a connector, connections, a profile, settled calls,
//! paired devices (one live, one revoked, one of the other workspace) and the spare objects
//! that the matrix's successful writes use up.

use super::principal::{Principal, Who};
use crate::devices::{acquire_lease, client_with, poll, start_pairing};
use crate::harness::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;
use switchyard_testkit::poll::{Bound, Check};

const SETTLE: Duration = Duration::from_secs(60);

/// Everything the matrix's requests name, and who asks.
pub struct World {
    /// The value of each `{name}` in a path or body.
    pub params: BTreeMap<&'static str, String>,
    /// One identity per principal, in [`Principal::ALL`] order.
    pub who: Vec<Who>,
}

impl World {
    /// `text` with each `{name}` the world knows replaced, `{me}` by `me` and `{uuid}` by a
    /// fresh UUID; `{name=other}` takes the value of `other`.
    pub fn fill(&self, text: &str, me: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(len) = rest[open..].find('}') else {
                break;
            };
            let inside = &rest[open + 1..open + len];
            let key = inside.split('=').next_back().unwrap();
            let value = match key {
                "me" => Some(me.to_owned()),
                "uuid" => Some(uuid::Uuid::new_v4().to_string()),
                _ => self.params.get(key).cloned(),
            };
            match value {
                Some(value) => out.push_str(&value),
                None => out.push_str(&rest[open..=open + len]),
            }
            rest = &rest[open + len + 1..];
        }
        out.push_str(rest);
        out
    }

    /// A path with its parameters filled.
    pub fn fill_path(&self, path: &str) -> String {
        let filled = self.fill(path, "");
        assert!(!filled.contains('{'), "unfilled parameter in {path}");
        filled
    }

    /// A JSON body with every string filled; a string that is one placeholder of a number
    /// (`"{epoch}"`) becomes that number.
    pub fn fill_json(&self, body: &Value, me: &str) -> Value {
        match body {
            Value::String(text) => {
                let filled = self.fill(text, me);
                let whole = text.starts_with('{') && text.ends_with('}') && text.len() > 2;
                match filled.parse::<i64>() {
                    Ok(number) if whole => json!(number),
                    _ => Value::String(filled),
                }
            }
            Value::Array(items) => items.iter().map(|v| self.fill_json(v, me)).collect(),
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| (k.clone(), self.fill_json(v, me)))
                .collect(),
            other => other.clone(),
        }
    }
}

/// Adds `user` to `ws` with `role`, as `admin`.
async fn add_member(admin: &Client, ws: &str, user: &str, role: &str) {
    admin
        .post(
            &format!("/api/v1/workspaces/{ws}/members"),
            json!({"user": user, "role": role}),
        )
        .await
        .ok();
}

/// Pairs a device named `name` into `ws`, bound to profile `main`, approved by `approver`;
/// returns the device view and its credential.
async fn pair(server: &TestServer, approver: &Client, ws: &str, name: &str) -> (Value, String) {
    let started = start_pairing(server, name).await;
    let device = approver
        .post(
            &format!("/api/v1/workspaces/{ws}/devices/approve"),
            json!({"code": started["code"], "profile": "main"}),
        )
        .await
        .ok();
    let status = poll(server, &started).await.ok();
    let credential = status["credential"]
        .as_str()
        .expect("a credential")
        .to_owned();
    (device, credential)
}

/// Submits an echo call on `main`/`fixture` in warm session `matrix-session` as `user` and
/// waits until it settles and its result is published as evidence; returns the call's id and
/// its evidence's.
async fn settled_call(user: &Client, ws: &str) -> (String, String) {
    let mut body = call_body("echo", json!({"text": "matrix"}));
    body["client_session_id"] = json!("matrix-session");
    let call = user
        .post(&format!("/api/v1/workspaces/{ws}/calls"), body)
        .await
        .ok();
    let id = call["id"].as_str().unwrap().to_owned();
    let settled = user
        .wait_call_until(ws, &id, SETTLE, |c| {
            c["lineage"]["evidence_ids"]
                .as_array()
                .is_some_and(|e| !e.is_empty())
        })
        .await;
    assert_eq!(settled["state"], "succeeded", "{settled}");
    let evidence = settled["lineage"]["evidence_ids"][0].as_str().unwrap();
    (id, evidence.to_owned())
}

/// Releases warm session `matrix-session` and waits until every MCP server process the
/// central runner started for `ws`'s `fixture` has exited, so that no session event is
/// written while the matrix runs.
async fn drain_sessions(user: &Client, ws: &str) {
    user.post(
        &format!("/api/v1/workspaces/{ws}/sessions/matrix-session/release"),
        json!({}),
    )
    .await
    .ok();
    let path = format!("/api/v1/workspaces/{ws}/connections/fixture/events");
    Bound::new(SETTLE, Duration::from_millis(50))
        .until(async || {
            let events = user.get(&path).await.ok();
            let count = |kind: &str| {
                events
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|e| e["kind"] == kind)
                    .count()
            };
            Ok(if count("session_started") == count("process_exited") {
                Check::Done(())
            } else {
                Check::NotYet(format!("sessions still open: {events}"))
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Builds the world. `acme` is the workspace every request names: `alice` created it (its
/// admin), `bob` is a plain member, `uma`, `mia` and `sam` members holding exactly Use, Manage
/// or Share on profile `main`, and the installation `owner` a plain member with no grant. `nora`
/// belongs to no workspace. `globex`, the owner's, has a device of its own.
pub async fn build(server: &TestServer) -> World {
    let owner = &server.owner;
    let alice = server.user("alice").await;
    alice
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    let bob = server.user("bob").await;
    let uma = server.user("uma").await;
    let mia = server.user("mia").await;
    let sam = server.user("sam").await;
    let nora = server.user("nora").await;
    server.user("victim").await;
    server.user("newcomer").await;
    server.user("web-victim").await;
    for (user, role) in [
        ("bob", "member"),
        ("uma", "member"),
        ("mia", "member"),
        ("sam", "member"),
        ("owner", "member"),
        ("victim", "member"),
        ("web-victim", "member"),
    ] {
        add_member(&alice, "acme", user, role).await;
    }

    // The owner's connector; alice's connection (discovered) and profile.
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "fixture-conn", "transport": "stdio", "command": fixture_bin(), "args": ["stdio"]}),
        )
        .await
        .ok();
    owner
        .post("/api/v1/connectors/fixture-conn/approve", json!({}))
        .await
        .ok();
    alice
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "fixture", "connector": "fixture-conn"}),
        )
        .await
        .ok();
    let discovered = alice
        .post(
            "/api/v1/workspaces/acme/connections/fixture/discover",
            json!({}),
        )
        .await
        .ok();
    assert!(
        discovered["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    alice.classify_all("acme", "fixture").await;
    alice
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "main", "connections": ["fixture"]}),
        )
        .await
        .ok();
    for (user, grant) in [("uma", "use"), ("mia", "manage"), ("sam", "share")] {
        alice
            .post(
                "/api/v1/workspaces/acme/profiles/main/grants",
                json!({"user": user, grant: true}),
            )
            .await
            .ok();
    }
    // Two agents: one the rows configure, a spare the revoke row uses up.
    let agent = alice
        .post("/api/v1/workspaces/acme/agents", json!({"name": "bot"}))
        .await
        .ok();
    alice
        .post(
            "/api/v1/workspaces/acme/agents",
            json!({"name": "spare-bot"}),
        )
        .await
        .ok();
    let captured = alice
        .send(
            reqwest::Method::PUT,
            "/api/v1/workspaces/acme/capture-policy",
            Some(json!({"capture_managed_tool_results": true})),
        )
        .await
        .ok();
    assert_eq!(captured["capture_managed_tool_results"], true);
    let (call, evidence) = settled_call(&uma, "acme").await;
    let (spare_call, _) = settled_call(&uma, "acme").await;
    drain_sessions(&uma, "acme").await;

    // Devices of acme, all approved by uma: the one that acts, one revoked, and two spares
    // that the revoke rows (API and web) revoke.
    let (device, device_credential) = pair(server, &uma, "acme", "laptop").await;
    let (revoked, revoked_credential) = pair(server, &uma, "acme", "old-laptop").await;
    uma.post(
        &format!(
            "/api/v1/workspaces/acme/devices/{}/revoke",
            revoked["id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await
    .ok();
    let (spare_device, _) = pair(server, &uma, "acme", "spare").await;
    let (web_spare_device, _) = pair(server, &uma, "acme", "web-spare").await;
    let device_id = device["id"].as_str().unwrap().to_owned();
    let local = alice
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "local", "connector": "fixture-conn", "runner": device["runner"]}),
        )
        .await
        .ok();
    let placements = uma
        .get("/api/v1/workspaces/acme/devices/placements")
        .await
        .ok();
    let local_digest = placements["placements"]
        .as_array()
        .or(placements.as_array())
        .and_then(|all| all.iter().find(|p| p["connection_name"] == "local"))
        .map(|p| p["spec_digest"].as_str().expect("a digest").to_owned())
        .expect("uma's device lists the placement of `local`");
    let device_client = client_with(server, &device_credential);
    let operation = device_client
        .post(
            "/api/v1/workspaces/acme/operations",
            json!({"environment": "default", "profile": "main", "task": "the matrix"}),
        )
        .await
        .ok();

    // globex: the owner's, with a device of its own.
    setup_workspace(server, "globex", &[]).await;
    let (_, other_credential) = pair(server, owner, "globex", "desktop").await;

    // Both live devices hold their runner lease, so the runner rows find one.
    let holder = uuid::Uuid::new_v4();
    let epoch = acquire_lease(&device_from(server, &device_credential), holder).await;
    let other_epoch = acquire_lease(&device_from(server, &other_credential), holder).await;
    assert_eq!(epoch, other_epoch, "both leases begin at the same epoch");

    // Pairings waiting for approval (API and web) and for a poll; spare tokens of bob's.
    let approve_code = start_pairing(server, "to-approve").await["code"].to_string();
    let web_approve_code = start_pairing(server, "to-approve-web").await["code"].to_string();
    let polled = start_pairing(server, "to-poll").await;
    let spare_token = bob
        .post("/api/v1/tokens", json!({"name": "spare"}))
        .await
        .ok();
    let web_spare_token = bob
        .post("/api/v1/tokens", json!({"name": "web-spare"}))
        .await
        .ok();

    let text = |v: &Value| v.as_str().expect("a string").to_owned();
    let connection = alice
        .get("/api/v1/workspaces/acme/connections/fixture")
        .await
        .ok();
    let profile = alice
        .get("/api/v1/workspaces/acme/profiles/main")
        .await
        .ok();
    let params: BTreeMap<&'static str, String> = [
        ("ws", "acme".to_owned()),
        ("connector", "fixture-conn".to_owned()),
        ("connection", "fixture".to_owned()),
        ("profile", "main".to_owned()),
        ("tool", "echo".to_owned()),
        ("credential_name", "API_TOKEN".to_owned()),
        ("environment", "default".to_owned()),
        ("fixture_bin", fixture_bin()),
        ("call", call),
        ("spare_call", spare_call),
        ("user", "victim".to_owned()),
        ("web_member", "web-victim".to_owned()),
        ("session", "matrix-session".to_owned()),
        ("file", "app.css".to_owned()),
        ("evidence", evidence),
        ("device", text(&spare_device["id"])),
        ("web_device", text(&web_spare_device["id"])),
        ("device_id", device_id),
        ("connection_id", text(&connection["id"])),
        ("agent", "bot".to_owned()),
        ("spare_agent", "spare-bot".to_owned()),
        ("agent_id", text(&agent["agent"]["id"])),
        ("profile_id", text(&profile["id"])),
        ("local", text(&local["id"])),
        ("local_digest", local_digest),
        ("operation", text(&operation["id"])),
        ("holder", holder.to_string()),
        ("epoch", epoch.to_string()),
        ("code", approve_code.trim_matches('"').to_owned()),
        ("web_code", web_approve_code.trim_matches('"').to_owned()),
        ("pairing", text(&polled["pairing_id"])),
        ("poll_secret", text(&polled["poll_secret"])),
        ("token", text(&spare_token["token"]["id"])),
        ("web_token", text(&web_spare_token["token"]["id"])),
    ]
    .into_iter()
    .collect();

    let who = vec![
        Who::anonymous(),
        Who::user("nora", nora.token()),
        Who::user("bob", bob.token()),
        Who::user("alice", alice.token()),
        Who::user("uma", uma.token()),
        Who::user("mia", mia.token()),
        Who::user("sam", sam.token()),
        Who::user("owner", owner.token()),
        Who::device("laptop", &device_credential),
        Who::device("old-laptop", &revoked_credential),
        Who::device("desktop", &other_credential),
    ];
    assert_eq!(who.len(), Principal::ALL.len());
    World { params, who }
}

/// The `Device` helper of the device tests for a bare credential.
fn device_from(server: &TestServer, credential: &str) -> crate::devices::Device {
    crate::devices::Device {
        id: String::new(),
        runner: String::new(),
        credential: credential.to_owned(),
        client: client_with(server, credential),
    }
}
