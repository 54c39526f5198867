//! `switchyard apply` and `switchyard config export` against a real server: a file creates a
//! workspace's connections and agents, applying it again changes nothing, an edit plans and
//! makes exactly that edit, an export applies back with no changes, a dry run and a bad file
//! change nothing, and what was made by hand is never retired.

use super::harness::{
    HttpFixture, Run, Server, Switchyard, fixture_binary, scratch_dir, set_up_demo,
};
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::path::Path;

/// Writes `text` to `dir/name`; its path.
#[track_caller]
fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the file");
    path.display().to_string()
}

/// `switchyard ARGS` succeeded; its stdout.
#[track_caller]
fn ok(cli: &Switchyard, args: &[&str]) -> String {
    cli.run(args).success().stdout
}

/// The plan lines of an apply run (`+`, `~`, `-`), in order.
fn plan_lines(run: &Run) -> Vec<String> {
    run.stdout
        .lines()
        .filter(|l| l.starts_with(['+', '~', '-']))
        .map(str::to_owned)
        .collect()
}

/// `GET` of a workspace list as JSON through the CLI.
#[track_caller]
fn listed(cli: &Switchyard, what: &str) -> Vec<Value> {
    cli.run(&["--json", what, "list", "acme"])
        .success()
        .json()
        .as_array()
        .expect("a list")
        .clone()
}

/// The connection named `name`, if listed.
#[track_caller]
fn connection(cli: &Switchyard, name: &str) -> Option<Value> {
    listed(cli, "connection")
        .into_iter()
        .find(|c| c["name"] == name)
}

