//! `switchyard credential …`: the grammar of setting, rotating and listing a connection's
//! credential values. No flag takes a value: it is read from a prompt without echo, or from
//! stdin.

use clap::{Args, Subcommand, ValueEnum};

/// `switchyard credential …`
#[derive(Debug, Subcommand)]
pub enum CredentialCommand {
    /// Store a value for one destination of a connection placed on this machine's paired
    /// device and bind the destination to it; for a central connection, send it to the server,
    /// which keeps it only in a development installation. The value is read from a prompt
    /// without echo when stdin is a terminal, else from stdin (one trailing newline removed) —
    /// never from the command line.
    Set {
        /// Which destination of which connection.
        #[command(flatten)]
        target: CredentialTarget,
        /// Where the value is kept: the OS keyring (default) or the 0600 secrets file next to
        /// the bindings file.
        #[arg(long, value_enum, default_value_t = StoreChoice::Keyring)]
        store: StoreChoice,
        /// Text put before the value in a header, e.g. `Bearer ` (headers only).
        #[arg(long, value_name = "TEXT")]
        prefix: Option<String>,
    },
    /// Replace the value a destination is bound to, where it is kept: the runner's next call
    /// on the connection opens a new session, and the warm sessions that hold the old value
    /// drain. The value is read as for `set`.
    Rotate {
        /// Which destination of which connection.
        #[command(flatten)]
        target: CredentialTarget,
    },
    /// List a connection's credential destinations, where each value resolves and whether it
    /// is there — never the values.
    List {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection id or name.
        #[arg(value_name = "CONN")]
        connection: String,
        /// The device profile whose runner serves the connection (default:
        /// SWITCHYARD_DEVICE_PROFILE, else `default`).
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
    },
}

/// One destination of one connection.
#[derive(Debug, Args)]
pub struct CredentialTarget {
    /// Workspace id or name.
    #[arg(value_name = "WS")]
    pub workspace: String,
    /// Connection id or name.
    #[arg(value_name = "CONN")]
    pub connection: String,
    /// The destination: an environment variable the stdio connector declares, or a header of
    /// an HTTP connector.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The device profile whose runner serves the connection (default:
    /// SWITCHYARD_DEVICE_PROFILE, else `default`).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
}

/// Where `credential set` keeps a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StoreChoice {
    /// The OS keyring (service `switchyard-mcp`).
    Keyring,
    /// The 0600 secrets file next to the bindings file.
    File,
}
