//! A step that fails starts the rollback with the node's reason unchanged
//! (`step n of total (…) failed: cause`), and the log says the failure as structured fields,
//! the object the step acted on included (`agent/src/apply/run.rs`).

use std::process::Command;

#[test]
fn a_failed_step_is_logged_with_its_object() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/passwd"), "root:x:0:0::/root:/bin/sh\n").unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
    // A regular file where the config needs a directory: writing beneath it fails.
    std::fs::write(root.join("etc/rc"), "x").unwrap();
    let config = dir.path().join("c1.yaml");
    std::fs::write(
        &config,
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: c1\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/rc/a.conf\n        contents:\n          source: data:,one\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["apply", "--once-from"])
        .arg(&config)
        .arg("--root")
        .arg(&root)
        .env_remove("INVOCATION_ID")
        .env_remove("JOURNAL_STREAM")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0), "{o:?}");
    let log = String::from_utf8_lossy(&o.stderr);
    let line = log
        .lines()
        .find(|l| l.contains("apply step failed"))
        .unwrap_or_else(|| panic!("no failed step logged: {log}"));
    for want in [
        "step=write file /etc/rc/a.conf",
        "object=/etc/rc/a.conf",
        "cause=/etc/rc/a.conf: resolve: ENOTDIR",
        "n=1",
        "total=1",
    ] {
        assert!(line.contains(want), "{want:?} missing in: {line}");
    }
    // The node's reason is as before.
    assert!(
        log.contains(
            "reason=step 1 of 1 (write file /etc/rc/a.conf (default mode, 3 bytes)) failed: \
             /etc/rc/a.conf: resolve: ENOTDIR"
        ),
        "{log}"
    );
}
