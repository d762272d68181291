//! The cached root filesystem that every host boots from (read-only, as the overlay's lower
//! layer).
//!
//! It is built once by `scripts/build-rootfs.sh` (compiled into the crate) and stored under
//! `$HEARTH_TEST_CACHE/rootfs-<sha256 of the script>`. An exclusive `flock` on a lock file
//! next to it makes parallel tests, in one process or many, build it once; the tree is built
//! in a temporary directory and renamed into place, so a finished directory is complete.

use std::path::{Path, PathBuf};

use anyhow::Result;
use sha2::{Digest, Sha256};

use crate::mounts;
use crate::util;

/// The content of `vm-tests/scripts/build-rootfs.sh`, the script that builds the tree.
pub const BUILD_ROOTFS_SCRIPT: &str = include_str!("../scripts/build-rootfs.sh");

/// Environment variable that overrides the cache directory.
pub const CACHE_ENV: &str = "HEARTH_TEST_CACHE";

/// The cache directory used when [`CACHE_ENV`] is not set.
pub const DEFAULT_CACHE_DIR: &str = "/var/tmp/hearth-test-cache";

/// The cache directory: `$HEARTH_TEST_CACHE`, or `/var/tmp/hearth-test-cache`.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os(CACHE_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(DEFAULT_CACHE_DIR),
    }
}

/// The cache key of the root filesystem: the hex sha256 of [`BUILD_ROOTFS_SCRIPT`].
pub fn rootfs_key() -> String {
    hex::encode(Sha256::digest(BUILD_ROOTFS_SCRIPT.as_bytes()))
}

/// Returns the cached root filesystem, building it first if it is not there yet (about a
/// minute; needs root, `debootstrap` and the Debian archive).
///
/// Safe to call from many threads and processes at once: one builds, the others wait.
pub fn cached_rootfs() -> Result<PathBuf> {
    util::require_root()?;
    util::CachedBuild {
        prefix: "rootfs",
        what: "the test root filesystem",
        takes: "debootstrap, about a minute",
        script: BUILD_ROOTFS_SCRIPT,
        script_name: "build-rootfs.sh",
        key: rootfs_key(),
        needs: &[("debootstrap", "debootstrap")],
        env: Vec::new(),
        complete: is_complete,
        remove: mounts::remove_tree,
    }
    .get(&cache_dir())
}

/// A finished tree: the directory only appears by rename after a successful build.
fn is_complete(dest: &Path) -> bool {
    dest.join("usr/lib/systemd/systemd").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_the_sha256_of_the_script() {
        let key = rootfs_key();
        assert_eq!(key.len(), 64);
        assert_eq!(key, rootfs_key());
    }

    #[test]
    fn script_does_not_name_a_mirror() {
        // The debootstrap call must not carry a mirror argument (see the script's header).
        let call = BUILD_ROOTFS_SCRIPT
            .lines()
            .skip_while(|l| !l.contains("debootstrap --variant"))
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(call.trim_end().ends_with("bookworm \"$DEST\""), "{call}");
        assert!(!BUILD_ROOTFS_SCRIPT.contains("http://"));
        assert!(!BUILD_ROOTFS_SCRIPT.contains("https://"));
    }
}
