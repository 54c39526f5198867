//! What the types cannot say: which keys go together, the shape of ids, names and
//! references, and that an agent uses only servers the file declares.

use super::Issue;
use super::document::{AgentServer, AuthKind, Document, McpServer};
use super::secrets::is_reference;
use std::collections::BTreeSet;
use switchyard_protocol::api::check_token_header;

/// Every rule `document` breaks, with where.
pub(super) fn check(text: &str, document: &Document) -> Vec<Issue> {
    let mut issues = Vec::new();
    if let Some(workspace) = &document.workspace {
        let name = workspace.get_ref();
        if name.trim().is_empty() || name.len() > 64 {
            issues.push(Issue::at(
                text,
                workspace.span().start,
                "`workspace`: name the workspace the file describes (its name or id)".to_owned(),
            ));
        }
    }
    for (id, server) in &document.mcp {
        let at = server.span().start;
        let mut refuse = |message: String| issues.push(Issue::at(text, at, message));
        if !is_id(id) {
            refuse(format!(
                "[mcp.{id}]: an id is 1-40 characters of a-z, 0-9, `_` and `-`, starting with \
                 a letter or digit"
            ));
        }
        check_server(id, server.get_ref(), &mut refuse);
        for (name, reference) in &server.get_ref().env {
            if !is_env_name(name) {
                issues.push(Issue::at(
                    text,
                    reference.span().start,
                    format!("[mcp.{id}] env `{name}`: not an environment variable name"),
                ));
            }
            if !is_reference(reference.get_ref()) {
                issues.push(Issue::at(
                    text,
                    reference.span().start,
                    format!(
                        "[mcp.{id}] env `{name}`: a value must be a reference (\"env:NAME\", \
                         \"keyring:ACCOUNT\", \"file:KEY\" or \"stored\"), never the value \
                         itself"
                    ),
                ));
            }
        }
    }
    for (id, agent) in &document.agent {
        if !is_id(id) {
            issues.push(Issue::at(
                text,
                agent.span().start,
                format!(
                    "[agent.{id}]: an id is 1-40 characters of a-z, 0-9, `_` and `-`, starting \
                     with a letter or digit"
                ),
            ));
        }
        let mut seen = BTreeSet::new();
        for entry in &agent.get_ref().mcp {
            let at = entry.span().start;
            let server: &AgentServer = &entry.get_ref().0;
            let mut refuse = |message: String| issues.push(Issue::at(text, at, message));
            match server.id.strip_prefix("mcp.") {
                Some(name) if document.mcp.contains_key(name) => {
                    if !seen.insert(name) {
                        refuse(format!(
                            "[agent.{id}]: `{}` is listed twice; give it once, with all its \
                             settings",
                            server.id
                        ));
                    }
                }
                _ => refuse(format!(
                    "[agent.{id}]: `{}` is not a server of this file; write `mcp.<id>` of a \
                     [mcp.<id>] section",
                    server.id
                )),
            }
            for glob in server.tools.include.iter().chain(&server.tools.exclude) {
                if glob.trim().is_empty() {
                    refuse(format!(
                        "[agent.{id}] `{}`: an empty tool glob matches nothing",
                        server.id
                    ));
                }
            }
        }
    }
    issues
}

/// The rules of one `[mcp.<id>]` section.
fn check_server(id: &str, server: &McpServer, refuse: &mut impl FnMut(String)) {
    match (&server.url, &server.command) {
        (Some(_), Some(_)) => {
            refuse(format!("[mcp.{id}]: give `url` or `command`, not both"));
        }
        (None, None) => refuse(format!(
            "[mcp.{id}]: say how to reach the server: `url` (HTTP) or `command` (stdio)"
        )),
        (Some(url), None) => {
            if !(url.starts_with("https://") || url.starts_with("http://"))
                || reqwest::Url::parse(url).is_err()
            {
                refuse(format!("[mcp.{id}] url: not an http:// or https:// URL"));
            }
            if !server.args.is_empty() || !server.env.is_empty() {
                refuse(format!(
                    "[mcp.{id}]: `args` and `env` belong to a stdio server (`command`)"
                ));
            }
        }
        (None, Some(command)) => {
            if command.trim().is_empty() {
                refuse(format!("[mcp.{id}]: `command` is empty"));
            }
            if server.auth.is_some_and(|auth| auth != AuthKind::None)
                || server.scopes.is_some()
                || server.header.is_some()
            {
                refuse(format!(
                    "[mcp.{id}]: `auth`, `header` and `scopes` belong to an HTTP server (`url`); \
                     a stdio server takes its credentials through `env`"
                ));
            }
        }
    }
    if let Some(header) = &server.header {
        if server.auth != Some(AuthKind::Token) {
            refuse(format!(
                "[mcp.{id}]: `header` applies only with auth = \"token\""
            ));
        }
        // The server's own rule, so that whatever it keeps, export writes and apply reads.
        if check_token_header(header).is_err() {
            refuse(format!(
                "[mcp.{id}]: `header` must name a header a connection may set, such as \
                 \"Authorization\""
            ));
        }
    }
    let oauth_only = [
        ("client_id_env", &server.client_id_env),
        ("client_secret_env", &server.client_secret_env),
    ];
    for (key, value) in oauth_only {
        if let Some(name) = value {
            if matches!(server.auth, Some(AuthKind::Token | AuthKind::None)) {
                refuse(format!("[mcp.{id}]: `{key}` applies only with OAuth"));
            }
            if !is_env_name(name) {
                refuse(format!(
                    "[mcp.{id}] {key} `{name}`: name the environment variable that holds it"
                ));
            }
        }
    }
    if server.client_secret_env.is_some() && server.client_id_env.is_none() {
        refuse(format!(
            "[mcp.{id}]: `client_secret_env` needs `client_id_env`"
        ));
    }
    if let Some(placement) = &server.placement {
        let device = placement.strip_prefix("device:");
        if placement != "central" && device.is_none_or(|name| name.trim().is_empty()) {
            refuse(format!(
                "[mcp.{id}] placement `{placement}`: write \"central\" or \"device:NAME\""
            ));
        }
    }
}

/// Whether `id` can be a section's id: `[a-z0-9][a-z0-9_-]{0,39}`.
pub(crate) fn is_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 40
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
