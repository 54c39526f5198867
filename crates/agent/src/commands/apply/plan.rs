//! The plan: what must change for the workspace to match the file, computed from the file's
//! desired state and the workspace's actual state without contacting anything. A plan that
//! cannot be carried out says why in `blocked`, and then nothing of it is carried out.
//!
//! Naming rules, so that applying the same file again finds what the last run made:
//! - connection `<id>` for `[mcp.<id>]`, on connector `<workspace>.<id>` (created by an
//!   installation owner's apply; an existing connector with the same spec and a name without
//!   `.` is reused instead);
//! - agent `<id>` for `[agent.<id>]`, reaching each of its servers through a profile
//!   `agent.<id>.<server>` that apply creates and grants it Use on.

use super::auth;
use super::state::{Actual, connector_spec, reference_of, same_spec};
use crate::config::{DeclaredAgent, DeclaredServer, Desired, Transport};
use serde::Serialize;
use std::collections::BTreeMap;
use switchyard_protocol::api::{
    AgentConnectionSettings, AgentDetail, ConnectionCredentials, ConnectionView, ConnectorSpec,
    CreateAgent, CreateConnection, CreateConnector, CreateProfile, EditAgent, SetConnectionAuth,
};

/// What a change does to its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// It comes into being.
    Create,
    /// It is changed (or adopted).
    Change,
    /// A connection is retired, an agent revoked.
    Retire,
}

impl Kind {
    /// The plan line's mark.
    pub fn mark(self) -> char {
        match self {
            Kind::Create => '+',
            Kind::Change => '~',
            Kind::Retire => '-',
        }
    }
}

/// One request that carries out part of a change.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// `POST /connectors`.
    CreateConnector(CreateConnector),
    /// `PATCH /connectors/{name}`.
    UpdateConnector {
        /// The connector.
        name: String,
        /// Its new target.
        spec: ConnectorSpec,
    },
    /// `POST /connectors/{name}/approve`.
    ApproveConnector {
        /// The connector.
        name: String,
    },
    /// `POST …/connections`.
    CreateConnection(CreateConnection),
    /// `PUT …/connections/{c}/prefix-tools`.
    SetPrefixTools {
        /// The connection.
        connection: String,
        /// The new value.
        prefix_tools: bool,
    },
    /// `PUT …/connections/{c}/auth`.
    SetConnectionAuth {
        /// The connection.
        connection: String,
        /// Its auth settings, whole.
        settings: SetConnectionAuth,
    },
    /// `PUT …/connections/{c}/declared`: adopt a hand-made connection.
    DeclareConnection {
        /// The connection.
        connection: String,
    },
    /// `POST …/connections/{c}/retire`.
    RetireConnection {
        /// The connection.
        connection: String,
    },
    /// `POST …/agents` (prints the token once).
    CreateAgent(CreateAgent),
    /// `PATCH …/agents/{a}`.
    EditAgent {
        /// The agent.
        agent: String,
        /// What changes.
        edit: EditAgent,
    },
    /// `POST …/agents/{a}/revoke`.
    RevokeAgent {
        /// The agent.
        agent: String,
    },
    /// `POST …/profiles`.
    CreateProfile(CreateProfile),
    /// `POST …/profiles/{p}/grants` with Use for the agent.
    GrantUse {
        /// The profile.
        profile: String,
        /// The agent.
        agent: String,
    },
    /// `POST …/profiles/{p}/grants/revoke` of the agent's Use.
    RevokeUse {
        /// The profile.
        profile: String,
        /// The agent.
        agent: String,
    },
    /// `PUT …/agents/{a}/connections/{c}`.
    SetAgentConnection {
        /// The agent.
        agent: String,
        /// The connection.
        connection: String,
        /// Its settings, whole.
        settings: AgentConnectionSettings,
    },
}

