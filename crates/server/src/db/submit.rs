//! The one read a call submission makes. Everything a submission decides on — for a user's
//! submission the API token it presented, the workspace and the submitter's place in it, the
//! profile, connection and environment it names (by id or name), the submitter's Use grant,
//! the operation, whether the profile includes the connection, whether the connector may run,
//! whether the connection's runner is still there, the cached tool, and a call already stored
//! under the same request_id — comes back from one statement as nullable columns. The app
//! layer turns them into the same answers, in the same order, that separate lookups gave
//! (`app/calls.rs`), and a replayed request_id is answered from this read alone.

use super::users::user_by_token;
use super::{CallRow, Datastore, Key, ProfileRow, UserRow};
use sqlx::postgres::PgRow;
use sqlx::{FromRow, Row};
use uuid::Uuid;

/// Who submits.
#[derive(Clone, Copy, Debug)]
pub enum Submitter {
    /// A user: the workspace must be one they are a member of; their Use grant is read.
    User(Uuid),
    /// A paired device: the workspace must be its own.
    Device(Uuid),
}

/// Who submits, as a submission's resolve reads it.
#[derive(Clone, Copy, Debug)]
pub enum SubmitterKey<'a> {
    /// Already authenticated.
    Known(Submitter),
    /// The user holding the unrevoked API token with this hash, read in the same statement
    /// (a submission's one read then also authenticates it).
    UserToken(&'a [u8]),
}

impl Submitter {
    /// The user and the device as a statement binds them (`$3` and `$4` of
    /// [`submitter_workspace!`]): one of them is `None`.
    pub(super) fn user_and_device(self) -> (Option<Uuid>, Option<Uuid>) {
        match self {
            Submitter::User(user) => (Some(user), None),
            Submitter::Device(device) => (None, Some(device)),
        }
    }
}

