-- Sessions of `/mcp` clients on the 2025-11-25 protocol (initialize, `Mcp-Session-Id`), kept in
-- the database so that any replica answers a session another one started: a replica that
-- does not hold the session in memory loads its `initialize` parameters from here and replays
-- the handshake (rmcp's `SessionStore`), then serves the request.
--
-- `user_id` is the principal (a person or an agent) the session was started by: every request
-- naming the session must come from the same principal, else the session does not exist for
-- it. It is NULL only between the store of the handshake and its claim, in the same request,
-- before the client learns the id. `last_used_at` is touched when a request names the session;
-- a session not named for a day is deleted by the sweeper (`db/mcp_sessions.rs`).
CREATE TABLE mcp_sessions (
    id                 text PRIMARY KEY,
    user_id            uuid REFERENCES users(id) ON DELETE CASCADE,
    initialize_params  jsonb NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    last_used_at       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX mcp_sessions_last_used ON mcp_sessions (last_used_at);
