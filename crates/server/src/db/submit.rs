//! The one read a call submission makes. Everything a submission decides on — for a user's
//! submission the API token it presented, the workspace and the submitter's place in it, the
//! profile, connection and environment it names (by id or name), the submitter's Use grant,
//! the operation, whether the profile includes the connection, whether the connector may run,
//! whether the connection's runner is still there, the cached tool, and a call already stored
//! under the same request_id — comes back from one statement as nullable columns. The app
//! layer turns them into the same answers, in the same order, that separate lookups gave
//! (`app/calls.rs`), and a replayed request_id is answered from this read alone. A lone
//! submission made from a resolve remembered for the same keys is inserted by the statement
//! that reads it again, if that read is the remembered one
//! ([`Datastore::call_submit_speculated`]).

use super::calls::{
    bind_new_call, handed_lease_values, handed_read_columns, handed_target, insert_call,
    insert_handed_call, target_digest,
};
use super::users::user_by_token;
use super::{CallOrigin, CallRow, Datastore, HandedRow, Key, NewCall, ProfileRow, UserRow};
use serde_json::Value;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::types::Json;
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

/// `ws AS (…)`, as a string literal (`concat!`) for a `WITH`: the workspace `$id` or `$name`
/// names, when it is the submitter's — one the user `$user` is a member of, or the device
/// `$device`'s own (SQL expressions: parameters, or the columns of a batch's row). Shared by
/// a submission's resolve and a reader's [`Datastore::call_read`].
macro_rules! submitter_workspace {
    ($id:expr, $name:expr, $user:expr, $device:expr) => {
        concat!(
            "ws AS (
             SELECT w.id FROM workspaces w
             WHERE (w.id = ",
            $id,
            " OR w.name = ",
            $name,
            ")
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
    /// The resolve's fingerprint, when it was asked for: all it read but `existing`, as one
    /// text. Another resolve of the same keys with the same fingerprint decides the same (see
    /// [`Datastore::call_submit_speculated`]).
    pub fingerprint: Option<String>,
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
            fingerprint: row.try_get("r_fingerprint")?,
        })
    }
}

/// Where a resolve reads what a submission names, as SQL: the parameters `$1`…`$12` of a lone
/// resolve (`param`; `$3` and `$4` are the submitter's, see [`resolve_cte_for!`], and `$13`
/// its request_id), or the columns of a batch's row `k` (`row`, see [`SUBMIT_RESOLVE_MANY`]).
#[rustfmt::skip]
macro_rules! resolve_key {
    (param, workspace_id) => { "$1" };
    (param, workspace_name) => { "$2" };
    (param, profile_id) => { "$5" };
    (param, profile_name) => { "$6" };
    (param, connection_id) => { "$7" };
    (param, connection_name) => { "$8" };
    (param, tool_name) => { "$9" };
    (param, environment_id) => { "$10" };
    (param, environment_name) => { "$11" };
    (param, operation_id) => { "$12" };
    (row, $key:ident) => { concat!("k.", stringify!($key)) };
}

