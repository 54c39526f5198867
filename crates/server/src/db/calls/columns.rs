//! The one declaration of what a submitted call's insert writes ([`submitted`]), and the insert
//! statements built from it. Every insert — lone, batched, or handed to a waiting lease — takes
//! its column list and its parameters from that declaration, so adding a column to `calls`
//! is one line there (beside the [`NewCall`] field it comes from), and no statement numbers a
//! parameter by hand.

use super::lease::handed_target;
use super::{NewCall, TraceParent};
use crate::db::sql::{Params, Text, text};
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArguments, Postgres};
use sqlx::types::Json;
use sqlx::{Arguments, Encode, Type};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// Where a submitted call's columns go: their names (a statement's text) or their values (its
/// arguments).
pub(super) trait Columns<'a> {
    /// The column `name`, written `value`.
    fn column<T>(&mut self, name: &'static str, value: T)
    where
        T: 'a + Encode<'a, Postgres> + Type<Postgres>;
}

/// Every column a submission writes, with its value, in the order the inserts list them.
/// The call's `state` is not among them: each statement says which state it inserts in.
pub(super) fn submitted<'a>(call: &'a NewCall, to: &mut impl Columns<'a>) {
    to.column("id", call.id);
    to.column("workspace_id", call.workspace_id);
    to.column("request_id", call.request_id);
    to.column("payload_digest", call.payload_digest.as_slice());
    to.column("profile_id", call.profile_id);
    to.column("connection_id", call.connection_id);
    to.column("connection_revision", call.connection_revision);
    to.column("environment_id", call.environment_id);
    to.column("tool_name", call.tool_name.as_str());
    to.column("arguments", Json(&call.arguments));
    to.column("client_session_id", call.client_session_id.as_deref());
    to.column("timeout_seconds", call.timeout_seconds);
    to.column("runner_ref", call.runner_ref);
    to.column("created_by", call.created_by);
    to.column("operation_id", call.origin.operation_id);
    to.column("submitted_by_device", call.origin.device_id);
    to.column("kind", call.kind());
    to.column("parent_call_id", call.origin.lookup_of);
    to.column(
        "traceparent",
        call.origin.trace.as_ref().map(TraceParent::as_str),
    );
}

/// The column names [`submitted`] declares, in order.
static NAMES: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    struct Names(Vec<&'static str>);
    impl<'a> Columns<'a> for Names {
        fn column<T>(&mut self, name: &'static str, _: T)
        where
            T: 'a + Encode<'a, Postgres> + Type<Postgres>,
        {
            self.0.push(name);
        }
    }
    // The names do not depend on the values: any call declares them.
    let call = NewCall {
        id: Default::default(),
        workspace_id: Default::default(),
        request_id: Default::default(),
        payload_digest: Vec::new(),
        profile_id: Default::default(),
        connection_id: Default::default(),
        connection_revision: 0,
        environment_id: Default::default(),
        tool_name: String::new(),
        arguments: serde_json::Value::Null,
        client_session_id: None,
        timeout_seconds: 0,
        runner_ref: switchyard_protocol::RunnerRef::Central,
        created_by: Default::default(),
        origin: Default::default(),
    };
    let mut names = Names(Vec::new());
    submitted(&call, &mut names);
    names.0
});

/// A call's values, added to a statement's arguments in [`submitted`]'s order.
struct Values<'q> {
    arguments: &'q mut PgArguments,
    failed: Option<BoxDynError>,
}

impl<'a> Columns<'a> for Values<'_> {
    fn column<T>(&mut self, _: &'static str, value: T)
    where
        T: 'a + Encode<'a, Postgres> + Type<Postgres>,
    {
        if let Err(error) = self.arguments.add(value) {
            self.failed.get_or_insert(error);
        }
    }
}

/// Adds `call`'s values to `arguments`, in the order its statement's placeholders were taken.
pub(super) fn bind(call: &NewCall, arguments: &mut PgArguments) -> Result<(), sqlx::Error> {
    let mut values = Values {
        arguments,
        failed: None,
    };
    submitted(call, &mut values);
    values
        .failed
        .map_or(Ok(()), |e| Err(sqlx::Error::Encode(e)))
}

