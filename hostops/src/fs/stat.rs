//! What an entry is: [`Stat`] (permission bits, owner, size) and [`EntryKind`], as a
//! `stat(2)` that does not follow a final symbolic link reports them.

use nix::sys::stat::FileStat;

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

/// The kind of entry a `st_mode` says.
pub(super) fn kind_of(st_mode: u32) -> EntryKind {
    match st_mode & 0o170000 {
        0o100000 => EntryKind::File,
        0o040000 => EntryKind::Dir,
        0o120000 => EntryKind::Symlink,
        _ => EntryKind::Other,
    }
}

impl Stat {
    /// What a `stat(2)` of an entry says about it: permission bits, owner, size and kind.
    pub(super) fn from_file_stat(st: &FileStat) -> Stat {
        Stat {
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            size: st.st_size as u64,
            kind: kind_of(st.st_mode),
        }
    }
}
