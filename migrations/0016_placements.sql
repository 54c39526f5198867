-- A device owner decides what runs on the device.
--
-- A connection placed on a paired device (connections.runner_device_id) runs there only once
-- the device's owner, the user who approved its pairing (devices.approved_by), has accepted
-- it for the launch spec they were shown. No row: the placement is pending (so connections
-- placed on devices before this migration are pending until their owners accept them). The
-- row holds the owner's last decision: accepted, with the digest of the spec they accepted
-- (`ConnectorSpec::digest`, 64 hex digits), or declined. An accepted placement whose digest is
-- not the connector's current spec's is pending again; the server computes that at
-- submission (`db/submit.rs`) and the device runner checks it on every leased call.
--
-- `device_id` is the device the owner decided for: the statements join on
-- `connection_id = connections.id AND device_id = connections.runner_device_id`, so a decision
-- never carries over to another device.
CREATE TABLE placements (
    connection_id  uuid PRIMARY KEY REFERENCES connections(id) ON DELETE CASCADE,
    device_id      uuid NOT NULL REFERENCES devices(id),
    state          text NOT NULL CHECK (state IN ('accepted', 'declined')),
    spec_digest    text CHECK (spec_digest ~ '^[0-9a-f]{64}$'),
    decided_by     uuid NOT NULL REFERENCES users(id),
    decided_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((state = 'accepted') = (spec_digest IS NOT NULL))
);
CREATE INDEX placements_device ON placements (device_id);
