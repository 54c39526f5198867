//! Connectors: installation-wide definitions, managed by installation owners. A stdio
//! connector is inert until an owner approves its exact command and arguments.
//!
//! Connectors name environment variables, never their values: an import keeps the names and
//! drops any value it finds (and says so in its report), so a secret is bound on the runner,
//! as a credential reference, and never stored here.

use super::audit::spec_summary;
use super::auth::already_exists;
use super::names::validate_name;
use super::{Actor, App, Audit, views};
use crate::db::Key;
use crate::error::{AppError, AppResult};
use serde_json::Value;
use switchyard_mcp_runner::SessionError;
use switchyard_mcp_runner::endpoints::EndpointError;
use switchyard_protocol::ErrorCode;
use switchyard_protocol::api::*;

impl App {
    /// Creates a connector (owners only).
    pub async fn connector_create(
        &self,
        actor: &Actor,
        req: CreateConnector,
    ) -> AppResult<ConnectorView> {
        self.require_owner(actor)?;
        validate_name("connector", &req.name)?;
        validate_spec(&req.name, &req.spec)?;
        self.screen_endpoint(&req.name, &req.spec).await?;
        self.connector_name_free(&req.name).await?;
        self.handshake_connector(&req.name, &req.spec).await?;
        let rows = self
            .db
            .connector_create_all(&[(req.name.clone(), req.spec)])
            .await
            .map_err(|e| already_exists(e, "connector", &req.name))?;
        self.audit_connectors_created(actor, &rows).await;
        Ok(views::connector(&rows[0]))
    }

    /// Imports connectors from the common `{"mcpServers": {...}}` JSON shape (owners only).
    /// All are created or none; environment *values* are dropped, only names are kept.
    pub async fn connector_import(
        &self,
        actor: &Actor,
        document: Value,
    ) -> AppResult<ImportReport> {
        self.require_owner(actor)?;
        let ParsedServers {
            connectors,
            warnings,
        } = parse_mcp_servers(&document)?;
        for (name, spec) in &connectors {
            validate_name("connector", name)?;
            validate_spec(name, spec)?;
            self.screen_endpoint(name, spec).await?;
        }
        for (name, _) in &connectors {
            self.connector_name_free(name).await?;
        }
        // All or nothing: every HTTP endpoint must answer the handshake before any is stored.
        futures::future::try_join_all(
            connectors
                .iter()
                .map(|(name, spec)| self.handshake_connector(name, spec)),
        )
        .await?;
        let rows = self
            .db
            .connector_create_all(&connectors)
            .await
            .map_err(|e| {
                if crate::db::is_unique_violation(&e) {
                    AppError::refused(
                        ErrorCode::AlreadyExists,
                        "a connector with one of these names already exists; nothing was imported",
                    )
                } else {
                    AppError::Database(e)
                }
            })?;
        self.audit_connectors_created(actor, &rows).await;
        Ok(ImportReport {
            created: rows.iter().map(views::connector).collect(),
            warnings,
        })
    }

    /// All connectors (they hold no secrets). Commands, arguments and URLs only to installation owners (who may manage
    /// connectors); others see names and transports.
    pub async fn connector_list(&self, actor: &Actor) -> AppResult<Vec<ConnectorView>> {
        Ok(self
            .db
            .connector_list()
            .await?
            .iter()
            .map(|row| views::connector_for(row, actor.user.is_owner))
            .collect())
    }

    /// One connector, as [`App::connector_list`] shows it.
    pub async fn connector_get(&self, actor: &Actor, key: &str) -> AppResult<ConnectorView> {
        Ok(views::connector_for(
            &self.find_connector(key).await?,
            actor.user.is_owner,
        ))
    }

    /// Approves the connector's current command and arguments (owners only).
    pub async fn connector_approve(&self, actor: &Actor, key: &str) -> AppResult<ConnectorView> {
        self.require_owner(actor)?;
        let connector = self.find_connector(key).await?;
        let row = self
            .db
            .connector_approve(connector.id, actor.user.id)
            .await?;
        if row.approved_revision != connector.approved_revision {
            self.audit(
                Audit::by(actor, "connector.approved")
                    .object("connector", Some(row.id.0), &row.name)
                    .before(spec_summary(&connector))
                    .after(spec_summary(&row)),
            )
            .await;
        }
        Ok(views::connector(&row))
    }

