-- Browser sessions of the web UI. The cookie carries a random session id; only its SHA-256
-- hash is stored. A session belongs to the API token it was signed in with: revoking the token
-- ends its sessions. The CSRF token is random per session and only ever sent in forms.
CREATE TABLE web_sessions (
    id_hash       bytea PRIMARY KEY,
    user_id       uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    token_id      uuid NOT NULL REFERENCES api_tokens(id) ON DELETE CASCADE,
    csrf_token    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz NOT NULL DEFAULT now(),
    -- Slides with use (idle timeout), never past created_at + the absolute lifetime.
    expires_at    timestamptz NOT NULL
);
CREATE INDEX web_sessions_expiry ON web_sessions (expires_at);
