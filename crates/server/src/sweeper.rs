//! The sweeper: a small idempotent reconciler every replica runs. Each pass settles calls held
//! under expired runner leases (those that expired lately; every one, now and then), expires
//! calls whose approval question waited past their workspace's approval timeout and calls
//! queued too long, erases inputs and results (and observation outputs) past retention,
//! removes old resolution explanations, publishes pending evidence (retrying failures at most
//! 60 s apart until their deadline), deletes evidence records past their workspace's
//! retention (the calls keep their disposition), writes calls submitted and ended to the audit log and
//! deletes expired web sessions and idle `/mcp` sessions. Every change is a
//! guarded update, so replicas sweeping at once is harmless.

use crate::app::App;
use crate::db::ExpiredLeases;
use crate::metrics::Decision;
use std::time::{Duration, Instant};
use switchyard_protocol::CallState;
use tokio_util::sync::CancellationToken;

/// Sweeper settings.
#[derive(Clone, Debug)]
pub struct SweeperConfig {
    /// Time between passes.
    pub interval: Duration,
    /// A call still queued after this long is `expired`.
    pub queue_expiry: Duration,
    /// Inputs and results are erased this long after a call finished.
    pub retention: Duration,
    /// Resolution explanations are removed this long after they were recorded.
    pub explanation_ttl: Duration,
    /// How often heartbeat renewals and device sightings kept in memory are written (never
    /// more than a quarter of the runner lease: see `app::liveness`).
    pub heartbeat_flush: Duration,
    /// Calls are written to the audit log (`call.submitted`, `call.ended`) this long after
    /// they were submitted or finished, so that no transaction still committing is skipped.
    pub audit_lag: Duration,
}

impl Default for SweeperConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            queue_expiry: Duration::from_secs(600),
            retention: Duration::from_secs(3600),
            explanation_ttl: Duration::from_secs(3600),
            heartbeat_flush: Duration::from_secs(1),
            audit_lag: Duration::from_secs(5),
        }
    }
}

/// How often a pass settles the calls of every expired runner lease; the passes between
/// settle those of leases that expired in the last minute (see [`ExpiredLeases`]).
pub const FULL_LEASE_SWEEP_EVERY: Duration = Duration::from_secs(30);

/// At most this many evidence records are deleted for age per pass.
const EVIDENCE_EXPIRED_PER_PASS: i64 = 1000;

/// At most this many calls' submissions, and as many ends, go to the audit log per pass.
const AUDIT_CALLS_PER_PASS: i64 = 2000;

/// Sweeps until `shutdown`. The first pass, the one after a failed pass and one every
/// [`FULL_LEASE_SWEEP_EVERY`] look at every expired runner lease.
pub async fn run(app: App, config: SweeperConfig, shutdown: CancellationToken) {
    let mut last_full: Option<Instant> = None;
    loop {
        let leases = match last_full {
            Some(at) if at.elapsed() < FULL_LEASE_SWEEP_EVERY => ExpiredLeases::Recent,
            _ => ExpiredLeases::All,
        };
        let started = Instant::now();
        match sweep(&app, &config, leases).await {
            Ok(()) if leases == ExpiredLeases::All => last_full = Some(started),
            Ok(()) => {}
            Err(e) => {
                last_full = None;
                tracing::warn!(error = %e, "sweep failed; retrying at the next pass");
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(config.interval) => {}
        }
    }
}

/// One pass, settling the calls of every expired runner lease.
pub async fn sweep_once(app: &App, config: &SweeperConfig) -> Result<(), sqlx::Error> {
    sweep(app, config, ExpiredLeases::All).await
}

/// One pass, settling the calls of `leases`.
async fn sweep(
    app: &App,
    config: &SweeperConfig,
    leases: ExpiredLeases,
) -> Result<(), sqlx::Error> {
    let db = app.db();
    let (requeued, unknown) = app.sent(db.call_sweep_lost_leases(leases).await?);
    app.metrics().calls_finished(CallState::Unknown, unknown);
    if requeued + unknown > 0 {
        tracing::warn!(
            requeued,
            unknown,
            "settled calls of runners whose lease expired"
        );
    }
    let expired_questions = app.sent(db.approval_expire_overdue().await?);
    for question in &expired_questions {
        app.metrics()
            .approval_answered(Decision::Expired, question.waited);
    }
    let unanswered = expired_questions.len();
    app.metrics()
        .calls_finished(CallState::Expired, unanswered as u64);
    if unanswered > 0 {
        tracing::info!(unanswered, "expired calls nobody approved in time");
    }
    let expired = db.call_expire_queued(config.queue_expiry).await?;
    app.metrics().calls_finished(CallState::Expired, expired);
    if expired > 0 {
        tracing::info!(expired, "expired calls no runner took in time");
    }
    let erased = db.call_sweep_retention(config.retention).await?;
    if erased > 0 {
        tracing::debug!(erased, "erased inputs and results past retention");
    }
    let device_mail = db.device_sweep(crate::app::RELEASE_TTL).await?;
    if device_mail > 0 {
        tracing::debug!(
            device_mail,
            "deleted stale session releases and pairing attempts"
        );
    }
    let outputs = db.observation_sweep_retention(config.retention).await?;
    if outputs > 0 {
        tracing::debug!(outputs, "erased observation outputs past retention");
    }
    let explanations = db
        .resolution_sweep_explanations(config.explanation_ttl)
        .await?;
    if explanations > 0 {
        tracing::debug!(
            explanations,
            "removed resolution explanations past their time"
        );
    }
    let (published, failed) = db.evidence_publish_due().await?;
    if published + failed > 0 {
        tracing::debug!(published, failed, "published pending evidence");
    }
    let given_up = db.evidence_expire_pending().await?;
    if given_up > 0 {
        tracing::warn!(
            given_up,
            "gave up pending evidence not published within its deadline"
        );
    }
    let aged = db
        .evidence_sweep_retention(EVIDENCE_EXPIRED_PER_PASS)
        .await?;
    if aged > 0 {
        tracing::info!(
            aged,
            "deleted evidence records past their workspace's retention"
        );
    }
    let audited = db
        .audit_record_calls(config.audit_lag, AUDIT_CALLS_PER_PASS)
        .await?;
    if audited > 0 {
        tracing::debug!(audited, "wrote calls submitted and ended to the audit log");
    }
    let sessions = db.web_session_sweep().await?;
    if sessions > 0 {
        tracing::debug!(sessions, "deleted expired web sessions");
    }
    let mcp_sessions = db.mcp_session_sweep().await?;
    if mcp_sessions > 0 {
        tracing::debug!(mcp_sessions, "deleted idle /mcp sessions");
    }
    let mcp_requests = db.mcp_request_sweep().await?;
    if mcp_requests > 0 {
        tracing::debug!(
            mcp_requests,
            "forgot /mcp requests and cancellations past their time"
        );
    }
    let abandoned = db.oauth_pending_expire().await?;
    if abandoned > 0 {
        tracing::debug!(
            abandoned,
            "forgot OAuth authorizations whose callback never came"
        );
    }
    Ok(())
}
