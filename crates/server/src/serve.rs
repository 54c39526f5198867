//! Running the server: the HTTP listener and the central runner, until shutdown.

use crate::app::{App, AppConfig, WakeupFeed};
use crate::central::{self, CentralConfig};
use crate::db::Datastore;
use crate::mcp::McpConfig;
use crate::sweeper::{self, SweeperConfig};
use crate::web::{self, WebConfig};
use std::io::Write;
use std::net::SocketAddr;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Settings of a server process.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Where to listen for HTTP.
    pub listen: SocketAddr,
    /// App-layer settings.
    pub app: AppConfig,
    /// Central runner settings.
    pub central: CentralConfig,
    /// Sweeper settings.
    pub sweeper: SweeperConfig,
    /// Web UI settings.
    pub web: WebConfig,
    /// Bounds of the HTTP listener.
    pub http: HttpLimits,
    /// `/mcp` settings.
    pub mcp: McpConfig,
    /// Where to serve `/metrics` (Prometheus text format, no authentication), if anywhere: a
    /// listener of its own, so that it is reachable only where the operator binds it.
    pub metrics_listen: Option<SocketAddr>,
}

/// Bounds of the HTTP listener, against clients that hold connections without using them.
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    /// How long a connection may take to send a request's head, and may sit idle between
    /// requests; then it is closed. (An upgraded runner channel is past it.)
    pub header_read_timeout: std::time::Duration,
    /// HTTP connections served at once (an upgraded runner channel leaves the count); past it,
    /// new ones wait in the listen backlog.
    pub max_connections: usize,
}

/// Default [`HttpLimits::header_read_timeout`]: hyper's own default.
pub const DEFAULT_HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Default [`HttpLimits::max_connections`]: room for 10,000 device runners' channels and as
/// many requests besides.
pub const DEFAULT_MAX_CONNECTIONS: usize = 20_000;

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// A started server.
#[derive(Debug)]
pub struct Running {
    /// The bound address (useful when listening on port 0).
    pub addr: SocketAddr,
    /// The bound address of `/metrics`, when it is served.
    pub metrics_addr: Option<SocketAddr>,
    /// Cancel to shut down: stop accepting, drain the central runner, release its lease.
    pub shutdown: CancellationToken,
    /// Ends when everything has stopped.
    pub done: JoinHandle<()>,
}

/// Binds the listener and starts serving HTTP and the central runner.
pub async fn start(db: Datastore, mut config: ServeConfig) -> std::io::Result<Running> {
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    if config.app.public_url.is_empty() {
        // Browsers come back to the address the server listens on unless told otherwise.
        config.app.public_url = format!("http://{addr}");
    }
    let app = App::new(db, config.app);
    let metrics_listener = match config.metrics_listen {
        Some(listen) => Some(tokio::net::TcpListener::bind(listen).await?),
        None => None,
    };
    let metrics_addr = match &metrics_listener {
        Some(listener) => Some(listener.local_addr()?),
        None => None,
    };
    let shutdown = CancellationToken::new();
    let metrics = metrics_listener.map(|listener| {
        tokio::spawn(serve_http(
            listener,
            crate::metrics::metrics_router(app.clone()),
            METRICS_LIMITS,
            shutdown.clone(),
        ))
    });
    let flusher = tokio::spawn(
        app.clone()
            .run_liveness_flusher(config.sweeper.heartbeat_flush, shutdown.clone()),
    );
    let sweeper = tokio::spawn(sweeper::run(app.clone(), config.sweeper, shutdown.clone()));
    // Listening before the first request is served and before the central runner looks for
    // work: no runner waits on a listener that is not there yet.
    let wakeups = tokio::spawn(WakeupFeed::connect(app.clone()).await.run(shutdown.clone()));
    let runner = tokio::spawn(central::run(app.clone(), config.central, shutdown.clone()));
    let router = crate::http::router(app.clone())
        .merge(web::router(app.clone(), config.web, shutdown.clone()))
        .merge(crate::mcp::router(
            app.clone(),
            &config.mcp,
            addr,
            &shutdown,
        ))
        .route_layer(axum::middleware::from_fn(crate::http::name_request_span))
        .layer(axum::middleware::from_fn(crate::http::track_request));
    let http_shutdown = shutdown.clone();
    let done = tokio::spawn(async move {
        serve_http(listener, router, config.http, http_shutdown).await;
        if let Some(metrics) = metrics {
            let _ = metrics.await;
        }
        // Every request has been answered: write the renewals and sightings still held.
        let _ = flusher.await;
        app.flush_liveness().await;
        let _ = runner.await;
        let _ = sweeper.await;
        let _ = wakeups.await;
    });
    Ok(Running {
        addr,
        metrics_addr,
        shutdown,
        done,
    })
}

