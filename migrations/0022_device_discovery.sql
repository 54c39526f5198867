-- Device connections get a real catalog: the discovery (`tools/list`) of a connection placed
-- on a device is a call of kind `discovery`, leased, started and completed by the device's
-- runner like any call (same lease, epoch fencing, accepted placement and spec digest), and
-- its result is reconciled into `tools` by the server (`app/device_discovery.rs`).

ALTER TABLE calls DROP CONSTRAINT calls_kind_check;
ALTER TABLE calls ADD CONSTRAINT calls_kind_check CHECK (kind IN ('tool', 'lookup', 'discovery'));

-- At most one unfinished discovery per connection: asking again while one is queued or
-- running waits for that one instead of queueing another (an insert that would be a second
-- one fails on this index and the request attaches to the first).
CREATE UNIQUE INDEX calls_open_discovery ON calls (connection_id)
    WHERE kind = 'discovery' AND finished_at IS NULL;
