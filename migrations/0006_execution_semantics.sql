-- Cancellation requests for dispatched calls, and result retention.
ALTER TABLE calls ADD COLUMN cancel_requested_at timestamptz;
-- Set when inputs and results were erased by retention; reads then show a minimal disposition.
ALTER TABLE calls ADD COLUMN retention_expired_at timestamptz;
CREATE INDEX calls_retention ON calls (finished_at) WHERE retention_expired_at IS NULL AND finished_at IS NOT NULL;

-- The last sanitized lifecycle events of each connection (sessions, processes, discovery).
CREATE TABLE connection_events (
    id             bigserial PRIMARY KEY,
    connection_id  uuid NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    kind           text NOT NULL,
    detail         jsonb NOT NULL DEFAULT '{}',
    runner_ref     text,
    at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX connection_events_recent ON connection_events (connection_id, id DESC);

-- The lease sweeper looks for calls held under expired runner leases.
CREATE INDEX calls_in_flight ON calls (runner_ref, lease_epoch) WHERE state IN ('leased', 'running');
