//! Running the server: the HTTP listener and the central runner, until shutdown.

use crate::app::{App, AppConfig, WakeupFeed};
use crate::central::{self, CentralConfig};
use crate::db::Datastore;
use crate::sweeper::{self, SweeperConfig};
use crate::web::{self, WebConfig};
use sqlx::PgPool;
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
}

/// A started server.
#[derive(Debug)]
pub struct Running {
    /// The bound address (useful when listening on port 0).
    pub addr: SocketAddr,
    /// Cancel to shut down: stop accepting, drain the central runner, release its lease.
    pub shutdown: CancellationToken,
    /// Ends when everything has stopped.
    pub done: JoinHandle<()>,
}

/// Binds the listener and starts serving HTTP and the central runner.
pub async fn start(pool: PgPool, config: ServeConfig) -> std::io::Result<Running> {
    let app = App::new(Datastore::new(pool), config.app);
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let runner = tokio::spawn(central::run(app.clone(), config.central, shutdown.clone()));
    let sweeper = tokio::spawn(sweeper::run(
        app.db().clone(),
        config.sweeper,
        shutdown.clone(),
    ));
    // Listening before the first request is served: a device long-poll never waits on a
    // listener that is not there yet.
    let wakeups = tokio::spawn(WakeupFeed::connect(app.clone()).await.run(shutdown.clone()));
    let router =
        crate::http::router(app.clone()).merge(web::router(app, config.web, shutdown.clone()));
    let http_shutdown = shutdown.clone();
    let done = tokio::spawn(async move {
        // `into_make_service` hands each connection a clone of the router (an Arc). Serving the
        // router directly makes axum rebuild its route table for every connection (about 37 KiB
        // each with this many routes), which thousands of idle long-polls pay for in memory.
        let served = axum::serve(listener, router.into_make_service())
            .with_graceful_shutdown(async move { http_shutdown.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "HTTP server failed");
        }
        let _ = runner.await;
        let _ = sweeper.await;
        let _ = wakeups.await;
    });
    Ok(Running {
        addr,
        shutdown,
        done,
    })
}

/// Serves until `shutdown` is cancelled, announcing the address on stdout for scripts.
pub async fn serve(
    pool: PgPool,
    config: ServeConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let running = start(pool, config).await?;
    tracing::info!(addr = %running.addr, "listening");
    let mut stdout = std::io::stdout();
    writeln!(stdout, "listening on http://{}", running.addr)?;
    stdout.flush()?;
    shutdown.cancelled().await;
    running.shutdown.cancel();
    let _ = running.done.await;
    Ok(())
}