/// The placeholders of one call's values: each column's, by name.
struct Placeholders(Vec<(&'static str, String)>);

impl Placeholders {
    fn take(params: &mut Params) -> Self {
        Self(NAMES.iter().map(|name| (*name, params.next())).collect())
    }

    /// The placeholder of column `name` (one [`submitted`] declares).
    fn of(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(column, _)| *column == name)
            .map(|(_, placeholder)| placeholder.as_str())
            .unwrap_or_else(|| panic!("`{name}` is not a submitted column"))
    }

    /// All of them, comma-separated.
    fn list(&self) -> String {
        let all: Vec<&str> = self.0.iter().map(|(_, p)| p.as_str()).collect();
        all.join(", ")
    }
}

/// `INSERT INTO calls (…)` with the submitted columns and `more`.
fn insert_into(more: &[&str]) -> String {
    let columns: Vec<&str> = NAMES.iter().copied().chain(more.iter().copied()).collect();
    format!("INSERT INTO calls ({})", columns.join(", "))
}

/// How every insert ends: a request_id already stored inserts nothing.
const ON_CONFLICT: &str = "ON CONFLICT (workspace_id, request_id) DO NOTHING RETURNING *";

/// The insert of `calls` calls, queued: one row each, in the order they are bound. Of two
/// with one request_id, the first is inserted.
pub(super) fn queued(calls: usize) -> Text {
    static BY_COUNT: LazyLock<Mutex<HashMap<usize, Arc<str>>>> = LazyLock::new(Mutex::default);
    let mut built = BY_COUNT.lock().unwrap_or_else(|e| e.into_inner());
    let statement = built.entry(calls).or_insert_with(|| {
        let mut params = Params::default();
        let rows: Vec<String> = (0..calls)
            .map(|_| format!("({}, 'queued')", Placeholders::take(&mut params).list()))
            .collect();
        format!(
            "{} VALUES {} {ON_CONFLICT}",
            insert_into(&["state"]),
            rows.join(", ")
        )
        .into()
    });
    text(statement)
}

/// The insert of one call held for a person's approval (`awaiting_approval`, out of the
/// queue's index), with its question beside it: the reason and the policy are bound after the
/// call's values. A request_id already stored inserts neither.
pub(super) fn held() -> Text {
    static STATEMENT: LazyLock<Arc<str>> = LazyLock::new(|| {
        let mut params = Params::default();
        let call = Placeholders::take(&mut params);
        let (why, policy) = (params.next(), params.next());
        format!(
            "WITH inserted AS (
                 {insert} VALUES ({values}, 'awaiting_approval', true) {ON_CONFLICT}),
             asked AS (
                 INSERT INTO approvals (call_id, workspace_id, payload_digest, why, policy)
                 SELECT id, workspace_id, payload_digest, {why}, {policy} FROM inserted)
             SELECT * FROM inserted",
            insert = insert_into(&["state", "approval_held"]),
            values = call.list(),
        )
        .into()
    });
    text(&STATEMENT)
}

/// The insert of a call handed to a lease that waits for it: leased under the epoch bound
/// after the call's values, with its dispatch target recorded as the lease statement records
/// it (the central bindings bound last), if that epoch is the runner's live lease; queued
/// otherwise. Its row carries what the lease reads of the connector (see `HandedRow`).
pub(super) fn handed() -> Text {
    static STATEMENT: LazyLock<Arc<str>> = LazyLock::new(|| {
        let mut params = Params::default();
        let call = Placeholders::take(&mut params);
        let epoch = params.next();
        let bindings = params.next();
        format!(
            "WITH {target},
             inserted AS (
                 {insert}
                 SELECT {values}, CASE WHEN t.connector_id IS NULL THEN 'queued' ELSE 'leased' END,
                     CASE WHEN t.connector_id IS NULL THEN NULL ELSE {epoch}::int8 END,
                     CASE WHEN t.connector_id IS NULL THEN NULL ELSE now() END,
                     t.connector_id, t.connector_revision, t.target_digest
                 FROM (SELECT 1) AS one LEFT JOIN target t ON true
                 {ON_CONFLICT})
             SELECT i.*, t.connection_revision_now, t.connector_name, t.connector_transport,
                 t.connector_command, t.connector_args, t.connector_env_names, t.connector_url,
                 t.connector_approved_revision, t.connector_created_at, t.accepted_spec_digest,
                 t.auth_kind,
                 t.connector_retired_at, t.connector_retired_by,
                 NULL::text AS parent_state, NULL::bytea AS parent_target_digest,
                 NULL::timestamptz AS parent_erased_at
             FROM inserted i LEFT JOIN target t ON i.state = 'leased'",
            target = handed_target(
                call.of("connection_id"),
                call.of("runner_ref"),
                &epoch,
                &bindings
            ),
            insert = insert_into(&[
                "state",
                "lease_epoch",
                "leased_at",
                "connector_id",
                "connector_revision",
                "target_digest",
            ]),
            values = call.list(),
        )
        .into()
    });
    text(&STATEMENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_insert_of_several_calls_numbers_each_value_once_in_order() {
        let statement = queued(2).0;
        let columns = NAMES.len();
        assert!(statement.contains(&format!("${}, 'queued'), (${}", columns, columns + 1)));
        assert!(statement.contains(&format!("${}, 'queued')", 2 * columns)));
        assert!(!statement.contains(&format!("${}", 2 * columns + 1)));
    }

    #[test]
    fn the_handed_insert_binds_its_lease_after_the_call() {
        let statement = handed().0;
        let columns = NAMES.len();
        assert!(statement.contains(&format!("${}::int8", columns + 1)));
        assert!(statement.contains(&format!("${}", columns + 2)));
    }
}
