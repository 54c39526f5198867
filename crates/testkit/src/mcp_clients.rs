//! MCP clients nobody here wrote, run as real processes against a streamable HTTP endpoint
//! (Switchyard's `/mcp`, or the fixture's HTTP mode): the official Python SDK's client and
//! the MCP Inspector's CLI. `scripts/test.sh` installs both, pinned, and exports where they
//! are:
//!
//! - `SWITCHYARD_TEST_PYTHON_MCP`: the Python of a virtual environment holding `mcp` 2.3.0
//!   (PyPI). It runs `mcp_clients/client.py` beside this crate's `src/`, one session that lists
//!   the tools and may call one with `_meta`, printing JSON. That SDK's `Client` offers
//!   2025-11-25 through the initialize handshake (`mode="legacy"`; it also knows 2024-11-05 to
//!   2025-06-18) and 2026-07-28 stateless (its default `mode="auto"` probes `server/discover`,
//!   takes 2026-07-28 when the server offers it and falls back to the handshake otherwise).
//! - `SWITCHYARD_TEST_INSPECTOR`: the CLI entry (`clients/cli/build/index.js`) of
//!   `@modelcontextprotocol/inspector` 2.12.0 (npm), run with `node`, one process per method.
//!   `--protocol-era legacy` negotiates 2025-11-25 with `initialize`, `modern` pins 2026-07-28
//!   (`server/discover`, no fallback).
//!
//! Each function takes an [`Era`], so a test says which era it exercises and checks the
//! negotiated version. Bearer tokens stay out of every command line: the Python client reads
//! its token from an environment variable, the Inspector from a private config file (its only
//! other way is `--header` on the command line).
//!
//! A client that fails (a refused token, an unreachable endpoint, a protocol error) is an
//! [`Error::McpClient`] carrying the client's exit status and stderr.

use crate::error::{Error, Result};
use crate::scratch::Scratch;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// Where `scripts/test.sh` points at the Python of the virtual environment holding `mcp`.
pub const PYTHON_MCP_VAR: &str = "SWITCHYARD_TEST_PYTHON_MCP";
/// Where `scripts/test.sh` points at the Inspector CLI's JavaScript entry.
pub const INSPECTOR_VAR: &str = "SWITCHYARD_TEST_INSPECTOR";
/// The environment variable the Python client reads its bearer token from.
const TOKEN_VAR: &str = "SWITCHYARD_MCP_CLIENT_TOKEN";
/// The longest one client process may take; a call through `/mcp` may wait for its answer.
const CLIENT_BOUND: Duration = Duration::from_secs(120);
/// The `_meta` key carrying a Switchyard request id through `tools/call`.
pub const REQUEST_ID_META: &str = "io.switchyard/request_id";
/// The `_meta` key carrying W3C trace context through `tools/call`.
pub const TRACEPARENT_META: &str = "traceparent";

/// The protocol era a client is pinned to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25: `initialize`, then requests in a session (`Mcp-Session-Id`).
    Handshake,
    /// 2026-07-28: stateless requests, `server/discover`, `Mcp-Method`/`Mcp-Name` headers.
    Stateless,
}

impl Era {
    /// Both eras, for tests that run once per era.
    pub const ALL: [Era; 2] = [Era::Handshake, Era::Stateless];

    /// The protocol version the clients negotiate in this era.
    pub fn protocol_version(self) -> &'static str {
        match self {
            Era::Handshake => "2025-11-25",
            Era::Stateless => "2026-07-28",
        }
    }

    /// The Python SDK's `Client(mode=…)`. For 2026-07-28 its default, `auto`: it asks
    /// `server/discover` (which carries the instructions) and takes 2026-07-28 when offered,
    /// where `mode="2026-07-28"` would skip the probe and never see the instructions. A test
    /// checks [`Listing::protocol_version`], so a fallback to the handshake cannot pass unseen.
    fn python_mode(self) -> &'static str {
        match self {
            Era::Handshake => "legacy",
            Era::Stateless => "auto",
        }
    }

    /// The Inspector's `protocolEra`.
    fn inspector_era(self) -> &'static str {
        match self {
            Era::Handshake => "legacy",
            Era::Stateless => "modern",
        }
    }
}

/// A streamable HTTP MCP endpoint and the bearer token to present (none: no header).
#[derive(Clone)]
pub struct Endpoint {
    url: String,
    token: Option<String>,
}

impl Endpoint {
    /// `url` (e.g. `http://127.0.0.1:PORT/mcp`) with `Authorization: Bearer <token>`.
    pub fn new(url: impl Into<String>, token: Option<&str>) -> Endpoint {
        Endpoint {
            url: url.into(),
            token: token.map(str::to_owned),
        }
    }
}

/// The token never reaches a test's output.
impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// A `tools/call` to make: the tool's name, its arguments and string `_meta` entries.
#[derive(Clone, Debug)]
pub struct ToolCall {
    /// The tool's name as the endpoint lists it.
    pub tool: String,
    /// The arguments, a JSON object.
    pub arguments: Value,
    /// `_meta` entries (both clients send string values).
    pub meta: BTreeMap<String, String>,
}

