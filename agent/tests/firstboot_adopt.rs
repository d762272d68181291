//! Adopting what Ignition wrote (the first-boot stamp `/etc/hearth/firstboot-config`): the real
//! `hearth-agent` on an offline root (`apply --once-from`). With the stamp naming the desired
//! config and the host matching it, nothing is rewritten (same inode); with a difference, or a
//! stamp naming another config, the config is applied in full as before. The booted case
//! (real Ignition, a systemd container, no reboot) is `server/tests/firstboot_ignition.rs`.

use crate::common;

use common::mc;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const FILE: &str = "etc/app.conf";

/// A root as Ignition left it: the config's file (given content), the stamp naming `stamp`.
fn provisioned(content: &str, stamp: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc/hearth")).unwrap();
    let f = root.path().join(FILE);
    std::fs::write(&f, content).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(
        root.path().join("etc/hearth/firstboot-config"),
        format!("{stamp}\n"),
    )
    .unwrap();
    root
}

/// Applies the config `rendered-worker-1` (one file, `/etc/app.conf` = "served\n"); returns
/// the agent's log and whether the file's inode changed.
fn apply(root: &Path) -> (String, bool) {
    let cfg = root.join("config.yaml");
    std::fs::write(
        &cfg,
        mc(
            "rendered-worker-1",
            "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/app.conf\n        mode: 420\n        contents:\n          source: data:,served%0A\n",
        ),
    )
    .unwrap();
    let before = std::fs::metadata(root.join(FILE)).unwrap().ino();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["apply", "--once-from"])
        .arg(&cfg)
        .arg("--root")
        .arg(root)
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{log}");
    assert_eq!(
        std::fs::read_to_string(root.join(FILE)).unwrap(),
        "served\n",
        "{log}"
    );
    let after = std::fs::metadata(root.join(FILE)).unwrap().ino();
    (log, before != after)
}

#[test]
fn what_ignition_wrote_is_adopted_without_a_rewrite() {
    let root = provisioned("served\n", "rendered-worker-1");
    let (log, rewritten) = apply(root.path());
    assert!(!rewritten, "{log}");
    assert!(
        log.contains("adopted the config Ignition wrote at first boot"),
        "{log}"
    );
}

#[test]
fn a_host_that_differs_from_the_stamped_config_gets_it_in_full() {
    let root = provisioned("edited by hand\n", "rendered-worker-1");
    let (log, rewritten) = apply(root.path());
    assert!(rewritten, "{log}");
    assert!(
        log.contains("differs from the config written at first boot"),
        "{log}"
    );
}

#[test]
fn a_stamp_of_another_config_is_not_adopted() {
    let root = provisioned("served\n", "rendered-worker-0");
    let (log, _) = apply(root.path());
    // Planned and applied in full (an identical file is then left as it is).
    assert!(log.contains("is not the desired one any more"), "{log}");
    assert!(log.contains("actions=1"), "{log}");
    assert!(!log.contains("adopted the config"), "{log}");
}