/// Bounds of the `/metrics` listener: a few scrapers, never thousands of runners.
const METRICS_LIMITS: HttpLimits = HttpLimits {
    header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
    max_connections: 16,
};

/// The most a connection's read buffer holds. hyper gives every HTTP/1 connection an 8 KiB
/// read buffer and, by default, lets it double (to 16 KiB as soon as a read does not fit what
/// is left of it) up to 400 KiB. Thousands of idle runner connections each keep theirs, so it
/// is held at 8 KiB: bodies are read through it in pieces, and only a request head larger than
/// 8 KiB is refused (`431`).
const READ_BUFFER_BYTES: usize = 8 * 1024;

/// Serves HTTP/1.1 on `listener` until `shutdown`, then lets the requests in flight finish
/// (long-polls answer at once at shutdown) and returns when every connection is closed.
///
/// This is `axum::serve` with its connection settings in reach: HTTP/1.1 only (no client of
/// this server speaks cleartext HTTP/2, and hyper's automatic protocol detection makes every
/// connection's task hold the state of both), and the read buffer above. Each connection gets
/// a clone of the router (an `Arc`): axum rebuilds its route table when a router is served as
/// its own make-service, which cost 37 KiB per connection.
async fn serve_http(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: HttpLimits,
    shutdown: CancellationToken,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.max_buf_size(READ_BUFFER_BYTES)
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let room = std::sync::Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    // Every connection task holds a receiver; `closed` resolves when the last one is gone.
    let (open_tx, open_rx) = tokio::sync::watch::channel(());
    loop {
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = std::sync::Arc::clone(&room).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    accept_failed(&error).await;
                    continue;
                }
            },
        };
        // Answers are small and written whole: do not hold them back for Nagle's algorithm.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY on an HTTP connection");
        }
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        // With upgrades: a runner channel leaves hyper (and its buffers) once accepted.
        let conn = http
            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
            .with_upgrades();
        let (shutdown, open) = (shutdown.clone(), open_rx.clone());
        tokio::spawn(async move {
            let mut conn = std::pin::pin!(conn);
            let served = tokio::select! {
                served = conn.as_mut() => served,
                () = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(error) = served {
                tracing::trace!(%error, "HTTP connection ended with an error");
            }
            drop(open);
            drop(permit);
        });
    }
    drop(listener);
    drop(open_rx);
    open_tx.closed().await;
}

/// After a failed `accept`: errors of one connection (reset before it was taken) pass at once;
/// others (out of file descriptors, say) are logged and wait a second, as `axum::serve` does.
async fn accept_failed(error: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if !matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        tracing::error!(%error, "accepting an HTTP connection failed; retrying in a second");
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// Serves until `shutdown` is cancelled, announcing the address on stdout for scripts.
pub async fn serve(
    db: Datastore,
    config: ServeConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let running = start(db, config).await?;
    tracing::info!(addr = %running.addr, "listening");
    if let Some(addr) = running.metrics_addr {
        tracing::info!(%addr, "serving /metrics");
    }
    let mut stdout = std::io::stdout();
    writeln!(stdout, "listening on http://{}", running.addr)?;
    stdout.flush()?;
    shutdown.cancelled().await;
    running.shutdown.cancel();
    let _ = running.done.await;
    Ok(())
}
