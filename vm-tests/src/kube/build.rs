//! The cached Kubernetes binaries: `kube-apiserver`, `kube-controller-manager` and Debian's
//! `kubectl`, made once by `images/build-kube.sh` (compiled into the crate) and stored under
//! `$HEARTH_TEST_CACHE/kube-<sha256 of the script>/bin/`, built under the same lock and in the
//! same way as the root filesystem (see `util::CachedBuild`). The script's `--cached` mode uses
//! the same directory and lock, so a build started by hand serves the tests and the other way
//! round.

use std::path::{Path, PathBuf};

use anyhow::Result;
use sha2::{Digest, Sha256};

use crate::rootfs::cache_dir;
use crate::util;

/// The content of `images/build-kube.sh`.
pub const BUILD_KUBE_SCRIPT: &str = include_str!("../../../images/build-kube.sh");

/// The cache key of the binaries: the hex sha256 of [`BUILD_KUBE_SCRIPT`].
pub fn kube_key() -> String {
    hex::encode(Sha256::digest(BUILD_KUBE_SCRIPT.as_bytes()))
}

/// Where the three programs are.
#[derive(Debug, Clone)]
pub struct KubeBinaries {
    /// `kube-apiserver` (1.20.2, Debian's source).
    pub apiserver: PathBuf,
    /// `kube-controller-manager` (the same tree).
    pub controller_manager: PathBuf,
    /// Debian's `kubectl` (`kubernetes-client`, the same version).
    pub kubectl: PathBuf,
}

impl KubeBinaries {
    fn in_dir(dir: &Path) -> KubeBinaries {
        let bin = dir.join("bin");
        KubeBinaries {
            apiserver: bin.join("kube-apiserver"),
            controller_manager: bin.join("kube-controller-manager"),
            kubectl: bin.join("kubectl"),
        }
    }
}

/// The cached binaries, building them first when they are not there (5-10 minutes on two
/// cores; needs root, `golang-go`, `jq`, `rsync`, `make`, `dpkg-dev` and the Debian archive).
///
/// Safe to call from many threads and processes at once: one builds, the others wait. A
/// failed build is an error that carries the tail of its log: tests never skip.
pub fn cached_kube() -> Result<KubeBinaries> {
    let dir = util::CachedBuild {
        prefix: "kube",
        what: "kube-apiserver, kube-controller-manager and kubectl",
        takes: "a Go build of Debian's kubernetes source, 5-10 minutes on two cores",
        script: BUILD_KUBE_SCRIPT,
        script_name: "build-kube.sh",
        key: kube_key(),
        needs: &[
            ("go", "golang-go"),
            ("jq", "jq"),
            ("rsync", "rsync"),
            ("make", "make"),
            ("dpkg-source", "dpkg-dev"),
        ],
        env: Vec::new(),
        complete: is_complete,
        remove: remove_dir,
    }
    .get(&cache_dir())?;
    Ok(KubeBinaries::in_dir(&dir))
}

/// A finished build: the directory only appears by rename after a successful build.
fn is_complete(dir: &Path) -> bool {
    let b = KubeBinaries::in_dir(dir);
    [b.apiserver, b.controller_manager, b.kubectl]
        .iter()
        .all(|p| p.is_file())
}

fn remove_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_the_sha256_of_the_script() {
        assert_eq!(kube_key().len(), 64);
        assert_eq!(kube_key(), kube_key());
    }

    #[test]
    fn script_names_no_mirror_and_leaves_etc_apt_alone() {
        assert!(!BUILD_KUBE_SCRIPT.contains("http://"));
        assert!(!BUILD_KUBE_SCRIPT.contains("https://"));
        // Every apt-get call goes through the private configuration.
        for line in BUILD_KUBE_SCRIPT.lines() {
            let l = line.trim_start();
            if l.starts_with("apt-get ") {
                assert!(l.starts_with("apt-get \"${APT_OPTS[@]}\""), "{line}");
            }
        }
    }
}
