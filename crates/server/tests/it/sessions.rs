//! Warm sessions, release, cancellation of dispatched calls and orphan-free process groups.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

async fn events(server: &TestServer, ws: &str) -> Vec<Value> {
    server
        .owner
        .get(&format!(
            "/api/v1/workspaces/{ws}/connections/fixture/events"
        ))
        .await
        .ok()
        .as_array()
        .unwrap()
        .clone()
}

/// Polls the connection's events until `pick` finds one.
async fn wait_event(server: &TestServer, ws: &str, pick: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(event) = events(server, ws).await.into_iter().find(|e| pick(e)) {
            return event;
        }
        assert!(
            Instant::now() < deadline,
            "event never came: {:?}",
            events(server, ws).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn session_started_for(key: &str) -> impl Fn(&Value) -> bool + '_ {
    move |e| e["kind"] == "session_started" && e["detail"]["client_session_id"] == key
}

async fn run(server: &TestServer, ws: &str, mut body: Value, session: &str) -> Value {
    body["client_session_id"] = json!(session);
    let call = server
        .owner
        .post(&format!("/api/v1/workspaces/{ws}/calls"), body)
        .await
        .ok();
    server
        .owner
        .wait_call(ws, call["id"].as_str().unwrap(), WAIT)
        .await
}

#[sqlx::test(migrations = "../../migrations")]
async fn calls_with_one_session_key_share_one_process_until_released(pool: PgPool) {
    let scratch = scratch_dir("warm");
    let counter = scratch.path("count");
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &["--count-file", &counter]).await;
    let ws = &setup.ws;
    for i in 0..4 {
        assert_eq!(
            run(
                &server,
                ws,
                call_body("count", json!({"label": i.to_string()})),
                "s1"
            )
            .await["state"],
            "succeeded"
        );
    }
    assert_eq!(
        run(&server, ws, call_body("echo", json!({"text": "x"})), "s2").await["state"],
        "succeeded"
    );
    let started: Vec<Value> = events(&server, ws)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "session_started")
        .collect();
    let s1: Vec<&Value> = started
        .iter()
        .filter(|e| e["detail"]["client_session_id"] == "s1")
        .collect();
    assert_eq!(
        s1.len(),
        1,
        "four calls with key s1 should share one process: {started:?}"
    );
    assert_eq!(
        started
            .iter()
            .filter(|e| e["detail"]["client_session_id"] == "s2")
            .count(),
        1
    );
    let first_pid = s1[0]["detail"]["pid"].clone();
    assert!(first_pid.is_u64());

    let released = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/sessions/s1/release"),
            json!({}),
        )
        .await
        .ok();
    assert_eq!(released["connection_ids"].as_array().unwrap().len(), 1);
    wait_event(&server, ws, |e| {
        e["kind"] == "session_closed" && e["detail"]["reason"] == "released"
    })
    .await;
    wait_event(&server, ws, |e| {
        e["kind"] == "process_exited" && e["detail"]["pid"] == first_pid
    })
    .await;

    assert_eq!(
        run(
            &server,
            ws,
            call_body("count", json!({"label": "after"})),
            "s1"
        )
        .await["state"],
        "succeeded"
    );
    let s1_pids: Vec<Value> = events(&server, ws)
        .await
        .into_iter()
        .filter(|e| session_started_for("s1")(e))
        .map(|e| e["detail"]["pid"].clone())
        .collect();
    assert_eq!(s1_pids.len(), 2);
    assert_ne!(
        s1_pids[0], s1_pids[1],
        "a released session must not be reused"
    );
    assert_eq!(count_lines(&counter), 5);
}

#[sqlx::test(migrations = "../../migrations")]
async fn release_lets_an_active_call_finish(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let ws = &setup.ws;
    let mut body = call_body("slow", json!({"seconds": 1.5}));
    body["client_session_id"] = json!("busy");
    let call = server
        .owner
        .post(&format!("/api/v1/workspaces/{ws}/calls"), body)
        .await
        .ok();
    let id = call["id"].as_str().unwrap();
    wait_event(&server, ws, session_started_for("busy")).await;
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/sessions/busy/release"),
            json!({}),
        )
        .await
        .ok();
    let done = server.owner.wait_call(ws, id, WAIT).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(result_text(&done), "slept 1.5");
    wait_event(&server, ws, |e| {
        e["kind"] == "session_closed" && e["detail"]["reason"] == "released"
    })
    .await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn cancelling_a_dispatched_call_sends_mcp_cancellation(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let ws = &setup.ws;
    let mut body = call_body("slow", json!({"seconds": 600}));
    body["timeout_seconds"] = json!(3600);
    let call = server
        .owner
        .post(&format!("/api/v1/workspaces/{ws}/calls"), body)
        .await
        .ok();
    let id = call["id"].as_str().unwrap();
    let deadline = Instant::now() + WAIT;
    while server
        .owner
        .get(&format!("/api/v1/workspaces/{ws}/calls/{id}"))
        .await
        .ok()["state"]
        != "running"
    {
        assert!(Instant::now() < deadline, "the call never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answer = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls/{id}/cancel"),
            json!({}),
        )
        .await
        .ok();
    assert_eq!(answer["outcome"], "cancellation_requested");
    assert!(answer["call"]["cancel_requested_at"].is_string());
    let done = server.owner.wait_call(ws, id, WAIT).await;
    // The fixture stops on notifications/cancelled and does not answer: the effect of a request
    // that was sent cannot be known, so the call is unknown, never "cancelled".
    assert_eq!(done["state"], "unknown", "{done}");
    assert_eq!(done["error"]["code"], "cancelled");
}

/// Live (non-zombie) processes whose process group is `pgid`.
fn live_group_members(pgid: u64) -> Vec<u64> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u64>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesised command: state, ppid, pgrp, …
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2].parse::<u64>() == Ok(pgid) {
            members.push(pid);
        }
    }
    members
}

#[sqlx::test(migrations = "../../migrations")]
async fn closing_a_session_leaves_no_process_of_its_group(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &["--grandchild"]).await;
    let ws = &setup.ws;
    assert_eq!(
        run(&server, ws, call_body("echo", json!({"text": "x"})), "g").await["state"],
        "succeeded"
    );
    let started = wait_event(&server, ws, session_started_for("g")).await;
    let pgid = started["detail"]["pid"].as_u64().unwrap();
    assert!(
        live_group_members(pgid).len() >= 2,
        "the fixture and its grandchild should be running"
    );
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/sessions/g/release"),
            json!({}),
        )
        .await
        .ok();
    wait_event(&server, ws, |e| {
        e["kind"] == "process_exited" && e["detail"]["pid"] == pgid
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !live_group_members(pgid).is_empty() {
        assert!(
            Instant::now() < deadline,
            "orphans left: {:?}",
            live_group_members(pgid)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
