-- The approval gate (issue 43). A call that needs a person is inserted `awaiting_approval`
-- with a question beside it (`approvals`); approved it becomes `queued` and takes the ordinary
-- path, declined it ends `declined`, unanswered within its workspace's approval timeout it
-- ends `expired`. Neither of the last two was ever sent.
--
-- A held call must never be leasable. The queue's partial index (`calls_queued`, 0011) names
-- the columns a queued call is told apart by and that a start ack does not change (so the
-- start stays a HOT update); a held call has no epoch and no finish either, so it gets a
-- column of its own, `approval_held`, that the index's predicate excludes and only the
-- question's answer (or its expiry) changes. The lease statement, the queued-quota count and
-- the queue-expiry sweep name the same predicate (and still name the state).
ALTER TABLE calls DROP CONSTRAINT calls_state_check;
ALTER TABLE calls ADD CONSTRAINT calls_state_check CHECK (state IN ('awaiting_approval',
    'queued', 'leased', 'running', 'succeeded', 'tool_error', 'failed', 'cancelled', 'expired',
    'unknown', 'resolved', 'declined'));
ALTER TABLE calls ADD COLUMN approval_held boolean NOT NULL DEFAULT false;
ALTER TABLE calls ADD CONSTRAINT calls_held_shape CHECK (approval_held = (state = 'awaiting_approval'));
ALTER TABLE calls ADD CONSTRAINT calls_held_unleased
    CHECK (NOT approval_held OR (lease_epoch IS NULL AND finished_at IS NULL));

DROP INDEX calls_queued;
CREATE INDEX calls_queued ON calls (runner_ref, created_at)
    WHERE lease_epoch IS NULL AND finished_at IS NULL AND NOT approval_held;
-- What the approval timeout's sweep scans.
CREATE INDEX calls_awaiting ON calls (workspace_id, created_at) WHERE approval_held;

-- One question per held call: a retry of its request_id attaches to the same call, so it can
-- never ask twice. Bound to the call's canonical payload digest (its exact arguments).
CREATE TABLE approvals (
    call_id         uuid PRIMARY KEY REFERENCES calls(id) ON DELETE CASCADE,
    workspace_id    uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    payload_digest  bytea NOT NULL,
    why             text NOT NULL CHECK (why IN ('high_risk', 'destructive', 'always')),
    policy          text NOT NULL CHECK (policy IN ('default', 'destructive', 'always', 'never')),
    asked_at        timestamptz NOT NULL DEFAULT now(),
    state           text NOT NULL DEFAULT 'pending'
                        CHECK (state IN ('pending', 'approved', 'declined', 'expired')),
    decided_by      uuid REFERENCES users(id),
    decided_at      timestamptz,
    reason          text CHECK (char_length(reason) <= 2000),
    CHECK ((state IN ('approved', 'declined')) = (decided_by IS NOT NULL)),
    CHECK ((state = 'pending') = (decided_at IS NULL))
);
CREATE INDEX approvals_workspace ON approvals (workspace_id, asked_at DESC);

-- How long a question waits before its call expires; NULL: never.
ALTER TABLE workspaces ADD COLUMN approval_timeout_seconds integer
    CHECK (approval_timeout_seconds > 0);

-- The policy of each connection of a profile, and per-tool overrides.
ALTER TABLE profile_connections ADD COLUMN approval_policy text NOT NULL DEFAULT 'default'
    CHECK (approval_policy IN ('default', 'destructive', 'always', 'never'));
CREATE TABLE profile_tool_approvals (
    profile_id     uuid NOT NULL,
    connection_id  uuid NOT NULL,
    tool_name      text NOT NULL,
    policy         text NOT NULL CHECK (policy IN ('default', 'destructive', 'always', 'never')),
    changed_by     uuid REFERENCES users(id),
    changed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (profile_id, connection_id, tool_name),
    FOREIGN KEY (profile_id, connection_id)
        REFERENCES profile_connections (profile_id, connection_id) ON DELETE CASCADE
);

-- The right to answer questions about a profile's calls.
ALTER TABLE profile_grants DROP CONSTRAINT profile_grants_grant_kind_check;
ALTER TABLE profile_grants ADD CONSTRAINT profile_grants_grant_kind_check
    CHECK (grant_kind IN ('use', 'manage', 'share', 'approve'));
