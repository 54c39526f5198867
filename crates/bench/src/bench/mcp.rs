//! Switchyard's own MCP endpoint, `/mcp`, as an agent's MCP client sees it: rmcp's streamable
//! HTTP client with an agent's bearer token, one warm session.
//!
//! - [`McpCaller`]: the fixture's `noop` through `/mcp`, one `tools/call` at a time, measured in
//!   turn with the direct call and the REST API's call (`super::latencies`).
//! - [`tools_list`]: `tools/list` for an agent granted `plan.mcp_list_tools` tools, spread over
//!   as many connections of the fixture as that takes.

use super::Plan;
use crate::error::{Error, Result};
use crate::stack::{Stack, WORKSPACE, note};
use crate::stats::{Summary, ms};
use rmcp::model::{
    CallToolRequestParams, ClientRequest, ListToolsRequest, RequestMetaObject, ServerResult,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde::Serialize;
use std::time::Instant;
use switchyard_protocol::RequestId;
use switchyard_protocol::api::{AgentConnectionSettings, AgentCreated, CreateAgent, GrantRequest};
use switchyard_testkit::api::{Api, from_json, install_tls_provider};
use switchyard_testkit::setup;

/// The `_meta` key of a call's request_id, as a client that retries sends it.
const REQUEST_ID_META: &str = switchyard_testkit::mcp_clients::REQUEST_ID_META;
/// The agent that calls `noop` through `/mcp`, with Use on the central profile.
const CALLER: &str = "bench-caller";
/// The agent granted the many tools.
const LISTER: &str = "bench-lister";
/// The profile holding the many tools' connections.
const MANY_PROFILE: &str = "many-tools";
/// Unmeasured `tools/list` requests before the measured ones.
const LIST_WARMUP: usize = 5;

/// Creates agent `name` in the bench workspace with Use on `profiles`; its token.
async fn agent(api: &Api, name: &str, profiles: &[&str]) -> Result<String> {
    let created: AgentCreated = from_json(
        api.post(
            &format!("/workspaces/{WORKSPACE}/agents"),
            &CreateAgent {
                name: name.to_owned(),
                mode: Default::default(),
                defer_all: false,
                declared: false,
            },
        )
        .await?,
        "the created agent",
    )?;
    for profile in profiles {
        api.post(
            &format!("/workspaces/{WORKSPACE}/profiles/{profile}/grants"),
            &GrantRequest {
                user: None,
                agent: Some(name.to_owned()),
                use_: true,
                manage: false,
                share: false,
                approve: false,
            },
        )
        .await?;
    }
    Ok(created.token)
}

/// One warm MCP session with `/mcp`.
struct McpSession {
    client: RunningService<RoleClient, ()>,
}

impl McpSession {
    /// Connects rmcp's streamable HTTP client to `server_url`'s `/mcp` with `token`.
    async fn connect(server_url: &str, token: &str) -> Result<McpSession> {
        install_tls_provider();
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{server_url}/mcp"))
            .auth_header(token);
        let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
        let client = ()
            .serve(transport)
            .await
            .map_err(|e| Error::Setup(format!("MCP session with /mcp: {e}")))?;
        Ok(McpSession { client })
    }

    /// The protocol version the session negotiated.
    fn protocol_version(&self) -> String {
        self.client
            .peer_info()
            .map(|info| info.protocol_version.to_string())
            .unwrap_or_default()
    }

    /// One `tools/list` request, always sent (rmcp's client would answer from its cache when
    /// the server allowed it to): the tools' names, the answer's size in JSON bytes, and the
    /// request → parsed answer time in milliseconds.
    async fn list(&self) -> Result<Listed> {
        let started = Instant::now();
        let answer = self
            .client
            .send_request(ClientRequest::ListToolsRequest(ListToolsRequest {
                method: Default::default(),
                params: None,
                extensions: Default::default(),
            }))
            .await
            .map_err(|e| Error::Setup(format!("tools/list through /mcp: {e}")))?;
        let elapsed = started.elapsed();
        let ServerResult::ListToolsResult(listed) = answer else {
            return Err(Error::Setup(format!(
                "tools/list through /mcp answered {answer:?}"
            )));
        };
        if listed.next_cursor.is_some() {
            return Err(Error::Setup(
                "tools/list through /mcp answered in pages; this measures one answer".into(),
            ));
        }
        Ok(Listed {
            names: listed.tools.iter().map(|t| t.name.to_string()).collect(),
            bytes: serde_json::to_vec(&listed).map_or(0, |json| json.len()),
            ms: ms(elapsed),
        })
    }

    /// Ends the session.
    async fn close(self) {
        let _ = self.client.cancel().await;
    }
}

/// One `tools/list` answer.
struct Listed {
    /// The listed tools' names.
    names: Vec<String>,
    /// The answer's size, JSON bytes.
    bytes: usize,
    /// Request → parsed answer, in milliseconds.
    ms: f64,
}

/// An agent calling the fixture's `noop` on the central connection through `/mcp`.
pub struct McpCaller {
    session: McpSession,
    /// The name `/mcp` lists `noop` under.
    tool: String,
}

impl McpCaller {
    /// Creates agent `bench-caller` with Use on the central profile (the REST calls' profile)
    /// and opens its session with replica 0.
    pub async fn start(stack: &Stack) -> Result<McpCaller> {
        let token = agent(&stack.api, CALLER, &[&stack.central.profile]).await?;
        let session = McpSession::connect(&stack.url(0), &token).await?;
        let noop: Vec<String> = session
            .list()
            .await?
            .names
            .into_iter()
            .filter(|name| name == "noop" || name.ends_with("__noop"))
            .collect();
        let [tool] = <[String; 1]>::try_from(noop).map_err(|found| {
            Error::Setup(format!(
                "/mcp should list the fixture's noop once for {CALLER}; it lists {found:?}"
            ))
        })?;
        Ok(McpCaller { session, tool })
    }

    /// The protocol version of the session.
    pub fn protocol_version(&self) -> String {
        self.session.protocol_version()
    }

    /// One `tools/call` of `noop` under a fresh request_id (sent as a retrying client sends
    /// it), request → result, in milliseconds. It must succeed.
    pub async fn noop(&self) -> Result<f64> {
        let mut params = CallToolRequestParams::new(self.tool.clone());
        let mut meta = RequestMetaObject::new();
        meta.insert(
            REQUEST_ID_META.to_owned(),
            RequestId::new().to_string().into(),
        );
        params.meta = Some(meta);
        let started = Instant::now();
        let answer = self
            .session
            .client
            .call_tool(params)
            .await
            .map_err(|e| Error::Setup(format!("{} through /mcp: {e}", self.tool)))?;
        let elapsed = started.elapsed();
        if answer.is_error == Some(true) {
            return Err(Error::Setup(format!(
                "{} through /mcp answered a tool error: {:?}",
                self.tool, answer.content
            )));
        }
        Ok(ms(elapsed))
    }

    /// Ends the session.
    pub async fn close(self) {
        self.session.close().await;
    }
}

/// `tools/list` for an agent granted many tools.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ToolsList {
    /// Tools the agent is granted and `/mcp` lists.
    pub tools: usize,
    /// Connections they come from (each the fixture, over stdio).
    pub connections: usize,
    /// The answer's size, JSON bytes.
    pub answer_bytes: usize,
    /// Request → answer, one request at a time on a warm session.
    pub ms: Summary,
}

