//! Connectors: installation-wide definitions, managed by installation owners. A stdio
//! connector is inert until an owner approves its exact command and arguments.

use super::auth::already_exists;
use super::names::validate_name;
use super::{views, Actor, App};
use crate::db::Key;
use crate::error::{AppError, AppResult};
use serde_json::Value;
use switchyard_protocol::api::*;
use switchyard_protocol::ErrorCode;

impl App {
    /// Creates a connector (owners only).
    pub async fn connector_create(&self, actor: &Actor, req: CreateConnector) -> AppResult<ConnectorView> {
        self.require_owner(actor)?;
        validate_name("connector", &req.name)?;
        validate_spec(&req.name, &req.spec)?;
        let rows = self
            .db
            .connector_create_all(&[(req.name.clone(), req.spec)])
            .await
            .map_err(|e| already_exists(e, "connector", &req.name))?;
        Ok(views::connector(&rows[0]))
    }

    /// Imports connectors from the common `{"mcpServers": {...}}` JSON shape (owners only).
    /// All are created or none; environment *values* are dropped, only names are kept.
    pub async fn connector_import(&self, actor: &Actor, document: Value) -> AppResult<ImportReport> {
        self.require_owner(actor)?;
        let (connectors, warnings) = parse_mcp_servers(&document)?;
        for (name, spec) in &connectors {
            validate_name("connector", name)?;
            validate_spec(name, spec)?;
        }
        let rows = self.db.connector_create_all(&connectors).await.map_err(|e| {
            if crate::db::is_unique_violation(&e) {
                AppError::refused(ErrorCode::AlreadyExists, "a connector with one of these names already exists; nothing was imported")
            } else {
                AppError::Database(e)
            }
        })?;
        Ok(ImportReport { created: rows.iter().map(views::connector).collect(), warnings })
    }

    /// All connectors (metadata only; they hold no secrets).
    pub async fn connector_list(&self, _actor: &Actor) -> AppResult<Vec<ConnectorView>> {
        Ok(self.db.connector_list().await?.iter().map(views::connector).collect())
    }

    /// One connector.
    pub async fn connector_get(&self, _actor: &Actor, key: &str) -> AppResult<ConnectorView> {
        Ok(views::connector(&self.find_connector(key).await?))
    }

    /// Approves the connector's current command and arguments (owners only).
    pub async fn connector_approve(&self, actor: &Actor, key: &str) -> AppResult<ConnectorView> {
        self.require_owner(actor)?;
        let connector = self.find_connector(key).await?;
        Ok(views::connector(&self.db.connector_approve(connector.id, actor.user.id).await?))
    }

    pub(crate) async fn find_connector(&self, key: &str) -> AppResult<crate::db::ConnectorRow> {
        self.db
            .connector_find(&Key::parse(key))
            .await?
            .ok_or_else(|| AppError::refused(ErrorCode::ConnectorNotFound, format!("no connector `{key}`")))
    }
}

fn invalid(name: &str, why: impl std::fmt::Display) -> AppError {
    AppError::refused(ErrorCode::InvalidConnector, format!("connector `{name}`: {why}"))
}

fn validate_spec(name: &str, spec: &ConnectorSpec) -> AppResult<()> {
    match spec {
        ConnectorSpec::Stdio { command, args, env } => {
            if command.trim().is_empty() {
                return Err(invalid(name, "`command` must not be empty"));
            }
            if command.contains('\0') || args.iter().any(|a| a.contains('\0')) {
                return Err(invalid(name, "command and arguments must not contain NUL bytes"));
            }
            if let Some(bad) = env.iter().find(|e| !is_env_name(e)) {
                return Err(invalid(name, format!("`{bad}` is not an environment variable name")));
            }
        }
        ConnectorSpec::Http { url } => {
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
                return Err(invalid(name, format!("`{url}` is not an http:// or https:// URL")));
            }
        }
    }
    Ok(())
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// Reads `{"mcpServers": {NAME: {"command", "args", "env"} | {"url"}}}`.
fn parse_mcp_servers(document: &Value) -> AppResult<(Vec<(String, ConnectorSpec)>, Vec<String>)> {
    let shape = || {
        AppError::refused(
            ErrorCode::InvalidRequest,
            r#"expected {"mcpServers": {"NAME": {"command": "...", "args": [...]} or {"url": "..."}}}"#,
        )
    };
    let servers = document.get("mcpServers").and_then(Value::as_object).ok_or_else(shape)?;
    if servers.is_empty() {
        return Err(AppError::refused(ErrorCode::InvalidRequest, "`mcpServers` is empty: nothing to import"));
    }
    let mut connectors = Vec::new();
    let mut warnings = Vec::new();
    for (name, server) in servers {
        let server = server.as_object().ok_or_else(|| invalid(name, "each server must be a JSON object"))?;
        let spec = if let Some(url) = server.get("url") {
            let url = url.as_str().ok_or_else(|| invalid(name, "`url` must be a string"))?;
            if server.contains_key("headers") {
                warnings.push(format!("{name}: `headers` dropped; bind credentials by reference instead"));
            }
            ConnectorSpec::Http { url: url.to_owned() }
        } else if let Some(command) = server.get("command") {
            let command = command.as_str().ok_or_else(|| invalid(name, "`command` must be a string"))?;
            let args = match server.get("args") {
                None => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|a| a.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| invalid(name, "`args` must be an array of strings"))?,
                Some(_) => return Err(invalid(name, "`args` must be an array of strings")),
            };
            let env = match server.get("env") {
                None => Vec::new(),
                Some(Value::Object(vars)) => {
                    if vars.values().any(|v| !v.is_null()) {
                        warnings.push(format!(
                            "{name}: environment values dropped (kept names {}); bind them to credential references",
                            vars.keys().cloned().collect::<Vec<_>>().join(", ")
                        ));
                    }
                    vars.keys().cloned().collect()
                }
                Some(Value::Array(names)) => names
                    .iter()
                    .map(|n| n.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| invalid(name, "`env` must be an object or an array of names"))?,
                Some(_) => return Err(invalid(name, "`env` must be an object or an array of names")),
            };
            ConnectorSpec::Stdio { command: command.to_owned(), args, env }
        } else {
            return Err(invalid(name, "needs either `command` (stdio) or `url` (http)"));
        };
        connectors.push((name.clone(), spec));
    }
    Ok((connectors, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn import_keeps_env_names_and_drops_values() {
        let (connectors, warnings) = parse_mcp_servers(&json!({"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "server"], "env": {"TOKEN": "hunter22"}},
            "remote": {"url": "https://example.test/mcp"}
        }}))
        .unwrap();
        assert_eq!(connectors.len(), 2);
        assert_eq!(
            connectors[0].1,
            ConnectorSpec::Stdio { command: "npx".into(), args: vec!["-y".into(), "server".into()], env: vec!["TOKEN".into()] }
        );
        assert_eq!(connectors[1].1, ConnectorSpec::Http { url: "https://example.test/mcp".into() });
        assert_eq!(warnings.len(), 1);
        assert!(!warnings[0].contains("hunter22"));
    }

    #[test]
    fn import_rejects_bad_shapes() {
        for doc in [json!({}), json!({"mcpServers": {}}), json!({"mcpServers": {"x": {"args": []}}}), json!({"mcpServers": {"x": {"command": "a", "args": [1]}}})] {
            assert!(parse_mcp_servers(&doc).is_err(), "{doc}");
        }
    }
}