/// One object's change: what the plan prints for it and the requests that make it.
#[derive(Debug, Serialize)]
pub struct Change {
    /// `mcp.<id>` or `agent.<id>`.
    pub subject: String,
    /// Create, change or retire.
    pub kind: Kind,
    /// What happens, one line each.
    pub lines: Vec<String>,
    /// The requests, in order.
    pub actions: Vec<Action>,
    /// When it runs: connections first, then agents, then revocations, then retirements (so
    /// that nothing names what is already gone).
    #[serde(skip)]
    phase: u8,
}

/// What `apply` will do.
#[derive(Debug, Default, Serialize)]
pub struct Plan {
    /// The workspace.
    pub workspace: String,
    /// The changes, in the order they are made.
    pub changes: Vec<Change>,
    /// Why the plan cannot be carried out; empty when it can.
    pub blocked: Vec<String>,
    /// What the file says that the server does not keep (yet), and what apply leaves alone.
    pub notes: Vec<String>,
}

impl Plan {
    /// `N to create, N to change, N to retire`, or `no changes`.
    pub fn summary(&self) -> String {
        let count = |kind| self.changes.iter().filter(|c| c.kind == kind).count();
        if self.changes.is_empty() {
            return "no changes".to_owned();
        }
        format!(
            "{} to create, {} to change, {} to retire",
            count(Kind::Create),
            count(Kind::Change),
            count(Kind::Retire)
        )
    }
}

/// The name of the connector apply makes for `[mcp.<id>]` of workspace `ws`.
pub fn own_connector(ws: &str, id: &str) -> String {
    format!("{ws}.{id}")
}

/// The profile through which apply gives agent `agent` the connection `connection`.
pub fn own_profile(agent: &str, connection: &str) -> String {
    format!("agent.{agent}.{connection}")
}

/// The plan that makes `actual` match `desired`.
pub fn plan(desired: &Desired, actual: &Actual) -> Plan {
    let mut plan = Plan {
        workspace: actual.workspace.clone(),
        ..Plan::default()
    };
    if !actual.is_owner {
        plan.notes.push(
            "connectors' commands and URLs are shown only to installation owners: they were \
             not compared; apply as an owner to change them"
                .to_owned(),
        );
    }
    for (id, server) in &desired.mcp {
        plan_server(&mut plan, actual, id, server);
    }
    for connection in &actual.connections {
        if connection.retired.is_some() || desired.mcp.contains_key(&connection.name) {
            continue;
        }
        if connection.declared {
            plan.changes.push(Change {
                subject: format!("mcp.{}", connection.name),
                kind: Kind::Retire,
                lines: vec![format!("retire connection {}", connection.name)],
                actions: vec![Action::RetireConnection {
                    connection: connection.name.clone(),
                }],
                phase: 3,
            });
        } else {
            plan.notes.push(format!(
                "connection {} was made by hand and is not in the file: left alone",
                connection.name
            ));
        }
    }
    for (id, agent) in &desired.agents {
        plan_agent(&mut plan, actual, id, agent);
    }
    for agent in &actual.agents {
        let view = &agent.agent;
        if view.revoked_at.is_some() || desired.agents.contains_key(&view.name) {
            continue;
        }
        if view.declared {
            plan.changes.push(Change {
                subject: format!("agent.{}", view.name),
                kind: Kind::Retire,
                lines: vec![format!("revoke agent {}", view.name)],
                actions: vec![Action::RevokeAgent {
                    agent: view.name.clone(),
                }],
                phase: 2,
            });
        } else {
            plan.notes.push(format!(
                "agent {} was made by hand and is not in the file: left alone",
                view.name
            ));
        }
    }
    plan.changes.sort_by_key(|change| change.phase);
    plan
}

/// How a file's server is reached, for the plan's lines.
fn reach(transport: &Transport) -> String {
    match transport {
        Transport::Http { url } => format!("http {url}"),
        Transport::Stdio { command, args, .. } => {
            let mut words = vec![command.as_str()];
            words.extend(args.iter().map(String::as_str));
            format!("stdio {}", words.join(" "))
        }
    }
}

