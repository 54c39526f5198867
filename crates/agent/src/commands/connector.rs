//! `switchyard connector add|import|approve|list|retire|restore`: installation-wide connector definitions.
//!
//! Connectors carry environment variable *names* only. `--env NAME=value` is refused locally
//! without echoing the value, because secrets never belong in a connector or on a command line.

use crate::cli::{ConnectorAdd, ConnectorCommand};
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::input::read_json_object;
use crate::output::{Output, Table, retired_state};
use switchyard_protocol::api::{
    ConnectorSpec, ConnectorView, CreateConnector, ImportReport, Transport,
};

/// Runs a `connector` subcommand.
pub async fn run(client: &Client, out: Output, cmd: ConnectorCommand) -> Result<(), CliError> {
    match cmd {
        ConnectorCommand::Add(add) => {
            let body = create_request(add)?;
            let reply = client.post(&["connectors"], Body::of(&body)).await?;
            out.reply(&reply, |c: ConnectorView| {
                let mut text = format!("created connector {} ({}): {}", c.name, c.id, shown(&c));
                if !c.approved {
                    text.push_str(&format!(
                        "\nnot approved yet: an installation owner runs `switchyard connector approve {}`",
                        c.name
                    ));
                }
                text
            })
        }
        ConnectorCommand::Import { file } => {
            let bytes = read_json_object(&file)?;
            let reply = client
                .post(&["connectors", "import"], Body::Json(bytes))
                .await?;
            out.reply(&reply, |report: ImportReport| {
                for warning in &report.warnings {
                    eprintln!("warning: {warning}");
                }
                connector_table(report.created).render_or("no connectors imported")
            })
        }
        ConnectorCommand::Approve { name } => {
            let reply = client
                .post(&["connectors", &name, "approve"], Body::Empty)
                .await?;
            out.reply(&reply, |c: ConnectorView| {
                format!(
                    "approved connector {} revision {}: {}",
                    c.name,
                    c.revision,
                    shown(&c)
                )
            })
        }
        ConnectorCommand::Retire { name } => retire(client, out, &name, "retire").await,
        ConnectorCommand::Restore { name } => retire(client, out, &name, "restore").await,
        ConnectorCommand::List => {
            let reply = client.get(&["connectors"]).await?;
            out.reply(&reply, |list: Vec<ConnectorView>| {
                connector_table(list).render_or("no connectors")
            })
        }
    }
}

/// `connector retire` or `connector restore` (`action`): answers the connector as it is now.
async fn retire(client: &Client, out: Output, name: &str, action: &str) -> Result<(), CliError> {
    let reply = client
        .post(&["connectors", name, action], Body::Empty)
        .await?;
    out.reply(&reply, |c: ConnectorView| {
        format!(
            "connector {}: {}",
            c.name,
            retired_state(c.retired.as_ref())
        )
    })
}

/// The request for `connector add`, refusing environment values.
fn create_request(add: ConnectorAdd) -> Result<CreateConnector, CliError> {
    if let Some(assignment) = add.env.iter().find(|name| name.contains('=')) {
        let name = assignment.split('=').next().unwrap_or_default();
        return Err(CliError::Usage(format!(
            "--env takes a variable name only (`--env {name}`): values come from credential \
             bindings, never from the command line"
        )));
    }
    let spec = match add.http {
        Some(url) => ConnectorSpec::Http { url },
        // clap requires exactly one of --stdio and --http, and a command with --stdio.
        None => {
            let mut words = add.command.into_iter();
            let command = words.next().unwrap_or_default();
            ConnectorSpec::Stdio {
                command,
                args: words.collect(),
                env: add.env,
            }
        }
    };
    Ok(CreateConnector {
        name: add.name,
        spec,
    })
}

/// Connectors as an aligned table.
fn connector_table(list: Vec<ConnectorView>) -> Table {
    let mut table = Table::new([
        "NAME",
        "TRANSPORT",
        "APPROVED",
        "REVISION",
        "STATE",
        "ID",
        "TARGET",
    ]);
    for c in list {
        let transport = match c.target.transport() {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        };
        let target = shown(&c);
        let approved = if c.approved { "yes" } else { "no" };
        table.row([
            c.name,
            transport.to_owned(),
            approved.to_owned(),
            c.revision.to_string(),
            retired_state(c.retired.as_ref()),
            c.id.to_string(),
            target,
        ]);
    }
    table
}

/// [`target`] when the server showed it; only installation owners see commands and URLs.
fn shown(c: &ConnectorView) -> String {
    c.target
        .spec()
        .map(target)
        .unwrap_or_else(|| "-".to_owned())
}

/// What a connector runs or reaches, for people: a quoted command line or a URL.
fn target(spec: &ConnectorSpec) -> String {
    match spec {
        ConnectorSpec::Http { url } => url.clone(),
        ConnectorSpec::Stdio { command, args, env } => {
            let mut words: Vec<String> = std::iter::once(command)
                .chain(args)
                .map(|w| quote(w))
                .collect();
            if !env.is_empty() {
                words.push(format!("(env: {})", env.join(", ")));
            }
            words.join(" ")
        }
    }
}

/// Single-quotes a word for display when a shell would split or interpret it.
fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(env: &[&str]) -> ConnectorAdd {
        ConnectorAdd {
            name: "fx".into(),
            stdio: true,
            http: None,
            env: env.iter().map(|s| (*s).to_owned()).collect(),
            command: vec!["/bin/fx".into(), "stdio".into(), "a b".into()],
        }
    }

    #[test]
    fn env_values_are_refused_without_echoing_them() {
        let err = create_request(add(&["TOKEN=hunter22"])).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("--env TOKEN"), "{err}");
        assert!(!err.to_string().contains("hunter22"), "{err}");
    }

    #[test]
    fn stdio_request_splits_command_and_args() {
        let req = create_request(add(&["TOKEN"])).expect("request");
        let spec = ConnectorSpec::Stdio {
            command: "/bin/fx".into(),
            args: vec!["stdio".into(), "a b".into()],
            env: vec!["TOKEN".into()],
        };
        assert_eq!(req.spec, spec);
        assert_eq!(target(&spec), "/bin/fx stdio 'a b' (env: TOKEN)");
    }
}
