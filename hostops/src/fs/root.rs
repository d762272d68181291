//! [`Root`]: an open root directory, the handle every operation of this module goes through
//! (its reads, writes, labels and resolution are in the sibling files), and the path of an
//! open descriptor.

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::error::FsError;
use crate::selinux::Labelling;

/// An open root directory.
#[derive(Debug)]
pub struct Root {
    /// The root directory, open; every path is resolved beneath it.
    pub(super) fd: OwnedFd,
    /// The root's path as given.
    pub(super) path: PathBuf,
    /// The root's path with symbolic links resolved (to turn directory descriptors back into
    /// paths inside the root).
    pub(super) real: PathBuf,
    /// Whether SELinux labels new paths here; read at first need.
    pub(super) labelling: OnceLock<Result<Labelling, String>>,
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

/// The path of an open descriptor (`/proc/self/fd/N`), when it has one.
pub(super) fn fd_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    let p = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    p.is_absolute().then_some(p)
}
