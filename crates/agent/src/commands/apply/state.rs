//! What the workspace holds now, read through the API: everything `apply` compares a file
//! with and `config export` writes out.

use crate::client::Client;
use crate::error::CliError;
use std::collections::BTreeMap;
use switchyard_protocol::api::{
    AgentDetail, AgentView, ConnectionView, ConnectorSpec, ConnectorView, CredentialProvider,
    CredentialReference, DeviceView, ProfileView, UserView, WorkspaceView,
};
use switchyard_protocol::credential_status::CredentialStatusList;

/// One workspace as the caller sees it.
#[derive(Debug)]
pub struct Actual {
    /// The workspace's name (connector names are made of it).
    pub workspace: String,
    /// Whether the caller is an installation owner: only owners see connectors' targets and
    /// may create or approve connectors.
    pub is_owner: bool,
    /// Every connector of the installation.
    pub connectors: Vec<ConnectorView>,
    /// The workspace's connections, retired ones included.
    pub connections: Vec<ConnectionView>,
    /// A central connection's bound environment variables, by connection name.
    pub env_bindings: BTreeMap<String, BTreeMap<String, CredentialReference>>,
    /// The workspace's paired devices that are not revoked.
    pub devices: Vec<DeviceView>,
    /// The workspace's agents, revoked ones included, with their grants and settings.
    pub agents: Vec<AgentDetail>,
    /// The workspace's profiles.
    pub profiles: Vec<ProfileView>,
}

impl Actual {
    /// Reads workspace `ws` (its id or name).
    pub async fn read(client: &Client, ws: &str) -> Result<Actual, CliError> {
        let me: UserView = client.get(&["me"]).await?.parse()?;
        let workspace: WorkspaceView = client.get(&["workspaces", ws]).await?.parse()?;
        let ws = workspace.name.as_str();
        let connectors: Vec<ConnectorView> = client.get(&["connectors"]).await?.parse()?;
        let connections: Vec<ConnectionView> = client
            .get(&["workspaces", ws, "connections"])
            .await?
            .parse()?;
        let mut env_bindings = BTreeMap::new();
        for connection in &connections {
            let stdio = connectors
                .iter()
                .find(|c| c.id == connection.connector_id)
                .is_some_and(|c| matches!(c.target.spec(), Some(ConnectorSpec::Stdio { .. })));
            if connection.retired.is_some() || connection.runner != "central" || !stdio {
                continue;
            }
            let list: CredentialStatusList = client
                .get(&[
                    "workspaces",
                    ws,
                    "connections",
                    &connection.name,
                    "credentials",
                ])
                .await?
                .parse()?;
            let bound = list
                .credentials
                .into_iter()
                .filter(|c| c.destination == "env")
                .filter_map(|c| Some((c.name, c.reference?)))
                .collect();
            env_bindings.insert(connection.name.clone(), bound);
        }
        let devices: Vec<DeviceView> = client.get(&["workspaces", ws, "devices"]).await?.parse()?;
        let listed: Vec<AgentView> = client.get(&["workspaces", ws, "agents"]).await?.parse()?;
        let mut agents = Vec::with_capacity(listed.len());
        for agent in listed {
            let id = agent.id.to_string();
            agents.push(
                client
                    .get(&["workspaces", ws, "agents", &id])
                    .await?
                    .parse()?,
            );
        }
        let profiles = client.get(&["workspaces", ws, "profiles"]).await?.parse()?;
        Ok(Actual {
            workspace: workspace.name,
            is_owner: me.is_owner,
            connectors,
            connections,
            env_bindings,
            devices: devices
                .into_iter()
                .filter(|d| d.revoked_at.is_none())
                .collect(),
            agents,
            profiles,
        })
    }

    /// A connection by name.
    pub fn connection(&self, name: &str) -> Option<&ConnectionView> {
        self.connections.iter().find(|c| c.name == name)
    }

