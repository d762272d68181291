//! [`OfflineError`]: what went wrong with an offline enablement operation.

use crate::fs::FsError;

/// What went wrong with an offline enablement operation.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// Not a valid unit name (`name.service`, `name@instance.timer`, ...).
    #[error("\"{unit}\" is not a valid unit name")]
    InvalidName {
        /// The name.
        unit: String,
    },
    /// No unit file of that name (nor, for an instance, of its template) in the search path.
    #[error("unit {unit} does not exist: no unit file of that name in {root}")]
    NoSuchUnit {
        /// The unit.
        unit: String,
        /// The root directory searched.
        root: String,
    },
    /// The unit is masked, so it cannot be enabled.
    #[error("unit {unit} is masked ({path} is a link to /dev/null or empty)")]
    Masked {
        /// The unit.
        unit: String,
        /// The masking file (inside the root).
        path: String,
    },
    /// A file that is not a symbolic link is where a link must go.
    #[error(
        "{path} exists and is not a symbolic link: refusing to replace it with a link to {target}"
    )]
    Exists {
        /// The path (inside the root).
        path: String,
        /// The link target that was to be written.
        target: String,
    },
    /// The unit's `[Install]` section (or its files) cannot be acted on.
    #[error("cannot {op} {unit}: {problem}")]
    Install {
        /// `enable`, `disable`, ...
        op: &'static str,
        /// The unit.
        unit: String,
        /// What is wrong.
        problem: String,
    },
    /// A file operation failed.
    #[error(transparent)]
    Fs(#[from] FsError),
}
