//! The one error type of the benchmark driver and the chaos suite. A run that meets an error
//! stops and says which step failed; nothing here is retried silently.

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
    /// Starting, driving or waiting for the stack failed (a missing binary, a refused request,
    /// a process that did not start).
    #[error(transparent)]
    Kit(#[from] switchyard_testkit::Error),
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
