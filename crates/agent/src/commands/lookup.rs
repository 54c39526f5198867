//! Id-to-name lookups, so human output can show names where the API answers with ids.

use crate::client::Client;
use crate::error::CliError;
use std::collections::HashMap;
use switchyard_protocol::api::{ConnectionView, EnvironmentView, ProfileView};
use switchyard_protocol::{ConnectionId, EnvironmentId, ProfileId};

/// Names of a workspace's connections, by id.
pub async fn connection_names(
    client: &Client,
    workspace: &str,
) -> Result<HashMap<ConnectionId, String>, CliError> {
    let list: Vec<ConnectionView> = client
        .get(&["workspaces", workspace, "connections"])
        .await?
        .parse()?;
    Ok(list.into_iter().map(|c| (c.id, c.name)).collect())
}

/// Names of a workspace's environments, by id.
pub async fn environment_names(
    client: &Client,
    workspace: &str,
) -> Result<HashMap<EnvironmentId, String>, CliError> {
    let list: Vec<EnvironmentView> = client
        .get(&["workspaces", workspace, "environments"])
        .await?
        .parse()?;
    Ok(list.into_iter().map(|e| (e.id, e.name)).collect())
}

/// Names of a workspace's profiles, by id.
pub async fn profile_names(
    client: &Client,
    workspace: &str,
) -> Result<HashMap<ProfileId, String>, CliError> {
    let list: Vec<ProfileView> = client
        .get(&["workspaces", workspace, "profiles"])
        .await?
        .parse()?;
    Ok(list.into_iter().map(|p| (p.id, p.name)).collect())
}

/// The name for `id`, or the id itself when it is not in `names`.
pub fn name_or_id<K: std::hash::Hash + Eq + std::fmt::Display>(
    names: &HashMap<K, String>,
    id: &K,
) -> String {
    names.get(id).cloned().unwrap_or_else(|| id.to_string())
}
