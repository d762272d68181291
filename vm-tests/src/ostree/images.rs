//! The OS images: `images/build-images.sh` run once and cached in
//! `$HEARTH_TEST_CACHE/images-<sha256 of the script>` (an archive repository and a bare one with
//! the image commits).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use sha2::{Digest, Sha256};

use crate::mounts;
use crate::rootfs::cache_dir;
use crate::util;

/// The content of `images/build-images.sh`, the script that builds the OS images.
pub const BUILD_IMAGES_SCRIPT: &str = include_str!("../../../images/build-images.sh");

/// The refs of the image commits.
pub mod refs {
    /// Debian 12 with systemd, dbus, ostree, placeholder kernel `6.1.0-hearth`;
    /// `/usr/lib/hearth-image-version` = `v1`.
    pub const V1: &str = "hearth/debian/v1";
    /// `v1` with the realtime placeholder kernel `6.1.0-hearth-rt` (4 MiB).
    pub const V1_RT: &str = "hearth/debian/v1-rt";
    /// `v1` plus `/usr/lib/hearth-image-version` = `v2`.
    pub const V2: &str = "hearth/debian/v2";
    /// `v2` with the realtime kernel.
    pub const V2_RT: &str = "hearth/debian/v2-rt";
    /// `v2` with a unit that fails at every boot (the system ends `degraded`).
    pub const V2_BROKEN: &str = "hearth/debian/v2-broken";
    /// All of them.
    pub const ALL: [&str; 5] = [V1, V1_RT, V2, V2_RT, V2_BROKEN];
}

/// Where a booted [`OstreeHost`](super::OstreeHost) sees the images' archive repository
/// (read-only), for a `file://` remote used from inside: `file:///run/hearth-images/repo`.
pub const IMAGES_REPO_INSIDE: &str = "/run/hearth-images/repo";

/// The built OS images.
#[derive(Debug, Clone)]
pub struct Images {
    /// The cache directory holding them.
    pub dir: PathBuf,
    /// The archive-mode repository (what a remote serves).
    pub repo: PathBuf,
    /// The bare repository test sysroots import from.
    pub bare_repo: PathBuf,
    /// Ref → commit checksum.
    pub commits: BTreeMap<String, String>,
}

impl Images {
    /// The commit checksum of an image ref.
    pub fn commit(&self, reference: &str) -> Result<&str> {
        self.commits
            .get(reference)
            .map(String::as_str)
            .ok_or_else(|| anyhow!("no image commit {reference} in {}", self.dir.display()))
    }

    /// `file://` URL of the archive repository, for an ostree remote used on this machine.
    pub fn remote_url(&self) -> String {
        format!("file://{}", self.repo.display())
    }

    /// `file://` URL of the archive repository as a booted [`OstreeHost`](super::OstreeHost) sees
    /// it.
    pub fn remote_url_inside(&self) -> String {
        format!("file://{IMAGES_REPO_INSIDE}")
    }

    fn load(dir: &Path) -> Result<Images> {
        let env = fs::read_to_string(dir.join("commits.env"))
            .with_context(|| format!("reading {}/commits.env", dir.display()))?;
        let commits = env
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(r, c)| (r.trim().to_string(), c.trim().to_string()))
            .collect();
        Ok(Images {
            dir: dir.to_path_buf(),
            repo: dir.join("repo"),
            bare_repo: dir.join("repo-bare"),
            commits,
        })
    }
}

/// The cache key of the images: the hex sha256 of [`BUILD_IMAGES_SCRIPT`].
pub fn images_key() -> String {
    hex::encode(Sha256::digest(BUILD_IMAGES_SCRIPT.as_bytes()))
}

fn images_complete(dir: &Path) -> bool {
    dir.join("commits.env").exists() && dir.join("repo/config").exists()
}

/// Returns the cached images, building them first (about 3.5 minutes: debootstrap, five
/// commits, an archive repository; needs root, `debootstrap`, `ostree` and the Debian archive).
/// Safe to call from many threads and processes at once: one builds, the others wait.
pub fn cached_images() -> Result<Images> {
    util::require_root()?;
    util::require_program("ostree", "ostree")?;
    let dest = util::CachedBuild {
        prefix: "images",
        what: "the OS images",
        takes: "about 4 minutes",
        script: BUILD_IMAGES_SCRIPT,
        script_name: "build-images.sh",
        key: images_key(),
        needs: &[("debootstrap", "debootstrap")],
        env: Vec::new(),
        complete: images_complete,
        remove: mounts::remove_tree,
    }
    .get(&cache_dir())?;
    Images::load(&dest)
}
