//! A real server on port 0 over a fresh database, a real HTTP client, and the fixture MCP
//! server as a real child process.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use switchyard_mcp_runner::endpoints::{AllowList, EndpointGuard};
use switchyard_protocol::api::ToolView;
use switchyard_protocol::{
    CallId, ConnectionId, EnvironmentId, ProfileId, RequestId, UserId, WorkspaceId,
};
use switchyard_server::app::{App, AppConfig};
use switchyard_server::central::CentralConfig;
use switchyard_server::db::{CallOrigin, Datastore, NewCall};
use switchyard_server::mcp::McpConfig;
use switchyard_server::serve::{HttpLimits, Running, ServeConfig, start};
use switchyard_server::sweeper::SweeperConfig;
use switchyard_server::web::WebConfig;
pub use switchyard_testkit::scratch::Scratch;
use switchyard_testkit::{bins, server, setup};
use uuid::Uuid;

/// The fixture MCP server binary, built with the workspace (`cargo build --workspace`).
#[track_caller]
pub fn fixture_bin() -> String {
    let fixture = bins::workspace_binary(bins::FIXTURE).unwrap_or_else(|e| panic!("{e}"));
    fixture.display().to_string()
}

/// Starts the in-process server's stdio MCP servers through `switchyard-server`'s containment
/// helper mode (a test executable cannot serve as the helper itself).
#[track_caller]
fn use_server_as_helper() {
    let server = bins::workspace_binary(bins::SERVER).unwrap_or_else(|e| panic!("{e}"));
    switchyard_mcp_runner::contain::use_helper_program(server);
}

/// The app's settings in tests: HTTP connectors may point at the loopback fixtures.
pub fn test_app_config() -> AppConfig {
    let allow = AllowList::parse(server::LOOPBACK_FIXTURES.iter().copied()).expect("valid");
    AppConfig {
        endpoints: EndpointGuard::public(allow),
        ..AppConfig::default()
    }
}

/// A running server and its owner.
pub struct TestServer {
    pub addr: SocketAddr,
    pub pool: PgPool,
    pub owner: Client,
    running: Option<Running>,
}

impl TestServer {
    /// Starts a server on port 0 with an owner named `owner`.
    pub async fn start(pool: PgPool) -> Self {
        Self::start_with(pool, |_| {}).await
    }

    /// Like [`TestServer::start`], with settings changed by `tweak`.
    pub async fn start_with(pool: PgPool, tweak: impl FnOnce(&mut ServeConfig)) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        use_server_as_helper();
        let mut config = ServeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            app: test_app_config(),
            central: CentralConfig {
                lease_ttl: Duration::from_secs(5),
                ..CentralConfig::default()
            },
            sweeper: SweeperConfig {
                interval: Duration::from_millis(100),
                ..SweeperConfig::default()
            },
            web: WebConfig::default(),
            http: HttpLimits::default(),
            mcp: McpConfig::default(),
            metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        };
        tweak(&mut config);
        let running = start(Datastore::new(pool.clone()), config)
            .await
            .expect("server starts");
        let addr = running.addr;
        let app = App::new(Datastore::new(pool.clone()), AppConfig::default());
        let (_, token) = app.user_create("owner", true).await.expect("owner created");
        TestServer {
            addr,
            pool,
            owner: Client::new(addr, &token),
            running: Some(running),
        }
    }

    /// The URL of this server's `/metrics` (served on a listener of its own).
    pub fn metrics_url(&self) -> String {
        let addr = self
            .running
            .as_ref()
            .and_then(|running| running.metrics_addr)
            .expect("the test server serves /metrics");
        format!("http://{addr}/metrics")
    }

    /// A second server process on the same database (another replica), acting with
    /// `first`'s owner token.
    pub async fn replica(first: &TestServer) -> Self {
        Self::replica_with(first, |_| {}).await
    }

    /// Like [`TestServer::replica`], with settings changed by `tweak`.
    pub async fn replica_with(first: &TestServer, tweak: impl FnOnce(&mut ServeConfig)) -> Self {
        let mut config = ServeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            app: test_app_config(),
            central: CentralConfig {
                lease_ttl: Duration::from_secs(5),
                ..CentralConfig::default()
            },
            sweeper: SweeperConfig {
                interval: Duration::from_millis(100),
                ..SweeperConfig::default()
            },
            web: WebConfig::default(),
            http: HttpLimits::default(),
            mcp: McpConfig::default(),
            metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        };
        tweak(&mut config);
        let running = start(Datastore::new(first.pool.clone()), config)
            .await
            .expect("replica starts");
        let owner = Client {
            base: format!("http://{}", running.addr),
            ..first.owner.clone()
        };
        TestServer {
            addr: running.addr,
            pool: first.pool.clone(),
            owner,
            running: Some(running),
        }
    }

    /// Creates a plain user `name`, adds them to workspace `ws` as `role` (`member` or `admin`)
    /// and returns a client acting as them.
    pub async fn member(&self, ws: &str, name: &str, role: &str) -> Client {
        let user = self.user(name).await;
        self.owner
            .post(
                &format!("/api/v1/workspaces/{ws}/members"),
                json!({"user": name, "role": role}),
            )
            .await
            .ok();
        user
    }

    /// Creates a plain user and a client acting as them.
    pub async fn user(&self, name: &str) -> Client {
        let app = App::new(Datastore::new(self.pool.clone()), AppConfig::default());
        let (_, token) = app.user_create(name, false).await.expect("user created");
        Client::new(self.addr, &token)
    }

    /// A client with no token at all.
    pub fn anonymous(&self) -> Client {
        Client {
            base: format!("http://{}", self.addr),
            token: None,
            http: reqwest::Client::new(),
        }
    }

    /// Stops serving and waits for the central runner to drain.
    pub async fn stop(mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown.cancel();
            running.done.await.expect("server task");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(running) = &self.running {
            running.shutdown.cancel();
        }
    }
}

