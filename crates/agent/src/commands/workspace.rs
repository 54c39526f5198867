//! `switchyard workspace create|list|member add|capture-policy`.

use crate::cli::{MemberCommand, Switch, WorkspaceCommand};
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, Table, time};
use switchyard_protocol::api::{
    AddMember, CapturePolicyView, CreateWorkspace, MemberRole, MemberView, RemovedMember,
    SetCapturePolicy, WorkspaceView,
};
use switchyard_protocol::approval::ApprovalTimeout;

/// Runs a `workspace` subcommand.
pub async fn run(client: &Client, out: Output, cmd: WorkspaceCommand) -> Result<(), CliError> {
    match cmd {
        WorkspaceCommand::Create { name } => {
            let reply = client
                .post(&["workspaces"], Body::of(&CreateWorkspace { name }))
                .await?;
            out.reply(&reply, |ws: WorkspaceView| {
                format!("created workspace {} ({})", ws.name, ws.id)
            })
        }
        WorkspaceCommand::List => {
            let reply = client.get(&["workspaces"]).await?;
            out.reply(&reply, |list: Vec<WorkspaceView>| {
                let mut table = Table::new(["NAME", "ID", "CREATED"]);
                for ws in list {
                    table.row([ws.name, ws.id.to_string(), time(&ws.created_at)]);
                }
                table
                    .render_or("no workspaces (create one with `switchyard workspace create NAME`)")
            })
        }
        WorkspaceCommand::Member(MemberCommand::Add {
            workspace,
            user,
            admin,
        }) => {
            let role = if admin {
                MemberRole::Admin
            } else {
                MemberRole::Member
            };
            let reply = client
                .post(
                    &["workspaces", &workspace, "members"],
                    Body::of(&AddMember { user, role }),
                )
                .await?;
            out.reply(&reply, |m: MemberView| {
                format!(
                    "added {} to workspace {workspace} as {}",
                    m.user_name,
                    role_name(m.role)
                )
            })
        }
        WorkspaceCommand::Member(MemberCommand::List { workspace }) => {
            let reply = client.get(&["workspaces", &workspace, "members"]).await?;
            out.reply(&reply, |members: Vec<MemberView>| {
                let mut table = Table::new(["USER", "ROLE", "ID"]);
                for m in members {
                    table.row([
                        m.user_name,
                        role_name(m.role).to_owned(),
                        m.user_id.to_string(),
                    ]);
                }
                table.render_or("no members")
            })
        }
        WorkspaceCommand::Member(MemberCommand::Remove { workspace, user }) => {
            let reply = client
                .post(
                    &["workspaces", &workspace, "members", &user, "remove"],
                    Body::Empty,
                )
                .await?;
            out.reply(&reply, |removed: RemovedMember| {
                format!(
                    "removed {} from workspace {workspace}, with {} grant{}",
                    removed.member.user_name,
                    removed.grants_removed,
                    if removed.grants_removed == 1 { "" } else { "s" }
                )
            })
        }
        WorkspaceCommand::SetApprovalTimeout {
            workspace,
            seconds,
            none: _,
        } => {
            let path = ["workspaces", workspace.as_str(), "approval-timeout"];
            let reply = client
                .put(&path, Body::of(&ApprovalTimeout { seconds }))
                .await?;
            out.reply(&reply, |t: ApprovalTimeout| match t.seconds {
                Some(s) => format!(
                    "calls in {workspace} that wait for approval expire after {s} s unanswered"
                ),
                None => format!("calls in {workspace} wait for approval without expiry"),
            })
        }
        WorkspaceCommand::CapturePolicy {
            workspace,
            capture_managed_tool_results,
            evidence_retention_days,
        } => {
            let path = ["workspaces", workspace.as_str(), "capture-policy"];
            let body = SetCapturePolicy {
                capture_managed_tool_results: capture_managed_tool_results
                    .map(|switch| switch == Switch::On),
                evidence_retention_days,
            };
            let reply = if body == SetCapturePolicy::default() {
                client.get(&path).await?
            } else {
                client.put(&path, Body::of(&body)).await?
            };
            out.reply(&reply, |p: CapturePolicyView| capture_text(&p))
        }
    }
}

/// A capture policy for people.
fn capture_text(p: &CapturePolicyView) -> String {
    format!(
        "capture of managed tool results: {}; evidence kept {} days; pending evidence: {} ({} bytes); dropped when full: {}; given up: {}",
        if p.capture_managed_tool_results {
            "on"
        } else {
            "off"
        },
        p.evidence_retention_days,
        p.pending_records,
        p.pending_bytes,
        p.dropped,
        p.expired
    )
}

/// The role's wire name.
fn role_name(role: MemberRole) -> &'static str {
    match role {
        MemberRole::Member => "member",
        MemberRole::Admin => "admin",
    }
}