/// A submission's resolve as the CTE `r`, as a string literal (`concat!`): `$keys` says where
/// what it names is read (see [`resolve_key!`]), `$with` opens the `WITH` (and may define what
/// `$user` reads), `$user` and `$device` are the submitter (see [`submitter_workspace!`]),
/// `$token_user` the `r_token_user…` columns and `$from` the `FROM` clause that has `ws` (and
/// whatever `$token_user` reads). `r` has every column a submission decides on but the call
/// already stored under the request_id, which the statements join beside it; its text
/// (`r::text`) is the resolve's fingerprint.
macro_rules! resolve_cte {
    ($keys:ident, $with:expr, $user:expr, $device:expr, $token_user:expr, $from:literal) => {
        concat!(
            $with,
            submitter_workspace!(
                resolve_key!($keys, workspace_id),
                resolve_key!($keys, workspace_name),
                $user,
                $device
            ),
            ", r AS (SELECT ws.id AS r_workspace, ",
            $token_user,
            "
                 p.id AS r_profile, p.environment_id AS r_profile_environment, p.name AS r_profile_name,
                 EXISTS (SELECT 1 FROM profile_grants g
                         WHERE g.profile_id = p.id AND g.user_id = ",
            $user,
            " AND g.grant_kind = 'use') AS r_user_holds_use,
                 cn.id AS r_connection, cn.name AS r_connection_name, cn.runner_ref AS r_runner_ref,
                 cn.revision AS r_connection_revision, x.name AS r_connector_name,
                 -- ConnectorRow::is_runnable: HTTP always, stdio while its revision is approved.
                 (x.transport = 'http' OR x.approved_revision IS NOT DISTINCT FROM x.revision) AS r_connector_runnable,
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
                 o.id AS r_operation, o.profile_id AS r_operation_profile, o.environment_id AS r_operation_environment
             ",
            $from,
            "
             LEFT JOIN profiles p ON p.workspace_id = ws.id AND (p.id = ",
            resolve_key!($keys, profile_id),
            " OR p.name = ",
            resolve_key!($keys, profile_name),
            ")
             LEFT JOIN connections cn ON cn.workspace_id = ws.id AND (cn.id = ",
            resolve_key!($keys, connection_id),
            " OR cn.name = ",
            resolve_key!($keys, connection_name),
            ")
             LEFT JOIN connectors x ON x.id = cn.connector_id
             LEFT JOIN tools t ON t.connection_id = cn.id AND t.name = ",
            resolve_key!($keys, tool_name),
            "
             LEFT JOIN environments e ON e.workspace_id = ws.id AND (e.id = ",
            resolve_key!($keys, environment_id),
            " OR e.name = ",
            resolve_key!($keys, environment_name),
            ")
             LEFT JOIN operations o ON o.workspace_id = ws.id AND o.id = ",
            resolve_key!($keys, operation_id),
            ") "
        )
    };
}

/// The `r_token_user…` columns of [`resolve_cte!`] read from `token_user tu`.
macro_rules! token_user_columns {
    () => {
        "tu.id AS r_token_user, tu.name AS r_token_user_name,
         tu.is_owner AS r_token_user_is_owner, tu.created_at AS r_token_user_created_at, "
    };
}

/// [`resolve_cte!`] for a submitter known before, or for the user of the API token `$3`.
macro_rules! resolve_cte_for {
    (known) => {
        resolve_cte!(
            param,
            "WITH ",
            "$3",
            "$4",
            "NULL::uuid AS r_token_user, NULL::text AS r_token_user_name,
             NULL::bool AS r_token_user_is_owner, NULL::timestamptz AS r_token_user_created_at, ",
            "FROM ws"
        )
    };
    (token) => {
        resolve_cte!(
            param,
            concat!("WITH token_user AS (", user_by_token!("$3"), "), "),
            "(SELECT id FROM token_user)",
            "$4",
            token_user_columns!(),
            "FROM ws CROSS JOIN token_user tu"
        )
    };
    // A batch's row `k`, whose submitter is known (`k.user_id`, `k.device_id`) or the user of
    // the API token `k.token_hash`: with no token, `token_user` is empty and its columns null,
    // as for a known submitter; with an unknown one the submitter is nobody, and `ws` empty.
    (row) => {
        resolve_cte!(
            row,
            concat!("WITH token_user AS (", user_by_token!("k.token_hash"), "), "),
            "COALESCE(k.user_id, (SELECT id FROM token_user))",
            "k.device_id",
            token_user_columns!(),
            "FROM ws LEFT JOIN token_user tu ON true"
        )
    };
}

/// A submission's resolve: [`resolve_cte!`], its fingerprint (`$fingerprint`: `r::text`, or
/// `NULL::text` when not asked for) and the call stored under the request_id `$13`.
macro_rules! submit_resolve {
    ($submitter:tt, $fingerprint:literal) => {
        concat!(
            resolve_cte_for!($submitter),
            "SELECT r.*, ",
            $fingerprint,
            " AS r_fingerprint, c.* FROM r
             -- The (workspace_id, request_id) unique index, once `calls` has statistics: a plan
             -- cached before its first ANALYZE (a fresh database) may scan it instead.
             LEFT JOIN calls c ON c.workspace_id = r.r_workspace AND c.request_id = $13"
        )
    };
}

/// The resolves of a batch of submissions, one row `k` each (see [`ResolveRequest`]): each
/// resolve's columns, its fingerprint when asked for, and the call stored under its
/// request_id, as [`submit_resolve!`] reads them, after `r_position`, the row's place in the
/// batch (from 1). A row whose workspace is not its submitter's gives no row.
const SUBMIT_RESOLVE_MANY: &str = concat!(
    "WITH k AS (
         SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::uuid[], $5::bytea[],
                              $6::uuid[], $7::text[], $8::uuid[], $9::text[], $10::text[],
                              $11::uuid[], $12::text[], $13::uuid[], $14::uuid[], $15::bool[])
              WITH ORDINALITY
              AS k(workspace_id, workspace_name, user_id, device_id, token_hash,
                   profile_id, profile_name, connection_id, connection_name, tool_name,
                   environment_id, environment_name, operation_id, request_id, fingerprinted, position))
     SELECT k.position AS r_position, s.* FROM k CROSS JOIN LATERAL (",
    resolve_cte_for!(row),
    "SELECT r.*, CASE WHEN k.fingerprinted THEN r::text END AS r_fingerprint, c.* FROM r
         LEFT JOIN calls c ON c.workspace_id = r.r_workspace AND c.request_id = k.request_id) s"
);

/// A submission's resolve and, when the resolve's fingerprint is still `$14`, the insert of
/// the call `$15`… (bound by `bind_new_call`, shifted by 14) — leased under `$32` when that
/// is its runner's live lease, as [`Datastore::call_insert_handed`] inserts it (`$33` the
/// bindings of `target_digest!`). One row: the resolve, and the call inserted or the one
/// stored under the request_id before.
macro_rules! submit_speculated {
    ($submitter:tt) => {
        concat!(
            resolve_cte_for!($submitter),
            ", ",
            handed_target!("$20", "$27", "$32", "$33"),
            ", inserted AS (",
            insert_handed_call!(),
            "
                 SELECT $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26,
                     CASE WHEN t.connector_id IS NULL THEN 'queued' ELSE 'leased' END, $27, $28, $29, $30,
                     CASE WHEN $31::uuid IS NULL THEN 'tool' ELSE 'lookup' END, $31,
                     ",
            handed_lease_values!("$32::int8"),
            "
                 FROM r LEFT JOIN target t ON true
                 WHERE r::text = $14
                 ON CONFLICT (workspace_id, request_id) DO NOTHING
                 RETURNING *)
             SELECT r.*, r::text AS r_fingerprint, s.id IS NOT DISTINCT FROM $15 AS r_inserted, s.*,
                 ",
            handed_read_columns!(),
            "
             FROM r
             -- The statement's snapshot does not see its own insert: the call is the one
             -- inserted, or the one stored before.
             LEFT JOIN LATERAL (
                 SELECT * FROM inserted
                 UNION ALL
                 SELECT c.* FROM calls c WHERE c.workspace_id = r.r_workspace AND c.request_id = $13) s ON true
             LEFT JOIN target t ON s.id = $15"
        )
    };
}

/// What [`Datastore::call_submit_speculated`] did (`C`: the call inserted, as that statement
/// returns it, or as the app has it once given to its lease). Moved once, never stored: its
/// variants are not boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Speculated<C = HandedRow> {
    /// The resolve's fingerprint was the one given: the call was inserted (leased, when its
    /// lease was live).
    Inserted(C),
    /// Nothing inserted — the resolve differs from the one the call was made from, or the
    /// request_id is taken: what the resolve read (as [`Datastore::call_submit_resolve`]).
    Read(Option<SubmitContext>),
}

