//! `/mcp` as an agent sees it: its filters, deferred search behind `tool_search` and
//! `call_tool`, the provider menu, and `agent tools` printing exactly that list — through
//! rmcp's own client.

use crate::harness::*;
use rmcp::RoleClient;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use sqlx::PgPool;

/// `setup_workspace` of `acme` and agent `bot` holding Use on `main`; returns its token.
pub(crate) async fn agent_in_acme(server: &TestServer) -> String {
    setup_workspace(server, "acme", &[]).await;
    let created = server
        .owner
        .post("/api/v1/workspaces/acme/agents", json!({"name": "bot"}))
        .await
        .ok();
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"agent": "bot", "use": true}),
        )
        .await
        .ok();
    created["token"].as_str().unwrap().to_owned()
}

pub(crate) async fn connect(server: &TestServer, token: &str) -> RunningService<RoleClient, ()> {
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", server.addr))
            .auth_header(token);
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    ().serve(transport).await.expect("the client connects")
}

pub(crate) async fn names(client: &RunningService<RoleClient, ()>) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}

pub(crate) async fn call(
    client: &RunningService<RoleClient, ()>,
    name: &str,
    arguments: Value,
) -> Value {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = arguments.as_object().cloned();
    serde_json::to_value(client.call_tool(params).await.expect("tools/call")).unwrap()
}

/// The server's announcement of connection `namespace` in the client's instructions.
pub(crate) fn notice_of(client: &RunningService<RoleClient, ()>, namespace: &str) -> Value {
    let instructions = client
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .expect("instructions");
    instructions
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|notice| notice["mcp_server"] == namespace)
        .unwrap_or_else(|| panic!("no notice of {namespace}: {instructions}"))
}

