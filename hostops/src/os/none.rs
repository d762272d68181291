//! The "none" backend: hosts without ostree (plain systemd hosts, like the MCO's RHEL workers).
//! Every OS operation fails with the reason; files, units and keys still work.

use super::error::OsError;

/// No OS backend, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoneBackend {
    reason: String,
}

impl NoneBackend {
    /// A backend that refuses everything with `reason`.
    pub fn new(reason: impl Into<String>) -> NoneBackend {
        NoneBackend {
            reason: reason.into(),
        }
    }

    /// Why OS changes are impossible.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The error every operation returns.
    pub fn error(&self) -> OsError {
        OsError::Unsupported {
            reason: self.reason.clone(),
        }
    }
}
