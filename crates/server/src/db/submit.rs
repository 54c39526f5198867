//! The one read a call submission makes (its *submit read*). Everything a submission decides
//! on — for a user's submission the API token it presented, the workspace and the submitter's
//! place in it, the profile, connection and environment it names (by id or name), the
//! submitter's Use grant, the operation, whether the profile includes the connection, whether
//! the connector may run, whether any of them is retired, whether the connection's runner is
//! still there, its device owner's consent to the connector's current spec, the cached tool
//! (whether the latest discovery listed it, its classification and its `destructiveHint`),
//! the workspace's queued and in-flight calls counted up to their quotas ([`CallQuotas`]), and
//! a call already stored under the same request_id — comes back from one statement as
//! nullable columns. The app layer turns them into the same answers, in the same order, that
//! separate lookups gave (`app/calls.rs`), and a replayed request_id is answered from this
//! read alone. The reads of submissions that wait at the same moment share one statement
//! ([`Datastore::call_submit_read_many`]).

use super::placements::{Consent, SpecColumns, spec_array};
use super::sql::{Params, text};
use super::users::user_by_token;
use super::{CallRow, Datastore, Key, ProfileRow, UserRow};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{FromRow, Row};
use std::sync::{Arc, LazyLock};
use switchyard_protocol::api::{Risk, SpecDigest, ToolClassification};
use switchyard_protocol::approval::ApprovalPolicy;
use switchyard_protocol::{
    ConnectionId, DeviceId, EnvironmentId, OperationId, ProfileId, RequestId, RunnerRef, UserId,
    WorkspaceId,
};
use uuid::Uuid;

/// Who submits.
#[derive(Clone, Copy, Debug)]
pub enum Submitter {
    /// A user: the workspace must be one they are a member of; their Use grant is read.
    User(UserId),
    /// A paired device: the workspace must be its own.
    Device(DeviceId),
}

/// Who submits, as a submission's read finds them.
#[derive(Clone, Copy, Debug)]
pub enum SubmitterKey<'a> {
    /// Already authenticated.
    Known(Submitter),
    /// The user holding the unrevoked API token with this hash, read in the same statement
    /// (a submission's one read then also authenticates it).
    UserToken(&'a [u8]),
}

impl Submitter {
    /// The user and the device as a statement binds them: one of them is `None`.
    pub(super) fn user_and_device(self) -> (Option<UserId>, Option<DeviceId>) {
        match self {
            Submitter::User(user) => (Some(user), None),
            Submitter::Device(device) => (None, Some(device)),
        }
    }
}

/// Whether the user `user` — or, when it is null, the user who approved the device `device`
/// (a device acts for its approver) — holds Use on the profile `p` right now (SQL
/// expressions, as for [`submitter_workspace`]). Shared by a submission's read and a reader's
/// [`Datastore::call_read`]; `COALESCE` reads the device only for a device.
pub(super) fn holds_use(user: &str, device: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM profile_grants g
                 WHERE g.profile_id = p.id AND g.grant_kind = 'use'
                   AND g.user_id = COALESCE({user},
                       (SELECT d.approved_by FROM devices d WHERE d.id = {device})))"
    )
}

/// `ws AS (…)`: the workspace `id` or `name` names, when it is the submitter's — one the
/// user `user` is a member of, or the device `device`'s own (SQL expressions: placeholders,
/// or the columns of a batch's row). Shared by a submission's read and a reader's
/// [`Datastore::call_read`].
pub(super) fn submitter_workspace(id: &str, name: &str, user: &str, device: &str) -> String {
    format!(
        "ws AS (
             SELECT w.id FROM workspaces w
             WHERE (w.id = {id} OR w.name = {name})
               AND (EXISTS (SELECT 1 FROM workspace_members m WHERE m.workspace_id = w.id AND m.user_id = {user})
                    OR EXISTS (SELECT 1 FROM devices d WHERE d.workspace_id = w.id AND d.id = {device}))) "
    )
}

