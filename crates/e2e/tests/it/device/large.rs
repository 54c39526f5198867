//! Calls with large arguments on a device, next to the same calls on central: the lease answer
//! that carries them does not fit on a runner channel line, nor does the receipt of their
//! echo; each goes over plain HTTP instead, the channel stays open, and the calls end exactly
//! as they do on central.

use super::harness::{DEADLINE, Paired, Server, WORKSPACE, fixture_spec, scratch};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::time::Duration;
use switchyard_mcp_runner::message_bound::MAX_MCP_MESSAGE_BYTES;
use switchyard_protocol::RequestId;
use switchyard_protocol::api::SubmitCall;
use switchyard_protocol::runner::CHANNEL_MAX_LINE;
use switchyard_testkit::poll::{Bound, Check};
use switchyard_testkit::setup;

/// What the device runner logs each time it opens a runner channel.
const CHANNEL_OPENED: &str = "opened the runner channel";

/// `len` bytes of text that differ along their length (so that a cut or a shuffle shows).
fn text_of(len: usize, seed: usize) -> String {
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..len)
        .map(|i| char::from(alphabet[(i / 7 + i * 13 + seed) % alphabet.len()]))
        .collect()
}

/// Submits `echo` of `text` on `connection` under `profile`; returns the call id.
async fn submit_echo(paired: &Paired, profile: &str, connection: &str, text: &str) -> String {
    let call = paired
        .api
        .post(
            &format!("/workspaces/{WORKSPACE}/calls"),
            &SubmitCall {
                request_id: RequestId::new(),
                profile_id: profile.to_owned(),
                connection_id: connection.to_owned(),
                tool_name: "echo".to_owned(),
                arguments: json!({ "text": text }),
                environment_id: None,
                client_session_id: None,
                timeout_seconds: Some(60),
                operation_id: None,
            },
        )
        .await
        .expect("submit the call");
    call["id"].as_str().expect("call id").to_owned()
}

