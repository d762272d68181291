//! Managed files: writing a config's file entries, keeping the original of every file hearth
//! overwrites (once), restoring it when the file leaves the config, and snapshots for undo.
//!
//! State lives under [`STATE_DIR`] in the target root:
//! - `originals/<id>.json` (+ `<id>.data`): what was at a path before hearth first wrote it, or
//!   the fact that nothing was. Written once, never overwritten while it exists, removed when the
//!   original is restored.
//! - snapshots (see [`Snapshot`]) are the same record for undo within one apply; the agent keeps
//!   them in its journal directory.
//!
//! `<id>` is the sha256 of the path, so any path length fits; the record holds the path itself.

use crate::fs::{self, Entry, EntryKind, FsError, Root};
use hearth_config::ignition::File;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// hearth's state directory inside the target root.
pub const STATE_DIR: &str = hearth_config::own::STATE_DIR;
/// Where originals are kept.
pub const ORIGINALS_DIR: &str = "/var/lib/hearth/originals";
/// Ignition's default mode for files.
pub const DEFAULT_FILE_MODE: u32 = 0o644;

/// Errors of managed-file operations.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A file-system operation failed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// The entry's contents cannot be decoded.
    #[error("{path}: contents cannot be decoded: {message}")]
    Contents {
        /// The path.
        path: String,
        /// Why.
        message: String,
    },
    /// A saved record is corrupt.
    #[error("{path}: saved record {record} is unreadable: {message}")]
    Record {
        /// The managed path.
        path: String,
        /// The record file.
        record: String,
        /// Why.
        message: String,
    },
}

/// What was at a path at some moment: enough to put it back exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Snapshot {
    /// Nothing was there.
    Absent {
        /// The path.
        path: String,
    },
    /// A regular file (its content is stored beside the record).
    File {
        /// The path.
        path: String,
        /// Permission bits.
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// sha256 of the content, to detect a damaged copy.
        sha256: String,
    },
    /// A symbolic link.
    Symlink {
        /// The path.
        path: String,
        /// Its target.
        target: String,
    },
}

impl Snapshot {
    /// The path the snapshot is of.
    pub fn path(&self) -> &str {
        match self {
            Snapshot::Absent { path }
            | Snapshot::File { path, .. }
            | Snapshot::Symlink { path, .. } => path,
        }
    }
}

/// The record name of a path.
pub fn record_id(path: &str) -> String {
    hex::encode(&Sha256::digest(path.as_bytes())[..16])
}

/// The decoded content of a file entry: its contents followed by its append fragments.
pub fn file_content(file: &File) -> Result<Vec<u8>, FileError> {
    let decode = |r: &hearth_config::ignition::Resource| -> Result<Vec<u8>, FileError> {
        match r.source.as_deref() {
            None => Ok(Vec::new()),
            Some(src) => {
                hearth_config::dataurl::decode(src, r.compression.as_deref()).map_err(|e| {
                    FileError::Contents {
                        path: file.path.clone(),
                        message: e.to_string(),
                    }
                })
            }
        }
    };
    let mut out = decode(&file.contents)?;
    for a in &file.append {
        out.extend(decode(a)?);
    }
    Ok(out)
}

/// The mode a file entry asks for (Ignition's default 0644 when unset).
pub fn file_mode(file: &File) -> u32 {
    file.mode
        .map(|m| m as u32 & 0o7777)
        .unwrap_or(DEFAULT_FILE_MODE)
}

