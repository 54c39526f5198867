//! `switchyard-server`: parse flags and environment into a config, then run one subcommand.

use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use switchyard_mcp_runner::credentials::validate_file;
use switchyard_mcp_runner::endpoints::{AllowList, EndpointGuard};
use switchyard_mcp_runner::telemetry::{self, LogFormat, TelemetryConfig};
use switchyard_mcp_runner::{ExecutorConfig, SessionCapFlags};
use switchyard_server::app::{App, AppConfig};
use switchyard_server::central::CentralConfig;
use switchyard_server::db::{CallQuotas, Datastore, MIGRATOR, PoolHealth};
use switchyard_server::mcp::McpConfig;
use switchyard_server::serve::{HttpLimits, ServeConfig, serve};
use switchyard_server::sweeper::SweeperConfig;
use switchyard_server::vault::KeyFile;
use switchyard_server::web::WebConfig;
use tokio_util::sync::CancellationToken;

/// The Switchyard control plane.
#[derive(Debug, Parser)]
#[command(name = "switchyard-server", version)]
struct Cli {
    /// PostgreSQL connection URL.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    database_url: Option<String>,
    /// A file holding the PostgreSQL connection URL (mode 0600, owned by the server's user),
    /// so that its password is on no command line and in no environment.
    #[arg(
        long,
        env = "DATABASE_URL_FILE",
        global = true,
        conflicts_with = "database_url"
    )]
    database_url_file: Option<PathBuf>,
    /// Log lines on stderr as text, or as JSON objects (one a line) carrying the fields of the
    /// spans they happened in (a request's `request_id` and `trace_id`, a call's `call_id`).
    #[arg(
        long,
        value_enum,
        env = "SWITCHYARD_LOG_FORMAT",
        global = true,
        default_value_t
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start and matched at once: the serve variant's size costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the HTTP API and run the central executor.
    Serve {
        /// Address to listen on.
        #[arg(long, env = "SWITCHYARD_LISTEN", default_value = "127.0.0.1:8787")]
        listen: SocketAddr,
        /// Length of runner leases (the central runner's and devices'), in seconds.
        #[arg(long, env = "SWITCHYARD_LEASE_TTL_SECONDS", default_value_t = 30)]
        lease_ttl_seconds: u64,
        /// Warm MCP sessions idle this many seconds are closed.
        #[arg(long, env = "SWITCHYARD_SESSION_IDLE_SECONDS", default_value_t = 300)]
        session_idle_seconds: u64,
        /// A call still queued after this many seconds is expired.
        #[arg(long, env = "SWITCHYARD_QUEUE_EXPIRY_SECONDS", default_value_t = 600)]
        queue_expiry_seconds: u64,
        /// Inputs and results are erased this many seconds after a call finished.
        #[arg(
            long,
            env = "SWITCHYARD_RESULT_RETENTION_SECONDS",
            default_value_t = 3600
        )]
        result_retention_seconds: u64,
        /// Credential bindings file for central connections (references only; see
        /// docs/CREDENTIALS.md). Re-read at every call.
        #[arg(long, env = "SWITCHYARD_MCP_CREDENTIALS_FILE")]
        mcp_credentials_file: Option<PathBuf>,
        /// The installation key file (0600, created with a new key when missing): seals the
        /// credential values workspace admins set for central connections, kept in the
        /// database. Unset: such values are refused. Keep it out of database backups.
        #[arg(long, env = "SWITCHYARD_INSTALLATION_KEY_FILE", value_name = "PATH")]
        installation_key_file: Option<PathBuf>,
        /// Deadline for tool discovery, in seconds.
        #[arg(
            long,
            env = "SWITCHYARD_DISCOVERY_DEADLINE_SECONDS",
            default_value_t = 20
        )]
        discovery_deadline_seconds: u64,
        /// Mark the web UI's cookies `Secure`: set this when users reach the server over https
        /// (through a proxy that terminates TLS).
        #[arg(long, env = "SWITCHYARD_SECURE_COOKIES")]
        secure_cookies: bool,
        /// Most start acks, and most completions, the central runner writes together (in one
        /// transaction, one statement) when several are ready at once; 1 writes each on its own.
        #[arg(
            long,
            env = "SWITCHYARD_CENTRAL_BATCH_MAX",
            default_value_t = switchyard_server::central::DEFAULT_BATCH_MAX,
            value_parser = clap::value_parser!(u16).range(1..)
        )]
        central_batch_max: u16,
        /// Most submitted calls inserted together (in one statement) when several wait at
        /// once; 1 inserts each on its own. (Their submit reads, reads only, are made together
        /// whatever this says.)
        #[arg(
            long,
            env = "SWITCHYARD_SUBMIT_BATCH_MAX",
            default_value_t = switchyard_server::app::DEFAULT_SUBMIT_BATCH_MAX,
            value_parser = clap::value_parser!(u16).range(1..)
        )]
        submit_batch_max: u16,
        /// Most calls the central runner runs at once.
        #[arg(
            long,
            env = "SWITCHYARD_CENTRAL_MAX_CONCURRENT",
            default_value_t = switchyard_server::central::DEFAULT_MAX_CONCURRENT,
            value_parser = clap::value_parser!(u16).range(1..)
        )]
        central_max_concurrent: u16,
        /// Seconds a connection may take to send a request's head, and may sit idle between
        /// requests, before it is closed. Keep it above 20: the runner, the CLI and the test
        /// kit drop their idle connections after 20 seconds.
        #[arg(
            long,
            env = "SWITCHYARD_HTTP_HEADER_TIMEOUT_SECONDS",
            default_value_t = switchyard_server::serve::DEFAULT_HEADER_READ_TIMEOUT.as_secs(),
            value_parser = clap::value_parser!(u64).range(1..=3600)
        )]
        http_header_timeout_seconds: u64,
        /// HTTP connections served at once; past it, new ones wait to be accepted.
        #[arg(
            long,
            env = "SWITCHYARD_HTTP_MAX_CONNECTIONS",
            default_value_t = switchyard_server::serve::DEFAULT_MAX_CONNECTIONS
        )]
        http_max_connections: usize,
        /// Most calls a workspace may have queued or awaiting approval; a submission past it
        /// is refused (429 `quota_exceeded`) and nothing is queued.
        #[arg(
            long,
            env = "SWITCHYARD_MAX_QUEUED_PER_WORKSPACE",
            default_value_t = switchyard_server::db::CallQuotas::DEFAULT_MAX_QUEUED,
            value_parser = clap::value_parser!(u32).range(1..)
        )]
        max_queued_per_workspace: u32,
        /// Most calls a workspace may have leased or running; while it has that many, its
        /// submissions are refused (429 `quota_exceeded`).
        #[arg(
            long,
            env = "SWITCHYARD_MAX_RUNNING_PER_WORKSPACE",
            default_value_t = switchyard_server::db::CallQuotas::DEFAULT_MAX_RUNNING,
            value_parser = clap::value_parser!(u32).range(1..)
        )]
        max_running_per_workspace: u32,
        /// Caps on the central runner's warm sessions.
        #[command(flatten)]
        session_caps: SessionCapFlags,
        /// A network (CIDR or address) or host name that HTTP connectors may point at although
        /// it is loopback, private, link-local, CGNAT, …, which are refused otherwise.
        /// Repeatable; the environment variable takes a comma-separated list.
        #[arg(
            long = "allow-endpoint",
            env = "SWITCHYARD_ALLOW_ENDPOINTS",
            value_name = "CIDR|HOST",
            value_delimiter = ','
        )]
        allow_endpoints: Vec<String>,
        /// A `Host` header value (`name` or `name:port`) that `/mcp` accepts. Repeatable; the
        /// environment variable takes a comma-separated list. Unset: the loopback names when
        /// listening on loopback, else any name (every `/mcp` request carries a bearer token).
        #[arg(
            long = "mcp-allowed-host",
            env = "SWITCHYARD_MCP_ALLOWED_HOSTS",
            value_name = "HOST[:PORT]",
            value_delimiter = ','
        )]
        mcp_allowed_hosts: Vec<String>,
        /// Serve `/metrics` (Prometheus text format) on this address, a listener of its own
        /// without authentication: bind it where only the scraper reaches (loopback, or a
        /// private network). Unset: not served.
        #[arg(long, env = "SWITCHYARD_METRICS_LISTEN", value_name = "ADDR")]
        metrics_listen: Option<SocketAddr>,
        /// The server's public base URL (e.g. `https://switchyard.example.com`), where a
        /// browser comes back from an OAuth consent (`<URL>/mcp/callback`). Unset:
        /// `http://<listen address>`.
        #[arg(long, env = "SWITCHYARD_PUBLIC_URL", value_name = "URL")]
        public_url: Option<String>,
        /// The time bound of every OAuth request the server makes (discovery, registration,
        /// token requests), in seconds. (Not `SWITCHYARD_OAUTH_*`: that namespace holds OAuth
        /// client identities, which workspace admins may name.)
        #[arg(
            long,
            env = "SWITCHYARD_AUTHORIZATION_TIMEOUT_SECONDS",
            default_value_t = 10
        )]
        oauth_timeout_seconds: u64,
    },
    /// Apply database migrations.
    Migrate,
    /// Administrative commands.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Create an installation owner; prints the new token alone on stdout.
    CreateOwner {
        /// Unique user name.
        #[arg(long)]
        name: String,
    },
    /// Create a user; prints the new token alone on stdout.
    CreateUser {
        /// Unique user name.
        #[arg(long)]
        name: String,
    },
    /// Revoke a user's API token (a leaked one, or a departing user's): the one named by
    /// `--token`, or with `--all` every unrevoked one. The tokens are refused at their next
    /// request and their web sessions end. Prints one line per token revoked.
    #[command(group = clap::ArgGroup::new("which").required(true).args(["token", "all"]))]
    RevokeToken {
        /// The user's id or name.
        #[arg(long)]
        user: String,
        /// The token's id (`switchyard token list` shows it to its user).
        #[arg(long, value_name = "TOKEN_ID")]
        token: Option<String>,
        /// Every unrevoked token of the user.
        #[arg(long)]
        all: bool,
    },
    /// Re-encrypt every value the server keeps sealed (central connections' credentials)
    /// with a new installation key: the key is added to the file, every value re-sealed in
    /// one transaction, then the old keys are dropped. Prints how many values were
    /// re-sealed. Running servers pick the new key up by themselves.
    RotateKey {
        /// The installation key file the servers use (`serve --installation-key-file`).
        #[arg(long, env = "SWITCHYARD_INSTALLATION_KEY_FILE", value_name = "PATH")]
        installation_key_file: PathBuf,
    },
}

