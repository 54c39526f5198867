-- OAuth grants of central connections, sealed with the installation key, and the flows
-- waiting for their callback (issue 45).
--
-- `oauth_grants`: one per (connection, holder) — `shared` today, `user:<uuid>` when each
-- person holds their own. `sealed` is the grant as JSON (the client registration, the
-- authorization server's metadata, the token response with its refresh token), AES-256-GCM
-- sealed by `vault.rs` with the context `oauth-grant:<connection_id>/<holder>`, so a sealed
-- grant copied to another row does not open; `key_id` names the installation key, so
-- `admin rotate-key` re-seals it like every other sealed table. `issuer` and `resource` (the
-- MCP server URL it was obtained for) are in clear: they are not secret, and a grant whose
-- resource is no longer the connection's URL is never sent. `generation` grows with every
-- save, so that a replica holding the renewal lock sees whether another renewed meanwhile.
CREATE TABLE oauth_grants (
    connection_id  uuid NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
    holder         text NOT NULL,
    key_id         text NOT NULL,
    nonce          bytea NOT NULL,
    ciphertext     bytea NOT NULL,
    issuer         text,
    resource       text NOT NULL,
    expires_at     timestamptz,
    generation     bigint NOT NULL DEFAULT 1,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (connection_id, holder)
);

-- An authorization waiting for its callback, keyed by the SHA-256 of its `state` (the state is
-- the callback's only capability, so it is not stored in clear). `sealed` holds the PKCE
-- verifier, the expected issuer and the client the flow began with, sealed with the context
-- `oauth-pending:<hex digest>`. Any replica can answer the callback; the sweeper deletes the
-- expired ones, and a callback never uses one past `expires_at`.
CREATE TABLE oauth_pending (
    state_digest   bytea PRIMARY KEY,
    connection_id  uuid NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
    holder         text NOT NULL,
    key_id         text NOT NULL,
    nonce          bytea NOT NULL,
    ciphertext     bytea NOT NULL,
    expires_at     timestamptz NOT NULL
);
CREATE INDEX oauth_pending_expiry ON oauth_pending (expires_at);
