//! `hearth_hostops::users`: SSH keys of user core, as the MCO writes them.
//!
//! File logic on plain temporary roots (as root: the files are chowned to core), then the real
//! thing: a Debian systemd in systemd-nspawn where `core` reads its keys. Needs root (and
//! systemd-nspawn for the container test); fails, never skips, without them.

use hearth_hostops::fs::Root;
use hearth_hostops::users::{self, KeysChange, SshKeyLayout, UsersError};
use hearth_vm_tests::SystemdHost;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const KEY_A: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA a@example";
const KEY_B: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 b@example";

fn must_be_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests chown files to user core and must run as root"
    );
}

/// A CoreOS-like root: `/home -> var/home`, core with uid/gid 1000 in the TARGET passwd
/// (this machine may have another user with uid 1000, or none).
fn coreos_root() -> (tempfile::TempDir, Root) {
    must_be_root();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    fs::create_dir_all(p.join("etc")).unwrap();
    fs::write(
        p.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000::/home/core:/bin/bash\n",
    )
    .unwrap();
    fs::write(p.join("etc/group"), "root:x:0:\ncore:x:1000:\n").unwrap();
    fs::create_dir_all(p.join("var/home/core")).unwrap();
    std::os::unix::fs::chown(p.join("var/home/core"), Some(1000), Some(1000)).unwrap();
    std::os::unix::fs::symlink("var/home", p.join("home")).unwrap();
    let root = Root::open(p).unwrap();
    (dir, root)
}

fn meta(p: &Path) -> (u32, u32, u32) {
    let m = fs::symlink_metadata(p).unwrap();
    (m.permissions().mode() & 0o7777, m.uid(), m.gid())
}

fn keys(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn fragment_layout_modes_owners_and_content() {
    let (dir, root) = coreos_root();
    let out = users::write_ssh_keys(
        &root,
        "core",
        &keys(&[KEY_A, KEY_B]),
        SshKeyLayout::Fragment,
    )
    .unwrap();
    assert_eq!(out.path, "/home/core/.ssh/authorized_keys.d/ignition");
    assert_eq!(out.change, KeysChange::Written);
    let home = dir.path().join("var/home/core");
    let file = home.join(".ssh/authorized_keys.d/ignition");
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        format!("{KEY_A}\n{KEY_B}\n")
    );
    assert_eq!(meta(&file), (0o600, 1000, 1000));
    assert_eq!(meta(&home.join(".ssh")), (0o700, 1000, 1000));
    assert_eq!(
        meta(&home.join(".ssh/authorized_keys.d")),
        (0o700, 1000, 1000)
    );
    // No temporary file left behind, nothing else created.
    assert_eq!(
        fs::read_dir(home.join(".ssh/authorized_keys.d"))
            .unwrap()
            .count(),
        1
    );
    assert!(!home.join(".ssh/authorized_keys").exists());

    // Read back for verification.
    assert_eq!(
        users::read_ssh_keys(&root, "core", SshKeyLayout::Fragment).unwrap(),
        Some(keys(&[KEY_A, KEY_B]))
    );
    assert_eq!(
        users::read_ssh_keys(&root, "core", SshKeyLayout::Single).unwrap(),
        None
    );

    // Same keys again: nothing is touched (no needless event for the drift monitor).
    let ino = fs::metadata(&file).unwrap().ino();
    let again = users::write_ssh_keys(
        &root,
        "core",
        &keys(&[KEY_A, KEY_B]),
        SshKeyLayout::Fragment,
    )
    .unwrap();
    assert_eq!(again.change, KeysChange::Unchanged);
    assert_eq!(fs::metadata(&file).unwrap().ino(), ino);

    // Fewer keys: replaced atomically (a new inode).
    let out =
        users::write_ssh_keys(&root, "core", &keys(&[KEY_B]), SshKeyLayout::Fragment).unwrap();
    assert_eq!(out.change, KeysChange::Written);
    assert_eq!(fs::read_to_string(&file).unwrap(), format!("{KEY_B}\n"));
    assert_ne!(fs::metadata(&file).unwrap().ino(), ino);

    // No keys: the file goes, the directories stay.
    let out = users::write_ssh_keys(&root, "core", &[], SshKeyLayout::Fragment).unwrap();
    assert_eq!(out.change, KeysChange::Removed);
    assert!(!file.exists());
    assert!(home.join(".ssh/authorized_keys.d").is_dir());
    let out = users::write_ssh_keys(&root, "core", &[], SshKeyLayout::Fragment).unwrap();
    assert_eq!(out.change, KeysChange::Unchanged);
}