impl FromRow<'_, PgRow> for Speculated {
    fn from_row(row: &PgRow) -> Result<Self, sqlx::Error> {
        Ok(if row.try_get("r_inserted")? {
            Speculated::Inserted(HandedRow::from_row(row)?)
        } else {
            Speculated::Read(Some(SubmitContext::from_row(row)?))
        })
    }
}

/// What a submission names, as a resolve binds it (see [`resolve_key!`]): owned, so that it
/// can wait for a batch ([`Datastore::call_submit_resolve_many`]).
#[derive(Clone, Debug)]
pub struct ResolveRequest {
    workspace_id: Uuid,
    workspace_name: String,
    /// The submitter: a user or a device known before, or the user of an API token's hash.
    user: Option<Uuid>,
    device: Option<Uuid>,
    token_hash: Option<Vec<u8>>,
    profile_id: Uuid,
    profile_name: String,
    connection_id: Uuid,
    connection_name: String,
    tool_name: String,
    environment_id: Uuid,
    environment_name: String,
    operation: Option<Uuid>,
    request_id: Uuid,
    /// Whether the resolve's fingerprint is read.
    fingerprinted: bool,
}

impl ResolveRequest {
    /// The resolve of `keys`, with its fingerprint when `fingerprinted`.
    pub fn new(keys: &SubmitKeys<'_>, fingerprinted: bool) -> Self {
        let (user, device, token_hash) = match keys.submitter {
            SubmitterKey::Known(submitter) => {
                let (user, device) = submitter.user_and_device();
                (user, device, None)
            }
            SubmitterKey::UserToken(hash) => (None, None, Some(hash.to_vec())),
        };
        // No environment named: nil and '' match none (no object has either).
        let (environment_id, environment_name) = match &keys.environment {
            Some(key) => (key.id(), key.name()),
            None => (Uuid::nil(), ""),
        };
        Self {
            workspace_id: keys.workspace.id(),
            workspace_name: keys.workspace.name().to_owned(),
            user,
            device,
            token_hash,
            profile_id: keys.profile.id(),
            profile_name: keys.profile.name().to_owned(),
            connection_id: keys.connection.id(),
            connection_name: keys.connection.name().to_owned(),
            tool_name: keys.tool_name.to_owned(),
            environment_id,
            environment_name: environment_name.to_owned(),
            operation: keys.operation,
            request_id: keys.request_id,
            fingerprinted,
        }
    }

