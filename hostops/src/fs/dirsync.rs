//! Directory fsyncs deferred to the end of a batch of writes.
//!
//! An atomic write is durable once its rename is on disk, which takes an `fsync` of the
//! directory. Writing 1,000 files into 10 directories needs 10 of those, not 1,000: a batch
//! ([`DirSyncs`]) collects the directories [`Root::write_atomic_batched`] renamed into (each once,
//! by device and inode) and [`DirSyncs::sync`] fsyncs each of them once. The caller syncs the
//! batch before it records anything that relies on the writes (the agent: before its journal
//! moves past the step); until then a crash may lose a rename (the old file is back, whole),
//! never tear a file. At most [`MAX_PENDING_DIRS`] directories are held open: the next new one
//! syncs and closes the batch so far first.

use nix::sys::stat::fstat;
use nix::unistd::fsync;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;

use super::error::FsError;
use super::root::Root;

/// The most directory descriptors a batch keeps open before it syncs them early (well under
/// the usual soft limit of 1,024 open files).
pub const MAX_PENDING_DIRS: usize = 256;

/// Directories with renames not yet fsynced (see the module documentation).
#[derive(Debug, Default)]
pub struct DirSyncs {
    pending: Mutex<Vec<Pending>>,
}

#[derive(Debug)]
struct Pending {
    /// Device and inode: the same directory reached twice is synced once.
    id: (u64, u64),
    fd: OwnedFd,
    /// The first path written there, for error messages.
    path: String,
}

impl DirSyncs {
    /// An empty batch.
    pub fn new() -> DirSyncs {
        DirSyncs::default()
    }

    /// How many directories wait for their fsync.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no directory waits for its fsync.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds the directory `dir` (where `path` was just renamed into place).
    pub(super) fn add(&self, root: &Root, dir: OwnedFd, path: &str) -> Result<(), FsError> {
        let st = fstat(dir.as_fd()).map_err(|e| root.sys(path, "stat directory", e))?;
        let id = (st.st_dev, st.st_ino);
        let mut pending = self.lock();
        if pending.iter().any(|p| p.id == id) {
            return Ok(());
        }
        if pending.len() >= MAX_PENDING_DIRS {
            sync_all(root, &mut pending)?;
        }
        pending.push(Pending {
            id,
            fd: dir,
            path: path.to_string(),
        });
        Ok(())
    }

    /// Fsyncs every pending directory once; returns how many. On an error the directories not
    /// synced yet stay pending.
    pub fn sync(&self, root: &Root) -> Result<usize, FsError> {
        sync_all(root, &mut self.lock())
    }
}

fn sync_all(root: &Root, pending: &mut Vec<Pending>) -> Result<usize, FsError> {
    let mut n = 0;
    while let Some(p) = pending.last() {
        fsync(p.fd.as_fd()).map_err(|e| root.sys(&p.path, "fsync directory", e))?;
        pending.pop();
        n += 1;
    }
    Ok(n)
}

impl Drop for DirSyncs {
    /// A batch dropped unsynced (an error path) still makes its renames durable, best effort.
    fn drop(&mut self) {
        for p in self.lock().drain(..) {
            let _ = fsync(p.fd.as_fd());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_directory_once_and_never_more_than_the_cap_open() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        let batch = DirSyncs::new();
        // Many files into one directory: one pending directory.
        for i in 0..50 {
            root.write_atomic_batched(&format!("/etc/one/f{i}"), b"x", 0o644, None, &batch)
                .unwrap();
        }
        assert_eq!(batch.len(), 1);
        // The same directory under another path (a symbolic link inside the root) is the
        // same directory.
        std::os::unix::fs::symlink("one", d.path().join("etc/alias")).unwrap();
        root.write_atomic_batched("/etc/alias/g", b"y", 0o644, None, &batch)
            .unwrap();
        assert_eq!(batch.len(), 1);
        // More directories than the cap: the batch syncs early and never holds more.
        for i in 0..MAX_PENDING_DIRS + 10 {
            root.write_atomic_batched(&format!("/var/d{i}/f"), b"z", 0o600, None, &batch)
                .unwrap();
            assert!(batch.len() <= MAX_PENDING_DIRS);
        }
        assert!(!batch.is_empty());
        let n = batch.sync(&root).unwrap();
        assert!(n > 0 && n <= MAX_PENDING_DIRS, "{n}");
        assert!(batch.is_empty());
        // Every file is in place, whole, with its mode.
        assert_eq!(std::fs::read(d.path().join("etc/one/f49")).unwrap(), b"x");
        assert_eq!(std::fs::read(d.path().join("etc/one/g")).unwrap(), b"y");
        let last = d.path().join(format!("var/d{}/f", MAX_PENDING_DIRS + 9));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(last).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
