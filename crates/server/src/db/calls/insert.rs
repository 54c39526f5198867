//! Inserting submitted calls: each unless its request_id is stored already, queued — or, for
//! a call handed to a lease that waits for it, leased under that lease's epoch in the same
//! statement (see `app::dispatch::handoff`).

use super::lease::{LeasedRow, queued_wakeup};
use super::{CallRow, NewCall, columns};
use crate::db::{Committed, Datastore};
use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::types::Json;
use sqlx::{Arguments, FromRow};
use std::collections::HashMap;
use switchyard_protocol::approval::{ApprovalPolicy, AskReason};
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{CallId, CallState};

/// What [`Datastore::call_insert_handed`] inserted: the call and, when it was inserted
/// leased, what its lease reads.
#[derive(Debug)]
pub struct HandedRow {
    /// The inserted call.
    pub call: CallRow,
    /// Set when the call was inserted leased.
    pub leased: Option<LeasedRow>,
}

impl<'r> FromRow<'r, PgRow> for HandedRow {
    fn from_row(row: &'r PgRow) -> Result<Self, sqlx::Error> {
        let call = CallRow::from_row(row)?;
        let leased = if call.state == CallState::Leased {
            // The lease reads the connection's revision as it is now, as the lease does;
            // the call's own column keeps the one it was submitted under.
            let mut leased = LeasedRow::from_row(row)?;
            leased.connection_revision = row.try_get("connection_revision_now")?;
            Some(leased)
        } else {
            None
        };
        Ok(Self { call, leased })
    }
}

impl Datastore {
    /// Inserts a call, queued, unless one with the same (workspace, request_id) exists.
    /// Returns the inserted row, or `None` when the request_id was taken (by an earlier or
    /// concurrent submission).
    pub async fn call_insert(
        &self,
        call: &NewCall,
    ) -> Result<Committed<Option<CallRow>>, sqlx::Error> {
        let mut arguments = PgArguments::default();
        columns::bind(call, &mut arguments)?;
        let inserted: Option<CallRow> = sqlx::query_as_with(columns::queued(1), arguments)
            .fetch_optional(&self.pool)
            .await?;
        let wakeups = inserted.iter().map(queued_wakeup).collect();
        Ok(Committed {
            value: inserted,
            wakeups,
        })
    }

    /// [`Datastore::call_insert`] for a call handed to a lease that waits for it: inserted
    /// already leased under `epoch` — with the target it is dispatched to recorded, as the
    /// lease statement records it (`bindings` as in `lease::target_digest`) — if `epoch` is
    /// the runner's live lease, else queued as any other. One statement, one commit: the
    /// insert's and the lease's.
    ///
    /// `None` when the request_id was taken; otherwise the row and, if it was leased, what
    /// the lease's checks and the runner's work item need.
    pub async fn call_insert_handed(
        &self,
        call: &NewCall,
        epoch: Epoch,
        bindings: &Value,
    ) -> Result<Committed<Option<HandedRow>>, sqlx::Error> {
        let mut arguments = PgArguments::default();
        columns::bind(call, &mut arguments)?;
        add(&mut arguments, epoch)?;
        add(&mut arguments, Json(bindings))?;
        let inserted: Option<HandedRow> = sqlx::query_as_with(columns::handed(), arguments)
            .fetch_optional(&self.pool)
            .await?;
        let wakeups = inserted
            .iter()
            .filter(|row| row.leased.is_none())
            .map(|row| queued_wakeup(&row.call))
            .collect();
        Ok(Committed {
            value: inserted,
            wakeups,
        })
    }

    /// [`Datastore::call_insert`] for a call that needs a person's approval: inserted
    /// `awaiting_approval` — where no lease finds it and no quota counts it queued — with its
    /// question (`why`, under `policy`) bound to its payload digest, in one statement. Calls
    /// for no wake-up: nothing may lease it until it is approved.
    pub async fn call_insert_held(
        &self,
        call: &NewCall,
        why: AskReason,
        policy: ApprovalPolicy,
    ) -> Result<Option<CallRow>, sqlx::Error> {
        let mut arguments = PgArguments::default();
        columns::bind(call, &mut arguments)?;
        add(&mut arguments, why)?;
        add(&mut arguments, policy)?;
        sqlx::query_as_with(columns::held(), arguments)
            .fetch_optional(&self.pool)
            .await
    }

    /// [`Datastore::call_insert`] for several calls, in one statement (one commit, one WAL
    /// flush): each answer, in order, is the inserted row or `None` when its request_id was
    /// taken (by an earlier submission, a concurrent one, or an earlier one of the same
    /// batch).
    pub async fn call_insert_many(
        &self,
        calls: &[NewCall],
    ) -> Result<Committed<Vec<Option<CallRow>>>, sqlx::Error> {
        // One order of the unique keys for every batch, so that two replicas' batches that
        // share request_ids wait for each other instead of deadlocking; stable, so that of two
        // calls of the batch with one request_id the first is inserted.
        let mut order: Vec<&NewCall> = calls.iter().collect();
        order.sort_by_key(|call| (call.workspace_id, call.request_id));
        let mut arguments = PgArguments::default();
        for call in &order {
            columns::bind(call, &mut arguments)?;
        }
        let rows: Vec<CallRow> = sqlx::query_as_with(columns::queued(calls.len()), arguments)
            .fetch_all(&self.pool)
            .await?;
        let wakeups = rows.iter().map(queued_wakeup).collect();
        let mut inserted: HashMap<CallId, CallRow> =
            rows.into_iter().map(|row| (row.id, row)).collect();
        Ok(Committed {
            value: calls.iter().map(|call| inserted.remove(&call.id)).collect(),
            wakeups,
        })
    }
}

/// Adds one more value to a statement's arguments.
fn add<'q, T>(arguments: &mut PgArguments, value: T) -> Result<(), sqlx::Error>
where
    T: 'q + sqlx::Encode<'q, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    arguments.add(value).map_err(sqlx::Error::Encode)
}
