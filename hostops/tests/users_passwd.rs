//! `hearth_hostops::passwd`: users and groups of the TARGET root.
//!
//! The file logic runs on plain temporary roots; one test boots a real Debian systemd in
//! systemd-nspawn (`hearth_vm_tests::SystemdHost`) and shows that names resolve against the
//! container's databases, not this machine's NSS. Container tests need root and
//! systemd-nspawn (`vm-tests/scripts/install-deps.sh`); without them they fail, never skip.

use hearth_config::ignition::NodeOwner;
use hearth_hostops::fs::Root;
use hearth_hostops::passwd::{self, Db, PasswdError};
use hearth_vm_tests::SystemdHost;
use std::fs;

fn root_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path.trim_start_matches('/'));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    let root = Root::open(dir.path()).unwrap();
    (dir, root)
}

fn name(n: &str) -> NodeOwner {
    NodeOwner {
        id: None,
        name: Some(n.to_string()),
    }
}

fn id(i: i64) -> NodeOwner {
    NodeOwner {
        id: Some(i),
        name: None,
    }
}

/// A Fedora CoreOS-like root: system users in /usr/lib (nss-altfiles), core in /etc.
fn coreos_root() -> (tempfile::TempDir, Root) {
    root_with(&[
        (
            "/etc/passwd",
            "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n\
             chrony:x:992:990::/etc/chrony:/sbin/nologin\n",
        ),
        (
            "/etc/group",
            "root:x:0:\ncore:x:1000:\nwheel:x:10:core\nchrony:x:990:\n",
        ),
        (
            "/usr/lib/passwd",
            "root:x:0:0:root:/root:/bin/bash\nbin:x:1:1:bin:/bin:/sbin/nologin\n\
             chrony:x:994:992::/var/lib/chrony:/sbin/nologin\nsshd:x:74:74::/var/empty/sshd:/sbin/nologin\n",
        ),
        (
            "/usr/lib/group",
            "root:x:0:\nbin:x:1:\nsshd:x:74:\nssh_keys:x:995:\n",
        ),
    ])
}

#[test]
fn owners_resolve_by_name_in_etc_then_usr_lib() {
    let (_d, root) = coreos_root();
    assert_eq!(
        passwd::resolve_owner(&root, &name("core"), &name("wheel")).unwrap(),
        (1000, 10)
    );
    // Only in /usr/lib (nss-altfiles).
    assert_eq!(
        passwd::resolve_owner(&root, &name("sshd"), &name("ssh_keys")).unwrap(),
        (74, 995)
    );
    // In both: /etc wins, as with `passwd: files altfiles`.
    assert_eq!(
        passwd::resolve_owner(&root, &name("chrony"), &name("chrony")).unwrap(),
        (992, 990)
    );
}

#[test]
fn owners_default_to_root_and_ids_need_no_entry() {
    let (_d, root) = coreos_root();
    let none = NodeOwner::default();
    assert_eq!(passwd::resolve_owner(&root, &none, &none).unwrap(), (0, 0));
    // The group does not default to the user's primary group (Ignition semantics).
    assert_eq!(
        passwd::resolve_owner(&root, &name("core"), &none).unwrap(),
        (1000, 0)
    );
    assert_eq!(
        passwd::resolve_owner(&root, &id(4321), &id(8765)).unwrap(),
        (4321, 8765)
    );
    // An id wins over a name.
    let both = NodeOwner {
        id: Some(7),
        name: Some("core".into()),
    };
    assert_eq!(passwd::resolve_owner(&root, &both, &none).unwrap(), (7, 0));
    // An empty name is no name.
    assert_eq!(
        passwd::resolve_owner(&root, &name(""), &name("")).unwrap(),
        (0, 0)
    );
}

