//! The errors that stop the agent itself ([`AgentError`]): its journal, systemd, the root, the
//! agent lock. An apply that fails is not one of them: it ends
//! [`Outcome::Degraded`](crate::apply::Outcome::Degraded).

use crate::journal::JournalError;

/// Errors that stop the agent itself (not an apply failure, which is
/// [`Outcome::Degraded`](crate::apply::Outcome::Degraded)).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The journal cannot be read or written.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Connecting to systemd failed.
    #[error("cannot connect to systemd: {0}")]
    Systemd(#[from] hearth_hostops::systemd::SystemdError),
    /// The root cannot be opened.
    #[error(transparent)]
    Fs(#[from] hearth_hostops::fs::FsError),
    /// The agent lock cannot be taken.
    #[error("cannot take the agent lock {path}: {message}")]
    Lock {
        /// The lock file.
        path: String,
        /// Why.
        message: String,
    },
}
