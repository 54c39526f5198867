//! Streamable HTTP sessions against the fixture behind a bearer token.

use super::fixture::*;
use serde_json::{Map, json};
use std::process::Stdio;
use std::time::Duration;
use switchyard_mcp_runner::{Dispatch, McpSession, SessionError, SessionLaunch, discover};
use switchyard_protocol::api::ConnectorSpec;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A fixture serving MCP over HTTP; killed when dropped.
pub(super) struct HttpFixture {
    url: String,
    token: String,
    _child: Child,
}

impl HttpFixture {
    /// Starts the fixture on a free loopback port, requiring a fresh bearer token (passed
    /// through the environment, never argv).
    pub(super) async fn start() -> Self {
        let token = format!("tok-{}", uuid::Uuid::new_v4());
        let mut child = Command::new(fixture_binary())
            .args([
                "http",
                "--listen",
                "127.0.0.1:0",
                "--bearer-env",
                "FIXTURE_BEARER",
            ])
            .env("FIXTURE_BEARER", &token)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the HTTP fixture");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the fixture announces its address in time")
            .expect("read the fixture's stdout")
            .expect("the fixture printed a line");
        let url = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected announcement {line:?}"))
            .to_owned();
        Self {
            url,
            token,
            _child: child,
        }
    }

    fn launch(&self, headers: Vec<(String, String)>) -> SessionLaunch {
        SessionLaunch {
            spec: ConnectorSpec::Http {
                url: self.url.clone(),
            },
            env: Vec::new(),
            headers,
        }
    }

    pub(super) fn authorized(&self) -> SessionLaunch {
        self.launch(vec![(
            "Authorization".to_owned(),
            format!("Bearer {}", self.token),
        )])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_the_bearer_header_calls_tools() {
    let fixture = HttpFixture::start().await;
    let session = McpSession::open(
        &fixture.authorized(),
        &EndpointGuard::device(),
        OPEN_DEADLINE,
    )
    .await
    .expect("open the HTTP session");
    assert_eq!(session.process_group_id(), None);
    assert_eq!(session.stderr_tail(), None);

    let dispatch = session
        .call_tool(
            "echo",
            args(&[("text", json!("over http"))]),
            Map::new(),
            CALL_TIMEOUT,
        )
        .await;

    match dispatch {
        Dispatch::Answered { result, is_error } => {
            assert!(!is_error);
            assert_eq!(first_text(&result), "over http");
        }
        other => panic!("expected an answer, got {other:?}"),
    }
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_over_http_lists_the_tools() {
    let fixture = HttpFixture::start().await;

    let tools = discover(
        &fixture.authorized(),
        &EndpointGuard::device(),
        OPEN_DEADLINE,
    )
    .await
    .expect("discovery")
    .tools;

    assert!(tools.iter().any(|tool| tool.name == "echo"));
    assert!(tools.iter().any(|tool| tool.name == "slow"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_token_is_unauthorized() {
    let fixture = HttpFixture::start().await;

    for headers in [
        Vec::new(),
        vec![("Authorization".to_owned(), "Bearer wrong-token".to_owned())],
    ] {
        let error = McpSession::open(
            &fixture.launch(headers),
            &EndpointGuard::device(),
            OPEN_DEADLINE,
        )
        .await
        .expect_err("refused");
        assert!(
            matches!(error, SessionError::Unauthorized { .. }),
            "got {error:?}"
        );
        assert!(!error.to_string().contains("wrong-token"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_value_with_a_line_break_is_refused_without_printing_it() {
    let fixture = HttpFixture::start().await;
    let launch = fixture.launch(vec![(
        "Authorization".to_owned(),
        "Bearer secret\r\nX-Injected: 1".to_owned(),
    )]);

    let error = McpSession::open(&launch, &EndpointGuard::device(), OPEN_DEADLINE)
        .await
        .expect_err("invalid header");

    assert!(
        matches!(&error, SessionError::InvalidHeader { name } if name == "Authorization"),
        "got {error:?}"
    );
    assert!(!format!("{error} {error:?}").contains("secret"));
}