pub(crate) fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Sets agent `bot`'s settings for the `fixture` connection of `acme`.
pub(crate) async fn set(server: &TestServer, settings: Value) {
    server
        .owner
        .put(
            "/api/v1/workspaces/acme/agents/bot/connections/fixture",
            settings,
        )
        .await
        .ok();
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_agent_sees_its_filtered_tools_and_agent_tools_prints_exactly_them(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let token = agent_in_acme(&server).await;
    set(
        &server,
        json!({"include": ["echo", "c*"], "exclude": ["*crash*"]}),
    )
    .await;

    let client = connect(&server, &token).await;
    // `c*` lets `count`, `count_then_crash`, `crash` and `cwd` in; the exclude takes the
    // crashing ones out again.
    let listed = ["fixture__count", "fixture__cwd", "fixture__echo"];
    assert_eq!(names(&client).await, listed);
    let answer = call(&client, "fixture__echo", json!({"text": "from the agent"})).await;
    assert_eq!(text(&answer), "from the agent", "{answer}");
    // A removed tool cannot be called by its name either.
    let refused = call(&client, "fixture__crash", json!({})).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).contains("(excluded)"), "{refused}");

    // `agent tools` lists exactly what the client listed, and every other tool with why.
    let view = server
        .owner
        .get("/api/v1/workspaces/acme/agents/bot/tools")
        .await
        .ok();
    let seen: Vec<&str> = view["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(seen, listed);
    let reason_of = |tool: &str| {
        view["dropped"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["tool"] == tool)
            .map(|d| d["reason"].as_str().unwrap().to_owned())
    };
    assert_eq!(reason_of("crash").as_deref(), Some("excluded"));
    assert_eq!(reason_of("fail").as_deref(), Some("not_included"));
    client.cancel().await.unwrap();
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_deferred_connection_is_searched_and_called_through_call_tool(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let token = agent_in_acme(&server).await;
    set(&server, json!({"defer": true, "exclude": ["slow"]})).await;

    let client = connect(&server, &token).await;
    assert_eq!(names(&client).await, ["call_tool", "tool_search"]);
    let found = call(&client, "tool_search", json!({"query": "echo"})).await;
    let hits = found["structuredContent"]["hits"].as_array().unwrap();
    assert_eq!(hits[0]["name"], "fixture__echo", "{found}");
    assert!(found["structuredContent"]["searched"].as_u64().unwrap() > 1);
    // A search never shows a removed tool.
    let none = call(&client, "tool_search", json!({"query": "sleep seconds"})).await;
    assert!(
        none["structuredContent"]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|hit| hit["name"] != "fixture__slow"),
        "{none}"
    );
    let answer = call(
        &client,
        "call_tool",
        json!({"name": "fixture__echo", "arguments": {"text": "deferred"}}),
    )
    .await;
    assert_eq!(text(&answer), "deferred", "{answer}");
    let refused = call(
        &client,
        "call_tool",
        json!({"name": "fixture__slow", "arguments": {"seconds": 0}}),
    )
    .await;
    assert_eq!(refused["isError"], true, "{refused}");
    client.cancel().await.unwrap();
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_provider_menu_shows_ungranted_tools_and_checks_the_grant_again(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let token = agent_in_acme(&server).await;
    server
        .owner
        .send(
            reqwest::Method::PATCH,
            "/api/v1/workspaces/acme/agents/bot",
            Some(json!({"mode": "menu"})),
        )
        .await
        .ok();
    set(&server, json!({"include": ["echo"]})).await;

    let client = connect(&server, &token).await;
    assert_eq!(
        names(&client).await,
        ["mcp_call", "mcp_capabilities", "mcp_providers"]
    );
    let providers = call(&client, "mcp_providers", json!({})).await;
    assert_eq!(
        providers["structuredContent"]["providers"][0]["mcp_server"], "fixture",
        "{providers}"
    );
    let page = call(
        &client,
        "mcp_capabilities",
        json!({"provider": "FIXTURE", "page_size": 50}),
    )
    .await;
    let tools = page["structuredContent"]["tools"].as_array().unwrap();
    assert!(tools.len() <= 20, "at most 20 a page");
    let granted = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["granted"].clone())
    };
    assert_eq!(granted("echo"), Some(json!(true)), "{page}");
    assert_eq!(granted("fail"), Some(json!(false)), "{page}");

    let answer = call(
        &client,
        "mcp_call",
        json!({"provider": "fixture", "tool": "echo", "arguments": {"text": "menu"}}),
    )
    .await;
    assert_eq!(text(&answer), "menu", "{answer}");
    let refused = call(
        &client,
        "mcp_call",
        json!({"provider": "fixture", "tool": "fail", "arguments": {"message": "x"}}),
    )
    .await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).contains("not_included"), "{refused}");
    client.cancel().await.unwrap();
}

