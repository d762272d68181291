//! The no-op re-check from the compact index (`agent/src/recheck.rs`) answers exactly as the
//! full verification: `Done` only when the host is in the config; a hand edit of content, mode
//! or owner, a deleted file, another config or `--force` all take the full path and get its
//! answer (drift reported, exit 4, or reverted per policy).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::image_root;

const INDEX: &str = "var/lib/hearth/recheck.json";

fn mc(dir: &Path, name: &str, body: &str, extra: &str) -> PathBuf {
    let y = format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/rc/a.conf\n        mode: 0640\n        contents:\n          source: data:,{body}\n      - path: /etc/rc/b.conf\n        contents:\n          source: data:,b\n{extra}"
    );
    let p = dir.join(format!("{name}.yaml"));
    std::fs::write(&p, y).unwrap();
    p
}

fn apply(config: &Path, root: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["apply", "--once-from"])
        .arg(config)
        .arg("--root")
        .arg(root)
        .args(extra)
        .env_remove("INVOCATION_ID")
        .env_remove("JOURNAL_STREAM")
        .output()
        .unwrap()
}

/// `apply` with `RUST_LOG=debug`: whether the quick re-check ran, and with how many files
/// differing, is in its log (stderr).
fn apply_logged(config: &Path, root: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["apply", "--once-from"])
        .arg(config)
        .arg("--root")
        .arg(root)
        .env_remove("INVOCATION_ID")
        .env_remove("JOURNAL_STREAM")
        .env("RUST_LOG", "debug")
        .output()
        .unwrap()
}

/// Whether the run's log says the quick re-check answered with no file differing.
fn took_quick_path(o: &Output) -> bool {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .any(|l| l.contains("quick re-check") && l.contains("differ=0"))
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap()
}

#[test]
fn the_quick_re_check_answers_as_the_full_one() {
    let (dir, root) = image_root();
    let c1 = mc(dir.path(), "c1", "one", "");
    let a = root.join("etc/rc/a.conf");

    let o = apply(&c1, &root, &[]);
    assert_eq!(code(&o), 0, "{o:?}");
    assert!(root.join(INDEX).exists(), "the index is kept after Done");

    // The no-op: Done, nothing written, answered by the quick path.
    let o = apply_logged(&c1, &root);
    assert_eq!(code(&o), 0, "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("Done"));
    assert!(took_quick_path(&o), "{o:?}");

    // Content changed by hand: reported as drift (exit 4), as the full check does.
    std::fs::write(&a, "edited").unwrap();
    let o = apply(&c1, &root, &[]);
    assert_eq!(code(&o), 4, "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("/etc/rc/a.conf"));
    // ... and still reported on the next run (the index does not hide it).
    assert_eq!(code(&apply(&c1, &root, &[])), 4);
    // Put back under `revert`, then quick again.
    let o = apply(&c1, &root, &["--drift-policy", "revert"]);
    assert_eq!(code(&o), 0, "{o:?}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one");
    assert_eq!(code(&apply(&c1, &root, &[])), 0);

    // Two hand edits, one under `revert`, one under `report`: the full path's answer (one put
    // back, the other reported, exit 4).
    std::fs::write(&a, "edited").unwrap();
    std::fs::write(root.join("etc/rc/b.conf"), "edited").unwrap();
    let o = apply(&c1, &root, &["--drift", "/etc/rc/a.conf=revert"]);
    assert_eq!(code(&o), 4, "{o:?}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/rc/b.conf")).unwrap(),
        "edited"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("/etc/rc/b.conf"));
    let o = apply(&c1, &root, &["--drift-policy", "revert"]);
    assert_eq!(code(&o), 0, "{o:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/rc/b.conf")).unwrap(),
        "b"
    );

    // Mode changed by hand, same content: drift.
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(code(&apply(&c1, &root, &[])), 4);
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(code(&apply(&c1, &root, &[])), 0);
    // On a plain `Done` journal, a hand edit under `revert` is put back on the quick path
    // (mode and content), and the answer is the full path's: Done.
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&a, "edited").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["apply", "--drift-policy", "revert", "--once-from"])
        .arg(&c1)
        .arg("--root")
        .arg(&root)
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{o:?}");
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(
        log.contains("quick re-check") && log.contains("differ=1"),
        "{log}"
    );
    assert!(log.contains("/etc/rc/a.conf: reverted"), "{log}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one");
    let st = std::fs::metadata(&a).unwrap();
    assert_eq!(st.permissions().mode() & 0o7777, 0o640);
    assert_eq!(code(&apply(&c1, &root, &[])), 0);

    // Owner changed by hand: drift.
    std::os::unix::fs::chown(&a, Some(1), Some(1)).unwrap();
    assert_eq!(code(&apply(&c1, &root, &[])), 4);
    std::os::unix::fs::chown(&a, Some(0), Some(0)).unwrap();
    assert_eq!(code(&apply(&c1, &root, &[])), 0);

    // Deleted: drift.
    std::fs::remove_file(root.join("etc/rc/b.conf")).unwrap();
    assert_eq!(code(&apply(&c1, &root, &[])), 4);
    assert_eq!(code(&apply(&c1, &root, &["--force"])), 0);
    assert_eq!(
        std::fs::read_to_string(root.join("etc/rc/b.conf")).unwrap(),
        "b"
    );

    // A damaged index is ignored (full path), and replaced.
    std::fs::write(root.join(INDEX), "{not json").unwrap();
    assert_eq!(code(&apply(&c1, &root, &[])), 0);
    assert!(std::fs::read_to_string(root.join(INDEX))
        .unwrap()
        .starts_with('{'));
    assert_ne!(
        std::fs::read_to_string(root.join(INDEX)).unwrap(),
        "{not json"
    );

    // Another config: applied (the index of c1 does not answer for it).
    let c2 = mc(dir.path(), "c2", "two", "");
    assert_eq!(code(&apply(&c2, &root, &[])), 0);
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "two");

    // A config with a unit's enablement is not indexed: its state is systemd's.
    let c3 = mc(
        dir.path(),
        "c3",
        "three",
        "    systemd:\n      units:\n      - name: rc.service\n        enabled: true\n        contents: \"[Service]\\nExecStart=/bin/true\\n[Install]\\nWantedBy=multi-user.target\\n\"\n",
    );
    let o = apply(&c3, &root, &[]);
    assert_eq!(code(&o), 0, "{o:?}");
    assert!(
        !root.join(INDEX).exists(),
        "no index for a config with units' enablement"
    );
    assert_eq!(code(&apply(&c3, &root, &[])), 0);
}

