//! Connections (a connector placed in a workspace) and their cached tool catalogs.

use super::{CallRow, Datastore, Key, StoredCompletion};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use switchyard_mcp_runner::session::Discovery;
use switchyard_protocol::api::{
    AuthKind, AuthState, CredentialHolder, Risk, SpecDigest, ToolClassification, UnavailableReason,
};
use switchyard_protocol::{ConnectionId, ConnectorId, RunnerRef, UserId, WorkspaceId};

/// A row of `connections` with its connector's name.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ConnectionRow {
    /// Id.
    pub id: ConnectionId,
    /// Workspace.
    pub workspace_id: WorkspaceId,
    /// Name, unique in the workspace.
    pub name: String,
    /// Namespace slug, unique in the workspace.
    pub namespace: String,
    /// Connector.
    pub connector_id: ConnectorId,
    /// Connector name.
    pub connector_name: String,
    /// `central` or `device:<uuid>`.
    pub runner_ref: RunnerRef,
    /// Revision.
    pub revision: i64,
    /// Last discovery time.
    pub last_discovery_at: Option<DateTime<Utc>>,
    /// Last discovery failure.
    pub last_discovery_error: Option<String>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// When it was retired (`None`: in service).
    pub retired_at: Option<DateTime<Utc>>,
    /// Who retired it.
    pub retired_by: Option<UserId>,
    /// Whether its tools reach agents as `namespace__tool` (else by their own names).
    pub prefix_tools: bool,
    /// Whether a declarative file created or adopted it (`switchyard apply`).
    pub declared: bool,
    /// Its auth settings and state (`connection_auth`), once it has any.
    #[sqlx(flatten)]
    pub auth: ConnectionAuthColumns,
}

/// A connection's `connection_auth` row as [`ConnectionRow`] reads it (left-joined: every
/// column `None` when it has none).
#[derive(Clone, Debug, Default, sqlx::FromRow)]
pub struct ConnectionAuthColumns {
    /// What it sends (`None` also when not declared).
    pub auth_kind: Option<AuthKind>,
    /// Scopes to ask for.
    pub auth_scopes: Option<Vec<String>>,
    /// Server-side variable holding the OAuth client id.
    pub auth_client_id_env: Option<String>,
    /// Server-side variable holding the OAuth client secret.
    pub auth_client_secret_env: Option<String>,
    /// Whose credential it sends.
    pub auth_credential: Option<CredentialHolder>,
    /// Whether its credential is usable; `None`: no row.
    pub auth_state: Option<AuthState>,
    /// When a person last completed its authorization.
    pub auth_authorized_at: Option<DateTime<Utc>>,
    /// The header its static token is sent in (`None`: `Authorization`).
    pub auth_header: Option<String>,
}

/// A row of `tools`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ToolRow {
    /// Tool name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Input JSON schema.
    pub input_schema: Json<Value>,
    /// Server annotations (hints).
    pub annotations: Option<Json<Value>>,
    /// Listed by the latest discovery.
    pub available: bool,
    /// Last seen.
    pub discovered_at: DateTime<Utc>,
    /// Retired with its connection.
    pub retired: bool,
    /// Classified as changing external state (`None`: unclassified; whole with `risk`).
    pub side_effect: Option<bool>,
    /// Classified risk (`None`: unclassified).
    pub risk: Option<Risk>,
    /// A rediscovery found the annotations of the classified tool changed.
    pub needs_review: bool,
}

impl ToolRow {
    /// Its classification, once classified.
    pub fn classification(&self) -> Option<ToolClassification> {
        Some(ToolClassification {
            side_effect: self.side_effect?,
            risk: self.risk?,
        })
    }
}

/// The columns of a [`ToolRow`], from `tools`.
macro_rules! tool_columns {
    () => {
        "name, description, input_schema, annotations, available, discovered_at,
         retired_at IS NOT NULL AS retired, side_effect, risk, needs_review"
    };
}

/// A cached tool with its connection ([`Datastore::tool_lists`]).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ConnectionToolRow {
    /// The tool's connection.
    pub connection_id: ConnectionId,
    /// The tool.
    #[sqlx(flatten)]
    pub tool: ToolRow,
}

/// A tool just classified ([`Datastore::tool_classify`]), with what it was before.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Reclassified {
    /// The tool now.
    #[sqlx(flatten)]
    pub tool: ToolRow,
    /// Its side effect before (`None`: it was unclassified).
    pub was_side_effect: Option<bool>,
    /// Its risk before.
    pub was_risk: Option<Risk>,
}

impl Reclassified {
    /// The classification it replaced, if it had one.
    pub fn was(&self) -> Option<ToolClassification> {
        Some(ToolClassification {
            side_effect: self.was_side_effect?,
            risk: self.was_risk?,
        })
    }
}

