//! SSH keys and the password hash of user `core`, written as the MCO writes them.
//!
//! # SSH keys
//!
//! The keys are one file, each key followed by `\n` (the MCO's format), owned by the user
//! (uid/gid from the *target's* passwd, see [`crate::passwd`]), mode `0600`, in directories
//! `0700` owned by the user. Where the file goes is an [`SshKeyLayout`]:
//!
//! * [`SshKeyLayout::Fragment`] (the default): `~/.ssh/authorized_keys.d/ignition`, the path
//!   Ignition and the MCO use on Fedora CoreOS, RHCOS 9+ and SCOS, where `ssh-key-dir` makes
//!   `sshd` read every fragment of `authorized_keys.d`;
//! * [`SshKeyLayout::Single`]: `~/.ssh/authorized_keys`, what the MCO writes on hosts without
//!   `authorized_keys.d` support (RHCOS 8, plain distributions).
//!
//! [`SshKeyLayout::detect`] tells them apart by looking for `ssh-key-dir` in the target root.
//! An empty key list removes the file (the MCO writes an empty file instead; both mean "no
//! keys"). On Fedora CoreOS the MCO also deletes `~/.ssh/authorized_keys` and every other
//! fragment of `authorized_keys.d`: that is [`prune_other_key_files`], a separate, explicit step.
//!
//! The home directory belongs to the user, who could plant symbolic links in it: below the home
//! directory nothing is followed (`O_NOFOLLOW` on every component), directories are created,
//! chowned and chmodded through their file descriptors, and the key file is written atomically
//! (temporary file, `fsync`, `rename`, `fsync` of the directory) relative to the descriptor of
//! its directory. The home directory itself is found through the root, confined to it
//! (`/home -> var/home` on CoreOS is followed).
//!
//! # Password hash
//!
//! [`set_password_hash`] rewrites `/etc/shadow` atomically, changing nothing but the second
//! field of the user's line (every other byte stays as it was), with the existing file's mode
//! and owner (`0000 root:root` on Fedora, `0640 root:shadow` on Debian). `None` or an empty hash
//! locks the password with `*`, as the MCO does (`usermod -p '*' core`). Unlike `usermod -p`, the
//! date of the last change (third field) is left alone. The write holds the lock that
//! `lckpwdf(3)` uses (`/etc/.pwd.lock`), so it does not race `passwd`, `useradd` or `usermod`
//! on the host.

use crate::fs::{self, FsError};
use crate::passwd::{self, PasswdError};
use nix::errno::Errno;
use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fchmod, fstat, Mode};
use nix::unistd::{fchown, fsync, unlinkat, Gid, Uid, UnlinkatFlags};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The shadow file.
pub const SHADOW: &str = "/etc/shadow";
/// The lock file of `lckpwdf(3)`.
pub const PWD_LOCK: &str = "/etc/.pwd.lock";
/// What a locked password looks like (the MCO's value for an absent or empty hash).
pub const LOCKED_PASSWORD: &str = "*";
/// How long [`set_password_hash`] waits for `/etc/.pwd.lock` (as `lckpwdf(3)`).
pub const PWD_LOCK_TIMEOUT: Duration = Duration::from_secs(15);

const TMP_PREFIX: &str = ".hearth-tmp-";
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// What went wrong managing a user's keys or password.
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    /// The user (or group) lookup failed.
    #[error(transparent)]
    Passwd(#[from] PasswdError),
    /// A file operation failed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// A system call failed.
    #[error("{path}: {op}: {errno}")]
    Sys {
        /// The path (inside the root).
        path: String,
        /// The operation.
        op: &'static str,
        /// The error.
        errno: Errno,
    },
    /// A path below the home directory is a symbolic link (or not a directory).
    #[error("{path}: refusing to use it: it is a symbolic link or not a directory")]
    NotADirectory {
        /// The path (inside the root).
        path: String,
    },
    /// The user's home directory does not exist.
    #[error("home directory {home} of user {user} does not exist")]
    NoHome {
        /// The user.
        user: String,
        /// The home directory.
        home: String,
    },
    /// The shadow file does not exist.
    #[error("{path} does not exist in root {root}")]
    ShadowMissing {
        /// The path.
        path: String,
        /// The root.
        root: String,
    },
    /// The user has no line in the shadow file.
    #[error("user {user} has no entry in {path}: cannot set its password hash")]
    NotInShadow {
        /// The user.
        user: String,
        /// The path.
        path: String,
    },
    /// The hash cannot be stored in a shadow file.
    #[error("invalid password hash for user {user}: {reason}")]
    InvalidHash {
        /// The user.
        user: String,
        /// Why.
        reason: &'static str,
    },
    /// `/etc/.pwd.lock` stayed locked.
    #[error("{path} is locked by another process (waited {waited:?}): another tool is editing the user database")]
    Locked {
        /// The lock file.
        path: String,
        /// How long we waited.
        waited: Duration,
    },
}

