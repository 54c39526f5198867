//! Traces and logs of a device call (issue 46): with `OTEL_EXPORTER_OTLP_ENDPOINT` set, the
//! server and the device runner export their spans over OTLP/HTTP to a listener in the test,
//! and the API request, the runner's `tools/call` and the `_meta.traceparent` the fixture
//! received share the caller's trace id; without an endpoint nothing exports; with
//! `--log-format json` every log line is a JSON object and those in a call's scope carry its
//! `call_id` and `trace_id`.

use super::harness::{DEADLINE, Paired, Server, WORKSPACE, fixture_spec, scratch};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_protocol::RequestId;
use switchyard_protocol::api::SubmitCall;
use switchyard_testkit::poll::{Bound, Check};

/// The caller's trace context, sent as the API request's `traceparent` header.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
/// The caller's span, the parent of the server's request span.
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// One span a process exported, as the listener decoded it (OTLP/JSON).
#[derive(Clone, Debug)]
struct Exported {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    kind: i64,
    attributes: Value,
}

impl Exported {
    /// The string (or integer, as text) value of attribute `key`.
    fn attribute(&self, key: &str) -> Option<String> {
        let value = &self.attributes[key];
        value["stringValue"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| value["intValue"].as_str().map(str::to_owned))
            .or_else(|| value["intValue"].as_i64().map(|v| v.to_string()))
    }
}

/// A minimal OTLP/HTTP receiver: `POST /v1/traces` with a JSON body, every span kept.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Exported>>>,
    requests: Arc<Mutex<usize>>,
}

impl Receiver {
    /// Serves on a free loopback port; the endpoint to configure
    /// (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    async fn start() -> (Receiver, String) {
        let receiver = Receiver::default();
        let app = Router::new()
            .route("/v1/traces", post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the OTLP receiver");
        let addr = listener.local_addr().expect("its address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, format!("http://{addr}"))
    }

    fn spans(&self) -> Vec<Exported> {
        self.spans.lock().expect("spans").clone()
    }

    /// Waits until a span named `name` from `service` in trace `trace_id` has arrived.
    async fn wait_for(&self, service: &str, name: &str, trace_id: &str) -> Exported {
        Bound::new(DEADLINE, Duration::from_millis(100))
            .until(async || {
                let spans = self.spans();
                Ok(
                    match spans
                        .iter()
                        .find(|s| s.service == service && s.name == name && s.trace_id == trace_id)
                    {
                        Some(span) => Check::Done(span.clone()),
                        None => Check::NotYet(format!(
                            "no span {name:?} of {service} in trace {trace_id}; received: {:?}",
                            spans
                                .iter()
                                .map(|s| (&s.service, &s.name, &s.trace_id))
                                .collect::<Vec<_>>()
                        )),
                    },
                )
            })
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }
}

/// The handler: decodes an `ExportTraceServiceRequest` in OTLP/JSON.
async fn receive(State(receiver): State<Receiver>, body: Bytes) -> &'static str {
    *receiver.requests.lock().expect("requests") += 1;
    let request: Value = serde_json::from_slice(&body).expect("an OTLP/JSON export request");
    let mut spans = receiver.spans.lock().expect("spans");
    for resource in request["resourceSpans"].as_array().into_iter().flatten() {
        let service =
            attributes(&resource["resource"]["attributes"])["service.name"]["stringValue"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            for span in scope["spans"].as_array().into_iter().flatten() {
                spans.push(Exported {
                    service: service.clone(),
                    name: span["name"].as_str().unwrap_or_default().to_owned(),
                    trace_id: span["traceId"].as_str().unwrap_or_default().to_owned(),
                    span_id: span["spanId"].as_str().unwrap_or_default().to_owned(),
                    parent_span_id: span["parentSpanId"].as_str().unwrap_or_default().to_owned(),
                    kind: span["kind"].as_i64().unwrap_or_default(),
                    attributes: attributes(&span["attributes"]),
                });
            }
        }
    }
    "{}"
}

/// OTLP's `[{"key": k, "value": v}]` as `{k: v}`.
fn attributes(list: &Value) -> Value {
    Value::Object(
        list.as_array()
            .into_iter()
            .flatten()
            .filter_map(|kv| Some((kv["key"].as_str()?.to_owned(), kv["value"].clone())))
            .collect(),
    )
}

