//! [`FsError`]: what went wrong with a file operation under a root, naming the path.

use nix::errno::Errno;

/// What went wrong with a file operation; every variant names the path (inside the root).
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path is not an absolute, clean path.
    #[error("{path}: not an absolute path without '.' or '..' components")]
    BadPath {
        /// The path.
        path: String,
    },
    /// Resolving the path would leave the root (a symlink points outside).
    #[error("{path}: refused: a symbolic link on this path leads outside the root {root}")]
    EscapesRoot {
        /// The path.
        path: String,
        /// The root.
        root: String,
    },
    /// A system call failed.
    #[error("{path}: {op}: {errno}")]
    Sys {
        /// The path.
        path: String,
        /// The operation (`open`, `rename`, ...).
        op: &'static str,
        /// The error.
        errno: Errno,
    },
    /// Reading or writing content failed.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The operation.
        op: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// An SELinux label could not be found or set; the entry was not renamed into place.
    #[error("{path}: SELinux label: {op}: {reason}")]
    Label {
        /// The path.
        path: String,
        /// What was being done, with the label when known.
        op: String,
        /// Why it failed.
        reason: String,
    },
}

impl FsError {
    /// True when the error means "does not exist".
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            FsError::Sys {
                errno: Errno::ENOENT,
                ..
            }
        )
    }
}
