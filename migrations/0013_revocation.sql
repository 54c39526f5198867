-- Cutting access off.
--
-- Personal API tokens their users manage: a name to tell them apart, an optional expiry, and
-- who revoked one (the user themself, or NULL: the operator with `admin revoke-token`). A token
-- authenticates while it is neither revoked nor expired; its web sessions end with it.
ALTER TABLE api_tokens
    ADD COLUMN name text NOT NULL DEFAULT 'initial',
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN revoked_by uuid REFERENCES users(id);
ALTER TABLE api_tokens ALTER COLUMN name DROP DEFAULT;
CREATE INDEX api_tokens_user ON api_tokens (user_id, created_at);

-- Who took access away, what and when: one row per token revoked, member removed or grant
-- revoked, written in the transaction that made the change. Rows are only ever inserted.
CREATE TABLE access_changes (
    id            uuid PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    -- NULL: the operator, on the server's host.
    actor_id      uuid REFERENCES users(id),
    action        text NOT NULL CHECK (action IN ('token_revoked', 'member_removed', 'grant_revoked')),
    workspace_id  uuid REFERENCES workspaces(id),
    subject       jsonb NOT NULL
);
CREATE INDEX access_changes_at ON access_changes (at);
