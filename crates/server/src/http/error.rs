//! The edge between app errors and HTTP: every error leaves as
//! `{"error": {"code", "message"}}` with the code's status. Internal details are logged here
//! and replaced by a generic message for the client.

use crate::error::AppError;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use switchyard_protocol::{ErrorBody, ErrorCode};

/// An error response.
#[derive(Debug)]
pub struct ApiError(pub AppError);

impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        ApiError(e)
    }
}

impl ApiError {
    /// The HTTP status, code and message a client is shown. Internal details are logged here
    /// and replaced by a generic message.
    pub(super) fn public(self) -> (StatusCode, ErrorCode, String) {
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
        (status, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message) = self.public();
        (status, axum::Json(ErrorBody::new(code, message))).into_response()
    }
}

/// The largest request body read: axum's default limit, which every JSON body goes through.
pub const BODY_LIMIT_BYTES: usize = 2 * 1024 * 1024;

/// A JSON body whose rejections are stable API errors: `invalid_json` for bad syntax,
/// `invalid_request` for a missing field or a wrong type, `body_too_large` (413) past
/// [`BODY_LIMIT_BYTES`].
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => {
                let (code, message) = match &rejection {
                    JsonRejection::JsonSyntaxError(e) => (
                        ErrorCode::InvalidJson,
                        format!("the body is not valid JSON: {}", source_text(e)),
                    ),
                    JsonRejection::JsonDataError(e) => (
                        ErrorCode::InvalidRequest,
                        format!(
                            "the body does not have the expected shape: {}",
                            source_text(e)
                        ),
                    ),
                    JsonRejection::BytesRejection(e)
                        if e.status() == StatusCode::PAYLOAD_TOO_LARGE =>
                    {
                        (
                            ErrorCode::BodyTooLarge,
                            format!(
                                "the body is larger than this route accepts ({} MiB; a runner's completion may be larger)",
                                BODY_LIMIT_BYTES / (1024 * 1024)
                            ),
                        )
                    }
                    JsonRejection::MissingJsonContentType(_) => (
                        ErrorCode::InvalidRequest,
                        "send the body with `Content-Type: application/json`".to_owned(),
                    ),
                    other => (ErrorCode::InvalidRequest, other.body_text()),
                };
                Err(ApiError(AppError::refused(code, message)))
            }
        }
    }
}

/// The innermost cause: serde's message with line and column, without axum's prefix.
fn source_text(error: &dyn std::error::Error) -> String {
    let mut current = error;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}
