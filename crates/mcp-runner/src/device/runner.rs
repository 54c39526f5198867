//! The device runner's life: take the runner lease (waiting while another process holds it),
//! recover the outbox, run the executor until told to stop or fenced, then either release the
//! lease and return, or take it again.

use super::client::{ApiFailure, Credential, RunnerClient};
use super::control::DeviceControl;
use super::heartbeat::HeartbeatTask;
use super::pins::SpecPins;
use super::recovery::recover;
use super::state::{ActiveCalls, Admission, Halt, Stop};
use crate::backoff::Backoff;
use crate::executor::{Executor, ExecutorConfig, LaunchResolver};
use crate::outbox::{Outbox, OutboxError};
use std::sync::Arc;
use std::time::Duration;
use switchyard_protocol::DeviceId;
use switchyard_protocol::runner::{AcquireAnswer, AuthStateReport, Epoch};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The shortest wait between two attempts to take a held lease.
const MIN_HELD_WAIT: Duration = Duration::from_millis(250);

/// How a device runner runs.
pub struct DeviceConfig {
    /// The server's base URL, from the device identity.
    pub server_url: String,
    /// The device.
    pub device_id: DeviceId,
    /// The device credential.
    pub credential: Credential,
    /// Turns a leased call into a session launch (credentials resolved); run only for calls
    /// whose spec the device's owner accepted.
    pub resolver: LaunchResolver,
    /// Executor settings.
    pub executor: ExecutorConfig,
    /// Where the resolver sends the changed states of device-held OAuth grants
    /// ([`crate::oauth::DeviceOAuth`]); each is reported to the server.
    pub auth_reports: Option<mpsc::Receiver<AuthStateReport>>,
}

/// Why a device runner stopped other than by being asked to.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The server refused the device credential: the device was revoked (or the credential is
    /// not valid). Nothing will be accepted until the device is paired again.
    #[error(
        "the server refused the credential of device {device_id} ({code}): {message}{}",
        pair_again_hint(message)
    )]
    Revoked {
        /// The device.
        device_id: DeviceId,
        /// The error code (`device_revoked`).
        code: String,
        /// The server's message.
        message: String,
    },
    /// The server refused to give this runner its lease for a reason other than the credential.
    #[error("the server refused the runner lease: {0}")]
    Refused(ApiFailure),
    /// The outbox failed during recovery.
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    /// The HTTP client could not be built.
    #[error("cannot start the HTTP client: {0}")]
    Client(ApiFailure),
}

/// How to recover from a refused credential, unless the server's message already says it.
fn pair_again_hint(message: &str) -> &'static str {
    if message.contains("switchyard pair") {
        ""
    } else {
        "; pair this device again with `switchyard pair`"
    }
}

/// Runs the device runner with `outbox` until `shutdown` is cancelled (then running calls
/// finish and report, the lease is released and `Ok` is returned) or the device credential is
/// refused.
pub async fn run(
    config: DeviceConfig,
    outbox: Outbox,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let outbox = Arc::new(outbox);
    let client = RunnerClient::new(&config.server_url, config.credential.clone())
        .map_err(RunError::Client)?;
    let mut config = config;
    if let Some(reports) = config.auth_reports.take() {
        tokio::spawn(report_auth_states(
            client.clone(),
            reports,
            shutdown.clone(),
        ));
    }
    let pins = Arc::new(SpecPins::load(Arc::clone(&outbox))?);
    let config = DeviceConfig {
        resolver: pins.guard(Arc::clone(&config.resolver)),
        ..config
    };
    loop {
        let Some((epoch, ttl)) = acquire(&client, &config, outbox.holder(), &shutdown).await?
        else {
            return Ok(());
        };
        // The status line for a person; JSON logs keep every line JSON (the event below).
        if !crate::telemetry::json_logs() {
            eprintln!(
                "runner for device {} on {}: lease epoch {}, outbox {}",
                config.device_id,
                config.server_url,
                epoch.0,
                outbox.dir().display()
            );
        }
        tracing::info!(
            epoch = epoch.0,
            ttl_s = ttl.as_secs(),
            outbox = %outbox.dir().display(),
            "runner lease acquired"
        );
        let stop = match serve_term(&config, &client, &outbox, epoch, ttl, &shutdown).await {
            Ok(stop) => stop,
            Err(error) => {
                release(&client, epoch).await;
                return Err(error);
            }
        };
        match stop {
            Stop::Revoked { code, message } => {
                return Err(RunError::Revoked {
                    device_id: config.device_id,
                    code,
                    message,
                });
            }
            Stop::Fenced { reason } if !shutdown.is_cancelled() => {
                tracing::warn!(%reason, "the lease term ended; taking the lease again");
            }
            Stop::Fenced { .. } | Stop::Shutdown => {
                release(&client, epoch).await;
                tracing::info!("runner stopped");
                return Ok(());
            }
        }
    }
}

