//! A connection's auth settings in a file (`auth`, `header`, `scopes`, `client_id_env`,
//! `client_secret_env`, `credential` of `[mcp.<id>]`) and in the workspace (`PUT
//! …/connections/{c}/auth`, the view's `auth`): what apply sends, what it refuses before
//! sending anything, and what export writes.
//!
//! `auth` left out of a file means "discovered": apply keeps the kind the server has (the one
//! its first authorization found, or one set by hand), and a `token` kind's header with it, so
//! that a discovered `oauth` is not undone — which would forget its grant. `header =
//! "Authorization"`, the default, is sent as no header, as the server keeps it.

use crate::config::DeclaredServer;
use switchyard_protocol::api::{
    AuthKind, ConnectionAuthView, CredentialHolder, DEFAULT_TOKEN_HEADER, OAUTH_ENV_PREFIX,
    SetConnectionAuth, check_client_variable, is_default_token_header,
};

/// A connection's settings as the server holds them (the defaults when it has none).
pub fn current(view: Option<&ConnectionAuthView>) -> SetConnectionAuth {
    view.map_or_else(SetConnectionAuth::default, |auth| SetConnectionAuth {
        kind: auth.kind,
        scopes: auth.scopes.clone(),
        client_id_env: auth.client_id_env.clone(),
        client_secret_env: auth.client_secret_env.clone(),
        credential: auth.credential,
        header: auth.header.clone(),
    })
}

/// The settings a file's server asks for, given the ones it has (`current`): a kind the file
/// leaves out stays as it is.
pub fn wanted(server: &DeclaredServer, current: &SetConnectionAuth) -> SetConnectionAuth {
    SetConnectionAuth {
        kind: server.auth.or(current.kind),
        scopes: server.scopes.clone(),
        client_id_env: server.client_id_env.clone(),
        client_secret_env: server.client_secret_env.clone(),
        credential: server.credential,
        header: match server.auth {
            None => current.header.clone(),
            Some(_) => server
                .header
                .clone()
                .filter(|header| !is_default_token_header(header)),
        },
    }
}

/// Why the server would refuse `wanted` for connection `id`, said before anything is sent,
/// so that a plan is never carried out halfway.
pub fn refusal(id: &str, wanted: &SetConnectionAuth) -> Option<String> {
    let oauth_keys = !wanted.scopes.is_empty() || wanted.client_id_env.is_some();
    if let Some(kind) = wanted
        .kind
        .filter(|kind| *kind != AuthKind::Oauth && oauth_keys)
    {
        return Some(format!(
            "mcp.{id}: `scopes`, `client_id_env` and `client_secret_env` are OAuth settings, \
             and connection {id}'s auth is {kind}: write auth = \"oauth\", or remove them"
        ));
    }
    for variable in [&wanted.client_id_env, &wanted.client_secret_env]
        .into_iter()
        .flatten()
    {
        if check_client_variable(variable).is_err() {
            return Some(format!(
                "mcp.{id}: `{variable}` is not a name the server reads an OAuth client from: \
                 capitals, digits and `_`, starting with {OAUTH_ENV_PREFIX} (e.g. \
                 {OAUTH_ENV_PREFIX}SENTRY_CLIENT_ID)"
            ));
        }
    }
    None
}

/// What a new connection's settings are, when they are not the defaults (nothing to send).
pub fn created(wanted: &SetConnectionAuth) -> Option<String> {
    if *wanted == SetConnectionAuth::default() {
        return None;
    }
    let mut parts = Vec::new();
    if let Some(kind) = wanted.kind {
        parts.push(format!("auth {kind}"));
    }
    if let Some(header) = &wanted.header {
        parts.push(format!("header {header}"));
    }
    if !wanted.scopes.is_empty() {
        parts.push(format!("scopes {}", scopes(&wanted.scopes)));
    }
    if let Some(variable) = &wanted.client_id_env {
        parts.push(format!("client_id_env {variable}"));
    }
    if let Some(variable) = &wanted.client_secret_env {
        parts.push(format!("client_secret_env {variable}"));
    }
    if wanted.credential != CredentialHolder::default() {
        parts.push(format!("credential {}", wanted.credential));
    }
    Some(parts.join(", "))
}

