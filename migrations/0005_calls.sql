-- Calls: one tool invocation each, identified per workspace by the client's request_id.
-- State changes are single guarded updates (WHERE state = ...), see crates/server/src/db/calls.rs.
CREATE TABLE calls (
    id                 uuid PRIMARY KEY,
    workspace_id       uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    request_id         uuid NOT NULL,
    -- SHA-256 of the canonical submitted payload, to tell a retry from a conflicting reuse.
    payload_digest     bytea NOT NULL,
    profile_id         uuid NOT NULL REFERENCES profiles(id),
    connection_id      uuid NOT NULL REFERENCES connections(id),
    connection_revision bigint NOT NULL,
    environment_id     uuid NOT NULL REFERENCES environments(id),
    tool_name          text NOT NULL,
    arguments          jsonb,
    client_session_id  text,
    timeout_seconds    integer NOT NULL CHECK (timeout_seconds BETWEEN 1 AND 3600),
    state              text NOT NULL CHECK (state IN ('queued', 'leased', 'running', 'succeeded',
                           'tool_error', 'failed', 'cancelled', 'expired', 'unknown', 'resolved')),
    runner_ref         text NOT NULL,
    lease_epoch        bigint,
    result             jsonb,
    result_truncated   boolean NOT NULL DEFAULT false,
    error_code         text,
    error_message      text,
    created_by         uuid NOT NULL REFERENCES users(id),
    created_at         timestamptz NOT NULL DEFAULT now(),
    leased_at          timestamptz,
    started_at         timestamptz,
    finished_at        timestamptz,
    UNIQUE (workspace_id, request_id)
);

-- The lease query scans only queued calls for one runner, oldest first.
CREATE INDEX calls_queued ON calls (runner_ref, created_at) WHERE state = 'queued';
CREATE INDEX calls_workspace_created ON calls (workspace_id, created_at DESC);

-- One row per runner reference: the runner lease. A process owns the runner while its lease is
-- live; every start and completion carries the epoch, and a stale epoch is rejected (fencing).
CREATE TABLE runner_leases (
    runner_ref   text PRIMARY KEY,
    epoch        bigint NOT NULL,
    holder       uuid NOT NULL,
    expires_at   timestamptz NOT NULL
);