/// Per-workspace quotas a submission is checked against: most calls queued, and most leased
/// or running. Its read counts each up to its quota and no further, on the queue's partial
/// indexes (`calls_queued`, `calls_in_flight`), so the count costs at most the quota's rows
/// and usually the few that are waiting. Reads made at the same moment count the same rows,
/// so concurrent submissions may overshoot a quota by as many as submit at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallQuotas {
    /// Most calls queued, or held for a person's approval, in a workspace.
    pub max_queued: u32,
    /// Most calls leased or running in a workspace.
    pub max_running: u32,
}

impl CallQuotas {
    /// [`CallQuotas::max_queued`] unless configured.
    pub const DEFAULT_MAX_QUEUED: u32 = 10_000;
    /// [`CallQuotas::max_running`] unless configured.
    pub const DEFAULT_MAX_RUNNING: u32 = 1_000;
}

impl Default for CallQuotas {
    fn default() -> Self {
        Self {
            max_queued: Self::DEFAULT_MAX_QUEUED,
            max_running: Self::DEFAULT_MAX_RUNNING,
        }
    }
}

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
    pub operation: Option<OperationId>,
    /// The client's idempotency key.
    pub request_id: RequestId,
    /// The tool.
    pub tool_name: &'a str,
}

/// The connection a submission names, with what running a call on it depends on.
#[derive(Clone, Debug)]
pub struct SubmitConnection {
    /// Id.
    pub id: ConnectionId,
    /// Name.
    pub name: String,
    /// The runner it is placed on.
    pub runner_ref: RunnerRef,
    /// Revision now.
    pub revision: i64,
    /// Its connector's name.
    pub connector_name: String,
    /// Whether the connector may run (see `ConnectorRow::is_runnable`).
    pub connector_runnable: bool,
    /// `central`, or a device of the workspace that is not revoked.
    pub runner_available: bool,
    /// Whether the connection is retired.
    pub connection_retired: bool,
    /// Whether its connector is retired.
    pub connector_retired: bool,
    /// For a connection placed on a device: its owner's consent to the connector's current
    /// spec (`None` for the central runner, which needs none).
    pub consent: Option<Consent>,
    /// The cached tool: `None` when discovery never listed it.
    pub tool: Option<SubmitTool>,
    /// The cached tool's MCP annotations, as its server declared them.
    pub tool_annotations: Option<serde_json::Value>,
}

/// The tool a submission names, as its connection's catalog holds it.
#[derive(Clone, Copy, Debug)]
pub struct SubmitTool {
    /// `false` once the latest discovery no longer lists it.
    pub available: bool,
    /// Its classification; `None` while unclassified.
    pub classification: Option<ToolClassification>,
    /// Its annotations' `destructiveHint` (`None`: not given, or not a boolean) — a hint for
    /// the approval policy, never in place of the classification.
    pub destructive_hint: Option<bool>,
}

/// The cached tool's columns of a submit read, `None` when the catalog has no such tool.
fn submit_tool(row: &PgRow) -> Result<Option<SubmitTool>, sqlx::Error> {
    let Some(available) = row.try_get::<Option<bool>, _>("r_tool_available")? else {
        return Ok(None);
    };
    let side_effect: Option<bool> = row.try_get("r_tool_side_effect")?;
    let risk: Option<Risk> = row.try_get("r_tool_risk")?;
    Ok(Some(SubmitTool {
        available,
        classification: side_effect
            .zip(risk)
            .map(|(side_effect, risk)| ToolClassification { side_effect, risk }),
        destructive_hint: row.try_get("r_tool_destructive_hint")?,
    }))
}

/// The scope of the operation a submission names.
#[derive(Clone, Copy, Debug)]
pub struct OperationScope {
    /// Id.
    pub id: OperationId,
    /// Its profile.
    pub profile_id: ProfileId,
    /// Its environment.
    pub environment_id: EnvironmentId,
}