/// Submits `tool` on the device connection through the API with the caller's `traceparent`
/// header; the call's id.
async fn submit_traced(server: &Server, tool: &str, arguments: Value) -> String {
    let answer: Value = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/workspaces/{WORKSPACE}/calls",
            server.url()
        ))
        .bearer_auth(server.token())
        .header("traceparent", format!("00-{TRACE_ID}-{CALLER_SPAN}-01"))
        .json(&SubmitCall {
            request_id: RequestId::new(),
            profile_id: "dev".to_owned(),
            connection_id: "dfx".to_owned(),
            tool_name: tool.to_owned(),
            arguments,
            environment_id: None,
            client_session_id: None,
            timeout_seconds: Some(30),
            operation_id: None,
        })
        .send()
        .await
        .expect("submit the call")
        .json()
        .await
        .expect("the call as JSON");
    answer["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no call id in {answer}"))
        .to_owned()
}

/// The `_meta.traceparent` of each `tools/call` the fixture behind `stdin_copy` received.
fn received_traceparents(stdin_copy: &Path) -> Vec<String> {
    std::fs::read_to_string(stdin_copy)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|request| request["method"] == "tools/call")
        .filter_map(|request| {
            request["params"]["_meta"]["traceparent"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// The environment that points a process at `endpoint`, exporting OTLP/JSON promptly.
fn exporting_to(endpoint: &str) -> [(&str, &str); 3] {
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ]
}

#[sqlx::test(migrations = false)]
async fn one_trace_runs_from_the_caller_through_the_device_runner_to_the_mcp_server(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let (receiver, endpoint) = Receiver::start().await;
    let env = exporting_to(&endpoint);
    let server = Server::start_with_env(&db, &env).await;
    let copy = scratch("traces-exported").join("stdin");
    let paired = Paired::set_up(&server, "traces-exported", fixture_spec(&copy, &[])).await;
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &env);
    runner.wait_for_log("lease epoch").await;
    paired.discover_classified().await;

    let call = submit_traced(&server, "echo", json!({"text": "traced"})).await;
    paired.wait_for_state(&call, "succeeded").await;

    // The server's span of the API request continues the caller's span.
    let request = receiver
        .wait_for(
            "switchyard-server",
            "POST /api/v1/workspaces/{ws}/calls",
            TRACE_ID,
        )
        .await;
    assert_eq!(request.parent_span_id, CALLER_SPAN, "{request:?}");
    assert_eq!(request.kind, 2, "a server span: {request:?}");
    let submit = receiver
        .wait_for("switchyard-server", "submit call", TRACE_ID)
        .await;
    assert_eq!(submit.parent_span_id, request.span_id, "{submit:?}");
    assert_eq!(submit.attribute("call_id").as_deref(), Some(call.as_str()));
    let lease = receiver
        .wait_for("switchyard-server", "lease", TRACE_ID)
        .await;
    assert_eq!(lease.parent_span_id, submit.span_id, "{lease:?}");

    // The device runner's spans, in the same trace: its call, the start, the tools/call.
    let run = receiver
        .wait_for("switchyard-mcp-runner", "call", TRACE_ID)
        .await;
    assert_eq!(run.parent_span_id, submit.span_id, "{run:?}");
    let start = receiver
        .wait_for("switchyard-mcp-runner", "start call", TRACE_ID)
        .await;
    assert_eq!(start.parent_span_id, run.span_id, "{start:?}");
    let tools_call = receiver
        .wait_for("switchyard-mcp-runner", "tools/call echo", TRACE_ID)
        .await;
    assert_eq!(tools_call.parent_span_id, run.span_id, "{tools_call:?}");
    assert_eq!(tools_call.kind, 3, "a client span: {tools_call:?}");
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "echo"),
        ("gen_ai.operation.name", "execute_tool"),
        ("network.transport", "pipe"),
    ] {
        assert_eq!(
            tools_call.attribute(key).as_deref(),
            Some(value),
            "{key}: {tools_call:?}"
        );
    }
    assert!(
        tools_call.attribute("jsonrpc.request.id").is_some(),
        "{tools_call:?}"
    );
    assert_eq!(tools_call.attribute("error.type"), None, "{tools_call:?}");

    // The MCP server was handed the tools/call span's context.
    assert_eq!(
        received_traceparents(&copy),
        [format!("00-{TRACE_ID}-{}-01", tools_call.span_id)],
        "{}",
        runner.log_text()
    );

    // A failed call says why on its tools/call span.
    let failing = submit_traced(&server, "fail", json!({"message": "no"})).await;
    paired.wait_for_state(&failing, "tool_error").await;
    let failed = Bound::new(DEADLINE, Duration::from_millis(100))
        .until(async || {
            let spans = receiver.spans();
            Ok(
                match spans
                    .iter()
                    .find(|s| s.name == "tools/call fail" && s.trace_id == TRACE_ID)
                {
                    Some(span) => Check::Done(span.clone()),
                    None => Check::NotYet("no span tools/call fail".to_owned()),
                },
            )
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        failed.attribute("error.type").as_deref(),
        Some("tool_error"),
        "{failed:?}"
    );
}

