-- Execution profiles: which connections may run, in one environment, and who holds which
-- independent grant (use, manage, share) on them.
CREATE TABLE profiles (
    id              uuid PRIMARY KEY,
    workspace_id    uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    environment_id  uuid NOT NULL,
    name            text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, name),
    FOREIGN KEY (workspace_id, environment_id) REFERENCES environments(workspace_id, id)
);

CREATE TABLE profile_connections (
    profile_id     uuid NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
    connection_id  uuid NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    PRIMARY KEY (profile_id, connection_id)
);

CREATE TABLE profile_grants (
    profile_id  uuid NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
    user_id     uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    grant_kind  text NOT NULL CHECK (grant_kind IN ('use', 'manage', 'share')),
    granted_by  uuid REFERENCES users(id),
    granted_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (profile_id, user_id, grant_kind)
);