/// What [`Datastore::call_submit_read`] read. Each `None` is "not found".
#[derive(Clone, Debug)]
pub struct SubmitContext {
    /// The user whose API token the submission presented ([`SubmitterKey::UserToken`]);
    /// `None` for a submitter known before.
    pub token_user: Option<UserRow>,
    /// The workspace.
    pub workspace_id: WorkspaceId,
    /// The profile.
    pub profile: Option<ProfileRow>,
    /// Whether the submitting user — for a device, the user who approved it — holds Use on
    /// the profile right now.
    pub user_holds_use: bool,
    /// The connection.
    pub connection: Option<SubmitConnection>,
    /// Whether the profile includes the connection.
    pub profile_has_connection: bool,
    /// Whether the profile grants the tool: the connection whole, or the tool in its set.
    pub tool_granted: bool,
    /// The approval policy that applies: the profile's override for the tool, else its
    /// policy for the connection (`None` when the profile does not include it).
    pub approval_policy: Option<ApprovalPolicy>,
    /// The submitting agent's own approval policy for the connection, if it set one.
    pub agent_approval_policy: Option<ApprovalPolicy>,
    /// The environment the request names.
    pub environment_id: Option<EnvironmentId>,
    /// The operation the request names, if it is one of the workspace.
    pub operation: Option<OperationScope>,
    /// The workspace's queued and held calls, each counted up to [`CallQuotas::max_queued`].
    pub queued_calls: i64,
    /// The workspace's leased and running calls, counted up to [`CallQuotas::max_running`].
    pub running_calls: i64,
    /// The call already stored under the request_id.
    pub existing: Option<CallRow>,
}

impl FromRow<'_, PgRow> for SubmitContext {
    fn from_row(row: &PgRow) -> Result<Self, sqlx::Error> {
        let workspace_id: WorkspaceId = row.try_get("r_workspace")?;
        let token_user = match row.try_get::<Option<UserId>, _>("r_token_user")? {
            Some(id) => Some(UserRow {
                id,
                name: row.try_get("r_token_user_name")?,
                is_owner: row.try_get("r_token_user_is_owner")?,
                // An API token's submit read finds persons only (`users::user_by_token`).
                kind: switchyard_protocol::agents::PrincipalKind::Person,
                created_at: row.try_get("r_token_user_created_at")?,
            }),
            None => None,
        };
        let profile = match row.try_get::<Option<ProfileId>, _>("r_profile")? {
            Some(id) => Some(ProfileRow {
                id,
                workspace_id,
                environment_id: row.try_get("r_profile_environment")?,
                name: row.try_get("r_profile_name")?,
                retired_at: row.try_get("r_profile_retired_at")?,
                retired_by: row.try_get("r_profile_retired_by")?,
            }),
            None => None,
        };
        let connection = match row.try_get::<Option<ConnectionId>, _>("r_connection")? {
            Some(id) => Some(SubmitConnection {
                id,
                name: row.try_get("r_connection_name")?,
                runner_ref: row.try_get("r_runner_ref")?,
                revision: row.try_get("r_connection_revision")?,
                connector_name: row.try_get("r_connector_name")?,
                connector_runnable: row.try_get("r_connector_runnable")?,
                runner_available: row.try_get("r_runner_available")?,
                connection_retired: row.try_get("r_connection_retired")?,
                connector_retired: row.try_get("r_connector_retired")?,
                consent: consent(row)?,
                tool: submit_tool(row)?,
                tool_annotations: row
                    .try_get::<Option<Json<serde_json::Value>>, _>("r_tool_annotations")?
                    .map(|a| a.0),
            }),
            None => None,
        };
        let operation = match row.try_get::<Option<OperationId>, _>("r_operation")? {
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
            tool_granted: row.try_get("r_tool_granted")?,
            approval_policy: row.try_get("r_approval_policy")?,
            agent_approval_policy: row.try_get("r_agent_approval_policy")?,
            environment_id: row.try_get("r_environment")?,
            operation,
            queued_calls: row.try_get("r_queued_calls")?,
            running_calls: row.try_get("r_running_calls")?,
            existing,
        })
    }
}

/// The consent of a device placement to the connector's current spec, as a submit read found
/// it; `None` for a connection on the central runner.
fn consent(row: &PgRow) -> Result<Option<Consent>, sqlx::Error> {
    let spec: Option<Json<SpecColumns>> = row.try_get("r_device_spec")?;
    let accepted: Option<SpecDigest> = row.try_get("r_accepted_digest")?;
    Ok(spec.map(|spec| Consent::of(&spec.0.spec(), accepted.as_ref())))
}