/// `set auth: token → oauth (its credential is forgotten)`, one line per setting that differs.
pub fn differences(from: &SetConnectionAuth, to: &SetConnectionAuth) -> Vec<String> {
    let mut lines = Vec::new();
    if from.kind != to.kind {
        let kind = |kind: Option<AuthKind>| kind.map_or("discovered", AuthKind::as_str);
        // The server empties the credential a connection holds when its kind changes.
        let forgotten = if from.kind.is_some() {
            " (its credential is forgotten)"
        } else {
            ""
        };
        lines.push(format!(
            "set auth: {} → {}{forgotten}",
            kind(from.kind),
            kind(to.kind)
        ));
    }
    if from.header != to.header {
        let header = |h: &Option<String>| h.as_deref().unwrap_or(DEFAULT_TOKEN_HEADER).to_owned();
        lines.push(format!(
            "set header: {} → {}",
            header(&from.header),
            header(&to.header)
        ));
    }
    if from.scopes != to.scopes {
        lines.push(format!(
            "set scopes: {} → {}",
            scopes(&from.scopes),
            scopes(&to.scopes)
        ));
    }
    let variable = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".to_owned());
    if from.client_id_env != to.client_id_env {
        lines.push(format!(
            "set client_id_env: {} → {}",
            variable(&from.client_id_env),
            variable(&to.client_id_env)
        ));
    }
    if from.client_secret_env != to.client_secret_env {
        lines.push(format!(
            "set client_secret_env: {} → {}",
            variable(&from.client_secret_env),
            variable(&to.client_secret_env)
        ));
    }
    if from.credential != to.credential {
        lines.push(format!(
            "set credential: {} → {}",
            from.credential, to.credential
        ));
    }
    lines
}

/// The keys export writes for a connection's settings (defaults left out), and what the file
/// cannot say of them (a stdio server's `auth`, other than `none`, its `header` and `scopes`
/// belong to an HTTP server in a file).
pub fn export_keys(view: Option<&ConnectionAuthView>, http: bool) -> (Vec<String>, Vec<String>) {
    let settings = current(view);
    let mut keys = Vec::new();
    let mut left_out = Vec::new();
    match settings.kind {
        Some(kind) if http || kind == AuthKind::None => {
            keys.push(format!("auth = {}", quote(kind.as_str())));
        }
        Some(kind) => left_out.push(format!("auth {kind} (apply keeps it as it is)")),
        None => {}
    }
    if let Some(header) = &settings.header {
        if http && settings.kind == Some(AuthKind::Token) {
            keys.push(format!("header = {}", quote(header)));
        } else {
            left_out.push(format!("header {header}"));
        }
    }
    if !settings.scopes.is_empty() {
        let list: Vec<String> = settings.scopes.iter().map(|s| quote(s)).collect();
        if http {
            keys.push(format!("scopes = [{}]", list.join(", ")));
        } else {
            left_out.push(format!("scopes {}", scopes(&settings.scopes)));
        }
    }
    if let Some(variable) = &settings.client_id_env {
        keys.push(format!("client_id_env = {}", quote(variable)));
    }
    if let Some(variable) = &settings.client_secret_env {
        keys.push(format!("client_secret_env = {}", quote(variable)));
    }
    if settings.credential != CredentialHolder::default() {
        keys.push(format!(
            "credential = {}",
            quote(settings.credential.as_str())
        ));
    }
    (keys, left_out)
}

/// `[a, b]`.
fn scopes(scopes: &[String]) -> String {
    format!("[{}]", scopes.join(", "))
}

/// A TOML basic string.
fn quote(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}