#[sqlx::test(migrations = "../../migrations")]
async fn two_connections_offering_one_unprefixed_name_both_lose_it(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let token = agent_in_acme(&server).await;
    let owner = &server.owner;
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "second", "connector": "fixture-acme"}),
        )
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/connections/second/discover",
            json!({}),
        )
        .await
        .ok();
    owner.classify_all("acme", "second").await;
    // A second profile over both connections grants `fixture` as `main` does: no conflict.
    owner
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "both", "connections": ["fixture", "second"]}),
        )
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/both/grants",
            json!({"agent": "bot", "use": true}),
        )
        .await
        .ok();
    for connection in ["fixture", "second"] {
        let view = owner
            .put(
                &format!("/api/v1/workspaces/acme/connections/{connection}/prefix-tools"),
                json!({"prefix_tools": false}),
            )
            .await
            .ok();
        assert_eq!(view["prefix_tools"], false);
    }
    let view = owner
        .get("/api/v1/workspaces/acme/agents/bot/tools")
        .await
        .ok();
    assert!(
        view["dropped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["tool"] == "echo" && d["reason"] == "name_collision"),
        "{view}"
    );
    let client = connect(&server, &token).await;
    assert!(!names(&client).await.contains(&"echo".to_owned()));
    client.cancel().await.unwrap();
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_instructions_announce_each_connection_with_what_it_is_for(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let token = agent_in_acme(&server).await;
    let client = connect(&server, &token).await;
    let instructions = client
        .peer_info()
        .and_then(|info| info.instructions.clone())
        .expect("instructions");
    let notices: Vec<Value> = instructions
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    assert_eq!(notices.len(), 1, "{instructions}");
    assert_eq!(notices[0]["mcp_server"], "fixture");
    assert!(notices[0]["tools"].as_u64().unwrap() > 1);
    assert!(
        notices[0]["about"]
            .as_str()
            .unwrap()
            .starts_with("A controllable MCP server"),
        "{instructions}"
    );
    client.cancel().await.unwrap();

    // `announce = never` keeps the connection out of the notices; its tools stay.
    set(&server, json!({"announce": "never"})).await;
    let client = connect(&server, &token).await;
    let instructions = client
        .peer_info()
        .and_then(|info| info.instructions.clone())
        .unwrap_or_default();
    assert!(!instructions.contains("\"mcp_server\""), "{instructions}");
    assert!(names(&client).await.contains(&"fixture__echo".to_owned()));
    client.cancel().await.unwrap();
}

/// An HTTP fixture on `port`, demanding `FIXTURE_TOKEN` as its bearer token when `locked`.
fn http_fixture_on(port: u16, locked: bool) -> ChildGuard {
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["http", "--listen", listen.as_str()];
    if locked {
        args.extend(["--bearer-env", "FIXTURE_TOKEN"]);
    }
    let mut fixture = std::process::Command::new(fixture_bin())
        .args(&args)
        .env("FIXTURE_TOKEN", "a-token-switchyard-does-not-hold")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the fixture starts");
    read_announcement(&mut fixture, "listening on");
    ChildGuard(fixture)
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_refused_credential_stops_calls_or_degrades_the_connection(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let token = agent_in_acme(&server).await;
    let owner = &server.owner;
    // An HTTP connection discovered while its server asked for nothing…
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let open = http_fixture_on(port, false);
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": format!("http://127.0.0.1:{port}/mcp")}),
        )
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "remote", "connector": "remote"}),
        )
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/connections/remote/discover",
            json!({}),
        )
        .await
        .ok();
    owner.classify_all("acme", "remote").await;
    owner
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "remote-use", "connections": ["remote"]}),
        )
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/remote-use/grants",
            json!({"agent": "bot", "use": true}),
        )
        .await
        .ok();
    // …then refusing the credential Switchyard holds (none): its next discovery fails.
    drop(open);
    let _locked = http_fixture_on(port, true);
    owner
        .post(
            "/api/v1/workspaces/acme/connections/remote/discover",
            json!({}),
        )
        .await
        .refused(502, "discovery_failed");

    // `stop` (the default): the tools stay listed, and a call says the connection needs
    // authorizing; the instructions name it unavailable.
    let client = connect(&server, &token).await;
    assert!(names(&client).await.contains(&"remote__echo".to_owned()));
    let stopped = call(&client, "remote__echo", json!({"text": "x"})).await;
    assert_eq!(stopped["isError"], true, "{stopped}");
    assert!(text(&stopped).contains("needs authorizing"), "{stopped}");
    let remote = notice_of(&client, "remote");
    assert_eq!(remote["unavailable"], true, "{remote}");
    assert_eq!(remote["reason"], "needs_authorization", "{remote}");
    client.cancel().await.unwrap();

    // `degrade`: its tools are left out; the other connection's stay.
    owner
        .put(
            "/api/v1/workspaces/acme/agents/bot/connections/remote",
            json!({"auth_failure": "degrade"}),
        )
        .await
        .ok();
    let client = connect(&server, &token).await;
    let listed = names(&client).await;
    assert!(
        !listed.iter().any(|n| n.starts_with("remote__")),
        "{listed:?}"
    );
    assert!(listed.contains(&"fixture__echo".to_owned()), "{listed:?}");
    client.cancel().await.unwrap();
    let view = owner
        .get("/api/v1/workspaces/acme/agents/bot/tools")
        .await
        .ok();
    assert_eq!(
        view["unavailable"],
        json!([{"connection": "remote", "reason": "needs_authorization"}]),
        "{view}"
    );
}
