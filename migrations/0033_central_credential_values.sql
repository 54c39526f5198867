-- Central connections' credential values, sealed with the installation key (issue 45): the
-- server keeps them here, never in clear. A row binds one destination of a connection (a stdio
-- server's environment variable or an HTTP server's header) to its value; the value is
-- AES-256-GCM ciphertext whose associated data names the row
-- (`credential:<connection id>/<destination>/<name>`, `app/central_credentials.rs`), so a
-- ciphertext copied to another row does not open. `key_id` names the installation key that
-- sealed it; `switchyard-server admin rotate-key` re-seals every row with a new key.
--
-- Deleting a connection deletes its values; retiring one keeps them.
CREATE TABLE central_credential_values (
    connection_id  uuid NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    destination    text NOT NULL CHECK (destination IN ('env', 'header')),
    name           text NOT NULL CHECK (name <> ''),
    key_id         text NOT NULL,
    nonce          bytea NOT NULL CHECK (length(nonce) = 12),
    ciphertext     bytea NOT NULL,
    -- Text put before a header's value (`Bearer `); not secret.
    prefix         text,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (connection_id, destination, name)
);

-- Rotation finds the rows sealed with a key other than the newest.
CREATE INDEX central_credential_values_key ON central_credential_values (key_id);