/// Where the SSH keys of a user are written. See the module documentation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SshKeyLayout {
    /// `~/.ssh/authorized_keys.d/ignition` (Fedora CoreOS, RHCOS 9+, SCOS).
    #[default]
    Fragment,
    /// `~/.ssh/authorized_keys` (hosts without `authorized_keys.d` support).
    Single,
}

/// Files that show `ssh-key-dir` (the `AuthorizedKeysCommand` that reads `authorized_keys.d`).
const SSH_KEY_DIR_MARKERS: [&str; 2] = ["/usr/libexec/ssh-key-dir", "/usr/bin/ssh-key-dir"];
/// Where an `sshd` drop-in may name it.
const SSHD_DROPIN_DIRS: [&str; 2] = ["/etc/ssh/sshd_config.d", "/usr/etc/ssh/sshd_config.d"];

impl SshKeyLayout {
    /// The key file below the home directory: `.ssh/authorized_keys.d/ignition` or
    /// `.ssh/authorized_keys`.
    pub fn relative_path(self) -> &'static str {
        match self {
            SshKeyLayout::Fragment => ".ssh/authorized_keys.d/ignition",
            SshKeyLayout::Single => ".ssh/authorized_keys",
        }
    }

    /// The key file of a user whose home is `home`.
    pub fn key_file(self, home: &str) -> String {
        format!("{}/{}", home.trim_end_matches('/'), self.relative_path())
    }

    /// [`SshKeyLayout::Fragment`] when the target root has `ssh-key-dir` (its binary, or an
    /// `sshd_config.d` drop-in that names it), else [`SshKeyLayout::Single`].
    pub fn detect(root: &fs::Root) -> Result<SshKeyLayout, FsError> {
        for marker in SSH_KEY_DIR_MARKERS {
            if root.stat(marker)?.is_some() {
                return Ok(SshKeyLayout::Fragment);
            }
        }
        for dir in SSHD_DROPIN_DIRS {
            for name in root.list_dir(dir)? {
                let Some(text) = root.read(&format!("{dir}/{name}")).ok().flatten() else {
                    continue;
                };
                if String::from_utf8_lossy(&text).contains("ssh-key-dir") {
                    return Ok(SshKeyLayout::Fragment);
                }
            }
        }
        Ok(SshKeyLayout::Single)
    }
}

/// What [`write_ssh_keys`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeysChange {
    /// The file was written.
    Written,
    /// The file was removed (no keys).
    Removed,
    /// The file already had this content, mode and owner.
    Unchanged,
}

/// The result of [`write_ssh_keys`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshKeysWritten {
    /// The key file (inside the root).
    pub path: String,
    /// What happened.
    pub change: KeysChange,
}

/// The bytes of a key file: every key followed by `\n` (the MCO's format).
pub fn key_file_contents(keys: &[String]) -> String {
    keys.iter().map(|k| format!("{k}\n")).collect()
}

// ---------------------------------------------------------------------------------------------
// Confined directory operations.
// ---------------------------------------------------------------------------------------------

fn sys(path: &str, op: &'static str, errno: Errno) -> UsersError {
    UsersError::Sys {
        path: path.to_string(),
        op,
        errno,
    }
}