/// Sends each reported grant state to the server until shutdown. A report that fails is
/// logged and dropped: the next change, or the next runner's first use, reports again.
async fn report_auth_states(
    client: RunnerClient,
    mut reports: mpsc::Receiver<AuthStateReport>,
    shutdown: CancellationToken,
) {
    loop {
        let report = tokio::select! {
            report = reports.recv() => match report {
                Some(report) => report,
                None => return,
            },
            () = shutdown.cancelled() => return,
        };
        if let Err(error) = client.auth_state(&report).await {
            tracing::warn!(%error, connection = %report.connection_id, state = %report.state, "cannot report a grant's state");
        }
    }
}

/// Takes the device's runner lease, waiting while another runner holds it. `None` when
/// shutdown came first.
async fn acquire(
    client: &RunnerClient,
    config: &DeviceConfig,
    holder: uuid::Uuid,
    shutdown: &CancellationToken,
) -> Result<Option<(Epoch, Duration)>, RunError> {
    let mut backoff = Backoff::default();
    let mut waiting = false;
    loop {
        let answer = tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            answer = client.acquire(holder) => answer,
        };
        let delay = match answer {
            Ok(AcquireAnswer::Acquired { epoch, ttl_seconds }) => {
                return Ok(Some((epoch, Duration::from_secs(ttl_seconds))));
            }
            Ok(AcquireAnswer::Held { retry_after_ms }) => {
                if !waiting {
                    tracing::info!(
                        device_id = %config.device_id,
                        "runner lease held: another runner for this device is active; waiting \
                         until it stops or its lease expires"
                    );
                    waiting = true;
                }
                backoff.reset();
                Duration::from_millis(retry_after_ms).max(MIN_HELD_WAIT)
            }
            Err(ApiFailure::Revoked { code, message }) => {
                return Err(RunError::Revoked {
                    device_id: config.device_id,
                    code,
                    message,
                });
            }
            Err(ApiFailure::Unavailable(reason)) => {
                let delay = backoff.next_delay();
                tracing::warn!(%reason, retry_in = ?delay, "cannot take the runner lease");
                delay
            }
            Err(refused) => return Err(RunError::Refused(refused)),
        };
        tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// One lease term: heartbeat, recovery, then the executor until it stops. Returns why the
/// term ended.
async fn serve_term(
    config: &DeviceConfig,
    client: &RunnerClient,
    outbox: &Arc<Outbox>,
    epoch: Epoch,
    ttl: Duration,
    shutdown: &CancellationToken,
) -> Result<Stop, RunError> {
    let halt = Arc::new(Halt::new(shutdown.child_token()));
    let active = Arc::new(ActiveCalls::default());
    let control = Arc::new(DeviceControl::new(
        client.clone(),
        Arc::clone(outbox),
        epoch,
        config.executor.max_concurrent,
        Arc::new(Admission::default()),
        Arc::clone(&halt),
        Arc::clone(&active),
    ));
    let executor = Executor::new(
        Arc::clone(&control),
        Arc::clone(&config.resolver),
        config.executor.clone(),
    );
    let term_over = CancellationToken::new();
    let heartbeat = tokio::spawn(
        HeartbeatTask {
            client: client.clone(),
            epoch,
            ttl,
            active,
            executor: executor.handle(),
            halt: Arc::clone(&halt),
            outbox: Arc::clone(outbox),
        }
        .run(term_over.clone()),
    );

    let result = match recover(client, outbox, &halt).await {
        Ok(Some(recovered)) => {
            tracing::info!(
                unknown = recovered.unknown,
                withdrawn = recovered.withdrawn,
                uploaded = recovered.uploaded,
                quarantined = recovered.quarantined,
                left = recovered.left,
                "outbox recovered; admitting calls"
            );
            executor.run(halt.token().clone()).await;
            Ok(halt.outcome())
        }
        Ok(None) => Ok(halt.outcome()),
        Err(error) => Err(RunError::Outbox(error)),
    };
    control.write_acknowledgements().await;
    term_over.cancel();
    if let Err(error) = heartbeat.await {
        tracing::error!(%error, "the heartbeat task failed");
    }
    result
}

/// Gives the lease up so that the next runner need not wait for it to expire; a failure only
/// means the lease expires on its own.
async fn release(client: &RunnerClient, epoch: Epoch) {
    match client.release(epoch).await {
        Ok(()) => tracing::info!(epoch = epoch.0, "runner lease released"),
        Err(failure) => {
            tracing::warn!(%failure, "could not release the runner lease; it expires on its own");
        }
    }
}
