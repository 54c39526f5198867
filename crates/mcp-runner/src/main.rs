//! `switchyard-mcp-runner DIR [--profile NAME] [--server URL]`: the device companion runner.
//!
//! Runs MCP tool calls placed on this device, as the device paired by `switchyard pair`, with
//! its receipt outbox in `DIR`. Usually started by `switchyard mcp-runner DIR`. Stops on SIGINT
//! or SIGTERM once running calls have finished and reported; a second signal stops at once
//! (calls cut off are reported `unknown` at the next start).
//!
//! Environment: `SWITCHYARD_DEVICE_PROFILE` (the profile when `--profile` is not given),
//! `SWITCHYARD_URL` (like `--server`), `SWITCHYARD_MCP_CREDENTIALS_FILE` (the credential bindings
//! file; default `<config dir>/credentials/<profile>.mcp-bindings.json`, where `switchyard
//! credential set` writes), `SWITCHYARD_CONFIG_DIR` (where identities are), `SWITCHYARD_LOG`
//! (log filter, default `info`), `SWITCHYARD_LOG_FORMAT` (like `--log-format`). Logs go to
//! stderr. With `OTEL_EXPORTER_OTLP_ENDPOINT` set, its spans are exported over OTLP/HTTP
//! (docs/OPERATIONS.md, "Traces and logs").
//!
//! Exit codes (stable):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | stopped by SIGINT/SIGTERM after running calls finished and the lease was released |
//! | 1 | internal failure: the outbox failed during recovery, the runtime could not start, the runner panicked, or a second signal forced the stop |
//! | 2 | usage or local setup: bad flags, an OTLP exporter that cannot be built, no such device profile, `--server`/`SWITCHYARD_URL` differs from the profile's server, outbox directory refused (permissions, owner, another device, in use) |
//! | 3 | the server refused the device credential (`device_revoked`): pair again |
//! | 4 | the server refused the runner lease for another reason |

use clap::Parser;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use switchyard_mcp_runner::SessionCapFlags;
use switchyard_mcp_runner::credentials::{
    CredentialResolver, NoKeyring, OsKeyring, SecretStore, device_bindings_file,
};
use switchyard_mcp_runner::device::{self, Credential, DeviceConfig, RunError};
use switchyard_mcp_runner::endpoints::EndpointGuard;
use switchyard_mcp_runner::executor::{ExecutorConfig, LaunchResolver, immediate_resolver};
use switchyard_mcp_runner::identity::{IdentityStore, KeyringChoice, select_profile};
use switchyard_mcp_runner::oauth::{DeviceGrants, DeviceOAuth};
use switchyard_mcp_runner::outbox::Outbox;
use switchyard_mcp_runner::telemetry::{self, LogFormat, TelemetryConfig};
use switchyard_protocol::runner::AuthStateReport;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "switchyard-mcp-runner",
    version,
    about = "The Switchyard device companion runner"
)]
struct Args {
    /// The receipt outbox directory: created with mode 0700 if missing; one per device.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// The device profile to run as [default: $SWITCHYARD_DEVICE_PROFILE, else `default`].
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// The server the device must be paired with; the runner refuses to start if the profile
    /// names another.
    #[arg(long, value_name = "URL", env = "SWITCHYARD_URL")]
    server: Option<String>,
    /// Caps on warm sessions.
    #[command(flatten)]
    session_caps: SessionCapFlags,
    /// Log lines on stderr as text, or as JSON objects (one a line) carrying the fields of the
    /// spans they happened in (a call's `call_id` and `trace_id`).
    #[arg(long, value_enum, env = "SWITCHYARD_LOG_FORMAT", default_value_t)]
    log_format: LogFormat,
    /// Longest wait for any one OAuth request (discovery, a token renewal) of a connection
    /// authorized on this device, in seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        env = "SWITCHYARD_AUTHORIZATION_TIMEOUT_SECONDS",
        default_value_t = 10
    )]
    oauth_timeout_seconds: u64,
}

/// Why the runner exits with a failure.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// Exit 1.
    #[error("{0}")]
    Internal(String),
    /// Exit 2.
    #[error("{0}")]
    Setup(String),
    /// Exit 1, 3 or 4.
    #[error(transparent)]
    Run(#[from] RunError),
}

impl Failure {
    fn exit_code(&self) -> u8 {
        match self {
            Failure::Internal(_) => 1,
            Failure::Setup(_) => 2,
            Failure::Run(RunError::Revoked { .. }) => 3,
            Failure::Run(RunError::Refused(_)) => 4,
            Failure::Run(RunError::Outbox(_) | RunError::Client(_)) => 1,
        }
    }
}

fn main() -> ExitCode {
    // A stdio MCP server is started through this executable in a hidden mode.
    if let Some(code) = switchyard_mcp_runner::contain::run_helper_if_asked() {
        return code;
    }
    // Nothing it starts may read its environment or memory (credentials) through /proc.
    if let Err(error) = switchyard_mcp_runner::contain::make_process_unreadable() {
        eprintln!(
            "switchyard-mcp-runner: cannot make the process unreadable (PR_SET_DUMPABLE): {error}"
        );
        return ExitCode::from(1);
    }
    let args = Args::parse();
    // reqwest is built without a TLS provider: install ring before any client exists (the
    // span exporter's too).
    device::install_tls_provider();
    let telemetry = match telemetry::init(&TelemetryConfig {
        format: args.log_format,
        default_filter: "info",
        service_name: "switchyard-mcp-runner",
    }) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("switchyard-mcp-runner: {error}");
            return ExitCode::from(2);
        }
    };
    // One thread runs every task: a call's steps hand over from task to task (the channel's
    // reader, the executor loop, the call) without waking another thread each time. What
    // waits for the disk (the outbox's commits) goes to the blocking pool; a call's credential
    // lookups (its bindings file, the kernel keyring's thread) are brief and stay here.
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| Failure::Internal(format!("cannot start the runtime: {error}")))
        .and_then(|runtime| runtime.block_on(as_task(run(args))));
    telemetry.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("switchyard-mcp-runner: {failure}");
            ExitCode::from(failure.exit_code())
        }
    }
}

