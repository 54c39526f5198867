//! Spec pins: per connection, the digest of the launch spec this device last ran
//! (`device::pins` decides with them). Kept in the outbox so that they outlive the process.

use super::{Outbox, OutboxError, now_ms, schema};
use rusqlite::params;
use std::collections::HashMap;
use switchyard_protocol::ConnectionId;
use switchyard_protocol::api::SpecDigest;

impl Outbox {
    /// Every connection's pinned spec digest.
    pub fn spec_pins(&self) -> Result<HashMap<ConnectionId, SpecDigest>, OutboxError> {
        let db = self.db();
        let mut statement = db.prepare_cached("SELECT connection_id, digest FROM spec_pins")?;
        let rows = statement.query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })?;
        let mut pins = HashMap::new();
        for row in rows {
            let (connection, digest) = row?;
            let connection = schema::parse_uuid("connection id", &connection)?;
            pins.insert(ConnectionId(connection), SpecDigest(digest));
        }
        Ok(pins)
    }

    /// Pins `digest` as the spec this device runs for `connection` (synced, like a start).
    pub fn pin_spec(
        &self,
        connection: ConnectionId,
        digest: &SpecDigest,
    ) -> Result<(), OutboxError> {
        self.db()
            .prepare_cached(
                "INSERT INTO spec_pins (connection_id, digest, pinned_at_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (connection_id) DO UPDATE SET digest = excluded.digest,
                     pinned_at_ms = excluded.pinned_at_ms",
            )?
            .execute(params![connection.to_string(), digest.0, now_ms()])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_protocol::DeviceId;

    #[test]
    fn a_pin_outlives_the_outbox_that_wrote_it_and_is_replaced_by_the_next() {
        let dir = std::env::temp_dir().join(format!("switchyard-pins-{}", uuid::Uuid::new_v4()));
        let device = DeviceId::new();
        let connection = ConnectionId::new();
        let (a, b) = (SpecDigest("a".repeat(64)), SpecDigest("b".repeat(64)));
        {
            let outbox = Outbox::open(&dir, device).unwrap();
            assert!(outbox.spec_pins().unwrap().is_empty());
            outbox.pin_spec(connection, &a).unwrap();
            outbox.pin_spec(connection, &b).unwrap();
        }
        let outbox = Outbox::open(&dir, device).unwrap();
        assert_eq!(
            outbox.spec_pins().unwrap(),
            HashMap::from([(connection, b)])
        );
    }
}
