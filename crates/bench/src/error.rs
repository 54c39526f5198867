//! The one error type of the benchmark driver and the chaos suite. A run that meets an error
//! stops and says which step failed; nothing here is retried silently.

use std::path::PathBuf;

/// Why a benchmark or chaos step failed.
#[derive(Debug, thiserror::Error)]
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
    /// A binary the run needs is missing.
    #[error("{} is missing: build it first (scripts/bench.sh builds everything in release mode)", .0.display())]
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
    /// A database statement failed.
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// A process did not get where it should, or a step's precondition failed.
    #[error("{0}")]
    Setup(String),
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
