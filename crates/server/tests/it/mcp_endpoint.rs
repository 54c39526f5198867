//! `/mcp`: Switchyard as an MCP server. Raw HTTP checks the transport's rules (auth, sessions,
//! both protocol eras' headers and error codes); rmcp's own client lists and calls tools as
//! an MCP client would.

use crate::harness::*;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::Duration;
use switchyard_testkit::poll::{Bound, Check};
use uuid::Uuid;

/// A client's W3C trace context.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A raw `/mcp` client: one principal's token, and the session it is in, if any.
#[derive(Clone)]
pub(crate) struct Raw {
    url: String,
    token: String,
    pub(crate) session: Option<String>,
    http: reqwest::Client,
}

/// A raw answer: status, headers and the JSON-RPC message(s) of its body.
pub(crate) struct RawAnswer {
    pub(crate) status: StatusCode,
    headers: reqwest::header::HeaderMap,
    pub(crate) body: String,
}

impl RawAnswer {
    /// The JSON-RPC messages of the body, whether JSON or an event stream.
    pub(crate) fn messages(&self) -> Vec<Value> {
        if let Ok(value) = serde_json::from_str::<Value>(&self.body) {
            return vec![value];
        }
        self.body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    }

    /// The response (result or error) among the messages.
    #[track_caller]
    pub(crate) fn response(&self) -> Value {
        self.messages()
            .into_iter()
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC response in {} {}", self.status, self.body))
    }

    /// The result of a successful response.
    #[track_caller]
    pub(crate) fn result(&self) -> Value {
        let response = self.response();
        assert!(
            response.get("result").is_some(),
            "expected a result: {} {response}",
            self.status
        );
        response["result"].clone()
    }
}

impl Raw {
    pub(crate) fn new(server: &TestServer, token: &str) -> Self {
        Raw {
            url: format!("http://{}/mcp", server.addr),
            token: token.to_owned(),
            session: None,
            http: reqwest::Client::new(),
        }
    }

    /// POSTs a JSON-RPC message with `headers` besides the transport's own.
    pub(crate) async fn post(&self, message: Value, headers: &[(&str, &str)]) -> RawAnswer {
        let mut request = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .json(&message);
        if !self.token.is_empty() {
            request = request.bearer_auth(&self.token);
        }
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let answer = request.send().await.expect("/mcp answers");
        let status = answer.status();
        let headers = answer.headers().clone();
        let body = answer.text().await.expect("a body");
        RawAnswer {
            status,
            headers,
            body,
        }
    }

    /// Starts a 2025-11-25 session: `initialize`, then `notifications/initialized`.
    pub(crate) async fn initialize(&mut self) -> Value {
        let answer = self
            .post(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw-test", "version": "1"},
                }}),
                &[],
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        let session = answer
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("a session id")
            .to_owned();
        let result = answer.result();
        self.session = Some(session);
        let done = self
            .post(
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                &[("mcp-protocol-version", "2025-11-25")],
            )
            .await;
        assert_eq!(done.status, StatusCode::ACCEPTED, "{}", done.body);
        result
    }

    /// A request in the session.
    pub(crate) async fn session_request(&self, id: u64, method: &str, params: Value) -> RawAnswer {
        self.post(
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            &[("mcp-protocol-version", "2025-11-25")],
        )
        .await
    }

    /// A stateless 2026-07-28 request with its required headers and `_meta`.
    pub(crate) async fn stateless(
        &self,
        method: &str,
        name: Option<&str>,
        mut params: Value,
    ) -> RawAnswer {
        params["_meta"] = stateless_meta();
        let mut headers = vec![
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", method),
        ];
        if let Some(name) = name {
            headers.push(("mcp-name", name));
        }
        self.post(
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
            &headers,
        )
        .await
    }
}

