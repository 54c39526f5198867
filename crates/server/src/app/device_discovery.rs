//! Discovery of a connection placed on a device, carried out by the device's runner.
//!
//! Its MCP server runs on the device, with the device's credentials, so the server cannot
//! list its tools itself. `connection discover` on such a connection queues a call of kind
//! `discovery` for the device's runner — leased, started and completed like any call, so the
//! same lease, epoch fencing, accepted placement and spec digest checks apply, and the runner
//! sends `tools/list` only after its start is acknowledged — and waits a bounded time for it.
//! Its result (`{"tools": [...]}`, redacted by the runner like any result) is reconciled into
//! the catalog by the same reconcile central discovery uses.
//!
//! Guarantees:
//! - **One at a time.** At most one unfinished discovery per connection (the index
//!   `calls_open_discovery`): asking again while one is queued or running waits for that one.
//! - **Reconciled once it is recorded**, whoever sees it first: the completion's recorder
//!   (before readers are woken) or a later request (a completion recorded before a crash).
//! - **Not a tool call.** It runs no tool, is never retried, looked up or resolved, is shown
//!   with kind `discovery`, runs under the device's own profile, and counts in the
//!   workspace's queue like any queued work (one per connection at most). Its failure is
//!   recorded on the connection as a central discovery's is.

use super::connections::DiscoveryFailure;
use super::dispatch::call_wait::MAX_CALL_WAIT;
use super::{Actor, App, views};
use crate::db::{CallOrigin, CallRow, ConnectionRow, Consent, NewCall};
use crate::error::{AppError, AppResult};
use serde_json::{Value, json};
use std::time::Duration;
use switchyard_mcp_runner::session::{Discovery, bounded_about};
use switchyard_protocol::api::{CallKind, DiscoveryView};
use switchyard_protocol::{CallId, CallState, ErrorCode, RequestId};
use tokio::time::Instant;

/// A waiting discovery looks at its call again at least this often.
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// How long a discovery request waits for a device's runner unless it asks otherwise.
pub const DISCOVERY_WAIT: Duration = MAX_CALL_WAIT;

/// What a discovery call is recorded under: not a tool any server offers.
pub const DISCOVERY_TOOL_NAME: &str = "tools/list";

impl App {
    /// Discovers a device connection's tools through its runner: queues the discovery (or
    /// joins the one queued), waits up to `wait` (at most 25 s) for it, and answers the
    /// reconciled catalog. Still unfinished then: `discovery_pending`, and it stays queued.
    /// The caller has authorized the request and checked the connection is in service.
    pub(crate) async fn device_discover(
        &self,
        actor: &Actor,
        connection: &ConnectionRow,
        connector: &crate::db::ConnectorRow,
        wait: Duration,
    ) -> AppResult<DiscoveryView> {
        let deadline = self.config.discovery_deadline;
        let call = self
            .device_discovery_run(actor, connection, connector, deadline, wait)
            .await?;
        if !super::dispatch::call_wait::is_settled(call.state) {
            return Err(AppError::refused(
                ErrorCode::DiscoveryPending,
                format!(
                    "the discovery of `{}` is queued for {} (call {}), and its runner has not finished it yet ({}); it runs when the device's runner (`switchyard runner` on it) takes it — run `switchyard connection discover` again to wait for it",
                    connection.name, connection.runner_ref, call.id, call.state
                ),
            ));
        }
        match call.state {
            CallState::Succeeded => Ok(DiscoveryView {
                connection_id: connection.id,
                tools: self
                    .db
                    .tool_list(connection.id)
                    .await?
                    .iter()
                    .map(views::tool)
                    .collect(),
            }),
            _ => Err(AppError::refused(
                ErrorCode::DiscoveryFailed,
                format!(
                    "discovery of `{}` on {} failed: {}",
                    connection.name,
                    connection.runner_ref,
                    discovery_error(&call)
                ),
            )),
        }
    }

