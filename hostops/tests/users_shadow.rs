//! `hearth_hostops::users::set_password_hash`: `/etc/shadow` rewritten atomically, only the
//! user's second field changed, mode and owner kept, `lckpwdf(3)`'s lock honoured. Then the
//! real thing: Debian's own `passwd -S` and `pwck` read what hearth wrote in a systemd-nspawn
//! container. Needs root; fails, never skips, without it.

use hearth_hostops::fs::Root;
use hearth_hostops::users::{self, UsersError};
use hearth_vm_tests::SystemdHost;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};

const HASH: &str = "$6$rounds=4096$salt$Kx2zqHsH3Q0Lr8R2pP7b2s0wzVhF4uX1eE9mYdJ5nT3aG6cL8vB1kN0oQ7iU4yW2rS5tZ9xM3jH6gF8dC1eA0";

/// A shadow file with every oddity we must not disturb: comments, blank lines, a user whose
/// name has `core` as a prefix, fields with trailing spaces, no newline at the end.
const SHADOW: &str = "root:*:19000:0:99999:7:::\n\
# a comment someone left\n\
\n\
corey:$y$j9T$abc$def:19001:0:99999:7:::\n\
core:!:20779:0:99999:7:::\n\
daemon:*:19000:0:99999:7:::  \n\
last:*:19000::::::";

fn must_be_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests set file owners and must run as root"
    );
}

fn shadow_root(mode: u32, owner: (u32, u32)) -> (tempfile::TempDir, Root) {
    must_be_root();
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    fs::create_dir(&etc).unwrap();
    fs::write(etc.join("shadow"), SHADOW).unwrap();
    std::os::unix::fs::chown(etc.join("shadow"), Some(owner.0), Some(owner.1)).unwrap();
    fs::set_permissions(etc.join("shadow"), fs::Permissions::from_mode(mode)).unwrap();
    let root = Root::open(dir.path()).unwrap();
    (dir, root)
}

#[test]
fn only_the_second_field_of_that_user_changes() {
    let (dir, root) = shadow_root(0o000, (0, 0));
    let path = dir.path().join("etc/shadow");
    assert!(users::set_password_hash(&root, "core", Some(HASH)).unwrap());
    let expected = SHADOW.replace("\ncore:!:20779:", &format!("\ncore:{HASH}:20779:"));
    assert_eq!(
        fs::read(&path).unwrap(),
        expected.as_bytes(),
        "byte for byte"
    );
    let m = fs::metadata(&path).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o000, "Fedora's 0000 kept");
    assert_eq!((m.uid(), m.gid()), (0, 0));
    assert_eq!(users::password_hash(&root, "core").unwrap(), HASH);
    assert_eq!(
        users::password_hash(&root, "corey").unwrap(),
        "$y$j9T$abc$def"
    );
    // No temporary file left behind.
    assert_eq!(
        fs::read_dir(dir.path().join("etc"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != ".pwd.lock")
            .collect::<Vec<_>>(),
        ["shadow"]
    );

    // The last line (no newline at the end) too.
    users::set_password_hash(&root, "last", Some("$1$x$y")).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.ends_with("\nlast:$1$x$y:19000::::::"), "{text}");

    // Back to the original bytes when the original hash is set again.
    users::set_password_hash(&root, "core", Some("!")).unwrap();
    users::set_password_hash(&root, "last", Some("*")).unwrap();
    assert_eq!(fs::read(&path).unwrap(), SHADOW.as_bytes());
}

#[test]
fn none_or_empty_locks_the_password_as_the_mco_does() {
    let (dir, root) = shadow_root(0o640, (0, 42));
    let path = dir.path().join("etc/shadow");
    assert!(users::set_password_hash(&root, "core", None).unwrap());
    assert_eq!(users::password_hash(&root, "core").unwrap(), "*");
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        SHADOW.replace("\ncore:!:", "\ncore:*:")
    );
    let m = fs::metadata(&path).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o640, "Debian's 0640 kept");
    assert_eq!((m.uid(), m.gid()), (0, 42), "root:shadow kept");

    // Already locked: nothing written (same inode).
    let ino = m.ino();
    assert!(!users::set_password_hash(&root, "core", Some("")).unwrap());
    assert_eq!(fs::metadata(&path).unwrap().ino(), ino);
}

#[test]
fn errors_say_what_is_wrong() {
    let (_dir, root) = shadow_root(0o000, (0, 0));
    let err = users::set_password_hash(&root, "nobody2", Some(HASH)).unwrap_err();
    assert!(matches!(err, UsersError::NotInShadow { .. }));
    assert_eq!(
        err.to_string(),
        "user nobody2 has no entry in /etc/shadow: cannot set its password hash"
    );
    // A prefix of a name is not the name.
    assert!(users::set_password_hash(&root, "cor", Some(HASH)).is_err());
    let err = users::set_password_hash(&root, "core", Some("a:b")).unwrap_err();
    assert!(
        err.to_string()
            .contains("invalid password hash for user core"),
        "{err}"
    );
    assert!(users::set_password_hash(&root, "core", Some("a\nroot::0:0:::::")).is_err());
    assert_eq!(
        users::password_hash(&root, "core").unwrap(),
        "!",
        "nothing written"
    );

    let empty = tempfile::tempdir().unwrap();
    fs::create_dir(empty.path().join("etc")).unwrap();
    let root = Root::open(empty.path()).unwrap();
    let err = users::set_password_hash(&root, "core", None).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/etc/shadow does not exist in root"),
        "{err}"
    );
}

