//! Diagnosing a connection (`switchyard connection diagnose`, the inspector's Diagnose
//! button): the checks a call depends on, in order (a device connection's transport check
//! includes its placement: device not revoked, spec accepted by its owner), then a live MCP handshake within a time
//! bound, whose failure is classified from the error's kind ([`FailureClass`]).
//!
//! Guarantees:
//! - **Read-only for central connections.** Nothing is recorded: not the catalog, not the
//!   connection's discovery outcome, not an event. A device connection's live check is a
//!   discovery its runner makes, recorded as every discovery is (one call of kind
//!   `discovery`, the catalog reconciled or the failure recorded); nothing else changes.
//! - **No secret leaves.** Credentials are named with whether their value is present; the
//!   handshake's message and the server's stderr tail are redacted with the bound values (a
//!   device's runner redacts its own before it reports).
//! - **The live check runs where the connection runs.** A central connection's handshake is
//!   made here, as the central runner opens a session. A device's connection runs on the
//!   device with the device's credentials, which the server never sees: its runner makes the
//!   handshake, within the same bound, and reports its failure's class as its stable code.

use super::device_discovery::discovery_error;
use super::dispatch::call_wait::is_settled;
use super::{Actor, App};
use crate::db::{ConnectionRow, ConnectorRow, Consent};
use crate::error::{AppError, AppResult};
use std::time::{Duration, Instant};
use switchyard_mcp_runner::SessionLaunch;
use switchyard_mcp_runner::credentials::codes;
use switchyard_mcp_runner::redact::Redactor;
use switchyard_mcp_runner::session::initialize_then_discover;
use switchyard_protocol::api::ConnectorSpec;
use switchyard_protocol::diagnose::{
    CheckResult, CheckStatus, DIAGNOSE_STDERR_TAIL_CHARS, DiagnoseCheck, DiagnoseRequest,
    DiagnosisView, FailureClass, LiveCheck, MAX_DIAGNOSE_TIMEOUT_MS,
};
use switchyard_protocol::runner::Submitter;
use switchyard_protocol::{CallState, ErrorCode};

/// How much longer than a device's check may take the server waits for its runner's report.
const DEVICE_ANSWER_MARGIN: Duration = Duration::from_secs(5);

/// The checks made so far, and whether one that the handshake needs failed.
#[derive(Default)]
struct Checks {
    done: Vec<CheckResult>,
    /// A check the live handshake depends on failed (it is then skipped).
    prerequisite_failed: bool,
}

impl Checks {
    fn record(&mut self, check: DiagnoseCheck, status: CheckStatus, detail: impl Into<String>) {
        self.done.push(CheckResult {
            check,
            status,
            detail: detail.into(),
        });
    }

    /// Records a check the handshake needs: a failure skips the handshake.
    fn prerequisite(&mut self, check: DiagnoseCheck, passed: Result<String, String>) {
        match passed {
            Ok(detail) => self.record(check, CheckStatus::Passed, detail),
            Err(detail) => {
                self.prerequisite_failed = true;
                self.record(check, CheckStatus::Failed, detail);
            }
        }
    }
}

/// What the live handshake found.
struct Handshake {
    result: CheckResult,
    failure: Option<FailureClass>,
    stderr_tail: Option<String>,
}

