//! `switchyard device approve|list|revoke`: the user side of pairing, and managing devices;
//! `device placements|accept|decline` are an owner's decisions (`placements`).

use super::lookup::{name_or_id, profile_names};
use super::placements::{self, Decide};
use crate::cli::DeviceCommand;
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, Table, opt_time, print_json, print_text, time};
use switchyard_protocol::api::{ApproveDevice, DeviceView};

/// Runs a `device` subcommand.
pub async fn run(client: &Client, out: Output, cmd: DeviceCommand) -> Result<(), CliError> {
    match cmd {
        DeviceCommand::Approve {
            workspace,
            code,
            profile,
        } => {
            let reply = client
                .post(
                    &["workspaces", &workspace, "devices", "approve"],
                    Body::of(&ApproveDevice {
                        code,
                        profile: profile.clone(),
                    }),
                )
                .await?;
            out.reply(&reply, |d: DeviceView| {
                format!(
                    "approved device {} ({}) in workspace {workspace}: it runs calls under \
                     profile {profile}; place connections on it with `--runner {}`",
                    d.name, d.id, d.runner
                )
            })
        }
        DeviceCommand::List { workspace } => {
            let reply = client.get(&["workspaces", &workspace, "devices"]).await?;
            if out.is_json() {
                print_json(&reply);
                return Ok(());
            }
            let devices: Vec<DeviceView> = reply.parse()?;
            let profiles = profile_names(client, &workspace).await?;
            let mut table = Table::new(["NAME", "ID", "PROFILE", "PAIRED", "LAST SEEN", "STATE"]);
            for d in devices {
                let state = match d.revoked_at {
                    Some(at) => format!("revoked {}", time(&at)),
                    None => "active".to_owned(),
                };
                table.row([
                    d.name,
                    d.id.to_string(),
                    name_or_id(&profiles, &d.profile_id),
                    time(&d.created_at),
                    opt_time(d.last_seen_at.as_ref()),
                    state,
                ]);
            }
            print_text(
                &table.render_or("no devices (pair one with `switchyard pair --server URL`)"),
            );
            Ok(())
        }
        DeviceCommand::Placements { workspace } => placements::list(client, out, &workspace).await,
        DeviceCommand::Accept {
            workspace,
            device,
            connection,
        } => {
            let named = (workspace.as_str(), device.as_str(), connection.as_str());
            placements::decide(client, out, named, Decide::Accept).await
        }
        DeviceCommand::Decline {
            workspace,
            device,
            connection,
        } => {
            let named = (workspace.as_str(), device.as_str(), connection.as_str());
            placements::decide(client, out, named, Decide::Decline).await
        }
        DeviceCommand::Revoke { workspace, device } => {
            let reply = client
                .post(
                    &["workspaces", &workspace, "devices", &device, "revoke"],
                    Body::Empty,
                )
                .await?;
            out.reply(&reply, |d: DeviceView| {
                format!(
                    "revoked device {} ({}); it is refused from its next request",
                    d.name, d.id
                )
            })
        }
    }
}
