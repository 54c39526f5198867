//! `switchyard apply FILE [--dry-run]` and `switchyard config export WS`: make a workspace
//! match a `switchyard.toml`, and write one out.
//!
//! Apply reads the file (refusing it as `config validate` would), reads the workspace
//! ([`state`]), computes the whole [`plan`] before sending anything, prints it, and — unless
//! the plan is blocked or `--dry-run` was given — carries it out in order. A plan that
//! cannot be carried out changes nothing. Applying the same file twice plans no changes.

mod auth;
mod export;
mod plan;
mod state;

use crate::cli::ApplyArgs;
use crate::client::{Body, Client};
use crate::commands::config::read;
use crate::error::CliError;
use crate::output::{Output, pretty, print_text};
use plan::{Action, Plan};
use serde::Serialize;
use std::collections::BTreeMap;
use switchyard_protocol::api::{AgentCreated, GrantRequest, SetDeclared, SetPrefixTools};

/// What `apply --json` prints: the plan, whether it was carried out, and each new agent's
/// token (shown this once).
#[derive(Serialize)]
struct Applied<'a> {
    plan: &'a Plan,
    applied: bool,
    tokens: BTreeMap<String, String>,
}

/// Runs `switchyard apply`.
pub async fn run(client: &Client, out: Output, args: ApplyArgs) -> Result<(), CliError> {
    let document = read(&args.file)?;
    let desired = crate::config::desired(&document);
    let workspace = match (&args.workspace, &desired.workspace) {
        (Some(flag), Some(file)) if flag != file => {
            return Err(CliError::Usage(format!(
                "--workspace {flag} but {} says workspace = \"{file}\"; give one, or the same",
                args.file.display()
            )));
        }
        (Some(ws), _) | (None, Some(ws)) => ws.clone(),
        (None, None) => {
            return Err(CliError::Usage(format!(
                "{} names no workspace: add `workspace = \"NAME\"` at its top, or pass \
                 --workspace WS",
                args.file.display()
            )));
        }
    };
    let actual = state::Actual::read(client, &workspace).await?;
    let plan = plan::plan(&desired, &actual);
    let mut tokens = BTreeMap::new();
    let carry_out = plan.blocked.is_empty() && !args.dry_run;
    if !out.is_json() {
        print_text(&describe(&plan));
    }
    if carry_out {
        for change in &plan.changes {
            for action in &change.actions {
                if let Some((agent, token)) = send(client, &plan.workspace, action).await? {
                    if !out.is_json() {
                        println!(
                            "token of agent {agent} (shown this once; it works on /mcp only): \
                             {token}"
                        );
                    }
                    tokens.insert(agent, token);
                }
            }
        }
        if !out.is_json() && !plan.changes.is_empty() {
            println!("applied: {}", plan.summary());
        }
    }
    if out.is_json() {
        let applied = Applied {
            plan: &plan,
            applied: carry_out,
            tokens,
        };
        let json = serde_json::to_string(&applied).expect("the plan serializes");
        print_text(&pretty(&json));
    }
    if plan.blocked.is_empty() {
        Ok(())
    } else {
        Err(CliError::PlanBlocked {
            problems: plan.blocked,
        })
    }
}

/// Runs `switchyard config export WS`.
pub async fn export(client: &Client, workspace: &str) -> Result<(), CliError> {
    let actual = state::Actual::read(client, workspace).await?;
    let (text, skipped) = export::export(&actual)?;
    for line in skipped {
        eprintln!("note: {line}");
    }
    print!("{text}");
    Ok(())
}

/// The plan as people read it.
fn describe(plan: &Plan) -> String {
    let mut lines = vec![format!("workspace {}:", plan.workspace)];
    for change in &plan.changes {
        for line in &change.lines {
            lines.push(format!("{} {}  {line}", change.kind.mark(), change.subject));
        }
    }
    for note in &plan.notes {
        lines.push(format!("! {note}"));
    }
    if plan.blocked.is_empty() {
        lines.push(plan.summary());
    } else {
        lines.push(format!("{}; blocked: nothing was changed", plan.summary()));
    }
    lines.join("\n")
}

