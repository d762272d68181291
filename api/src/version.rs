//! `GET /api/v1/version`: which build of hearth-server answers (`hearth version`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A build of a hearth program: its version and the git commit it was built from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VersionInfo {
    /// The crate version (`0.1.0`).
    pub version: String,
    /// The git commit (40 hex digits), `$HEARTH_COMMIT` as set for the build, or `unknown`.
    pub commit: String,
}
