//! Error answers over HTTPS: an [`ApiError`] as a JSON `Status` document with its HTTP status
//! (and `WWW-Authenticate` on a 401), and the front layer's own answers of the same shape.

use crate::error::ApiError;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// The HTTP status of an error.
pub fn status_of(e: &ApiError) -> StatusCode {
    StatusCode::from_u16(e.kind.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let diagnostics = self.diagnostics.iter().map(Into::into).collect();
        answer(status_of(&self), self.reason, self.message, diagnostics)
    }
}

/// A `Status` document for a status no operation gives (the front layer's 408, 413, 431, or a
/// non-JSON error answer made JSON).
pub fn status_answer(status: StatusCode, reason: &str, message: impl Into<String>) -> Response {
    answer(status, reason, message.into(), Vec::new())
}

fn answer(
    status: StatusCode,
    reason: &str,
    message: String,
    diagnostics: Vec<hearth_api::admin::Diagnostic>,
) -> Response {
    let body = hearth_api::admin::Status {
        kind: "Status".into(),
        code: status.as_u16(),
        reason: reason.into(),
        message,
        diagnostics,
    };
    let mut resp = (status, axum::Json(body)).into_response();
    if status == StatusCode::UNAUTHORIZED {
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"hearth\""),
        );
    }
    resp
}
