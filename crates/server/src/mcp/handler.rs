//! The MCP server `/mcp` speaks: one handler per session (per request in the stateless
//! era), reading the authenticated principal from each request's `http::request::Parts`.

use super::auth::McpPrincipal;
use super::call::{self, Waiting};
use super::in_flight::{self, Cancelled, Held};
use super::meta_tools::{self, MetaCall};
use super::speculation::{self, McpAuth};
use super::task;
use crate::app::McpRefusal;
use crate::app::agent_catalog::CallRefusal;
use crate::app::{Actor, App, McpCatalog, McpTool, SettledWaiter};
use crate::db::TraceParent;
use crate::error::AppError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CancelledNotificationParam, DiscoverResult, Extensions, GetTaskParams, GetTaskResult,
    Implementation, InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::sync::Arc;
use switchyard_protocol::RequestId;
use switchyard_protocol::agents::AgentMode;
use switchyard_protocol::api::CallView;
use tokio_util::sync::CancellationToken;

/// The `/mcp` MCP server.
#[derive(Clone, Debug)]
pub(super) struct SwitchyardMcp {
    app: App,
    /// Cancelled when the server stops.
    shutdown: CancellationToken,
}

impl SwitchyardMcp {
    /// A handler for one session (or one stateless request) of a server that stops when
    /// `shutdown` is cancelled.
    pub(super) fn new(app: App, shutdown: CancellationToken) -> Self {
        Self { app, shutdown }
    }

    /// What the principal is offered now.
    async fn catalog(
        &self,
        extensions: &Extensions,
    ) -> Result<(Actor, Arc<McpCatalog>), ErrorData> {
        let McpPrincipal(actor, generation) = principal(extensions).await?;
        let catalog = self
            .app
            .mcp_catalog_at(&actor.user, generation)
            .await
            .map_err(call::internal)?;
        Ok((actor, catalog))
    }

    /// A `tools/call` served from what its authentication found: a meta tool's answer, a
    /// refusal, or the listed tool's call submitted.
    async fn submit_verified(
        &self,
        context: &RequestContext<RoleServer>,
        name: &str,
        arguments: JsonObject,
        (request_id, trace): (RequestId, Option<TraceParent>),
    ) -> Result<Submitted, ErrorData> {
        let (actor, catalog) = self.catalog(&context.extensions).await?;
        let answered = |result: CallToolResult| Ok(Submitted::Answered(result));
        let (tool, arguments) = match meta_tools::parse(&catalog, name, &arguments) {
            None => match catalog.call(name) {
                Ok(tool) => (tool, arguments),
                Err(McpRefusal::Catalog(CallRefusal::UnknownTool { .. })) => {
                    return Err(call::unknown_tool(name));
                }
                Err(refusal) => return answered(meta_tools::refusal(&refusal.to_string())),
            },
            Some(meta) => match meta? {
                MetaCall::Search { query, limit } => {
                    return answered(meta_tools::search(&catalog, &query, limit));
                }
                MetaCall::Providers => return answered(meta_tools::providers(&catalog)),
                MetaCall::Capabilities {
                    provider,
                    page,
                    page_size,
                } => {
                    return answered(meta_tools::capabilities(
                        &catalog, &provider, page, page_size,
                    ));
                }
                MetaCall::CallTool { name, arguments } => match catalog.call(&name) {
                    Ok(tool) => (tool, arguments),
                    Err(refusal) => return answered(meta_tools::refusal(&refusal.to_string())),
                },
                MetaCall::MenuCall {
                    provider,
                    tool,
                    arguments,
                } => match catalog.menu_call(&provider, &tool) {
                    Ok(tool) => (tool, arguments),
                    Err(refusal) => return answered(meta_tools::refusal(&refusal.to_string())),
                },
            },
        };
        let arguments = serde_json::Value::Object(arguments);
        match self
            .app
            .mcp_call_submit(&actor, &tool, arguments, request_id, trace, None)
            .await
        {
            Ok((call, waiter)) => Ok(Submitted::Call(Box::new((actor, call, waiter)))),
            Err(error) => refused(error),
        }
    }
}

/// Where a `tools/call` stands once its submission is made.
pub(super) enum Submitted {
    /// Its call, submitted by the principal, with the settle waiter of a new unsettled one.
    Call(Box<(Actor, CallView, Option<SettledWaiter>)>),
    /// Answered already: a meta tool's answer, or a refusal.
    Answered(CallToolResult),
}

/// A refused submission, as the client is told it.
fn refused(error: AppError) -> Result<Submitted, ErrorData> {
    call::refused(error).map(Submitted::Answered)
}

/// The principal of the request whose extensions these are, once its authentication passed.
async fn principal(extensions: &Extensions) -> Result<McpPrincipal, ErrorData> {
    McpAuth::of(extensions)?.verified().await
}