impl App {
    /// Diagnoses connection `key` of workspace `ws` (workspace admins only, as discovery):
    /// every check in order, then — for a central connection whose prerequisites passed — a
    /// live handshake bounded by `req.timeout_ms` (else the discovery deadline).
    pub async fn connection_diagnose(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
        req: DiagnoseRequest,
    ) -> AppResult<DiagnosisView> {
        let bound = match req.timeout_ms {
            None => self.config.discovery_deadline,
            Some(ms @ 1..=MAX_DIAGNOSE_TIMEOUT_MS) => Duration::from_millis(ms),
            Some(_) => {
                return Err(AppError::refused(
                    ErrorCode::InvalidRequest,
                    format!(
                        "`timeout_ms` must be 1 to {MAX_DIAGNOSE_TIMEOUT_MS} milliseconds, or left out for the server's discovery deadline"
                    ),
                ));
            }
        };
        let membership = self.admin_membership(actor, ws).await?;
        let connection = self.find_connection(membership.workspace.id, key).await?;
        let connector = self.db.connector_get(connection.connector_id).await?;
        let central = connection.runner_ref.is_central();
        let spec = connector.spec();

        let mut checks = Checks::default();
        checks.prerequisite(DiagnoseCheck::Enabled, enabled(&connection, &connector));
        checks.prerequisite(DiagnoseCheck::Approved, approved(&connector));
        let placed = self.placement(&connection, &connector).await?;
        checks.prerequisite(
            DiagnoseCheck::Transport,
            placed.map(|placed| format!("{}, {placed}", transport(&spec))),
        );
        let launch = if central {
            let resolved = match self.central_launch(connection.id, &spec).await? {
                // An OAuth connection's access token goes with its bound credentials, as a
                // call's and discovery's do.
                Ok(launch) => self
                    .with_oauth_token(
                        connection.id,
                        launch,
                        None,
                        Some(Submitter::User(actor.user.id)),
                    )
                    .await
                    .map(|(launch, _)| launch)
                    .map_err(|e| format!("{} ({})", e.message, e.code)),
                Err(e) => Err(format!("{e} ({})", e.code())),
            };
            checks.prerequisite(
                DiagnoseCheck::Credentials,
                resolved.as_ref().map(bound_names).map_err(Clone::clone),
            );
            resolved.ok()
        } else {
            checks.record(
                DiagnoseCheck::Credentials,
                CheckStatus::Skipped,
                "bound on the device, in its runner's bindings file: the server never sees them",
            );
            None
        };
        let (status, detail) = self.catalog(&connection).await?;
        checks.record(DiagnoseCheck::Catalog, status, detail);
        let (status, detail) = self.grants(&connection).await?;
        checks.record(DiagnoseCheck::Grants, status, detail);

        let handshake = match launch {
            _ if checks.prerequisite_failed => skipped("an earlier check failed".into()),
            None => {
                self.device_handshake(actor, &connection, &connector, bound)
                    .await?
            }
            Some(launch) => self.handshake(&launch, bound).await,
        };
        checks.done.push(handshake.result);
        Ok(DiagnosisView {
            connection_id: connection.id,
            connection: connection.name.clone(),
            runner: connection.runner_ref.to_string(),
            live_check: if central {
                LiveCheck::Central
            } else {
                LiveCheck::OnDevice
            },
            passed: checks.done.iter().all(|c| c.status != CheckStatus::Failed),
            checks: checks.done,
            failure: handshake.failure,
            stderr_tail: handshake.stderr_tail,
        })
    }

    /// Where the connection runs: the central runner, or a device that is not revoked and
    /// whose owner accepted the connector's current spec on it (else nothing runs there).
    async fn placement(
        &self,
        connection: &ConnectionRow,
        connector: &ConnectorRow,
    ) -> AppResult<Result<String, String>> {
        let Some(device_id) = connection.runner_ref.device() else {
            return Ok(Ok("on the central runner".into()));
        };
        let live = self
            .db
            .device_get(connection.workspace_id, device_id)
            .await?
            .is_some_and(|d| d.revoked_at.is_none());
        if !live {
            return Ok(Err(format!(
                "placed on {}, which was revoked: place the connector on another runner",
                connection.runner_ref
            )));
        }
        let accepted = self.db.connection_accepted_digest(connection.id).await?;
        let consent = Consent::of(&connector.spec(), accepted.as_ref());
        Ok(
            match super::placements::require_consent_of(
                Some(consent),
                &connection.name,
                &connector.name,
                connection.runner_ref,
            ) {
                Ok(()) => Ok(format!(
                    "on {}, accepted there by the device's owner",
                    connection.runner_ref
                )),
                Err(AppError::Refused { message, .. }) => Err(message),
                Err(other) => return Err(other),
            },
        )
    }