    /// One `connector.created` entry per connector (installation-wide).
    async fn audit_connectors_created(&self, actor: &Actor, rows: &[crate::db::ConnectorRow]) {
        for row in rows {
            self.audit(
                Audit::by(actor, "connector.created")
                    .object("connector", Some(row.id.0), &row.name)
                    .after(spec_summary(row)),
            )
            .await;
        }
    }

    /// Refuses an HTTP connector whose URL is, or resolves to, an address the endpoint guard
    /// refuses (`endpoint_blocked`). A name that does not resolve now is not refused here: the
    /// guard judges it again at every connect.
    pub(super) async fn screen_endpoint(&self, name: &str, spec: &ConnectorSpec) -> AppResult<()> {
        let ConnectorSpec::Http { url } = spec else {
            return Ok(());
        };
        match self.config.endpoints.screen(url).await {
            Err(blocked @ EndpointError::Blocked { .. }) => Err(endpoint_blocked(name, &blocked)),
            Ok(_) | Err(_) => Ok(()),
        }
    }

    pub(crate) async fn find_connector(&self, key: &str) -> AppResult<crate::db::ConnectorRow> {
        self.db
            .connector_find(&Key::parse(key))
            .await?
            .ok_or_else(|| {
                AppError::refused(
                    ErrorCode::ConnectorNotFound,
                    format!("no connector `{key}`"),
                )
            })
    }
}

/// Connector `name`'s endpoint is refused by the guard.
pub(super) fn endpoint_blocked(name: &str, why: &EndpointError) -> AppError {
    AppError::refused(
        ErrorCode::EndpointBlocked,
        format!("connector `{name}`: {why}"),
    )
}

fn invalid(name: &str, why: impl std::fmt::Display) -> AppError {
    AppError::refused(
        ErrorCode::InvalidConnector,
        format!("connector `{name}`: {why}"),
    )
}

pub(super) fn validate_spec(name: &str, spec: &ConnectorSpec) -> AppResult<()> {
    match spec {
        ConnectorSpec::Stdio { command, args, env } => {
            if command.trim().is_empty() {
                return Err(invalid(name, "`command` must not be empty"));
            }
            if command.contains('\0') || args.iter().any(|a| a.contains('\0')) {
                return Err(invalid(
                    name,
                    "command and arguments must not contain NUL bytes",
                ));
            }
            if let Some(bad) = env.iter().find(|e| !is_env_name(e)) {
                return Err(invalid(
                    name,
                    format!("`{bad}` is not an environment variable name"),
                ));
            }
        }
        ConnectorSpec::Http { url } => {
            let parsed = url::Url::parse(url).ok().filter(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host_str().is_some_and(|h| !h.is_empty())
            });
            let Some(parsed) = parsed else {
                return Err(invalid(
                    name,
                    format!("`{url}` is not an http:// or https:// URL"),
                ));
            };
            // A credential in the URL would be stored and shown with it: bind it as a header
            // instead (docs/CREDENTIALS.md).
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(invalid(
                    name,
                    "the URL must not carry a user name or password; bind the credential as a header instead",
                ));
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

/// What an `mcpServers` document holds: its connectors by name, and what was dropped from them.
struct ParsedServers {
    /// Each server's name and connector spec, in document order.
    connectors: Vec<(String, ConnectorSpec)>,
    /// What was left out (header and environment values), one line per server.
    warnings: Vec<String>,
}

/// Reads `{"mcpServers": {NAME: {"command", "args", "env"} | {"url"}}}`.
fn parse_mcp_servers(document: &Value) -> AppResult<ParsedServers> {
    let shape = || {
        AppError::refused(
            ErrorCode::InvalidRequest,
            r#"expected {"mcpServers": {"NAME": {"command": "...", "args": [...]} or {"url": "..."}}}"#,
        )
    };
    let servers = document
        .get("mcpServers")
        .and_then(Value::as_object)
        .ok_or_else(shape)?;
    if servers.is_empty() {
        return Err(AppError::refused(
            ErrorCode::InvalidRequest,
            "`mcpServers` is empty: nothing to import",
        ));
    }
    let mut connectors = Vec::new();
    let mut warnings = Vec::new();
    for (name, server) in servers {
        let server = server
            .as_object()
            .ok_or_else(|| invalid(name, "each server must be a JSON object"))?;
        let spec = if let Some(url) = server.get("url") {
            let url = url
                .as_str()
                .ok_or_else(|| invalid(name, "`url` must be a string"))?;
            if server.contains_key("headers") {
                warnings.push(format!(
                    "{name}: `headers` dropped; bind credentials by reference instead"
                ));
            }
            ConnectorSpec::Http {
                url: url.to_owned(),
            }
        } else if let Some(command) = server.get("command") {
            let command = command
                .as_str()
                .ok_or_else(|| invalid(name, "`command` must be a string"))?;
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
                Some(_) => {
                    return Err(invalid(
                        name,
                        "`env` must be an object or an array of names",
                    ));
                }
            };
            ConnectorSpec::Stdio {
                command: command.to_owned(),
                args,
                env,
            }
        } else {
            return Err(invalid(
                name,
                "needs either `command` (stdio) or `url` (http)",
            ));
        };
        connectors.push((name.clone(), spec));
    }
    Ok(ParsedServers {
        connectors,
        warnings,
    })
}

/// The format of a connector import document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportFormat {
    /// `{"mcpServers": {...}}`.
    Json,
    /// `[mcp_servers.NAME]` or `[mcpServers.NAME]` tables.
    Toml,
    /// An `mcpServers:` (or `mcp_servers:`) mapping.
    Yaml,
}

