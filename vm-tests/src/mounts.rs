//! Mount handling: the per-host overlay, and removal of directories that never walks into a
//! mount point (a stray bind mount of `/dev` or `/proc` under a directory being deleted would
//! otherwise be emptied).

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use tracing::{debug, warn};

/// Mount points of this process's mount namespace, from `/proc/self/mountinfo`.
pub(crate) fn mount_points() -> Result<Vec<PathBuf>> {
    let info =
        fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    Ok(info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mountinfo(p)))
        .collect())
}

/// Undoes the octal escapes (`\040` for a space, ...) of `/proc/self/mountinfo`.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let oct = &bytes[i + 1..i + 4];
            if oct.iter().all(|b| (b'0'..=b'7').contains(b)) {
                let v = oct
                    .iter()
                    .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
                if let Ok(v) = u8::try_from(v) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Mount points at or below `dir`, deepest first.
pub(crate) fn mounts_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut found: Vec<PathBuf> = mount_points()?
        .into_iter()
        .filter(|m| m.starts_with(&dir))
        .collect();
    found.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    found.dedup();
    Ok(found)
}

/// Whether `path` is a mount point.
pub(crate) fn is_mount_point(path: &Path) -> bool {
    let path = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    mount_points().map(|ms| ms.contains(&path)).unwrap_or(false)
}

/// Mounts an overlay of `lower` (read-only) and `upper`/`work` (writable) at `target`.
pub(crate) fn mount_overlay(lower: &Path, upper: &Path, work: &Path, target: &Path) -> Result<()> {
    for p in [lower, upper, work] {
        let s = p.to_string_lossy();
        if s.contains([',', ':', '\\']) {
            bail!("overlay paths may not contain ',', ':' or '\\': {s}");
        }
    }
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    );
    mount(
        Some("overlay"),
        target,
        Some("overlay"),
        MsFlags::empty(),
        Some(options.as_str()),
    )
    .with_context(|| format!("mount -t overlay -o {options} overlay {}", target.display()))
}

/// Unmounts `target`, retrying while it is busy, and detaching it lazily as a last resort.
pub(crate) fn unmount(target: &Path) -> Result<()> {
    for attempt in 0..20 {
        match umount2(target, MntFlags::empty()) {
            Ok(()) => return Ok(()),
            Err(Errno::EBUSY) => {
                debug!(target = %target.display(), attempt, "mount busy, retrying");
                thread::sleep(Duration::from_millis(50));
            }
            Err(Errno::EINVAL) if !is_mount_point(target) => return Ok(()),
            Err(e) => {
                return Err(e).with_context(|| format!("umount {}", target.display()));
            }
        }
    }
    warn!(target = %target.display(), "mount still busy after 1 s: detaching it lazily");
    umount2(target, MntFlags::MNT_DETACH).with_context(|| format!("umount -l {}", target.display()))
}

/// Removes `dir` and everything below it, after unmounting whatever is mounted there.
/// Refuses to delete anything if a mount point below `dir` cannot be removed.
pub(crate) fn remove_tree(dir: &Path) -> Result<()> {
    if fs::symlink_metadata(dir).is_err() {
        return Ok(());
    }
    for m in mounts_under(dir)? {
        warn!(mount = %m.display(), "unmounting a leftover mount before removing its directory");
        unmount(&m)?;
    }
    let left = mounts_under(dir)?;
    if !left.is_empty() {
        bail!(
            "not removing {}: mount points remain below it: {left:?}",
            dir.display()
        );
    }
    fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape_mountinfo(r"/a\040b"), "/a b");
        assert_eq!(unescape_mountinfo(r"/plain"), "/plain");
        assert_eq!(unescape_mountinfo(r"/tab\011x\134y"), "/tab\tx\\y");
        assert_eq!(unescape_mountinfo(r"/end\04"), r"/end\04");
    }

    #[test]
    fn root_is_a_mount_point() {
        assert!(mount_points().unwrap().iter().any(|m| m == Path::new("/")));
        assert!(is_mount_point(Path::new("/")));
    }

    #[test]
    fn remove_tree_removes_a_plain_tree() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t");
        fs::create_dir_all(t.join("a/b")).unwrap();
        fs::write(t.join("a/b/f"), "x").unwrap();
        remove_tree(&t).unwrap();
        assert!(!t.exists());
        remove_tree(&t).unwrap();
    }
}