/// What a discovery changed in a catalog ([`Datastore::tool_catalog_reconcile`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CatalogChanges {
    /// Tools listed for the first time (unclassified).
    pub added: u32,
    /// Tools now flagged for review: classified, with annotations changed (this discovery or
    /// an earlier one).
    pub needing_review: u32,
    /// Tools that were available and are no longer listed.
    pub vanished: u32,
}

/// `SELECT` of a connection with its connector's name, followed by the given clauses.
macro_rules! select_connection {
    ($clauses:literal) => {
        concat!(
            "SELECT c.id, c.workspace_id, c.name, c.namespace, c.connector_id, k.name AS connector_name,
                 c.runner_ref, c.revision, c.last_discovery_at, c.last_discovery_error, c.created_at,
                 c.retired_at, c.retired_by, c.prefix_tools, c.declared,
                 a.kind AS auth_kind, a.scopes AS auth_scopes,
                 a.client_id_env AS auth_client_id_env,
                 a.client_secret_env AS auth_client_secret_env,
                 a.credential AS auth_credential, a.state AS auth_state,
                 a.authorized_at AS auth_authorized_at, a.header AS auth_header
             FROM connections c JOIN connectors k ON k.id = c.connector_id
                 LEFT JOIN connection_auth a ON a.connection_id = c.id ",
            $clauses
        )
    };
}