impl ServerHandler for SwitchyardMcp {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .build();
        let mut info = ServerConfig::new(capabilities);
        info.server_info = Implementation::new("switchyard", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        let (_, catalog) = self.catalog(&context.extensions).await?;
        result.instructions = Some(super::instructions::of(&catalog));
        Ok(result)
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let (_, catalog) = self.catalog(&context.extensions).await?;
        let mut info = self.get_info();
        info.instructions = Some(super::instructions::of(&catalog));
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (_, catalog) = self.catalog(&context.extensions).await?;
        let mut tools = meta_tools::offered(&catalog);
        if catalog.mode == AgentMode::Tools {
            tools.extend(catalog.tools.iter().map(listed));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let submission = (call::request_id(&context.meta)?, call::trace(&context.meta));
        let auth = McpAuth::of(&context.extensions)?;
        let arguments = request.arguments.unwrap_or_default();
        let speculated = match auth.remembered() {
            Some(remembered) => {
                let call = (request.name.as_ref(), &arguments);
                speculation::submit(&self.app, auth, remembered, call, submission).await
            }
            None => None,
        };
        let submitted = match speculated {
            Some(submitted) => submitted?,
            None => {
                self.submit_verified(&context, &request.name, arguments, submission)
                    .await?
            }
        };
        let (actor, submitted, waiter) = match submitted {
            Submitted::Call(call) => *call,
            Submitted::Answered(answer) => return Ok(answer.into()),
        };
        // A client of the tasks extension polls the call instead of waiting for it: a call
        // that settles within a moment is answered as it is, any other becomes a task.
        if task::declared(&context) {
            let call = task::settle_briefly(&self.app, &actor, submitted, waiter)
                .await
                .map_err(call::internal)?;
            if !call::settled(call.state) {
                return Ok(CallToolResponse::Task(task::created(&call)));
            }
            return Ok(CallToolResponse::from(call::settled_result(&call)));
        }
        let held = Held {
            app: &self.app,
            actor: &actor,
            cancelled: Cancelled::of(&context),
            request: &context.id,
            workspace: submitted.workspace_id,
            call: submitted.id,
            gone: &context.ct,
            shutdown: &self.shutdown,
        };
        let waiting = Waiting {
            app: &self.app,
            actor: &actor,
            peer: &context.peer,
            progress: context.meta.get_progress_token(),
            gone: &context.ct,
        };
        let answer = held.answer(waiting.answer(submitted, waiter)).await;
        answer.map(CallToolResponse::from)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let McpPrincipal(actor, _) = principal(&context.extensions).await?;
        let call = task::call_of(&request.task_id)?;
        match self.app.mcp_task_get(&actor, call).await {
            Ok(view) => Ok(GetTaskResult::new(task::detailed(&view))),
            Err(error) => Err(task_refused(&request.task_id, error)),
        }
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let McpPrincipal(actor, _) = principal(&context.extensions).await?;
        let call = task::call_of(&request.task_id)?;
        match self.app.mcp_task_cancel(&actor, call).await {
            Ok(_) => Ok(()),
            Err(error) => Err(task_refused(&request.task_id, error)),
        }
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        context: NotificationContext<RoleServer>,
    ) {
        // Only a session's notifications reach here: rmcp answers a stateless one 202 and
        // drops it (that era cancels by closing the stream, `in_flight.rs`).
        let (Some(id), Some(session), Ok(McpPrincipal(actor, _))) = (
            notification.request_id,
            in_flight::session_of(&context.extensions),
            principal(&context.extensions).await,
        ) else {
            return;
        };
        let request = in_flight::json_id(&id);
        if let Err(error) = self
            .app
            .mcp_request_cancel(&actor, (&session, &request))
            .await
        {
            tracing::warn!(%error, request = %id, "a request its /mcp client cancelled was not cancelled");
        }
    }
}

/// A task the principal may not read (or that does not exist) is unknown to it; an internal
/// failure is an internal error.
fn task_refused(task_id: &str, error: AppError) -> ErrorData {
    match error {
        AppError::Refused { .. } => {
            ErrorData::invalid_params(format!("no task `{task_id}` of yours"), None)
        }
        other => call::internal(other),
    }
}

/// A listed tool as MCP describes it.
fn listed(tool: &McpTool) -> Tool {
    let schema: JsonObject = match &tool.input_schema {
        serde_json::Value::Object(schema) => schema.clone(),
        _ => JsonObject::new(),
    };
    let mut listed = Tool::new(
        tool.exposed_name.clone(),
        tool.description.clone().unwrap_or_default(),
        Arc::new(schema),
    );
    if let Some(serde_json::Value::Object(output)) = &tool.output_schema {
        listed.output_schema = Some(Arc::new(output.clone()));
    }
    let hints = &tool.hints;
    let mut annotations = ToolAnnotations::new();
    annotations.title = tool.title.clone();
    annotations.read_only_hint = hints.read_only;
    annotations.destructive_hint = hints.destructive;
    annotations.idempotent_hint = hints.idempotent;
    annotations.open_world_hint = hints.open_world;
    if annotations != ToolAnnotations::new() {
        listed = listed.annotate(annotations);
    }
    listed
}
