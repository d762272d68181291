//! Confined resolution: paths split into a parent and a name, directories opened (and
//! created) beneath the root's descriptor with `openat2(RESOLVE_BENEATH)`, escapes reported as
//! [`FsError::EscapesRoot`], and the names of temporary entries.

use nix::errno::Errno;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::FsError;
use super::root::Root;

pub(super) const TMP_PREFIX: &str = ".hearth-tmp-";
static COUNTER: AtomicU64 = AtomicU64::new(0);

pub(super) fn resolve_flags() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS
}

/// How often an `openat2` that the kernel answered `EAGAIN` is tried again.
const EAGAIN_RETRIES: usize = 64;

/// `openat2(dirfd, path, flags)` confined beneath `dirfd` (`RESOLVE_BENEATH |
/// RESOLVE_NO_MAGICLINKS`). With `RESOLVE_BENEATH` the kernel answers `EAGAIN` when a rename or
/// mount anywhere on the system raced with the resolution of a `..` (it cannot then prove the
/// path stayed beneath), and asks the caller to retry (openat2(2)): this does, a bounded number
/// of times, so a busy machine does not turn a valid path into an error.
pub(crate) fn open_beneath(
    dirfd: BorrowedFd<'_>,
    path: &Path,
    flags: OFlag,
) -> nix::Result<OwnedFd> {
    let how = || OpenHow::new().flags(flags).resolve(resolve_flags());
    let mut tries = 0;
    loop {
        match openat2(dirfd, path, how()) {
            Err(Errno::EAGAIN) if tries < EAGAIN_RETRIES => tries += 1,
            other => return other,
        }
    }
}

/// Splits `/a/b/c` into the relative parent `a/b` and the name `c`.
pub(super) fn split(path: &str) -> Result<(PathBuf, &OsStr), FsError> {
    let bad = || FsError::BadPath {
        path: path.to_string(),
    };
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(bad());
    }
    let mut parent = PathBuf::new();
    let mut comps: Vec<&OsStr> = Vec::new();
    for c in p.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(n) => comps.push(n),
            _ => return Err(bad()),
        }
    }
    let name = comps.pop().ok_or_else(bad)?;
    for c in comps {
        parent.push(c);
    }
    Ok((parent, name))
}

/// A temporary name beside `name` (see [`Root::remove_stale_temporaries`]).
pub(super) fn temp_name(name: &OsStr) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut s = std::ffi::OsString::from(format!("{TMP_PREFIX}{}-{n}-", std::process::id()));
    // Keep the name short enough for NAME_MAX even for long targets.
    let bytes = name.as_bytes();
    let keep = &bytes[..bytes.len().min(100)];
    s.push(OsStr::from_bytes(keep));
    PathBuf::from(s)
}

impl Root {
    pub(super) fn sys(&self, path: &str, op: &'static str, errno: Errno) -> FsError {
        if errno == Errno::EXDEV || errno == Errno::ELOOP && op == "resolve" {
            return FsError::EscapesRoot {
                path: path.to_string(),
                root: self.path.display().to_string(),
            };
        }
        FsError::Sys {
            path: path.to_string(),
            op,
            errno,
        }
    }

    /// Opens the directory `rel` (relative to the root), confined to the root.
    pub(super) fn open_dir(&self, rel: &Path, full: &str) -> Result<OwnedFd, FsError> {
        let rel: &Path = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        open_beneath(
            self.fd.as_fd(),
            rel,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        )
        .map_err(|e| self.sys(full, "resolve", e))
    }

    /// Opens (creating with mode 0755 as needed) the directory `rel`.
    pub(super) fn open_dir_create(&self, rel: &Path, full: &str) -> Result<OwnedFd, FsError> {
        match self.open_dir(rel, full) {
            Err(FsError::Sys {
                errno: Errno::ENOENT,
                ..
            }) => {}
            other => return other,
        }
        let mut dir = self.open_dir(Path::new(""), full)?;
        let mut so_far = PathBuf::new();
        for comp in rel.components() {
            let Component::Normal(name) = comp else {
                continue;
            };
            so_far.push(name);
            self.mkdir_labelled(dir.as_fd(), name, full, 0o755)?;
            dir = self.open_dir(&so_far, full)?;
        }
        Ok(dir)
    }
}