    /// The catalog check: failed while the connection was never discovered or its last
    /// discovery failed.
    async fn catalog(&self, connection: &ConnectionRow) -> AppResult<(CheckStatus, String)> {
        let tools = self.db.tool_list(connection.id).await?;
        let available = tools.iter().filter(|t| t.available).count();
        let unclassified = tools
            .iter()
            .filter(|t| t.available && t.classification().is_none())
            .count();
        let review = tools.iter().filter(|t| t.needs_review).count();
        let counts = format!(
            "{} tools cached, {available} available, {unclassified} unclassified, {review} needing review",
            tools.len()
        );
        Ok(
            match (
                &connection.last_discovery_at,
                &connection.last_discovery_error,
            ) {
                (_, Some(error)) => (
                    CheckStatus::Failed,
                    format!("{counts}; the last discovery failed: {error}"),
                ),
                (None, None) => (
                    CheckStatus::Failed,
                    format!(
                        "{counts}; never discovered: run `switchyard connection discover` to list its tools"
                    ),
                ),
                (Some(at), None) => (
                    CheckStatus::Passed,
                    format!("{counts}; last discovered {}", at.to_rfc3339()),
                ),
            },
        )
    }

    /// The grants check: failed when no profile in service holds the connection (nobody can
    /// call its tools).
    async fn grants(&self, connection: &ConnectionRow) -> AppResult<(CheckStatus, String)> {
        let profiles = self.db.connection_profiles(connection.id).await?;
        if profiles.is_empty() {
            return Ok((
                CheckStatus::Failed,
                "no profile in service holds this connection: nobody can call its tools; add it to a profile".into(),
            ));
        }
        let held: Vec<String> = profiles
            .iter()
            .map(|(name, users)| format!("profile `{name}` ({users} with `use`)"))
            .collect();
        Ok((CheckStatus::Passed, held.join(", ")))
    }

    /// The live check of a device connection, made by the device's runner with the device's
    /// credentials: a discovery (initialize, then tools/list) it must finish within `bound`,
    /// waited for a little longer, so that its own timeout is reported. Its catalog is
    /// reconciled (or its failure recorded) as any discovery's.
    async fn device_handshake(
        &self,
        actor: &Actor,
        connection: &ConnectionRow,
        connector: &ConnectorRow,
        bound: Duration,
    ) -> AppResult<Handshake> {
        let deadline = bound.max(Duration::from_secs(1));
        let started = Instant::now();
        let call = self
            .device_discovery_run(
                actor,
                connection,
                connector,
                deadline,
                deadline + DEVICE_ANSWER_MARGIN,
            )
            .await?;
        let took = started.elapsed().as_millis();
        let (status, detail, failure) = match call.state {
            CallState::Succeeded => {
                let tools = self.db.tool_list(connection.id).await?;
                let available = tools.iter().filter(|tool| tool.available).count();
                (
                    CheckStatus::Passed,
                    format!(
                        "{}'s runner ran initialize and tools/list in {took} ms (discovery call {}): {available} tools",
                        connection.runner_ref, call.id
                    ),
                    None,
                )
            }
            state if !is_settled(state) => (
                CheckStatus::Failed,
                format!(
                    "{}'s runner did not finish the check within {took} ms (discovery call {}, {state}): is `switchyard runner` running on that device? The discovery stays queued and runs when it takes it",
                    connection.runner_ref, call.id
                ),
                None,
            ),
            _ => {
                let class = call.error_code.as_deref().and_then(device_failure_class);
                let reason = discovery_error(&call);
                let detail = match class {
                    Some(class) => format!("{class} on {}: {reason}", connection.runner_ref),
                    None => format!("on {}: {reason}", connection.runner_ref),
                };
                (CheckStatus::Failed, detail, class)
            }
        };
        Ok(Handshake {
            result: CheckResult {
                check: DiagnoseCheck::Handshake,
                status,
                detail,
            },
            failure,
            stderr_tail: None,
        })
    }

