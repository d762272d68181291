//! Reading inside the root: files, entries' stat, symbolic links and directory listings,
//! every path resolved beneath the root; the SELinux policy is read this way too
//! (`selinux::PolicySource` for [`Root`]).

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::fstatat;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use super::error::FsError;
use super::resolve::{open_beneath, split};
use super::root::Root;
use super::stat::Stat;
use crate::selinux;

impl Root {
    /// Reads a file; `Ok(None)` when it does not exist.
    pub fn read(&self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        let (parent, name) = split(path)?;
        let rel = parent.join(name);
        let fd = match open_beneath(self.fd.as_fd(), &rel, OFlag::O_RDONLY | OFlag::O_CLOEXEC) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(None),
            Err(e) => return Err(self.sys(path, "resolve", e)),
        };
        let mut out = Vec::new();
        std::fs::File::from(fd)
            .read_to_end(&mut out)
            .map_err(|source| FsError::Io {
                path: path.to_string(),
                op: "read",
                source,
            })?;
        Ok(Some(out))
    }

    /// Stats an entry without following a final symlink; `Ok(None)` when it does not exist.
    pub fn stat(&self, path: &str) -> Result<Option<Stat>, FsError> {
        let (parent, name) = split(path)?;
        let dir = match self.open_dir(&parent, path) {
            Ok(d) => d,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(FsError::Sys {
                errno: Errno::ENOTDIR,
                ..
            }) => return Ok(None),
            Err(e) => return Err(e),
        };
        match fstatat(dir.as_fd(), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Stat::from_file_stat(&st))),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(self.sys(path, "stat", e)),
        }
    }

    /// Reads a symbolic link's target; `Ok(None)` when `path` does not exist or is not a link.
    pub fn read_link(&self, path: &str) -> Result<Option<String>, FsError> {
        let (parent, name) = split(path)?;
        let dir = match self.open_dir(&parent, path) {
            Ok(d) => d,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        match nix::fcntl::readlinkat(dir.as_fd(), name) {
            Ok(t) => Ok(Some(t.to_string_lossy().into_owned())),
            Err(Errno::ENOENT | Errno::EINVAL) => Ok(None),
            Err(e) => Err(self.sys(path, "readlink", e)),
        }
    }

    /// Lists the names in a directory (empty when it does not exist).
    pub fn list_dir(&self, path: &str) -> Result<Vec<String>, FsError> {
        let rel = if path == "/" {
            PathBuf::new()
        } else {
            let (parent, name) = split(path)?;
            parent.join(name)
        };
        let fd = match self.open_dir(&rel, path) {
            Ok(d) => d,
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let dir = nix::dir::Dir::from_fd(fd).map_err(|e| self.sys(path, "list", e))?;
        let mut out = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|e| self.sys(path, "list", e))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                out.push(String::from_utf8_lossy(name).into_owned());
            }
        }
        out.sort();
        Ok(out)
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
