//! The README's first command, `examples/demo.sh`, works: a real hearth-server with the example
//! fleet, a real agent enrolled as worker-0 applying its config into a scratch root, Done as the
//! server sees it, and the files where the config puts them. Needs root (the agent sets owners).

use std::process::Command;

/// The directory of this build's binaries, with the three binaries in it (built first when
/// `cargo test` did not build them: `cargo test -p hearth-xtask` alone).
fn binaries() -> std::path::PathBuf {
    let mut dir = None;
    for (package, name) in [
        ("hearth-cli", "hearth"),
        ("hearth-server", "hearth-server"),
        ("hearth-agent", "hearth-agent"),
    ] {
        let path = hearth_vm_tests::qemu::workspace_binary(package, name).unwrap();
        dir = path.parent().map(std::path::Path::to_path_buf);
    }
    dir.unwrap()
}

#[test]
fn the_readme_demo_reaches_done() {
    let root = hearth_xtask::workspace_root();
    let out = Command::new(root.join("examples/demo.sh"))
        .env("HEARTH_BIN_DIR", binaries())
        .current_dir(&root)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed:\n{stdout}\n{stderr}");
    // The node is Done in the server's eyes, with the pool's rendered config as current.
    let node = stdout
        .lines()
        .find(|l| l.starts_with("worker-0 "))
        .unwrap_or_else(|| panic!("no worker-0 row:\n{stdout}"));
    assert!(node.contains(" Done "), "{node}");
    assert!(node.contains("rendered-worker-"), "{node}");
    // The agent wrote the worker pool's files, unit, enablement link and SSH key.
    for path in [
        "./etc/chrony.conf",
        "./etc/systemd/system/node-exporter.service",
        "./etc/systemd/system/multi-user.target.wants/node-exporter.service",
        "./var/home/core/.ssh/authorized_keys",
    ] {
        assert!(
            stdout.lines().any(|l| l == path),
            "{path} missing:\n{stdout}"
        );
    }
    // Not a terminal: no colour codes in what the script prints.
    assert!(
        !stdout.contains('\u{1b}'),
        "escape codes in a pipe:\n{stdout}"
    );
}