/// An API client acting as one user.
#[derive(Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

/// An API answer: status and JSON body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl Answer {
    /// The error code of an error answer.
    pub fn code(&self) -> &str {
        self.body["error"]["code"]
            .as_str()
            .unwrap_or("<no error code>")
    }

    /// Asserts a success status and returns the body.
    #[track_caller]
    pub fn ok(self) -> Value {
        assert!(
            self.status.is_success(),
            "expected success, got {}: {}",
            self.status,
            self.body
        );
        self.body
    }

    /// Asserts an error with this status and code; returns the message.
    #[track_caller]
    pub fn refused(self, status: u16, code: &str) -> String {
        assert_eq!(
            (self.status.as_u16(), self.code()),
            (status, code),
            "body: {}",
            self.body
        );
        let message = self.body["error"]["message"]
            .as_str()
            .expect("error message")
            .to_owned();
        assert!(!message.is_empty());
        message
    }
}

impl Client {
    fn new(addr: SocketAddr, token: &str) -> Self {
        Client::at(&format!("http://{addr}"), token)
    }

    /// The personal API token this client sends (what a user pastes into the web UI).
    #[track_caller]
    pub fn token(&self) -> &str {
        self.token.as_deref().expect("a client with a token")
    }

    /// A client for a server at `base` (e.g. `http://127.0.0.1:1234`).
    pub fn at(base: &str, token: &str) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client {
            base: base.trim_end_matches('/').to_owned(),
            token: Some(token.to_owned()),
            http: reqwest::Client::new(),
        }
    }

    /// Sends a request with an optional JSON body.
    pub async fn send(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status();
        let text = resp.text().await.expect("body");
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Answer { status, body }
    }

    /// Sends a raw body as JSON content.
    pub async fn send_raw(&self, path: &str, body: &str) -> Answer {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status();
        let body = resp.json().await.unwrap_or(Value::Null);
        Answer { status, body }
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.send(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> Answer {
        self.send(Method::PUT, path, Some(body)).await
    }

    /// Classifies tool `tool` of connection `connection` in `ws` as `classification`
    /// (`{"side_effect", "risk"}`); the answer.
    pub async fn classify(
        &self,
        ws: &str,
        connection: &str,
        tool: &str,
        classification: Value,
    ) -> Answer {
        self.put(
            &format!(
                "/api/v1/workspaces/{ws}/connections/{connection}/tools/{tool}/classification"
            ),
            classification,
        )
        .await
    }

    /// Discovers `connection`'s tools in `ws`, classifies them all ([`Self::classify_all`]) and
    /// puts the connection in a new profile `profile` the owner may use
    /// ([`Self::owner_profile`]): what a test does before its first call on a connection.
    pub async fn make_callable(&self, ws: &str, connection: &str, profile: &str) {
        self.post(
            &format!("/api/v1/workspaces/{ws}/connections/{connection}/discover"),
            json!({}),
        )
        .await
        .ok();
        self.classify_all(ws, connection).await;
        self.owner_profile(ws, profile, &[connection]).await;
    }

    /// Classifies every tool of connection `connection` in `ws` so that the default approval
    /// policy runs it (`switchyard_testkit::setup::low_risk`), as the admin setting up a test
    /// workspace would after discovery. Panics on a refusal.
    pub async fn classify_all(&self, ws: &str, connection: &str) {
        let tools: Vec<ToolView> = serde_json::from_value(
            self.get(&format!(
                "/api/v1/workspaces/{ws}/connections/{connection}/tools"
            ))
            .await
            .ok(),
        )
        .expect("a catalog");
        for tool in &tools {
            let classification = serde_json::to_value(setup::low_risk(tool)).unwrap();
            self.classify(ws, connection, &tool.name, classification)
                .await
                .ok();
        }
    }

    /// Creates profile `profile` of `ws` over `connections` and grants the installation owner
    /// Use on it, as a test about to submit calls does. Panics on a refusal.
    pub async fn owner_profile(&self, ws: &str, profile: &str, connections: &[&str]) {
        self.post(
            &format!("/api/v1/workspaces/{ws}/profiles"),
            json!({"name": profile, "connections": connections}),
        )
        .await
        .ok();
        self.post(
            &format!("/api/v1/workspaces/{ws}/profiles/{profile}/grants"),
            json!({"user": "owner", "use": true}),
        )
        .await
        .ok();
    }

    /// Polls a call until it leaves awaiting_approval/queued/leased/running, or panics after
    /// `within`.
    pub async fn wait_call(&self, ws: &str, call_id: &str, within: Duration) -> Value {
        self.wait_call_until(ws, call_id, within, |call| {
            !matches!(
                call["state"].as_str().unwrap_or_default(),
                "awaiting_approval" | "queued" | "leased" | "running"
            )
        })
        .await
    }

    /// Polls a call until `done` holds for its view, or panics after `within`.
    pub async fn wait_call_until(
        &self,
        ws: &str,
        call_id: &str,
        within: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let call = self
                .get(&format!("/api/v1/workspaces/{ws}/calls/{call_id}"))
                .await
                .ok();
            if done(&call) {
                return call;
            }
            assert!(
                Instant::now() < deadline,
                "call {call_id} not there after {within:?}: {call}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// What `setup_workspace` created.
pub struct Setup {
    pub ws: String,
}

/// As the owner: workspace `ws`, an approved stdio connector `fixture` running the fixture
/// server with `args`, connection `fixture` (discovered, every tool classified low risk), profile `main` with Use for the owner.
pub async fn setup_workspace(server: &TestServer, ws: &str, args: &[&str]) -> Setup {
    let owner = &server.owner;
    owner
        .post("/api/v1/workspaces", json!({"name": ws}))
        .await
        .ok();
    let connector = format!("fixture-{ws}");
    let mut all_args = vec!["stdio".to_owned()];
    all_args.extend(args.iter().map(|a| a.to_string()));
    owner
        .post("/api/v1/connectors", json!({"name": connector, "transport": "stdio", "command": fixture_bin(), "args": all_args}))
        .await
        .ok();
    owner
        .post(
            &format!("/api/v1/connectors/{connector}/approve"),
            json!({}),
        )
        .await
        .ok();
    owner
        .post(
            &format!("/api/v1/workspaces/{ws}/connections"),
            json!({"name": "fixture", "connector": connector}),
        )
        .await
        .ok();
    owner
        .post(
            &format!("/api/v1/workspaces/{ws}/connections/fixture/discover"),
            json!({}),
        )
        .await
        .ok();
    owner.classify_all(ws, "fixture").await;
    owner.owner_profile(ws, "main", &["fixture"]).await;
    Setup { ws: ws.to_owned() }
}

/// What `approval_gate` set up: the two members and the policies its last change answered.
pub struct Gated {
    /// Member holding Approve on `main`.
    pub approver: Client,
    /// Member holding only Use on `main`.
    pub bob: Client,
    /// `PUT …/approval-policy`'s answer.
    pub policies: Value,
}

/// `setup_workspace` of `acme` whose `count` tool appends to `counter` and asks under the
/// tool's `always` policy; `approver` holds Approve on `main`, `bob` only Use, and the owner
/// (who submits) Use and Approve.
pub async fn approval_gate(server: &TestServer, counter: &str) -> Gated {
    setup_workspace(server, "acme", &["--count-file", counter]).await;
    let approver = server.member("acme", "approver", "member").await;
    let bob = server.member("acme", "bob", "member").await;
    for (user, grant) in [
        ("approver", "approve"),
        ("bob", "use"),
        ("owner", "approve"),
    ] {
        server
            .owner
            .post(
                "/api/v1/workspaces/acme/profiles/main/grants",
                json!({"user": user, grant: true}),
            )
            .await
            .ok();
    }
    let policies = server
        .owner
        .put(
            "/api/v1/workspaces/acme/profiles/main/approval-policy",
            json!({"connection": "fixture", "tool": "count", "policy": "always"}),
        )
        .await
        .ok();
    Gated {
        approver,
        bob,
        policies,
    }
}

/// A call body for `setup_workspace`'s profile and connection.
pub fn call_body(tool: &str, arguments: Value) -> Value {
    json!({
        "request_id": Uuid::new_v4(),
        "profile_id": "main",
        "connection_id": "fixture",
        "tool_name": tool,
        "arguments": arguments,
        "timeout_seconds": 30,
    })
}

/// The text contents of a CallToolResult, joined.
pub fn result_text(call: &Value) -> String {
    call["result"]["content"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|c| c["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// A fresh scratch directory, removed when the returned handle drops.
#[track_caller]
pub fn scratch_dir(label: &str) -> Scratch {
    Scratch::new(label).expect("a scratch directory")
}

/// A new installation key file in `dir` (`installation.key`), loaded as a server loads it.
pub fn installation_key(dir: &Scratch) -> std::sync::Arc<switchyard_server::vault::KeyFile> {
    std::sync::Arc::new(
        switchyard_server::vault::KeyFile::load_or_create(&dir.join("installation.key"))
            .expect("an installation key file"),
    )
}

/// Lines in the fixture's count file (0 when it does not exist).
pub fn count_lines(path: &str) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// A child process killed when the guard drops.
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads lines from a child's stdout until one starts with `prefix`; returns the rest of it.
#[track_caller]
pub fn read_announcement(child: &mut std::process::Child, prefix: &str) -> String {
    use std::io::BufRead;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = std::io::BufReader::new(stdout).lines();
    loop {
        let line = lines
            .next()
            .expect("the process announced nothing")
            .expect("stdout readable");
        if let Some(rest) = line.strip_prefix(prefix) {
            return rest.trim().to_owned();
        }
    }
}

/// A `DATABASE_URL` for the test's own database (the pool's database on the suite's server).
pub fn database_url_of(pool: &PgPool) -> String {
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL is set by scripts/test.sh");
    let database = pool
        .connect_options()
        .get_database()
        .expect("test database name")
        .to_owned();
    let (without_query, query) = match base.split_once('?') {
        Some((url, query)) => (url.to_owned(), format!("?{query}")),
        None => (base.clone(), String::new()),
    };
    let (server, _) = without_query
        .rsplit_once('/')
        .expect("URL with a database path");
    format!("{server}/{database}{query}")
}

/// Every row of every table of the public schema, as JSON text: what a database dump holds.
pub async fn dump_database(pool: &PgPool) -> String {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut dump = String::new();
    for table in tables {
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT row_to_json(t)::text FROM \"{table}\" t"
        )))
        .fetch_all(pool)
        .await
        .unwrap();
        dump.push_str(&rows.join("\n"));
    }
    dump
}

/// An echo call for `runner_ref` in the workspace `acme` that `setup_workspace` made, not yet
/// submitted.
pub async fn echo_call(db: &Datastore, runner_ref: &str) -> NewCall {
    let (workspace, profile, connection, environment): (Uuid, Uuid, Uuid, Uuid) = sqlx::query_as(
        "SELECT w.id, p.id, c.id, p.environment_id FROM workspaces w
         JOIN profiles p ON p.workspace_id = w.id JOIN connections c ON c.workspace_id = w.id
         WHERE w.name = 'acme'",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    let owner: Uuid = sqlx::query_scalar("SELECT id FROM users WHERE name = 'owner'")
        .fetch_one(db.pool())
        .await
        .unwrap();
    NewCall {
        id: CallId::new(),
        workspace_id: WorkspaceId(workspace),
        request_id: RequestId(Uuid::new_v4()),
        payload_digest: vec![0; 32],
        profile_id: ProfileId(profile),
        connection_id: ConnectionId(connection),
        connection_revision: 1,
        environment_id: EnvironmentId(environment),
        tool_name: "echo".into(),
        arguments: json!({"text": "x"}),
        client_session_id: None,
        timeout_seconds: 30,
        runner_ref: runner_ref.parse().expect("a runner reference"),
        created_by: UserId(owner),
        origin: CallOrigin::default(),
    }
}

/// Keeps the central runner from leasing: another holder takes its lease for an hour under a
/// new epoch, whether or not the server's central runner has taken it yet (a term it began is
/// fenced, and it waits), until [`release_central_runner`].
pub async fn hold_central_runner(pool: &PgPool) {
    sqlx::query(
        "INSERT INTO runner_leases (runner_ref, epoch, holder, expires_at)
         VALUES ('central', 1, gen_random_uuid(), now() + interval '1 hour')
         ON CONFLICT (runner_ref) DO UPDATE
             SET epoch = runner_leases.epoch + 1, holder = EXCLUDED.holder,
                 expires_at = EXCLUDED.expires_at",
    )
    .execute(pool)
    .await
    .unwrap();
}

/// Ends the hold of [`hold_central_runner`]: the lease expires, and the central runner takes it.
pub async fn release_central_runner(pool: &PgPool) {
    expire_runner_lease(pool, "central").await;
}

/// Makes a runner's lease expire now, as if its holder stopped renewing it.
pub async fn expire_runner_lease(pool: &PgPool, runner: &str) {
    sqlx::query("UPDATE runner_leases SET expires_at = now() WHERE runner_ref = $1")
        .bind(runner)
        .execute(pool)
        .await
        .unwrap();
}

/// How many calls are stored, in every workspace.
pub async fn calls_stored(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM calls")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Waits (up to 30 s) until a backend of `pool`'s database waits on a lock, running a statement
/// that begins like one of `statements` (`LIKE` patterns; any statement when empty). The
/// activity view keeps only the first kilobyte of a statement's text.
pub async fn wait_for_a_lock_wait(pool: &PgPool, statements: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                            WHERE datname = current_database() AND wait_event_type = 'Lock'
                              AND (cardinality($1::text[]) = 0 OR query LIKE ANY ($1)))",
        )
        .bind(statements)
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting {
            return;
        }
        if Instant::now() >= deadline {
            let active: Vec<(Option<String>, Option<String>, Option<String>)> = sqlx::query_as(
                "SELECT state, wait_event_type, left(query, 120) FROM pg_stat_activity
                 WHERE datname = current_database() AND state <> 'idle'",
            )
            .fetch_all(pool)
            .await
            .unwrap();
            panic!("nothing waits on a lock running {statements:?}: {active:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Starts the fixture MCP server over streamable HTTP on a free loopback port, with `args`
/// after `http --listen 127.0.0.1:0` and `env` added to its environment; its `/mcp` URL and
/// the guard that stops it.
pub fn http_fixture(args: &[&str], env: &[(&str, &str)]) -> (String, ChildGuard) {
    let mut fixture = std::process::Command::new(fixture_bin())
        .args(["http", "--listen", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the fixture starts");
    let url = read_announcement(&mut fixture, "listening on");
    (url, ChildGuard(fixture))
}
