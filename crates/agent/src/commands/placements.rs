//! `switchyard device placements|accept|decline`: the owner of a device decides which
//! connections run on it. Devices and connections are named as people name them; the list of
//! the caller's placements maps the names to ids and gives the spec digest accepting names.

use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, Table, print_json, print_text};
use switchyard_protocol::api::{AcceptPlacement, ConnectorSpec, PlacementState, PlacementView};

/// What the owner decides.
#[derive(Clone, Copy, Debug)]
pub enum Decide {
    /// Accept the spec shown now.
    Accept,
    /// Decline.
    Decline,
}

/// `device placements WS`.
pub async fn list(client: &Client, out: Output, workspace: &str) -> Result<(), CliError> {
    let reply = client
        .get(&["workspaces", workspace, "devices", "placements"])
        .await?;
    if out.is_json() {
        print_json(&reply);
        return Ok(());
    }
    let placements: Vec<PlacementView> = reply.parse()?;
    let mut table = Table::new(["DEVICE", "CONNECTION", "CONNECTOR", "STATE", "RUNS"]);
    for p in placements {
        table.row([
            p.device_name,
            p.connection_name,
            p.connector_name,
            state_name(p.state).to_owned(),
            runs(&p.spec),
        ]);
    }
    print_text(&table.render_or(
        "no connections are placed on your devices (only the devices you approved are listed)",
    ));
    Ok(())
}

/// `device accept|decline WS DEVICE CONNECTION`.
pub async fn decide(
    client: &Client,
    out: Output,
    (workspace, device, connection): (&str, &str, &str),
    decision: Decide,
) -> Result<(), CliError> {
    let placements: Vec<PlacementView> = client
        .get(&["workspaces", workspace, "devices", "placements"])
        .await?
        .parse()?;
    let placement = find(&placements, device, connection)?;
    let device_id = placement.device_id.to_string();
    let connection_id = placement.connection_id.to_string();
    let (verb, body) = match decision {
        Decide::Accept => (
            "accept",
            Body::of(&AcceptPlacement {
                spec_digest: placement.spec_digest.clone(),
            }),
        ),
        Decide::Decline => ("decline", Body::empty_object()),
    };
    let segments = [
        "workspaces",
        workspace,
        "devices",
        &device_id,
        "placements",
        &connection_id,
        verb,
    ];
    let reply = client.post(&segments, body).await?;
    out.reply(&reply, |p: PlacementView| match p.state {
        PlacementState::Accepted => format!(
            "accepted connection {} on device {}: it runs {} there (spec {}) until its connector changes",
            p.connection_name,
            p.device_name,
            runs(&p.spec),
            p.spec_digest
        ),
        _ => format!(
            "declined connection {} on device {}: its calls are refused until you accept it",
            p.connection_name, p.device_name
        ),
    })
}

/// The caller's placement of `connection` on `device` (each a name or an id).
fn find<'a>(
    placements: &'a [PlacementView],
    device: &str,
    connection: &str,
) -> Result<&'a PlacementView, CliError> {
    let device = device.strip_prefix("device:").unwrap_or(device);
    let found: Vec<&PlacementView> = placements
        .iter()
        .filter(|p| p.device_name == device || p.device_id.to_string() == device)
        .filter(|p| p.connection_name == connection || p.connection_id.to_string() == connection)
        .collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => Err(CliError::Usage(format!(
            "no connection `{connection}` is placed on a device `{device}` of yours: only the \
             owner of a device (who approved its pairing) decides what runs on it; \
             `switchyard device placements WS` lists yours"
        ))),
        _ => Err(CliError::Usage(format!(
            "several of your devices are named `{device}`: name the device by its id \
             (`switchyard device list WS`)"
        ))),
    }
}

/// What a spec runs, for people: the command line or the URL.
fn runs(spec: &ConnectorSpec) -> String {
    match spec {
        ConnectorSpec::Stdio { command, args, .. } => {
            let mut line = command.clone();
            for arg in args {
                line.push(' ');
                line.push_str(arg);
            }
            line
        }
        ConnectorSpec::Http { url } => url.clone(),
    }
}

fn state_name(state: PlacementState) -> &'static str {
    match state {
        PlacementState::Pending => "pending",
        PlacementState::Accepted => "accepted",
        PlacementState::SpecChanged => "spec changed",
        PlacementState::Declined => "declined",
    }
}
