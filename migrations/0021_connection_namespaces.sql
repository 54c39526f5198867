-- Every connection gets a namespace: a slug of 2–24 lower-case letters, digits and
-- underscores, unique within its workspace. It is what agent-facing tool names are made of
-- (`slug__tool`), so it is short, stable and safe in any client's tool-name alphabet.
--
-- Existing connections get one derived from their name, as the server derives one when a
-- connection is created without it (`app/names.rs`, `derive_namespace`): lower-cased, every run
-- of other characters turned into `_`, cut to 24 characters, padded with `_` to 2; a slug
-- already taken in the workspace gets the first free suffix `_2`, `_3`, … (the oldest
-- connection keeps the plain slug).

ALTER TABLE connections ADD COLUMN namespace text;

DO $$
DECLARE
    row record;
    base text;
    candidate text;
    n integer;
BEGIN
    FOR row IN SELECT id, workspace_id, name FROM connections ORDER BY created_at, id LOOP
        base := left(regexp_replace(lower(row.name), '[^a-z0-9_]+', '_', 'g'), 24);
        -- rpad also cuts a longer string: pad only a short one.
        IF length(base) < 2 THEN
            base := rpad(base, 2, '_');
        END IF;
        candidate := base;
        n := 1;
        WHILE EXISTS (
            SELECT 1 FROM connections
            WHERE workspace_id = row.workspace_id AND namespace = candidate
        ) LOOP
            n := n + 1;
            candidate := left(base, 24 - length(n::text) - 1) || '_' || n::text;
        END LOOP;
        UPDATE connections SET namespace = candidate WHERE id = row.id;
    END LOOP;
END
$$;

ALTER TABLE connections
    ALTER COLUMN namespace SET NOT NULL,
    ADD CONSTRAINT connections_namespace_slug CHECK (namespace ~ '^[a-z0-9_]{2,24}$'),
    ADD CONSTRAINT connections_workspace_namespace UNIQUE (workspace_id, namespace);
