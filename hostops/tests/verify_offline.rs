//! `hearth_hostops::verify` on plain temporary roots: every kind of mismatch, with its exact
//! message, and the JSON it serialises to. Needs root (files are chowned to core).

use hearth_config::ignition::Config;
use hearth_hostops::fs::Root;
use hearth_hostops::users::{self, SshKeyLayout};
use hearth_hostops::verify::{
    self, sha256_hex, Mismatch, MismatchKind, OfflineUnitStates, UnitStates, VerifyOptions,
};
use serde_json::json;
use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB k";
const HASH: &str = "$6$salt$hash";

fn config() -> Config {
    serde_json::from_value(json!({
        "ignition": {"version": "3.5.0"},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [KEY], "passwordHash": HASH}]},
        "storage": {"files": [
            {"path": "/etc/chrony.conf", "mode": 420, "contents": {"source": "data:,pool%202.example.org%20iburst%0A"}},
            {"path": "/etc/secret.key", "mode": 384, "user": {"name": "core"}, "group": {"name": "core"},
             "contents": {"source": "data:;base64,c2VjcmV0Cg=="}},
            {"path": "/etc/empty", "contents": {}},
            {"path": "/etc/by-id", "mode": 420, "user": {"id": 4321}, "group": {"id": 8765},
             "contents": {"source": "data:,x"}},
            {"path": "/etc/motd", "append": [{"source": "data:,more%0A"}]},
            {"path": "/etc/remote.conf", "contents": {"source": "https://example.invalid/remote.conf"}}
        ]},
        "systemd": {"units": [
            {"name": "a.service", "enabled": true,
             "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
             "dropins": [{"name": "10-env.conf", "contents": "[Service]\nEnvironment=A=1\n"},
                         {"name": "20-gone.conf"}]},
            {"name": "b.service", "mask": true},
            {"name": "c.service", "enabled": false},
            {"name": "d.service", "dropins": [{"name": "10-x.conf", "contents": "[Unit]\nDescription=x\n"}]}
        ]}
    }))
    .unwrap()
}

/// A root in which `config()` has been applied (as the agent would).
fn applied_root() -> (tempfile::TempDir, Root) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests chown files and must run as root"
    );
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    root.write_atomic(
        "/etc/passwd",
        b"root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000::/home/core:/bin/bash\n",
        0o644,
        None,
    )
    .unwrap();
    root.write_atomic("/etc/group", b"root:x:0:\ncore:x:1000:\n", 0o644, None)
        .unwrap();
    root.write_atomic(
        "/etc/shadow",
        format!("root:*:1::::::\ncore:{HASH}:2::::::\n").as_bytes(),
        0,
        None,
    )
    .unwrap();
    fs::create_dir_all(dir.path().join("home/core")).unwrap();
    std::os::unix::fs::chown(dir.path().join("home/core"), Some(1000), Some(1000)).unwrap();
    users::write_ssh_keys(&root, "core", &[KEY.to_string()], SshKeyLayout::Fragment).unwrap();

    root.write_atomic(
        "/etc/chrony.conf",
        b"pool 2.example.org iburst\n",
        0o644,
        None,
    )
    .unwrap();
    root.write_atomic("/etc/secret.key", b"secret\n", 0o600, Some((1000, 1000)))
        .unwrap();
    root.write_atomic("/etc/empty", b"", 0o644, None).unwrap();
    root.write_atomic("/etc/by-id", b"x", 0o644, Some((4321, 8765)))
        .unwrap();
    let a = config().systemd.units[0].clone();
    root.write_atomic(
        "/etc/systemd/system/a.service",
        a.contents.unwrap().as_bytes(),
        0o644,
        None,
    )
    .unwrap();
    root.write_atomic(
        "/etc/systemd/system/a.service.d/10-env.conf",
        b"[Service]\nEnvironment=A=1\n",
        0o644,
        None,
    )
    .unwrap();
    root.symlink_atomic(
        "/etc/systemd/system/multi-user.target.wants/a.service",
        "/etc/systemd/system/a.service",
    )
    .unwrap();
    root.symlink_atomic("/etc/systemd/system/b.service", "/dev/null")
        .unwrap();
    root.write_atomic(
        "/etc/systemd/system/d.service.d/10-x.conf",
        b"[Unit]\nDescription=x\n",
        0o644,
        None,
    )
    .unwrap();
    root.write_atomic(
        "/usr/lib/systemd/system/c.service",
        b"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
        0o644,
        None,
    )
    .unwrap();
    (dir, root)
}

fn messages(m: &[Mismatch]) -> Vec<String> {
    m.iter().map(|m| m.message.clone()).collect()
}

