//! The operations' refusals and failures: what kind ([`ErrorKind`]), a reason word and a message
//! for people, with every diagnostic of an invalid manifest. No transport here: the HTTPS front
//! door answers one as a JSON `Status` document
//! (`{"kind":"Status","code":422,"reason":"Invalid","message":"...","diagnostics":[...]}`,
//! `crate::http::status`), whose `code` is [`ErrorKind::code`].

use hearth_config::diag::Diagnostic;

/// What kind of refusal or failure an [`ApiError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed (400).
    BadRequest,
    /// No credential, or one this server does not hold (401).
    Unauthorized,
    /// The caller may not do this (403).
    Forbidden,
    /// No such object (404).
    NotFound,
    /// The caller cannot take any form of the answer (406).
    NotAcceptable,
    /// The object changed, or exists, or another holds it (409).
    Conflict,
    /// A manifest or request is invalid, with diagnostics (422).
    Invalid,
    /// The server failed (500).
    Internal,
    /// The server cannot act now: its store, or this replica (503).
    Unavailable,
}

impl ErrorKind {
    /// The `code` of the API's `Status` document, the HTTP status the front door answers with.
    pub fn code(self) -> u16 {
        match self {
            ErrorKind::BadRequest => 400,
            ErrorKind::Unauthorized => 401,
            ErrorKind::Forbidden => 403,
            ErrorKind::NotFound => 404,
            ErrorKind::NotAcceptable => 406,
            ErrorKind::Conflict => 409,
            ErrorKind::Invalid => 422,
            ErrorKind::Internal => 500,
            ErrorKind::Unavailable => 503,
        }
    }
}

/// A refusal or failure of an operation.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} {reason}: {message}", kind.code())]
pub struct ApiError {
    /// What kind.
    pub kind: ErrorKind,
    /// A CamelCase word (`Unauthorized`, `NotFound`, `Invalid`...).
    pub reason: &'static str,
    /// For people.
    pub message: String,
    /// For invalid manifests: every problem, with file, line, object and field.
    pub diagnostics: Vec<Diagnostic>,
}

impl ApiError {
    /// Any kind, with its reason word.
    pub fn new(kind: ErrorKind, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            kind,
            reason,
            message: message.into(),
            diagnostics: Vec::new(),
        }
    }

    /// 400.
    pub fn bad_request(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadRequest, "BadRequest", m)
    }
    /// 401.
    pub fn unauthorized(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unauthorized, "Unauthorized", m)
    }
    /// 403.
    pub fn forbidden(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, "Forbidden", m)
    }
    /// 404.
    pub fn not_found(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, "NotFound", m)
    }
    /// 406.
    pub fn not_acceptable(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotAcceptable, "NotAcceptable", m)
    }
    /// 409.
    pub fn conflict(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, "Conflict", m)
    }
    /// 422 with diagnostics.
    pub fn invalid(m: impl Into<String>, diagnostics: Vec<Diagnostic>) -> Self {
        ApiError {
            diagnostics,
            ..Self::new(ErrorKind::Invalid, "Invalid", m)
        }
    }
    /// 500.
    pub fn internal(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, "InternalError", m)
    }
    /// 503.
    pub fn unavailable(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, "ServiceUnavailable", m)
    }
    /// 503 `ReplicaUnavailable`: this replica did not act on the request (nothing was written),
    /// so the client may send it, a change too, to another replica
    /// ([`hearth_api::admin::REPLICA_UNAVAILABLE`]).
    pub fn replica_unavailable(m: impl Into<String>) -> Self {
        Self::new(
            ErrorKind::Unavailable,
            hearth_api::admin::REPLICA_UNAVAILABLE,
            m,
        )
    }
}
