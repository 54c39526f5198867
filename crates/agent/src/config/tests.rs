use super::document::{AuthKind, CredentialHolder};
use super::*;
use switchyard_protocol::agents::AuthFailure;
use switchyard_protocol::approval::ApprovalPolicy;

const EXAMPLE: &str = r#"
workspace = "acme"

[mcp.sentry]
url = "https://mcp.sentry.dev/mcp"
auth = "oauth"
scopes = ["org:read"]

[mcp.github]
url = "https://api.githubcopilot.com/mcp/"
auth = "token"
header = "Authorization"
credential = "shared"

[mcp.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
env = { API_TOKEN = "env:FILES_TOKEN" }
placement = "device:laptop"
prefix_tools = false

[agent.triage]
mcp = ["mcp.sentry", { id = "mcp.github", tools = { read_only = true, exclude = ["delete_*"] }, approve = "destructive", defer = true, auth_failure = "degrade" }]
mcp_announce = "auto"
defer_tools = false
"#;

fn messages(text: &str) -> Vec<String> {
    parse(text)
        .expect_err("the file is refused")
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn the_example_reads_as_written() {
    let document = parse(EXAMPLE).expect("the example is valid");
    assert_eq!(
        document.workspace.as_ref().map(|w| w.get_ref().as_str()),
        Some("acme")
    );
    assert_eq!(document.mcp.len(), 3);
    let github = document.mcp["github"].get_ref();
    assert_eq!(github.auth, Some(AuthKind::Token));
    assert_eq!(github.credential, Some(CredentialHolder::Shared));
    let files = document.mcp["files"].get_ref();
    assert_eq!(files.env["API_TOKEN"].get_ref(), "env:FILES_TOKEN");
    let triage = document.agent["triage"].get_ref();
    let servers: Vec<_> = triage.mcp.iter().map(|e| &e.get_ref().0).collect();
    assert_eq!(servers[0].id, "mcp.sentry");
    assert_eq!(servers[0].approve, None);
    assert_eq!(servers[1].id, "mcp.github");
    assert!(servers[1].tools.read_only);
    assert_eq!(servers[1].tools.exclude, ["delete_*"]);
    assert_eq!(servers[1].approve, Some(ApprovalPolicy::Destructive));
    assert_eq!(servers[1].auth_failure, Some(AuthFailure::Degrade));
}

#[test]
fn a_literal_token_is_refused_with_its_line_and_column() {
    let text = "[mcp.github]\nurl = \"https://example.com/mcp\"\nauth = \"token\"\ntoken = \"ghp_0123456789abcdefABCDEF0123456789\"\n";
    let found = messages(text);
    assert!(
        found
            .iter()
            .any(|m| m.starts_with("4:9: `mcp.github.token` holds a literal secret")),
        "{found:?}"
    );
    assert!(
        found.iter().all(|m| !m.contains("ghp_")),
        "the secret is not echoed: {found:?}"
    );
}

#[test]
fn a_key_shaped_value_anywhere_is_refused() {
    let text = "[mcp.files]\ncommand = \"srv\"\nargs = [\"--key\", \"q8ZrT3mW9xLp2VbN7cKd4FgH6jS1aYe0\"]\n";
    let found = messages(text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("3:18: `mcp.files.args` holds a key-shaped value"),
        "{found:?}"
    );
}

#[test]
fn an_environment_value_must_be_a_reference() {
    let text = "[mcp.files]\ncommand = \"srv\"\nenv = { MODE = \"fast\" }\n";
    let found = messages(text);
    assert!(
        found[0].starts_with("3:16: [mcp.files] env `MODE`: a value must be a reference"),
        "{found:?}"
    );
}

#[test]
fn every_reference_form_is_accepted() {
    for reference in [
        "env:FILES_TOKEN",
        "keyring:files",
        "file:files-token",
        "stored",
    ] {
        let text = format!("[mcp.files]\ncommand = \"srv\"\nenv = {{ TOKEN = \"{reference}\" }}\n");
        assert!(parse(&text).is_ok(), "{reference} was refused");
    }
    // `stored` names no value: anything after it is not a reference.
    let found = messages("[mcp.files]\ncommand = \"srv\"\nenv = { TOKEN = \"stored:x\" }\n");
    assert!(
        found.iter().any(|m| m.contains("must be a reference")),
        "{found:?}"
    );
}

#[test]
fn an_unknown_key_is_refused_with_its_line() {
    let text = "[mcp.sentry]\nurl = \"https://mcp.sentry.dev/mcp\"\nscope = [\"a\"]\n";
    let found = messages(text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("3:1: unknown field `scope`"),
        "{found:?}"
    );
    let text = "[agent.a]\nmcp = [{ id = \"mcp.x\", aprove = \"always\" }]\n";
    let found = messages(text);
    assert!(found[0].starts_with("2:"), "{found:?}");
    assert!(found[0].contains("unknown field `aprove`"), "{found:?}");
}

#[test]
fn keys_that_do_not_go_together_are_refused() {
    let found = messages("[mcp.a]\nurl = \"https://x.example/mcp\"\ncommand = \"srv\"\n");
    assert!(
        found[0].contains("give `url` or `command`, not both"),
        "{found:?}"
    );
    let found = messages("[mcp.a]\nurl = \"https://x.example/mcp\"\nheader = \"X-Key\"\n");
    assert!(
        found[0].contains("`header` applies only with auth = \"token\""),
        "{found:?}"
    );
    for header in ["Host", "X Key"] {
        let found = messages(&format!(
            "[mcp.a]\nurl = \"https://x.example/mcp\"\nauth = \"token\"\nheader = \"{header}\"\n"
        ));
        assert!(
            found[0].contains("`header` must name a header a connection may set"),
            "{found:?}"
        );
    }
    let found = messages("[mcp.a]\ncommand = \"srv\"\nauth = \"oauth\"\n");
    assert!(found[0].contains("belong to an HTTP server"), "{found:?}");
    let found = messages("[mcp.a]\nurl = \"https://x.example/mcp\"\nplacement = \"laptop\"\n");
    assert!(
        found[0].contains("write \"central\" or \"device:NAME\""),
        "{found:?}"
    );
}

#[test]
fn an_agent_uses_only_servers_the_file_declares_once() {
    let text = "[mcp.a]\nurl = \"https://x.example/mcp\"\n\n[agent.bot]\nmcp = [\"mcp.a\", \"mcp.b\", \"mcp.a\"]\n";
    let found = messages(text);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found
            .iter()
            .any(|m| m.contains("`mcp.b` is not a server of this file"))
    );
    assert!(found.iter().any(|m| m.contains("`mcp.a` is listed twice")));
}

#[test]
fn a_syntax_error_names_its_line() {
    let found = messages("[mcp.a]\nurl = \"https://x.example/mcp\n");
    assert!(found[0].starts_with("2:"), "{found:?}");
}

#[test]
fn no_message_repeats_a_secret() {
    let text = "[mcp.a]\nurl = \"https://x.example/mcp\"\nauth = \"ghp_0123456789abcdefABCDEF0123456789\"\n";
    let found = messages(text);
    assert!(found.len() >= 2, "{found:?}");
    assert!(found.iter().all(|m| !m.contains("ghp_")), "{found:?}");
}

#[test]
fn the_workspace_key_is_optional_and_never_empty() {
    parse("[mcp.a]\nurl = \"https://x.example/mcp\"\n").expect("valid without it");
    let found = messages("workspace = \"\"\n");
    assert!(
        found[0].starts_with("1:13: `workspace`: name the workspace"),
        "{found:?}"
    );
}

#[test]
fn a_server_holds_a_shared_credential_unless_the_file_says_user() {
    let document = parse(EXAMPLE).expect("the example is valid");
    let wanted = desired(&document);
    // Left out, `credential` is `shared`: the only holder a central connection takes.
    assert_eq!(wanted.mcp["sentry"].credential, CredentialHolder::Shared);
    assert_eq!(wanted.mcp["files"].credential, CredentialHolder::Shared);
    let document =
        parse("[mcp.a]\nurl = \"https://x.example/mcp\"\ncredential = \"user\"\n").expect("valid");
    assert_eq!(
        desired(&document).mcp["a"].credential,
        CredentialHolder::User
    );
    let found = messages("[mcp.a]\nurl = \"https://x.example/mcp\"\ncredential = \"each\"\n");
    assert!(
        found[0].contains("unknown variant `each`, expected `shared` or `user`"),
        "{found:?}"
    );
}

#[test]
fn auth_keys_are_the_apis_names() {
    let document = parse(EXAMPLE).expect("the example is valid");
    let wanted = desired(&document);
    let sentry = &wanted.mcp["sentry"];
    assert_eq!(sentry.auth, Some(AuthKind::Oauth));
    assert_eq!(sentry.scopes, ["org:read"]);
    assert_eq!(sentry.header, None);
    assert_eq!(
        wanted.mcp["github"].header.as_deref(),
        Some("Authorization")
    );
    assert_eq!(wanted.mcp["files"].auth, None);
}
