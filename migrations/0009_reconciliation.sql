-- Uncertain completion: receipt policies and lookups, observations and resolutions recorded
-- beside the original attempt (never over it), evidence capture, and erasure.

-- A call is an ordinary tool call or a read-only receipt lookup run for an unknown call.
ALTER TABLE calls ADD COLUMN kind text NOT NULL DEFAULT 'tool' CHECK (kind IN ('tool', 'lookup'));
ALTER TABLE calls ADD COLUMN parent_call_id uuid REFERENCES calls(id) ON DELETE CASCADE;
ALTER TABLE calls ADD CONSTRAINT calls_lookup_parent CHECK ((kind = 'lookup') = (parent_call_id IS NOT NULL));
CREATE INDEX calls_parent ON calls (parent_call_id) WHERE parent_call_id IS NOT NULL;
-- The target a call was dispatched to, recorded when it is leased: the connector revision and
-- a SHA-256 over runner, connection and connector revisions, transport, command, arguments,
-- URL and the credential binding's references (never values). A lookup runs only while the
-- digest is what its unknown call was dispatched to.
ALTER TABLE calls ADD COLUMN connector_id uuid REFERENCES connectors(id);
ALTER TABLE calls ADD COLUMN connector_revision bigint;
ALTER TABLE calls ADD COLUMN target_digest bytea;
-- unknown → resolved keeps the attempt's own record; the outcome it was settled with is here.
ALTER TABLE calls ADD COLUMN resolution_outcome text CHECK (resolution_outcome IN ('succeeded', 'not_applied', 'failed'));
ALTER TABLE calls ADD CONSTRAINT calls_resolution_outcome CHECK ((state = 'resolved') = (resolution_outcome IS NOT NULL));
-- Set when the call's evidence was erased: later receipts for it are fenced.
ALTER TABLE calls ADD COLUMN evidence_erased_at timestamptz;

-- A connection's approved receipt lookup: a read-only tool of the same connector and the
-- template of its arguments (`{{request_id}}`, `{{call_id}}`, `{{tool_name}}` in strings).
CREATE TABLE receipt_policies (
    connection_id  uuid PRIMARY KEY REFERENCES connections(id) ON DELETE CASCADE,
    tool_name      text NOT NULL,
    arguments      jsonb NOT NULL,
    approved_by    uuid NOT NULL REFERENCES users(id),
    approved_at    timestamptz NOT NULL DEFAULT now()
);

-- What a lookup or a late receipt reported about an unknown call. Erasure blanks the output
-- and keeps the row (source, report, times).
CREATE TABLE observations (
    id                 uuid PRIMARY KEY,
    call_id            uuid NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    source             text NOT NULL CHECK (source IN ('lookup', 'late_receipt')),
    lookup_call_id     uuid UNIQUE REFERENCES calls(id) ON DELETE CASCADE,
    runner_ref         text NOT NULL,
    epoch              bigint,
    reported           text NOT NULL CHECK (reported IN ('applied', 'not_applied', 'failed', 'unknown')),
    output             jsonb,
    recorded_at        timestamptz NOT NULL DEFAULT now(),
    output_expired_at  timestamptz,
    erased_at          timestamptz,
    CHECK ((source = 'lookup') = (lookup_call_id IS NOT NULL))
);
CREATE INDEX observations_call ON observations (call_id, recorded_at);
CREATE INDEX observations_retention ON observations (recorded_at) WHERE output IS NOT NULL;

