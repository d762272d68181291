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
//!
//! # Files
//!
//! This file holds the rules above and the re-exports. [`Root`] is in `root.rs`, [`FsError`]
//! in `error.rs`, [`Stat`] and [`EntryKind`] in `stat.rs`; `Root`'s operations are split by
//! concept (`resolve.rs`, `label.rs`, `read.rs`, `write.rs`, `entry.rs`, `dirsync.rs`); those
//! use `root.rs`, `error.rs` and `stat.rs`, never the other way.

mod dirsync;
mod entry;
mod error;
mod label;
mod read;
mod resolve;
mod root;
mod stat;
#[cfg(test)]
mod tests;
mod write;

pub use dirsync::{DirSyncs, MAX_PENDING_DIRS};
pub use entry::{read_all, Entry};
pub use error::FsError;
pub(crate) use resolve::open_beneath;
pub use root::Root;
pub use stat::{EntryKind, Stat};
