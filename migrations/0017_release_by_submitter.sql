-- Warm sessions are keyed by connection, profile and submitter, so a release names whose
-- sessions it drains: the releasing user's, under any of their profiles. A device runner takes
-- its releases from this table with its heartbeat; a row without a user (recorded before this
-- column) drains every submitter's sessions with its key, as releases did then.
ALTER TABLE session_releases ADD COLUMN user_id uuid REFERENCES users(id) ON DELETE CASCADE;
