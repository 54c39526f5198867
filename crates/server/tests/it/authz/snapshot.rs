//! "Nothing was written": a fingerprint of every row of every table of the public schema, in
//! one query, compared before and after a request.

use sqlx::PgPool;
use std::collections::BTreeMap;

/// Columns that requests which write nothing still move, each with why; left out of the
/// fingerprint (the rest of their rows is not).
const MOVING: [(&str, &str, &str); 4] = [
    (
        "web_sessions",
        "last_used_at",
        "every signed-in request renews its session",
    ),
    ("web_sessions", "expires_at", "and slides its idle expiry"),
    (
        "devices",
        "last_seen_at",
        "every request of a device records that it was seen",
    ),
    (
        "runner_leases",
        "expires_at",
        "a device's requests renew its lease; the liveness flusher writes renewals later",
    ),
];

/// The fingerprint query: one row per table, its name and the md5 of its rows' JSON.
pub async fn query(pool: &PgPool) -> String {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    tables
        .iter()
        .map(|table| {
            let dropped: String = MOVING
                .iter()
                .filter(|(t, _, _)| t == table)
                .map(|(_, column, _)| format!(" - '{column}'"))
                .collect();
            format!(
                "SELECT '{table}', md5(coalesce(string_agg(r, ',' ORDER BY r), '')) \
                 FROM (SELECT (to_jsonb(t){dropped})::text AS r FROM \"{table}\" t) rows"
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ")
}

/// Each table's fingerprint.
pub async fn take(pool: &PgPool, query: &str) -> BTreeMap<String, String> {
    sqlx::query_as::<_, (String, String)>(sqlx::AssertSqlSafe(query.to_owned()))
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// The tables whose rows differ between two fingerprints.
pub fn changed(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    after
        .iter()
        .filter(|(table, hash)| before.get(*table) != Some(hash))
        .map(|(table, _)| table.clone())
        .collect()
}