    /// Opens a session with `launch` as the central runner would (its endpoint guard), lists
    /// the tools, and closes it, all within `bound`.
    async fn handshake(&self, launch: &SessionLaunch, bound: Duration) -> Handshake {
        let started = Instant::now();
        let outcome = initialize_then_discover(launch, &self.config.endpoints, bound)
            .await
            .and_then(|listed| listed);
        let took = started.elapsed().as_millis();
        match outcome {
            Ok(found) => Handshake {
                result: CheckResult {
                    check: DiagnoseCheck::Handshake,
                    status: CheckStatus::Passed,
                    detail: format!(
                        "initialize and tools/list answered in {took} ms: {} tools",
                        found.tools.len()
                    ),
                },
                failure: None,
                stderr_tail: None,
            },
            Err(error) => {
                // A failing server's words can echo what it was given.
                let redactor = Redactor::for_launch(launch);
                let class = error.failure_class();
                Handshake {
                    result: CheckResult {
                        check: DiagnoseCheck::Handshake,
                        status: CheckStatus::Failed,
                        detail: format!(
                            "{class} after {took} ms: {}",
                            redactor.redact(&error.to_string())
                        ),
                    },
                    failure: Some(class),
                    stderr_tail: error
                        .stderr_tail()
                        .map(|tail| last_chars(&redactor.redact(tail), DIAGNOSE_STDERR_TAIL_CHARS))
                        .filter(|tail| !tail.trim().is_empty()),
                }
            }
        }
    }
}

/// The enabled check: neither the connection nor its connector is retired.
fn enabled(connection: &ConnectionRow, connector: &ConnectorRow) -> Result<String, String> {
    if connection.retired_at.is_some() {
        return Err(format!(
            "connection `{}` is retired: it runs nothing until it is restored",
            connection.name
        ));
    }
    if connector.retired_at.is_some() {
        return Err(format!(
            "connector `{}` is retired: its connections run nothing until it is restored",
            connector.name
        ));
    }
    Ok("the connection and its connector are in service".into())
}

/// The approved check: an HTTP connector needs no approval; a stdio one runs only its
/// approved revision.
fn approved(connector: &ConnectorRow) -> Result<String, String> {
    match (connector.is_runnable(), connector.transport.as_str()) {
        (true, "http") => Ok("an HTTP connector needs no approval".into()),
        (true, _) => Ok(format!(
            "connector `{}` revision {} is approved",
            connector.name, connector.revision
        )),
        (false, _) => Err(format!(
            "connector `{}` revision {} runs a command that is not approved; an installation owner must run `switchyard connector approve {}`",
            connector.name, connector.revision, connector.name
        )),
    }
}

/// The transport check's detail: what is started or reached.
fn transport(spec: &ConnectorSpec) -> String {
    match spec {
        ConnectorSpec::Stdio { command, args, env } => {
            let mut line = format!("stdio `{command}`");
            for arg in args {
                line.push(' ');
                line.push_str(arg);
            }
            if !env.is_empty() {
                line.push_str(&format!(", declaring env {}", env.join(", ")));
            }
            line
        }
        ConnectorSpec::Http { url } => format!("HTTP {url}"),
    }
}

/// The credentials check's detail once every bound value resolved: the names, never a value.
fn bound_names(launch: &SessionLaunch) -> String {
    let names: Vec<String> = launch
        .env
        .iter()
        .map(|(name, _)| format!("env {name}: present"))
        .chain(
            launch
                .headers
                .iter()
                .map(|(name, _)| format!("header {name}: present")),
        )
        .collect();
    if names.is_empty() {
        "none bound, none needed".into()
    } else {
        names.join(", ")
    }
}

/// A skipped handshake, `why`.
fn skipped(why: String) -> Handshake {
    Handshake {
        result: CheckResult {
            check: DiagnoseCheck::Handshake,
            status: CheckStatus::Skipped,
            detail: why,
        },
        failure: None,
        stderr_tail: None,
    }
}

/// The class of a device runner's failed discovery, from its stable code: the class itself,
/// or a credential code (a value missing on the device, or refused by the server).
fn device_failure_class(code: &str) -> Option<FailureClass> {
    if codes::is_credential_failure(code) {
        return Some(FailureClass::AuthRefused);
    }
    FailureClass::from_name(code)
}

/// The last `limit` characters of `text`.
fn last_chars(text: &str, limit: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(limit)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stderr_tail_keeps_the_last_characters() {
        assert_eq!(last_chars("ab€cd", 3), "€cd");
        assert_eq!(last_chars("ab", 3), "ab");
    }
}