impl ToolCall {
    /// A call of `tool` with `arguments` and no `_meta`.
    pub fn new(tool: impl Into<String>, arguments: Value) -> ToolCall {
        ToolCall {
            tool: tool.into(),
            arguments,
            meta: BTreeMap::new(),
        }
    }

    /// With `_meta["io.switchyard/request_id"]`.
    pub fn request_id(mut self, request_id: uuid::Uuid) -> ToolCall {
        self.meta
            .insert(REQUEST_ID_META.to_owned(), request_id.to_string());
        self
    }

    /// With `_meta.traceparent`.
    pub fn traceparent(mut self, traceparent: impl Into<String>) -> ToolCall {
        self.meta
            .insert(TRACEPARENT_META.to_owned(), traceparent.into());
        self
    }
}

/// What a client saw of the server: the negotiated version, the instructions, the tools.
#[derive(Clone, Debug)]
pub struct Listing {
    /// The protocol version the session runs at.
    pub protocol_version: String,
    /// The server's instructions, if it gave any.
    pub instructions: Option<String>,
    /// Every listed tool as the client parsed it (`name`, `description`, `inputSchema`,
    /// `annotations`, …), in the server's order.
    pub tools: Vec<Value>,
}

impl Listing {
    /// The tools' names, in the server's order.
    pub fn names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter_map(|tool| tool["name"].as_str())
            .collect()
    }

    /// The listed tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&Value> {
        self.tools.iter().find(|tool| tool["name"] == name)
    }
}

/// A `tools/call` result as the client parsed it.
#[derive(Clone, Debug)]
pub struct CallOutcome {
    /// The result's `isError`.
    pub is_error: bool,
    /// The content blocks.
    pub content: Vec<Value>,
    /// The structured content, if any.
    pub structured_content: Option<Value>,
}

impl CallOutcome {
    /// The text of the text blocks, joined by newlines.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn parse(client: &str, result: &Value) -> Result<CallOutcome> {
        let content = result["content"]
            .as_array()
            .cloned()
            .ok_or_else(|| unexpected(client, "a call result without content", result))?;
        Ok(CallOutcome {
            is_error: result["isError"].as_bool().unwrap_or(false),
            content,
            structured_content: result
                .get("structuredContent")
                .filter(|v| !v.is_null())
                .cloned(),
        })
    }
}

/// One Python SDK session: its listing, and the call's outcome when one was asked for.
#[derive(Clone, Debug)]
pub struct PythonSession {
    /// Version, instructions and tools.
    pub listing: Listing,
    /// The call's result.
    pub call: Option<CallOutcome>,
}

/// One session of the Python SDK's streamable HTTP client pinned to `era`: connect, list every
/// tool (following cursors), then make `call` if given, in the same session.
pub async fn python_sdk(
    endpoint: &Endpoint,
    era: Era,
    call: Option<&ToolCall>,
) -> Result<PythonSession> {
    const CLIENT: &str = "the Python MCP SDK client";
    let python = installed(PYTHON_MCP_VAR, "the Python `mcp` SDK")?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/mcp_clients/client.py");
    let mut command = Command::new(python);
    command.args([script, "--url", &endpoint.url, "--mode", era.python_mode()]);
    if let Some(token) = &endpoint.token {
        command
            .args(["--token-env", TOKEN_VAR])
            .env(TOKEN_VAR, token);
    }
    if let Some(call) = call {
        command.args([
            "--call",
            &call.tool,
            "--arguments",
            &call.arguments.to_string(),
            "--meta",
            &json!(call.meta).to_string(),
        ]);
    }
    let answer = run(CLIENT, command, None).await?;
    let listing = Listing {
        protocol_version: string_at(CLIENT, &answer, "protocol_version")?,
        instructions: answer["instructions"].as_str().map(str::to_owned),
        tools: answer["tools"]
            .as_array()
            .cloned()
            .ok_or_else(|| unexpected(CLIENT, "no tools array", &answer))?,
    };
    let call = match &answer["call"] {
        Value::Null => None,
        result => Some(CallOutcome::parse(CLIENT, result)?),
    };
    Ok(PythonSession { listing, call })
}

/// The Inspector CLI pinned to `era`: `initialize` (for the negotiated version and the
/// instructions), then `tools/list` — two processes, as a person would run them.
pub async fn inspector_list(endpoint: &Endpoint, era: Era) -> Result<Listing> {
    let inspector = Inspector::new(endpoint, era)?;
    let initialized = inspector.run("initialize", &[]).await?;
    let listed = inspector.run("tools/list", &[]).await?;
    Ok(Listing {
        protocol_version: string_at(Inspector::CLIENT, &initialized, "protocolVersion")?,
        instructions: initialized["instructions"].as_str().map(str::to_owned),
        tools: listed["tools"]
            .as_array()
            .cloned()
            .ok_or_else(|| unexpected(Inspector::CLIENT, "no tools array", &listed))?,
    })
}

