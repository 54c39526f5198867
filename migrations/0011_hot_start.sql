-- A start ack (leased → running, started_at) can be a HOT update: a new row version on the
-- same page with no new index entries. PostgreSQL allows that only when the update changes no
-- column an index names, in its key or in its predicate, and the two partial indexes of the
-- queue named `state`. They now name the columns that tell the same states apart and that a
-- start does not change: a call is queued while it has no lease epoch and no finish, in flight
-- (leased or running) while it has an epoch and no finish. The checks hold every queued call
-- and every call in flight to that shape, so that none can be missing from its index (the
-- statements still name the states too).
ALTER TABLE calls ADD CONSTRAINT calls_queued_shape
    CHECK (state <> 'queued' OR (lease_epoch IS NULL AND finished_at IS NULL));
ALTER TABLE calls ADD CONSTRAINT calls_in_flight_shape
    CHECK (state NOT IN ('leased', 'running') OR (lease_epoch IS NOT NULL AND finished_at IS NULL));

DROP INDEX calls_queued;
CREATE INDEX calls_queued ON calls (runner_ref, created_at)
    WHERE lease_epoch IS NULL AND finished_at IS NULL;
DROP INDEX calls_in_flight;
CREATE INDEX calls_in_flight ON calls (runner_ref, lease_epoch, id)
    WHERE lease_epoch IS NOT NULL AND finished_at IS NULL;
-- Room on each page for the start's new version: an insert leaves a tenth of the page free.
ALTER TABLE calls SET (fillfactor = 90);
