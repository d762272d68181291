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
