//! The app layer's error type. HTTP-agnostic: converted once, at the edge (`http::error`),
//! into `{"error": {"code", "message"}}`. Database details go to the log, never to the client.

use switchyard_protocol::ErrorCode;

/// Why an app-layer operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The request was refused: bad input, missing authority, unknown object, conflict.
    #[error("{code}: {message}")]
    Refused {
        /// Stable code for the client.
        code: ErrorCode,
        /// What to fix, for a person.
        message: String,
    },
    /// The database failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Anything else that is our fault.
    #[error("internal error: {0}")]
    Internal(String),
}

impl AppError {
    /// A refusal with a stable code and a message saying what to fix.
    pub fn refused(code: ErrorCode, message: impl Into<String>) -> Self {
        AppError::Refused {
            code,
            message: message.into(),
        }
    }
}

/// Result alias for app-layer operations.
pub type AppResult<T> = Result<T, AppError>;
