//! Connectors: installation-wide MCP server definitions and their approval.

use super::{Datastore, Key};
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use switchyard_protocol::api::ConnectorSpec;
use switchyard_protocol::{ConnectorId, UserId};
use uuid::Uuid;

/// A row of `connectors`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ConnectorRow {
    /// Id.
    pub id: ConnectorId,
    /// Unique name.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: String,
    /// stdio program.
    pub command: Option<String>,
    /// stdio arguments.
    pub args: Json<Vec<String>>,
    /// Declared environment variable names.
    pub env_names: Json<Vec<String>>,
    /// http endpoint.
    pub url: Option<String>,
    /// Revision; bumped when the target changes.
    pub revision: i64,
    /// The revision the owner approved, if any.
    pub approved_revision: Option<i64>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// When it was retired (`None`: in service).
    pub retired_at: Option<DateTime<Utc>>,
    /// Who retired it.
    pub retired_by: Option<UserId>,
}

impl ConnectorRow {
    /// The transport and target as a protocol value.
    pub fn spec(&self) -> ConnectorSpec {
        spec_of(
            &self.transport,
            self.command.as_deref(),
            &self.args.0,
            &self.env_names.0,
            self.url.as_deref(),
        )
    }

    /// Whether the connector may run: HTTP connectors always, stdio ones while their current
    /// revision is the approved one. `call_submit_read` (`db/submit.rs`) states the same
    /// rule in SQL: change both together.
    pub fn is_runnable(&self) -> bool {
        self.transport == "http" || self.approved_revision == Some(self.revision)
    }
}

/// A connector's spec from its columns `transport`, `command`, `args`, `env_names`, `url`.
pub(super) fn spec_of(
    transport: &str,
    command: Option<&str>,
    args: &[String],
    env: &[String],
    url: Option<&str>,
) -> ConnectorSpec {
    match (transport, command, url) {
        ("http", _, Some(url)) => ConnectorSpec::Http {
            url: url.to_owned(),
        },
        (_, command, _) => ConnectorSpec::Stdio {
            command: command.unwrap_or_default().to_owned(),
            args: args.to_vec(),
            env: env.to_vec(),
        },
    }
}

impl Datastore {
    /// Creates connectors, all or none.
    pub async fn connector_create_all(
        &self,
        connectors: &[(String, ConnectorSpec)],
    ) -> Result<Vec<ConnectorRow>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let mut rows = Vec::with_capacity(connectors.len());
        for (name, spec) in connectors {
            let (transport, command, args, env, url) = match spec {
                ConnectorSpec::Stdio { command, args, env } => (
                    "stdio",
                    Some(command.as_str()),
                    args.clone(),
                    env.clone(),
                    None,
                ),
                ConnectorSpec::Http { url } => {
                    ("http", None, Vec::new(), Vec::new(), Some(url.as_str()))
                }
            };
            let row = sqlx::query_as(
                "INSERT INTO connectors (id, name, transport, command, args, env_names, url)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *",
            )
            .bind(Uuid::now_v7())
            .bind(name)
            .bind(transport)
            .bind(command)
            .bind(Json(args))
            .bind(Json(env))
            .bind(url)
            .fetch_one(&mut *tx)
            .await?;
            rows.push(row);
        }
        tx.commit().await?;
        Ok(rows)
    }

    /// A connector by id or name.
    pub async fn connector_find(&self, key: &Key<'_>) -> Result<Option<ConnectorRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM connectors WHERE id = $1 OR name = $2")
            .bind(key.id())
            .bind(key.name())
            .fetch_optional(&self.pool)
            .await
    }

    /// A connector by id.
    pub async fn connector_get(&self, id: ConnectorId) -> Result<ConnectorRow, sqlx::Error> {
        sqlx::query_as("SELECT * FROM connectors WHERE id = $1")
            .bind(id)
            .fetch_one(&self.pool)
            .await
    }

    /// All connectors, by name.
    pub async fn connector_list(&self) -> Result<Vec<ConnectorRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM connectors ORDER BY name")
            .fetch_all(&self.pool)
            .await
    }

    /// Approves the connector's current revision.
    pub async fn connector_approve(
        &self,
        id: ConnectorId,
        approver: UserId,
    ) -> Result<ConnectorRow, sqlx::Error> {
        sqlx::query_as(
            "UPDATE connectors SET approved_revision = revision, approved_by = $2, approved_at = now()
             WHERE id = $1 RETURNING *",
        )
        .bind(id)
        .bind(approver)
        .fetch_one(&self.pool)
        .await
    }

    /// Replaces a connector's transport and target. The revision is bumped, so a stdio
    /// connector needs a new approval before it runs again.
    pub async fn connector_update(
        &self,
        id: ConnectorId,
        spec: &ConnectorSpec,
    ) -> Result<ConnectorRow, sqlx::Error> {
        let (transport, command, args, env, url) = match spec {
            ConnectorSpec::Stdio { command, args, env } => (
                "stdio",
                Some(command.as_str()),
                args.clone(),
                env.clone(),
                None,
            ),
            ConnectorSpec::Http { url } => {
                ("http", None, Vec::new(), Vec::new(), Some(url.as_str()))
            }
        };
        sqlx::query_as(
            "UPDATE connectors SET transport = $2, command = $3, args = $4, env_names = $5, url = $6, revision = revision + 1
             WHERE id = $1 RETURNING *",
        )
        .bind(id)
        .bind(transport)
        .bind(command)
        .bind(Json(args))
        .bind(Json(env))
        .bind(url)
        .fetch_one(&self.pool)
        .await
    }
}