/// Where a submit read finds what a submission names: SQL expressions, the placeholders of a
/// lone read or the columns of a batch's row `k`.
struct Named {
    workspace_id: String,
    workspace_name: String,
    profile_id: String,
    profile_name: String,
    connection_id: String,
    connection_name: String,
    tool_name: String,
    environment_id: String,
    environment_name: String,
    operation_id: String,
    max_queued: String,
    max_running: String,
}

impl Named {
    /// The columns of a batch's row `k`.
    fn row() -> Self {
        let k = |column: &str| format!("k.{column}");
        Self {
            workspace_id: k("workspace_id"),
            workspace_name: k("workspace_name"),
            profile_id: k("profile_id"),
            profile_name: k("profile_name"),
            connection_id: k("connection_id"),
            connection_name: k("connection_name"),
            tool_name: k("tool_name"),
            environment_id: k("environment_id"),
            environment_name: k("environment_name"),
            operation_id: k("operation_id"),
            max_queued: k("max_queued"),
            max_running: k("max_running"),
        }
    }
}

/// How a submit read finds its submitter.
struct SubmitterSql {
    /// Opens the `WITH` (and defines what `user` reads).
    with: String,
    /// The submitting user, and device.
    user: String,
    device: String,
    /// The `r_token_user…` columns.
    token_user: &'static str,
    /// The `FROM` clause that has `ws` (and whatever `token_user` reads).
    from: &'static str,
}

impl SubmitterSql {
    /// A submitter known before: the user `user` or the device `device` (SQL expressions).
    fn known(user: &str, device: &str) -> Self {
        Self {
            with: "WITH ".to_owned(),
            user: user.to_owned(),
            device: device.to_owned(),
            token_user:
                "NULL::uuid AS r_token_user, NULL::text AS r_token_user_name,
                NULL::bool AS r_token_user_is_owner, NULL::timestamptz AS r_token_user_created_at, ",
            from: "FROM ws",
        }
    }

    /// The user of the API token whose hash is `token_hash`: nobody, and no row, when no
    /// unrevoked token has it.
    fn by_token(token_hash: &str, device: &str) -> Self {
        Self {
            with: format!("WITH token_user AS ({}), ", user_by_token(token_hash)),
            user: "(SELECT id FROM token_user)".to_owned(),
            device: device.to_owned(),
            token_user: TOKEN_USER_COLUMNS,
            from: "FROM ws CROSS JOIN token_user tu",
        }
    }

    /// The user `user` when it is not null, else the user of the API token whose hash is
    /// `token_hash` (a null hash finds nobody, and leaves the token user's columns null).
    fn known_or_by_token(user: &str, device: &str, token_hash: &str) -> Self {
        Self {
            user: format!("COALESCE({user}, (SELECT id FROM token_user))"),
            from: "FROM ws LEFT JOIN token_user tu ON true",
            ..Self::by_token(token_hash, device)
        }
    }
}

/// The `r_token_user…` columns read from `token_user tu`.
const TOKEN_USER_COLUMNS: &str = "tu.id AS r_token_user, tu.name AS r_token_user_name,
     tu.is_owner AS r_token_user_is_owner, tu.created_at AS r_token_user_created_at, ";

