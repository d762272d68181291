//! SELinux labels of what this module creates: the label of the replaced entry or the
//! policy's, set on the temporary entry before it is renamed into place (see the module doc of
//! `fs`), and labelled directory creation.

use nix::errno::Errno;
use nix::fcntl::{renameat2, RenameFlags};
use nix::sys::stat::{fstatat, mkdirat, Mode};
use nix::unistd::{fsync, unlinkat, UnlinkatFlags};
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::error::FsError;
use super::resolve::temp_name;
use super::root::{fd_path, Root};
use super::stat::{kind_of, EntryKind};
use crate::selinux::{self, FileKind, Labelling};

impl Root {
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
fn get_label(dir: BorrowedFd<'_>, name: &OsStr) -> Result<Option<Vec<u8>>, Errno> {
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