-- Published evidence: a completed result captured under the workspace's capture policy, with
-- its scope, identity, target and receipt lineage. Erasure blanks the output, keeps the row.
CREATE TABLE evidence_records (
    id                  uuid PRIMARY KEY,
    workspace_id        uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    call_id             uuid NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    request_id          uuid NOT NULL,
    kind                text NOT NULL,
    parent_call_id      uuid,
    observation_id      uuid,
    profile_id          uuid NOT NULL,
    environment_id      uuid NOT NULL,
    operation_id        uuid,
    tool_name           text NOT NULL,
    connection_id       uuid NOT NULL,
    connector_id        uuid,
    connector_revision  bigint,
    runner_ref          text NOT NULL,
    outcome             text NOT NULL CHECK (outcome IN ('succeeded', 'tool_error', 'resolved')),
    resolution_outcome  text,
    output              jsonb,
    output_truncated    boolean NOT NULL,
    lineage             jsonb NOT NULL,
    captured_at         timestamptz NOT NULL,
    published_at        timestamptz NOT NULL DEFAULT now(),
    erased_at           timestamptz
);
CREATE INDEX evidence_records_call ON evidence_records (call_id);
CREATE INDEX evidence_records_parent ON evidence_records (parent_call_id) WHERE parent_call_id IS NOT NULL;

-- Who settled an unknown call and how: one per call. Explanations are removed one hour after
-- recording or when their evidence is erased; who, when and the outcome remain.
CREATE TABLE resolutions (
    id                      uuid PRIMARY KEY,
    call_id                 uuid NOT NULL UNIQUE REFERENCES calls(id) ON DELETE CASCADE,
    workspace_id            uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    source                  text NOT NULL CHECK (source IN ('observation', 'caller')),
    outcome                 text NOT NULL CHECK (outcome IN ('succeeded', 'not_applied', 'failed')),
    observation_id          uuid REFERENCES observations(id),
    request_id              uuid,
    payload_digest          bytea,
    evidence_id             uuid REFERENCES evidence_records(id),
    explanation             text CHECK (char_length(explanation) <= 2000),
    explanation_removed_at  timestamptz,
    resolved_by             uuid REFERENCES users(id),
    resolved_at             timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, request_id),
    CHECK ((source = 'observation') = (observation_id IS NOT NULL)),
    CHECK ((source = 'caller') = (request_id IS NOT NULL AND resolved_by IS NOT NULL AND evidence_id IS NOT NULL))
);
CREATE INDEX resolutions_explanations ON resolutions (resolved_at) WHERE explanation IS NOT NULL;

-- A workspace's capture policy (off by default: no row means off) and the counters of its
-- pending-evidence queue, kept in the same transactions that change the queue.
CREATE TABLE capture_policies (
    workspace_id                  uuid PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    capture_managed_tool_results  boolean NOT NULL DEFAULT false,
    pending_records               integer NOT NULL DEFAULT 0 CHECK (pending_records >= 0),
    pending_bytes                 bigint NOT NULL DEFAULT 0 CHECK (pending_bytes >= 0),
    dropped                       bigint NOT NULL DEFAULT 0,
    expired                       bigint NOT NULL DEFAULT 0,
    updated_by                    uuid REFERENCES users(id),
    updated_at                    timestamptz
);

-- Evidence captured with a completion, waiting to be published into evidence_records. Its id
-- becomes the evidence record's id. Retried at most 60 s apart until its 30-day deadline.
CREATE TABLE pending_evidence (
    id                  uuid PRIMARY KEY,
    workspace_id        uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    call_id             uuid NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    request_id          uuid NOT NULL,
    kind                text NOT NULL,
    parent_call_id      uuid,
    observation_id      uuid,
    profile_id          uuid NOT NULL,
    environment_id      uuid NOT NULL,
    operation_id        uuid,
    tool_name           text NOT NULL,
    connection_id       uuid NOT NULL,
    connector_id        uuid,
    connector_revision  bigint,
    runner_ref          text NOT NULL,
    outcome             text NOT NULL,
    resolution_outcome  text,
    output              jsonb,
    output_truncated    boolean NOT NULL,
    size_bytes          bigint NOT NULL,
    captured_at         timestamptz NOT NULL DEFAULT now(),
    attempts            integer NOT NULL DEFAULT 0,
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    deadline_at         timestamptz NOT NULL,
    last_error          text
);
CREATE INDEX pending_evidence_due ON pending_evidence (next_attempt_at);
CREATE INDEX pending_evidence_call ON pending_evidence (call_id);
