//! The kit's one error type. Every step that can fail returns it rather than panicking, so the
//! benchmark driver can say which step failed and stop; a test calls `.expect("what it was
//! doing")` and fails with the same message.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Why a step of starting, driving or waiting for the stack failed.
#[derive(thiserror::Error)]
pub enum Error {
    /// A file, pipe or process could not be used.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// A binary of the workspace is not built.
    #[error(
        "{} is missing: build the workspace first (`cargo build --workspace`, `--release` for \
         a benchmark; scripts/test.sh and scripts/bench.sh do)",
        .0.display()
    )]
    MissingBinary(PathBuf),
    /// An HTTP request got no answer.
    #[error("{what}: {message}")]
    Http {
        /// The request.
        what: String,
        /// The transport error.
        message: String,
    },
    /// The API answered with an unexpected status.
    #[error("{what} answered {status}: {body}")]
    Api {
        /// The request.
        what: String,
        /// HTTP status.
        status: u16,
        /// The answer body.
        body: String,
    },
    /// A process did not get where it should, or an answer was not what the step needs.
    #[error("{0}")]
    Setup(String),
    /// An MCP client (the Python SDK, the Inspector CLI) failed or printed something else
    /// than its answer.
    #[error("{client} failed ({status}); {output}")]
    McpClient {
        /// Which client.
        client: String,
        /// Its exit status, or what was wrong with what it printed.
        status: String,
        /// What it printed (stdout and stderr).
        output: String,
    },
    /// A bounded wait ran out.
    #[error("{what} (gave up after {within:?})")]
    TimedOut {
        /// What was still not so when the wait ended.
        what: String,
        /// The bound.
        within: Duration,
    },
}

/// The message itself: `.expect("…")` in a test then prints a sentence, not a struct.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Error {
    /// An [`Error::Io`] with a description of what was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}

/// A result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
