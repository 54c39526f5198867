//! Workspaces, their connections (status, auth state, runner, revision, discovery, lifecycle
//! events, tool catalog and recent audit history: [`super::catalog`]) and profiles
//! (environment, connections, grants).

use super::WebState;
use super::catalog::{self, AuditRow, CatalogRow};
use super::credentials::{self, CredentialsSection};
use super::error::{WebError, WebResult};
use super::page::{Chrome, NoticeQuery, html, when};
use super::session::{CsrfOnly, Protected, SignedIn};
use crate::app::Actor;
use crate::error::AppError;
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::{Html, Redirect};
use std::collections::HashMap;
use switchyard_protocol::ErrorCode;
use switchyard_protocol::api::{
    AuthKind, AuthState, ConnectionView, ConnectorSpec, GrantView, ProfileView, WorkspaceView,
};

#[derive(Template)]
#[template(path = "workspaces.html")]
struct WorkspacesPage {
    chrome: Chrome,
    workspaces: Vec<WorkspaceRow>,
}

struct WorkspaceRow {
    name: String,
    created: String,
}

/// `GET /workspaces`.
pub(super) async fn list(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Query(q): Query<NoticeQuery>,
) -> WebResult<Html<String>> {
    let workspaces = s.app.workspace_list(&signed_in.session.actor).await?;
    html(&WorkspacesPage {
        chrome: Chrome::new(&signed_in, "workspaces").with_notice(q.notice.as_deref()),
        workspaces: workspaces
            .iter()
            .map(|w: &WorkspaceView| WorkspaceRow {
                name: w.name.clone(),
                created: when(&w.created_at),
            })
            .collect(),
    })
}

/// A connection as the tables show it.
struct ConnectionRow {
    name: String,
    namespace: String,
    connector: String,
    status: Status,
    runner: String,
    revision: i64,
    last_discovery: String,
    /// Its auth settings' kind and state, once it has any.
    auth: Option<AuthShown>,
}

/// A connection's auth kind and, where it has one, where its credential stands.
struct AuthShown {
    /// `none`, `token`, `oauth`, or `discovered` (found at its first authorization).
    kind: &'static str,
    /// `authorized`, `needs_authorization`, `auth_required` or `expired`: an OAuth grant's
    /// (also of a kind still to discover); `None` for `none` and `token`, which hold none.
    state: Option<&'static str>,
    /// CSS class of the state's badge.
    tone: &'static str,
    /// What a state other than `authorized` means; the page adds the command that fixes it.
    hint: Option<&'static str>,
}

/// How the pages show `connection`'s auth (as `switchyard list` does).
fn auth_shown(connection: &ConnectionView) -> Option<AuthShown> {
    let auth = connection.auth.as_ref()?;
    if let Some(kind @ (AuthKind::None | AuthKind::Token)) = auth.kind {
        return Some(AuthShown {
            kind: kind.as_str(),
            state: None,
            tone: "muted",
            hint: None,
        });
    }
    let (tone, hint) = match auth.state {
        AuthState::Authorized => ("ok", None),
        AuthState::NeedsAuthorization => (
            "warn",
            Some("Not authorized yet, or its credential was emptied: a person consents once."),
        ),
        AuthState::AuthRequired => (
            "bad",
            Some(
                "Renewing its token was refused for good, so its calls fail: a person must \
                 authorize it again.",
            ),
        ),
        AuthState::Expired => (
            "bad",
            Some("Its token expired with nothing to renew it: a person must authorize it again."),
        ),
    };
    Some(AuthShown {
        kind: auth.kind.map_or("discovered", AuthKind::as_str),
        state: Some(auth.state.as_str()),
        tone,
        hint,
    })
}

/// A connection's status, from its connector's approval and its last discovery.
struct Status {
    label: &'static str,
    /// CSS class: `ok`, `warn`, `bad` or `muted`.
    tone: &'static str,
}

