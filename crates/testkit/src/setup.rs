//! A workspace set up through the API, one resource at a time, as its owner would: the
//! workspace, an approved connector, connections (central or on a device), tool discovery and
//! classification, and profiles on which a user holds Use. Each function is one or two requests and returns what
//! the server answered.

use crate::api::{Api, from_json};
use crate::error::{Error, Result};
use serde_json::{Value, json};
use switchyard_protocol::DeviceId;
use switchyard_protocol::api::{
    AcceptPlacement, ConnectorSpec, CreateConnection, CreateConnector, CreateProfile,
    CreateWorkspace, GrantRequest, PlacementView, Risk, ToolClassification, ToolView,
};

/// Creates workspace `name`.
pub async fn workspace(api: &Api, name: &str) -> Result<Value> {
    api.post(
        "/workspaces",
        &CreateWorkspace {
            name: name.to_owned(),
        },
    )
    .await
}

/// Registers connector `name` with `spec` and approves it; its id.
pub async fn approved_connector(api: &Api, name: &str, spec: ConnectorSpec) -> Result<String> {
    let connector = api
        .post(
            "/connectors",
            &CreateConnector {
                name: name.to_owned(),
                spec,
            },
        )
        .await?;
    let id = connector["id"]
        .as_str()
        .ok_or_else(|| Error::Setup(format!("no connector id: {connector}")))?
        .to_owned();
    api.post(&format!("/connectors/{id}/approve"), &json!({}))
        .await?;
    Ok(id)
}

/// Replaces connector `name`'s transport and target with `spec` and approves the new command,
/// as an installation owner repointing it would.
pub async fn edit_connector(api: &Api, name: &str, spec: ConnectorSpec) -> Result<()> {
    api.patch(&format!("/connectors/{name}"), &spec).await?;
    api.post(&format!("/connectors/{name}/approve"), &json!({}))
        .await?;
    Ok(())
}

/// A stdio connector spec running `command args` with no declared environment.
pub fn stdio(command: &str, args: &[String]) -> ConnectorSpec {
    ConnectorSpec::Stdio {
        command: command.to_owned(),
        args: args.to_vec(),
        env: Vec::new(),
    }
}

/// Creates connection `name` in `workspace` on `connector`, placed on `device` (`None`: the
/// central runner). A device's placement is pending until its owner accepts it
/// ([`accept_placement`]).
pub async fn connection(
    api: &Api,
    workspace: &str,
    name: &str,
    connector: &str,
    device: Option<DeviceId>,
) -> Result<Value> {
    api.post(
        &format!("/workspaces/{workspace}/connections"),
        &CreateConnection {
            name: name.to_owned(),
            connector: connector.to_owned(),
            runner: device.map(|device| format!("device:{device}")),
            namespace: None,
            credentials: None,
            declared: false,
        },
    )
    .await
}

/// Accepts connection `connection` (its name) placed on `device`, as the device's owner: `api`
/// must be the user who approved its pairing. Accepts the spec the owner's list of placements
/// shows now; the accepted placement.
pub async fn accept_placement(
    api: &Api,
    workspace: &str,
    device: DeviceId,
    connection: &str,
) -> Result<PlacementView> {
    let list: Vec<PlacementView> = from_json(
        api.get(&format!("/workspaces/{workspace}/devices/placements"))
            .await?,
        "placements",
    )?;
    let placement = list
        .into_iter()
        .find(|p| p.device_id == device && p.connection_name == connection)
        .ok_or_else(|| {
            Error::Setup(format!(
                "no placement of connection {connection} on device {device} for this user"
            ))
        })?;
    let accepted = api
        .post(
            &format!(
                "/workspaces/{workspace}/devices/{device}/placements/{}/accept",
                placement.connection_id
            ),
            &AcceptPlacement {
                spec_digest: placement.spec_digest,
            },
        )
        .await?;
    from_json(accepted, "accepted placement")
}

/// Discovers the tools of connection `name` in `workspace` (central connections only).
pub async fn discover(api: &Api, workspace: &str, name: &str) -> Result<Value> {
    api.post(
        &format!("/workspaces/{workspace}/connections/{name}/discover"),
        &json!({}),
    )
    .await
}

/// Classifies tool `tool` of connection `connection` in `workspace` (the API's answer: the
/// tool's view). `api` must be a workspace admin or the installation owner.
pub async fn classify(
    api: &Api,
    workspace: &str,
    connection: &str,
    tool: &str,
    classification: ToolClassification,
) -> Result<ToolView> {
    let answer = api
        .put(
            &format!(
                "/workspaces/{workspace}/connections/{connection}/tools/{tool}/classification"
            ),
            &classification,
        )
        .await?;
    from_json(answer, "classified tool")
}

/// What tests and benchmarks classify a tool as, so that the default approval policy runs
/// it without asking: read-only and low where the server says it is read-only, else
/// side-effecting and low.
pub fn low_risk(tool: &ToolView) -> ToolClassification {
    ToolClassification {
        side_effect: tool.hints.read_only != Some(true),
        risk: Risk::Low,
    }
}

/// Classifies every tool in the catalog of connection `connection` ([`low_risk`]), as an
/// admin setting up a test workspace would after discovery; the classified catalog.
pub async fn classify_all(api: &Api, workspace: &str, connection: &str) -> Result<Vec<ToolView>> {
    let tools: Vec<ToolView> = from_json(
        api.get(&format!(
            "/workspaces/{workspace}/connections/{connection}/tools"
        ))
        .await?,
        "tools",
    )?;
    let mut classified = Vec::with_capacity(tools.len());
    for tool in &tools {
        classified.push(classify(api, workspace, connection, &tool.name, low_risk(tool)).await?);
    }
    Ok(classified)
}

/// [`discover`], then [`classify_all`]: a central connection whose tools can be called.
pub async fn discover_classified(api: &Api, workspace: &str, name: &str) -> Result<Vec<ToolView>> {
    discover(api, workspace, name).await?;
    classify_all(api, workspace, name).await
}

/// Creates profile `name` in `workspace` with `connections`, and grants `user` Use on it.
pub async fn profile(
    api: &Api,
    workspace: &str,
    name: &str,
    connections: &[&str],
    user: &str,
) -> Result<()> {
    api.post(
        &format!("/workspaces/{workspace}/profiles"),
        &CreateProfile {
            name: name.to_owned(),
            environment: None,
            connections: connections.iter().map(|c| (*c).to_owned()).collect(),
            tools: None,
        },
    )
    .await?;
    api.post(
        &format!("/workspaces/{workspace}/profiles/{name}/grants"),
        &GrantRequest {
            user: Some(user.to_owned()),
            agent: None,
            use_: true,
            manage: false,
            share: false,
            approve: false,
        },
    )
    .await?;
    Ok(())
}