/// Sends one action; a created agent's name and token.
async fn send(
    client: &Client,
    ws: &str,
    action: &Action,
) -> Result<Option<(String, String)>, CliError> {
    let workspace = |rest: &[&str]| {
        let mut path = vec!["workspaces", ws];
        path.extend_from_slice(rest);
        path.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let (method, path, body) = match action {
        Action::CreateConnector(create) => {
            (Verb::Post, vec!["connectors".to_owned()], Body::of(create))
        }
        Action::UpdateConnector { name, spec } => (
            Verb::Patch,
            vec!["connectors".to_owned(), name.clone()],
            Body::of(spec),
        ),
        Action::ApproveConnector { name } => (
            Verb::Post,
            vec!["connectors".to_owned(), name.clone(), "approve".to_owned()],
            Body::empty_object(),
        ),
        Action::CreateConnection(create) => {
            (Verb::Post, workspace(&["connections"]), Body::of(create))
        }
        Action::SetPrefixTools {
            connection,
            prefix_tools,
        } => (
            Verb::Put,
            workspace(&["connections", connection, "prefix-tools"]),
            Body::of(&SetPrefixTools {
                prefix_tools: *prefix_tools,
            }),
        ),
        Action::SetConnectionAuth {
            connection,
            settings,
        } => (
            Verb::Put,
            workspace(&["connections", connection, "auth"]),
            Body::of(settings),
        ),
        Action::DeclareConnection { connection } => (
            Verb::Put,
            workspace(&["connections", connection, "declared"]),
            Body::of(&SetDeclared { declared: true }),
        ),
        Action::RetireConnection { connection } => (
            Verb::Post,
            workspace(&["connections", connection, "retire"]),
            Body::empty_object(),
        ),
        Action::CreateAgent(create) => {
            let path = workspace(&["agents"]);
            let segments: Vec<&str> = path.iter().map(String::as_str).collect();
            let created: AgentCreated = client.post(&segments, Body::of(create)).await?.parse()?;
            return Ok(Some((created.agent.name, created.token)));
        }
        Action::EditAgent { agent, edit } => {
            (Verb::Patch, workspace(&["agents", agent]), Body::of(edit))
        }
        Action::RevokeAgent { agent } => (
            Verb::Post,
            workspace(&["agents", agent, "revoke"]),
            Body::empty_object(),
        ),
        Action::CreateProfile(create) => (Verb::Post, workspace(&["profiles"]), Body::of(create)),
        Action::GrantUse { profile, agent } => (
            Verb::Post,
            workspace(&["profiles", profile, "grants"]),
            Body::of(&use_grant(agent)),
        ),
        Action::RevokeUse { profile, agent } => (
            Verb::Post,
            workspace(&["profiles", profile, "grants", "revoke"]),
            Body::of(&use_grant(agent)),
        ),
        Action::SetAgentConnection {
            agent,
            connection,
            settings,
        } => (
            Verb::Put,
            workspace(&["agents", agent, "connections", connection]),
            Body::of(settings),
        ),
    };
    let segments: Vec<&str> = path.iter().map(String::as_str).collect();
    match method {
        Verb::Post => client.post(&segments, body).await?,
        Verb::Put => client.put(&segments, body).await?,
        Verb::Patch => client.patch(&segments, body).await?,
    };
    Ok(None)
}

/// The HTTP method of an action's request.
enum Verb {
    Post,
    Put,
    Patch,
}

/// Use for agent `agent`, nothing else.
fn use_grant(agent: &str) -> GrantRequest {
    GrantRequest {
        user: None,
        agent: Some(agent.to_owned()),
        use_: true,
        manage: false,
        share: false,
        approve: false,
    }
}