/// Whether process `pid` has a thread named `name`.
fn has_thread(pid: u32, name: &str) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the process's threads")
        .filter_map(Result::ok)
        .any(|task| {
            std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.trim() == name)
        })
}

#[sqlx::test(migrations = false)]
async fn without_an_endpoint_nothing_exports(_: PgPoolOptions, db: PgConnectOptions) {
    // The protocol and service name alone configure no exporter.
    let env = [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_SERVICE_NAME", "unexported"),
    ];
    let server = Server::start_with_env(&db, &env).await;
    let copy = scratch("traces-none").join("stdin");
    let paired = Paired::set_up(&server, "traces-none", fixture_spec(&copy, &[])).await;
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &env);
    runner.wait_for_log("lease epoch").await;
    paired.discover_classified().await;
    let call = submit_traced(&server, "echo", json!({"text": "untraced"})).await;
    paired.wait_for_state(&call, "succeeded").await;

    // No exporter runs in either process…
    assert!(!has_thread(server.pid(), "otlp-export"));
    let runner_pid = runner.pid().expect("the runner is running");
    assert!(!has_thread(runner_pid, "otlp-export"));
    // …and the MCP server still gets the caller's trace context, as it came.
    assert_eq!(
        received_traceparents(&copy),
        [format!("00-{TRACE_ID}-{CALLER_SPAN}-01")]
    );
}

/// The lines of a JSON log, each parsed; fails on a line that is not a JSON object.
#[track_caller]
fn json_lines(log: &str, whose: &str) -> Vec<Value> {
    log.lines()
        .map(|line| {
            serde_json::from_str::<Value>(line)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| panic!("a {whose} log line that is no JSON object: {line}"))
        })
        .collect()
}

/// A field of any span a JSON log line happened in.
fn span_field<'a>(line: &'a Value, field: &str) -> Option<&'a str> {
    line["spans"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(std::iter::once(&line["span"]))
        .find_map(|span| span[field].as_str())
}

/// Checks a JSON log: every line in `call`'s scope (a span with its `call_id`) carries the
/// caller's trace id, and there is at least one.
#[track_caller]
fn lines_in_the_call_carry_its_trace(log: &str, whose: &str, call: &str) {
    let lines = json_lines(log, whose);
    let in_call: Vec<&Value> = lines
        .iter()
        .filter(|line| span_field(line, "call_id") == Some(call))
        .collect();
    assert!(
        !in_call.is_empty(),
        "no {whose} log line in call {call}: {log}"
    );
    for line in in_call {
        assert_eq!(span_field(line, "trace_id"), Some(TRACE_ID), "{line}");
    }
}

#[sqlx::test(migrations = false)]
async fn json_logs_carry_the_call_id_and_trace_id(_: PgPoolOptions, db: PgConnectOptions) {
    let env = [
        ("SWITCHYARD_LOG_FORMAT", "json"),
        ("SWITCHYARD_LOG", "info,switchyard_server=debug,sqlx=debug"),
    ];
    let server = Server::start_with_env(&db, &env).await;
    let copy = scratch("traces-json").join("stdin");
    let paired = Paired::set_up(&server, "traces-json", fixture_spec(&copy, &[])).await;
    let runner_env = [
        ("SWITCHYARD_LOG_FORMAT", "json"),
        ("SWITCHYARD_LOG", "debug"),
    ];
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &runner_env);
    runner.wait_for_log("runner lease acquired").await;
    paired.discover_classified().await;
    let call = submit_traced(&server, "echo", json!({"text": "logged"})).await;
    paired.wait_for_state(&call, "succeeded").await;

    lines_in_the_call_carry_its_trace(&server.log_text(), "server", &call);
    lines_in_the_call_carry_its_trace(&runner.log_text(), "runner", &call);
}
