//! The OS images as ostree-native container images: `images/build-oci-images.sh` run once on
//! the cached commits ([`cached_images`](super::cached_images)) with the workspace's
//! `hearth-image-tool`, and cached in `$HEARTH_TEST_CACHE/oci-images-<key>`; the key covers the
//! script, the images' key and the tool's source, so a change to any of them builds anew.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use sha2::{Digest, Sha256};

use super::images::{cached_images, images_key};
use crate::qemu::workspace_binary;
use crate::rootfs::cache_dir;
use crate::util;

/// The content of `images/build-oci-images.sh`.
pub const BUILD_OCI_IMAGES_SCRIPT: &str = include_str!("../../../images/build-oci-images.sh");

/// What the tool is built from (part of the cache key).
const TOOL_SOURCES: [&str; 2] = [
    include_str!("../../../images/tool/src/main.rs"),
    include_str!("../../../images/tool/Cargo.toml"),
];

/// The tags of the layout.
pub mod tags {
    /// `hearth/debian/v1` as a bootable container image.
    pub const V1: &str = "v1";
    /// `v1` plus one layer: `/usr/lib/hearth-image-version` = `v2`.
    pub const V2: &str = "v2";
    /// A manifest list: linux/amd64 → `v1`, linux/arm64 → `v2`.
    pub const MULTI: &str = "multi";
    /// The VM image's only ([`cached_vm_oci_images`](super::cached_vm_oci_images)): `v2` plus
    /// one layer whose initramfs has no `/init`: the kernel panics at every boot.
    pub const V3: &str = "v3";
}

/// The built container images.
#[derive(Debug, Clone)]
pub struct OciImages {
    /// The OCI image layout.
    pub layout: PathBuf,
    /// Tag → manifest digest (`sha256:…`).
    pub digests: BTreeMap<String, String>,
}

impl OciImages {
    /// The manifest digest of a tag.
    pub fn digest(&self, tag: &str) -> Result<&str> {
        self.digests
            .get(tag)
            .map(String::as_str)
            .ok_or_else(|| anyhow!("no image tagged {tag} in {}", self.layout.display()))
    }

    /// The manifest of a tag (JSON).
    pub fn manifest(&self, tag: &str) -> Result<serde_json::Value> {
        let digest = self.digest(tag)?;
        let hex = digest.trim_start_matches("sha256:");
        let path = self.layout.join("blobs/sha256").join(hex);
        let raw = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        Ok(serde_json::from_slice(&raw)?)
    }

    /// The layers of a tag's image (digest and compressed size), base first.
    pub fn layers(&self, tag: &str) -> Result<Vec<(String, u64)>> {
        let manifest = self.manifest(tag)?;
        Ok(manifest["layers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| {
                (
                    l["digest"].as_str().unwrap_or_default().to_string(),
                    l["size"].as_u64().unwrap_or(0),
                )
            })
            .collect())
    }

    /// `oci:<layout>:<tag>`, as skopeo takes it.
    pub fn reference(&self, tag: &str) -> String {
        format!("oci:{}:{tag}", self.layout.display())
    }
}

/// The cache key of the images made from the commits of the build with key `images_key`.
fn key_for(images_key: &str) -> String {
    let mut h = Sha256::new();
    h.update(BUILD_OCI_IMAGES_SCRIPT.as_bytes());
    h.update(images_key.as_bytes());
    for s in TOOL_SOURCES {
        h.update(s.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The cache key of [`cached_oci_images`].
pub fn oci_images_key() -> String {
    key_for(&images_key())
}

fn complete(dir: &Path) -> bool {
    dir.join("digests.env").exists() && dir.join("layout/index.json").exists()
}

/// Returns the cached container images made from the OS images' commits
/// ([`cached_images`]), building them first (the commits first if needed; then about 15 s).
pub fn cached_oci_images() -> Result<OciImages> {
    let images = cached_images()?;
    build(
        "oci-images",
        "the OS container images",
        images.dir,
        oci_images_key(),
    )
}

/// Returns the cached container images made from the VM image's commits (with a kernel:
/// `v1`, `v2`, `multi` and the never-booting `v3`), building them first (the VM image first
/// if needed; then about a minute).
pub fn cached_vm_oci_images() -> Result<OciImages> {
    let image = crate::qemu::cached_vm_image()?;
    let key = key_for(&crate::qemu::vm_image_key());
    build(
        "vm-oci-images",
        "the VM's OS container images",
        image.dir,
        key,
    )
}

fn build(
    prefix: &'static str,
    what: &'static str,
    images: PathBuf,
    key: String,
) -> Result<OciImages> {
    let tool = workspace_binary("hearth-image-tool", "hearth-image-tool")?;
    let dest = util::CachedBuild {
        prefix,
        what,
        takes: "about a minute at most",
        script: BUILD_OCI_IMAGES_SCRIPT,
        script_name: "build-oci-images.sh",
        key,
        needs: &[],
        env: vec![("HEARTH_IMAGES", images), ("HEARTH_IMAGE_TOOL", tool)],
        complete,
        remove: |p| fs::remove_dir_all(p).with_context(|| format!("removing {}", p.display())),
    }
    .get(&cache_dir())?;
    let env = fs::read_to_string(dest.join("digests.env"))
        .with_context(|| format!("reading {}/digests.env", dest.display()))?;
    Ok(OciImages {
        layout: dest.join("layout"),
        digests: env
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(t, d)| (t.trim().to_string(), d.trim().to_string()))
            .collect(),
    })
}