    /// A connection's name by id.
    pub fn connection_name(&self, id: switchyard_protocol::ConnectionId) -> Option<&str> {
        self.connections
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.name.as_str())
    }

    /// A connector by id.
    pub fn connector(&self, id: switchyard_protocol::ConnectorId) -> Option<&ConnectorView> {
        self.connectors.iter().find(|c| c.id == id)
    }

    /// A connector by name.
    pub fn connector_named(&self, name: &str) -> Option<&ConnectorView> {
        self.connectors.iter().find(|c| c.name == name)
    }

    /// A profile by name.
    pub fn profile(&self, name: &str) -> Option<&ProfileView> {
        self.profiles.iter().find(|p| p.name == name)
    }

    /// An agent by name.
    pub fn agent(&self, name: &str) -> Option<&AgentDetail> {
        self.agents.iter().find(|a| a.agent.name == name)
    }

    /// The runner reference a file's placement names: `central`, or the device of that name.
    pub fn runner_of(&self, placement: &crate::config::Placement) -> Option<String> {
        match placement {
            crate::config::Placement::Central => Some("central".to_owned()),
            crate::config::Placement::Device(name) => self
                .devices
                .iter()
                .find(|d| &d.name == name)
                .map(|d| d.runner.clone()),
        }
    }

    /// The name of the device a runner reference names, if it is a paired device's.
    pub fn device_name(&self, runner: &str) -> Option<&str> {
        self.devices
            .iter()
            .find(|d| d.runner == runner)
            .map(|d| d.name.as_str())
    }

    /// The connections in service an agent reaches, by name, with the profiles (in service)
    /// that grant each.
    pub fn reach(&self, agent: &AgentDetail) -> BTreeMap<String, Vec<String>> {
        let mut reach: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for held in &agent.profiles {
            let Some(profile) = self.profiles.iter().find(|p| p.id == held.id) else {
                continue;
            };
            if profile.retired.is_some() {
                continue;
            }
            for id in &profile.connection_ids {
                let in_service = self
                    .connections
                    .iter()
                    .any(|c| c.id == *id && c.retired.is_none());
                if !in_service {
                    continue;
                }
                if let Some(name) = self.connection_name(*id) {
                    reach
                        .entry(name.to_owned())
                        .or_default()
                        .push(profile.name.clone());
                }
            }
        }
        reach
    }
}

/// The connector a file asks for, in the API's shape: environment variable names sorted.
pub fn connector_spec(transport: &crate::config::Transport) -> ConnectorSpec {
    match transport {
        crate::config::Transport::Http { url } => ConnectorSpec::Http { url: url.clone() },
        crate::config::Transport::Stdio { command, args, env } => ConnectorSpec::Stdio {
            command: command.clone(),
            args: args.clone(),
            env: env.keys().cloned().collect(),
        },
    }
}

/// Whether two specs run the same thing (the order of variable names does not matter).
pub fn same_spec(a: &ConnectorSpec, b: &ConnectorSpec) -> bool {
    let sorted = |spec: &ConnectorSpec| match spec {
        ConnectorSpec::Stdio { command, args, env } => {
            let mut env = env.clone();
            env.sort();
            ConnectorSpec::Stdio {
                command: command.clone(),
                args: args.clone(),
                env,
            }
        }
        http => http.clone(),
    };
    sorted(a) == sorted(b)
}

/// The file's reference to a value the server keeps sealed (`switchyard credential set`).
const STORED_REFERENCE: &str = crate::config::STORED_REFERENCE;

/// A file's reference (`env:NAME`, `keyring:ACCOUNT`, `file:KEY`, `stored`) as the API's.
pub fn reference_of(text: &str) -> Option<CredentialReference> {
    let mut reference = CredentialReference {
        provider: CredentialProvider::Environment,
        name: None,
        account: None,
        key: None,
        prefix: None,
    };
    if text == STORED_REFERENCE {
        reference.provider = CredentialProvider::Installation;
        return Some(reference);
    }
    let (scheme, name) = text.split_once(':')?;
    match scheme {
        "env" => reference.name = Some(name.to_owned()),
        "keyring" => {
            reference.provider = CredentialProvider::OsStore;
            reference.account = Some(name.to_owned());
        }
        "file" => {
            reference.provider = CredentialProvider::SecretsFile;
            reference.key = Some(name.to_owned());
        }
        _ => return None,
    }
    Some(reference)
}

/// The API's reference as a file writes it.
pub fn reference_text(reference: &CredentialReference) -> Option<String> {
    match reference.provider {
        CredentialProvider::Environment => reference.name.as_ref().map(|n| format!("env:{n}")),
        CredentialProvider::OsStore => reference.account.as_ref().map(|a| format!("keyring:{a}")),
        CredentialProvider::SecretsFile => reference.key.as_ref().map(|k| format!("file:{k}")),
        CredentialProvider::Installation => Some(STORED_REFERENCE.to_owned()),
    }
}
