//! The node's OCI image layout of pulled OS images ([`IMAGE_CACHE`]): what a manifest needs,
//! which blobs are already there, which tag holds which manifest, and the garbage collection
//! that keeps only the images still deployed.
//!
//! [`IMAGE_CACHE`]: hearth_hostops::os::paths::IMAGE_CACHE

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tracing::{debug, warn};

use hearth_hostops::fs::Root;
use hearth_hostops::os::paths::inside;
use hearth_hostops::os::{is_sha256_digest, OsError, SHA256};

use crate::skopeo::MAX_MANIFEST_BYTES;

/// The largest `index.json` read (a layout hearth writes holds a few entries).
const MAX_INDEX_BYTES: usize = 4 * 1024 * 1024;

/// The prefix of the temporary files containers/image writes a blob into, in the layout's
/// directory, before it renames them into `blobs/` (a killed copy leaves them).
const TEMP_BLOB_PREFIX: &str = "oci-put-blob";

/// The annotation that names a tag in an OCI layout's index.
const REF_NAME: &str = "org.opencontainers.image.ref.name";

const LIST_TYPES: [&str; 2] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// A blob a manifest names: digest and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Blob {
    pub(crate) digest: String,
    pub(crate) size: u64,
}

/// A parsed manifest: a manifest list (its instances) or an image manifest (its blobs).
#[derive(Debug)]
pub(crate) enum Parsed {
    /// A list: `(digest, architecture, os)` per instance.
    List(Vec<(String, String, String)>),
    /// An image: its config and layers.
    Image(Vec<Blob>),
}

/// Reads a manifest's JSON.
pub(crate) fn parse_manifest(raw: &[u8]) -> Result<Parsed, String> {
    let v: Value = serde_json::from_slice(raw).map_err(|e| format!("invalid manifest: {e}"))?;
    let media = v.get("mediaType").and_then(Value::as_str).unwrap_or("");
    if LIST_TYPES.contains(&media) || (media.is_empty() && v.get("manifests").is_some()) {
        let mut out = Vec::new();
        for m in v["manifests"].as_array().into_iter().flatten() {
            let digest = m["digest"].as_str().unwrap_or_default();
            if !is_sha256_digest(digest) {
                return Err(format!("manifest list entry with digest {digest:?}"));
            }
            let p = &m["platform"];
            out.push((
                digest.to_string(),
                p["architecture"].as_str().unwrap_or_default().to_string(),
                p["os"].as_str().unwrap_or_default().to_string(),
            ));
        }
        return Ok(Parsed::List(out));
    }
    let mut blobs = Vec::new();
    let config = std::iter::once(&v["config"]);
    for b in config.chain(v["layers"].as_array().into_iter().flatten()) {
        let digest = b["digest"].as_str().unwrap_or_default();
        if !is_sha256_digest(digest) {
            return Err(format!("manifest names a blob with digest {digest:?}"));
        }
        let size = b["size"]
            .as_u64()
            .ok_or_else(|| format!("blob {digest} has no size"))?;
        blobs.push(Blob {
            digest: digest.to_string(),
            size,
        });
    }
    Ok(Parsed::Image(blobs))
}

fn empty_index() -> Value {
    serde_json::json!({"schemaVersion": 2, "manifests": []})
}

/// The Go architecture name of this machine (what manifest lists use).
pub(crate) fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        other => other,
    }
}

/// An OCI image layout directory inside a root.
#[derive(Debug)]
pub(crate) struct Layout {
    /// The root its writes are confined to, and its path there.
    root: PathBuf,
    path: String,
    dir: PathBuf,
}

impl Layout {
    /// The layout at `path` inside `root`.
    pub(crate) fn new(root: &Path, path: &str) -> Layout {
        Layout {
            root: root.to_path_buf(),
            path: path.trim_end_matches('/').to_string(),
            dir: inside(root, path),
        }
    }