/// The `_meta` every 2026-07-28 request carries.
fn stateless_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// The names of a `tools/list` result.
fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .expect("a tool list")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The text of a `CallToolResult`.
pub(crate) fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_request_without_a_valid_user_token_is_refused_with_401_and_a_bearer_challenge(
    pool: PgPool,
) {
    let server = TestServer::start(pool).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "1"}}});
    for (token, says) in [
        ("", "Authorization: Bearer"),
        ("sy_not_a_token", "not valid"),
        ("sy_dev_0123456789", "device credential"),
    ] {
        let answer = Raw::new(&server, token).post(initialize.clone(), &[]).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);
        let challenge = answer.headers["www-authenticate"].to_str().unwrap();
        assert!(challenge.starts_with("Bearer"), "{challenge}");
        let body: Value = serde_json::from_str(&answer.body).expect("a JSON error body");
        assert_eq!(body["error"]["code"], "unauthenticated");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{token}: {message}");
    }
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_person_lists_and_calls_granted_tools_in_a_session(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let mut raw = Raw::new(&server, server.owner.token());
    let init = raw.initialize().await;
    assert_eq!(init["serverInfo"]["name"], "switchyard");
    let instructions = init["instructions"].as_str().expect("instructions");
    assert!(
        instructions.contains(r#""mcp_server":"fixture","tools":"#),
        "{instructions}"
    );

    let listed = raw
        .session_request(1, "tools/list", json!({}))
        .await
        .result();
    let names = tool_names(&listed);
    assert!(names.contains(&"fixture__echo".to_owned()), "{names:?}");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "listed in a deterministic order");

    let called = raw
        .session_request(
            2,
            "tools/call",
            json!({"name": "fixture__echo", "arguments": {"text": "hello"},
                   "_meta": {"traceparent": TRACEPARENT}}),
        )
        .await
        .result();
    assert_eq!(called["isError"], json!(false), "{called}");
    assert_eq!(text_of(&called), "hello");
    // The client's trace context is kept with the call, for the runner to send on.
    let stored: Option<String> = sqlx::query_scalar("SELECT traceparent FROM calls")
        .fetch_one(&server.pool)
        .await
        .unwrap();
    assert_eq!(stored.as_deref(), Some(TRACEPARENT));

    // The call is an ordinary Switchyard call, submitted by the person.
    let calls = server.owner.get("/api/v1/workspaces/acme/calls").await.ok();
    let call = &calls["calls"][0];
    assert_eq!(call["tool_name"], "echo");
    assert_eq!(call["state"], "succeeded");
}

