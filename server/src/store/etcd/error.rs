//! What can go wrong talking to etcd, and the hints added to etcd's own limits.

use crate::store::StoreError;

/// What went wrong with etcd.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// The configuration is wrong (a bad URL, prefix or certificate).
    #[error("etcd: {0}")]
    Config(String),
    /// etcd refused a request (retrying would not help).
    #[error("etcd: {what} failed at {endpoint}: {message}")]
    Request {
        /// The operation.
        what: String,
        /// The member.
        endpoint: String,
        /// etcd's answer (with a hint when it is a limit of etcd's).
        message: String,
    },
    /// No member answered.
    #[error("etcd: {what} failed on every member ({attempts} attempts); last: {last}")]
    Unavailable {
        /// The operation.
        what: String,
        /// Attempts made.
        attempts: usize,
        /// The last failure.
        last: String,
    },
    /// Something read from etcd is over a limit or malformed.
    #[error("etcd: {0}")]
    Bound(String),
}

impl From<EtcdError> for StoreError {
    fn from(e: EtcdError) -> Self {
        StoreError::Backend(e.to_string())
    }
}

/// Adds what to do to etcd's answers that are limits of etcd's own configuration.
pub(super) fn hint(message: String) -> String {
    if message.contains("too many operations in txn request") {
        format!("{message} (start etcd with a larger --max-txn-ops, e.g. 10000: one commit can touch every node)")
    } else if message.contains("request is too large") {
        format!("{message} (start etcd with a larger --max-request-bytes, e.g. 67108864)")
    } else {
        message
    }
}