    /// The lone resolve's statement for this submitter ([`submit_resolve!`]).
    fn resolve_statement(&self) -> &'static str {
        match (self.token_hash.is_some(), self.fingerprinted) {
            (false, true) => submit_resolve!(known, "r::text"),
            (false, false) => submit_resolve!(known, "NULL::text"),
            (true, true) => submit_resolve!(token, "r::text"),
            (true, false) => submit_resolve!(token, "NULL::text"),
        }
    }

    /// The statement that resolves and inserts for this submitter ([`submit_speculated!`],
    /// which always reads the fingerprint).
    fn speculated_statement(&self) -> &'static str {
        match self.token_hash.is_some() {
            false => submit_speculated!(known),
            true => submit_speculated!(token),
        }
    }

    /// Binds this request as `$1`…`$13` of a lone resolve.
    fn bind<'q, O>(
        &'q self,
        query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, PgArguments>,
    ) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, PgArguments>
    where
        O: for<'r> FromRow<'r, PgRow>,
    {
        let query = query.bind(self.workspace_id).bind(&self.workspace_name);
        let query = match &self.token_hash {
            Some(hash) => query.bind(hash),
            None => query.bind(self.user),
        };
        query
            .bind(self.device)
            .bind(self.profile_id)
            .bind(&self.profile_name)
            .bind(self.connection_id)
            .bind(&self.connection_name)
            .bind(&self.tool_name)
            .bind(self.environment_id)
            .bind(&self.environment_name)
            .bind(self.operation)
            .bind(self.request_id)
    }
}