/// The same for a connector's spec.
fn reach_of(spec: &ConnectorSpec) -> String {
    match spec {
        ConnectorSpec::Http { url } => format!("http {url}"),
        ConnectorSpec::Stdio { command, args, .. } => {
            let mut words = vec![command.as_str()];
            words.extend(args.iter().map(String::as_str));
            format!("stdio {}", words.join(" "))
        }
    }
}

/// The credential bindings a central stdio server's `env` asks for.
fn env_references(
    server: &DeclaredServer,
) -> BTreeMap<String, switchyard_protocol::api::CredentialReference> {
    match &server.transport {
        Transport::Stdio { env, .. } => env
            .iter()
            .filter_map(|(name, text)| Some((name.clone(), reference_of(text)?)))
            .collect(),
        Transport::Http { .. } => BTreeMap::new(),
    }
}

fn plan_server(plan: &mut Plan, actual: &Actual, id: &str, server: &DeclaredServer) {
    let subject = format!("mcp.{id}");
    let Some(runner) = actual.runner_of(&server.placement) else {
        plan.blocked.push(format!(
            "{subject}: no paired device of the workspace is named `{}`",
            match &server.placement {
                crate::config::Placement::Device(name) => name.as_str(),
                crate::config::Placement::Central => "central",
            }
        ));
        return;
    };
    let central = runner == "central";
    if !central && matches!(&server.transport, Transport::Stdio { env, .. } if !env.is_empty()) {
        plan.notes.push(format!(
            "{subject}: placed on a device, whose runner binds its own credentials \
             (`switchyard credential set` there): `env` references are not sent"
        ));
    }
    let existing = actual.connection(id);
    let current = auth::current(existing.and_then(|c| c.auth.as_ref()));
    let wanted = auth::wanted(server, &current);
    if let Some(refusal) = auth::refusal(id, &wanted) {
        plan.blocked.push(refusal);
        return;
    }
    let spec = connector_spec(&server.transport);
    match existing {
        None => create_server(plan, actual, (id, server), &runner, (spec, wanted)),
        Some(connection) if connection.retired.is_some() => plan.blocked.push(format!(
            "{subject}: connection {id} is retired, and a name is never reused: restore it \
             (`switchyard connection restore {} {id}`) or give the section another id",
            actual.workspace
        )),
        Some(connection) => {
            let auth = (&current, &wanted);
            change_server(
                plan,
                actual,
                (id, server),
                connection,
                (&runner, spec),
                auth,
            );
        }
    }
}

