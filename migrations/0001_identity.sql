-- Users and their personal API tokens. Tokens are stored as SHA-256 hashes only.
CREATE TABLE users (
    id          uuid PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    is_owner    boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
    id          uuid PRIMARY KEY,
    user_id     uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    token_hash  bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
