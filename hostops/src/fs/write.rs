//! Writing inside the root, crash-safely: atomic file and symbolic link replacement, opening
//! or creating one shared file, removals, and cleaning up temporaries an interrupted write
//! left.

use nix::errno::Errno;
use nix::fcntl::{openat, renameat, renameat2, OFlag, RenameFlags};
use nix::sys::stat::{fchmod, Mode};
use nix::unistd::{fchown, fsync, symlinkat, unlinkat, Gid, Uid, UnlinkatFlags};
use std::io::Write;
use std::os::fd::AsFd;

use super::dirsync::DirSyncs;
use super::error::FsError;
use super::resolve::{split, temp_name, TMP_PREFIX};
use super::root::Root;
use super::stat::{EntryKind, Stat};

impl Root {
    /// Writes `content` to `path` atomically with `mode` and (if given) owner, creating parent
    /// directories (0755) as needed.
    pub fn write_atomic(
        &self,
        path: &str,
        content: &[u8],
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> Result<(), FsError> {
        self.write_atomic_inner(path, content, mode, owner, None)
    }

    /// [`Root::write_atomic`] whose directory fsync is left to `batch` (one per directory for a
    /// whole batch of writes; see [`DirSyncs`]): the file's content is fsynced before the rename
    /// as always, the rename is durable once the batch is synced.
    pub fn write_atomic_batched(
        &self,
        path: &str,
        content: &[u8],
        mode: u32,
        owner: Option<(u32, u32)>,
        batch: &DirSyncs,
    ) -> Result<(), FsError> {
        self.write_atomic_inner(path, content, mode, owner, Some(batch))
    }

    fn write_atomic_inner(
        &self,
        path: &str,
        content: &[u8],
        mode: u32,
        owner: Option<(u32, u32)>,
        batch: Option<&DirSyncs>,
    ) -> Result<(), FsError> {
        let (parent, name) = split(path)?;
        let dir = self.open_dir_create(&parent, path)?;
        let tmp = temp_name(name);
        let fd = openat(
            dir.as_fd(),
            tmp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| self.sys(path, "create temporary file", e))?;
        let result = (|| {
            if let Some((uid, gid)) = owner {
                fchown(
                    fd.as_fd(),
                    Some(Uid::from_raw(uid)),
                    Some(Gid::from_raw(gid)),
                )
                .map_err(|e| self.sys(path, "chown", e))?;
            }
            // After chown, which clears set-id bits.
            fchmod(fd.as_fd(), Mode::from_bits_truncate(mode & 0o7777))
                .map_err(|e| self.sys(path, "chmod", e))?;
            self.label_before_rename(dir.as_fd(), name, tmp.as_os_str(), EntryKind::File, path)?;
            let mut file = std::fs::File::from(fd);
            file.write_all(content).map_err(|source| FsError::Io {
                path: path.to_string(),
                op: "write",
                source,
            })?;
            file.sync_all().map_err(|source| FsError::Io {
                path: path.to_string(),
                op: "fsync",
                source,
            })?;
            drop(file);
            renameat(dir.as_fd(), tmp.as_os_str(), dir.as_fd(), name)
                .map_err(|e| self.sys(path, "rename", e))
        })();
        if result.is_err() {
            let _ = unlinkat(dir.as_fd(), tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
            return result;
        }
        match batch {
            Some(batch) => batch.add(self, dir, path),
            None => fsync(dir.as_fd()).map_err(|e| self.sys(path, "fsync directory", e)),
        }
    }

    /// Opens the regular file `path` for reading and writing, confined to the root like every
    /// other operation (a symlink on the way that leads out of the root is refused, and a
    /// symlink at `path` itself is never followed), creating it empty with `mode` when it does
    /// not exist. A new file is made under a temporary name, labelled, fsynced and renamed into
    /// place without replacing one that appeared meanwhile, so every opener of `path` gets the
    /// same file (what a lock file needs).
    pub fn open_or_create(&self, path: &str, mode: u32) -> Result<std::fs::File, FsError> {
        let (parent, name) = split(path)?;
        let dir = self.open_dir_create(&parent, path)?;
        let flags = OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        for _ in 0..8 {
            match openat(dir.as_fd(), name, flags, Mode::empty()) {
                Ok(fd) => return Ok(std::fs::File::from(fd)),
                Err(Errno::ENOENT) => {}
                Err(Errno::ELOOP) => {
                    return Err(FsError::Sys {
                        path: path.to_string(),
                        op: "open (a symbolic link is in the way)",
                        errno: Errno::ELOOP,
                    })
                }
                Err(e) => return Err(self.sys(path, "open", e)),
            }
            let tmp = temp_name(name);
            let fd = openat(
                dir.as_fd(),
                tmp.as_os_str(),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            )
            .map_err(|e| self.sys(path, "create temporary file", e))?;
            let result = (|| {
                fchmod(fd.as_fd(), Mode::from_bits_truncate(mode & 0o7777))
                    .map_err(|e| self.sys(path, "chmod", e))?;
                self.label_before_rename(
                    dir.as_fd(),
                    name,
                    tmp.as_os_str(),
                    EntryKind::File,
                    path,
                )?;
                fsync(fd.as_fd()).map_err(|e| self.sys(path, "fsync", e))?;
                match renameat2(
                    dir.as_fd(),
                    tmp.as_os_str(),
                    dir.as_fd(),
                    name,
                    RenameFlags::RENAME_NOREPLACE,
                ) {
                    // Made meanwhile by someone else: theirs stays.
                    Ok(()) | Err(Errno::EEXIST) => Ok(()),
                    Err(e) => Err(self.sys(path, "rename", e)),
                }?;
                fsync(dir.as_fd()).map_err(|e| self.sys(path, "fsync directory", e))
            })();
            let _ = unlinkat(dir.as_fd(), tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
            result?;
        }
        Err(self.sys(path, "open", Errno::ENOENT))
    }

    /// Creates or replaces a symbolic link atomically (for unit enablement and masks).
    pub fn symlink_atomic(&self, path: &str, target: &str) -> Result<(), FsError> {
        let (parent, name) = split(path)?;
        let dir = self.open_dir_create(&parent, path)?;
        let tmp = temp_name(name);
        symlinkat(target, dir.as_fd(), tmp.as_os_str())
            .map_err(|e| self.sys(path, "symlink", e))?;
        if let Err(e) = self
            .label_before_rename(dir.as_fd(), name, tmp.as_os_str(), EntryKind::Symlink, path)
            .and_then(|()| {
                renameat(dir.as_fd(), tmp.as_os_str(), dir.as_fd(), name)
                    .map_err(|e| self.sys(path, "rename", e))
            })
        {
            let _ = unlinkat(dir.as_fd(), tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
            return Err(e);
        }
        fsync(dir.as_fd()).map_err(|e| self.sys(path, "fsync directory", e))
    }

    /// Removes a file or symlink (not a directory); returns whether it existed.
    pub fn remove(&self, path: &str) -> Result<bool, FsError> {
        let (parent, name) = split(path)?;
        let dir = match self.open_dir(&parent, path) {
            Ok(d) => d,
            Err(e) if e.is_not_found() => return Ok(false),
            Err(e) => return Err(e),
        };
        match unlinkat(dir.as_fd(), name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) => {
                fsync(dir.as_fd()).map_err(|e| self.sys(path, "fsync directory", e))?;
                Ok(true)
            }
            Err(Errno::ENOENT) => Ok(false),
            Err(e) => Err(self.sys(path, "remove", e)),
        }
    }

    /// Removes an empty directory; returns whether it was removed.
    pub fn remove_empty_dir(&self, path: &str) -> Result<bool, FsError> {
        let (parent, name) = split(path)?;
        let dir = match self.open_dir(&parent, path) {
            Ok(d) => d,
            Err(e) if e.is_not_found() => return Ok(false),
            Err(e) => return Err(e),
        };
        match unlinkat(dir.as_fd(), name, UnlinkatFlags::RemoveDir) {
            Ok(()) => Ok(true),
            Err(Errno::ENOENT | Errno::ENOTEMPTY | Errno::EEXIST) => Ok(false),
            Err(e) => Err(self.sys(path, "remove directory", e)),
        }
    }

    /// Removes temporary files (and empty temporary directories) left in `dir` by a write
    /// interrupted by a crash.
    pub fn remove_stale_temporaries(&self, dir: &str) -> Result<usize, FsError> {
        let mut n = 0;
        for name in self.list_dir(dir)? {
            if name.starts_with(TMP_PREFIX) {
                let p = if dir == "/" {
                    format!("/{name}")
                } else {
                    format!("{dir}/{name}")
                };
                let removed = match self.stat(&p)? {
                    Some(Stat {
                        kind: EntryKind::Dir,
                        ..
                    }) => self.remove_empty_dir(&p)?,
                    _ => self.remove(&p)?,
                };
                if removed {
                    n += 1;
                }
            }
        }
        Ok(n)
    }
}