/// A submission's read as the CTE `r`: every column a submission decides on but the call
/// already stored under the request_id, which the statements join beside it.
fn read_cte(named: &Named, submitter: &SubmitterSql) -> String {
    let Named {
        workspace_id,
        workspace_name,
        profile_id,
        profile_name,
        connection_id,
        connection_name,
        tool_name,
        environment_id,
        environment_name,
        operation_id,
        max_queued,
        max_running,
    } = named;
    let SubmitterSql {
        with,
        user,
        device,
        token_user,
        from,
    } = submitter;
    format!(
        "{with}{ws}, r AS (SELECT ws.id AS r_workspace, {token_user}
             p.id AS r_profile, p.environment_id AS r_profile_environment, p.name AS r_profile_name,
             p.retired_at AS r_profile_retired_at, p.retired_by AS r_profile_retired_by,
             {holds_use} AS r_user_holds_use,
             cn.id AS r_connection, cn.name AS r_connection_name, cn.runner_ref AS r_runner_ref,
             cn.revision AS r_connection_revision, x.name AS r_connector_name,
             cn.retired_at IS NOT NULL AS r_connection_retired, x.retired_at IS NOT NULL AS r_connector_retired,
             -- ConnectorRow::is_runnable: HTTP always, stdio while its revision is approved.
             (x.transport = 'http' OR x.approved_revision IS NOT DISTINCT FROM x.revision) AS r_connector_runnable,
             -- A device runner must be an unrevoked device of the workspace.
             (cn.runner_device_id IS NULL OR EXISTS (
                 SELECT 1 FROM devices rd
                 WHERE rd.id = cn.runner_device_id AND rd.workspace_id = cn.workspace_id
                   AND rd.revoked_at IS NULL)) AS r_runner_available,
             -- A device placement: the spec its owner's consent is checked against, and the
             -- digest they accepted (`db/placements.rs`).
             CASE WHEN cn.runner_device_id IS NOT NULL THEN {spec} END AS r_device_spec,
             pl.spec_digest AS r_accepted_digest,
             t.available AS r_tool_available, t.side_effect AS r_tool_side_effect, t.risk AS r_tool_risk,
             t.annotations AS r_tool_annotations,
             -- Only a JSON boolean is a hint: anything else reads as none.
             CASE WHEN jsonb_typeof(t.annotations -> 'destructiveHint') = 'boolean'
                  THEN (t.annotations ->> 'destructiveHint')::boolean END AS r_tool_destructive_hint,
             pc.profile_id IS NOT NULL AS r_profile_has_connection,
             -- Granted whole, or the tool is in the profile's set of the connection's tools.
             (pc.tools IS NULL OR {tool_name} = ANY (pc.tools)) AS r_tool_granted,
             -- The approval policy: the tool's override, else the connection's.
             COALESCE(pta.policy, pc.approval_policy) AS r_approval_policy,
             -- An agent's own policy for the connection (a primary-key probe; none for people).
             (SELECT ac.approve FROM agent_connections ac
              WHERE ac.agent_id = {user} AND ac.connection_id = cn.id) AS r_agent_approval_policy,
             e.id AS r_environment,
             o.id AS r_operation, o.profile_id AS r_operation_profile, o.environment_id AS r_operation_environment,
             -- The workspace's waiting calls (queued, or held for a person) and in-flight calls,
             -- each counted up to its quota: bounded scans of calls_queued, calls_awaiting and
             -- calls_in_flight, whose predicates these repeat.
             (SELECT count(*) FROM (SELECT 1 FROM calls qc WHERE qc.workspace_id = ws.id
                  AND qc.lease_epoch IS NULL AND qc.finished_at IS NULL AND NOT qc.approval_held
                  LIMIT {max_queued}) q)
             + (SELECT count(*) FROM (SELECT 1 FROM calls hc WHERE hc.workspace_id = ws.id
                  AND hc.approval_held LIMIT {max_queued}) h) AS r_queued_calls,
             (SELECT count(*) FROM (SELECT 1 FROM calls rc WHERE rc.workspace_id = ws.id
                  AND rc.lease_epoch IS NOT NULL AND rc.finished_at IS NULL LIMIT {max_running}) q) AS r_running_calls
         {from}
         LEFT JOIN profiles p ON p.workspace_id = ws.id AND (p.id = {profile_id} OR p.name = {profile_name})
         LEFT JOIN connections cn ON cn.workspace_id = ws.id AND (cn.id = {connection_id} OR cn.name = {connection_name})
         LEFT JOIN connectors x ON x.id = cn.connector_id
         LEFT JOIN placements pl ON pl.connection_id = cn.id AND pl.device_id = cn.runner_device_id
         LEFT JOIN profile_connections pc ON pc.profile_id = p.id AND pc.connection_id = cn.id
         LEFT JOIN profile_tool_approvals pta
             ON pta.profile_id = p.id AND pta.connection_id = cn.id AND pta.tool_name = {tool_name}
         LEFT JOIN tools t ON t.connection_id = cn.id AND t.name = {tool_name}
         LEFT JOIN environments e ON e.workspace_id = ws.id AND (e.id = {environment_id} OR e.name = {environment_name})
         LEFT JOIN operations o ON o.workspace_id = ws.id AND o.id = {operation_id}) ",
        ws = submitter_workspace(workspace_id, workspace_name, user, device),
        holds_use = holds_use(user, device),
        spec = spec_array!(),
    )
}

