//! A finding of validation: one problem with one field of an object, an error or a warning.
//! Its own room so that every rule set (`validate`, the MCO's rules in `mco`) reports the same
//! way without importing each other.

/// A problem with a field, relative to the object (`spec.config.storage.files[0].path`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Field path.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// False for warnings.
    pub is_error: bool,
}

impl Finding {
    /// An error at field `path`.
    pub fn error(path: String, message: impl Into<String>) -> Finding {
        Finding {
            path,
            message: message.into(),
            is_error: true,
        }
    }

    /// A warning at field `path`.
    pub fn warning(path: String, message: impl Into<String>) -> Finding {
        Finding {
            path,
            message: message.into(),
            is_error: false,
        }
    }
}
