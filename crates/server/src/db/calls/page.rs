//! Reading calls: one by its id or request_id, and a filtered, keyset-paginated page.

use super::CallRow;
use crate::db::Datastore;
use crate::db::sql::{Params, Text, text};
use chrono::{DateTime, Utc};
use std::sync::{Arc, LazyLock};
use switchyard_protocol::{
    CallId, CallState, ConnectionId, DeviceId, RequestId, RunnerRef, UserId, WorkspaceId,
};

/// Which calls a page of the calls list shows (all conditions must hold).
#[derive(Clone, Debug, Default)]
pub struct CallFilter {
    /// Only calls in this state.
    pub state: Option<CallState>,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only calls on this connection.
    pub connection: Option<ConnectionId>,
    /// Only calls this user submitted themselves (not through a device).
    pub submitter_user: Option<UserId>,
    /// Only calls this device submitted.
    pub submitter_device: Option<DeviceId>,
    /// Only calls placed on this runner.
    pub runner: Option<RunnerRef>,
    /// Only calls submitted at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only calls submitted before this time.
    pub until: Option<DateTime<Utc>>,
}

/// Where a page of calls starts (keyset pagination on `(created_at, id)`, newest first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PageFrom {
    /// The newest calls.
    #[default]
    Newest,
    /// Calls older than this one.
    Before(CallId),
    /// Calls newer than this one.
    After(CallId),
    /// Calls older than this position, `(created_at, id)`: the API's cursor, which holds
    /// whether or not the call it came from is still readable.
    Older(DateTime<Utc>, CallId),
}

/// The statement of a page starting `from`: the filtered calls of a workspace on profiles the
/// user holds Use on, after the cursor, in the page's order. Every variant takes the same
/// parameters (those a variant does not use are bound as NULL and checked to be).
fn page_statement(from: PageFrom) -> Text {
    fn build(from: PageFrom) -> Arc<str> {
        let mut params = Params::default();
        let [
            workspace,
            user,
            state,
            tool,
            connection,
            submitter_user,
            submitter_device,
            runner,
            since,
            until,
            cursor,
            cursor_at,
            limit,
        ] = std::array::from_fn(|_| params.next());
        let tail = match from {
            PageFrom::Newest => format!(
                "AND {cursor}::uuid IS NULL AND {cursor_at}::timestamptz IS NULL
                 ORDER BY c.created_at DESC, c.id DESC LIMIT {limit}"
            ),
            PageFrom::Before(_) => format!(
                "AND {cursor_at}::timestamptz IS NULL
                 AND (c.created_at, c.id) < (SELECT created_at, id FROM calls WHERE id = {cursor} AND workspace_id = {workspace})
                 ORDER BY c.created_at DESC, c.id DESC LIMIT {limit}"
            ),
            PageFrom::After(_) => format!(
                "AND {cursor_at}::timestamptz IS NULL
                 AND (c.created_at, c.id) > (SELECT created_at, id FROM calls WHERE id = {cursor} AND workspace_id = {workspace})
                 ORDER BY c.created_at ASC, c.id ASC LIMIT {limit}"
            ),
            PageFrom::Older(..) => format!(
                "AND (c.created_at, c.id) < ({cursor_at}::timestamptz, {cursor}::uuid)
                 ORDER BY c.created_at DESC, c.id DESC LIMIT {limit}"
            ),
        };
        format!(
            "SELECT c.* FROM calls c WHERE c.workspace_id = {workspace} AND EXISTS (
                 SELECT 1 FROM profile_grants g
                 WHERE g.profile_id = c.profile_id AND g.user_id = {user} AND g.grant_kind = 'use')
               AND ({state}::text IS NULL OR c.state = {state})
               AND ({tool}::text IS NULL OR c.tool_name = {tool})
               AND ({connection}::uuid IS NULL OR c.connection_id = {connection})
               AND ({submitter_user}::uuid IS NULL
                    OR (c.created_by = {submitter_user} AND c.submitted_by_device IS NULL))
               AND ({submitter_device}::uuid IS NULL OR c.submitted_by_device = {submitter_device})
               AND ({runner}::text IS NULL OR c.runner_ref = {runner})
               AND ({since}::timestamptz IS NULL OR c.created_at >= {since})
               AND ({until}::timestamptz IS NULL OR c.created_at < {until}) {tail}"
        )
        .into()
    }
    static NEWEST: LazyLock<Arc<str>> = LazyLock::new(|| build(PageFrom::Newest));
    static BEFORE: LazyLock<Arc<str>> =
        LazyLock::new(|| build(PageFrom::Before(CallId::default())));
    static AFTER: LazyLock<Arc<str>> = LazyLock::new(|| build(PageFrom::After(CallId::default())));
    static OLDER: LazyLock<Arc<str>> =
        LazyLock::new(|| build(PageFrom::Older(DateTime::default(), CallId::default())));
    text(match from {
        PageFrom::Newest => &NEWEST,
        PageFrom::Before(_) => &BEFORE,
        PageFrom::After(_) => &AFTER,
        PageFrom::Older(..) => &OLDER,
    })
}

impl Datastore {
    /// The call with this request_id in a workspace.
    pub async fn call_find_by_request(
        &self,
        workspace: WorkspaceId,
        request_id: RequestId,
    ) -> Result<Option<CallRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM calls WHERE workspace_id = $1 AND request_id = $2")
            .bind(workspace)
            .bind(request_id)
            .fetch_optional(&self.pool)
            .await
    }

    /// A call of a workspace.
    pub async fn call_get(
        &self,
        workspace: WorkspaceId,
        id: CallId,
    ) -> Result<Option<CallRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM calls WHERE workspace_id = $1 AND id = $2")
            .bind(workspace)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
    }

    /// The workspace of a call (for a reader who names the call alone; reading it is
    /// authorized in that workspace).
    pub async fn call_workspace(&self, id: CallId) -> Result<Option<WorkspaceId>, sqlx::Error> {
        sqlx::query_scalar("SELECT workspace_id FROM calls WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
    }

    /// Up to `limit` calls matching `filter` from `from`, newest first, among those the user
    /// may read (current Use on their profile). A cursor that names no call of the workspace
    /// gives an empty page.
    pub async fn call_list_page(
        &self,
        workspace: WorkspaceId,
        user: UserId,
        filter: &CallFilter,
        from: PageFrom,
        limit: i64,
    ) -> Result<Vec<CallRow>, sqlx::Error> {
        let (cursor, cursor_at) = match from {
            PageFrom::Newest => (None, None),
            PageFrom::Before(id) | PageFrom::After(id) => (Some(id), None),
            PageFrom::Older(at, id) => (Some(id), Some(at)),
        };
        let mut rows: Vec<CallRow> = sqlx::query_as(page_statement(from))
            .bind(workspace)
            .bind(user)
            .bind(filter.state)
            .bind(filter.tool.as_deref())
            .bind(filter.connection)
            .bind(filter.submitter_user)
            .bind(filter.submitter_device)
            .bind(filter.runner)
            .bind(filter.since)
            .bind(filter.until)
            .bind(cursor)
            .bind(cursor_at)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        if matches!(from, PageFrom::After(_)) {
            rows.reverse();
        }
        Ok(rows)
    }
}
