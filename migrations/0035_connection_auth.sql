-- How a connection authenticates to its MCP server, and whether it is authorized now (issue
-- 45). One row per connection whose auth settings were set (`PUT …/connections/{c}/auth`) or
-- that was authorized; a connection without one is `kind` unknown and needs nothing known.
--
-- `kind` NULL means "discovered": the first authorization asks the server (a 401 with a
-- Bearer challenge means oauth) and records what it found. `credential` is whose credential
-- it sends; only `shared` is served for central connections today (the app refuses `user`).
-- `state` is written by the app in guarded single statements: `authorized` when a grant is
-- stored or renewed, `auth_required` when renewal is refused for good, `expired` when the
-- access token lapsed with nothing to renew it, `needs_authorization` when the credential is
-- emptied (revoked, or the kind or URL changed). `resource` is the MCP server URL the
-- settings were made for: a grant obtained for another URL is not sent. `authorized_at` is when
-- a person last completed an authorization (a renewal does not change it), so that whoever
-- waits for a consent sees it land even over an earlier grant.
CREATE TABLE connection_auth (
    connection_id      uuid PRIMARY KEY REFERENCES connections (id) ON DELETE CASCADE,
    kind               text CHECK (kind IN ('none', 'token', 'oauth')),
    scopes             text[] NOT NULL DEFAULT '{}',
    client_id_env      text,
    client_secret_env  text,
    credential         text NOT NULL DEFAULT 'shared' CHECK (credential IN ('shared', 'user')),
    state              text NOT NULL DEFAULT 'needs_authorization'
        CHECK (state IN ('needs_authorization', 'authorized', 'auth_required', 'expired')),
    authorized_at      timestamptz,
    updated_at         timestamptz NOT NULL DEFAULT now()
);
