-- Connectors (installation-wide MCP server definitions), connections (a connector placed in a
-- workspace) and the cached tool catalog of each connection.
CREATE TABLE connectors (
    id                 uuid PRIMARY KEY,
    name               text NOT NULL UNIQUE,
    transport          text NOT NULL CHECK (transport IN ('stdio', 'http')),
    command            text,
    args               jsonb NOT NULL DEFAULT '[]',
    env_names          jsonb NOT NULL DEFAULT '[]',
    url                text,
    revision           bigint NOT NULL DEFAULT 1,
    -- A stdio connector runs only while approved_revision = revision.
    approved_revision  bigint,
    approved_by        uuid REFERENCES users(id),
    approved_at        timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    CHECK ((transport = 'stdio' AND command IS NOT NULL AND url IS NULL)
        OR (transport = 'http' AND url IS NOT NULL AND command IS NULL))
);

CREATE TABLE connections (
    id                    uuid PRIMARY KEY,
    workspace_id          uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name                  text NOT NULL,
    connector_id          uuid NOT NULL REFERENCES connectors(id),
    runner_ref            text NOT NULL CHECK (runner_ref = 'central' OR runner_ref LIKE 'device:%'),
    revision              bigint NOT NULL DEFAULT 1,
    last_discovery_at     timestamptz,
    last_discovery_error  text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, name),
    UNIQUE (workspace_id, id)
);

CREATE TABLE tools (
    connection_id  uuid NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    name           text NOT NULL,
    description    text,
    input_schema   jsonb NOT NULL,
    annotations    jsonb,
    available      boolean NOT NULL DEFAULT true,
    discovered_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (connection_id, name)
);
