-- A start is a guarded update of one call by id; the planner answers it from calls_in_flight
-- (the runner's calls under one epoch), which then walked every call the runner held under
-- that epoch — and, while some transaction holds the xmin horizon back, every dead version of
-- them. With the id in the key the lookup reaches the call's own entries directly.
DROP INDEX calls_in_flight;
CREATE INDEX calls_in_flight ON calls (runner_ref, lease_epoch, id) WHERE state IN ('leased', 'running');