#[sqlx::test(migrations = "../../migrations")]
async fn another_replica_answers_a_session_the_first_started(pool: PgPool) {
    let first = TestServer::start(pool).await;
    setup_workspace(&first, "acme", &[]).await;
    let second = TestServer::replica(&first).await;
    let mut on_first = Raw::new(&first, first.owner.token());
    on_first.initialize().await;

    let mut on_second = Raw::new(&second, first.owner.token());
    on_second.session = on_first.session.clone();
    let listed = on_second
        .session_request(1, "tools/list", json!({}))
        .await
        .result();
    assert!(tool_names(&listed).contains(&"fixture__echo".to_owned()));
    let called = on_second
        .session_request(
            2,
            "tools/call",
            json!({"name": "fixture__echo", "arguments": {"text": "from the replica"}}),
        )
        .await
        .result();
    assert_eq!(text_of(&called), "from the replica");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_session_does_not_exist_for_another_principal(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let mut owner = Raw::new(&server, server.owner.token());
    owner.initialize().await;
    let bob = server.member("acme", "bob", "member").await;
    let mut as_bob = Raw::new(&server, bob.token());
    as_bob.session = owner.session.clone();
    let answer = as_bob.session_request(1, "tools/list", json!({})).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
    let body: Value = serde_json::from_str(&answer.body).expect("a JSON error body");
    assert_eq!(body["error"]["code"], "mcp_session_not_found");

    // Ended by its client, it is gone for its owner too.
    let ended = owner
        .http
        .delete(&owner.url)
        .bearer_auth(&owner.token)
        .header("mcp-session-id", owner.session.as_deref().unwrap())
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success(), "{}", ended.status());
    let answer = owner.session_request(2, "tools/list", json!({})).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_stateless_era_discovers_lists_and_calls_with_its_headers(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let raw = Raw::new(&server, server.owner.token());

    let discovered = raw.stateless("server/discover", None, json!({})).await;
    assert_eq!(discovered.status, StatusCode::OK, "{}", discovered.body);
    let discovered = discovered.result();
    assert!(
        discovered.to_string().contains("2026-07-28"),
        "{discovered}"
    );
    assert!(
        discovered.to_string().contains("mcp_server"),
        "{discovered}"
    );

    let listed = raw.stateless("tools/list", None, json!({})).await.result();
    assert!(tool_names(&listed).contains(&"fixture__echo".to_owned()));

    let called = raw
        .stateless(
            "tools/call",
            Some("fixture__echo"),
            json!({"name": "fixture__echo", "arguments": {"text": "stateless"}}),
        )
        .await
        .result();
    assert_eq!(text_of(&called), "stateless");

    // An Mcp-Name that is not the body's tool: 400, header mismatch (-32020).
    let mismatch = raw
        .stateless(
            "tools/call",
            Some("fixture__other"),
            json!({"name": "fixture__echo", "arguments": {"text": "x"}}),
        )
        .await;
    assert_eq!(
        mismatch.status,
        StatusCode::BAD_REQUEST,
        "{}",
        mismatch.body
    );
    assert_eq!(mismatch.response()["error"]["code"], -32020);

    // Without the Mcp-Method header the request is refused the same way.
    let mut params = json!({});
    params["_meta"] = stateless_meta();
    let missing = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": params}),
            &[("mcp-protocol-version", "2026-07-28")],
        )
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{}", missing.body);
    assert_eq!(missing.response()["error"]["code"], -32020);

    // Without the required `_meta`, invalid params (-32602).
    let bare = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}),
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/list"),
            ],
        )
        .await;
    assert_eq!(bare.status, StatusCode::BAD_REQUEST, "{}", bare.body);
    assert_eq!(bare.response()["error"]["code"], -32602);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_refusal_is_a_tool_error_with_its_code_and_a_bad_request_id_is_invalid_params(
    pool: PgPool,
) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let mut raw = Raw::new(&server, server.owner.token());
    raw.initialize().await;

    let bad = raw
        .session_request(
            1,
            "tools/call",
            json!({"name": "fixture__echo", "arguments": {"text": "x"},
                   "_meta": {"io.switchyard/request_id": "not-a-uuid"}}),
        )
        .await
        .response();
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(
        bad["error"]["message"].as_str().unwrap().contains("UUID"),
        "{bad}"
    );

    let unknown = raw
        .session_request(
            2,
            "tools/call",
            json!({"name": "fixture__nope", "arguments": {}}),
        )
        .await
        .response();
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    // The same request_id with other arguments: Switchyard refuses, as a tool error.
    let request_id = Uuid::new_v4().to_string();
    let call = |text: &str| {
        json!({"name": "fixture__echo", "arguments": {"text": text},
               "_meta": {"io.switchyard/request_id": request_id}})
    };
    let first = raw
        .session_request(3, "tools/call", call("one"))
        .await
        .result();
    assert_eq!(text_of(&first), "one");
    let replayed = raw
        .session_request(4, "tools/call", call("one"))
        .await
        .result();
    assert_eq!(
        text_of(&replayed),
        "one",
        "a retry returns the same call's result"
    );
    let conflict = raw
        .session_request(5, "tools/call", call("two"))
        .await
        .result();
    assert_eq!(conflict["isError"], json!(true), "{conflict}");
    assert_eq!(
        conflict["structuredContent"]["error"]["code"],
        "mcp_request_conflict"
    );
    let calls = server.owner.get("/api/v1/workspaces/acme/calls").await.ok();
    assert_eq!(calls["calls"].as_array().unwrap().len(), 1);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_call_approved_after_the_hold_runs_once_and_a_retry_gets_its_result(pool: PgPool) {
    let server = TestServer::start_with(pool, |config| {
        config.app.mcp_call_hold = Duration::from_millis(300);
    })
    .await;
    let counter = scratch_dir("mcp-approval");
    let counter = counter.path("count");
    let gated = approval_gate(&server, &counter).await;
    let mut raw = Raw::new(&server, server.owner.token());
    raw.initialize().await;
    let request_id = Uuid::new_v4().to_string();
    let call = json!({"name": "fixture__count", "arguments": {"label": "mcp"},
                      "_meta": {"io.switchyard/request_id": request_id, "progressToken": "p1"}});

    let held = raw.session_request(1, "tools/call", call.clone()).await;
    let progress: Vec<Value> = held
        .messages()
        .into_iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "progress while held: {}", held.body);
    let held = held.result();
    assert_eq!(held["isError"], json!(true), "{held}");
    let text = text_of(&held);
    assert!(text.contains("awaits a person's approval"), "{text}");
    assert!(text.contains("switchyard approval"), "{text}");
    assert!(text.contains(&request_id), "{text}");
    let call_id = held["structuredContent"]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(count_lines(&counter), 0);

    gated
        .approver
        .post(
            &format!("/api/v1/workspaces/acme/approvals/{call_id}/approve"),
            json!({}),
        )
        .await
        .ok();
    server
        .owner
        .wait_call("acme", &call_id, Duration::from_secs(20))
        .await;

    let retried = raw.session_request(2, "tools/call", call).await.result();
    assert_eq!(retried["isError"], json!(false), "{retried}");
    assert_eq!(count_lines(&counter), 1, "the call ran once");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_declined_call_tells_the_model_a_person_declined(pool: PgPool) {
    let server = TestServer::start_with(pool, |config| {
        config.app.mcp_call_hold = Duration::from_millis(300);
    })
    .await;
    let counter = scratch_dir("mcp-declined");
    let counter = counter.path("count");
    let gated = approval_gate(&server, &counter).await;
    let mut raw = Raw::new(&server, server.owner.token());
    raw.initialize().await;
    let request_id = Uuid::new_v4().to_string();
    let call = json!({"name": "fixture__count", "arguments": {"label": "mcp"},
                      "_meta": {"io.switchyard/request_id": request_id}});
    let held = raw
        .session_request(1, "tools/call", call.clone())
        .await
        .result();
    let call_id = held["structuredContent"]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    gated
        .approver
        .post(
            &format!("/api/v1/workspaces/acme/approvals/{call_id}/decline"),
            json!({"reason": "not today"}),
        )
        .await
        .ok();
    let declined = raw.session_request(2, "tools/call", call).await.result();
    assert_eq!(declined["isError"], json!(true), "{declined}");
    let text = text_of(&declined);
    assert!(text.contains("A person declined"), "{text}");
    assert!(text.contains("not today"), "{text}");
    assert_eq!(count_lines(&counter), 0);
}