/// Opens the directory `path` (absolute, inside the root), following symbolic links only while
/// they stay inside the root. `Ok(None)` when it does not exist.
pub(crate) fn open_dir_beneath(root: &fs::Root, path: &str) -> Result<Option<OwnedFd>, UsersError> {
    let root_fd = nix::fcntl::open(
        root.path(),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| sys(&root.path().display().to_string(), "open root", e))?;
    let rel = path.trim_start_matches('/');
    let rel = if rel.is_empty() { "." } else { rel };
    match fs::open_beneath(
        root_fd.as_fd(),
        Path::new(rel),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
    ) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::ENOENT) => Ok(None),
        Err(Errno::EXDEV | Errno::ELOOP) => Err(FsError::EscapesRoot {
            path: path.to_string(),
            root: root.path().display().to_string(),
        }
        .into()),
        Err(e) => Err(sys(path, "open directory", e)),
    }
}

/// Opens the subdirectory `name` of `dir` without following a symbolic link.
fn open_child_dir(
    dir: BorrowedFd<'_>,
    name: &str,
    path: &str,
) -> Result<Option<OwnedFd>, UsersError> {
    match openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::ENOENT) => Ok(None),
        Err(Errno::ELOOP | Errno::ENOTDIR) => Err(UsersError::NotADirectory {
            path: path.to_string(),
        }),
        Err(e) => Err(sys(path, "open directory", e)),
    }
}

/// Opens (creating as needed) the subdirectory `name` of `dir` and makes it `mode`, owned by
/// `owner`, through its descriptor.
fn ensure_child_dir(
    root: &fs::Root,
    dir: BorrowedFd<'_>,
    name: &str,
    path: &str,
    mode: u32,
    owner: (u32, u32),
) -> Result<OwnedFd, UsersError> {
    let fd = match open_child_dir(dir, name, path)? {
        Some(fd) => fd,
        None => {
            // Labelled for SELinux before it appears (fs::Root::mkdir_labelled).
            root.mkdir_labelled(dir, name.as_ref(), path, 0o700)?;
            fsync(dir).map_err(|e| sys(path, "fsync directory", e))?;
            open_child_dir(dir, name, path)?
                .ok_or_else(|| sys(path, "open directory", Errno::ENOENT))?
        }
    };
    let st = fstat(fd.as_fd()).map_err(|e| sys(path, "stat", e))?;
    if (st.st_uid, st.st_gid) != owner {
        fchown(
            fd.as_fd(),
            Some(Uid::from_raw(owner.0)),
            Some(Gid::from_raw(owner.1)),
        )
        .map_err(|e| sys(path, "chown", e))?;
    }
    if st.st_mode & 0o7777 != mode {
        fchmod(fd.as_fd(), Mode::from_bits_truncate(mode)).map_err(|e| sys(path, "chmod", e))?;
    }
    Ok(fd)
}