/// Runs `work` as a task of the runtime, so that a panic in it ends the runner as an internal
/// failure (exit code 1) instead of unwinding out of `main`.
async fn as_task(
    work: impl Future<Output = Result<(), Failure>> + Send + 'static,
) -> Result<(), Failure> {
    tokio::spawn(work)
        .await
        .unwrap_or_else(|error| Err(Failure::Internal(format!("the runner stopped: {error}"))))
}

async fn run(args: Args) -> Result<(), Failure> {
    let profile = select_profile(args.profile.as_deref()).map_err(setup)?;
    let store = IdentityStore::open(
        IdentityStore::default_location(),
        KeyringChoice::from_env().map_err(setup)?,
    )
    .map_err(setup)?;
    let identity = store.load(&profile).map_err(setup)?.ok_or_else(|| {
        Failure::Setup(format!(
            "no device profile `{profile}`: pair this device first with `switchyard pair`"
        ))
    })?;
    if let Some(server) = args.server.filter(|server| !server.is_empty())
        && !same_server(&server, &identity.server_url)
    {
        return Err(Failure::Setup(format!(
            "device profile `{profile}` is paired with {}, not {server} (from --server or \
             SWITCHYARD_URL); use the profile paired with that server, or pair again",
            identity.server_url
        )));
    }
    let outbox = Outbox::open(&args.dir, identity.device_id).map_err(setup)?;

    let shutdown = CancellationToken::new();
    watch_signals(shutdown.clone())?;
    let (reports, auth_reports) = tokio::sync::mpsc::channel(AUTH_REPORTS);
    let config = DeviceConfig {
        server_url: identity.server_url.trim_end_matches('/').to_owned(),
        device_id: identity.device_id,
        credential: Credential::new(identity.credential),
        resolver: launch_resolver(
            &device_bindings_file(&IdentityStore::default_location(), &profile),
            Duration::from_secs(args.oauth_timeout_seconds.max(1)),
            reports,
        ),
        executor: ExecutorConfig {
            session_caps: args.session_caps.into(),
            // Its own machine is what local placement is for; metadata services are not.
            endpoints: EndpointGuard::device(),
            ..ExecutorConfig::default()
        },
        auth_reports: Some(auth_reports),
    };
    device::run(config, outbox, shutdown).await?;
    Ok(())
}

/// Resolves credentials from the bindings file at `bindings` (`SWITCHYARD_MCP_CREDENTIALS_FILE`,
/// else the profile's file in the configuration directory), with the OS keyring for `os_store`
/// references when it can be used, and sends the OAuth grants `switchyard auth` kept in the
/// keyring (each OAuth request bounded by `oauth_timeout`).
fn launch_resolver(
    bindings: &Path,
    oauth_timeout: Duration,
    reports: tokio::sync::mpsc::Sender<AuthStateReport>,
) -> LaunchResolver {
    let store: Arc<dyn SecretStore> = match OsKeyring::new() {
        Ok(keyring) => Arc::new(keyring),
        Err(error) => {
            tracing::info!(%error, "no OS keyring; os_store credential references will fail");
            Arc::new(NoKeyring)
        }
    };
    let grants = DeviceGrants::new(Arc::clone(&store));
    let resolver = CredentialResolver::new(Some(bindings.to_owned()), store);
    DeviceOAuth::wrap(
        immediate_resolver(move |call| resolver.launch_for(call)),
        grants,
        EndpointGuard::device(),
        oauth_timeout,
        Some(reports),
    )
}

/// How many grant-state reports may wait for the server (each is small; a full queue drops
/// one, which the next change sends again).
const AUTH_REPORTS: usize = 64;

/// Cancels `shutdown` at the first SIGINT or SIGTERM; exits at once at the second.
fn watch_signals(shutdown: CancellationToken) -> Result<(), Failure> {
    let listen = |kind| {
        signal(kind)
            .map_err(|error| Failure::Internal(format!("cannot listen for signals: {error}")))
    };
    let mut interrupt = listen(SignalKind::interrupt())?;
    let mut terminate = listen(SignalKind::terminate())?;
    tokio::spawn(async move {
        let mut first = true;
        loop {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            if first {
                tracing::info!(
                    "stop requested: running calls finish and report, then the lease is \
                     released (signal again to stop at once)"
                );
                shutdown.cancel();
                first = false;
            } else {
                // Everything started is in the outbox; the next start reports it.
                eprintln!(
                    "switchyard-mcp-runner: stopped at once; cut-off calls are reported unknown at the next start"
                );
                std::process::exit(1);
            }
        }
    });
    Ok(())
}

/// Whether two server URLs name the same server (ignoring a trailing slash).
fn same_server(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

fn setup(error: impl std::fmt::Display) -> Failure {
    Failure::Setup(error.to_string())
}