/// The Inspector CLI pinned to `era`: one `tools/call` with `call`'s arguments and `_meta`.
pub async fn inspector_call(endpoint: &Endpoint, era: Era, call: &ToolCall) -> Result<CallOutcome> {
    let inspector = Inspector::new(endpoint, era)?;
    let arguments = call.arguments.to_string();
    let mut args = vec![
        "--tool-name".to_owned(),
        call.tool.clone(),
        "--tool-args-json".to_owned(),
        arguments,
    ];
    if !call.meta.is_empty() {
        args.push("--tool-metadata".to_owned());
        args.extend(
            call.meta
                .iter()
                .map(|(key, value)| format!("{key}={value}")),
        );
    }
    let result = inspector.run("tools/call", &args).await?;
    CallOutcome::parse(Inspector::CLIENT, &result)
}

/// The Inspector CLI set up for one endpoint: a private directory holding its config file
/// (URL, bearer header, era) and its own storage, so nothing reads or writes `~/.mcp-inspector`.
struct Inspector {
    entry: String,
    scratch: Scratch,
}

impl Inspector {
    const CLIENT: &'static str = "the MCP Inspector CLI";
    /// The server's name in the config file.
    const SERVER: &'static str = "switchyard";

    fn new(endpoint: &Endpoint, era: Era) -> Result<Inspector> {
        let entry = installed(INSPECTOR_VAR, "the MCP Inspector")?;
        let scratch = Scratch::new("inspector")?;
        let mut server = json!({
            "type": "streamable-http",
            "url": endpoint.url,
            "protocolEra": era.inspector_era(),
        });
        if let Some(token) = &endpoint.token {
            server["headers"] = json!({"Authorization": format!("Bearer {token}")});
        }
        let config = json!({"mcpServers": {Inspector::SERVER: server}});
        // The scratch directory is private (0700), so the token in it is too.
        std::fs::write(scratch.join("config.json"), config.to_string())
            .map_err(Error::io("writing the Inspector's config file"))?;
        Ok(Inspector { entry, scratch })
    }

    /// The CLI's exit code for a `tools/call` whose result has `isError: true` (the result is
    /// still printed on stdout).
    const TOOL_ERROR_EXIT: i32 = 5;

    /// Runs `method` with `extra` arguments; the answer's `result`.
    async fn run(&self, method: &str, extra: &[String]) -> Result<Value> {
        let mut command = Command::new("node");
        command
            .arg(&self.entry)
            .args(["--config", &self.scratch.path("config.json")])
            .args(["--server", Inspector::SERVER, "--method", method])
            // JSON on stdout only; fail rather than start an interactive OAuth login.
            .args(["--format", "json", "--quiet", "--stored-auth-only"])
            .args(extra)
            .env("MCP_STORAGE_DIR", self.scratch.join("storage"))
            .env("MCP_CLIENT_CONFIG_PATH", self.scratch.join("client.json"))
            .env("MCP_INSPECTOR_SECRET_STORE", "memory");
        let answered = (method == "tools/call").then_some(Inspector::TOOL_ERROR_EXIT);
        let answer = run(Inspector::CLIENT, command, answered).await?;
        answer
            .get("result")
            .cloned()
            .ok_or_else(|| unexpected(Inspector::CLIENT, "no result", &answer))
    }
}

/// The path in `var`, which `scripts/test.sh` sets after installing `what`.
fn installed(var: &str, what: &str) -> Result<String> {
    std::env::var(var).map_err(|_| {
        Error::Setup(format!(
            "{var} is not set: run the tests with scripts/test.sh, which installs {what} and \
             exports it"
        ))
    })
}

/// Runs a client to its end within [`CLIENT_BOUND`]; its stdout parsed as one JSON value. It
/// must exit 0, or with `answered` when that exit code also comes with an answer on stdout.
async fn run(client: &str, mut command: Command, answered: Option<i32>) -> Result<Value> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(CLIENT_BOUND, command.output())
        .await
        .map_err(|_| Error::TimedOut {
            what: format!("{client} did not finish"),
            within: CLIENT_BOUND,
        })?
        .map_err(Error::io(format!("starting {client}")))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() && output.status.code() != answered {
        return Err(Error::McpClient {
            client: client.to_owned(),
            status: output.status.to_string(),
            output: format!("stdout:\n{stdout}\nstderr:\n{stderr}"),
        });
    }
    serde_json::from_str(stdout.trim()).map_err(|e| Error::McpClient {
        client: client.to_owned(),
        status: format!("printed no JSON ({e})"),
        output: format!("stdout:\n{stdout}\nstderr:\n{stderr}"),
    })
}

/// The string at `key` of a client's answer.
fn string_at(client: &str, answer: &Value, key: &str) -> Result<String> {
    answer[key]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| unexpected(client, &format!("no `{key}`"), answer))
}

/// An answer that parsed but is not what the client prints.
fn unexpected(client: &str, what: &str, answer: &Value) -> Error {
    Error::McpClient {
        client: client.to_owned(),
        status: format!("answered with {what}"),
        output: answer.to_string(),
    }
}
