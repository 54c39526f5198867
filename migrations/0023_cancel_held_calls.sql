-- A call that awaits approval can be cancelled (issue 43): the call ends `cancelled`, never
-- sent, and its question is closed as `cancelled` in the same statement (`db/calls/cancel.rs`),
-- so it is no longer pending and a later answer is refused `approval_decided`. Nobody decided
-- it: like an expired question, a cancelled one has a `decided_at` and no `decided_by`.
ALTER TABLE approvals DROP CONSTRAINT approvals_state_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_state_check
    CHECK (state IN ('pending', 'approved', 'declined', 'expired', 'cancelled'));
