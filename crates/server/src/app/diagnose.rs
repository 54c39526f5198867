//! Diagnosing a connection (`switchyard connection diagnose`, the inspector's Diagnose
//! button): the checks a call depends on, in order (a device connection's transport check
//! includes its placement: device not revoked, spec accepted by its owner), then a live MCP handshake within a time
//! bound, whose failure is classified from the error's kind ([`FailureClass`]).
//!
//! Guarantees:
//! - **Read-only.** Nothing is recorded: not the catalog, not the connection's discovery
//!   outcome, not an event. Diagnosing a connection changes nothing a call sees.
//! - **No secret leaves.** Credentials are named with whether their value is present; the
//!   handshake's message and the server's stderr tail are redacted with the bound values.
//! - **The live check runs where the connection runs.** A central connection's handshake is
//!   made here, as the central runner opens a session. A device's connection runs on the
//!   device with the device's credentials, which the server never sees: its handshake is
//!   skipped and the device's last discovery is reported instead.

use super::{Actor, App};
use crate::db::{ConnectionRow, ConnectorRow, Consent};
use crate::error::{AppError, AppResult};
use std::time::{Duration, Instant};
use switchyard_mcp_runner::SessionLaunch;
use switchyard_mcp_runner::redact::Redactor;
use switchyard_mcp_runner::session::initialize_then_discover;
use switchyard_protocol::ErrorCode;
use switchyard_protocol::api::ConnectorSpec;
use switchyard_protocol::diagnose::{
    CheckResult, CheckStatus, DIAGNOSE_STDERR_TAIL_CHARS, DiagnoseCheck, DiagnoseRequest,
    DiagnosisView, FailureClass, LiveCheck, MAX_DIAGNOSE_TIMEOUT_MS,
};

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
            let resolved = self.central_launch(connection.id, &spec).await?;
            checks.prerequisite(
                DiagnoseCheck::Credentials,
                resolved
                    .as_ref()
                    .map(bound_names)
                    .map_err(|e| format!("{e} ({})", e.code())),
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
            None => skipped(device_outcome(&connection)),
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

/// Why a device connection's handshake is not made here, with its device's last discovery.
fn device_outcome(connection: &ConnectionRow) -> String {
    let last = match (
        &connection.last_discovery_at,
        &connection.last_discovery_error,
    ) {
        (_, Some(error)) => format!("its last discovery failed: {error}"),
        (Some(at), None) => format!("its last discovery succeeded {}", at.to_rfc3339()),
        (None, None) => "it was never discovered".into(),
    };
    format!(
        "the live check runs on {}, with the device's credentials; `switchyard connection discover` asks its runner to list the tools; {last}",
        connection.runner_ref
    )
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
