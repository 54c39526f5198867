-- The audit log: who changed what, append-only and tamper-evident (docs/AUDIT.md).
--
-- One hash chain per workspace, and one for installation-wide changes (connectors), told apart
-- by `chain`: the workspace's id, or the nil UUID for the installation. Each entry's `hash` is
-- SHA-256 over the canonical JSON of its content (everything but `seq`) and the previous
-- entry's hash (`prev_hash`, NULL for a chain's first entry), computed by the server
-- (`db/audit.rs`). `audit_heads` holds each chain's last seq and hash: an append locks its
-- chain's head row (`FOR UPDATE`), so appends to one chain are serialized and the chain never
-- forks, and verification can tell that entries were cut off its end.
--
-- No foreign keys: the log outlives what it names, and a cascade must never delete from it.
CREATE TABLE audit_heads (
    chain  uuid PRIMARY KEY,
    -- 0 and NULL until the chain's first entry.
    seq    bigint NOT NULL CHECK (seq >= 0),
    hash   bytea
);

CREATE TABLE audit_log (
    chain          uuid NOT NULL,
    seq            bigint NOT NULL CHECK (seq > 0),
    -- NULL for installation-wide entries.
    workspace_id   uuid,
    at             timestamptz NOT NULL,
    actor_kind     text NOT NULL CHECK (actor_kind IN ('user', 'device', 'system')),
    -- NULL for the system (the sweeper, the operator on the server's host).
    actor_id       uuid,
    -- The actor's name when the entry was written.
    actor_name     text NOT NULL,
    -- Stable dotted names: `connection.created`, `tool.classified`, `call.ended`, …
    action         text NOT NULL CHECK (action ~ '^[a-z_]+(\.[a-z_]+)+$'),
    object_kind    text NOT NULL,
    object_id      uuid,
    object_name    text NOT NULL,
    -- The connection the entry concerns, for a connection's history (its own changes, its
    -- tools', placements', calls').
    connection_id  uuid,
    -- Summaries of the object before and after; never a secret (no credential values,
    -- environment values, tokens or call arguments).
    before         jsonb,
    after          jsonb,
    -- The HTTP request that made the change (`x-request-id`) and its trace (`traceparent`).
    request_id     text,
    trace_id       text,
    -- For `call.*` entries: the call, so that each call event is written once.
    call_id        uuid,
    prev_hash      bytea,
    hash           bytea NOT NULL,
    PRIMARY KEY (chain, seq)
);
CREATE INDEX audit_log_connection ON audit_log (chain, connection_id, seq)
    WHERE connection_id IS NOT NULL;
CREATE UNIQUE INDEX audit_log_call_event ON audit_log (call_id, action) WHERE call_id IS NOT NULL;

-- The database refuses to change or remove an entry. (A superuser can still bypass this, e.g.
-- with `SET session_replication_role = replica`; the hash chain is what catches that.)
CREATE FUNCTION audit_log_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_refuse();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse();

-- How far the sweeper has written calls' `call.submitted` and `call.ended` entries: the last
-- call id submitted (call ids are UUIDv7, ordered by creation) and the last (finish time, id)
-- recorded. Calls from before this migration are not logged. One row, taken FOR UPDATE SKIP
-- LOCKED, so that one replica at a time writes them.
CREATE TABLE audit_call_cursor (
    singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    submitted_id   uuid NOT NULL,
    finished_at    timestamptz NOT NULL,
    finished_id    uuid NOT NULL
);
INSERT INTO audit_call_cursor (submitted_id, finished_at, finished_id)
SELECT coalesce((SELECT id FROM calls ORDER BY id DESC LIMIT 1), '00000000-0000-0000-0000-000000000000'),
       now(), 'ffffffff-ffff-ffff-ffff-ffffffffffff';