#[test]
fn single_file_layout_for_plain_hosts() {
    let (dir, root) = coreos_root();
    let out = users::write_ssh_keys(&root, "core", &keys(&[KEY_A]), SshKeyLayout::Single).unwrap();
    assert_eq!(out.path, "/home/core/.ssh/authorized_keys");
    let file = dir.path().join("var/home/core/.ssh/authorized_keys");
    assert_eq!(fs::read_to_string(&file).unwrap(), format!("{KEY_A}\n"));
    assert_eq!(meta(&file), (0o600, 1000, 1000));
    assert!(!dir
        .path()
        .join("var/home/core/.ssh/authorized_keys.d")
        .exists());
    // Without ssh-key-dir, detection picks this layout; with it, the fragment directory.
    assert_eq!(SshKeyLayout::detect(&root).unwrap(), SshKeyLayout::Single);
    fs::create_dir_all(dir.path().join("etc/ssh/sshd_config.d")).unwrap();
    fs::write(
        dir.path().join("etc/ssh/sshd_config.d/40-ssh-key-dir.conf"),
        "AuthorizedKeysCommand /usr/libexec/ssh-key-dir %u\nAuthorizedKeysCommandUser root\n",
    )
    .unwrap();
    assert_eq!(SshKeyLayout::detect(&root).unwrap(), SshKeyLayout::Fragment);
    assert_eq!(SshKeyLayout::default(), SshKeyLayout::Fragment);
}

#[test]
fn existing_directories_get_mode_and_owner_fixed() {
    let (dir, root) = coreos_root();
    let ssh = dir.path().join("var/home/core/.ssh");
    fs::create_dir(&ssh).unwrap();
    fs::set_permissions(&ssh, fs::Permissions::from_mode(0o755)).unwrap();
    // Left owned by root, as a careless admin would.
    users::write_ssh_keys(&root, "core", &keys(&[KEY_A]), SshKeyLayout::Fragment).unwrap();
    assert_eq!(meta(&ssh), (0o700, 1000, 1000));
}

