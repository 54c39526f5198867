-- Retiring connectors, connections and profiles instead of deleting them.
--
-- A retired object runs nothing and accepts nothing new, but stays, so that every call, event
-- and result that names it stays readable. `retired_at` says since when (NULL: in service),
-- `retired_by` who retired it. The submit read and the start ack read `retired_at` of the
-- call's connection, its connector and its profile (`db/retire.rs`); no index is needed, each
-- is read by primary key.
ALTER TABLE connectors
    ADD COLUMN retired_at timestamptz,
    ADD COLUMN retired_by uuid REFERENCES users(id);
ALTER TABLE connections
    ADD COLUMN retired_at timestamptz,
    ADD COLUMN retired_by uuid REFERENCES users(id);
ALTER TABLE profiles
    ADD COLUMN retired_at timestamptz,
    ADD COLUMN retired_by uuid REFERENCES users(id);

-- A retired connection's tools stay in its catalog, marked retired with it. Restoring the
-- connection clears the mark, and empties every profile's set of its tools (the tools come back
-- unusable until granted again).
ALTER TABLE tools ADD COLUMN retired_at timestamptz;

-- Retiring and restoring are recorded beside the other changes of access.
ALTER TABLE access_changes DROP CONSTRAINT access_changes_action_check;
ALTER TABLE access_changes ADD CONSTRAINT access_changes_action_check CHECK (action IN (
    'token_revoked', 'member_removed', 'grant_revoked',
    'connector_retired', 'connector_restored', 'connection_retired', 'connection_restored',
    'profile_retired', 'profile_restored'));
