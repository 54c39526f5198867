//! `switchyard profile create|list|set-tools|grant|revoke|retire|restore`: execution profiles and their grants.

use super::lookup::{connection_names, environment_names, name_or_id};
use crate::cli::{ProfileCommand, ProfileGrant};
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, Table, print_json, print_text, retired_state};
use switchyard_protocol::api::{CreateProfile, GrantRequest, GrantView, ProfileView, SetTools};
use switchyard_protocol::approval::{ApprovalPolicyList, SetApprovalPolicy};

/// Runs a `profile` subcommand.
pub async fn run(client: &Client, out: Output, cmd: ProfileCommand) -> Result<(), CliError> {
    match cmd {
        ProfileCommand::Create {
            workspace,
            name,
            environment,
            connections,
            tools,
        } => {
            let body = CreateProfile {
                name,
                environment,
                connections,
                tools,
            };
            let reply = client
                .post(&["workspaces", &workspace, "profiles"], Body::of(&body))
                .await?;
            out.reply(&reply, |p: ProfileView| {
                format!(
                    "created profile {} ({}) with {} connection(s); grant Use with `switchyard profile grant {workspace} {} --user USER --use`",
                    p.name,
                    p.id,
                    p.connection_ids.len(),
                    p.name
                )
            })
        }
        ProfileCommand::List { workspace } => {
            let reply = client.get(&["workspaces", &workspace, "profiles"]).await?;
            if out.is_json() {
                print_json(&reply);
                return Ok(());
            }
            let profiles: Vec<ProfileView> = reply.parse()?;
            let environments = environment_names(client, &workspace).await?;
            let connections = connection_names(client, &workspace).await?;
            let mut table = Table::new([
                "NAME",
                "ENVIRONMENT",
                "CONNECTIONS",
                "GRANTS",
                "STATE",
                "ID",
            ]);
            for p in profiles {
                let names: Vec<String> = p
                    .connection_ids
                    .iter()
                    .map(|id| name_or_id(&connections, id))
                    .collect();
                let grants: Vec<String> = p.grants.iter().map(grant_summary).collect();
                table.row([
                    p.name,
                    name_or_id(&environments, &p.environment_id),
                    names.join(","),
                    grants.join(" "),
                    retired_state(p.retired.as_ref()),
                    p.id.to_string(),
                ]);
            }
            print_text(&table.render_or("no profiles"));
            Ok(())
        }
        ProfileCommand::SetApproval {
            workspace,
            profile,
            connection,
            tool,
            policy,
        } => {
            let path = [
                "workspaces",
                workspace.as_str(),
                "profiles",
                profile.as_str(),
                "approval-policy",
            ];
            let body = SetApprovalPolicy {
                connection,
                tool,
                policy,
            };
            let reply = client.put(&path, Body::of(&body)).await?;
            out.reply(&reply, |list: ApprovalPolicyList| {
                let mut table = Table::new(["CONNECTION", "TOOL", "POLICY"]);
                for p in list.policies {
                    table.row([
                        p.connection_name,
                        p.tool.unwrap_or_else(|| "(all)".to_owned()),
                        p.policy.to_string(),
                    ]);
                }
                format!(
                    "approval policies of profile {profile}:\n{}",
                    table.render_or("(no connections)")
                )
            })
        }
        ProfileCommand::SetTools {
            workspace,
            profile,
            connection,
            tools,
            all: _,
        } => {
            let path = [
                "workspaces",
                workspace.as_str(),
                "profiles",
                profile.as_str(),
                "connections",
                connection.as_str(),
                "tools",
            ];
            let reply = client.put(&path, Body::of(&SetTools { tools })).await?;
            if out.is_json() {
                print_json(&reply);
                return Ok(());
            }
            let p: ProfileView = reply.parse()?;
            let names = connection_names(client, &workspace).await?;
            let granted = p
                .connection_ids
                .iter()
                .map(|id| {
                    let tools = match p.tools.get(id) {
                        Some(tools) => tools.join(", "),
                        None => "every tool".to_owned(),
                    };
                    format!("  {}: {tools}", name_or_id(&names, id))
                })
                .collect::<Vec<_>>()
                .join("\n");
            print_text(&format!("tools granted by profile {}:\n{granted}", p.name));
            Ok(())
        }
        ProfileCommand::Retire { workspace, profile } => {
            retire(client, out, &workspace, &profile, "retire").await
        }
        ProfileCommand::Restore { workspace, profile } => {
            retire(client, out, &workspace, &profile, "restore").await
        }
        ProfileCommand::Grant(args) => grants(client, out, args, false).await,
        ProfileCommand::Revoke(args) => grants(client, out, args, true).await,
    }
}

/// `profile retire` or `profile restore` (`action`): answers the profile as it is now.
async fn retire(
    client: &Client,
    out: Output,
    workspace: &str,
    profile: &str,
    action: &str,
) -> Result<(), CliError> {
    let reply = client
        .post(
            &["workspaces", workspace, "profiles", profile, action],
            Body::Empty,
        )
        .await?;
    out.reply(&reply, |p: ProfileView| {
        format!("profile {}: {}", p.name, retired_state(p.retired.as_ref()))
    })
}

/// `profile grant`, or with `revoke` `profile revoke`: both answer the profile's grants now.
async fn grants(
    client: &Client,
    out: Output,
    args: ProfileGrant,
    revoke: bool,
) -> Result<(), CliError> {
    let ProfileGrant {
        workspace,
        profile,
        user,
        agent,
        use_,
        manage,
        share,
        approve,
    } = args;
    let body = GrantRequest {
        user,
        agent,
        use_,
        manage,
        share,
        approve,
    };
    let mut path = vec!["workspaces", &workspace, "profiles", &profile, "grants"];
    if revoke {
        path.push("revoke");
    }
    let reply = client.post(&path, Body::of(&body)).await?;
    out.reply(&reply, |p: ProfileView| {
        let mut table = Table::new(["USER", "USE", "MANAGE", "SHARE", "APPROVE"]);
        let yes_no = |b: bool| if b { "yes" } else { "no" }.to_owned();
        for g in p.grants {
            table.row([
                g.user_name,
                yes_no(g.use_),
                yes_no(g.manage),
                yes_no(g.share),
                yes_no(g.approve),
            ]);
        }
        format!(
            "grants on profile {}:\n{}",
            p.name,
            table.render_or("(none)")
        )
    })
}

/// `alice:use+share`: one principal's grants, compactly.
fn grant_summary(g: &GrantView) -> String {
    let held: Vec<&str> = [
        (g.use_, "use"),
        (g.manage, "manage"),
        (g.share, "share"),
        (g.approve, "approve"),
    ]
    .into_iter()
    .filter_map(|(held, name)| held.then_some(name))
    .collect();
    format!("{}:{}", g.user_name, held.join("+"))
}