fn status(connection: &ConnectionView, connector_approved: bool) -> Status {
    if connection.retired.is_some() {
        Status {
            label: "retired",
            tone: "muted",
        }
    } else if !connector_approved {
        Status {
            label: "connector not approved",
            tone: "warn",
        }
    } else if connection.last_discovery_error.is_some() {
        Status {
            label: "discovery failed",
            tone: "bad",
        }
    } else if connection.last_discovery_at.is_none() {
        Status {
            label: "not discovered",
            tone: "muted",
        }
    } else {
        Status {
            label: "ready",
            tone: "ok",
        }
    }
}

async fn connector_approval(s: &WebState, actor: &Actor) -> WebResult<HashMap<String, bool>> {
    Ok(s.app
        .connector_list(actor)
        .await?
        .into_iter()
        .map(|c| (c.id.to_string(), c.approved))
        .collect())
}

fn connection_row(c: &ConnectionView, approval: &HashMap<String, bool>) -> ConnectionRow {
    ConnectionRow {
        name: c.name.clone(),
        namespace: c.namespace.clone(),
        connector: c.connector_name.clone(),
        status: status(
            c,
            approval
                .get(&c.connector_id.to_string())
                .copied()
                .unwrap_or(false),
        ),
        runner: c.runner.clone(),
        revision: c.revision,
        last_discovery: c
            .last_discovery_at
            .as_ref()
            .map(when)
            .unwrap_or_else(|| "never".to_owned()),
        auth: auth_shown(c),
    }
}

#[derive(Template)]
#[template(path = "connections.html")]
struct ConnectionsPage {
    chrome: Chrome,
    ws: String,
    connections: Vec<ConnectionRow>,
}

/// `GET /workspaces/{ws}`: the workspace's connections.
pub(super) async fn connections(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path(ws): Path<String>,
    Query(q): Query<NoticeQuery>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let workspace = s.app.workspace_get(actor, &ws).await?;
    let approval = connector_approval(&s, actor).await?;
    let connections = s.app.connection_list(actor, &ws).await?;
    html(&ConnectionsPage {
        chrome: Chrome::in_workspace(&signed_in, &workspace.name, "connections")
            .with_notice(q.notice.as_deref()),
        ws: workspace.name,
        connections: connections
            .iter()
            .map(|c| connection_row(c, &approval))
            .collect(),
    })
}

/// One principal's grants, as words and one by one (for their Revoke buttons).
struct GrantRow {
    user: String,
    grants: String,
    held: Vec<HeldGrant>,
}

/// One grant held: its form value and its name.
struct HeldGrant {
    field: &'static str,
    label: &'static str,
}

fn held_grants(g: &GrantView) -> Vec<HeldGrant> {
    [
        ("use", "Use", g.use_),
        ("manage", "Manage", g.manage),
        ("share", "Share", g.share),
        ("approve", "Approve", g.approve),
    ]
    .into_iter()
    .filter(|(_, _, held)| *held)
    .map(|(field, label, _)| HeldGrant { field, label })
    .collect()
}

fn grant_words(g: &GrantView) -> String {
    let words: Vec<&str> = [
        ("Use", g.use_),
        ("Manage", g.manage),
        ("Share", g.share),
        ("Approve", g.approve),
    ]
    .into_iter()
    .filter_map(|(word, held)| held.then_some(word))
    .collect();
    if words.is_empty() {
        "none".to_owned()
    } else {
        words.join(", ")
    }
}

/// A profile that includes a connection, with the viewer's own grants.
struct ProfileLink {
    name: String,
    environment: String,
    mine: String,
}

struct EventRow {
    at: String,
    kind: String,
    runner: String,
    detail: String,
}

#[derive(Template)]
#[template(path = "connection.html")]
struct ConnectionPage {
    chrome: Chrome,
    ws: String,
    row: ConnectionRow,
    target: String,
    connector_revision: i64,
    discovery_error: Option<String>,
    is_admin: bool,
    profiles: Vec<ProfileLink>,
    events: Vec<EventRow>,
    tools: Vec<CatalogRow>,
    /// Whether the viewer may classify the tools (workspace admins, the installation owner).
    may_classify: bool,
    /// The connection's recent audit history, for those who may read the audit log.
    audit: Option<Vec<AuditRow>>,
    /// A central connection's credentials, for workspace admins.
    credentials: Option<CredentialsSection>,
}

