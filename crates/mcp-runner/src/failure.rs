//! What kind of failure a session's failure was, read from the error's types (never from its
//! words): the stable [`FailureClass`] a diagnosis reports.
//!
//! An HTTP handshake's error is rmcp's, wrapping the HTTP client's (`reqwest`), wrapping
//! hyper's and the operating system's or rustls's: `InitializeFault::of_http` walks that
//! chain for a TLS error or a connect failure.

use crate::endpoints::EndpointError;
use crate::session::SessionError;
use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;
use std::error::Error;
use std::io;
use switchyard_protocol::diagnose::FailureClass;

/// Why a handshake that started (a process was spawned, or an endpoint was admitted) did not
/// complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitializeFault {
    /// Something answered, but not as an MCP server: garbage, an HTML page, a JSON-RPC error,
    /// or a process that exited before answering.
    NotMcp,
    /// The TLS handshake failed.
    Tls,
    /// Nothing could be connected to (refused, reset, no route).
    Unreachable,
}

/// The deepest link considered: the chains seen are a handful deep.
const MAX_CHAIN: usize = 32;

impl InitializeFault {
    /// The fault of an HTTP handshake that failed with `error`.
    pub(crate) fn of_http(error: &ClientInitializeError) -> Self {
        let first: &(dyn Error + 'static) = match error {
            ClientInitializeError::TransportError { error, .. } => error.error.as_ref(),
            other => other,
        };
        let mut connect_failed = false;
        let mut current = Some(first);
        for _ in 0..MAX_CHAIN {
            let Some(link) = current else { break };
            if link.downcast_ref::<rustls::Error>().is_some() {
                return Self::Tls;
            }
            if let Some(error) = link.downcast_ref::<reqwest::Error>() {
                connect_failed |= error.is_connect();
            }
            current = match link.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                // The client's error is not the variant's `source`: follow it by hand.
                Some(StreamableHttpError::Client(client)) => Some(client),
                _ => match link.downcast_ref::<io::Error>() {
                    // An I/O error's `source` skips the error it wraps (rustls's, for one).
                    Some(io) => match io.get_ref() {
                        Some(inner) => Some(inner as &(dyn Error + 'static)),
                        None if is_unreachable(io.kind()) => return Self::Unreachable,
                        None => None,
                    },
                    None => link.source(),
                },
            };
        }
        if connect_failed {
            Self::Unreachable
        } else {
            Self::NotMcp
        }
    }
}

/// Whether an I/O error of `kind` means nothing could be connected to.
fn is_unreachable(kind: io::ErrorKind) -> bool {
    use io::ErrorKind::*;
    matches!(
        kind,
        ConnectionRefused
            | ConnectionReset
            | ConnectionAborted
            | HostUnreachable
            | NetworkUnreachable
            | AddrNotAvailable
            | NotConnected
    )
}

impl SessionError {
    /// The stable class of this failure, as a diagnosis reports it.
    pub fn failure_class(&self) -> FailureClass {
        match self {
            Self::Spawn { source, .. } if source.kind() == io::ErrorKind::NotFound => {
                FailureClass::ExecutableNotFound
            }
            Self::Spawn { .. } | Self::ReservedEnv { .. } => FailureClass::SpawnFailed,
            Self::InvalidHeader { .. } | Self::Unauthorized { .. } => FailureClass::AuthRefused,
            Self::Endpoint(EndpointError::Blocked { .. }) => FailureClass::EndpointBlocked,
            // A URL that does not parse, or a name that does not resolve, reaches nothing.
            Self::Endpoint(EndpointError::Unresolved { .. } | EndpointError::BadUrl(_)) => {
                FailureClass::Unreachable
            }
            Self::Initialize { fault, .. } => match fault {
                InitializeFault::NotMcp => FailureClass::NotMcp,
                InitializeFault::Tls => FailureClass::TlsFailed,
                InitializeFault::Unreachable => FailureClass::Unreachable,
            },
            Self::Timeout { .. } => FailureClass::HandshakeTimeout,
            // The handshake passed, then `tools/list` was refused or broke: it does not serve
            // MCP tools as it should.
            Self::Rejected { .. } | Self::Transport { .. } => FailureClass::NotMcp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_and_an_unstartable_one_are_told_apart() {
        let spawn = |kind| SessionError::Spawn {
            command: "tool".into(),
            source: io::Error::new(kind, "no"),
        };
        assert_eq!(
            spawn(io::ErrorKind::NotFound).failure_class(),
            FailureClass::ExecutableNotFound
        );
        assert_eq!(
            spawn(io::ErrorKind::PermissionDenied).failure_class(),
            FailureClass::SpawnFailed
        );
    }
}
