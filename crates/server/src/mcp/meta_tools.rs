//! The endpoint's own tools: `tool_search` and `call_tool` beside a principal's listed tools
//! when some are deferred, and the provider menu (`mcp_providers`, `mcp_capabilities`,
//! `mcp_call`) for an agent in `menu` mode. Search and the menu read only the catalog — no
//! network — and every call they lead to goes through the same catalog lookup as a direct
//! `tools/call`, so the grant and the filter are checked again.

use crate::app::McpCatalog;
use crate::app::agent_catalog::{
    CALL_TOOL, DEFAULT_PAGE_SIZE, DEFAULT_SEARCH_LIMIT, MAX_PAGE_SIZE, MAX_SEARCH_LIMIT, MCP_CALL,
    MCP_CAPABILITIES, MCP_PROVIDERS, Provider, TOOL_SEARCH,
};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use std::sync::Arc;
use switchyard_protocol::agents::AgentMode;

/// A call of one of the endpoint's own tools.
pub(super) enum MetaCall {
    /// `tool_search`.
    Search { query: String, limit: Option<usize> },
    /// `call_tool`: a deferred (or listed) tool by its name.
    CallTool { name: String, arguments: JsonObject },
    /// `mcp_providers`.
    Providers,
    /// `mcp_capabilities`.
    Capabilities {
        provider: String,
        page: Option<usize>,
        page_size: Option<usize>,
    },
    /// `mcp_call`: a provider's tool by its own name.
    MenuCall {
        provider: String,
        tool: String,
        arguments: JsonObject,
    },
}

/// The endpoint's own tools the principal is offered, beside its listed tools.
pub(super) fn offered(catalog: &McpCatalog) -> Vec<Tool> {
    match catalog.mode {
        AgentMode::Menu => vec![providers_tool(), capabilities_tool(), menu_call_tool()],
        AgentMode::Tools if catalog.catalog.offers_search() => {
            vec![search_tool(catalog), call_tool_tool()]
        }
        AgentMode::Tools => Vec::new(),
    }
}

/// The call `name` makes when it is one of the endpoint's own tools offered to this principal;
/// `None` for any other name.
pub(super) fn parse(
    catalog: &McpCatalog,
    name: &str,
    arguments: &JsonObject,
) -> Option<Result<MetaCall, ErrorData>> {
    let menu = catalog.mode == AgentMode::Menu;
    let search = catalog.mode == AgentMode::Tools && catalog.catalog.offers_search();
    let parsed = match name {
        TOOL_SEARCH if search => (|| {
            Ok(MetaCall::Search {
                query: string(arguments, "query")?,
                limit: number(arguments, "limit")?,
            })
        })(),
        CALL_TOOL if search => (|| {
            Ok(MetaCall::CallTool {
                name: string(arguments, "name")?,
                arguments: object(arguments, "arguments")?,
            })
        })(),
        MCP_PROVIDERS if menu => Ok(MetaCall::Providers),
        MCP_CAPABILITIES if menu => (|| {
            Ok(MetaCall::Capabilities {
                provider: string(arguments, "provider")?,
                page: number(arguments, "page")?,
                page_size: number(arguments, "page_size")?,
            })
        })(),
        MCP_CALL if menu => (|| {
            Ok(MetaCall::MenuCall {
                provider: string(arguments, "provider")?,
                tool: string(arguments, "tool")?,
                arguments: object(arguments, "arguments")?,
            })
        })(),
        _ => return None,
    };
    Some(parsed)
}

/// `tool_search`'s answer: the hits (each with the name `call_tool` takes), how many tools
/// were searched, and the connections that could not be.
pub(super) fn search(catalog: &McpCatalog, query: &str, limit: Option<usize>) -> CallToolResult {
    let answer = catalog.catalog.search(query, limit);
    let hits: Vec<Value> = answer
        .hits
        .iter()
        .map(|hit| json!({"name": hit.name, "mcp_server": hit.namespace, "description": hit.description}))
        .collect();
    let unavailable: Vec<Value> = answer
        .unavailable
        .iter()
        .map(|u| json!({"mcp_server": u.namespace, "unavailable": true, "reason": u.reason.as_str()}))
        .collect();
    structured(json!({
        "hits": hits,
        "searched": answer.searched,
        "unavailable": unavailable,
    }))
}

/// `mcp_providers`' answer.
pub(super) fn providers(catalog: &McpCatalog) -> CallToolResult {
    let list = catalog.catalog.providers();
    let providers: Vec<Value> = list.providers.iter().map(provider).collect();
    structured(json!({"providers": providers, "total": list.total}))
}