/// A connection the workspace does not have yet.
fn create_server(
    plan: &mut Plan,
    actual: &Actual,
    (id, server): (&str, &DeclaredServer),
    runner: &str,
    (spec, settings): (ConnectorSpec, SetConnectionAuth),
) {
    let subject = format!("mcp.{id}");
    let own = own_connector(&actual.workspace, id);
    let mut actions = Vec::new();
    let mut lines = Vec::new();
    let needs_approval = matches!(spec, ConnectorSpec::Stdio { .. });
    let connector = match actual.connector_named(&own) {
        Some(existing) if existing.retired.is_some() => {
            plan.blocked.push(format!(
                "{subject}: connector {own} is retired; an installation owner restores it \
                 (`switchyard connector restore {own}`)"
            ));
            return;
        }
        Some(existing) => {
            match existing.target.spec() {
                Some(current) if !same_spec(current, &spec) => {
                    lines.push(format!(
                        "change connector {own}: {} → {}",
                        reach_of(current),
                        reach(&server.transport)
                    ));
                    actions.push(Action::UpdateConnector {
                        name: own.clone(),
                        spec,
                    });
                    if needs_approval {
                        actions.push(Action::ApproveConnector { name: own.clone() });
                    }
                }
                _ if needs_approval && !existing.approved => {
                    if !actual.is_owner {
                        plan.blocked.push(format!(
                            "{subject}: connector {own} is not approved; an installation owner \
                             approves it (`switchyard connector approve {own}`)"
                        ));
                        return;
                    }
                    lines.push(format!("approve connector {own}"));
                    actions.push(Action::ApproveConnector { name: own.clone() });
                }
                _ => {}
            }
            own
        }
        None if !actual.is_owner => {
            plan.blocked.push(format!(
                "{subject}: needs connector {own}, which does not exist; connectors are \
                 installation-wide: an installation owner applies this file, or creates it"
            ));
            return;
        }
        None => {
            let reusable = actual.connectors.iter().find(|c| {
                c.retired.is_none()
                    && !c.name.contains('.')
                    && c.target.spec().is_some_and(|s| same_spec(s, &spec))
            });
            match reusable {
                Some(existing) => {
                    if needs_approval && !existing.approved {
                        lines.push(format!("approve connector {}", existing.name));
                        actions.push(Action::ApproveConnector {
                            name: existing.name.clone(),
                        });
                    }
                    existing.name.clone()
                }
                None => {
                    actions.push(Action::CreateConnector(CreateConnector {
                        name: own.clone(),
                        spec: spec.clone(),
                    }));
                    if needs_approval {
                        actions.push(Action::ApproveConnector { name: own.clone() });
                    }
                    own
                }
            }
        }
    };
    let references = env_references(server);
    let credentials =
        (central_binds(runner, server) && !references.is_empty()).then(|| ConnectionCredentials {
            env: references,
            headers: BTreeMap::new(),
        });
    lines.insert(
        0,
        format!(
            "create connection {id} ({}) on connector {connector}, {}",
            reach(&server.transport),
            placement_text(actual, runner)
        ),
    );
    actions.push(Action::CreateConnection(CreateConnection {
        name: id.to_owned(),
        connector,
        runner: Some(runner.to_owned()),
        namespace: None,
        credentials,
        declared: true,
    }));
    if !server.prefix_tools {
        lines.push("prefix_tools off".to_owned());
        actions.push(Action::SetPrefixTools {
            connection: id.to_owned(),
            prefix_tools: false,
        });
    }
    if let Some(line) = auth::created(&settings) {
        lines.push(line);
        actions.push(Action::SetConnectionAuth {
            connection: id.to_owned(),
            settings,
        });
    }
    plan.changes.push(Change {
        subject,
        kind: Kind::Create,
        lines,
        actions,
        phase: 0,
    });
}

/// Whether the server binds this server's `env` references: central placements only.
fn central_binds(runner: &str, server: &DeclaredServer) -> bool {
    runner == "central" && matches!(server.transport, Transport::Stdio { .. })
}

/// `central` or `device NAME`.
fn placement_text(actual: &Actual, runner: &str) -> String {
    match actual.device_name(runner) {
        Some(name) => format!("device {name}"),
        None => runner.to_owned(),
    }
}