impl Datastore {
    /// Sets whether a connection's tools reach agents prefixed with its namespace.
    pub async fn connection_set_prefix_tools(
        &self,
        connection: ConnectionId,
        prefix_tools: bool,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE connections SET prefix_tools = $2 WHERE id = $1")
            .bind(connection)
            .bind(prefix_tools)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Sets whether a connection is declared by a file.
    pub async fn connection_set_declared(
        &self,
        connection: ConnectionId,
        declared: bool,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE connections SET declared = $2 WHERE id = $1")
            .bind(connection)
            .bind(declared)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Creates connection `id` named `name` with namespace slug `namespace`, declared by a
    /// file or not.
    pub async fn connection_create(
        &self,
        id: ConnectionId,
        workspace: WorkspaceId,
        (name, namespace, declared): (&str, &str, bool),
        connector: ConnectorId,
        runner_ref: RunnerRef,
    ) -> Result<ConnectionRow, sqlx::Error> {
        sqlx::query(
            "INSERT INTO connections (id, workspace_id, name, namespace, connector_id, runner_ref, declared)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(id)
        .bind(workspace)
        .bind(name)
        .bind(namespace)
        .bind(connector)
        .bind(runner_ref)
        .bind(declared)
        .execute(&self.pool)
        .await?;
        self.connection_get(id).await
    }

    /// The namespaces of a workspace's connections starting with `prefix`.
    pub async fn connection_namespaces(
        &self,
        workspace: WorkspaceId,
        prefix: &str,
    ) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT namespace FROM connections
             WHERE workspace_id = $1 AND left(namespace, length($2)) = $2",
        )
        .bind(workspace)
        .bind(prefix)
        .fetch_all(&self.pool)
        .await
    }

    /// A connection by id.
    pub async fn connection_get(&self, id: ConnectionId) -> Result<ConnectionRow, sqlx::Error> {
        sqlx::query_as(select_connection!("WHERE c.id = $1"))
            .bind(id)
            .fetch_one(&self.pool)
            .await
    }

    /// A connection of a workspace by id or name.
    pub async fn connection_find(
        &self,
        workspace: WorkspaceId,
        key: &Key<'_>,
    ) -> Result<Option<ConnectionRow>, sqlx::Error> {
        sqlx::query_as(select_connection!(
            "WHERE c.workspace_id = $1 AND (c.id = $2 OR c.name = $3)"
        ))
        .bind(workspace)
        .bind(key.id())
        .bind(key.name())
        .fetch_optional(&self.pool)
        .await
    }

    /// The connections of a workspace, by name.
    pub async fn connection_list(
        &self,
        workspace: WorkspaceId,
    ) -> Result<Vec<ConnectionRow>, sqlx::Error> {
        sqlx::query_as(select_connection!(
            "WHERE c.workspace_id = $1 ORDER BY c.name"
        ))
        .bind(workspace)
        .fetch_all(&self.pool)
        .await
    }

    /// Records a successful discovery and reconciles the cached catalog with what it listed,
    /// in one transaction: a new tool arrives unclassified; a tool listed before gets its
    /// metadata refreshed and keeps its classification, flagged `needs_review` when it is
    /// classified and its annotations changed (the classification itself never changes
    /// here); a tool no longer listed becomes unavailable (never deleted, classification
    /// kept). The same for every placement: whoever discovered the tools.
    pub async fn tool_catalog_reconcile(
        &self,
        connection: ConnectionId,
        discovery: &Discovery,
    ) -> Result<CatalogChanges, sqlx::Error> {
        let tools = &discovery.tools;
        let mut tx = self.pool.begin().await?;
        let mut changes = CatalogChanges::default();
        for tool in tools {
            let (added, flagged): (bool, bool) = sqlx::query_as(
                "INSERT INTO tools (connection_id, name, description, input_schema, annotations, available, discovered_at)
                 VALUES ($1, $2, $3, $4, $5, true, now())
                 ON CONFLICT (connection_id, name) DO UPDATE SET description = EXCLUDED.description,
                     input_schema = EXCLUDED.input_schema, annotations = EXCLUDED.annotations,
                     -- The right side reads the row as it was: flag a classified tool whose
                     -- annotations changed (jsonb compares by value, not by text).
                     needs_review = tools.needs_review OR (tools.side_effect IS NOT NULL
                         AND tools.annotations IS DISTINCT FROM EXCLUDED.annotations),
                     available = true, discovered_at = now()
                 RETURNING xmax = 0 AS added, needs_review",
            )
            .bind(connection)
            .bind(&tool.name)
            .bind(&tool.description)
            .bind(Json(&tool.input_schema))
            .bind(tool.annotations.as_ref().map(Json))
            .fetch_one(&mut *tx)
            .await?;
            changes.added += u32::from(added);
            changes.needing_review += u32::from(flagged);
        }
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let vanished = sqlx::query(
            "UPDATE tools SET available = false
             WHERE connection_id = $1 AND available AND NOT (name = ANY($2))",
        )
        .bind(connection)
        .bind(&names)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        changes.vanished = u32::try_from(vanished).unwrap_or(u32::MAX);
        sqlx::query(
            "UPDATE connections SET last_discovery_at = now(), last_discovery_error = NULL,
                 unavailable = NULL, about = $2
             WHERE id = $1",
        )
        .bind(connection)
        .bind(&discovery.about)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(changes)
    }

    /// Classifies a tool of a connection for `by`, clearing its review flag. Only a tool in
    /// the catalog can be: returns the row with the classification it replaced, or `None` when
    /// the connection has no such tool.
    pub async fn tool_classify(
        &self,
        connection: ConnectionId,
        name: &str,
        classification: ToolClassification,
        by: UserId,
    ) -> Result<Option<Reclassified>, sqlx::Error> {
        sqlx::query_as(
            "UPDATE tools t SET side_effect = $3, risk = $4, classified_by = $5,
                 classified_at = now(), needs_review = false
             FROM tools was
             WHERE t.connection_id = $1 AND t.name = $2
               AND was.connection_id = t.connection_id AND was.name = t.name
             RETURNING t.name, t.description, t.input_schema, t.annotations, t.available,
                 t.discovered_at, t.retired_at IS NOT NULL AS retired, t.side_effect, t.risk,
                 t.needs_review, was.side_effect AS was_side_effect, was.risk AS was_risk",
        )
        .bind(connection)
        .bind(name)
        .bind(classification.side_effect)
        .bind(classification.risk)
        .bind(by)
        .fetch_optional(&self.pool)
        .await
    }

    /// Records a failed discovery: why the connection is unavailable (`reason`, from the
    /// runner's typed error) and the error's words (`error`, redacted, for people and the
    /// log); the cached catalog is left as it was.
    pub async fn connection_discovery_failed(
        &self,
        connection: ConnectionId,
        reason: UnavailableReason,
        error: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE connections SET last_discovery_at = now(), last_discovery_error = $3,
                 unavailable = $2
             WHERE id = $1",
        )
        .bind(connection)
        .bind(reason)
        .bind(error)
        .execute(&self.pool)
        .await
        .map(drop)
    }

    /// The cached catalog of a connection, by tool name.
    pub async fn tool_list(&self, connection: ConnectionId) -> Result<Vec<ToolRow>, sqlx::Error> {
        sqlx::query_as(concat!(
            "SELECT ",
            tool_columns!(),
            " FROM tools WHERE connection_id = $1 ORDER BY name"
        ))
        .bind(connection)
        .fetch_all(&self.pool)
        .await
    }

    /// The cached catalogs of `connections` in one read, by connection and tool name.
    pub async fn tool_lists(
        &self,
        connections: &[ConnectionId],
    ) -> Result<Vec<ConnectionToolRow>, sqlx::Error> {
        sqlx::query_as(concat!(
            "SELECT connection_id, ",
            tool_columns!(),
            " FROM tools WHERE connection_id = ANY($1) ORDER BY connection_id, name"
        ))
        .bind(connections)
        .fetch_all(&self.pool)
        .await
    }

