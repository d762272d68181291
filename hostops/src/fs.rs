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

use crate::selinux::{self, FileKind, Labelling};
use nix::errno::Errno;
use nix::fcntl::{openat, openat2, renameat, renameat2, OFlag, OpenHow, RenameFlags, ResolveFlag};
use nix::sys::stat::{fchmod, fstatat, mkdirat, Mode};
use nix::unistd::{fchown, fsync, symlinkat, unlinkat, Gid, Uid, UnlinkatFlags};
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
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

const TMP_PREFIX: &str = ".hearth-tmp-";
static COUNTER: AtomicU64 = AtomicU64::new(0);

fn resolve_flags() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS
}

/// Splits `/a/b/c` into the relative parent `a/b` and the name `c`.
fn split(path: &str) -> Result<(PathBuf, &OsStr), FsError> {
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

    /// Whether SELinux labels new paths in this root (see the module documentation); the
    /// policy is read once per [`Root`].
    pub fn labelling(&self) -> Result<&Labelling, FsError> {
        let live = self.real == Path::new("/");
        self.labelling
            .get_or_init(|| selinux::labelling(self, live).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|reason| FsError::Label {
                path: selinux::SELINUX_DIR.to_string(),
                op: "read the SELinux policy".to_string(),
                reason: reason.clone(),
            })
    }

    /// The path inside the root of entry `name` of directory `dir` (symbolic links resolved);
    /// `path` when the directory cannot be placed inside the root.
    fn real_path_in(&self, dir: BorrowedFd<'_>, name: &OsStr, path: &str) -> Vec<u8> {
        let Some(host) = fd_path(dir) else {
            return path.as_bytes().to_vec();
        };
        let Ok(rel) = host.strip_prefix(&self.real) else {
            return path.as_bytes().to_vec();
        };
        let mut out = b"/".to_vec();
        if !rel.as_os_str().is_empty() {
            out.extend_from_slice(rel.as_os_str().as_bytes());
            out.push(b'/');
        }
        out.extend_from_slice(name.as_bytes());
        out
    }

    /// The label the policy gives entry `name` of `dir` (for `path`), with a trailing NUL as
    /// libselinux stores it; `None` when SELinux is off or no rule gives one.
    fn policy_label(
        &self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        path: &str,
        kind: FileKind,
    ) -> Result<Option<Vec<u8>>, FsError> {
        let Labelling::On { contexts, .. } = self.labelling()? else {
            return Ok(None);
        };
        let key = self.real_path_in(dir, name, path);
        let label = contexts.lookup(&key, kind).map_err(|e| FsError::Label {
            path: path.to_string(),
            op: format!(
                "look up the label of {} in the policy",
                String::from_utf8_lossy(&key)
            ),
            reason: e.to_string(),
        })?;
        Ok(label.map(|l| {
            let mut v = l.as_bytes().to_vec();
            v.push(0);
            v
        }))
    }

    /// Labels the new entry `tmp` of `dir` (of `kind`) for the name `name` it is about to be
    /// renamed to (`path` inside the root): the label of the entry it replaces, else the
    /// policy's (see the module documentation). Public for writers that keep their own
    /// directory descriptors (SSH keys in a user's home).
    pub fn label_before_rename(
        &self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        tmp: &OsStr,
        kind: EntryKind,
        path: &str,
    ) -> Result<(), FsError> {
        let fkind = match kind {
            EntryKind::File => FileKind::File,
            EntryKind::Dir => FileKind::Dir,
            EntryKind::Symlink => FileKind::Symlink,
            EntryKind::Other => return Ok(()),
        };
        let old_kind = match fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Some(kind_of(st.st_mode)),
            Err(Errno::ENOENT) => None,
            Err(e) => return Err(self.sys(path, "stat", e)),
        };
        let mut label = None;
        let mut from = "the replaced file's label";
        if old_kind == Some(kind) {
            label = get_label(dir, name).map_err(|e| FsError::Label {
                path: path.to_string(),
                op: format!("read {} of the file being replaced", selinux::XATTR),
                reason: e.desc().to_string(),
            })?;
        }
        if label.is_none() {
            from = "the policy's label";
            label = self.policy_label(dir, name, path, fkind)?;
        }
        let Some(label) = label else {
            return Ok(());
        };
        match set_label(dir, tmp, &label) {
            Ok(()) | Err(Errno::EOPNOTSUPP) => Ok(()),
            Err(e) => Err(FsError::Label {
                path: path.to_string(),
                op: format!(
                    "set {} to {from} {:?} on the new {}",
                    selinux::XATTR,
                    String::from_utf8_lossy(label.strip_suffix(b"\0").unwrap_or(&label)),
                    match kind {
                        EntryKind::Dir => "directory",
                        EntryKind::Symlink => "symbolic link",
                        _ => "file",
                    }
                ),
                reason: e.desc().to_string(),
            }),
        }
    }

    /// Creates the directory `name` in `dir` with `mode` (less the umask), labelled before it
    /// appears (see the module documentation); an existing one is left alone. `full` is its
    /// path inside the root. Public for writers that keep their own directory descriptors.
    pub fn mkdir_labelled(
        &self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        full: &str,
        mode: u32,
    ) -> Result<(), FsError> {
        let label = self.policy_label(dir, name, full, FileKind::Dir)?;
        if label.is_none() {
            return match mkdirat(dir, name, Mode::from_bits_truncate(mode)) {
                Ok(()) => fsync(dir).map_err(|e| self.sys(full, "fsync", e)),
                Err(Errno::EEXIST) => Ok(()),
                Err(e) => Err(self.sys(full, "mkdir", e)),
            };
        }
        let tmp = temp_name(name);
        mkdirat(dir, tmp.as_os_str(), Mode::from_bits_truncate(mode))
            .map_err(|e| self.sys(full, "mkdir", e))?;
        let result = self
            .label_before_rename(dir, name, tmp.as_os_str(), EntryKind::Dir, full)
            .and_then(|()| {
                match renameat2(
                    dir,
                    tmp.as_os_str(),
                    dir,
                    name,
                    RenameFlags::RENAME_NOREPLACE,
                ) {
                    Ok(()) => fsync(dir).map_err(|e| self.sys(full, "fsync", e)),
                    // Made meanwhile by someone else: theirs stays.
                    Err(Errno::EEXIST) => Err(self.sys(full, "mkdir", Errno::EEXIST)),
                    Err(e) => Err(self.sys(full, "rename new directory", e)),
                }
            });
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = unlinkat(dir, tmp.as_os_str(), UnlinkatFlags::RemoveDir);
                match e {
                    FsError::Sys {
                        errno: Errno::EEXIST,
                        ..
                    } => Ok(()),
                    e => Err(e),
                }
            }
        }
    }

    /// The root's path on this machine.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The host path of `path` inside the root (for messages and for tools that need a path).
    pub fn host_path(&self, path: &str) -> PathBuf {
        self.path.join(path.trim_start_matches('/'))
    }

    fn sys(&self, path: &str, op: &'static str, errno: Errno) -> FsError {
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
    fn open_dir(&self, rel: &Path, full: &str) -> Result<OwnedFd, FsError> {
        let rel: &Path = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        openat2(
            self.fd.as_fd(),
            rel,
            OpenHow::new()
                .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
                .resolve(resolve_flags()),
        )
        .map_err(|e| self.sys(full, "resolve", e))
    }

    /// Opens (creating with mode 0755 as needed) the directory `rel`.
    fn open_dir_create(&self, rel: &Path, full: &str) -> Result<OwnedFd, FsError> {
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

    /// Reads a file; `Ok(None)` when it does not exist.
    pub fn read(&self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        let (parent, name) = split(path)?;
        let rel = parent.join(name);
        let fd = match openat2(
            self.fd.as_fd(),
            &rel,
            OpenHow::new()
                .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC)
                .resolve(resolve_flags()),
        ) {
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
            Ok(st) => {
                let kind = kind_of(st.st_mode);
                Ok(Some(Stat {
                    mode: st.st_mode & 0o7777,
                    uid: st.st_uid,
                    gid: st.st_gid,
                    size: st.st_size as u64,
                    kind,
                }))
            }
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(self.sys(path, "stat", e)),
        }
    }

    /// Writes `content` to `path` atomically with `mode` and (if given) owner, creating parent
    /// directories (0755) as needed.
    pub fn write_atomic(
        &self,
        path: &str,
        content: &[u8],
        mode: u32,
        owner: Option<(u32, u32)>,
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
                .map_err(|e| self.sys(path, "rename", e))?;
            fsync(dir.as_fd()).map_err(|e| self.sys(path, "fsync directory", e))
        })();
        if result.is_err() {
            let _ = unlinkat(dir.as_fd(), tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
        result
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

fn kind_of(st_mode: u32) -> EntryKind {
    match st_mode & 0o170000 {
        0o100000 => EntryKind::File,
        0o040000 => EntryKind::Dir,
        0o120000 => EntryKind::Symlink,
        _ => EntryKind::Other,
    }
}

/// The path of an open descriptor (`/proc/self/fd/N`), when it has one.
fn fd_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    let p = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    p.is_absolute().then_some(p)
}

/// `/proc/self/fd/DIR/NAME`: a path to entry `name` of the open directory `dir` that the
/// `l*xattr` calls use without following a final symbolic link (there are no `*at` variants).
fn entry_path(dir: BorrowedFd<'_>, name: &OsStr) -> PathBuf {
    let mut p = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    p.push(name);
    p
}

fn errno_of(e: rustix::io::Errno) -> Errno {
    Errno::from_raw(e.raw_os_error())
}

/// The `security.selinux` label of entry `name` of `dir` (not following a symbolic link);
/// `None` when it has none or the file system stores none.
pub(crate) fn get_label(dir: BorrowedFd<'_>, name: &OsStr) -> Result<Option<Vec<u8>>, Errno> {
    let p = entry_path(dir, name);
    let mut buf = vec![0u8; 256];
    loop {
        match rustix::fs::lgetxattr(&p, selinux::XATTR, &mut buf[..]) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(Some(buf));
            }
            Err(rustix::io::Errno::RANGE) => {
                let n = rustix::fs::lgetxattr(&p, selinux::XATTR, &mut [0u8; 0][..])
                    .map_err(errno_of)?;
                buf.resize(n.max(buf.len() * 2), 0);
            }
            // ENOENT: the entry went away, or there is no /proc (then SELinux is off too, or
            // setting the new label fails loudly).
            Err(
                rustix::io::Errno::NODATA | rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOENT,
            ) => return Ok(None),
            Err(e) => return Err(errno_of(e)),
        }
    }
}

