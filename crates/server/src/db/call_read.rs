//! The one read behind showing a call to its reader. Whether the workspace is the reader's,
//! the call, its profile, whether the reader (a user) holds Use on it, and what is recorded
//! beside the call (its lineage) come back from one statement; the app layer refuses in the
//! order separate lookups did (`App::call_get_as`). A waiting reader makes this read each time
//! it looks, so it is a single round trip.

use super::observations::lineage_columns;
use super::sql::{Params, text};
use super::submit::{holds_use, submitter_workspace};
use super::{CallRow, Datastore, Key, Lineage, ProfileRow, Submitter};
use sqlx::postgres::PgRow;
use sqlx::{FromRow, Row};
use std::sync::{Arc, LazyLock};
use switchyard_protocol::CallId;
use uuid::Uuid;

/// What [`Datastore::call_read`] read. Each `None` is "not found".
#[derive(Clone, Debug)]
pub struct CallRead {
    /// The call, with its profile.
    pub call: Option<(CallRow, ProfileRow)>,
    /// Whether the reading user — for a device, the user who approved it — holds Use on the
    /// call's profile right now.
    pub user_holds_use: bool,
    /// What is recorded beside the call (empty when there is no call).
    pub lineage: Lineage,
}

impl FromRow<'_, PgRow> for CallRead {
    fn from_row(row: &PgRow) -> Result<Self, sqlx::Error> {
        // The call's columns keep their own names (`c.*`), as do the lineage's; the others are `r_…`.
        let call = match row.try_get::<Option<Uuid>, _>("id")? {
            Some(_) => {
                let call = CallRow::from_row(row)?;
                let profile = ProfileRow {
                    id: call.profile_id,
                    workspace_id: call.workspace_id,
                    environment_id: row.try_get("r_profile_environment")?,
                    name: row.try_get("r_profile_name")?,
                    retired_at: row.try_get("r_profile_retired_at")?,
                    retired_by: row.try_get("r_profile_retired_by")?,
                };
                Some((call, profile))
            }
            None => None,
        };
        Ok(Self {
            call,
            user_holds_use: row.try_get("r_user_holds_use")?,
            lineage: Lineage::from_row(row)?,
        })
    }
}

impl Datastore {
    /// Reads call `call` of the workspace `workspace` names, for `reader`, in one statement.
    /// `None` when the workspace is unknown or not the reader's (a user who is not a member, a
    /// device of another one). `call` is `None` for an id that is not one: the workspace is
    /// still checked first.
    pub async fn call_read(
        &self,
        workspace: &Key<'_>,
        reader: Submitter,
        call: Option<CallId>,
    ) -> Result<Option<CallRead>, sqlx::Error> {
        let (user, device) = reader.user_and_device();
        static STATEMENT: LazyLock<Arc<str>> = LazyLock::new(|| {
            let mut params = Params::default();
            let [id, name, user, device, call] = std::array::from_fn(|_| params.next());
            format!(
                "WITH {ws}
                 SELECT p.environment_id AS r_profile_environment, p.name AS r_profile_name,
                     p.retired_at AS r_profile_retired_at, p.retired_by AS r_profile_retired_by,
                     {holds_use} AS r_user_holds_use,
                     {lineage}, c.*
                 FROM ws
                 LEFT JOIN calls c ON c.workspace_id = ws.id AND c.id = {call}
                 LEFT JOIN profiles p ON p.id = c.profile_id",
                ws = submitter_workspace(&id, &name, &user, &device),
                holds_use = holds_use(&user, &device),
                lineage = lineage_columns(""),
            )
            .into()
        });
        sqlx::query_as(text(&STATEMENT))
            .bind(workspace.id())
            .bind(workspace.name())
            .bind(user)
            .bind(device)
            .bind(call)
            .fetch_optional(&self.pool)
            .await
    }
}
