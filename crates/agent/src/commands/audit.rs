//! `switchyard audit list|export|verify`: a workspace's audit log (workspace admins and
//! installation owners), or with `--installation` the installation's own (owners).

use crate::cli::{AuditCommand, AuditLog};
use crate::client::Client;
use crate::error::CliError;
use crate::output::{Output, Table, print_json, time};
use switchyard_protocol::api::{AuditEntryView, AuditVerification};

/// Runs an `audit` subcommand.
pub async fn run(client: &Client, out: Output, cmd: AuditCommand) -> Result<(), CliError> {
    match cmd {
        AuditCommand::List {
            log,
            connection,
            actor,
            since,
        } => {
            let mut query = Vec::new();
            for (name, value) in [
                ("connection", &connection),
                ("actor", &actor),
                ("since", &since),
            ] {
                if let Some(value) = value {
                    query.push((name, value.as_str()));
                }
            }
            let reply = client.get_with_query(&log.path(&[]), &query).await?;
            out.reply(&reply, |list: Vec<AuditEntryView>| {
                let mut table = Table::new(["SEQ", "AT", "ACTOR", "ACTION", "OBJECT"]);
                for entry in list {
                    table.row([
                        entry.seq.to_string(),
                        time(&entry.at),
                        format!("{} ({:?})", entry.actor.name, entry.actor.kind).to_lowercase(),
                        entry.action,
                        format!("{} {}", entry.object.kind, entry.object.name),
                    ]);
                }
                table.render_or("no entries")
            })
        }
        AuditCommand::Export { log } => {
            // Page the list back to entry 1 (the export route answers JSON lines, which the
            // client does not read), then print oldest first, one entry per line.
            let mut entries: Vec<serde_json::Value> = Vec::new();
            loop {
                let before = entries
                    .last()
                    .and_then(|e| e["seq"].as_i64())
                    .map(|seq| seq.to_string());
                let mut query = vec![("limit", "1000")];
                if let Some(before) = &before {
                    query.push(("before", before.as_str()));
                }
                let page: Vec<serde_json::Value> = client
                    .get_with_query(&log.path(&[]), &query)
                    .await?
                    .parse()?;
                if page.is_empty() {
                    break;
                }
                entries.extend(page);
            }
            for entry in entries.iter().rev() {
                println!("{entry}");
            }
            Ok(())
        }
        AuditCommand::Verify { log } => {
            let reply = client.get(&log.path(&["verify"])).await?;
            let found: AuditVerification = reply.parse()?;
            if out.is_json() {
                print_json(&reply);
            } else if found.broken.is_none() {
                println!(
                    "intact: {} entries, each chained to the one before",
                    found.entries
                );
            }
            match found.broken {
                None => Ok(()),
                Some(broken) => Err(CliError::AuditBroken {
                    log: log.name(),
                    seq: broken.seq,
                    message: broken.message,
                }),
            }
        }
    }
}

impl AuditLog {
    /// The API path of this log's route `rest` (`/audit…` or `/workspaces/WS/audit…`).
    fn path<'a>(&'a self, rest: &[&'a str]) -> Vec<&'a str> {
        let mut path = match &self.ws {
            Some(ws) => vec!["workspaces", ws.as_str(), "audit"],
            None => vec!["audit"],
        };
        path.extend_from_slice(rest);
        path
    }

    /// The log, as an error message names it.
    fn name(&self) -> String {
        match &self.ws {
            Some(ws) => format!("workspace `{ws}`"),
            None => "the installation".to_owned(),
        }
    }
}