#[sqlx::test(migrations = "../../migrations")]
async fn rmcp_s_own_client_lists_and_calls_through_mcp_in_both_eras(pool: PgPool) {
    use rmcp::ServiceExt;
    use rmcp::model::{CallToolRequestParams, ProtocolVersion};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    for era in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        let config =
            StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", server.addr))
                .auth_header(server.owner.token());
        let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
        let client = if era == ProtocolVersion::V_2026_07_28 {
            let lifecycle = ClientLifecycleMode::Discover {
                preferred_versions: vec![era.clone()],
            };
            ().serve_with_lifecycle(transport, lifecycle).await
        } else {
            ().serve(transport).await
        }
        .expect("the client connects");
        let negotiated = client
            .peer_info()
            .expect("the server's info")
            .protocol_version
            .clone();
        assert_eq!(negotiated, era);
        let tools = client.list_all_tools().await.expect("tools/list");
        assert!(tools.iter().any(|t| t.name == "fixture__echo"), "{era}");
        let mut params = CallToolRequestParams::new("fixture__echo");
        params.arguments = json!({"text": format!("via rmcp, {era}")})
            .as_object()
            .cloned();
        let result = client.call_tool(params).await.expect("tools/call");
        let result = serde_json::to_value(result).unwrap();
        assert_eq!(text_of(&result), format!("via rmcp, {era}"), "{result}");
        client.cancel().await.expect("the client closes");
    }
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_client_s_cancellation_cancels_the_held_call(pool: PgPool) {
    let server = TestServer::start_with(pool, |config| {
        config.app.mcp_call_hold = Duration::from_secs(30);
    })
    .await;
    let counter = scratch_dir("mcp-cancel");
    let counter = counter.path("count");
    approval_gate(&server, &counter).await;
    let mut raw = Raw::new(&server, server.owner.token());
    raw.initialize().await;
    let pending = {
        let raw = raw.clone();
        tokio::spawn(async move {
            raw.session_request(
                7,
                "tools/call",
                json!({"name": "fixture__count", "arguments": {"label": "mcp"}}),
            )
            .await
        })
    };
    let held = wait_for_held_call(&server).await;
    let cancelled = raw
        .post(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 7, "reason": "the user stopped"}}),
            &[("mcp-protocol-version", "2025-11-25")],
        )
        .await;
    assert_eq!(cancelled.status, StatusCode::ACCEPTED, "{}", cancelled.body);
    let call = server
        .owner
        .wait_call("acme", &held, Duration::from_secs(20))
        .await;
    assert_eq!(call["state"], "cancelled", "{call}");
    pending.abort();
    assert_eq!(count_lines(&counter), 0);
}