/// Places enough central connections of the fixture (`tools_01`, `tools_02`, …, discovered and
/// classified) for `plan.mcp_list_tools` tools, leaves the last one's surplus out with the
/// agent's `exclude` filter, grants agent `bench-lister` Use on a profile holding them all, and
/// times `plan.mcp_list_samples` `tools/list` requests on one warm session with replica 0.
pub async fn tools_list(plan: &Plan, stack: &Stack) -> Result<ToolsList> {
    let want = plan.mcp_list_tools;
    let central = &stack.central.connection;
    let per_connection = stack
        .api
        .get(&format!(
            "/workspaces/{WORKSPACE}/connections/{central}/tools"
        ))
        .await?
        .as_array()
        .map_or(0, Vec::len);
    if per_connection == 0 {
        return Err(Error::Setup("the fixture lists no tools".into()));
    }
    let connections = want.div_ceil(per_connection);
    note(&format!(
        "tools/list: {connections} connections of the fixture for {want} tools"
    ));
    let mut names = Vec::with_capacity(connections);
    let mut last_tools = Vec::new();
    for n in 1..=connections {
        let name = format!("tools_{n:02}");
        setup::connection(&stack.api, WORKSPACE, &name, "fixture", None).await?;
        last_tools = setup::discover_classified(&stack.api, WORKSPACE, &name).await?;
        names.push(name);
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    stack.profile(MANY_PROFILE, &refs).await?;
    let token = agent(&stack.api, LISTER, &[MANY_PROFILE]).await?;
    let surplus = connections * per_connection - want;
    if surplus > 0
        && let Some(last) = names.last()
    {
        let exclude = last_tools
            .iter()
            .take(surplus)
            .map(|t| t.name.clone())
            .collect();
        stack
            .api
            .put(
                &format!("/workspaces/{WORKSPACE}/agents/{LISTER}/connections/{last}"),
                &AgentConnectionSettings {
                    exclude,
                    ..Default::default()
                },
            )
            .await?;
    }

    let session = McpSession::connect(&stack.url(0), &token).await?;
    let measured = async {
        let first = session.list().await?;
        let mut samples = Vec::with_capacity(plan.mcp_list_samples);
        for i in 0..LIST_WARMUP + plan.mcp_list_samples {
            let listed = session.list().await?;
            if listed.names != first.names {
                return Err(Error::Setup(format!(
                    "/mcp listed {} tools for {LISTER}, then {} others",
                    first.names.len(),
                    listed.names.len()
                )));
            }
            if i >= LIST_WARMUP {
                samples.push(listed.ms);
            }
        }
        Ok((first, samples))
    }
    .await;
    session.close().await;
    let (first, samples) = measured?;
    if first.names.len() != want {
        return Err(Error::Setup(format!(
            "/mcp lists {} tools for {LISTER}, granted {want}",
            first.names.len()
        )));
    }
    let answer_bytes = first.bytes;
    Ok(ToolsList {
        tools: want,
        connections,
        answer_bytes,
        ms: Summary::of(&samples),
    })
}
