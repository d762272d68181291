//! The VM image: `images/build-vm-image.sh` run once and cached in
//! `$HEARTH_TEST_CACHE/vm-image-<sha256 of the script>` (a raw GPT disk: the ESP with
//! systemd-boot and the v1 entry, the sysroot with v1 deployed; the commits' checksums, an
//! archive repository with them, a never-booting initramfs).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{anyhow, Context, Result};
use sha2::{Digest, Sha256};

use crate::mounts;
use crate::rootfs::cache_dir;
use crate::util;

/// The content of `images/build-vm-image.sh`, the script that builds the VM disk image.
pub const BUILD_VM_IMAGE_SCRIPT: &str = include_str!("../../../images/build-vm-image.sh");

/// The refs of the VM image's commits (both in the disk's repository; `v1` is deployed).
pub mod refs {
    /// Debian 12 with the real kernel; `/usr/lib/hearth-image-version` = `v1`.
    pub const V1: &str = "hearth/debian/v1";
    /// `v1` plus `/usr/lib/hearth-image-version` = `v2`.
    pub const V2: &str = "hearth/debian/v2";
}

/// The built VM image.
#[derive(Debug, Clone)]
pub struct VmImage {
    /// The cache directory holding it.
    pub dir: PathBuf,
    /// The raw disk (GPT: the ESP, then the ext4 root labelled `hearth-root` with the
    /// sysroot, v1 deployed).
    pub disk: PathBuf,
    /// Where the ESP's FAT file system starts on the disk (bytes).
    pub esp_offset: u64,
    /// An archive repository with the commits (what the OS container images are made from).
    pub repo: PathBuf,
    /// Ref → commit checksum.
    pub commits: BTreeMap<String, String>,
    /// The kernel version in the commits.
    pub kernel_version: String,
    /// The first deployment's kernel arguments (without `ostree=`).
    pub kargs: String,
}

impl VmImage {
    /// The commit checksum of a ref.
    pub fn commit(&self, reference: &str) -> Result<&str> {
        self.commits
            .get(reference)
            .map(String::as_str)
            .ok_or_else(|| anyhow!("no commit {reference} in {}", self.dir.display()))
    }

    fn load(dir: &Path) -> Result<VmImage> {
        let read_env = |name: &str| -> Result<BTreeMap<String, String>> {
            let text = fs::read_to_string(dir.join(name))
                .with_context(|| format!("reading {}/{name}", dir.display()))?;
            Ok(text
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
                .collect())
        };
        let commits = read_env("commits.env")?;
        let kernel = read_env("kernel.env")?;
        let disk = read_env("disk.env")?;
        let esp_offset = disk
            .get("ESP_OFFSET")
            .and_then(|o| o.parse().ok())
            .ok_or_else(|| anyhow!("{}/disk.env has no ESP_OFFSET", dir.display()))?;
        Ok(VmImage {
            dir: dir.to_path_buf(),
            disk: dir.join("disk.raw"),
            esp_offset,
            repo: dir.join("repo"),
            commits,
            kernel_version: kernel.get("KVER").cloned().unwrap_or_default(),
            kargs: kernel.get("KARGS").cloned().unwrap_or_default(),
        })
    }
}

/// The cache key of the VM image: the hex sha256 of [`BUILD_VM_IMAGE_SCRIPT`].
pub fn vm_image_key() -> String {
    hex::encode(Sha256::digest(BUILD_VM_IMAGE_SCRIPT.as_bytes()))
}

fn image_complete(dir: &Path) -> bool {
    dir.join("disk.raw").exists() && dir.join("disk.env").exists()
}

/// Returns the cached VM image, building it first (a few minutes: debootstrap, the kernel,
/// dracut, two commits, the ESP, `mkfs.ext4 -d`; needs root, `debootstrap`, `ostree`,
/// `e2fsprogs`, `dosfstools`, `mtools`, `fdisk` and the Debian archive). Safe to call from many threads and processes at once: one builds, the
/// others wait.
pub fn cached_vm_image() -> Result<VmImage> {
    util::require_root()?;
    let dest = util::CachedBuild {
        prefix: "vm-image",
        what: "the VM image",
        takes: "about 5 minutes",
        script: BUILD_VM_IMAGE_SCRIPT,
        script_name: "build-vm-image.sh",
        key: vm_image_key(),
        needs: &[
            ("debootstrap", "debootstrap"),
            ("ostree", "ostree"),
            ("mkfs.ext4", "e2fsprogs"),
            ("mkfs.vfat", "dosfstools"),
            ("mcopy", "mtools"),
            ("sfdisk", "fdisk"),
        ],
        env: Vec::new(),
        complete: image_complete,
        remove: remove_build_dir,
    }
    .get(&cache_dir())?;
    VmImage::load(&dest)
}

/// Removes a (possibly interrupted) build directory: its deployments may be immutable.
fn remove_build_dir(dir: &Path) -> Result<()> {
    let _ = Command::new("chattr")
        .args(["-R", "-i"])
        .arg(dir)
        .stderr(Stdio::null())
        .status();
    mounts::remove_tree(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_the_sha256_of_the_script() {
        assert_eq!(vm_image_key().len(), 64);
        assert!(!BUILD_VM_IMAGE_SCRIPT.contains("http://"));
        assert!(!BUILD_VM_IMAGE_SCRIPT.contains("https://"));
    }
}