/// The id of the one call awaiting approval in `acme`, once there is one.
pub(crate) async fn wait_for_held_call(server: &TestServer) -> String {
    Bound::new(Duration::from_secs(20), Duration::from_millis(20))
        .until(async || {
            let calls = server.owner.get("/api/v1/workspaces/acme/calls").await.ok();
            let held = calls["calls"]
                .as_array()
                .and_then(|calls| calls.iter().find(|c| c["state"] == "awaiting_approval"))
                .and_then(|call| call["id"].as_str());
            Ok(match held {
                Some(id) => Check::Done(id.to_owned()),
                None => Check::NotYet(format!("no call awaits approval: {calls}")),
            })
        })
        .await
        .expect("a call awaits approval")
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_tasks_client_gets_the_held_call_as_a_task_it_polls(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let counter = scratch_dir("mcp-task");
    let counter = counter.path("count");
    let gated = approval_gate(&server, &counter).await;
    let mut raw = Raw::new(&server, server.owner.token());
    let answer = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
                "clientInfo": {"name": "raw-test", "version": "1"},
            }}),
            &[],
        )
        .await;
    raw.session = answer
        .headers
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    raw.post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &[("mcp-protocol-version", "2025-11-25")],
    )
    .await;

    // A call that runs at once is answered at once, even to a tasks client.
    let echoed = raw
        .session_request(
            1,
            "tools/call",
            json!({"name": "fixture__echo", "arguments": {"text": "now"}}),
        )
        .await
        .result();
    assert_eq!(text_of(&echoed), "now", "{echoed}");

    let created = raw
        .session_request(
            2,
            "tools/call",
            json!({"name": "fixture__count", "arguments": {"label": "task"}}),
        )
        .await
        .result();
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    let task_id = created["taskId"].as_str().expect("a task id").to_owned();
    // The task is the Switchyard call.
    let call = server
        .owner
        .get(&format!("/api/v1/workspaces/acme/calls/{task_id}"))
        .await
        .ok();
    assert_eq!(call["state"], "awaiting_approval");

    let polled = raw
        .session_request(3, "tasks/get", json!({"taskId": task_id}))
        .await
        .result();
    assert_eq!(polled["status"], "working", "{polled}");
    gated
        .approver
        .post(
            &format!("/api/v1/workspaces/acme/approvals/{task_id}/approve"),
            json!({}),
        )
        .await
        .ok();
    server
        .owner
        .wait_call("acme", &task_id, Duration::from_secs(20))
        .await;
    let done = raw
        .session_request(4, "tasks/get", json!({"taskId": task_id}))
        .await
        .result();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "counted", "{done}");
    assert_eq!(count_lines(&counter), 1);

    // Another task, cancelled by the client.
    let second = raw
        .session_request(
            5,
            "tools/call",
            json!({"name": "fixture__count", "arguments": {"label": "cancel me"}}),
        )
        .await
        .result();
    let second_id = second["taskId"].as_str().unwrap().to_owned();
    raw.session_request(6, "tasks/cancel", json!({"taskId": second_id}))
        .await
        .result();
    let cancelled = raw
        .session_request(7, "tasks/get", json!({"taskId": second_id}))
        .await
        .result();
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");

    // A task is read as its call is: under Use on its profile. Without it, there is no task.
    let carol = server.member("acme", "carol", "member").await;
    let carol = Raw::new(&server, carol.token());
    let mut meta = stateless_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] =
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let foreign = carol
        .post(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
                   "params": {"taskId": task_id, "_meta": meta}}),
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tasks/get"),
                ("mcp-name", &task_id),
            ],
        )
        .await
        .response();
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    assert_eq!(count_lines(&counter), 1);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_session_unused_for_a_day_is_swept_and_then_unknown(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let mut raw = Raw::new(&server, server.owner.token());
    raw.initialize().await;
    sqlx::query("UPDATE mcp_sessions SET last_used_at = now() - interval '25 hours'")
        .execute(&server.pool)
        .await
        .unwrap();
    Bound::new(Duration::from_secs(20), Duration::from_millis(50))
        .until(async || {
            let left: i64 = sqlx::query_scalar("SELECT count(*) FROM mcp_sessions")
                .fetch_one(&server.pool)
                .await
                .unwrap();
            Ok(if left == 0 {
                Check::Done(())
            } else {
                Check::NotYet(format!("the sweeper left {left} session(s)"))
            })
        })
        .await
        .expect("the sweeper removes the session");
    let answer = raw.session_request(1, "tools/list", json!({})).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_loopback_server_refuses_another_host_name(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let raw = Raw::new(&server, server.owner.token());
    let answer = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "1"}}}),
            &[("host", "rebound.example")],
        )
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{}", answer.body);
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM mcp_sessions")
        .fetch_one(&server.pool)
        .await
        .unwrap();
    assert_eq!(sessions, 0);
}
