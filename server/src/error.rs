//! API errors: an HTTP status, a reason word and a message, as a JSON `Status` document
//! (`{"kind":"Status","code":422,"reason":"Invalid","message":"...","diagnostics":[...]}`).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hearth_config::diag::Diagnostic;

/// An error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The status.
    pub status: StatusCode,
    /// A CamelCase word (`Unauthorized`, `NotFound`, `Invalid`...).
    pub reason: &'static str,
    /// For people.
    pub message: String,
    /// For invalid manifests: every problem, with file, line, object and field.
    pub diagnostics: Vec<Diagnostic>,
}

impl ApiError {
    /// Any status, with its reason word.
    pub fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            reason,
            message: message.into(),
            diagnostics: Vec::new(),
        }
    }

    /// 400.
    pub fn bad_request(m: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", m)
    }
    /// 401.
    pub fn unauthorized(m: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized", m)
    }
    /// 403.
    pub fn forbidden(m: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "Forbidden", m)
    }
    /// 404.
    pub fn not_found(m: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NotFound", m)
    }
    /// 406.
    pub fn not_acceptable(m: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_ACCEPTABLE, "NotAcceptable", m)
    }
    /// 409.
    pub fn conflict(m: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "Conflict", m)
    }
    /// 422 with diagnostics.
    pub fn invalid(m: impl Into<String>, diagnostics: Vec<Diagnostic>) -> Self {
        ApiError {
            diagnostics,
            ..Self::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", m)
        }
    }
    /// 500.
    pub fn internal(m: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", m)
    }
    /// 503.
    pub fn unavailable(m: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", m)
    }
    /// 503 `ReplicaUnavailable`: this replica did not act on the request (nothing was written),
    /// so the client may send it, a change too, to another replica
    /// ([`hearth_api::admin::REPLICA_UNAVAILABLE`]).
    pub fn replica_unavailable(m: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            hearth_api::admin::REPLICA_UNAVAILABLE,
            m,
        )
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.reason,
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        match e {
            crate::store::StoreError::Conflict { .. } | crate::store::StoreError::Behind { .. } => {
                ApiError::conflict(format!(
                    "{e}; another writer changed the object first, try again"
                ))
            }
            other => ApiError::unavailable(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = hearth_api::admin::Status {
            kind: "Status".into(),
            code: self.status.as_u16(),
            reason: self.reason.into(),
            message: self.message,
            diagnostics: self.diagnostics.iter().map(Into::into).collect(),
        };
        let mut resp = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"hearth\""),
            );
        }
        resp
    }
}
