-- A profile grants each of its connections whole (tools NULL) or an exact set of its tools; a
-- tool that a rediscovery adds is in no set. Who last changed the set, and when.
ALTER TABLE profile_connections
    ADD COLUMN tools text[],
    ADD COLUMN changed_by uuid REFERENCES users(id),
    ADD COLUMN changed_at timestamptz;
