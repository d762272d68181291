//! Paths inside the root a backend works on (shared with `hearth-ostree-helper`).

use std::path::{Path, PathBuf};

/// The root as a display string.
pub fn display(p: &Path) -> String {
    p.display().to_string()
}

/// `root` joined with an absolute path inside it.
pub fn inside(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}