    /// Queues a discovery of device connection `connection` that its runner must finish within
    /// `deadline` (or joins the one queued), waits up to `wait` (at most 25 s) for it, and
    /// answers the discovery call as last read: settled (its catalog reconciled, or its failure
    /// recorded on the connection) or still unfinished.
    pub(crate) async fn device_discovery_run(
        &self,
        actor: &Actor,
        connection: &ConnectionRow,
        connector: &crate::db::ConnectorRow,
        deadline: Duration,
        wait: Duration,
    ) -> AppResult<CallRow> {
        let Some(device_id) = connection.runner_ref.device() else {
            return Err(AppError::Internal(
                "a device discovery of a central connection".into(),
            ));
        };
        let device = self
            .db
            .device_get(connection.workspace_id, device_id)
            .await?
            .filter(|d| d.revoked_at.is_none())
            .ok_or_else(|| super::devices::runner_gone(&connection.name, connection.runner_ref))?;
        let accepted = self.db.connection_accepted_digest(connection.id).await?;
        super::placements::require_consent_of(
            Some(Consent::of(&connector.spec(), accepted.as_ref())),
            &connection.name,
            &connector.name,
            connection.runner_ref,
        )?;
        let call = match self.db.connection_open_discovery(connection.id).await? {
            Some(open) => open,
            None => {
                let profile = self.db.profile_get(device.profile_id).await?;
                let discovery = NewCall {
                    id: CallId::new(),
                    workspace_id: connection.workspace_id,
                    request_id: RequestId::new(),
                    payload_digest: super::names::digest(&json!({
                        "kind": CallKind::Discovery.as_str(),
                        "connection_id": connection.id,
                    })),
                    profile_id: profile.id,
                    connection_id: connection.id,
                    connection_revision: connection.revision,
                    environment_id: profile.environment_id,
                    tool_name: DISCOVERY_TOOL_NAME.to_owned(),
                    arguments: json!({}),
                    client_session_id: None,
                    timeout_seconds: i32::try_from(deadline.as_secs()).unwrap_or(i32::MAX).max(1),
                    runner_ref: connection.runner_ref,
                    created_by: actor.user.id,
                    origin: CallOrigin {
                        discovery: true,
                        ..CallOrigin::default()
                    },
                };
                match self.db.call_insert(&discovery).await {
                    Ok(inserted) => self
                        .sent(inserted)
                        .ok_or_else(|| AppError::Internal("a fresh request_id was taken".into()))?,
                    // Another request queued one meanwhile: wait for that one.
                    Err(sqlx::Error::Database(e))
                        if e.constraint() == Some("calls_open_discovery") =>
                    {
                        self.db
                            .connection_open_discovery(connection.id)
                            .await?
                            .ok_or_else(|| {
                                AppError::Internal("an open discovery vanished".into())
                            })?
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let call = self.discovery_wait(call, wait.min(MAX_CALL_WAIT)).await?;
        self.discovery_settled(&call).await?;
        Ok(call)
    }

    /// Waits until the discovery `call` settles or `wait` passes; answers it as last read.
    async fn discovery_wait(&self, call: CallRow, wait: Duration) -> AppResult<CallRow> {
        let deadline = Instant::now() + wait;
        let mut waiter = self.dispatch.announcer.local.settled_waiter(call.id);
        let mut call = call;
        loop {
            // Read after subscribing: a completion recorded in between still wakes it.
            if let Some(now) = self.db.call_get(call.workspace_id, call.id).await? {
                call = now;
            }
            if super::dispatch::call_wait::is_settled(call.state) || Instant::now() >= deadline {
                return Ok(call);
            }
            let next_look = (Instant::now() + LOOK_AGAIN).min(deadline);
            if let Some(recorded) = waiter.wait(next_look).await {
                return Ok(std::sync::Arc::unwrap_or_clone(recorded).call);
            }
        }
    }

    /// Reconciles a settled device discovery into its connection's catalog (or records its
    /// failure on the connection), unless the connection was discovered since it finished.
    /// Idempotent: the completion's recorder calls it, and so does a request that finds the
    /// discovery settled.
    pub(crate) async fn discovery_settled(&self, call: &CallRow) -> AppResult<()> {
        let Some(finished) = call.finished_at else {
            return Ok(());
        };
        if call.kind != CallKind::Discovery
            || !self
                .db
                .connection_discovered_before(call.connection_id, finished)
                .await?
        {
            return Ok(());
        }
        let listed = match (call.state, &call.result) {
            (CallState::Succeeded, Some(result)) if !call.result_truncated => {
                listed_tools(&result.0).map_err(|message| DiscoveryFailure::of_code(None, message))
            }
            // The runner's stable code says why: its credential, or anything else.
            _ => Err(DiscoveryFailure::of_code(
                call.error_code.as_deref(),
                discovery_error(call),
            )),
        };
        match listed {
            Ok(found) => {
                // The same reconcile as a central discovery: classification applies alike.
                let changes = self
                    .db
                    .tool_catalog_reconcile(call.connection_id, &found)
                    .await?;
                let detail = json!({
                    "tools": found.tools.len(),
                    "added": changes.added,
                    "needing_review": changes.needing_review,
                    "vanished": changes.vanished,
                    "discovery_call": call.id,
                });
                self.db
                    .event_record(call.connection_id, "discovery_succeeded", &detail, None)
                    .await?;
            }
            Err(DiscoveryFailure { reason, message }) => {
                self.db
                    .connection_discovery_failed(call.connection_id, reason, &message)
                    .await?;
                let detail = json!({"error": message, "reason": reason, "discovery_call": call.id});
                self.db
                    .event_record(call.connection_id, "discovery_failed", &detail, None)
                    .await?;
            }
        }
        Ok(())
    }
}

/// The tools a discovery's result lists (and what the server said it is for), or why it lists
/// none that can be trusted.
fn listed_tools(result: &Value) -> Result<Discovery, String> {
    if result.get("tools").is_none() {
        return Err(
            "the device runner's answer lists no `tools`; is the runner older than the server?"
                .to_owned(),
        );
    }
    let mut found: Discovery = serde_json::from_value(result.clone())
        .map_err(|e| format!("the device runner's tool list is malformed: {e}"))?;
    // The runner bounds it; a runner is not trusted to.
    found.about = found.about.as_deref().and_then(bounded_about);
    Ok(found)
}

/// Why a settled discovery found no catalog, for people.
pub(crate) fn discovery_error(call: &CallRow) -> String {
    if call.result_truncated {
        return "the tool list is larger than a result may be (1 MiB)".to_owned();
    }
    match (&call.error_code, &call.error_message) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.clone(),
        _ => match call.state {
            CallState::ToolError => "the MCP server answered `tools/list` with an error".to_owned(),
            state => format!("it ended {state}"),
        },
    }
}
