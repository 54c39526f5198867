-- A connection's device runner as a uuid column beside its runner reference, so statements
-- find the device by its id instead of taking the reference apart. The server writes
-- references as `central` or `device:` and a canonical UUID (RunnerRef); a reference of any
-- other shape now fails its insert.
ALTER TABLE connections ADD COLUMN runner_device_id uuid
    GENERATED ALWAYS AS (
        CASE WHEN runner_ref LIKE 'device:%' THEN substr(runner_ref, 8)::uuid END
    ) STORED;
ALTER TABLE connections ADD CONSTRAINT connections_runner_shape
    CHECK (runner_ref = 'central' OR runner_device_id IS NOT NULL);