    /// The layout that is the directory `dir` (its writes confined to it).
    pub(crate) fn at(dir: PathBuf) -> Layout {
        Layout {
            root: dir.clone(),
            path: String::new(),
            dir,
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The layout's directory, or the nearest ancestor that exists (for a space check before
    /// the first pull made it).
    pub(crate) fn existing_ancestor(&self) -> PathBuf {
        self.dir
            .ancestors()
            .find(|p| p.exists())
            .unwrap_or(&self.root)
            .to_path_buf()
    }

    fn blob_path(&self, digest: &str) -> Option<PathBuf> {
        is_sha256_digest(digest)
            .then(|| self.dir.join("blobs/sha256").join(&digest[SHA256.len()..]))
    }

    /// Whether the layout holds the blob.
    pub(crate) fn has_blob(&self, digest: &str) -> bool {
        self.blob_path(digest).is_some_and(|p| p.is_file())
    }

    /// A blob of at most [`MAX_MANIFEST_BYTES`] (a manifest), if the layout has it.
    pub(crate) fn read_blob(&self, digest: &str) -> Result<Option<Vec<u8>>, OsError> {
        match self.blob_path(digest) {
            Some(path) => Self::read_bounded(&path, MAX_MANIFEST_BYTES),
            None => Ok(None),
        }
    }

    fn read_bounded(path: &Path, max: usize) -> Result<Option<Vec<u8>>, OsError> {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(OsError::io(path, e)),
        };
        let mut raw = Vec::new();
        file.take(max as u64 + 1)
            .read_to_end(&mut raw)
            .map_err(|e| OsError::io(path, e))?;
        if raw.len() > max {
            return Err(OsError::io(path, format!("larger than {max} bytes")));
        }
        Ok(Some(raw))
    }

    fn index(&self) -> Result<Value, OsError> {
        let path = self.dir.join("index.json");
        match Self::read_bounded(&path, MAX_INDEX_BYTES)? {
            None => Ok(empty_index()),
            Some(raw) => serde_json::from_slice(&raw)
                .map_err(|e| OsError::io(&path, format!("invalid JSON: {e}"))),
        }
    }

    fn write_index(&self, index: &Value) -> Result<(), OsError> {
        let bytes = serde_json::to_vec(index).unwrap_or_default();
        let path = format!("{}/index.json", self.path);
        Root::open(&self.root)
            .and_then(|r| r.write_atomic(&path, &bytes, 0o644, Some((0, 0))))
            .map_err(|e| OsError::io(self.dir.join("index.json"), e))
    }

    /// Before a copy: the directory exists; what a killed copy left is gone (its temporary
    /// blob files); an index a crash left unreadable (skopeo writes it in place) is replaced by
    /// an empty one: the layout is a cache, its blobs stay and are found again by digest.
    pub(crate) fn prepare(&self) -> Result<(), OsError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| OsError::io(&self.dir, e))?;
        self.remove_temporaries()?;
        if self.dir.join("index.json").exists() && self.index().is_err() {
            warn!(layout = %self.dir.display(), "the image layout's index.json is unreadable; starting it anew");
            self.write_index(&empty_index())?;
        }
        Ok(())
    }

    /// The bytes in containers/image's temporary blob files: blobs being fetched now.
    pub(crate) fn partial_bytes(&self) -> u64 {
        [self.dir.clone(), self.dir.join("blobs/sha256")]
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flat_map(|entries| entries.flatten())
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(TEMP_BLOB_PREFIX)
            })
            .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
            .sum()
    }

    /// Removes containers/image's temporary blob files; returns the bytes freed.
    fn remove_temporaries(&self) -> Result<u64, OsError> {
        let mut freed = 0;
        for dir in [self.dir.clone(), self.dir.join("blobs/sha256")] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with(TEMP_BLOB_PREFIX)
                {
                    freed += entry.metadata().map(|m| m.len()).unwrap_or(0);
                    let path = entry.path();
                    std::fs::remove_file(&path).map_err(|e| OsError::io(&path, e))?;
                }
            }
        }
        Ok(freed)
    }

    /// The digest of the manifest tagged `tag`.
    pub(crate) fn tagged(&self, tag: &str) -> Result<Option<String>, OsError> {
        let index = self.index()?;
        Ok(index["manifests"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["annotations"][REF_NAME].as_str() == Some(tag))
            .and_then(|m| m["digest"].as_str())
            .map(str::to_string))
    }

    /// Keeps the manifests in `keep` (digests) and the blobs they name; removes the other
    /// index entries and blobs (and what a stopped copy left behind). Returns the bytes freed.
    pub(crate) fn collect_garbage(&self, keep: &HashSet<String>) -> Result<u64, OsError> {
        if !self.dir.exists() {
            return Ok(0);
        }
        let mut freed = self.remove_temporaries()?;
        let mut index = self.index().unwrap_or_else(|_| empty_index());
        let before = index["manifests"].as_array().map_or(0, Vec::len);
        if let Some(list) = index["manifests"].as_array_mut() {
            list.retain(|m| m["digest"].as_str().is_some_and(|d| keep.contains(d)));
        }
        let after = index["manifests"].as_array().map_or(0, Vec::len);
        if after != before {
            self.write_index(&index)?;
        }
        // What the kept manifests name (a list's instances included).
        let mut live: HashSet<String> = HashSet::new();
        let mut todo: Vec<String> = index["manifests"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["digest"].as_str().map(str::to_string))
            .collect();
        while let Some(d) = todo.pop() {
            if !live.insert(d.clone()) {
                continue;
            }
            let Some(raw) = self.read_blob(&d)? else {
                continue;
            };
            match parse_manifest(&raw) {
                Ok(Parsed::List(instances)) => todo.extend(instances.into_iter().map(|i| i.0)),
                Ok(Parsed::Image(blobs)) => live.extend(blobs.into_iter().map(|b| b.digest)),
                Err(e) => debug!(digest = %d, "not a manifest: {e}"),
            }
        }
        let blobs = self.dir.join("blobs/sha256");
        let entries = match std::fs::read_dir(&blobs) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(freed),
            Err(e) => return Err(OsError::io(&blobs, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| OsError::io(&blobs, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if live.contains(&format!("sha256:{name}")) {
                continue;
            }
            let path = entry.path();
            freed += entry.metadata().map(|m| m.len()).unwrap_or(0);
            std::fs::remove_file(&path).map_err(|e| OsError::io(&path, e))?;
        }
        debug!(layout = %self.dir.display(), freed, "image layout collected");
        Ok(freed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    #[test]
    fn manifests_and_lists_are_read() {
        let image = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"digest": digest('a'), "size": 10},
            "layers": [{"digest": digest('b'), "size": 300}, {"digest": digest('c'), "size": 5}]
        });
        match parse_manifest(image.to_string().as_bytes()).unwrap() {
            Parsed::Image(blobs) => {
                assert_eq!(blobs.iter().map(|b| b.size).sum::<u64>(), 315);
                assert_eq!(blobs[1].digest, digest('b'));
            }
            other => panic!("{other:?}"),
        }
        let list = serde_json::json!({
            "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
            "manifests": [
                {"digest": digest('d'), "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}},
                {"digest": digest('e'), "platform": {"architecture": "amd64", "os": "linux"}}
            ]
        });
        match parse_manifest(list.to_string().as_bytes()).unwrap() {
            Parsed::List(i) => {
                assert_eq!(i[0].1, "arm64");
                assert_eq!(
                    (i[1].0.as_str(), i[1].1.as_str()),
                    (digest('e').as_str(), "amd64")
                );
            }
            other => panic!("{other:?}"),
        }
        let bad = serde_json::json!({"config": {"digest": "sha256:../../etc", "size": 1}});
        assert!(parse_manifest(bad.to_string().as_bytes()).is_err());
        assert!(parse_manifest(b"[").is_err());
    }

    #[test]
    fn garbage_collection_keeps_what_kept_manifests_name() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::new(root.path(), "/images");
        let dir = layout.dir().to_path_buf();
        let blobs = dir.join("blobs/sha256");
        std::fs::create_dir_all(&blobs).unwrap();
        let manifest = |config: char, layer: char| {
            serde_json::json!({
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"digest": digest(config), "size": 1},
                "layers": [{"digest": digest(layer), "size": 1}]
            })
            .to_string()
        };
        // Manifest digests are not checked here: names stand in for them.
        std::fs::write(blobs.join("1".repeat(64)), manifest('a', 'b')).unwrap();
        std::fs::write(blobs.join("2".repeat(64)), manifest('a', 'c')).unwrap();
        for c in ['a', 'b', 'c'] {
            std::fs::write(blobs.join(c.to_string().repeat(64)), "x").unwrap();
        }
        std::fs::write(dir.join("oci-put-blob123"), "partial").unwrap();
        std::fs::write(blobs.join("oci-put-blob456"), "partial").unwrap();
        let index = serde_json::json!({"schemaVersion": 2, "manifests": [
            {"digest": digest('1'), "size": 1, "annotations": {REF_NAME: "one"}},
            {"digest": digest('2'), "size": 1, "annotations": {REF_NAME: "two"}}
        ]});
        std::fs::write(dir.join("index.json"), index.to_string()).unwrap();
        assert_eq!(layout.tagged("two").unwrap(), Some(digest('2')));
        let keep = HashSet::from([digest('2')]);
        assert!(layout.collect_garbage(&keep).unwrap() > 0);
        let mut left: Vec<String> = std::fs::read_dir(&blobs)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy()[..1].to_string())
            .collect();
        left.sort();
        assert_eq!(left, ["2", "a", "c"]);
        assert_eq!(layout.tagged("one").unwrap(), None);
        assert!(layout.has_blob(&digest('c')) && !layout.has_blob(&digest('b')));
        assert!(
            !dir.join("oci-put-blob123").exists(),
            "a killed copy's temporary file"
        );
    }

    #[test]
    fn an_unreadable_index_is_started_anew_and_the_blobs_stay() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::new(root.path(), "/images");
        let dir = layout.dir().to_path_buf();
        std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        std::fs::write(dir.join("blobs/sha256").join("a".repeat(64)), "layer").unwrap();
        std::fs::write(dir.join("index.json"), "{\"manifests\": [{\"dig").unwrap();
        std::fs::write(dir.join("oci-put-blob9"), "partial").unwrap();
        assert!(layout.tagged("x").is_err());
        layout.prepare().unwrap();
        assert_eq!(layout.tagged("x").unwrap(), None);
        assert!(layout.has_blob(&digest('a')));
        assert!(!dir.join("oci-put-blob9").exists());
    }
}
