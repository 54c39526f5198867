//! Tests of the tool list: tables of its rules (`rules.rs`), names (`naming.rs`), deferred
//! search and the menu (`delivery.rs`), and properties over any routes (`properties.rs`).

mod delivery;
mod naming;
mod properties;
mod rules;

use super::*;
use serde_json::json;
use switchyard_protocol::api::{ToolHints, ToolState};
use switchyard_protocol::ids::ConnectionId;
use uuid::Uuid;

/// A connection id that depends only on `seed`, so tables can name it.
fn id(seed: u128) -> ConnectionId {
    ConnectionId(Uuid::from_u128(seed))
}

/// A classified, granted tool without hints.
fn tool(name: &str) -> ToolInput {
    ToolInput {
        name: name.to_owned(),
        title: None,
        description: Some(format!("The {name} tool.")),
        hints: ToolHints::default(),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        state: ToolState::Classified,
        granted: true,
    }
}

/// A tool with a description.
fn described(name: &str, description: &str) -> ToolInput {
    ToolInput {
        description: Some(description.to_owned()),
        ..tool(name)
    }
}

/// An answered connection with default settings and prefixing on.
fn connection(seed: u128, namespace: &str, tools: Vec<ToolInput>) -> ConnectionInput {
    ConnectionInput {
        id: id(seed),
        namespace: namespace.to_owned(),
        name: format!("{namespace} server"),
        prefix_tools: true,
        availability: Availability::Answered,
        conflicting_routes: false,
        settings: RouteSettings::default(),
        tools,
    }
}

/// The catalog of these connections, nothing deferred by the agent.
fn catalog(connections: Vec<ConnectionInput>) -> Catalog {
    Catalog::build(CatalogInput {
        connections,
        defer_all: false,
    })
}

/// The listed tools' names.
fn listed(catalog: &Catalog) -> Vec<&str> {
    catalog.listed().map(|t| t.name.as_str()).collect()
}

/// The deferred tools' names.
fn deferred(catalog: &Catalog) -> Vec<&str> {
    catalog.deferred().map(|t| t.name.as_str()).collect()
}

/// The dropped tools as `(namespace, tool, reason code)`.
fn dropped(catalog: &Catalog) -> Vec<(&str, &str, &'static str)> {
    catalog
        .dropped()
        .iter()
        .map(|d| (d.namespace.as_str(), d.tool.as_str(), d.reason.as_str()))
        .collect()
}