/// `ws AS (…)`, as a string literal (`concat!`) for a `WITH`: the workspace `$1` (id) or `$2`
/// (name) names, when it is the submitter's — one the user `$user` is a member of, or the
/// device `$device`'s own (SQL expressions, `$3` and `$4` unless the user comes from a token).
/// Shared by a submission's resolve and a reader's [`Datastore::call_read`].
macro_rules! submitter_workspace {
    ($user:literal, $device:literal) => {
        concat!(
            "ws AS (
             SELECT w.id FROM workspaces w
             WHERE (w.id = $1 OR w.name = $2)
               AND (EXISTS (SELECT 1 FROM workspace_members m WHERE m.workspace_id = w.id AND m.user_id = ",
            $user,
            ")
                    OR EXISTS (SELECT 1 FROM devices d WHERE d.workspace_id = w.id AND d.id = ",
            $device,
            "))) "
        )
    };
}
pub(super) use submitter_workspace;

/// What a submission names.
#[derive(Clone, Debug)]
pub struct SubmitKeys<'a> {
    /// The workspace (path).
    pub workspace: Key<'a>,
    /// Who submits.
    pub submitter: SubmitterKey<'a>,
    /// The profile.
    pub profile: Key<'a>,
    /// The connection.
    pub connection: Key<'a>,
    /// The environment, when the request names one.
    pub environment: Option<Key<'a>>,
    /// The operation, when the request names one.
    pub operation: Option<Uuid>,
    /// The client's idempotency key.
    pub request_id: Uuid,
    /// The tool.
    pub tool_name: &'a str,
}

/// The connection a submission names, with what running a call on it depends on.
#[derive(Clone, Debug)]
pub struct SubmitConnection {
    /// Id.
    pub id: Uuid,
    /// Name.
    pub name: String,
    /// `central` or `device:<uuid>`.
    pub runner_ref: String,
    /// Revision now.
    pub revision: i64,
    /// Its connector's name.
    pub connector_name: String,
    /// Whether the connector may run (see `ConnectorRow::is_runnable`).
    pub connector_runnable: bool,
    /// `central`, or a device of the workspace that is not revoked.
    pub runner_available: bool,
    /// The cached tool: `None` when discovery never listed it, `Some(false)` when the latest
    /// discovery no longer does.
    pub tool_available: Option<bool>,
}

/// The scope of the operation a submission names.
#[derive(Clone, Copy, Debug)]
pub struct OperationScope {
    /// Id.
    pub id: Uuid,
    /// Its profile.
    pub profile_id: Uuid,
    /// Its environment.
    pub environment_id: Uuid,
}

/// What [`Datastore::call_submit_resolve`] read. Each `None` is "not found".
#[derive(Clone, Debug)]
pub struct SubmitContext {
    /// The user whose API token the submission presented ([`SubmitterKey::UserToken`]);
    /// `None` for a submitter known before.
    pub token_user: Option<UserRow>,
    /// The workspace.
    pub workspace_id: Uuid,
    /// The profile.
    pub profile: Option<ProfileRow>,
    /// Whether the submitter, a user, holds Use on the profile (always false for a device).
    pub user_holds_use: bool,
    /// The connection.
    pub connection: Option<SubmitConnection>,
    /// Whether the profile includes the connection.
    pub profile_has_connection: bool,
    /// The environment the request names.
    pub environment_id: Option<Uuid>,
    /// The operation the request names, if it is one of the workspace.
    pub operation: Option<OperationScope>,
    /// The call already stored under the request_id.
    pub existing: Option<CallRow>,
}

impl FromRow<'_, PgRow> for SubmitContext {
    fn from_row(row: &PgRow) -> Result<Self, sqlx::Error> {
        let workspace_id: Uuid = row.try_get("r_workspace")?;
        let token_user = match row.try_get::<Option<Uuid>, _>("r_token_user")? {
            Some(id) => Some(UserRow {
                id,
                name: row.try_get("r_token_user_name")?,
                is_owner: row.try_get("r_token_user_is_owner")?,
                created_at: row.try_get("r_token_user_created_at")?,
            }),
            None => None,
        };
        let profile = match row.try_get::<Option<Uuid>, _>("r_profile")? {
            Some(id) => Some(ProfileRow {
                id,
                workspace_id,
                environment_id: row.try_get("r_profile_environment")?,
                name: row.try_get("r_profile_name")?,
            }),
            None => None,
        };
        let connection = match row.try_get::<Option<Uuid>, _>("r_connection")? {
            Some(id) => Some(SubmitConnection {
                id,
                name: row.try_get("r_connection_name")?,
                runner_ref: row.try_get("r_runner_ref")?,
                revision: row.try_get("r_connection_revision")?,
                connector_name: row.try_get("r_connector_name")?,
                connector_runnable: row.try_get("r_connector_runnable")?,
                runner_available: row.try_get("r_runner_available")?,
                tool_available: row.try_get("r_tool_available")?,
            }),
            None => None,
        };
        let operation = match row.try_get::<Option<Uuid>, _>("r_operation")? {
            Some(id) => Some(OperationScope {
                id,
                profile_id: row.try_get("r_operation_profile")?,
                environment_id: row.try_get("r_operation_environment")?,
            }),
            None => None,
        };
        // The stored call's columns keep their own names (`c.*`); every other column is `r_…`.
        let existing = match row.try_get::<Option<Uuid>, _>("id")? {
            Some(_) => Some(CallRow::from_row(row)?),
            None => None,
        };
        Ok(Self {
            token_user,
            workspace_id,
            profile,
            user_holds_use: row.try_get("r_user_holds_use")?,
            connection,
            profile_has_connection: row.try_get("r_profile_has_connection")?,
            environment_id: row.try_get("r_environment")?,
            operation,
            existing,
        })
    }
}

/// A submission's resolve, as a string literal (`concat!`): `$with` opens the `WITH` (and may
/// define what `$user` reads), `$user` and `$device` are the submitter (see
/// [`submitter_workspace!`]), `$token_user` the `r_token_user…` columns and `$from` the
/// `FROM` clause that has `ws` (and whatever `$token_user` reads).
macro_rules! submit_resolve {
    ($with:expr, $user:literal, $device:literal, $token_user:literal, $from:literal) => {
        concat!(
            $with,
            submitter_workspace!($user, $device),
            "SELECT ws.id AS r_workspace, ",
            $token_user,
            "
                 p.id AS r_profile, p.environment_id AS r_profile_environment, p.name AS r_profile_name,
                 EXISTS (SELECT 1 FROM profile_grants g
                         WHERE g.profile_id = p.id AND g.user_id = ",
            $user,
            " AND g.grant_kind = 'use') AS r_user_holds_use,
                 cn.id AS r_connection, cn.name AS r_connection_name, cn.runner_ref AS r_runner_ref,
                 cn.revision AS r_connection_revision, k.name AS r_connector_name,
                 -- ConnectorRow::is_runnable: HTTP always, stdio while its revision is approved.
                 (k.transport = 'http' OR k.approved_revision IS NOT DISTINCT FROM k.revision) AS r_connector_runnable,
                 -- A device runner must be an unrevoked device of the workspace. Runner
                 -- references are written as `device:` and a UUID in canonical form; the
                 -- pattern keeps anything else from reaching the cast.
                 (cn.runner_ref NOT LIKE 'device:%' OR EXISTS (
                     SELECT 1 FROM devices rd
                     WHERE rd.workspace_id = cn.workspace_id AND rd.revoked_at IS NULL
                       AND rd.id = CASE WHEN cn.runner_ref ~ '^device:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                                        THEN substr(cn.runner_ref, 8)::uuid END)) AS r_runner_available,
                 t.available AS r_tool_available,
                 EXISTS (SELECT 1 FROM profile_connections pc
                         WHERE pc.profile_id = p.id AND pc.connection_id = cn.id) AS r_profile_has_connection,
                 e.id AS r_environment,
                 o.id AS r_operation, o.profile_id AS r_operation_profile, o.environment_id AS r_operation_environment,
                 c.*
             ",
            $from,
            "
             LEFT JOIN profiles p ON p.workspace_id = ws.id AND (p.id = $5 OR p.name = $6)
             LEFT JOIN connections cn ON cn.workspace_id = ws.id AND (cn.id = $7 OR cn.name = $8)
             LEFT JOIN connectors k ON k.id = cn.connector_id
             LEFT JOIN tools t ON t.connection_id = cn.id AND t.name = $9
             LEFT JOIN environments e ON e.workspace_id = ws.id AND (e.id = $10 OR e.name = $11)
             LEFT JOIN operations o ON o.workspace_id = ws.id AND o.id = $12
             -- The (workspace_id, request_id) unique index, once `calls` has statistics: a plan
             -- cached before its first ANALYZE (a fresh database) may scan it instead.
             LEFT JOIN calls c ON c.workspace_id = ws.id AND c.request_id = $13"
        )
    };
}

impl Datastore {
    /// Reads everything a submission decides on in one statement. `None` when the workspace is
    /// unknown or not the submitter's (a user who is not a member, a device of another one),
    /// and for a [`SubmitterKey::UserToken`] whose token is unknown or revoked.
    pub async fn call_submit_resolve(
        &self,
        keys: &SubmitKeys<'_>,
    ) -> Result<Option<SubmitContext>, sqlx::Error> {
        let query = match keys.submitter {
            SubmitterKey::Known(submitter) => {
                let (user, device) = submitter.user_and_device();
                sqlx::query_as(submit_resolve!(
                    "WITH ",
                    "$3",
                    "$4",
                    "NULL::uuid AS r_token_user, NULL::text AS r_token_user_name,
                     NULL::bool AS r_token_user_is_owner, NULL::timestamptz AS r_token_user_created_at, ",
                    "FROM ws"
                ))
                .bind(keys.workspace.id())
                .bind(keys.workspace.name())
                .bind(user)
                .bind(device)
            }
            SubmitterKey::UserToken(hash) => sqlx::query_as(submit_resolve!(
                concat!("WITH token_user AS (", user_by_token!("$3"), "), "),
                "(SELECT id FROM token_user)",
                "$4",
                "tu.id AS r_token_user, tu.name AS r_token_user_name,
                 tu.is_owner AS r_token_user_is_owner, tu.created_at AS r_token_user_created_at, ",
                "FROM ws CROSS JOIN token_user tu"
            ))
            .bind(keys.workspace.id())
            .bind(keys.workspace.name())
            .bind(hash)
            .bind(None::<Uuid>),
        };
        // No environment named: nil and '' match none (no object has either).
        let environment = keys.environment.clone().unwrap_or(Key::Id(Uuid::nil()));
        query
            .bind(keys.profile.id())
            .bind(keys.profile.name())
            .bind(keys.connection.id())
            .bind(keys.connection.name())
            .bind(keys.tool_name)
            .bind(environment.id())
            .bind(environment.name())
            .bind(keys.operation)
            .bind(keys.request_id)
            .fetch_optional(&self.pool)
            .await
    }
}