fn main() -> ExitCode {
    // A stdio MCP server is started through this executable in a hidden mode.
    if let Some(code) = switchyard_mcp_runner::contain::run_helper_if_asked() {
        return code;
    }
    // Nothing it starts may read its environment (DATABASE_URL) or memory through /proc.
    if let Err(error) = switchyard_mcp_runner::contain::make_process_unreadable() {
        eprintln!(
            "switchyard-server: cannot make the process unreadable (PR_SET_DUMPABLE): {error}"
        );
        return ExitCode::FAILURE;
    }
    server_main()
}

#[tokio::main]
async fn server_main() -> ExitCode {
    let cli = Cli::parse();
    // reqwest is built without a default TLS provider; install ring before any client exists
    // (the span exporter's too).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let telemetry = match telemetry::init(&TelemetryConfig {
        format: cli.log_format,
        default_filter: "info,sqlx::postgres::notice=warn",
        service_name: "switchyard-server",
    }) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("switchyard-server: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = run(cli).await;
    // Flushing waits for the exporter's last request: not on a worker thread.
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("switchyard-server: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    let url = match (cli.database_url, &cli.database_url_file) {
        (Some(url), _) => url,
        (None, Some(path)) => switchyard_server::private_file::read_private_file(path)
            .map_err(|e| format!("DATABASE_URL_FILE: {e}"))?,
        (None, None) => {
            return Err("set DATABASE_URL_FILE (a 0600 file) or DATABASE_URL to a PostgreSQL URL, e.g. postgres://app@127.0.0.1:5432/switchyard".to_owned());
        }
    };
    let health = Arc::new(PoolHealth::default());
    let pool = health
        .pool_options()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&url)
        .await
        .map_err(|e| format!("cannot connect to the database: {e}"))?;
    match cli.command {
        Command::Migrate => {
            MIGRATOR
                .run(&pool)
                .await
                .map_err(|e| format!("migration failed: {e}"))?;
            eprintln!("migrations applied");
            Ok(())
        }
        Command::Admin { command } => {
            let app = App::new(Datastore::new(pool), AppConfig::default());
            let (name, is_owner) = match &command {
                AdminCommand::CreateOwner { name } => (name, true),
                AdminCommand::CreateUser { name } => (name, false),
                AdminCommand::RevokeToken { user, token, .. } => {
                    let revoked = app
                        .token_revoke_as_operator(user, token.as_deref())
                        .await
                        .map_err(|e| e.to_string())?;
                    if revoked.is_empty() {
                        eprintln!("user `{user}` has no unrevoked token");
                    }
                    for token in revoked {
                        println!("revoked token {} ({})", token.id, token.name);
                    }
                    return Ok(());
                }
                AdminCommand::RotateKey {
                    installation_key_file,
                } => {
                    let rotated = app
                        .installation_key_rotate(installation_key_file)
                        .await
                        .map_err(|e| e.to_string())?;
                    println!(
                        "re-sealed {} value(s) with key {}",
                        rotated.resealed, rotated.key_id
                    );
                    return Ok(());
                }
            };
            let (_, token) = app
                .user_create(name, is_owner)
                .await
                .map_err(|e| e.to_string())?;
            println!("{token}");
            Ok(())
        }
        Command::Serve {
            listen,
            lease_ttl_seconds,
            session_idle_seconds,
            queue_expiry_seconds,
            result_retention_seconds,
            mcp_credentials_file,
            installation_key_file,
            discovery_deadline_seconds,
            secure_cookies,
            central_batch_max,
            submit_batch_max,
            central_max_concurrent,
            http_header_timeout_seconds,
            http_max_connections,
            max_queued_per_workspace,
            max_running_per_workspace,
            session_caps,
            allow_endpoints,
            mcp_allowed_hosts,
            metrics_listen,
            public_url,
            oauth_timeout_seconds,
        } => {
            Datastore::new(pool.clone()).readiness().await?;
            let allow = AllowList::parse(allow_endpoints.iter().map(String::as_str))
                .map_err(|e| format!("--allow-endpoint: {e}"))?;
            tracing::info!(allowed = %allow, "HTTP connectors may point at public addresses and the allowed endpoints");
            if let Some(path) = &mcp_credentials_file {
                // The file is re-read at every call, so a problem is reported, not fatal: the
                // calls that need it fail closed until it is fixed.
                match validate_file(path) {
                    Ok(summary) => {
                        tracing::info!(file = %path.display(), "credential bindings: {summary}");
                    }
                    Err(e) => {
                        tracing::error!(file = %path.display(), error = %e, "credential bindings file is not usable");
                    }
                }
            }
            let installation_key = match &installation_key_file {
                Some(path) => {
                    // A missing file is made anew only while nothing is sealed with a key.
                    let sealed = Datastore::new(pool.clone())
                        .sealed_values_count()
                        .await
                        .map_err(|e| format!("counting sealed values: {e}"))?;
                    let keys =
                        KeyFile::load_or_create_for(path, sealed).map_err(|e| e.to_string())?;
                    tracing::info!(file = %path.display(), "installation key loaded");
                    Some(Arc::new(keys))
                }
                None => {
                    tracing::info!(
                        "no installation key (--installation-key-file): central credential values cannot be set through the API"
                    );
                    None
                }
            };
            if let Some(url) = &public_url
                && !(url.starts_with("https://") || url.starts_with("http://"))
            {
                return Err(format!("--public-url `{url}`: expected an http(s) URL"));
            }
            let config = ServeConfig {
                listen,
                app: AppConfig {
                    discovery_deadline: Duration::from_secs(discovery_deadline_seconds),
                    credentials_file: mcp_credentials_file,
                    installation_key,
                    runner_lease_ttl: Duration::from_secs(lease_ttl_seconds.max(3)),
                    submit_batch_max: usize::from(submit_batch_max),
                    quotas: CallQuotas {
                        max_queued: max_queued_per_workspace,
                        max_running: max_running_per_workspace,
                    },
                    endpoints: EndpointGuard::public(allow),
                    public_url: public_url.unwrap_or_default(),
                    oauth_timeout: Duration::from_secs(oauth_timeout_seconds.max(1)),
                    ..AppConfig::default()
                },
                central: CentralConfig {
                    lease_ttl: Duration::from_secs(lease_ttl_seconds.max(3)),
                    executor: ExecutorConfig {
                        idle_timeout: Duration::from_secs(session_idle_seconds),
                        max_concurrent: usize::from(central_max_concurrent),
                        session_caps: session_caps.into(),
                        ..ExecutorConfig::default()
                    },
                    batch_max: usize::from(central_batch_max),
                },
                sweeper: SweeperConfig {
                    queue_expiry: Duration::from_secs(queue_expiry_seconds),
                    retention: Duration::from_secs(result_retention_seconds),
                    ..SweeperConfig::default()
                },
                web: WebConfig {
                    secure_cookies,
                    ..WebConfig::default()
                },
                http: HttpLimits {
                    header_read_timeout: Duration::from_secs(http_header_timeout_seconds),
                    max_connections: http_max_connections.max(1),
                },
                mcp: McpConfig {
                    allowed_hosts: (!mcp_allowed_hosts.is_empty()).then_some(mcp_allowed_hosts),
                },
                metrics_listen,
            };
            let shutdown = CancellationToken::new();
            tokio::spawn(stop_on_signal(shutdown.clone()));
            serve(Datastore::with_health(pool, health), config, shutdown)
                .await
                .map_err(|e| format!("cannot serve on {listen}: {e}"))
        }
    }
}

/// Cancels `shutdown` on SIGINT or SIGTERM.
async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down: draining active calls");
    shutdown.cancel();
}