/// A lone submit read's statement, for a submitter known before or for the user of an API
/// token: [`read_cte`] and the call stored under the request_id.
fn lone_statement(by_token: bool) -> &'static Arc<str> {
    fn build(by_token: bool) -> Arc<str> {
        let mut params = Params::default();
        let [workspace_id, workspace_name, user_or_token, device] =
            std::array::from_fn(|_| params.next());
        let [
            profile_id,
            profile_name,
            connection_id,
            connection_name,
            tool_name,
        ] = std::array::from_fn(|_| params.next());
        let [environment_id, environment_name, operation_id, request_id] =
            std::array::from_fn(|_| params.next());
        let [max_queued, max_running] = std::array::from_fn(|_| params.next());
        let named = Named {
            workspace_id,
            workspace_name,
            profile_id,
            profile_name,
            connection_id,
            connection_name,
            tool_name,
            environment_id,
            environment_name,
            operation_id,
            max_queued,
            max_running,
        };
        let submitter = if by_token {
            SubmitterSql::by_token(&user_or_token, &device)
        } else {
            SubmitterSql::known(&user_or_token, &device)
        };
        format!(
            "{read}SELECT r.*, c.* FROM r
             -- The (workspace_id, request_id) unique index, once `calls` has statistics: a plan
             -- cached before its first ANALYZE (a fresh database) may scan it instead.
             LEFT JOIN calls c ON c.workspace_id = r.r_workspace AND c.request_id = {request_id}",
            read = read_cte(&named, &submitter),
        )
        .into()
    }
    static KNOWN: LazyLock<Arc<str>> = LazyLock::new(|| build(false));
    static BY_TOKEN: LazyLock<Arc<str>> = LazyLock::new(|| build(true));
    if by_token { &BY_TOKEN } else { &KNOWN }
}

/// The reads of a batch of submissions, one row `k` each (see [`SubmitRead`]): each read's
/// columns and the call stored under its request_id, after `r_position`, the row's place in
/// the batch (from 1). A row whose workspace is not its submitter's gives no row. A row's
/// submitter is known (`k.user_id`, `k.device_id`) or the user of the API token
/// `k.token_hash`: with no token, `token_user` is empty and its columns null, as for a known
/// submitter; with an unknown one the submitter is nobody, and `ws` empty.
static MANY_STATEMENT: LazyLock<Arc<str>> = LazyLock::new(|| {
    let submitter = SubmitterSql::known_or_by_token("k.user_id", "k.device_id", "k.token_hash");
    format!(
        "WITH k AS (
             SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::uuid[], $5::bytea[],
                                  $6::uuid[], $7::text[], $8::uuid[], $9::text[], $10::text[],
                                  $11::uuid[], $12::text[], $13::uuid[], $14::uuid[],
                                  $15::int8[], $16::int8[])
                  WITH ORDINALITY
                  AS k(workspace_id, workspace_name, user_id, device_id, token_hash,
                       profile_id, profile_name, connection_id, connection_name, tool_name,
                       environment_id, environment_name, operation_id, request_id,
                       max_queued, max_running, position))
         SELECT k.position AS r_position, s.* FROM k CROSS JOIN LATERAL (
             {read}SELECT r.*, c.* FROM r
             LEFT JOIN calls c ON c.workspace_id = r.r_workspace AND c.request_id = k.request_id) s",
        read = read_cte(&Named::row(), &submitter),
    )
    .into()
});

/// What a submission names, as a submit read binds it: owned, so that it can wait for a batch
/// ([`Datastore::call_submit_read_many`]).
#[derive(Clone, Debug)]
pub struct SubmitRead {
    workspace_id: Uuid,
    workspace_name: String,
    /// The submitter: a user or a device known before, or the user of an API token's hash.
    user: Option<UserId>,
    device: Option<DeviceId>,
    token_hash: Option<Vec<u8>>,
    profile_id: Uuid,
    profile_name: String,
    connection_id: Uuid,
    connection_name: String,
    tool_name: String,
    environment_id: Uuid,
    environment_name: String,
    operation: Option<OperationId>,
    request_id: RequestId,
    quotas: CallQuotas,
}

