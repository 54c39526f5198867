-- Evidence expires. A workspace keeps its evidence records `evidence_retention_days` (30 unless
-- an admin sets it; a workspace with no capture policy row keeps the default) after they were
-- captured; then the sweeper deletes them. The call keeps its disposition (state, outcome,
-- error code, times); a caller's resolution that cited an expired record keeps who resolved
-- it, when and with what outcome, and its citation becomes NULL.
ALTER TABLE capture_policies ADD COLUMN evidence_retention_days integer NOT NULL DEFAULT 30
    CHECK (evidence_retention_days BETWEEN 1 AND 3650);

ALTER TABLE resolutions DROP CONSTRAINT resolutions_evidence_id_fkey,
    ADD CONSTRAINT resolutions_evidence_id_fkey FOREIGN KEY (evidence_id)
        REFERENCES evidence_records(id) ON DELETE SET NULL;
ALTER TABLE resolutions DROP CONSTRAINT resolutions_check1,
    ADD CONSTRAINT resolutions_caller_check
        CHECK ((source = 'caller') = (request_id IS NOT NULL AND resolved_by IS NOT NULL));

-- The sweeper finds expired records by capture time (the shortest period is one day).
CREATE INDEX evidence_records_captured ON evidence_records (captured_at);