/// Polls the call until it is finished (any final state); returns it.
async fn finished(paired: &Paired, call: &str) -> Value {
    Bound::new(DEADLINE, Duration::from_millis(100))
        .until(async || {
            let view = paired.call(call).await;
            Ok(match view["state"].as_str() {
                Some("queued" | "leased" | "running") => {
                    Check::NotYet(format!("call {call} did not finish: {}", view["state"]))
                }
                _ => Check::Done(view),
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// What a user compares between two runs of the same call.
fn outcome(view: &Value) -> Value {
    json!({
        "state": view["state"],
        "result": view["result"],
        "result_truncated": view["result_truncated"],
        "error": view["error"],
    })
}

#[sqlx::test(migrations = false)]
async fn calls_with_large_arguments_end_on_a_device_as_on_central_over_one_channel(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("large-mcp").join("stdin");
    let paired = Paired::set_up(&server, "large", fixture_spec(&copy, &[])).await;
    setup::connection(&paired.api, WORKSPACE, "cfx", "fixture", None)
        .await
        .expect("create the central connection");
    setup::discover_classified(&paired.api, WORKSPACE, "cfx")
        .await
        .expect("discover and classify the central connection's tools");
    setup::profile(&paired.api, WORKSPACE, "central", &["cfx"], "alice")
        .await
        .expect("create profile central");
    paired.discover_with_a_runner_of_its_own().await;

    // Discovered by a runner of its own, so that the calls below are queued before the
    // runner starts and its first lease takes them at once: each fits on a channel line,
    // together they do not.
    let batch: Vec<String> = (0..4).map(|i| text_of(CHANNEL_MAX_LINE / 3, i)).collect();
    let mut batch_calls = Vec::new();
    for text in &batch {
        batch_calls.push(submit_echo(&paired, "dev", "dfx", text).await);
    }
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &[]);
    for (call, text) in batch_calls.iter().zip(&batch) {
        let view = finished(&paired, call).await;
        assert_eq!(view["state"], "succeeded", "{}", runner.log_text());
        assert_eq!(view["result"]["content"][0]["text"], **text);
    }

    for (seed, size) in [(10, 100 * 1024), (11, 1024 * 1024)] {
        let text = text_of(size, seed);
        let on_device = submit_echo(&paired, "dev", "dfx", &text).await;
        let on_central = submit_echo(&paired, "central", "cfx", &text).await;
        let on_device = finished(&paired, &on_device).await;
        let on_central = finished(&paired, &on_central).await;
        assert_eq!(on_central["state"], "succeeded", "{size} bytes on central");
        assert_eq!(
            outcome(&on_device),
            outcome(&on_central),
            "{size} bytes: the device's call ended otherwise than central's; runner log:\n{}",
            runner.log_text()
        );
        assert_eq!(on_device["runner"], format!("device:{}", paired.device_id));
    }

    // A small call after them still goes over the same channel, opened once.
    let small = submit_echo(&paired, "dev", "dfx", "small").await;
    let small = finished(&paired, &small).await;
    assert_eq!(small["state"], "succeeded");
    assert_eq!(small["result"]["content"][0]["text"], "small");
    let log = runner.log_text();
    assert_eq!(log.matches(CHANNEL_OPENED).count(), 1, "{log}");
    assert!(!log.contains("closing it"), "{log}");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
}

/// Submits `big` of `bytes` on `connection` under `profile`; returns the call id.
async fn submit_big(paired: &Paired, profile: &str, connection: &str, bytes: usize) -> String {
    let call = paired
        .api
        .post(
            &format!("/workspaces/{WORKSPACE}/calls"),
            &SubmitCall {
                request_id: RequestId::new(),
                profile_id: profile.to_owned(),
                connection_id: connection.to_owned(),
                tool_name: "big".to_owned(),
                arguments: json!({ "bytes": bytes }),
                environment_id: None,
                client_session_id: None,
                timeout_seconds: Some(60),
                operation_id: None,
            },
        )
        .await
        .expect("submit the call");
    call["id"].as_str().expect("call id").to_owned()
}

/// An answer far over the bound on one MCP message is not read: the call ran, so it is
/// `unknown` (never retried), with `answer_too_large`, on a device as on central; a result
/// between the stored bound and the message bound is cut to 1 MiB on both.
#[sqlx::test(migrations = false)]
async fn an_answer_over_the_message_bound_is_unknown_on_a_device_as_on_central(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("oversized-mcp").join("stdin");
    let paired = Paired::set_up(&server, "oversized", fixture_spec(&copy, &[])).await;
    setup::connection(&paired.api, WORKSPACE, "cfx", "fixture", None)
        .await
        .expect("create the central connection");
    setup::discover_classified(&paired.api, WORKSPACE, "cfx")
        .await
        .expect("discover and classify the central connection's tools");
    setup::profile(&paired.api, WORKSPACE, "central", &["cfx"], "alice")
        .await
        .expect("create profile central");
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &[]);
    paired.discover_classified().await;

    let huge = 4 * MAX_MCP_MESSAGE_BYTES;
    let on_device = submit_big(&paired, "dev", "dfx", huge).await;
    let on_central = submit_big(&paired, "central", "cfx", huge).await;
    let on_device = finished(&paired, &on_device).await;
    let on_central = finished(&paired, &on_central).await;
    for view in [&on_device, &on_central] {
        assert_eq!(view["state"], "unknown", "{view}");
        assert_eq!(view["error"]["code"], "answer_too_large", "{view}");
    }
    assert_eq!(outcome(&on_device), outcome(&on_central));

    // Longer than a stored result, shorter than a message: cut alike.
    let between = 3 * 1024 * 1024;
    let on_device = submit_big(&paired, "dev", "dfx", between).await;
    let on_central = submit_big(&paired, "central", "cfx", between).await;
    let on_device = finished(&paired, &on_device).await;
    let on_central = finished(&paired, &on_central).await;
    assert_eq!(on_central["state"], "succeeded");
    assert_eq!(on_central["result_truncated"], true);
    assert_eq!(
        outcome(&on_device),
        outcome(&on_central),
        "{}",
        runner.log_text()
    );
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
}