/// Takes a snapshot of `path` and stores it in `dir` (a directory inside the root) as
/// `<id>.json` (+ `<id>.data`). The data is written before the record, so a record that exists
/// is complete.
pub fn save_snapshot(root: &Root, path: &str, dir: &str) -> Result<Snapshot, FileError> {
    let id = record_id(path);
    let snap = match root.stat(path)? {
        None => Snapshot::Absent { path: path.into() },
        Some(st) if st.kind == EntryKind::Symlink => Snapshot::Symlink {
            path: path.into(),
            target: root.read_link(path)?.unwrap_or_default(),
        },
        Some(st) => {
            let data = root.read(path)?.unwrap_or_default();
            root.write_atomic(&format!("{dir}/{id}.data"), &data, 0o600, None)?;
            Snapshot::File {
                path: path.into(),
                mode: st.mode,
                uid: st.uid,
                gid: st.gid,
                sha256: hex::encode(Sha256::digest(&data)),
            }
        }
    };
    let json = serde_json::to_vec_pretty(&snap).map_err(|e| FileError::Record {
        path: path.into(),
        record: format!("{dir}/{id}.json"),
        message: e.to_string(),
    })?;
    root.write_atomic(&format!("{dir}/{id}.json"), &json, 0o600, None)?;
    Ok(snap)
}

/// Reads the snapshot of `path` stored in `dir`, if any.
pub fn load_snapshot(root: &Root, path: &str, dir: &str) -> Result<Option<Snapshot>, FileError> {
    let record = format!("{dir}/{}.json", record_id(path));
    let Some(bytes) = root.read(&record)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| FileError::Record {
            path: path.into(),
            record,
            message: e.to_string(),
        })
}

/// Puts `path` back as the snapshot stored in `dir` says, then removes the snapshot.
pub fn restore_snapshot(root: &Root, snap: &Snapshot, dir: &str) -> Result<(), FileError> {
    let path = snap.path();
    let id = record_id(path);
    match snap {
        Snapshot::Absent { .. } => {
            if root.stat(path)?.is_some_and(|s| s.kind != EntryKind::Dir) {
                root.remove(path)?;
            }
        }
        Snapshot::Symlink { target, .. } => root.symlink_atomic(path, target)?,
        Snapshot::File {
            mode,
            uid,
            gid,
            sha256,
            ..
        } => {
            let data_path = format!("{dir}/{id}.data");
            let data = root.read(&data_path)?.ok_or_else(|| FileError::Record {
                path: path.into(),
                record: data_path.clone(),
                message: "the saved content is missing".into(),
            })?;
            if hex::encode(Sha256::digest(&data)) != *sha256 {
                return Err(FileError::Record {
                    path: path.into(),
                    record: data_path,
                    message: "the saved content does not match its checksum".into(),
                });
            }
            root.write_atomic(path, &data, *mode, Some((*uid, *gid)))?;
        }
    }
    root.remove(&format!("{dir}/{id}.data"))?;
    root.remove(&format!("{dir}/{id}.json"))?;
    Ok(())
}

/// Keeps the original of `path` the first time hearth is about to write it. Later calls do
/// nothing while an original is kept.
pub fn save_original_once(root: &Root, path: &str) -> Result<(), FileError> {
    if load_snapshot(root, path, ORIGINALS_DIR)?.is_none() {
        save_snapshot(root, path, ORIGINALS_DIR)?;
    }
    Ok(())
}

/// What [`restore_original`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// The original file (or link) is back.
    Original,
    /// There was none: the file was removed.
    Removed,
}

/// A path left the config: put back the original hearth kept, or remove the file when there was
/// none (or no record, for files written before hearth kept originals).
pub fn restore_original(root: &Root, path: &str) -> Result<Restored, FileError> {
    match load_snapshot(root, path, ORIGINALS_DIR)? {
        Some(snap @ (Snapshot::File { .. } | Snapshot::Symlink { .. })) => {
            restore_snapshot(root, &snap, ORIGINALS_DIR)?;
            Ok(Restored::Original)
        }
        Some(snap @ Snapshot::Absent { .. }) => {
            restore_snapshot(root, &snap, ORIGINALS_DIR)?;
            Ok(Restored::Removed)
        }
        None => {
            root.remove(path)?;
            Ok(Restored::Removed)
        }
    }
}

