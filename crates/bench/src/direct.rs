//! The baseline: a direct rmcp call to a warm fixture server over stdio, with no Switchyard in
//! between. Every added-latency figure is measured against this, in the same run.

use crate::error::{Error, Result};
use crate::stats::ms;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

/// A warm MCP session to the fixture, spawned over stdio in its own process group.
pub struct DirectFixture {
    client: RunningService<RoleClient, ()>,
}

impl DirectFixture {
    /// Spawns `fixture stdio` and completes the MCP handshake.
    pub async fn start(fixture: &Path) -> Result<DirectFixture> {
        let mut command = tokio::process::Command::new(fixture);
        command.arg("stdio").process_group(0).kill_on_drop(true);
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .map_err(Error::io("spawning the fixture for the direct baseline"))?;
        let client = ()
            .serve(transport)
            .await
            .map_err(|e| Error::Setup(format!("MCP handshake with the fixture: {e}")))?;
        Ok(DirectFixture { client })
    }

    /// One `noop` call; its round-trip time in milliseconds.
    pub async fn noop(&self) -> Result<f64> {
        let started = Instant::now();
        self.client
            .call_tool(CallToolRequestParams::new("noop"))
            .await
            .map_err(|e| Error::Setup(format!("direct noop call: {e}")))?;
        Ok(ms(started.elapsed()))
    }

    /// Ends the session (the fixture exits when its stdin closes).
    pub async fn close(self) {
        let _ = self.client.cancel().await;
    }
}
