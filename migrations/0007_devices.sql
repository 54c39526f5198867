-- Local placement: pairing a companion device, paired devices (each bound to one workspace
-- profile), operations (the immutable scope device calls run under), the receipts device runners
-- upload, and session releases waiting for a device's next heartbeat.

-- Lets other tables require that a profile belongs to their workspace.
ALTER TABLE profiles ADD CONSTRAINT profiles_workspace_id_id_key UNIQUE (workspace_id, id);

-- A pairing attempt. Only SHA-256 hashes of the short code and of the poll secret are stored.
-- pending → approved (a member approved the code; the device row exists) → collected (the
-- device fetched its credential, which is generated then and stored only as a hash).
CREATE TABLE pairings (
    id                uuid PRIMARY KEY,
    code_hash         bytea NOT NULL UNIQUE,
    poll_secret_hash  bytea NOT NULL,
    device_name       text NOT NULL,
    state             text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'collected')),
    expires_at        timestamptz NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    approved_at       timestamptz,
    collected_at      timestamptz
);

-- A paired device. Its runner reference is `device:<id>`.
CREATE TABLE devices (
    id               uuid PRIMARY KEY,
    workspace_id     uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    profile_id       uuid NOT NULL,
    name             text NOT NULL,
    pairing_id       uuid NOT NULL UNIQUE REFERENCES pairings(id),
    -- NULL until the device collects its credential.
    credential_hash  bytea UNIQUE,
    approved_by      uuid NOT NULL REFERENCES users(id),
    created_at       timestamptz NOT NULL DEFAULT now(),
    last_seen_at     timestamptz,
    revoked_at       timestamptz,
    revoked_by       uuid REFERENCES users(id),
    FOREIGN KEY (workspace_id, profile_id) REFERENCES profiles(workspace_id, id)
);
CREATE INDEX devices_workspace ON devices (workspace_id, created_at);

-- An operation: an immutable scope (workspace, environment, profile, task label). Begun by
-- exactly one principal, a user or a device.
CREATE TABLE operations (
    id              uuid PRIMARY KEY,
    workspace_id    uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    environment_id  uuid NOT NULL,
    profile_id      uuid NOT NULL,
    task            text NOT NULL CHECK (char_length(task) BETWEEN 1 AND 500),
    device_id       uuid REFERENCES devices(id),
    created_by      uuid REFERENCES users(id),
    created_at      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (workspace_id, environment_id) REFERENCES environments(workspace_id, id),
    FOREIGN KEY (workspace_id, profile_id) REFERENCES profiles(workspace_id, id),
    CHECK ((device_id IS NULL) <> (created_by IS NULL))
);

ALTER TABLE calls ADD COLUMN operation_id uuid REFERENCES operations(id);
-- The device that submitted the call, when a device did; created_by is then the user who
-- approved that device.
ALTER TABLE calls ADD COLUMN submitted_by_device uuid REFERENCES devices(id);

-- Every completion receipt a device runner uploaded, so that a repeated upload answers what
-- the first one did. No result payload: what a call retains stays on the call.
CREATE TABLE receipts (
    receipt_id   uuid PRIMARY KEY,
    call_id      uuid NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    runner_ref   text NOT NULL,
    epoch        bigint NOT NULL,
    outcome      text NOT NULL CHECK (outcome IN ('succeeded', 'tool_error', 'failed', 'unknown')),
    answer       text NOT NULL CHECK (answer IN ('recorded', 'superseded', 'fenced')),
    applied      boolean NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX receipts_call ON receipts (call_id);

-- Session releases addressed to device runners, taken by the device's next heartbeat. Kept a
-- few minutes only (the sweeper deletes older ones): a device away longer has no warm session
-- worth draining.
CREATE TABLE session_releases (
    id                 bigserial PRIMARY KEY,
    runner_ref         text NOT NULL,
    connection_id      uuid NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    client_session_id  text,
    requested_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX session_releases_runner ON session_releases (runner_ref, id);
