//! `switchyard approval list|show|approve|decline`: the calls that wait for a person, and the
//! answers (`docs/GOVERNANCE.md#approvals`).

use crate::cli::ApprovalCommand;
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, Table, fields, opt_time, time};
use switchyard_protocol::approval::{ApprovalList, ApprovalView, DecideApproval};

/// Runs an `approval` subcommand.
pub async fn run(client: &Client, out: Output, cmd: ApprovalCommand) -> Result<(), CliError> {
    match cmd {
        ApprovalCommand::List { workspace } => {
            let reply = client.get(&["workspaces", &workspace, "approvals"]).await?;
            out.reply(&reply, |list: ApprovalList| {
                let mut table = Table::new([
                    "ID",
                    "STATE",
                    "TOOL",
                    "CONNECTION",
                    "ASKED BY",
                    "ASKED",
                    "WHY",
                ]);
                for a in list.approvals {
                    table.row([
                        a.call_id.to_string(),
                        a.state.as_str().to_owned(),
                        a.tool_name,
                        a.connection_name,
                        a.asked_by_name,
                        time(&a.asked_at),
                        a.why.as_str().to_owned(),
                    ]);
                }
                table.render_or("no approval questions you may read")
            })
        }
        ApprovalCommand::Show { workspace, id } => {
            let reply = client
                .get(&["workspaces", &workspace, "approvals", &id])
                .await?;
            out.reply(&reply, |a: ApprovalView| details(&a))
        }
        ApprovalCommand::Approve { workspace, id } => {
            let reply = client
                .post(
                    &["workspaces", &workspace, "approvals", &id, "approve"],
                    Body::empty_object(),
                )
                .await?;
            out.reply(&reply, |a: ApprovalView| {
                format!(
                    "approved call {} ({} on {}): it is queued and runs once",
                    a.call_id, a.tool_name, a.connection_name
                )
            })
        }
        ApprovalCommand::Decline {
            workspace,
            id,
            reason,
        } => {
            let reply = client
                .post(
                    &["workspaces", &workspace, "approvals", &id, "decline"],
                    Body::of(&DecideApproval { reason }),
                )
                .await?;
            out.reply(&reply, |a: ApprovalView| {
                format!(
                    "declined call {} ({} on {}): it will never run",
                    a.call_id, a.tool_name, a.connection_name
                )
            })
        }
    }
}

/// One question for people: what runs where, with which arguments, who asked, why.
fn details(a: &ApprovalView) -> String {
    let arguments = match &a.arguments {
        Some(args) => serde_json::to_string_pretty(args).unwrap_or_else(|_| args.to_string()),
        None => "(expired)".to_owned(),
    };
    let asked_by = match a.asked_by_device {
        Some(device) => format!("{} (through device {device})", a.asked_by_name),
        None => a.asked_by_name.clone(),
    };
    let mut text = fields(&[
        ("call", a.call_id.to_string()),
        ("state", a.state.as_str().to_owned()),
        ("tool", a.tool_name.clone()),
        ("connection", a.connection_name.clone()),
        ("profile", a.profile_name.clone()),
        ("asked by", asked_by),
        ("asked", time(&a.asked_at)),
        ("why", a.why.explain().to_owned()),
        ("policy", a.policy.to_string()),
        ("expires", opt_time(a.expires_at.as_ref())),
        ("payload digest", a.payload_digest.clone()),
    ]);
    if let Some(by) = &a.decided_by_name {
        text.push_str(&fields(&[
            ("decided by", by.clone()),
            ("decided", opt_time(a.decided_at.as_ref())),
            ("reason", a.reason.clone().unwrap_or_else(|| "-".to_owned())),
        ]));
    }
    text.push_str("arguments:\n");
    text.push_str(&arguments);
    text.push('\n');
    text
}
