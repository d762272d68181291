//! The cached root filesystem that every host boots from (read-only, as the overlay's lower
//! layer).
//!
//! It is built once by `scripts/build-rootfs.sh` (compiled into the crate) and stored under
//! `$HEARTH_TEST_CACHE/rootfs-<sha256 of the script>`. An exclusive `flock` on a lock file
//! next to it makes parallel tests, in one process or many, build it once; the tree is built
//! in a temporary directory and renamed into place, so a finished directory is complete.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};
use tracing::{debug, info, warn};

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
    let cache = cache_dir();
    let key = rootfs_key();
    let dest = cache.join(format!("rootfs-{key}"));
    if is_complete(&dest) {
        return Ok(dest);
    }
    fs::create_dir_all(&cache)
        .with_context(|| format!("creating the cache directory {}", cache.display()))?;
    let lock_path = cache.join(format!("rootfs-{key}.lock"));
    let lock_file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("opening {}", lock_path.display()))?;
    debug!(lock = %lock_path.display(), "waiting for the rootfs lock");
    let _lock = Flock::lock(lock_file, FlockArg::LockExclusive)
        .map_err(|(_, errno)| errno)
        .with_context(|| format!("flock {}", lock_path.display()))?;
    if is_complete(&dest) {
        // Another thread or process built it while we waited.
        return Ok(dest);
    }
    build(&cache, &key, &dest)?;
    Ok(dest)
}

/// A finished tree: the directory only appears by rename after a successful build.
fn is_complete(dest: &Path) -> bool {
    dest.join("usr/lib/systemd/systemd").exists()
}

/// Builds the tree into `dest`. The caller holds the lock.
fn build(cache: &Path, key: &str, dest: &Path) -> Result<()> {
    util::require_program("debootstrap", "debootstrap")?;
    // Leftovers of an interrupted build (the lock says nobody is building now).
    let tmp_prefix = format!("rootfs-{key}.tmp");
    for entry in fs::read_dir(cache)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(&tmp_prefix) {
            warn!(dir = %entry.path().display(), "removing an interrupted rootfs build");
            mounts::remove_tree(&entry.path())?;
        }
    }
    if dest.exists() {
        // Incomplete without the marker file: cannot come from a rename, but be safe.
        mounts::remove_tree(dest)?;
    }

    let tmp = cache.join(format!("{tmp_prefix}-{}", std::process::id()));
    fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let log_path = cache.join(format!("rootfs-{key}.log"));
    let log =
        File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    info!(
        dest = %dest.display(),
        log = %log_path.display(),
        "building the test root filesystem (debootstrap, about a minute)"
    );
    let started = Instant::now();
    let status = util::run_build_script(BUILD_ROOTFS_SCRIPT, "build-rootfs.sh", &tmp, log)?;
    if !status.success() {
        if let Err(e) = mounts::remove_tree(&tmp) {
            warn!("cleaning up the failed build: {e:#}");
        }
        bail!(
            "building the test root filesystem failed ({status}); full log in {}:\n{}",
            log_path.display(),
            util::tail(&log_path, 30)
        );
    }
    if !is_complete(&tmp) {
        bail!(
            "build-rootfs.sh succeeded but {} has no usr/lib/systemd/systemd",
            tmp.display()
        );
    }
    fs::rename(&tmp, dest)
        .with_context(|| format!("renaming {} to {}", tmp.display(), dest.display()))?;
    info!(
        dest = %dest.display(),
        seconds = started.elapsed().as_secs_f64(),
        "test root filesystem built"
    );
    Ok(())
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