#[test]
fn after_a_users_edit_the_index_is_rewritten_and_the_quick_path_returns() {
    let (dir, root) = image_root();
    let c1 = mc(dir.path(), "c1", "one", "");
    assert_eq!(code(&apply(&c1, &root, &[])), 0);
    let o = apply_logged(&c1, &root);
    assert_eq!(code(&o), 0, "{o:?}");
    assert!(took_quick_path(&o), "{o:?}");

    // A user added by hand: the index (keyed by the users digest) no longer answers, so this
    // run takes the full path ...
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n",
    )
    .unwrap();
    let o = apply_logged(&c1, &root);
    assert_eq!(code(&o), 0, "{o:?}");
    assert!(!took_quick_path(&o), "{o:?}");
    // ... and rewrites the index, so the next no-op is quick again.
    let o = apply_logged(&c1, &root);
    assert_eq!(code(&o), 0, "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("Done"));
    assert!(took_quick_path(&o), "{o:?}");

    // The same for /etc/group.
    std::fs::write(root.join("etc/group"), "root:x:0:\nalice:x:1000:\n").unwrap();
    let o = apply_logged(&c1, &root);
    assert_eq!(code(&o), 0, "{o:?}");
    assert!(!took_quick_path(&o), "{o:?}");
    let o = apply_logged(&c1, &root);
    assert_eq!(code(&o), 0, "{o:?}");
    assert!(took_quick_path(&o), "{o:?}");
}

/// A local config file whose identity (device, inode, size, times) the index keeps is not read
/// again for a no-op; any write to it (here one of the same size) moves its change time, and the
/// next run reads it and applies what it now says. A file written less than two seconds before
/// it was read is not kept by identity (a second write within one tick of the file system's
/// clock would not move it).
#[test]
fn a_config_file_that_did_not_change_is_not_read_again() {
    let (dir, root) = image_root();
    let config = mc(dir.path(), "ident", "one", "");
    let by_identity = |o: &Output| {
        String::from_utf8_lossy(&o.stderr).contains("the config file is the one indexed")
    };
    // Fresh: indexed by content only (its identity is judged when it is opened, however long
    // the apply then takes).
    assert_eq!(code(&apply(&config, &root, &[])), 0);
    let index = std::fs::read_to_string(root.join(INDEX)).unwrap();
    assert!(!index.contains("source_file"), "{index}");
    let o = apply_logged(&config, &root);
    assert!(
        took_quick_path(&o) && !by_identity(&o),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Once it is two seconds old, a no-op records its identity, and the next is not read.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(code(&apply(&config, &root, &[])), 0);
    let index = std::fs::read_to_string(root.join(INDEX)).unwrap();
    assert!(index.contains("source_file"), "{index}");
    let o = apply_logged(&config, &root);
    assert_eq!(code(&o), 0);
    assert!(by_identity(&o), "{}", String::from_utf8_lossy(&o.stderr));
    // The same size, another content: read, and applied.
    let again = mc(dir.path(), "ident", "two", "");
    assert_eq!(again, config);
    let o = apply_logged(&config, &root);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!by_identity(&o), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(root.join("etc/rc/a.conf")).unwrap(),
        "two"
    );
}