/// The most tools an inspection lists, and the longest description it keeps: an inspection is
/// a bounded look, not a catalog.
const INSPECT_MAX_TOOLS: usize = 50;
const INSPECT_MAX_DESCRIPTION: usize = 300;

/// What an HTTP connector's server said about itself when inspected.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectorInspection {
    /// The first tools it lists (at most 50), descriptions cut to 300 characters.
    pub tools: Vec<InspectedTool>,
    /// How many tools it lists in all.
    pub total_tools: usize,
}

/// One tool seen by an inspection.
#[derive(Clone, Debug, PartialEq)]
pub struct InspectedTool {
    /// Tool name.
    pub name: String,
    /// Description, possibly cut.
    pub description: Option<String>,
}

impl App {
    /// Imports connectors from a JSON, TOML or YAML document (owners only): the document is
    /// read into the JSON `mcpServers` shape, then imported as [`App::connector_import`] does.
    pub async fn connector_import_text(
        &self,
        actor: &Actor,
        format: ImportFormat,
        text: &str,
    ) -> AppResult<ImportReport> {
        self.require_owner(actor)?;
        self.connector_import(actor, parse_import_document(format, text)?)
            .await
    }

    /// Inspects an HTTP connector (owners only): initialize and list its tools within the
    /// discovery deadline, with no credentials, calling no tool and storing nothing. Stdio
    /// connectors are refused: looking at one means starting its command, which only an
    /// approved connection's discovery does.
    pub async fn connector_inspect(
        &self,
        actor: &Actor,
        key: &str,
    ) -> AppResult<ConnectorInspection> {
        self.require_owner(actor)?;
        let connector = self.find_connector(key).await?;
        let spec = connector.spec();
        if !matches!(spec, ConnectorSpec::Http { .. }) {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                format!(
                    "connector `{}` is a stdio command; discover it through a connection instead",
                    connector.name
                ),
            ));
        }
        let launch = switchyard_mcp_runner::launch::SessionLaunch {
            spec,
            env: Vec::new(),
            headers: Vec::new(),
        };
        let tools = switchyard_mcp_runner::session::discover(
            &launch,
            &self.config.endpoints,
            self.config.discovery_deadline,
        )
        .await
        .map_err(|e| match e {
            SessionError::Endpoint(blocked @ EndpointError::Blocked { .. }) => {
                endpoint_blocked(&connector.name, &blocked)
            }
            e => AppError::refused(
                ErrorCode::DiscoveryFailed,
                format!("inspecting `{}` failed: {e}", connector.name),
            ),
        })?;
        let tools = tools.tools;
        Ok(ConnectorInspection {
            total_tools: tools.len(),
            tools: tools
                .into_iter()
                .take(INSPECT_MAX_TOOLS)
                .map(|t| InspectedTool {
                    name: t.name,
                    description: t
                        .description
                        .map(|d| cut_chars(&d, INSPECT_MAX_DESCRIPTION)),
                })
                .collect(),
        })
    }
}

fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Reads an import document into the JSON `{"mcpServers": {...}}` shape. Syntax errors name
/// the line and column only: the text around them may hold an environment value.
fn parse_import_document(format: ImportFormat, text: &str) -> AppResult<Value> {
    let syntax = |kind: &str, line: usize, column: usize, what: &str| {
        AppError::refused(
            ErrorCode::InvalidRequest,
            format!("the {kind} document has an error at line {line}, column {column} ({what})"),
        )
    };
    let mut document: Value = match format {
        ImportFormat::Json => serde_json::from_str(text).map_err(|e| {
            let what = match e.classify() {
                serde_json::error::Category::Eof => "it ends too early",
                _ => "invalid JSON",
            };
            syntax("JSON", e.line(), e.column(), what)
        })?,
        ImportFormat::Toml => toml::from_str(text).map_err(|e| {
            let (line, column) = e
                .span()
                .map(|span| line_column(text, span.start))
                .unwrap_or((1, 1));
            syntax("TOML", line, column, "invalid TOML")
        })?,
        ImportFormat::Yaml => serde_norway::from_str(text).map_err(|e| {
            let (line, column) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((1, 1));
            syntax("YAML", line, column, "invalid YAML")
        })?,
    };
    // TOML and YAML configurations commonly spell the table `mcp_servers`.
    if let Some(map) = document.as_object_mut()
        && !map.contains_key("mcpServers")
        && let Some(servers) = map.remove("mcp_servers")
    {
        map.insert("mcpServers".to_owned(), servers);
    }
    Ok(document)
}

/// 1-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(offset.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn import_keeps_env_names_and_drops_values() {
        let ParsedServers {
            connectors,
            warnings,
        } = parse_mcp_servers(&json!({"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "server"], "env": {"TOKEN": "hunter22"}},
            "remote": {"url": "https://example.test/mcp"}
        }}))
        .unwrap();
        assert_eq!(connectors.len(), 2);
        assert_eq!(
            connectors[0].1,
            ConnectorSpec::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "server".into()],
                env: vec!["TOKEN".into()]
            }
        );
        assert_eq!(
            connectors[1].1,
            ConnectorSpec::Http {
                url: "https://example.test/mcp".into()
            }
        );
        assert_eq!(warnings.len(), 1);
        assert!(!warnings[0].contains("hunter22"));
    }

    #[test]
    fn import_rejects_bad_shapes() {
        for doc in [
            json!({}),
            json!({"mcpServers": {}}),
            json!({"mcpServers": {"x": {"args": []}}}),
            json!({"mcpServers": {"x": {"command": "a", "args": [1]}}}),
        ] {
            assert!(parse_mcp_servers(&doc).is_err(), "{doc}");
        }
    }
    #[test]
    fn toml_and_yaml_read_into_the_json_shape() {
        let toml = "[mcp_servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"server\"]\nenv = { TOKEN = \"hunter22\" }\n\n[mcp_servers.remote]\nurl = \"https://example.test/mcp\"\n";
        let yaml = "mcpServers:\n  files:\n    command: npx\n    args: [\"-y\", \"server\"]\n    env:\n      TOKEN: hunter22\n  remote:\n    url: https://example.test/mcp\n";
        for (format, text) in [(ImportFormat::Toml, toml), (ImportFormat::Yaml, yaml)] {
            let document = parse_import_document(format, text).unwrap();
            let ParsedServers {
                connectors,
                warnings,
            } = parse_mcp_servers(&document).unwrap();
            assert_eq!(connectors.len(), 2, "{format:?}");
            assert!(connectors.iter().any(|(name, spec)| name == "files"
                && *spec
                    == ConnectorSpec::Stdio {
                        command: "npx".into(),
                        args: vec!["-y".into(), "server".into()],
                        env: vec!["TOKEN".into()]
                    }));
            assert!(connectors.iter().any(|(name, spec)| name == "remote"
                && *spec
                    == ConnectorSpec::Http {
                        url: "https://example.test/mcp".into()
                    }));
            assert!(!warnings.concat().contains("hunter22"));
        }
    }

    #[test]
    fn syntax_errors_give_a_position_and_never_the_text() {
        for (format, text) in [
            (
                ImportFormat::Toml,
                "[mcp_servers.x]\nenv = { K = \"hunter22\" \n",
            ),
            (
                ImportFormat::Yaml,
                "mcpServers:\n  x: {env: {K: hunter22}\n",
            ),
            (
                ImportFormat::Json,
                "{\"mcpServers\": {\"x\": {\"env\": {\"K\": \"hunter22\"}}",
            ),
        ] {
            let message = parse_import_document(format, text).unwrap_err().to_string();
            assert!(message.contains("line "), "{message}");
            assert!(!message.contains("hunter22"), "{message}");
        }
    }
}
