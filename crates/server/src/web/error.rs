//! Errors of the web UI, shown as an HTML page with the error's status. Refusals carry a
//! message written for a person; database and internal details go to the log only.

use super::page::ErrorPage;
use crate::error::AppError;
use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use switchyard_protocol::ErrorCode;

/// An error a web handler answers with.
#[derive(Debug)]
pub struct WebError(pub AppError);

impl From<AppError> for WebError {
    fn from(e: AppError) -> Self {
        WebError(e)
    }
}

impl From<askama::Error> for WebError {
    fn from(e: askama::Error) -> Self {
        WebError(AppError::Internal(format!("template failed: {e}")))
    }
}

impl WebError {
    /// A refusal with a stable code and a message saying what to fix.
    pub fn refused(code: ErrorCode, message: impl Into<String>) -> Self {
        WebError(AppError::refused(code, message))
    }
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let (code, message) = match self.0 {
            AppError::Refused { code, message } => (code, message),
            AppError::Database(e) => {
                tracing::error!(error = %e, "database error");
                (
                    ErrorCode::Internal,
                    "internal error; see the server log".to_owned(),
                )
            }
            AppError::Internal(e) => {
                tracing::error!(error = %e, "internal error");
                (
                    ErrorCode::Internal,
                    "internal error; see the server log".to_owned(),
                )
            }
        };
        let status =
            StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let page = ErrorPage {
            status: status.as_u16(),
            reason: status.canonical_reason().unwrap_or("Error"),
            code: code.as_str(),
            message,
        };
        match page.render() {
            Ok(body) => (status, Html(body)).into_response(),
            Err(e) => {
                tracing::error!(error = %e, "error page failed to render");
                (status, message_only(code)).into_response()
            }
        }
    }
}

fn message_only(code: ErrorCode) -> String {
    format!("error: {code}")
}

/// Result of a web handler.
pub type WebResult<T> = Result<T, WebError>;