#[sqlx::test(migrations = false)]
async fn apply_makes_a_workspace_match_its_file_and_export_round_trips(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    let dir = scratch_dir("apply_round_trip");
    let remote = HttpFixture::start(&[], &[]);
    ok(&cli, &["workspace", "create", "acme"]);
    let fixture = fixture_binary();
    let first = format!(
        r#"workspace = "acme"

[mcp.fx]
command = "{fixture}"
args = ["stdio"]

[mcp.remote]
url = "{url}"
prefix_tools = false

[agent.triage]
mcp = ["mcp.fx", {{ id = "mcp.remote", approve = "destructive", defer = true }}]
"#,
        url = remote.url
    );
    let file = write(&dir, "switchyard.toml", &first);

    // A dry run prints the plan and changes nothing.
    let dry = cli.run(&["apply", &file, "--dry-run"]).success();
    let lines = plan_lines(&dry);
    assert!(
        lines[0].starts_with("+ mcp.fx  create connection fx (stdio "),
        "{}",
        dry.stdout
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("+ mcp.remote  create connection remote (http ")),
        "{}",
        dry.stdout
    );
    assert!(
        lines.contains(
            &"+ agent.triage  set mcp.remote: approve (profile's) → destructive".to_owned()
        ),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("3 to create, 0 to change, 0 to retire"),
        "{}",
        dry.stdout
    );
    assert!(listed(&cli, "connection").is_empty());
    assert!(listed(&cli, "agent").is_empty());

    // Applied, it creates them, declared, and prints the agent's token once.
    let applied = cli.run(&["apply", &file]).success();
    assert!(
        applied.stdout.contains("token of agent triage"),
        "{}",
        applied.stdout
    );
    assert!(
        applied.stdout.contains("applied: 3 to create"),
        "{}",
        applied.stdout
    );
    let fx = connection(&cli, "fx").expect("fx was created");
    assert_eq!(fx["declared"], true, "{fx}");
    assert_eq!(fx["connector_name"], "acme.fx", "{fx}");
    let remote_view = connection(&cli, "remote").expect("remote was created");
    assert_eq!(remote_view["prefix_tools"], false, "{remote_view}");
    let triage = cli
        .run(&["--json", "agent", "show", "acme", "triage"])
        .success()
        .json();
    assert_eq!(triage["agent"]["declared"], true, "{triage}");
    let profiles: Vec<&str> = triage["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(profiles.len(), 2, "{triage}");
    assert!(profiles.contains(&"agent.triage.fx"), "{triage}");

    // The same file again changes nothing.
    let again = cli.run(&["apply", &file]).success();
    assert!(plan_lines(&again).is_empty(), "{}", again.stdout);
    assert!(again.stdout.contains("no changes"), "{}", again.stdout);

    // What export writes applies back with no changes.
    let exported = ok(&cli, &["config", "export", "acme"]);
    let export_file = write(&dir, "exported.toml", &exported);
    ok(&cli, &["config", "validate", &export_file]);
    let back = cli.run(&["apply", &export_file]).success();
    assert!(
        back.stdout.contains("no changes"),
        "{exported}\n{}",
        back.stdout
    );

    // A connection made by hand is not the file's.
    ok(
        &cli,
        &[
            "connection",
            "create",
            "acme",
            "manual",
            "--connector",
            "acme.fx",
        ],
    );

    // Edited: one agent setting changes and a server's section goes. The plan says exactly
    // that, and applying makes it.
    let second = format!(
        r#"workspace = "acme"

[mcp.fx]
command = "{fixture}"
args = ["stdio"]

[agent.triage]
mcp = [{{ id = "mcp.fx", approve = "always" }}]
"#
    );
    let file = write(&dir, "switchyard.toml", &second);
    let dry = cli.run(&["apply", &file, "--dry-run"]).success();
    assert_eq!(
        plan_lines(&dry),
        [
            "~ agent.triage  set mcp.fx: approve (profile's) → always",
            "~ agent.triage  take mcp.remote",
            "- mcp.remote  retire connection remote",
        ],
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("0 to create, 1 to change, 1 to retire"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout
            .contains("! connection manual was made by hand and is not in the file: left alone"),
        "{}",
        dry.stdout
    );
    assert!(connection(&cli, "remote").unwrap()["retired"].is_null());

    cli.run(&["apply", &file]).success();
    assert!(!connection(&cli, "remote").unwrap()["retired"].is_null());
    assert!(connection(&cli, "manual").unwrap()["retired"].is_null());
    let triage = cli
        .run(&["--json", "agent", "show", "acme", "triage"])
        .success()
        .json();
    let fx_settings = triage["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["connection_name"] == "fx")
        .cloned()
        .expect("fx has settings");
    assert_eq!(fx_settings["approve"], "always", "{triage}");
    assert_eq!(triage["profiles"].as_array().unwrap().len(), 1, "{triage}");
    let again = cli.run(&["apply", &file]).success();
    assert!(again.stdout.contains("no changes"), "{}", again.stdout);

    // Exported now, the hand-made connection is in the file: applying it adopts it, and
    // nothing else.
    let exported = ok(&cli, &["config", "export", "acme"]);
    let export_file = write(&dir, "exported.toml", &exported);
    let adopt = cli.run(&["apply", &export_file]).success();
    assert_eq!(
        plan_lines(&adopt),
        ["~ mcp.manual  adopt connection manual (made by hand; now declared)"],
        "{exported}\n{}",
        adopt.stdout
    );
    assert_eq!(connection(&cli, "manual").unwrap()["declared"], true);
    let back = cli.run(&["apply", &export_file]).success();
    assert!(back.stdout.contains("no changes"), "{}", back.stdout);
}

#[sqlx::test(migrations = false)]
async fn a_file_with_a_problem_or_a_blocked_plan_changes_nothing(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let alice = server.cli();
    let dir = scratch_dir("apply_refused");
    ok(&alice, &["workspace", "create", "acme"]);
    let fixture = fixture_binary();

    // A literal secret: validate's errors, with line and column, and exit 2.
    let bad = write(
        &dir,
        "bad.toml",
        &format!(
            "workspace = \"acme\"\n\n[mcp.fx]\ncommand = \"{fixture}\"\nargs = [\"stdio\"]\n\n[mcp.gh]\nurl = \"https://example.com/mcp\"\ntoken = \"ghp_0123456789abcdefABCDEF0123456789\"\n"
        ),
    );
    let refused = alice.run(&["apply", &bad]).code(2);
    assert!(
        refused
            .stderr
            .contains("bad.toml:9:9: `mcp.gh.token` holds a literal secret"),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains("ghp_"), "{}", refused.stderr);
    assert!(listed(&alice, "connection").is_empty());

    // No workspace named anywhere: a usage error.
    let nameless = write(
        &dir,
        "nameless.toml",
        "[mcp.a]\nurl = \"https://example.com/mcp\"\n",
    );
    let refused = alice.run(&["apply", &nameless]).code(2);
    assert!(refused.stderr.contains("--workspace"), "{}", refused.stderr);

    // A workspace admin who is not an installation owner cannot create connectors: the plan
    // says so, and nothing is made — not even the parts that need no connector.
    let bob_token = server.create_user("bob").await;
    ok(
        &alice,
        &[
            "workspace",
            "member",
            "add",
            "acme",
            "--user",
            "bob",
            "--admin",
        ],
    );
    let bob = alice.with_token(Some(&bob_token));
    let file = write(
        &dir,
        "switchyard.toml",
        &format!(
            "[mcp.fx]\ncommand = \"{fixture}\"\nargs = [\"stdio\"]\n\n[agent.bot]\nmcp = []\n"
        ),
    );
    let blocked = bob.run(&["apply", &file, "--workspace", "acme"]).code(4);
    assert!(
        blocked.stderr.contains(
            "error[apply_blocked]: mcp.fx: needs connector acme.fx, which does not exist"
        ),
        "{}",
        blocked.stderr
    );
    assert!(
        blocked.stdout.contains("blocked: nothing was changed"),
        "{}",
        blocked.stdout
    );
    assert!(listed(&alice, "connection").is_empty());
    assert!(listed(&alice, "agent").is_empty());
    assert!(
        alice
            .run(&["connector", "list"])
            .success()
            .stdout
            .lines()
            .count()
            <= 1,
        "a connector was created"
    );
}

#[sqlx::test(migrations = false)]
async fn apply_sets_a_connections_auth_and_export_writes_it(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    let dir = scratch_dir("apply_auth");
    let remote = HttpFixture::start(&[], &[]);
    ok(&cli, &["workspace", "create", "acme"]);
    let file_with = |keys: &str| {
        let text = format!(
            "workspace = \"acme\"\n\n[mcp.remote]\nurl = \"{}\"\n{keys}",
            remote.url
        );
        write(&dir, "switchyard.toml", &text)
    };
    let oauth = "auth = \"oauth\"\nclient_id_env = \"SWITCHYARD_OAUTH_REMOTE_ID\"\n\
                 client_secret_env = \"SWITCHYARD_OAUTH_REMOTE_SECRET\"\n";

    // A new connection gets its settings right after it is made.
    let file = file_with(&format!("{oauth}scopes = [\"mcp:tools\", \"mcp:read\"]\n"));
    let applied = cli.run(&["apply", &file]).success();
    assert_eq!(
        plan_lines(&applied)[1],
        "+ mcp.remote  auth oauth, scopes [mcp:tools, mcp:read], client_id_env SWITCHYARD_OAUTH_REMOTE_ID, \
         client_secret_env SWITCHYARD_OAUTH_REMOTE_SECRET",
        "{}",
        applied.stdout
    );
    assert!(!applied.stdout.contains("not kept"), "{}", applied.stdout);
    let view = connection(&cli, "remote").expect("remote was created");
    assert_eq!(view["auth"]["kind"], "oauth", "{view}");
    assert_eq!(
        view["auth"]["scopes"],
        serde_json::json!(["mcp:tools", "mcp:read"]),
        "{view}"
    );
    assert_eq!(
        view["auth"]["client_id_env"], "SWITCHYARD_OAUTH_REMOTE_ID",
        "{view}"
    );
    assert_eq!(
        view["auth"]["client_secret_env"], "SWITCHYARD_OAUTH_REMOTE_SECRET",
        "{view}"
    );
    assert_eq!(view["auth"]["credential"], "shared", "{view}");
    assert_eq!(view["auth"]["state"], "needs_authorization", "{view}");
    let again = cli.run(&["apply", &file]).success();
    assert!(again.stdout.contains("no changes"), "{}", again.stdout);

    // One scope less: one line, and the server keeps the new list.
    let file = file_with(&format!("{oauth}scopes = [\"mcp:tools\"]\n"));
    let changed = cli.run(&["apply", &file]).success();
    assert_eq!(
        plan_lines(&changed),
        ["~ mcp.remote  set scopes: [mcp:tools, mcp:read] → [mcp:tools]"],
        "{}",
        changed.stdout
    );
    let view = connection(&cli, "remote").unwrap();
    assert_eq!(view["auth"]["scopes"], serde_json::json!(["mcp:tools"]));

    // Export writes the settings; applied back, it changes nothing.
    let exported = ok(&cli, &["config", "export", "acme"]);
    for key in [
        "auth = \"oauth\"",
        "scopes = [\"mcp:tools\"]",
        "client_id_env = \"SWITCHYARD_OAUTH_REMOTE_ID\"",
        "client_secret_env = \"SWITCHYARD_OAUTH_REMOTE_SECRET\"",
    ] {
        assert!(exported.contains(key), "{key} missing:\n{exported}");
    }
    assert!(!exported.contains("credential"), "{exported}");
    let export_file = write(&dir, "exported.toml", &exported);
    let back = cli.run(&["apply", &export_file]).success();
    assert!(
        back.stdout.contains("no changes"),
        "{exported}\n{}",
        back.stdout
    );

    // Another kind: the plan says the credential goes with it.
    let file = file_with("auth = \"token\"\n");
    let dry = cli.run(&["apply", &file, "--dry-run"]).success();
    assert_eq!(
        plan_lines(&dry),
        [
            "~ mcp.remote  set auth: oauth → token (its credential is forgotten)",
            "~ mcp.remote  set scopes: [mcp:tools] → []",
            "~ mcp.remote  set client_id_env: SWITCHYARD_OAUTH_REMOTE_ID → (none)",
            "~ mcp.remote  set client_secret_env: SWITCHYARD_OAUTH_REMOTE_SECRET → (none)",
        ],
        "{}",
        dry.stdout
    );
    cli.run(&["apply", &file]).success();
    assert_eq!(connection(&cli, "remote").unwrap()["auth"]["kind"], "token");

    // The header a token goes in is kept by the server, exported, and applied back unchanged.
    let file = file_with("auth = \"token\"\nheader = \"X-Api-Key\"\n");
    let changed = cli.run(&["apply", &file]).success();
    assert_eq!(
        plan_lines(&changed),
        ["~ mcp.remote  set header: Authorization → X-Api-Key"],
        "{}",
        changed.stdout
    );
    assert_eq!(
        connection(&cli, "remote").unwrap()["auth"]["header"],
        "X-Api-Key"
    );
    let exported = ok(&cli, &["config", "export", "acme"]);
    assert!(
        exported.contains("auth = \"token\"\nheader = \"X-Api-Key\"\n"),
        "{exported}"
    );
    let export_file = write(&dir, "exported.toml", &exported);
    let back = cli.run(&["apply", &export_file]).success();
    assert!(
        back.stdout.contains("no changes"),
        "{exported}\n{}",
        back.stdout
    );
    // `auth` left out keeps the kind the server has (it may have been discovered), and the
    // header of its token.
    let unsaid = cli.run(&["apply", &file_with("")]).success();
    assert!(unsaid.stdout.contains("no changes"), "{}", unsaid.stdout);
    // `Authorization`, the default, is no header to keep.
    let file = file_with("auth = \"token\"\nheader = \"Authorization\"\n");
    let changed = cli.run(&["apply", &file]).success();
    assert_eq!(
        plan_lines(&changed),
        ["~ mcp.remote  set header: X-Api-Key → Authorization"],
        "{}",
        changed.stdout
    );
    let again = cli
        .run(&["apply", &file_with("auth = \"token\"\n")])
        .success();
    assert!(again.stdout.contains("no changes"), "{}", again.stdout);

    // Each person's own credential is declared for a central connection like any setting.
    let text = format!(
        "workspace = \"acme\"\n\n[mcp.remote]\nurl = \"{url}\"\n\n[mcp.mine]\nurl = \"{url}\"\n\
         credential = \"user\"\n",
        url = remote.url
    );
    let file = write(&dir, "switchyard.toml", &text);
    cli.run(&["apply", &file]).success();
    let mine = connection(&cli, "mine").expect("mcp.mine is made");
    assert_eq!(mine["auth"]["credential"], "user", "{mine}");
}

#[sqlx::test(migrations = false)]
async fn a_device_placed_connection_takes_each_persons_credential(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let alice = server.cli();
    set_up_demo(&alice);
    let dir = scratch_dir("apply_auth_device");
    let device = alice.as_device(&dir.join("config"));
    let mut pair = device.start(&[
        "pair",
        "--server",
        server.url(),
        "--json",
        "--name",
        "laptop",
    ]);
    let first: Value = serde_json::from_str(&pair.next_line()).expect("a JSON line");
    let code = first["code"].as_str().expect("a pairing code");
    ok(
        &alice,
        &["device", "approve", "demo", code, "--profile", "main"],
    );
    pair.finish().success();
    let remote = HttpFixture::start(&[], &[]);

    // The server keeps a device placement's settings, `credential = "user"` included.
    let file = write(
        &dir,
        "switchyard.toml",
        &format!(
            "workspace = \"demo\"\n\n[mcp.remote]\nurl = \"{}\"\nplacement = \"device:laptop\"\n\
             auth = \"token\"\ncredential = \"user\"\n",
            remote.url
        ),
    );
    let applied = alice.run(&["apply", &file]).success();
    assert!(
        plan_lines(&applied).contains(&"+ mcp.remote  auth token, credential user".to_owned()),
        "{}",
        applied.stdout
    );
    let view = alice
        .run(&["--json", "connection", "list", "demo"])
        .success()
        .json()
        .as_array()
        .expect("a list")
        .iter()
        .find(|c| c["name"] == "remote")
        .cloned()
        .expect("remote was created");
    assert_ne!(view["runner"], "central", "{view}");
    assert_eq!(view["auth"]["kind"], "token", "{view}");
    assert_eq!(view["auth"]["credential"], "user", "{view}");
    let again = alice.run(&["apply", &file]).success();
    assert!(again.stdout.contains("no changes"), "{}", again.stdout);
    let exported = ok(&alice, &["config", "export", "demo"]);
    assert!(
        exported
            .contains("placement = \"device:laptop\"\nauth = \"token\"\ncredential = \"user\"\n"),
        "{exported}"
    );
}
