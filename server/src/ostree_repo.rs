//! Serving an ostree repository to the fleet (`--ostree-repo DIR`), behind the same
//! authentication as everything else: disconnected sites pivot nodes to new OS images pulled
//! from hearth-server itself. libostree's HTTP fetcher reads plain files (`config`, `summary`,
//! `refs/heads/...`, `objects/xx/...`, `deltas/...`), so this is a static file server confined
//! to the repository: paths are checked component by component, resolved, and must stay inside.

use crate::error::ApiError;
use std::path::{Component, Path, PathBuf};

/// The URL prefix the repository is served under (`https://hearth:22623/ostree/repo/config`).
pub const PREFIX: &str = "/ostree/repo";

/// Resolves a request path (relative, as the route captured it) to a regular file inside
/// `repo`. Anything else (`..`, absolute paths, symbolic links leading out, directories,
/// missing files) is a 404 or a 400 that says why.
pub fn resolve(repo: &Path, path: &str) -> Result<PathBuf, ApiError> {
    if path.is_empty() || path.contains('\0') || path.contains('\\') {
        return Err(ApiError::bad_request(format!(
            "invalid repository path {path:?}"
        )));
    }
    let rel = Path::new(path);
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(ApiError::bad_request(format!(
            "invalid repository path {path:?}: only plain components are allowed"
        )));
    }
    let root = repo.canonicalize().map_err(|e| {
        ApiError::internal(format!("the ostree repository {}: {e}", repo.display()))
    })?;
    let missing = || ApiError::not_found(format!("{PREFIX}/{path}: no such file"));
    let full = root.join(rel).canonicalize().map_err(|_| missing())?;
    if !full.starts_with(&root) {
        return Err(missing());
    }
    match std::fs::metadata(&full) {
        Ok(m) if m.is_file() => Ok(full),
        _ => Err(missing()),
    }
}

/// Checks at start-up that `repo` looks like an ostree repository (`config` and `objects/`).
pub fn check(repo: &Path) -> Result<(), String> {
    let config = repo.join("config");
    let text = std::fs::read_to_string(&config).map_err(|e| {
        format!(
            "--ostree-repo {}: {e} reading {} (create one with `ostree init --repo=DIR \
             --mode=archive`)",
            repo.display(),
            config.display()
        )
    })?;
    if !text.contains("[core]") || !repo.join("objects").is_dir() {
        return Err(format!(
            "--ostree-repo {}: not an ostree repository (no [core] in config, or no objects/)",
            repo.display()
        ));
    }
    if !text.contains("mode=archive") {
        tracing::warn!(repo = %repo.display(), "the ostree repository is not in archive mode: libostree's HTTP pulls need archive (or archive-z2) repositories");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_repository() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("refs/heads/hearth")).unwrap();
        std::fs::write(repo.join("config"), "[core]\nmode=archive-z2\n").unwrap();
        std::fs::write(repo.join("refs/heads/hearth/v1"), "abc\n").unwrap();
        std::fs::write(dir.path().join("secret"), "no").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), repo.join("leak")).unwrap();

        assert!(resolve(&repo, "config").is_ok());
        assert!(resolve(&repo, "refs/heads/hearth/v1").is_ok());
        for bad in [
            "../secret",
            "refs/../../secret",
            "/etc/passwd",
            "./config",
            "",
        ] {
            assert!(resolve(&repo, bad).is_err(), "{bad}");
        }
        assert!(resolve(&repo, "leak").is_err(), "a symlink leading out");
        assert!(resolve(&repo, "refs").is_err(), "a directory");
        assert!(resolve(&repo, "summary").is_err(), "missing");
        assert!(check(&repo).is_err(), "no objects/");
        std::fs::create_dir(repo.join("objects")).unwrap();
        assert!(check(&repo).is_ok());
    }
}
