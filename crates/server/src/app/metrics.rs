//! `/metrics`: this process's instruments (`crate::metrics`) and what a scrape reads from the
//! database — calls in each active state from the queue's indexes, devices' last sight, the
//! connection namespaces that name the duration histogram's series.

use super::App;
use crate::error::AppResult;
use crate::metrics::{Metrics, Scraped};

impl App {
    /// The metrics of this process and of the database it serves, in the Prometheus text
    /// format. Three small reads; nothing on the call path waits for them.
    pub async fn metrics_render(&self) -> AppResult<String> {
        let scraped = Scraped {
            active: self.db.metrics_active_calls().await?,
            devices: self.db.metrics_devices().await?,
            connections: self
                .db
                .metrics_connection_names()
                .await?
                .into_iter()
                .map(|connection| (connection.id, connection.namespace))
                .collect(),
        };
        Ok(self.metrics.render(&scraped))
    }

    /// This process's instruments.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}