/// A connection the workspace has: what differs from the file.
fn change_server(
    plan: &mut Plan,
    actual: &Actual,
    (id, server): (&str, &DeclaredServer),
    connection: &ConnectionView,
    (runner, spec): (&str, ConnectorSpec),
    (current, wanted): (&SetConnectionAuth, &SetConnectionAuth),
) {
    let subject = format!("mcp.{id}");
    let mut lines = Vec::new();
    let mut actions = Vec::new();
    if !connection.declared {
        lines.push(format!(
            "adopt connection {id} (made by hand; now declared)"
        ));
        actions.push(Action::DeclareConnection {
            connection: id.to_owned(),
        });
    }
    if connection.runner != runner {
        plan.blocked.push(format!(
            "{subject}: connection {id} runs on {}, the file says {}; a connection does not \
             move: give the section another id to make a new one, and remove this one",
            placement_text(actual, &connection.runner),
            placement_text(actual, runner)
        ));
        return;
    }
    let connector = actual.connector(connection.connector_id);
    if let Some(current) = connector.and_then(|c| c.target.spec()) {
        let name = &connection.connector_name;
        if !same_spec(current, &spec) {
            if *name != own_connector(&actual.workspace, id) {
                plan.blocked.push(format!(
                    "{subject}: connection {id} runs on connector {name}, which apply did not \
                     make ({} there, {} in the file); give the section another id to make a \
                     new connection, and remove this one",
                    reach_of(current),
                    reach(&server.transport)
                ));
                return;
            }
            lines.push(format!(
                "change connector {name}: {} → {}",
                reach_of(current),
                reach(&server.transport)
            ));
            actions.push(Action::UpdateConnector {
                name: name.clone(),
                spec: spec.clone(),
            });
            if matches!(spec, ConnectorSpec::Stdio { .. }) {
                actions.push(Action::ApproveConnector { name: name.clone() });
            }
        } else if matches!(spec, ConnectorSpec::Stdio { .. })
            && connector.is_some_and(|c| !c.approved)
        {
            lines.push(format!("approve connector {name}"));
            actions.push(Action::ApproveConnector { name: name.clone() });
        }
    }
    if central_binds(runner, server) {
        let wanted = env_references(server);
        let bound = actual.env_bindings.get(id).cloned().unwrap_or_default();
        if wanted != bound {
            plan.blocked.push(format!(
                "{subject}: connection {id}'s environment is bound to other references than \
                 the file's, and a binding is set only when a connection is made: give the \
                 section another id to make a new connection, and remove this one"
            ));
            return;
        }
    }
    if connection.prefix_tools != server.prefix_tools {
        lines.push(format!(
            "set prefix_tools {} → {}",
            on_off(connection.prefix_tools),
            on_off(server.prefix_tools)
        ));
        actions.push(Action::SetPrefixTools {
            connection: id.to_owned(),
            prefix_tools: server.prefix_tools,
        });
    }
    if current != wanted {
        lines.extend(auth::differences(current, wanted));
        actions.push(Action::SetConnectionAuth {
            connection: id.to_owned(),
            settings: wanted.clone(),
        });
    }
    if !actions.is_empty() {
        plan.changes.push(Change {
            subject,
            kind: Kind::Change,
            lines,
            actions,
            phase: 0,
        });
    }
}

fn on_off(value: bool) -> &'static str {
    if value { "on" } else { "off" }
}