/// Writes `name` in `dir` atomically with `mode` and `owner`, never following a link.
fn write_in_dir(
    root: &fs::Root,
    dir: BorrowedFd<'_>,
    name: &str,
    path: &str,
    content: &[u8],
    mode: u32,
    owner: (u32, u32),
) -> Result<(), UsersError> {
    let tmp = format!(
        "{TMP_PREFIX}{}-{}-{name}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let fd = openat(
        dir,
        tmp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(|e| sys(path, "create temporary file", e))?;
    let result = (|| {
        fchown(
            fd.as_fd(),
            Some(Uid::from_raw(owner.0)),
            Some(Gid::from_raw(owner.1)),
        )
        .map_err(|e| sys(path, "chown", e))?;
        fchmod(fd.as_fd(), Mode::from_bits_truncate(mode)).map_err(|e| sys(path, "chmod", e))?;
        // The replaced file's SELinux label, else the policy's (ssh_home_t).
        root.label_before_rename(dir, name.as_ref(), tmp.as_ref(), fs::EntryKind::File, path)?;
        let mut file = std::fs::File::from(fd);
        let io = |source| {
            UsersError::Fs(FsError::Io {
                path: path.to_string(),
                op: "write",
                source,
            })
        };
        file.write_all(content).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        renameat(dir, tmp.as_str(), dir, name).map_err(|e| sys(path, "rename", e))?;
        fsync(dir).map_err(|e| sys(path, "fsync directory", e))
    })();
    if result.is_err() {
        let _ = unlinkat(dir, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
    }
    result
}

/// Removes the file `name` of `dir` (never a directory); whether it existed.
fn remove_in_dir(dir: BorrowedFd<'_>, name: &str, path: &str) -> Result<bool, UsersError> {
    match unlinkat(dir, name, UnlinkatFlags::NoRemoveDir) {
        Ok(()) => {
            fsync(dir).map_err(|e| sys(path, "fsync directory", e))?;
            Ok(true)
        }
        Err(Errno::ENOENT) => Ok(false),
        Err(e) => Err(sys(path, "remove", e)),
    }
}

// ---------------------------------------------------------------------------------------------
// SSH keys.
// ---------------------------------------------------------------------------------------------

/// Writes (or, for an empty list, removes) the SSH key file of `user`; see the module
/// documentation for the layout, modes and owners.
pub fn write_ssh_keys(
    root: &fs::Root,
    user: &str,
    keys: &[String],
    layout: SshKeyLayout,
) -> Result<SshKeysWritten, UsersError> {
    let entry = passwd::lookup_user(root, user)?;
    let owner = (entry.uid, entry.gid);
    let home = entry.home.trim_end_matches('/').to_string();
    let path = layout.key_file(&home);
    let content = key_file_contents(keys);

    let no_home = || UsersError::NoHome {
        user: user.to_string(),
        home: entry.home.clone(),
    };
    let home_fd = open_dir_beneath(root, &home)?.ok_or_else(no_home)?;
    let ssh_path = format!("{home}/.ssh");
    let frag_path = format!("{ssh_path}/authorized_keys.d");
    let file_name = match layout {
        SshKeyLayout::Fragment => "ignition",
        SshKeyLayout::Single => "authorized_keys",
    };

    if keys.is_empty() {
        let Some(ssh) = open_child_dir(home_fd.as_fd(), ".ssh", &ssh_path)? else {
            return Ok(SshKeysWritten {
                path,
                change: KeysChange::Unchanged,
            });
        };
        let dir = match layout {
            SshKeyLayout::Single => Some(ssh),
            SshKeyLayout::Fragment => open_child_dir(ssh.as_fd(), "authorized_keys.d", &frag_path)?,
        };
        let removed = match dir {
            Some(d) => remove_in_dir(d.as_fd(), file_name, &path)?,
            None => false,
        };
        return Ok(SshKeysWritten {
            path,
            change: if removed {
                KeysChange::Removed
            } else {
                KeysChange::Unchanged
            },
        });
    }

    let ssh = ensure_child_dir(root, home_fd.as_fd(), ".ssh", &ssh_path, 0o700, owner)?;
    let dir = match layout {
        SshKeyLayout::Single => ssh,
        SshKeyLayout::Fragment => ensure_child_dir(
            root,
            ssh.as_fd(),
            "authorized_keys.d",
            &frag_path,
            0o700,
            owner,
        )?,
    };
    if file_matches(dir.as_fd(), file_name, content.as_bytes(), 0o600, owner) {
        return Ok(SshKeysWritten {
            path,
            change: KeysChange::Unchanged,
        });
    }
    write_in_dir(
        root,
        dir.as_fd(),
        file_name,
        &path,
        content.as_bytes(),
        0o600,
        owner,
    )?;
    Ok(SshKeysWritten {
        path,
        change: KeysChange::Written,
    })
}

/// Whether `name` in `dir` is a regular file with exactly this content, mode and owner.
fn file_matches(
    dir: BorrowedFd<'_>,
    name: &str,
    content: &[u8],
    mode: u32,
    owner: (u32, u32),
) -> bool {
    let Ok(fd) = openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let Ok(st) = fstat(fd.as_fd()) else {
        return false;
    };
    if st.st_mode & 0o170000 != 0o100000
        || st.st_mode & 0o7777 != mode
        || (st.st_uid, st.st_gid) != owner
    {
        return false;
    }
    let mut buf = Vec::new();
    std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut buf).is_ok() && buf == content
}

/// The keys in the user's key file (non-empty lines); `None` when the file does not exist.
pub fn read_ssh_keys(
    root: &fs::Root,
    user: &str,
    layout: SshKeyLayout,
) -> Result<Option<Vec<String>>, UsersError> {
    let home = passwd::home_dir(root, user)?;
    let path = layout.key_file(&home);
    Ok(root.read(&path)?.map(|b| {
        String::from_utf8_lossy(&b)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(String::from)
            .collect()
    }))
}

/// What the MCO also does on Fedora CoreOS before writing `authorized_keys.d/ignition`: removes
/// `~/.ssh/authorized_keys` and every other file in `~/.ssh/authorized_keys.d` (symbolic links
/// are removed, not followed; directories are left alone). Returns the paths removed.
pub fn prune_other_key_files(root: &fs::Root, user: &str) -> Result<Vec<String>, UsersError> {
    let home = passwd::home_dir(root, user)?;
    let home = home.trim_end_matches('/');
    let mut removed = Vec::new();
    let Some(home_fd) = open_dir_beneath(root, home)? else {
        return Ok(removed);
    };
    let ssh_path = format!("{home}/.ssh");
    let Some(ssh) = open_child_dir(home_fd.as_fd(), ".ssh", &ssh_path)? else {
        return Ok(removed);
    };
    let legacy = format!("{ssh_path}/authorized_keys");
    match remove_in_dir(ssh.as_fd(), "authorized_keys", &legacy) {
        Ok(true) => removed.push(legacy),
        Ok(false) => {}
        Err(UsersError::Sys {
            errno: Errno::EISDIR | Errno::EPERM,
            ..
        }) => tracing::warn!("{legacy} is a directory: left alone"),
        Err(e) => return Err(e),
    }
    let frag_path = format!("{ssh_path}/authorized_keys.d");
    let Some(frag) = open_child_dir(ssh.as_fd(), "authorized_keys.d", &frag_path)? else {
        return Ok(removed);
    };
    let dup = nix::unistd::dup(frag.as_fd()).map_err(|e| sys(&frag_path, "dup", e))?;
    let listing = nix::dir::Dir::from_fd(dup).map_err(|e| sys(&frag_path, "list", e))?;
    let mut names = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| sys(&frag_path, "list", e))?;
        let name = String::from_utf8_lossy(entry.file_name().to_bytes()).into_owned();
        if name != "." && name != ".." && name != "ignition" {
            names.push(name);
        }
    }
    names.sort();
    for name in names {
        let p = format!("{frag_path}/{name}");
        match remove_in_dir(frag.as_fd(), &name, &p) {
            Ok(true) => removed.push(p),
            Ok(false) => {}
            Err(UsersError::Sys {
                errno: Errno::EISDIR | Errno::EPERM,
                ..
            }) => tracing::warn!("{p} is a directory: left alone"),
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

// ---------------------------------------------------------------------------------------------
// Password hash.
// ---------------------------------------------------------------------------------------------

/// The lock of `lckpwdf(3)`: an `fcntl` write lock on `/etc/.pwd.lock`, held while alive.
#[derive(Debug)]
struct PwdLock {
    _fd: OwnedFd,
}

impl PwdLock {
    fn acquire(root: &fs::Root, timeout: Duration) -> Result<PwdLock, UsersError> {
        let etc = open_dir_beneath(root, "/etc")?.ok_or_else(|| UsersError::ShadowMissing {
            path: SHADOW.to_string(),
            root: root.path().display().to_string(),
        })?;
        let fd = openat(
            etc.as_fd(),
            ".pwd.lock",
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| sys(PWD_LOCK, "open", e))?;
        let lock = nix::libc::flock {
            l_type: nix::libc::F_WRLCK as nix::libc::c_short,
            l_whence: nix::libc::SEEK_SET as nix::libc::c_short,
            l_start: 0,
            l_len: 0,
            l_pid: 0,
        };
        let start = Instant::now();
        loop {
            match nix::fcntl::fcntl(fd.as_fd(), nix::fcntl::FcntlArg::F_SETLK(&lock)) {
                Ok(_) => return Ok(PwdLock { _fd: fd }),
                Err(Errno::EACCES | Errno::EAGAIN | Errno::EINTR) => {
                    if start.elapsed() >= timeout {
                        return Err(UsersError::Locked {
                            path: PWD_LOCK.to_string(),
                            waited: start.elapsed(),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(sys(PWD_LOCK, "lock", e)),
            }
        }
    }
}

/// Finds the user's line in shadow text: `(start of field 2, end of field 2)` byte offsets.
fn shadow_field(text: &[u8], user: &str) -> Option<(usize, usize)> {
    let mut start = 0;
    while start < text.len() {
        let end = text[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(text.len(), |p| start + p);
        let line = &text[start..end];
        if let Some(c1) = line.iter().position(|&b| b == b':') {
            if &line[..c1] == user.as_bytes() {
                let rest = &line[c1 + 1..];
                let c2 = rest.iter().position(|&b| b == b':').unwrap_or(rest.len());
                return Some((start + c1 + 1, start + c1 + 1 + c2));
            }
        }
        start = end + 1;
    }
    None
}

/// The value stored for a desired hash: the hash, or `*` for `None`/empty (the MCO's rule).
pub fn stored_hash(hash: Option<&str>) -> &str {
    match hash {
        Some(h) if !h.is_empty() => h,
        _ => LOCKED_PASSWORD,
    }
}

/// Sets the user's password hash in `/etc/shadow` (see the module documentation). Returns
/// whether the file changed.
pub fn set_password_hash(
    root: &fs::Root,
    user: &str,
    hash: Option<&str>,
) -> Result<bool, UsersError> {
    let value = stored_hash(hash);
    if value.contains([':', '\n', '\r', '\0']) {
        return Err(UsersError::InvalidHash {
            user: user.to_string(),
            reason: "it contains ':', a line break or a NUL byte",
        });
    }
    if user.is_empty() || user.contains([':', '\n']) {
        return Err(UsersError::NotInShadow {
            user: user.to_string(),
            path: SHADOW.to_string(),
        });
    }
    let _lock = PwdLock::acquire(root, PWD_LOCK_TIMEOUT)?;
    let missing = || UsersError::ShadowMissing {
        path: SHADOW.to_string(),
        root: root.path().display().to_string(),
    };
    let st = root.stat(SHADOW)?.ok_or_else(missing)?;
    let text = root.read(SHADOW)?.ok_or_else(missing)?;
    let (from, to) = shadow_field(&text, user).ok_or_else(|| UsersError::NotInShadow {
        user: user.to_string(),
        path: SHADOW.to_string(),
    })?;
    if &text[from..to] == value.as_bytes() {
        return Ok(false);
    }
    let mut out = Vec::with_capacity(text.len() + value.len());
    out.extend_from_slice(&text[..from]);
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(&text[to..]);
    root.write_atomic(SHADOW, &out, st.mode, Some((st.uid, st.gid)))?;
    Ok(true)
}

/// The user's current password hash (the second field of its `/etc/shadow` line).
pub fn password_hash(root: &fs::Root, user: &str) -> Result<String, UsersError> {
    let text = root
        .read(SHADOW)?
        .ok_or_else(|| UsersError::ShadowMissing {
            path: SHADOW.to_string(),
            root: root.path().display().to_string(),
        })?;
    let (from, to) = shadow_field(&text, user).ok_or_else(|| UsersError::NotInShadow {
        user: user.to_string(),
        path: SHADOW.to_string(),
    })?;
    Ok(String::from_utf8_lossy(&text[from..to]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_second_field() {
        let t = b"root:*:1::::::\ncorey:x:2::::::\ncore:!:20779:0:99999:7:::\nlast:h";
        let (a, b) = shadow_field(t, "core").unwrap();
        assert_eq!(&t[a..b], b"!");
        let (a, b) = shadow_field(t, "last").unwrap();
        assert_eq!(&t[a..b], b"h");
        assert!(shadow_field(t, "cor").is_none());
        assert!(shadow_field(b"", "core").is_none());
    }

    #[test]
    fn key_file_format() {
        assert_eq!(
            key_file_contents(&["ssh-ed25519 AAA a".into(), "ssh-rsa BBB b".into()]),
            "ssh-ed25519 AAA a\nssh-rsa BBB b\n"
        );
        assert_eq!(stored_hash(None), "*");
        assert_eq!(stored_hash(Some("")), "*");
        assert_eq!(stored_hash(Some("$6$x")), "$6$x");
    }
}