impl SubmitRead {
    /// The read of `keys`, counting up to the default [`CallQuotas`] (see
    /// [`SubmitRead::with_quotas`]).
    pub fn new(keys: &SubmitKeys<'_>) -> Self {
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
            quotas: CallQuotas::default(),
        }
    }

    /// The same read, counting the workspace's calls up to `quotas`.
    pub fn with_quotas(self, quotas: CallQuotas) -> Self {
        Self { quotas, ..self }
    }
}

impl Datastore {
    /// Reads everything a submission decides on in one statement. `None` when the workspace
    /// is unknown or not the submitter's (a user who is not a member, a device of another
    /// one), and for a [`SubmitterKey::UserToken`] whose token is unknown or revoked.
    pub async fn call_submit_read(
        &self,
        read: &SubmitRead,
    ) -> Result<Option<SubmitContext>, sqlx::Error> {
        let query = sqlx::query_as(text(lone_statement(read.token_hash.is_some())))
            .bind(read.workspace_id)
            .bind(&read.workspace_name);
        let query = match &read.token_hash {
            Some(hash) => query.bind(hash),
            None => query.bind(read.user),
        };
        query
            .bind(read.device)
            .bind(read.profile_id)
            .bind(&read.profile_name)
            .bind(read.connection_id)
            .bind(&read.connection_name)
            .bind(&read.tool_name)
            .bind(read.environment_id)
            .bind(&read.environment_name)
            .bind(read.operation)
            .bind(read.request_id)
            .bind(i64::from(read.quotas.max_queued))
            .bind(i64::from(read.quotas.max_running))
            .fetch_optional(&self.pool)
            .await
    }

    /// [`Datastore::call_submit_read`] for each of `reads`, in one statement (a lone one by
    /// the single statement): what each read found, in the order of `reads`.
    pub async fn call_submit_read_many(
        &self,
        reads: &[SubmitRead],
    ) -> Result<Vec<Option<SubmitContext>>, sqlx::Error> {
        if let [read] = reads {
            return Ok(vec![self.call_submit_read(read).await?]);
        }
        fn column<'a, T>(reads: &'a [SubmitRead], get: fn(&'a SubmitRead) -> T) -> Vec<T> {
            reads.iter().map(get).collect()
        }
        let rows = sqlx::query(text(&MANY_STATEMENT))
            .bind(column(reads, |r| r.workspace_id))
            .bind(column(reads, |r| r.workspace_name.as_str()))
            .bind(column(reads, |r| r.user))
            .bind(column(reads, |r| r.device))
            .bind(column(reads, |r| r.token_hash.as_deref()))
            .bind(column(reads, |r| r.profile_id))
            .bind(column(reads, |r| r.profile_name.as_str()))
            .bind(column(reads, |r| r.connection_id))
            .bind(column(reads, |r| r.connection_name.as_str()))
            .bind(column(reads, |r| r.tool_name.as_str()))
            .bind(column(reads, |r| r.environment_id))
            .bind(column(reads, |r| r.environment_name.as_str()))
            .bind(column(reads, |r| r.operation))
            .bind(column(reads, |r| r.request_id))
            .bind(column(reads, |r| i64::from(r.quotas.max_queued)))
            .bind(column(reads, |r| i64::from(r.quotas.max_running)))
            .fetch_all(&self.pool)
            .await?;
        let mut found: Vec<Option<SubmitContext>> = reads.iter().map(|_| None).collect();
        for row in rows {
            let position: i64 = row.try_get("r_position")?;
            let slot = usize::try_from(position - 1)
                .ok()
                .and_then(|i| found.get_mut(i))
                .ok_or_else(|| sqlx::Error::Protocol("a read outside its batch".into()))?;
            *slot = Some(SubmitContext::from_row(&row)?);
        }
        Ok(found)
    }
}