/// The connector's target, as one line.
pub(super) fn target_line(spec: &ConnectorSpec) -> String {
    match spec {
        ConnectorSpec::Stdio { command, args, .. } => std::iter::once(command.as_str())
            .chain(args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        ConnectorSpec::Http { url } => url.clone(),
    }
}

async fn is_admin(s: &WebState, actor: &Actor, ws: &str) -> WebResult<bool> {
    Ok(s.app.member_list(actor, ws).await?.iter().any(|m| {
        m.user_id == actor.user.id && m.role == switchyard_protocol::api::MemberRole::Admin
    }))
}

async fn environment_names(
    s: &WebState,
    actor: &Actor,
    ws: &str,
) -> WebResult<HashMap<String, String>> {
    Ok(s.app
        .environment_list(actor, ws)
        .await?
        .into_iter()
        .map(|e| (e.id.to_string(), e.name))
        .collect())
}

fn my_grants(profile: &ProfileView, actor: &Actor) -> String {
    profile
        .grants
        .iter()
        .find(|g| g.user_id == actor.user.id)
        .map(grant_words)
        .unwrap_or_else(|| "none".to_owned())
}

/// `GET /workspaces/{ws}/connections/{connection}`.
pub(super) async fn connection(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path((ws, key)): Path<(String, String)>,
    Query(q): Query<NoticeQuery>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let workspace = s.app.workspace_get(actor, &ws).await?;
    let connection = s.app.connection_get(actor, &ws, &key).await?;
    let connector = s
        .app
        .connector_get(actor, &connection.connector_id.to_string())
        .await?;
    let environments = environment_names(&s, actor, &ws).await?;
    let profiles = s
        .app
        .profile_list(actor, &ws)
        .await?
        .into_iter()
        .filter(|p| p.connection_ids.contains(&connection.id))
        .map(|p| ProfileLink {
            environment: environments
                .get(&p.environment_id.to_string())
                .cloned()
                .unwrap_or_default(),
            mine: my_grants(&p, actor),
            name: p.name,
        })
        .collect();
    let events = s
        .app
        .connection_events(actor, &ws, &key)
        .await?
        .into_iter()
        .map(|e| EventRow {
            at: when(&e.at),
            kind: e.kind,
            runner: e.runner.unwrap_or_else(|| "server".to_owned()),
            detail: e.detail.to_string(),
        })
        .collect();
    let (tools, may_classify) = catalog::catalog(&s, actor, &ws, &key).await?;
    let audit = catalog::recent_audit(&s, actor, &ws, &key).await?;
    let approval = HashMap::from([(connector.id.to_string(), connector.approved)]);
    let is_admin = is_admin(&s, actor, &ws).await?;
    let credentials = credentials::section(
        &s,
        actor,
        &ws,
        &key,
        connection.runner == "central",
        is_admin,
    )
    .await?;
    html(&ConnectionPage {
        chrome: Chrome::in_workspace(&signed_in, &workspace.name, "connections")
            .with_notice(q.notice.as_deref()),
        is_admin,
        ws: workspace.name,
        row: connection_row(&connection, &approval),
        target: connector
            .target
            .spec()
            .map(target_line)
            .unwrap_or_else(|| super::connectors::WITHHELD_TARGET.to_owned()),
        connector_revision: connector.revision,
        discovery_error: connection.last_discovery_error,
        profiles,
        events,
        tools,
        may_classify,
        audit,
        credentials,
    })
}

/// `POST /workspaces/{ws}/connections/{connection}/discover`: a failed discovery is recorded on
/// the connection, so both outcomes go back to its page.
pub(super) async fn discover(
    State(s): State<WebState>,
    Path((ws, key)): Path<(String, String)>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    let actor = &protected.signed_in.session.actor;
    let connection = s.app.connection_get(actor, &ws, &key).await?;
    let back = format!("/workspaces/{ws}/connections/{}", connection.name);
    match s
        .app
        .connection_discover(actor, &ws, &key, crate::app::DISCOVERY_WAIT)
        .await
    {
        Ok(_) => Ok(Redirect::to(&format!("{back}?notice=discovered"))),
        Err(AppError::Refused {
            code: ErrorCode::DiscoveryFailed,
            ..
        }) => Ok(Redirect::to(&back)),
        Err(e) => Err(WebError(e)),
    }
}

struct ProfileRow {
    name: String,
    retired: bool,
    environment: String,
    connections: String,
    grants: Vec<GrantRow>,
}

#[derive(Template)]
#[template(path = "profiles.html")]
struct ProfilesPage {
    chrome: Chrome,
    ws: String,
    profiles: Vec<ProfileRow>,
}

async fn connection_names(
    s: &WebState,
    actor: &Actor,
    ws: &str,
) -> WebResult<HashMap<String, String>> {
    Ok(s.app
        .connection_list(actor, ws)
        .await?
        .into_iter()
        .map(|c| (c.id.to_string(), c.name))
        .collect())
}

fn profile_row(
    p: &ProfileView,
    environments: &HashMap<String, String>,
    connections: &HashMap<String, String>,
) -> ProfileRow {
    ProfileRow {
        name: p.name.clone(),
        retired: p.retired.is_some(),
        environment: environments
            .get(&p.environment_id.to_string())
            .cloned()
            .unwrap_or_default(),
        connections: p
            .connection_ids
            .iter()
            .filter_map(|id| connections.get(&id.to_string()).cloned())
            .collect::<Vec<_>>()
            .join(", "),
        grants: p
            .grants
            .iter()
            .map(|g| GrantRow {
                user: g.user_name.clone(),
                grants: grant_words(g),
                held: held_grants(g),
            })
            .collect(),
    }
}

/// `GET /workspaces/{ws}/profiles`.
pub(super) async fn profiles(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path(ws): Path<String>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let workspace = s.app.workspace_get(actor, &ws).await?;
    let environments = environment_names(&s, actor, &ws).await?;
    let connections = connection_names(&s, actor, &ws).await?;
    let profiles = s.app.profile_list(actor, &ws).await?;
    html(&ProfilesPage {
        chrome: Chrome::in_workspace(&signed_in, &workspace.name, "profiles"),
        ws: workspace.name,
        profiles: profiles
            .iter()
            .map(|p| profile_row(p, &environments, &connections))
            .collect(),
    })
}

#[derive(Template)]
#[template(path = "profile.html")]
struct ProfilePage {
    chrome: Chrome,
    ws: String,
    profile: ProfileRow,
    connections: Vec<String>,
    can_use: bool,
    is_admin: bool,
    /// Whether the viewer may revoke grants: a holder of Share, or a workspace admin.
    can_revoke: bool,
}

/// `GET /workspaces/{ws}/profiles/{profile}`.
pub(super) async fn profile(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path((ws, key)): Path<(String, String)>,
    Query(q): Query<NoticeQuery>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let workspace = s.app.workspace_get(actor, &ws).await?;
    let environments = environment_names(&s, actor, &ws).await?;
    let names = connection_names(&s, actor, &ws).await?;
    let profile = s.app.profile_get(actor, &ws, &key).await?;
    let is_admin = is_admin(&s, actor, &ws).await?;
    let mine = profile.grants.iter().find(|g| g.user_id == actor.user.id);
    html(&ProfilePage {
        chrome: Chrome::in_workspace(&signed_in, &workspace.name, "profiles")
            .with_notice(q.notice.as_deref()),
        ws: workspace.name,
        connections: profile
            .connection_ids
            .iter()
            .filter_map(|id| names.get(&id.to_string()).cloned())
            .collect(),
        is_admin,
        can_revoke: is_admin || mine.is_some_and(|g| g.share),
        can_use: mine.is_some_and(|g| g.use_),
        profile: profile_row(&profile, &environments, &names),
    })
}