#[test]
fn unknown_names_are_errors_that_say_where_we_looked() {
    let (_d, root) = coreos_root();
    let err = passwd::resolve_owner(&root, &name("postgres"), &NodeOwner::default()).unwrap_err();
    assert!(matches!(err, PasswdError::UnknownUser { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("user \"postgres\" not found in /etc/passwd, /usr/lib/passwd of root /"),
        "{msg}"
    );
    let err = passwd::resolve_owner(&root, &name("core"), &name("docker")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("group \"docker\" not found in /etc/group, /usr/lib/group of root /"),
        "{err}"
    );
    let err = passwd::home_dir(&root, "nobody").unwrap_err();
    assert!(
        err.to_string().contains("user \"nobody\" not found"),
        "{err}"
    );
}

#[test]
fn home_dirs_and_ids() {
    let (_d, root) = coreos_root();
    assert_eq!(passwd::home_dir(&root, "core").unwrap(), "/var/home/core");
    assert_eq!(passwd::user_ids(&root, "core").unwrap(), (1000, 1000));
    assert_eq!(passwd::user_ids(&root, "bin").unwrap(), (1, 1));
    let u = passwd::lookup_user(&root, "core").unwrap();
    assert_eq!(u.gecos, "CoreOS Admin");
    assert_eq!(u.source, "/etc/passwd");
    assert_eq!(
        passwd::lookup_user(&root, "sshd").unwrap().source,
        "/usr/lib/passwd"
    );
}

#[test]
fn missing_and_odd_files() {
    // No files at all: names fail, ids and defaults work.
    let (_d, root) = root_with(&[]);
    assert!(passwd::resolve_owner(&root, &name("root"), &NodeOwner::default()).is_err());
    assert_eq!(
        passwd::resolve_owner(&root, &id(0), &NodeOwner::default()).unwrap(),
        (0, 0)
    );
    // Comments, NIS entries, broken lines, CRLF-free garbage and non-UTF-8 are skipped.
    let (_d, root) = root_with(&[(
        "/etc/passwd",
        "# local users\n+@netgroup\nbroken\nx:x:-5:0::/:/bin/sh\n\
         core:x:1000:1000::/home/core:/bin/bash\n",
    )]);
    assert_eq!(passwd::user_ids(&root, "core").unwrap(), (1000, 1000));
    let db = Db::load(&root).unwrap();
    assert_eq!(db.users().len(), 1);
    // A passwd file reached through a link that leaves the root is refused, not followed.
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("etc")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("etc/passwd")).unwrap();
    let root = Root::open(dir.path()).unwrap();
    let err = passwd::user_ids(&root, "root").unwrap_err();
    assert!(err.to_string().contains("leads outside the root"), "{err}");
}

#[test]
fn names_resolve_in_the_container_not_on_this_machine() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test boots systemd in systemd-nspawn and must run as root"
    );
    let host = SystemdHost::boot().unwrap_or_else(|e| {
        panic!("could not boot a test host (needs root and systemd-nspawn): {e:#}")
    });
    host.exec_ok(&[
        "useradd",
        "--uid",
        "4242",
        "--user-group",
        "--create-home",
        "hearthpw",
    ])
    .unwrap();
    host.exec_ok(&["groupadd", "--gid", "4343", "hearthgrp"])
        .unwrap();
    let root = Root::open(host.root()).unwrap();

    // The container knows them; this machine does not (or not with these ids).
    assert_eq!(
        passwd::resolve_owner(&root, &name("hearthpw"), &name("hearthgrp")).unwrap(),
        (4242, 4343)
    );
    assert!(nix::unistd::User::from_name("hearthpw").unwrap().is_none());
    assert_eq!(
        passwd::home_dir(&root, "hearthpw").unwrap(),
        "/home/hearthpw"
    );
    assert_eq!(passwd::user_ids(&root, "core").unwrap(), (1000, 1000));
    // The same answers as the container's own NSS.
    let getent = host.exec_ok(&["getent", "passwd", "hearthpw"]).unwrap();
    assert_eq!(
        getent.trim(),
        "hearthpw:x:4242:4242::/home/hearthpw:/bin/sh"
    );
    let id = host.exec_ok(&["id", "-u", "core"]).unwrap();
    assert_eq!(id.trim(), "1000");
    let gid = host.exec_ok(&["getent", "group", "hearthgrp"]).unwrap();
    assert!(gid.starts_with("hearthgrp:x:4343:"), "{gid}");
}
