//! What every end-to-end test starts: the workspace's binaries, a scratch directory, and a real
//! `switchyard-server` on the test's fresh database with the owner `alice`. The processes and
//! the API client are `switchyard-testkit`'s; this module gives them the suite's defaults and
//! turns a failed step into a failed test.

use sqlx::ConnectOptions;
use sqlx::postgres::PgConnectOptions;
use std::path::{Path, PathBuf};
use switchyard_testkit::api::Api;
use switchyard_testkit::bins;
use switchyard_testkit::scratch;
use switchyard_testkit::server::{self, ServerConfig, ServerProcess};

/// The workspace binary `name` (`switchyard-server`, `switchyard`, …), which must be built.
#[track_caller]
pub fn binary(name: &str) -> PathBuf {
    bins::workspace_binary(name).unwrap_or_else(|e| panic!("{e}"))
}

/// A fresh private directory `target/tmp/<suite>/<test>`, kept after the test.
#[track_caller]
pub fn scratch(suite: &str, test: &str) -> PathBuf {
    scratch::kept(suite, test).expect("a scratch directory")
}

/// The permission bits of `path`.
#[track_caller]
pub fn mode(path: &Path) -> u32 {
    scratch::mode(path).unwrap_or_else(|e| panic!("{e}"))
}

/// A running `switchyard-server serve` on the test's database, as owner `alice`; killed on
/// drop.
pub struct Server {
    process: ServerProcess,
    config: ServerConfig,
    database_url: String,
    token: String,
}

impl Server {
    /// Migrates the test database, creates the owner `alice` and starts the server on a free
    /// port.
    pub async fn start(db: &PgConnectOptions) -> Server {
        Server::start_with_env(db, &[]).await
    }

    /// [`Server::start`] with extra environment for `serve` (its settings, e.g. a short result
    /// retention).
    pub async fn start_with_env(db: &PgConnectOptions, env: &[(&str, &str)]) -> Server {
        let database_url = db.to_url_lossy().to_string();
        let name = db
            .get_database()
            .unwrap_or("switchyard")
            .replace(['/', '.'], "_");
        let log = scratch("servers", &name).join("server.log");
        let binary = binary(bins::SERVER);
        let token = server::install(&binary, &database_url, "alice")
            .await
            .expect("install the server");
        let config = ServerConfig::new(&database_url, &log).with_env(env);
        let process = ServerProcess::start(&binary, &config)
            .await
            .expect("start the server");
        Server {
            process,
            config,
            database_url,
            token,
        }
    }

    /// SIGKILLs the server (a crash) and starts it again on the same database and address,
    /// so clients keep their URL.
    pub async fn crash_and_restart(&mut self) {
        self.process.kill();
        let config = ServerConfig {
            listen: self.process.addr,
            ..self.config.clone()
        };
        self.process = ServerProcess::start(&binary(bins::SERVER), &config)
            .await
            .expect("restart the server");
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid().expect("the server runs")
    }

    /// The server's base URL.
    pub fn url(&self) -> &str {
        &self.process.url
    }

    /// The owner's (alice's) token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The API as alice.
    pub fn api(&self) -> Api {
        Api::new(self.url(), Some(&self.token)).expect("an API client")
    }

    /// Creates another user and returns their token.
    pub async fn create_user(&self, name: &str) -> String {
        self.admin(&["admin", "create-user", "--name", name]).await
    }

    /// Runs `switchyard-server ARGS` on the server's database, as its operator would on the
    /// host; its trimmed stdout.
    pub async fn admin(&self, args: &[&str]) -> String {
        server::admin(&binary(bins::SERVER), &self.database_url, args)
            .await
            .unwrap_or_else(|e| panic!("switchyard-server {args:?}: {e}"))
    }

    /// The server's stderr so far, for failure messages.
    pub fn log_text(&self) -> String {
        self.process.log_text()
    }

    /// Stops the server and waits until it has exited.
    pub fn stop(mut self) {
        self.process.kill();
    }
}