    /// One cached tool.
    pub async fn tool_find(
        &self,
        connection: ConnectionId,
        name: &str,
    ) -> Result<Option<ToolRow>, sqlx::Error> {
        sqlx::query_as(concat!(
            "SELECT ",
            tool_columns!(),
            " FROM tools WHERE connection_id = $1 AND name = $2"
        ))
        .bind(connection)
        .bind(name)
        .fetch_optional(&self.pool)
        .await
    }
}

impl Datastore {
    /// The unfinished discovery of a connection placed on a device (queued, leased or
    /// running), if there is one (`calls_open_discovery` keeps it to one).
    pub async fn connection_open_discovery(
        &self,
        connection: ConnectionId,
    ) -> Result<Option<CallRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT * FROM calls
             WHERE connection_id = $1 AND kind = 'discovery' AND finished_at IS NULL",
        )
        .bind(connection)
        .fetch_optional(&self.pool)
        .await
    }

    /// The spec digest the owner of the device a connection is placed on accepted for it
    /// (`None`: central, pending or declined).
    pub async fn connection_accepted_digest(
        &self,
        connection: ConnectionId,
    ) -> Result<Option<SpecDigest>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT pl.spec_digest FROM placements pl
             JOIN connections k ON k.id = pl.connection_id AND pl.device_id = k.runner_device_id
             WHERE pl.connection_id = $1",
        )
        .bind(connection)
        .fetch_optional(&self.pool)
        .await
        .map(Option::flatten)
    }

    /// Whether the connection's last recorded discovery is older than `finished` (or there is
    /// none): a device discovery that finished then is not reconciled yet.
    pub async fn connection_discovered_before(
        &self,
        connection: ConnectionId,
        finished: DateTime<Utc>,
    ) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT last_discovery_at IS NULL OR last_discovery_at < $2 FROM connections WHERE id = $1",
        )
        .bind(connection)
        .bind(finished)
        .fetch_one(&self.pool)
        .await
    }
}

impl Datastore {
    /// The connections of a workspace that `user` may run through some profile they hold Use on,
    /// with their runner references.
    pub async fn connection_usable(
        &self,
        workspace: WorkspaceId,
        user: UserId,
    ) -> Result<Vec<(ConnectionId, RunnerRef)>, sqlx::Error> {
        sqlx::query_as(
            "SELECT DISTINCT c.id, c.runner_ref FROM connections c
             JOIN profile_connections pc ON pc.connection_id = c.id
             JOIN profiles p ON p.id = pc.profile_id
             JOIN profile_grants g ON g.profile_id = p.id AND g.user_id = $2 AND g.grant_kind = 'use'
             WHERE c.workspace_id = $1",
        )
        .bind(workspace)
        .bind(user)
        .fetch_all(&self.pool)
        .await
    }

    /// Tells the runner of a connection to drain `user`'s sessions with this key. The central
    /// runner hears it through `NOTIFY`; a device runner takes it from `session_releases` with
    /// its next heartbeat.
    pub async fn session_release_notify(
        &self,
        runner: RunnerRef,
        connection: ConnectionId,
        client_session_id: &str,
        user: UserId,
    ) -> Result<(), sqlx::Error> {
        if !runner.is_central() {
            self.session_release_store(runner, connection, client_session_id, user)
                .await?;
        }
        let payload = serde_json::json!({
            "runner": runner, "connection_id": connection,
            "client_session_id": client_session_id, "user_id": user,
        });
        sqlx::query("SELECT pg_notify('switchyard_release', $1)")
            .bind(payload.to_string())
            .execute(&self.pool)
            .await
            .map(drop)
    }
}

/// Records on `connection`, in the caller's transaction (the one recording the call), what a
/// finished call's `completion` says of the connection's credential: refused, the connection
/// is marked `needs_authorization`; answered by the server, that mark is cleared (only that
/// one: an answer says nothing of what the latest discovery found). Anything else says
/// nothing and changes nothing. A mark already as it should be is not written again.
pub(crate) async fn connection_credential_seen(
    conn: &mut sqlx::PgConnection,
    connection: ConnectionId,
    completion: &StoredCompletion,
) -> Result<(), sqlx::Error> {
    let statement = if completion.credential_refused {
        "UPDATE connections SET unavailable = 'needs_authorization'
         WHERE id = $1 AND unavailable IS DISTINCT FROM 'needs_authorization'"
    } else if completion.answered() {
        "UPDATE connections SET unavailable = NULL
         WHERE id = $1 AND unavailable = 'needs_authorization'"
    } else {
        return Ok(());
    };
    sqlx::query(statement)
        .bind(connection)
        .execute(conn)
        .await
        .map(drop)
}
