-- The generation of every `/mcp` catalog (issue 44): one number that a transaction changing
-- anything a catalog is built from bumps as it commits. A replica keeps the catalogs it built
-- in memory, each with the generation it read before building it, and reuses one only while
-- the generation its request's authentication read is no newer (`app/mcp_catalog_cache.rs`).
--
-- The bump is a deferred constraint trigger: it runs at commit, after the transaction's own
-- statements, so the row is locked last (no lock-order cycle with the tables' rows) and only
-- for the moment of the commit; once per transaction however many rows changed. It commits
-- with the change, so a reader that sees the new generation sees the change too. An update
-- that changes nothing bumps nothing.
CREATE TABLE mcp_catalog_generation (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    generation  bigint NOT NULL
);
INSERT INTO mcp_catalog_generation (generation) VALUES (0);

CREATE FUNCTION mcp_catalog_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('switchyard.mcp_catalog_bumped', true) IS DISTINCT FROM 'on' THEN
        PERFORM set_config('switchyard.mcp_catalog_bumped', 'on', true);
        UPDATE mcp_catalog_generation SET generation = generation + 1;
    END IF;
    RETURN NULL;
END
$$;

-- What a catalog is read from: the principal's agent row and settings, its routes (grants,
-- profiles, memberships, workspaces, a profile's connections and tool lists, connections) and
-- the connections' cached tools.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['agents', 'agent_connections', 'profile_grants', 'profiles',
                             'workspace_members', 'workspaces', 'profile_connections',
                             'connections', 'tools']
    LOOP
        EXECUTE format(
            'CREATE CONSTRAINT TRIGGER mcp_catalog_written AFTER INSERT OR DELETE ON %I
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION mcp_catalog_changed()',
            t);
        EXECUTE format(
            'CREATE CONSTRAINT TRIGGER mcp_catalog_changed AFTER UPDATE ON %I
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
             WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION mcp_catalog_changed()',
            t);
    END LOOP;
END
$$;
