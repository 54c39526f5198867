//! Restarting the PostgreSQL cluster under the system's feet (chaos only): `pg_ctl restart`
//! on a private cluster the script started, run as the `postgres` user when we are root.

use crate::error::{Error, Result};
use std::path::PathBuf;
use std::process::Stdio;

/// The cluster to restart.
#[derive(Clone, Debug)]
pub struct PgControl {
    /// Directory holding `pg_ctl`.
    pub bindir: PathBuf,
    /// The cluster's data directory.
    pub datadir: PathBuf,
}

impl PgControl {
    /// Restarts the cluster: `immediate` (no checkpoint; crash recovery at start, as after a
    /// power cut) or `fast` (disconnects every client, then a clean shutdown). Waits until it
    /// accepts connections again.
    pub async fn restart(&self, immediate: bool) -> Result<()> {
        let pg_ctl = self.bindir.join("pg_ctl");
        let mode = if immediate { "immediate" } else { "fast" };
        let log = self.datadir.join("server.log");
        let args = [
            "-D".to_owned(),
            self.datadir.display().to_string(),
            "-l".to_owned(),
            log.display().to_string(),
            "-m".to_owned(),
            mode.to_owned(),
            "-w".to_owned(),
            "-t".to_owned(),
            "60".to_owned(),
            "restart".to_owned(),
        ];
        let mut command = if nix::unistd::Uid::effective().is_root() {
            let mut c = tokio::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&pg_ctl);
            c
        } else {
            tokio::process::Command::new(&pg_ctl)
        };
        let output = command
            .args(args)
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(Error::io("running pg_ctl restart"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(Error::Setup(format!(
                "pg_ctl restart failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )))
        }
    }
}
