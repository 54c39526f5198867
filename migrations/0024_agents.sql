-- Agents as principals (issue 44). An agent is a `users` row of kind 'agent' — so its token is
-- an ordinary `api_tokens` row, its grants ordinary `profile_grants`, its calls ordinary calls
-- with the agent as submitter — plus an `agents` row: the workspace it belongs to, its name
-- there and how it sees tools. Its user name is `<agent>@<workspace>`, which no person's name
-- can be (`@` is outside the name alphabet). It is a member of its one workspace with role
-- 'agent'. Agent tokens are accepted on `/mcp` only, so an agent can never approve, classify
-- or manage.
ALTER TABLE users
    ADD COLUMN kind text NOT NULL DEFAULT 'person' CHECK (kind IN ('person', 'agent'));

ALTER TABLE workspace_members DROP CONSTRAINT workspace_members_role_check;
ALTER TABLE workspace_members
    ADD CONSTRAINT workspace_members_role_check CHECK (role IN ('member', 'admin', 'agent'));

CREATE TABLE agents (
    user_id       uuid PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          text NOT NULL,
    -- `tools`: the granted tools themselves (some behind search when deferred); `menu`: the
    -- three provider-menu tools.
    mode          text NOT NULL DEFAULT 'tools' CHECK (mode IN ('tools', 'menu')),
    -- Every connection's tools reach the model through search.
    defer_all     boolean NOT NULL DEFAULT false,
    created_by    uuid NOT NULL REFERENCES users(id),
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz,
    revoked_by    uuid REFERENCES users(id),
    UNIQUE (workspace_id, name)
);

-- Per agent × connection settings; a connection without a row has the defaults.
CREATE TABLE agent_connections (
    agent_id           uuid NOT NULL REFERENCES agents(user_id) ON DELETE CASCADE,
    connection_id      uuid NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    include            text[] NOT NULL DEFAULT '{}',
    exclude            text[] NOT NULL DEFAULT '{}',
    read_only          boolean NOT NULL DEFAULT false,
    non_destructive    boolean NOT NULL DEFAULT false,
    idempotent         boolean NOT NULL DEFAULT false,
    defer              boolean NOT NULL DEFAULT false,
    approve            text CHECK (approve IN ('default', 'destructive', 'always', 'never')),
    auth_failure       text NOT NULL DEFAULT 'stop' CHECK (auth_failure IN ('stop', 'degrade')),
    tool_sync_failure  text NOT NULL DEFAULT 'warn' CHECK (tool_sync_failure IN ('warn', 'silent')),
    announce           text NOT NULL DEFAULT 'auto' CHECK (announce IN ('auto', 'never')),
    changed_by         uuid NOT NULL REFERENCES users(id),
    changed_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, connection_id)
);

-- Whether a connection's tools reach agents as `<namespace>__<tool>` (the default) or under
-- their own names.
ALTER TABLE connections ADD COLUMN prefix_tools boolean NOT NULL DEFAULT true;