impl Datastore {
    /// Reads everything a submission decides on in one statement — with its fingerprint when
    /// the request asks for it (the row's text adds about a quarter to its execution). `None`
    /// when the workspace is unknown or not the submitter's (a user who is not a member, a
    /// device of another one), and for a [`SubmitterKey::UserToken`] whose token is unknown
    /// or revoked.
    pub async fn call_submit_resolve(
        &self,
        request: &ResolveRequest,
    ) -> Result<Option<SubmitContext>, sqlx::Error> {
        request
            .bind(sqlx::query_as(request.resolve_statement()))
            .fetch_optional(&self.pool)
            .await
    }

    /// [`Datastore::call_submit_resolve`] for each of `requests`, in one statement (a lone one
    /// by the single statement): what each resolve read, in the order of `requests`.
    pub async fn call_submit_resolve_many(
        &self,
        requests: &[ResolveRequest],
    ) -> Result<Vec<Option<SubmitContext>>, sqlx::Error> {
        if let [request] = requests {
            return Ok(vec![self.call_submit_resolve(request).await?]);
        }
        fn column<'a, T>(
            requests: &'a [ResolveRequest],
            get: fn(&'a ResolveRequest) -> T,
        ) -> Vec<T> {
            requests.iter().map(get).collect()
        }
        let rows = sqlx::query(SUBMIT_RESOLVE_MANY)
            .bind(column(requests, |r| r.workspace_id))
            .bind(column(requests, |r| r.workspace_name.as_str()))
            .bind(column(requests, |r| r.user))
            .bind(column(requests, |r| r.device))
            .bind(column(requests, |r| r.token_hash.as_deref()))
            .bind(column(requests, |r| r.profile_id))
            .bind(column(requests, |r| r.profile_name.as_str()))
            .bind(column(requests, |r| r.connection_id))
            .bind(column(requests, |r| r.connection_name.as_str()))
            .bind(column(requests, |r| r.tool_name.as_str()))
            .bind(column(requests, |r| r.environment_id))
            .bind(column(requests, |r| r.environment_name.as_str()))
            .bind(column(requests, |r| r.operation))
            .bind(column(requests, |r| r.request_id))
            .bind(column(requests, |r| r.fingerprinted))
            .fetch_all(&self.pool)
            .await?;
        let mut read: Vec<Option<SubmitContext>> = requests.iter().map(|_| None).collect();
        for row in rows {
            let position: i64 = row.try_get("r_position")?;
            let slot = usize::try_from(position - 1)
                .ok()
                .and_then(|i| read.get_mut(i))
                .ok_or_else(|| sqlx::Error::Protocol("a resolve outside its batch".into()))?;
            *slot = Some(SubmitContext::from_row(&row)?);
        }
        Ok(read)
    }

    /// [`Datastore::call_submit_resolve`] and the insert of `call` — made from an earlier
    /// resolve of the same keys whose fingerprint was `fingerprint` — in one statement: the
    /// call is inserted only if the resolve reads the same now (every column a submission
    /// decides on, so the same checks pass and name the same objects) and its request_id is
    /// free; leased under `epoch` if that is its runner's live lease (as
    /// [`Datastore::call_insert_handed`]), else queued and announced.
    pub async fn call_submit_speculated(
        &self,
        keys: &SubmitKeys<'_>,
        fingerprint: &str,
        call: &NewCall,
        origin: CallOrigin,
        epoch: Option<i64>,
        bindings: &Value,
    ) -> Result<Speculated, sqlx::Error> {
        let request = ResolveRequest::new(keys, true);
        let query = request
            .bind(sqlx::query_as(request.speculated_statement()))
            .bind(fingerprint);
        let speculated = bind_new_call(query, call, origin)
            .bind(epoch)
            .bind(Json(bindings))
            .fetch_optional(&self.pool)
            .await?;
        Ok(match speculated {
            Some(Speculated::Inserted(handed)) => {
                if handed.leased.is_none() {
                    self.announce_queued(&handed.call);
                }
                Speculated::Inserted(handed)
            }
            Some(read) => read,
            None => Speculated::Read(None),
        })
    }
}