/// Sets the `security.selinux` label of entry `name` of `dir` (not following a symbolic link).
fn set_label(dir: BorrowedFd<'_>, name: &OsStr, label: &[u8]) -> Result<(), Errno> {
    rustix::fs::lsetxattr(
        entry_path(dir, name),
        selinux::XATTR,
        label,
        rustix::fs::XattrFlags::empty(),
    )
    .map_err(errno_of)
}

fn temp_name(name: &OsStr) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut s = std::ffi::OsString::from(format!("{TMP_PREFIX}{}-{n}-", std::process::id()));
    // Keep the name short enough for NAME_MAX even for long targets.
    let bytes = name.as_bytes();
    let keep = &bytes[..bytes.len().min(100)];
    s.push(OsStr::from_bytes(keep));
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn root() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let r = Root::open(dir.path()).unwrap();
        (dir, r)
    }

    #[test]
    fn atomic_write_creates_parents_and_sets_mode() {
        let (dir, r) = root();
        r.write_atomic("/etc/a/b/c.conf", b"hello", 0o640, None)
            .unwrap();
        let p = dir.path().join("etc/a/b/c.conf");
        assert_eq!(std::fs::read(&p).unwrap(), b"hello");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777,
            0o640
        );
        assert_eq!(
            std::fs::metadata(dir.path().join("etc/a"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o755
        );
        assert_eq!(r.read("/etc/a/b/c.conf").unwrap().unwrap(), b"hello");
        assert!(r.read("/etc/none").unwrap().is_none());
        // No temporaries left behind.
        assert_eq!(r.list_dir("/etc/a/b").unwrap(), ["c.conf"]);
    }

    #[test]
    fn owner_is_set_when_root() {
        if !nix::unistd::geteuid().is_root() {
            panic!("this test must run as root (it sets file owners)");
        }
        let (dir, r) = root();
        r.write_atomic("/f", b"x", 0o4755, Some((1000, 1000)))
            .unwrap();
        let m = std::fs::metadata(dir.path().join("f")).unwrap();
        assert_eq!((m.uid(), m.gid()), (1000, 1000));
        assert_eq!(
            m.permissions().mode() & 0o7777,
            0o4755,
            "set-uid kept: chmod after chown"
        );
    }

    #[test]
    fn open_or_create_is_confined_and_opens_one_file() {
        let (dir, r) = root();
        let mut a = r
            .open_or_create("/var/lib/hearth/agent.lock", 0o600)
            .unwrap();
        let b = r
            .open_or_create("/var/lib/hearth/agent.lock", 0o600)
            .unwrap();
        assert_eq!(
            a.metadata().unwrap().ino(),
            b.metadata().unwrap().ino(),
            "every opener gets the same file"
        );
        a.write_all(b"x").unwrap();
        let p = dir.path().join("var/lib/hearth/agent.lock");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777,
            0o600
        );
        assert_eq!(r.list_dir("/var/lib/hearth").unwrap(), ["agent.lock"]);

        // A state directory that is a symlink out of the root: refused, nothing made outside.
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("srv")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("srv/state")).unwrap();
        let err = r
            .open_or_create("/srv/state/agent.lock", 0o600)
            .unwrap_err();
        assert!(matches!(err, FsError::EscapesRoot { .. }), "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        // A symlink at the path itself is not followed.
        std::os::unix::fs::symlink(outside.path().join("x"), dir.path().join("srv/lock")).unwrap();
        assert!(r.open_or_create("/srv/lock", 0o600).is_err());
        assert!(!outside.path().join("x").exists());
    }

    #[test]
    fn symlink_escaping_the_root_is_refused() {
        let (dir, r) = root();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("etc")).unwrap();
        let err = r
            .write_atomic("/etc/passwd", b"pwned", 0o644, None)
            .unwrap_err();
        assert!(matches!(err, FsError::EscapesRoot { .. }), "{err}");
        assert!(err.to_string().contains("leads outside the root"));
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        // Relative escapes too.
        std::fs::create_dir(dir.path().join("var")).unwrap();
        std::os::unix::fs::symlink("../../../..", dir.path().join("var/up")).unwrap();
        assert!(matches!(
            r.write_atomic("/var/up/x", b"", 0o644, None),
            Err(FsError::EscapesRoot { .. })
        ));
    }

    #[test]
    fn symlink_inside_the_root_is_followed() {
        let (dir, r) = root();
        std::fs::create_dir_all(dir.path().join("var/usrlocal")).unwrap();
        std::fs::create_dir(dir.path().join("usr")).unwrap();
        std::os::unix::fs::symlink("../var/usrlocal", dir.path().join("usr/local")).unwrap();
        r.write_atomic("/usr/local/bin/tool", b"#!/bin/sh\n", 0o755, None)
            .unwrap();
        assert!(dir.path().join("var/usrlocal/bin/tool").exists());
    }

    #[test]
    fn planted_symlink_at_the_final_path_is_replaced_not_followed() {
        let (dir, r) = root();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("etc/x")).unwrap();
        r.write_atomic("/etc/x", b"new", 0o644, None).unwrap();
        assert_eq!(std::fs::read(outside.path()).unwrap(), b"");
        assert_eq!(r.stat("/etc/x").unwrap().unwrap().kind, EntryKind::File);
    }

    #[test]
    fn remove_symlink_and_stale_temporaries() {
        let (dir, r) = root();
        r.symlink_atomic("/etc/systemd/system/a.service", "/dev/null")
            .unwrap();
        assert_eq!(
            r.read_link("/etc/systemd/system/a.service")
                .unwrap()
                .as_deref(),
            Some("/dev/null")
        );
        assert!(r.remove("/etc/systemd/system/a.service").unwrap());
        assert!(!r.remove("/etc/systemd/system/a.service").unwrap());
        std::fs::write(dir.path().join("etc/.hearth-tmp-1-2-x"), b"torn").unwrap();
        // A directory made under a temporary name (labelled mkdir) and never renamed.
        std::fs::create_dir(dir.path().join("etc/.hearth-tmp-1-3-d")).unwrap();
        assert_eq!(r.remove_stale_temporaries("/etc").unwrap(), 2);
        assert_eq!(r.list_dir("/etc").unwrap(), ["systemd"]);
    }

    #[test]
    fn bad_paths() {
        let (_dir, r) = root();
        assert!(matches!(
            r.write_atomic("etc/x", b"", 0o644, None),
            Err(FsError::BadPath { .. })
        ));
        assert!(matches!(
            r.write_atomic("/etc/../x", b"", 0o644, None),
            Err(FsError::BadPath { .. })
        ));
    }
}
