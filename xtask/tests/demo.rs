//! The README's first command, `examples/demo.sh`, works: a real hearth-server with the example
//! fleet, a real agent enrolled as worker-0 applying its config into a scratch root, Done as the
//! server sees it, and the files where the config puts them. Needs root (the agent sets owners).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory of this build's binaries (`target/<profile>`), with the three binaries in it
/// (built first when `cargo test` did not build them: `cargo test -p hearth-xtask` alone).
fn binaries() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let names = ["hearth", "hearth-server", "hearth-agent"];
    if names.iter().any(|n| !dir.join(n).exists()) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-q"]);
        for n in names {
            cmd.args(["--bin", n]);
        }
        assert!(cmd.status().unwrap().success(), "building {names:?}");
    }
    dir
}

#[test]
fn the_readme_demo_reaches_done() {
    assert!(
        nix_is_root(),
        "the demo needs root (the agent sets the owners of the files it writes); run as root"
    );
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

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next().map(|u| u == "0"))
        .unwrap()
}