/// Not a test on its own: the lock holder the next test starts as a child process
/// (fcntl locks are per process, so the holder must be another one).
#[test]
fn lock_holder_helper() {
    let Ok(path) = std::env::var("HEARTH_TEST_HOLD_PWD_LOCK") else {
        return;
    };
    use std::os::fd::AsFd;
    let file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .unwrap();
    let lock = nix::libc::flock {
        l_type: nix::libc::F_WRLCK as nix::libc::c_short,
        l_whence: nix::libc::SEEK_SET as nix::libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    nix::fcntl::fcntl(file.as_fd(), nix::fcntl::FcntlArg::F_SETLK(&lock)).unwrap();
    fs::write(format!("{path}.held"), "").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
}

#[test]
fn waits_for_the_lckpwdf_lock_of_other_tools() {
    let (dir, root) = shadow_root(0o000, (0, 0));
    let lock = dir.path().join("etc/.pwd.lock");
    // The helper's full test name: its module path without the crate's name.
    let helper = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::lock_holder_helper"),
        None => "lock_holder_helper".to_string(),
    };
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &helper, "--nocapture"])
        .env("HEARTH_TEST_HOLD_PWD_LOCK", &lock)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let held = dir.path().join("etc/.pwd.lock.held");
    let start = Instant::now();
    while !held.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the helper never took the lock"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let t = Instant::now();
    users::set_password_hash(&root, "core", Some(HASH)).unwrap();
    let waited = t.elapsed();
    assert!(child.wait().unwrap().success());
    assert!(
        waited >= Duration::from_millis(800),
        "wrote while another process held /etc/.pwd.lock (waited {waited:?})"
    );
    assert_eq!(users::password_hash(&root, "core").unwrap(), HASH);
}

#[test]
fn debian_tools_read_what_hearth_wrote() {
    must_be_root();
    let host = SystemdHost::boot().unwrap_or_else(|e| {
        panic!("could not boot a test host (needs root and systemd-nspawn): {e:#}")
    });
    let root = Root::open(host.root()).unwrap();
    let before = fs::read(host.path("/etc/shadow")).unwrap();
    // `core`'s fields after the hash (last change, ages, ...) as the image has them: the
    // last-change day is the day the cached root was built, so it is read, never assumed.
    let core_rest = String::from_utf8_lossy(&before)
        .lines()
        .find_map(|l| l.strip_prefix("core:"))
        .and_then(|rest| {
            rest.split_once(':')
                .map(|(_, after_hash)| after_hash.to_owned())
        })
        .expect("the test image has a core user in /etc/shadow");
    let meta_before = fs::metadata(host.path("/etc/shadow")).unwrap();
    let pwck_before = host.exec(&["pwck", "-r", "-q"]).unwrap();
    assert!(host
        .exec_ok(&["passwd", "-S", "core"])
        .unwrap()
        .starts_with("core L "));

    // A real SHA-512 crypt hash of "hearth", made by the container's libc.
    let hash = host
        .exec_ok(&["perl", "-e", "print crypt('hearth', '$6$hearthsalt$')"])
        .unwrap();
    assert!(hash.starts_with("$6$hearthsalt$"), "{hash}");
    assert!(users::set_password_hash(&root, "core", Some(&hash)).unwrap());

    let status = host.exec_ok(&["passwd", "-S", "core"]).unwrap();
    assert!(status.starts_with("core P "), "usable password: {status}");
    let getent = host.exec_ok(&["getent", "shadow", "core"]).unwrap();
    assert_eq!(getent.trim(), format!("core:{hash}:{core_rest}"));
    assert!(
        core_rest
            .split(':')
            .next()
            .is_some_and(|day| day.parse::<u32>().is_ok()),
        "the last-change day is a number: {core_rest}"
    );
    // The password verifies through the container's crypt.
    let ok = host
        .exec_ok(&[
            "perl",
            "-e",
            "my $h=(getpwnam('core'))[1]; print crypt('hearth', $h) eq $h ? 'yes' : 'no'",
        ])
        .unwrap();
    assert_eq!(ok, "yes");
    let pwck_after = host.exec(&["pwck", "-r", "-q"]).unwrap();
    assert_eq!(
        pwck_after.code(),
        pwck_before.code(),
        "{}",
        pwck_after.stderr
    );
    assert_eq!(pwck_after.stdout, pwck_before.stdout);

    // Every other line untouched; mode and owner (root:shadow 0640) kept.
    let after = fs::read(host.path("/etc/shadow")).unwrap();
    let lines =
        |b: &[u8]| -> Vec<Vec<u8>> { b.split(|&c| c == b'\n').map(<[u8]>::to_vec).collect() };
    let (b, a) = (lines(&before), lines(&after));
    assert_eq!(a.len(), b.len());
    let changed: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
    assert_eq!(changed.len(), 1);
    assert!(a[changed[0]].starts_with(b"core:"));
    let meta_after = fs::metadata(host.path("/etc/shadow")).unwrap();
    assert_eq!(
        meta_after.permissions().mode(),
        meta_before.permissions().mode()
    );
    assert_eq!(
        (meta_after.uid(), meta_after.gid()),
        (meta_before.uid(), meta_before.gid())
    );

    // Locked again, as the MCO does for an absent hash.
    users::set_password_hash(&root, "core", None).unwrap();
    let status = host.exec_ok(&["passwd", "-S", "core"]).unwrap();
    assert!(status.starts_with("core L "), "{status}");
    assert_eq!(users::password_hash(&root, "core").unwrap(), "*");
}