/// Writes raw content as a managed file: keeps the original once, then writes atomically.
pub fn write_managed(
    root: &Root,
    path: &str,
    content: &[u8],
    mode: u32,
    owner: (u32, u32),
) -> Result<(), FileError> {
    save_original_once(root, path)?;
    root.write_atomic(path, content, mode, Some(owner))?;
    Ok(())
}

/// Whether `path` already holds exactly `content` with `mode` and `owner` (a no-op write).
pub fn is_current(
    root: &Root,
    path: &str,
    content: &[u8],
    mode: u32,
    owner: (u32, u32),
) -> Result<bool, FileError> {
    // One open: the stat and the content come from the same descriptor.
    let Some(Entry::File(st, mut file)) = root.open_entry(path)? else {
        return Ok(false);
    };
    if st.mode != mode || (st.uid, st.gid) != owner || st.size != content.len() as u64 {
        return Ok(false);
    }
    Ok(fs::read_all(&mut file, path, st.size)? == content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_config::ignition::Resource;

    fn root() -> (tempfile::TempDir, Root) {
        let d = tempfile::tempdir().unwrap();
        let r = Root::open(d.path()).unwrap();
        (d, r)
    }

    #[test]
    fn original_is_kept_once_and_restored() {
        let (d, r) = root();
        std::fs::create_dir_all(d.path().join("etc")).unwrap();
        std::fs::write(d.path().join("etc/chrony.conf"), b"pool original\n").unwrap();
        write_managed(&r, "/etc/chrony.conf", b"server a\n", 0o644, (0, 0)).unwrap();
        write_managed(&r, "/etc/chrony.conf", b"server b\n", 0o644, (0, 0)).unwrap();
        assert_eq!(r.read("/etc/chrony.conf").unwrap().unwrap(), b"server b\n");
        assert_eq!(
            restore_original(&r, "/etc/chrony.conf").unwrap(),
            Restored::Original
        );
        assert_eq!(
            r.read("/etc/chrony.conf").unwrap().unwrap(),
            b"pool original\n"
        );
        assert!(r.list_dir(ORIGINALS_DIR).unwrap().is_empty());
    }

    #[test]
    fn a_new_file_is_removed_when_dropped() {
        let (_d, r) = root();
        write_managed(&r, "/etc/new", b"x", 0o600, (0, 0)).unwrap();
        assert_eq!(restore_original(&r, "/etc/new").unwrap(), Restored::Removed);
        assert!(r.stat("/etc/new").unwrap().is_none());
    }

    #[test]
    fn snapshots_restore_symlinks_and_detect_damage() {
        let (d, r) = root();
        r.symlink_atomic("/etc/resolv.conf", "../run/resolv.conf")
            .unwrap();
        let snap = save_snapshot(&r, "/etc/resolv.conf", "/var/lib/hearth/undo").unwrap();
        r.write_atomic("/etc/resolv.conf", b"nameserver 1\n", 0o644, None)
            .unwrap();
        restore_snapshot(&r, &snap, "/var/lib/hearth/undo").unwrap();
        assert_eq!(
            r.read_link("/etc/resolv.conf").unwrap().as_deref(),
            Some("../run/resolv.conf")
        );

        r.write_atomic("/etc/f", b"v1", 0o640, None).unwrap();
        let snap = save_snapshot(&r, "/etc/f", "/u").unwrap();
        let id = record_id("/etc/f");
        std::fs::write(d.path().join(format!("u/{id}.data")), b"damaged").unwrap();
        let err = restore_snapshot(&r, &snap, "/u").unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
    }

    #[test]
    fn content_of_entries() {
        let f = File {
            path: "/x".into(),
            contents: Resource {
                source: Some("data:,a".into()),
                ..Default::default()
            },
            append: vec![Resource {
                source: Some("data:,b".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(file_content(&f).unwrap(), b"ab");
        assert_eq!(file_mode(&f), 0o644);
    }
}
