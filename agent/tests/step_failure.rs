//! A step that fails starts the rollback with the node's reason unchanged
//! (`step n of total (…) failed: cause`), and the log says the failure as structured fields,
//! the object the step acted on included (`agent/src/apply/run.rs`).

use std::process::Command;

use crate::common::image_root;

#[test]
fn a_failed_step_is_logged_with_its_object() {
    let (dir, root) = image_root();
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

/// A write that fails writes nothing, and its undo may fail the same way with nothing to undo:
/// here the new file's directory is a regular file, so neither the write nor the deletion that
/// undoes it can even look the path up. The reason then says every change was undone, not "undo
/// was incomplete" (issue 35): an undo step's failure counts only where something is left to
/// undo.
#[test]
fn a_write_that_failed_and_wrote_nothing_is_not_an_incomplete_undo() {
    let (dir, root) = image_root();
    std::fs::write(root.join("etc/rc"), "x").unwrap();
    let config = |name: &str, files: &str| {
        let p = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &p,
            format!("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n{files}"),
        )
        .unwrap();
        p
    };
    let apply = |c: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
            .args(["apply", "--once-from"])
            .arg(c)
            .arg("--root")
            .arg(&root)
            .env_remove("INVOCATION_ID")
            .env_remove("JOURNAL_STREAM")
            .env("RUST_LOG", "warn")
            .output()
            .unwrap()
    };
    let z = "      - path: /etc/other/z.conf\n        contents:\n          source: data:,z\n";
    let o = apply(&config("d1", z));
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let a = "      - path: /etc/rc/a.conf\n        contents:\n          source: data:,one\n";
    let o = apply(&config("d2", &format!("{z}{a}")));
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_ne!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("write file /etc/rc/a.conf") && out.contains("every change was undone"),
        "{out}"
    );
    assert!(!out.contains("undo was incomplete"), "{out}");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/other/z.conf")).unwrap(),
        "z"
    );
}
