//! The bound on one message from an MCP server, kept while it is read: a `big` answer far over
//! it ends the call as `Oversized`, before the server could write it all.

use super::fixture::*;
use super::http::HttpFixture;
use serde_json::{Map, json};
use std::time::Duration;
use switchyard_mcp_runner::message_bound::MAX_MCP_MESSAGE_BYTES;
use switchyard_mcp_runner::{Dispatch, McpSession};

/// What the fixture is asked to answer: four times the bound.
const HUGE: usize = 4 * MAX_MCP_MESSAGE_BYTES;
/// Building and writing it takes the debug fixture seconds, more on a loaded machine.
const BIG_CALL_TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_answer_over_the_bound_ends_the_session_before_it_is_all_written() {
    // Everything the fixture writes to its stdout passes through `tee`, which stops when the
    // runner stops reading.
    let stdout_copy = temp_path("bound-stdout");
    let launch = switchyard_mcp_runner::SessionLaunch {
        spec: shell_spec(
            r#""$2" stdio | tee "$1""#,
            &[&stdout_copy, &fixture_binary()],
        ),
        env: Vec::new(),
        headers: Vec::new(),
    };
    let session = McpSession::open(&launch, &EndpointGuard::device(), OPEN_DEADLINE)
        .await
        .expect("open the session");

    let dispatch = session
        .call_tool(
            "big",
            args(&[("bytes", json!(HUGE))]),
            Map::new(),
            BIG_CALL_TIMEOUT,
        )
        .await;

    match &dispatch {
        Dispatch::Oversized { message } => assert!(message.contains("8 MiB"), "{message}"),
        other => panic!("expected an oversized answer, got {other:?}"),
    }
    assert!(session.is_closed(), "the session ended");
    session.close().await;
    let written = std::fs::metadata(&stdout_copy).map_or(0, |m| m.len());
    assert!(
        written < (HUGE / 2) as u64,
        "the fixture wrote {written} of {HUGE} bytes: the runner read on past the bound"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_answer_over_the_bound_is_oversized() {
    let fixture = HttpFixture::start().await;
    let session = McpSession::open(
        &fixture.authorized(),
        &EndpointGuard::device(),
        OPEN_DEADLINE,
    )
    .await
    .expect("open the HTTP session");

    let dispatch = session
        .call_tool(
            "big",
            args(&[("bytes", json!(HUGE))]),
            Map::new(),
            BIG_CALL_TIMEOUT,
        )
        .await;

    assert!(
        matches!(dispatch, Dispatch::Oversized { .. }),
        "expected an oversized answer, got {dispatch:?}"
    );
    session.close().await;
}
