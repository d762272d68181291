//! One open per checked file: [`Root::open_entry`] opens a managed path once (never following a
//! final symbolic link) and hands back its stat and, for a regular file, the open file to read,
//! so a check of content, mode and owner costs one `openat2` instead of a stat plus a read.

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::fstat;
use std::io::Read;
use std::os::fd::AsFd;

use super::error::FsError;
use super::resolve::{open_beneath, split};
use super::root::Root;
use super::stat::{EntryKind, Stat};

/// An existing entry at a path.
#[derive(Debug)]
pub enum Entry {
    /// A regular file, open for reading.
    File(Stat, std::fs::File),
    /// Anything else (a symbolic link, a directory, a device, a FIFO, a socket).
    Other(Stat),
}

impl Entry {
    /// The entry's stat.
    pub fn stat(&self) -> Stat {
        match self {
            Entry::File(st, _) | Entry::Other(st) => *st,
        }
    }
}

impl Root {
    /// Opens the entry at `path` once: `Ok(None)` when it does not exist. A final symbolic link
    /// is not followed (it is [`Entry::Other`]); a FIFO is opened without blocking.
    pub fn open_entry(&self, path: &str) -> Result<Option<Entry>, FsError> {
        let (parent, name) = split(path)?;
        let rel = parent.join(name);
        let flags = OFlag::O_RDONLY
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC;
        let fd = match open_beneath(self.fd.as_fd(), &rel, flags) {
            Ok(fd) => fd,
            Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(None),
            // A symbolic link (O_NOFOLLOW), a socket, a device without a driver: not a file
            // to read; say what it is.
            Err(Errno::ELOOP | Errno::ENXIO | Errno::ENODEV | Errno::EOPNOTSUPP) => {
                return Ok(self.stat(path)?.map(Entry::Other))
            }
            Err(e) => return Err(self.sys(path, "resolve", e)),
        };
        let st = fstat(fd.as_fd()).map_err(|e| self.sys(path, "stat", e))?;
        let stat = Stat::from_file_stat(&st);
        Ok(Some(match stat.kind {
            EntryKind::File => Entry::File(stat, std::fs::File::from(fd)),
            _ => Entry::Other(stat),
        }))
    }
}

/// Reads an opened file to its end (`path` names it in the error). `size_hint` is the size its
/// stat gave: the buffer is sized from it (up to 1 MiB ahead), so reading costs no further
/// `statx` and `lseek` (which `File::read_to_end` makes to size its buffer itself).
pub fn read_all(file: &mut std::fs::File, path: &str, size_hint: u64) -> Result<Vec<u8>, FsError> {
    /// Plain `read(2)` calls: the generic `read_to_end`, not `File`'s.
    struct Plain<'a>(&'a mut std::fs::File);
    impl Read for Plain<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.0.read(buf)
        }
    }
    let ahead = usize::try_from(size_hint)
        .unwrap_or(usize::MAX)
        .min(1 << 20);
    let mut out = Vec::with_capacity(ahead.saturating_add(1));
    Plain(file)
        .read_to_end(&mut out)
        .map_err(|source| FsError::Io {
            path: path.to_string(),
            op: "read",
            source,
        })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_open_says_what_is_there_without_following_or_blocking() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        std::fs::create_dir(d.path().join("etc")).unwrap();
        std::fs::write(d.path().join("etc/file"), b"content").unwrap();
        std::os::unix::fs::symlink("file", d.path().join("etc/link")).unwrap();
        nix::unistd::mkfifo(
            &d.path().join("etc/fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();

        let Some(Entry::File(st, mut f)) = root.open_entry("/etc/file").unwrap() else {
            panic!("a regular file");
        };
        assert_eq!(st.size, 7);
        assert_eq!(read_all(&mut f, "/etc/file", st.size).unwrap(), b"content");
        // A final symbolic link is not followed: it is what is at the path.
        let link = root.open_entry("/etc/link").unwrap().unwrap();
        assert!(matches!(link, Entry::Other(_)));
        assert_eq!(link.stat().kind, EntryKind::Symlink);
        // A FIFO (no writer) does not block the open.
        let fifo = root.open_entry("/etc/fifo").unwrap().unwrap();
        assert_eq!(fifo.stat().kind, EntryKind::Other);
        assert!(root.open_entry("/etc/missing").unwrap().is_none());
        assert!(root.open_entry("/etc/file/below").unwrap().is_none());
        // A symbolic link out of the root on the way is refused, as every other access.
        std::os::unix::fs::symlink("/", d.path().join("out")).unwrap();
        assert!(matches!(
            root.open_entry("/out/etc/passwd"),
            Err(FsError::EscapesRoot { .. })
        ));
    }
}