fn plan_agent(plan: &mut Plan, actual: &Actual, id: &str, agent: &DeclaredAgent) {
    let subject = format!("agent.{id}");
    let mut lines = Vec::new();
    let mut actions = Vec::new();
    let existing = actual.agent(id);
    let kind = match existing {
        Some(detail) if detail.agent.revoked_at.is_some() => {
            plan.blocked.push(format!(
                "{subject}: agent {id} was revoked, and a name is never reused: give the \
                 section another id"
            ));
            return;
        }
        Some(detail) => {
            let view = &detail.agent;
            let mut edit = EditAgent::default();
            if !view.declared {
                lines.push(format!("adopt agent {id} (made by hand; now declared)"));
                edit.declared = Some(true);
            }
            if view.mode != agent.mode {
                lines.push(format!("set mode {} → {}", view.mode, agent.mode));
                edit.mode = Some(agent.mode);
            }
            if view.defer_all != agent.defer_all {
                lines.push(format!(
                    "set defer_tools {} → {}",
                    on_off(view.defer_all),
                    on_off(agent.defer_all)
                ));
                edit.defer_all = Some(agent.defer_all);
            }
            if edit != EditAgent::default() {
                actions.push(Action::EditAgent {
                    agent: id.to_owned(),
                    edit,
                });
            }
            Kind::Change
        }
        None => {
            lines.push(format!(
                "create agent {id} (mode {}, defer_tools {}); its token is printed once",
                agent.mode,
                on_off(agent.defer_all)
            ));
            actions.push(Action::CreateAgent(CreateAgent {
                name: id.to_owned(),
                mode: agent.mode,
                defer_all: agent.defer_all,
                declared: true,
            }));
            Kind::Create
        }
    };
    let reach = existing.map(|d| actual.reach(d)).unwrap_or_default();
    for (server, settings) in &agent.mcp {
        if !reach.contains_key(server) {
            give(&mut actions, actual, id, server);
            lines.push(format!("give mcp.{server}"));
        }
        let current = existing
            .and_then(|d| current_settings(d, server))
            .unwrap_or_default();
        if current != *settings {
            for difference in differences(&current, settings) {
                lines.push(format!("set mcp.{server}: {difference}"));
            }
            actions.push(Action::SetAgentConnection {
                agent: id.to_owned(),
                connection: server.clone(),
                settings: settings.clone(),
            });
        }
    }
    for (server, profiles) in &reach {
        if agent.mcp.contains_key(server) {
            continue;
        }
        let own = own_profile(id, server);
        for profile in profiles {
            if *profile == own {
                lines.push(format!("take mcp.{server}"));
                actions.push(Action::RevokeUse {
                    profile: own.clone(),
                    agent: id.to_owned(),
                });
            } else {
                plan.notes.push(format!(
                    "{subject}: reaches mcp.{server} through profile {profile}, which apply did \
                     not make: left alone"
                ));
            }
        }
    }
    if !actions.is_empty() {
        plan.changes.push(Change {
            subject,
            kind,
            lines,
            actions,
            phase: 1,
        });
    }
}

/// Gives agent `agent` the connection `server` through apply's own profile for the pair.
fn give(actions: &mut Vec<Action>, actual: &Actual, agent: &str, server: &str) {
    let profile = own_profile(agent, server);
    if actual.profile(&profile).is_none() {
        actions.push(Action::CreateProfile(CreateProfile {
            name: profile.clone(),
            environment: None,
            connections: vec![server.to_owned()],
            tools: None,
        }));
    }
    actions.push(Action::GrantUse {
        profile,
        agent: agent.to_owned(),
    });
}

/// An agent's settings for a connection, when it has its own.
fn current_settings(detail: &AgentDetail, server: &str) -> Option<AgentConnectionSettings> {
    detail
        .connections
        .iter()
        .find(|c| c.connection_name == server)
        .map(|c| c.settings.clone())
}

/// `approve destructive → always`, one per setting that differs.
fn differences(from: &AgentConnectionSettings, to: &AgentConnectionSettings) -> Vec<String> {
    let mut lines = Vec::new();
    let mut differ = |name: &str, a: String, b: String| {
        if a != b {
            lines.push(format!("{name} {a} → {b}"));
        }
    };
    let globs = |g: &[String]| format!("[{}]", g.join(", "));
    differ("include", globs(&from.include), globs(&to.include));
    differ("exclude", globs(&from.exclude), globs(&to.exclude));
    differ(
        "read_only",
        from.read_only.to_string(),
        to.read_only.to_string(),
    );
    differ(
        "non_destructive",
        from.non_destructive.to_string(),
        to.non_destructive.to_string(),
    );
    differ(
        "idempotent",
        from.idempotent.to_string(),
        to.idempotent.to_string(),
    );
    differ("defer", from.defer.to_string(), to.defer.to_string());
    let approve = |p: Option<switchyard_protocol::approval::ApprovalPolicy>| {
        p.map_or("(profile's)".to_owned(), |p| p.to_string())
    };
    differ("approve", approve(from.approve), approve(to.approve));
    differ(
        "auth_failure",
        from.auth_failure.to_string(),
        to.auth_failure.to_string(),
    );
    differ(
        "tool_sync_failure",
        from.tool_sync_failure.to_string(),
        to.tool_sync_failure.to_string(),
    );
    differ(
        "announce",
        from.announce.to_string(),
        to.announce.to_string(),
    );
    lines
}
