//! Unit tests of confined, atomic writes on a temporary directory.

use super::*;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use std::io::Write;
use std::os::fd::AsFd;
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

/// With `RESOLVE_BENEATH` the kernel answers `EAGAIN` when a rename anywhere raced with the
/// resolution of a `..`; confined opens try again (openat2(2)), so a rename storm on the machine
/// (another build, a package install) does not fail a valid path.
#[test]
fn a_rename_storm_does_not_fail_a_path_through_dot_dot() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (dir, r) = root();
    std::fs::create_dir_all(dir.path().join("var/usrlocal")).unwrap();
    std::fs::create_dir(dir.path().join("usr")).unwrap();
    std::os::unix::fs::symlink("../var/usrlocal", dir.path().join("usr/local")).unwrap();
    std::fs::write(dir.path().join("var/usrlocal/x"), b"x").unwrap();
    let storm = tempfile::tempdir().unwrap();
    let (a, b) = (storm.path().join("a"), storm.path().join("b"));
    std::fs::write(&a, b"").unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let renamer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::fs::rename(&a, &b).unwrap();
                std::fs::rename(&b, &a).unwrap();
            }
        })
    };
    // The kernel does answer EAGAIN under this storm (so the check below can fail)...
    let raw_eagain = (0..20_000).any(|_| {
        nix::fcntl::openat2(
            r.fd.as_fd(),
            "usr/local/x",
            nix::fcntl::OpenHow::new()
                .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC)
                .resolve(super::resolve::resolve_flags()),
        )
        .err()
            == Some(Errno::EAGAIN)
    });
    // ...and the confined read never fails.
    let failures = (0..20_000)
        .filter(|_| {
            r.read("/usr/local/x")
                .map(|c| c.as_deref() != Some(&b"x"[..]))
                .unwrap_or(true)
        })
        .count();
    stop.store(true, Ordering::Relaxed);
    renamer.join().unwrap();
    assert!(
        raw_eagain,
        "no EAGAIN seen: the storm did not race (the check proves nothing)"
    );
    assert_eq!(failures, 0);
}