#[test]
fn an_applied_root_matches() {
    let (_d, root) = applied_root();
    let states = OfflineUnitStates::new(&root);
    let report = verify::verify_with(&root, &states, &config(), &VerifyOptions::default());
    assert_eq!(messages(&report.mismatches), Vec::<String>::new());
    assert!(report.matches());
    assert_eq!(
        messages(&report.notes),
        [
            "file \"/etc/motd\" not verified: it has append entries, so its content depends on \
             what was there before",
            "file \"/etc/remote.conf\" not verified: its source is a https: URL, not data:",
        ]
    );
    assert!(verify::verify(&root, &states, &config()).is_empty());
}

#[test]
fn file_mismatches_are_precise() {
    let (d, root) = applied_root();
    root.write_atomic("/etc/chrony.conf", b"pool evil.example\n", 0o644, None)
        .unwrap();
    fs::set_permissions(
        d.path().join("etc/secret.key"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::os::unix::fs::chown(d.path().join("etc/by-id"), Some(0), Some(0)).unwrap();
    root.remove("/etc/empty").unwrap();
    let states = OfflineUnitStates::new(&root);
    let got = verify::verify(&root, &states, &config());
    let (want, found) = (
        sha256_hex(b"pool 2.example.org iburst\n"),
        sha256_hex(b"pool evil.example\n"),
    );
    assert_eq!(
        messages(&got),
        [
            format!(
                "content mismatch for file \"/etc/chrony.conf\": expected sha256 {want}, found {found}"
            ),
            "mode mismatch for file \"/etc/secret.key\": expected 0600, found 0644".to_string(),
            "file \"/etc/empty\" is missing".to_string(),
            "owner mismatch for file \"/etc/by-id\": expected 4321:8765, found 0:0".to_string(),
        ]
    );
    assert_eq!(got[0].kind, MismatchKind::FileContent);
    assert_eq!(got[0].expected.as_deref(), Some(want.as_str()));
    assert_eq!(got[0].found.as_deref(), Some(found.as_str()));
    assert_eq!(got[1].kind, MismatchKind::FileMode);
    assert_eq!(got[2].kind, MismatchKind::FileMissing);
    assert_eq!(got[3].kind, MismatchKind::FileOwner);

    // The JSON for status reports.
    assert_eq!(
        serde_json::to_value(&got[1]).unwrap(),
        json!({
            "kind": "file-mode",
            "subject": "/etc/secret.key",
            "expected": "0600",
            "found": "0644",
            "message": "mode mismatch for file \"/etc/secret.key\": expected 0600, found 0644"
        })
    );
    let back: Vec<Mismatch> = serde_json::from_str(&serde_json::to_string(&got).unwrap()).unwrap();
    assert_eq!(back, got);
}

#[test]
fn wrong_kinds_and_unresolvable_owners() {
    let (d, root) = applied_root();
    root.remove("/etc/chrony.conf").unwrap();
    fs::create_dir(d.path().join("etc/chrony.conf")).unwrap();
    root.remove("/etc/empty").unwrap();
    root.symlink_atomic("/etc/empty", "/dev/null").unwrap();
    // core vanishes from the target's passwd: its name no longer resolves.
    root.write_atomic("/etc/passwd", b"root:x:0:0::/root:/bin/sh\n", 0o644, None)
        .unwrap();
    let got = verify::verify(&root, &OfflineUnitStates::new(&root), &config());
    let root_path = root.path().display().to_string();
    assert_eq!(
        messages(&got),
        [
            "file \"/etc/chrony.conf\" is not a regular file: found a directory".to_string(),
            format!(
                "cannot check the owner of file \"/etc/secret.key\": user \"core\" not found in \
                 /etc/passwd, /usr/lib/passwd of root {root_path}"
            ),
            "file \"/etc/empty\" is not a regular file: found a symbolic link to /dev/null"
                .to_string(),
            "user \"core\" does not exist on the host".to_string(),
        ]
    );
    assert_eq!(got[0].kind, MismatchKind::FileNotRegular);
    assert_eq!(got[1].kind, MismatchKind::FileOwner);
    assert_eq!(got[3].kind, MismatchKind::UserMissing);
}

#[test]
fn unit_mismatches_are_precise() {
    let (_d, root) = applied_root();
    root.write_atomic(
        "/etc/systemd/system/a.service",
        b"[Service]\nExecStart=/bin/false\n",
        0o644,
        None,
    )
    .unwrap();
    root.remove("/etc/systemd/system/a.service.d/10-env.conf")
        .unwrap();
    root.write_atomic(
        "/etc/systemd/system/a.service.d/20-gone.conf",
        b"[Service]\n",
        0o644,
        None,
    )
    .unwrap();
    root.remove("/etc/systemd/system/b.service").unwrap();
    root.write_atomic(
        "/etc/systemd/system/d.service.d/10-x.conf",
        b"[Unit]\nDescription=y\n",
        0o644,
        None,
    )
    .unwrap();
    // systemd's answers: a disabled, b enabled, c enabled.
    let states: HashMap<String, String> = [
        ("a.service", "disabled"),
        ("b.service", "enabled"),
        ("c.service", "enabled"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let got = verify::verify(&root, &states, &config());
    let unit_a = config().systemd.units[0].contents.clone().unwrap();
    assert_eq!(
        messages(&got),
        [
            format!(
                "unit file \"/etc/systemd/system/a.service\" content mismatch: expected sha256 {}, \
                 found {}",
                sha256_hex(unit_a.as_bytes()),
                sha256_hex(b"[Service]\nExecStart=/bin/false\n")
            ),
            "unit \"a.service\" should be enabled, is disabled".to_string(),
            "drop-in \"/etc/systemd/system/a.service.d/10-env.conf\" is missing".to_string(),
            "drop-in \"/etc/systemd/system/a.service.d/20-gone.conf\" should be absent (it has \
             no contents in the config), is present"
                .to_string(),
            "unit \"b.service\" should be masked, is enabled (/etc/systemd/system/b.service does \
             not exist)"
                .to_string(),
            "unit \"c.service\" should be disabled, is enabled".to_string(),
            format!(
                "drop-in \"/etc/systemd/system/d.service.d/10-x.conf\" content mismatch: expected \
                 sha256 {}, found {}",
                sha256_hex(b"[Unit]\nDescription=x\n"),
                sha256_hex(b"[Unit]\nDescription=y\n")
            ),
        ]
    );
    let kinds: Vec<MismatchKind> = got.iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        [
            MismatchKind::UnitFileContent,
            MismatchKind::UnitEnablement,
            MismatchKind::DropinMissing,
            MismatchKind::DropinPresent,
            MismatchKind::UnitMask,
            MismatchKind::UnitEnablement,
            MismatchKind::DropinContent,
        ]
    );

    // Unit file missing; a unit that should not be masked but is.
    root.remove("/etc/systemd/system/a.service").unwrap();
    let got = verify::verify(&root, &|_: &str| Some("enabled".to_string()), &config());
    assert_eq!(
        got[0].message,
        "unit file \"/etc/systemd/system/a.service\" is missing"
    );
    root.symlink_atomic("/etc/systemd/system/a.service", "/dev/null")
        .unwrap();
    let got = verify::verify(&root, &|_: &str| Some("masked".to_string()), &config());
    assert_eq!(
        got[0].message,
        "unit \"a.service\" should not be masked, is masked (/etc/systemd/system/a.service is a \
         link to /dev/null)"
    );
}

#[test]
fn user_mismatches() {
    let (_d, root) = applied_root();
    let states = OfflineUnitStates::new(&root);
    users::write_ssh_keys(
        &root,
        "core",
        &["ssh-rsa AAAA other".to_string(), "ssh-rsa BBBB x".into()],
        SshKeyLayout::Fragment,
    )
    .unwrap();
    users::set_password_hash(&root, "core", Some("$6$other$x")).unwrap();
    let got = verify::verify(&root, &states, &config());
    assert_eq!(
        messages(&got),
        [
            "SSH keys of user core differ: expected 1 key, found 2 keys in \
             \"/home/core/.ssh/authorized_keys.d/ignition\"",
            "password hash of user core differs from the config",
        ]
    );
    assert!(!got[1].message.contains("$6$"), "hashes are never printed");
    assert_eq!(got[0].kind, MismatchKind::SshKeys);
    assert_eq!(got[1].kind, MismatchKind::PasswordHash);

    users::write_ssh_keys(&root, "core", &[], SshKeyLayout::Fragment).unwrap();
    let got = verify::verify(&root, &states, &config());
    assert_eq!(
        got[0].message,
        "SSH keys of user core differ: expected 1 key, \
         \"/home/core/.ssh/authorized_keys.d/ignition\" does not exist"
    );
    // In the other layout, the keys are expected in ~/.ssh/authorized_keys.
    users::write_ssh_keys(&root, "core", &[KEY.to_string()], SshKeyLayout::Single).unwrap();
    let report = verify::verify_with(
        &root,
        &states,
        &config(),
        &VerifyOptions {
            ssh_layout: SshKeyLayout::Single,
        },
    );
    assert_eq!(report.mismatches[0].kind, MismatchKind::PasswordHash);
    assert_eq!(report.mismatches.len(), 1);
}

#[test]
fn offline_unit_states() {
    let (_d, root) = applied_root();
    let s = OfflineUnitStates::new(&root);
    assert_eq!(s.unit_file_state("a.service").as_deref(), Some("enabled"));
    assert_eq!(s.unit_file_state("b.service").as_deref(), Some("masked"));
    assert_eq!(s.unit_file_state("c.service").as_deref(), Some("disabled"));
    assert_eq!(s.unit_file_state("nope.service"), None);
    root.write_atomic(
        "/usr/lib/systemd/system/static.service",
        b"[Service]\nExecStart=/bin/true\n",
        0o644,
        None,
    )
    .unwrap();
    assert_eq!(
        s.unit_file_state("static.service").as_deref(),
        Some("static")
    );
    assert_eq!(
        verify::units_to_query(&config()),
        ["a.service", "b.service", "c.service"]
    );
}