/// `mcp_capabilities`' answer, or a tool error naming why the provider is not one.
pub(super) fn capabilities(
    catalog: &McpCatalog,
    provider_name: &str,
    page: Option<usize>,
    page_size: Option<usize>,
) -> CallToolResult {
    match catalog.catalog.capabilities(provider_name, page, page_size) {
        Ok(page) => {
            let tools: Vec<Value> = page
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "title": t.title,
                        "description": t.description,
                        "annotations": t.hints,
                        "input_schema": t.input_schema,
                        "granted": t.granted,
                        "reason": t.reason.map(|r| r.as_str()),
                    })
                })
                .collect();
            structured(json!({
                "provider": provider(&page.provider),
                "page": page.page,
                "page_size": page.page_size,
                "next_page": page.next_page,
                "tools": tools,
            }))
        }
        Err(error) => refusal(&error.to_string()),
    }
}

/// A tool error the model can read (nothing was called).
pub(super) fn refusal(message: &str) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(message.to_owned())]);
    result.structured_content = Some(json!({"error": message}));
    result
}

fn provider(p: &Provider) -> Value {
    json!({"id": p.id, "mcp_server": p.namespace, "name": p.name, "tools": p.tools, "granted": p.granted})
}

fn structured(value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}

fn string(arguments: &JsonObject, key: &str) -> Result<String, ErrorData> {
    arguments
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ErrorData::invalid_params(format!("`{key}` (a string) is required"), None))
}

fn number(arguments: &JsonObject, key: &str) -> Result<Option<usize>, ErrorData> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                ErrorData::invalid_params(format!("`{key}` must be a positive integer"), None)
            }),
    }
}

fn object(arguments: &JsonObject, key: &str) -> Result<JsonObject, ErrorData> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(JsonObject::new()),
        Some(Value::Object(object)) => Ok(object.clone()),
        Some(_) => Err(ErrorData::invalid_params(
            format!("`{key}` must be a JSON object"),
            None,
        )),
    }
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(object) => Arc::new(object),
        _ => Arc::new(JsonObject::new()),
    }
}

fn read_only(tool: Tool) -> Tool {
    tool.annotate(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
}

fn search_tool(catalog: &McpCatalog) -> Tool {
    let searched = catalog.catalog.deferred().len();
    read_only(Tool::new(
        TOOL_SEARCH,
        format!(
            "Search the {searched} further tools available to you by name and description; each hit's `name` is what `{CALL_TOOL}` takes."
        ),
        schema(json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for, e.g. `create issue`."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT, "default": DEFAULT_SEARCH_LIMIT},
            },
            "required": ["query"],
        })),
    ))
}

fn call_tool_tool() -> Tool {
    Tool::new(
        CALL_TOOL,
        format!("Call a tool found with `{TOOL_SEARCH}`, by its name, with its arguments."),
        schema(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool's name, as a search hit gives it."},
                "arguments": {"type": "object", "description": "The tool's arguments, as its input schema says."},
            },
            "required": ["name"],
        })),
    )
}

fn providers_tool() -> Tool {
    read_only(Tool::new(
        MCP_PROVIDERS,
        "List the MCP servers (providers) available to you, with how many tools each offers and how many you may call.",
        schema(json!({"type": "object", "properties": {}})),
    ))
}

fn capabilities_tool() -> Tool {
    read_only(Tool::new(
        MCP_CAPABILITIES,
        format!(
            "List one provider's tools, a page at a time ({DEFAULT_PAGE_SIZE} by default, at most {MAX_PAGE_SIZE}); a tool with `granted: false` exists but is not yours to call."
        ),
        schema(json!({
            "type": "object",
            "properties": {
                "provider": {"type": "string", "description": "The provider's id, name or mcp_server, as mcp_providers gives it."},
                "page": {"type": "integer", "minimum": 1, "default": 1},
                "page_size": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": DEFAULT_PAGE_SIZE},
            },
            "required": ["provider"],
        })),
    ))
}

fn menu_call_tool() -> Tool {
    Tool::new(
        MCP_CALL,
        "Call one provider's tool by its own name, with its arguments.",
        schema(json!({
            "type": "object",
            "properties": {
                "provider": {"type": "string"},
                "tool": {"type": "string", "description": "The tool's name as mcp_capabilities lists it."},
                "arguments": {"type": "object"},
            },
            "required": ["provider", "tool"],
        })),
    )
}
