//! Files under a root directory, written crash-safely and never through a symlink that leads out
//! of the root.
//!
//! Every path is resolved relative to an open file descriptor of the root with `openat2(2)` and
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: symbolic links inside the root are followed (Fedora
//! CoreOS has `/usr/local -> ../var/usrlocal` and `/home -> var/home`), but a link whose
//! resolution leaves the root (`../../..`, or any absolute link) makes the operation fail with
//! [`FsError::EscapesRoot`]. The last component is never followed when writing: a file is
//! replaced by `renameat(2)`, so a symlink planted at a managed path is replaced, not written
//! through.
//!
//! A write is atomic: a temporary file in the same directory is created with `O_EXCL`, its owner
//! and mode are set before any content is written, the content is written and `fsync`ed, the file
//! is renamed over the target, and the directory is `fsync`ed. A crash at any point leaves either
//! the old file or the new one, never a torn one (at worst a stray temporary file, which
//! [`Root::remove_stale_temporaries`] cleans up).
//!
//! # SELinux labels
//!
//! Every file, symbolic link and directory this module creates is labelled before it appears
//! under its name (a rename never drops a label): the temporary entry gets
//!
//! 1. the `security.selinux` label of the entry it replaces, when that is of the same kind and
//!    has one; else
//! 2. the label the policy's `file_contexts` give the path (see [`crate::selinux`]), when SELinux
//!    is on for this root: for the running host (`/`) when `/sys/fs/selinux/enforce` exists,
//!    for another root when its `/etc/selinux/config` says `enforcing` or `permissive`. The path
//!    looked up is the real one (symbolic links inside the root resolved, as `restorecon` does);
//!    no matching rule, `<<none>>`, or SELinux off means no label is set;
//! 3. nothing, on a file system that does not store labels (`EOPNOTSUPP`).
//!
//! New directories are made under a temporary name, labelled and renamed into place. A label
//! that cannot be read or set fails the operation with [`FsError::Label`] naming the path, the
//! label and the reason, and the temporary entry is removed: nothing half-written is left.

mod dirsync;
mod entry;
mod label;
mod read;
mod resolve;
#[cfg(test)]
mod tests;
mod write;

pub use dirsync::{DirSyncs, MAX_PENDING_DIRS};
pub use entry::{read_all, Entry};
pub(crate) use resolve::open_beneath;

use crate::selinux::{self, Labelling};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What went wrong with a file operation; every variant names the path (inside the root).
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path is not an absolute, clean path.
    #[error("{path}: not an absolute path without '.' or '..' components")]
    BadPath {
        /// The path.
        path: String,
    },
    /// Resolving the path would leave the root (a symlink points outside).
    #[error("{path}: refused: a symbolic link on this path leads outside the root {root}")]
    EscapesRoot {
        /// The path.
        path: String,
        /// The root.
        root: String,
    },
    /// A system call failed.
    #[error("{path}: {op}: {errno}")]
    Sys {
        /// The path.
        path: String,
        /// The operation (`open`, `rename`, ...).
        op: &'static str,
        /// The error.
        errno: Errno,
    },
    /// Reading or writing content failed.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The operation.
        op: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// An SELinux label could not be found or set; the entry was not renamed into place.
    #[error("{path}: SELinux label: {op}: {reason}")]
    Label {
        /// The path.
        path: String,
        /// What was being done, with the label when known.
        op: String,
        /// Why it failed.
        reason: String,
    },
}

impl FsError {
    /// True when the error means "does not exist".
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            FsError::Sys {
                errno: Errno::ENOENT,
                ..
            }
        )
    }
}

/// Stat information of an entry (not following a final symlink).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// What kind of entry.
    pub kind: EntryKind,
}

/// Kinds of directory entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// Anything else (device, FIFO, socket).
    Other,
}

/// An open root directory.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    path: PathBuf,
    /// The root's path with symbolic links resolved (to turn directory descriptors back into
    /// paths inside the root).
    real: PathBuf,
    /// Whether SELinux labels new paths here; read at first need.
    labelling: OnceLock<Result<Labelling, String>>,
}

impl Root {
    /// Opens `path` as the root directory (`/` in production, a container's root in tests).
    pub fn open(path: impl Into<PathBuf>) -> Result<Root, FsError> {
        let path = path.into();
        let fd = nix::fcntl::open(
            &path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| FsError::Sys {
            path: path.display().to_string(),
            op: "open root",
            errno,
        })?;
        let real = fd_path(fd.as_fd())
            .or_else(|| std::fs::canonicalize(&path).ok())
            .unwrap_or_else(|| path.clone());
        Ok(Root {
            fd,
            path,
            real,
            labelling: OnceLock::new(),
        })
    }

    /// The root's path on this machine.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The host path of `path` inside the root (for messages and for tools that need a path).
    pub fn host_path(&self, path: &str) -> PathBuf {
        self.path.join(path.trim_start_matches('/'))
    }
}

/// The SELinux policy of a root is read through the root, confined like every other read.
impl selinux::PolicySource for Root {
    type Error = FsError;

    fn read_policy_file(&self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        self.read(path)
    }

    fn root_path(&self) -> &Path {
        self.path()
    }
}

/// The path of an open descriptor (`/proc/self/fd/N`), when it has one.
fn fd_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    let p = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    p.is_absolute().then_some(p)
}