#[test]
fn links_planted_in_the_home_directory_are_not_followed() {
    let (dir, root) = coreos_root();
    let home = dir.path().join("var/home/core");
    let etc = dir.path().join("etc");
    let before = meta(&etc);
    // core makes ~/.ssh point at /etc: hearth must neither chown /etc nor write into it.
    std::os::unix::fs::symlink("/etc", home.join(".ssh")).unwrap();
    let err =
        users::write_ssh_keys(&root, "core", &keys(&[KEY_A]), SshKeyLayout::Single).unwrap_err();
    assert!(matches!(err, UsersError::NotADirectory { .. }), "{err:?}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(meta(&etc), before);
    assert!(!etc.join("authorized_keys").exists());

    // The same one level down.
    fs::remove_file(home.join(".ssh")).unwrap();
    fs::create_dir(home.join(".ssh")).unwrap();
    std::os::unix::fs::symlink("../../../../etc", home.join(".ssh/authorized_keys.d")).unwrap();
    let err =
        users::write_ssh_keys(&root, "core", &keys(&[KEY_A]), SshKeyLayout::Fragment).unwrap_err();
    assert!(matches!(err, UsersError::NotADirectory { .. }), "{err:?}");
    assert!(!etc.join("ignition").exists());
    assert_eq!(meta(&etc), before);

    // A link planted at the key file itself is replaced, not written through.
    fs::remove_file(home.join(".ssh/authorized_keys.d")).unwrap();
    fs::create_dir(home.join(".ssh/authorized_keys.d")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", home.join(".ssh/authorized_keys.d/ignition"))
        .unwrap();
    let passwd = fs::read(etc.join("passwd")).unwrap();
    users::write_ssh_keys(&root, "core", &keys(&[KEY_A]), SshKeyLayout::Fragment).unwrap();
    assert_eq!(fs::read(etc.join("passwd")).unwrap(), passwd);
    assert!(
        fs::symlink_metadata(home.join(".ssh/authorized_keys.d/ignition"))
            .unwrap()
            .is_file()
    );
}

#[test]
fn missing_user_or_home_is_an_error() {
    let (dir, root) = coreos_root();
    let err =
        users::write_ssh_keys(&root, "alice", &keys(&[KEY_A]), SshKeyLayout::Fragment).unwrap_err();
    assert!(
        err.to_string()
            .contains("user \"alice\" not found in /etc/passwd"),
        "{err}"
    );
    fs::remove_dir(dir.path().join("var/home/core")).unwrap();
    let err =
        users::write_ssh_keys(&root, "core", &keys(&[KEY_A]), SshKeyLayout::Fragment).unwrap_err();
    assert_eq!(
        err.to_string(),
        "home directory /home/core of user core does not exist"
    );
}

#[test]
fn pruning_removes_what_the_mco_removes_on_fcos() {
    let (dir, root) = coreos_root();
    let ssh = dir.path().join("var/home/core/.ssh");
    users::write_ssh_keys(&root, "core", &keys(&[KEY_A]), SshKeyLayout::Fragment).unwrap();
    fs::write(ssh.join("authorized_keys"), "old\n").unwrap();
    fs::write(ssh.join("authorized_keys.d/afterburn"), "cloud\n").unwrap();
    fs::create_dir(ssh.join("authorized_keys.d/subdir")).unwrap();
    let removed = users::prune_other_key_files(&root, "core").unwrap();
    assert_eq!(
        removed,
        [
            "/home/core/.ssh/authorized_keys",
            "/home/core/.ssh/authorized_keys.d/afterburn"
        ]
    );
    assert!(ssh.join("authorized_keys.d/ignition").exists());
    assert!(ssh.join("authorized_keys.d/subdir").is_dir());
    assert!(users::prune_other_key_files(&root, "core")
        .unwrap()
        .is_empty());
}

#[test]
fn core_reads_its_keys_in_a_real_container() {
    must_be_root();
    let host = SystemdHost::boot().unwrap_or_else(|e| {
        panic!("could not boot a test host (needs root and systemd-nspawn): {e:#}")
    });
    let root = Root::open(host.root()).unwrap();
    let out = users::write_ssh_keys(
        &root,
        "core",
        &keys(&[KEY_A, KEY_B]),
        SshKeyLayout::Fragment,
    )
    .unwrap();
    assert_eq!(out.path, "/home/core/.ssh/authorized_keys.d/ignition");

    // Seen inside with the container's own tools and names.
    let stat = host
        .exec_ok(&[
            "stat",
            "-c",
            "%a %U:%G %n",
            "/home/core/.ssh",
            "/home/core/.ssh/authorized_keys.d",
            "/home/core/.ssh/authorized_keys.d/ignition",
        ])
        .unwrap();
    assert_eq!(
        stat,
        "700 core:core /home/core/.ssh\n\
         700 core:core /home/core/.ssh/authorized_keys.d\n\
         600 core:core /home/core/.ssh/authorized_keys.d/ignition\n"
    );
    // core itself can read the file (what sshd's AuthorizedKeysCommand / StrictModes need).
    let as_core = host
        .exec_ok(&[
            "runuser",
            "-u",
            "core",
            "--",
            "cat",
            "/home/core/.ssh/authorized_keys.d/ignition",
        ])
        .unwrap();
    assert_eq!(as_core, format!("{KEY_A}\n{KEY_B}\n"));
    // Another user cannot.
    host.exec_ok(&["useradd", "--no-create-home", "other"])
        .unwrap();
    let denied = host
        .exec(&[
            "runuser",
            "-u",
            "other",
            "--",
            "cat",
            "/home/core/.ssh/authorized_keys.d/ignition",
        ])
        .unwrap();
    assert!(!denied.success(), "{denied:?}");

    // Plain Debian host: the MCO's single-file layout.
    users::write_ssh_keys(&root, "core", &keys(&[KEY_B]), SshKeyLayout::Single).unwrap();
    let as_core = host
        .exec_ok(&[
            "runuser",
            "-u",
            "core",
            "--",
            "cat",
            "/home/core/.ssh/authorized_keys",
        ])
        .unwrap();
    assert_eq!(as_core, format!("{KEY_B}\n"));
    assert_eq!(SshKeyLayout::detect(&root).unwrap(), SshKeyLayout::Single);
}
