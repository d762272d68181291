//! Shared helpers for the agent's real-host tests: a booted systemd container with the real
//! `hearth-agent` binary installed (the manifests they apply: `hearth-testdata`).
#![allow(dead_code)]

use hearth_vm_tests::{ExecOutput, SystemdHost};

/// Where the agent binary is installed in the test host.
pub const AGENT: &str = "/usr/local/bin/hearth-agent";

/// Boots a host and installs the agent built by this test run.
pub fn host_with_agent() -> SystemdHost {
    let host = SystemdHost::boot().expect("boot a systemd test host (needs root and systemd-nspawn: run vm-tests/scripts/install-deps.sh)");
    let bin = env!("CARGO_BIN_EXE_hearth-agent");
    let dest = host.path(AGENT);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(bin, &dest).expect("install hearth-agent into the host");
    host
}

/// Writes a file into the host (as root, mode 0644).
pub fn put(host: &SystemdHost, path: &str, content: &str) {
    let p = host.path(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, content).unwrap();
}

/// Reads a file of the host.
pub fn get(host: &SystemdHost, path: &str) -> Option<String> {
    std::fs::read_to_string(host.path(path)).ok()
}

/// Runs the agent inside the host.
pub fn agent(host: &SystemdHost, args: &[&str]) -> ExecOutput {
    let mut argv = vec![AGENT];
    argv.extend_from_slice(args);
    host.exec(&argv).expect("run hearth-agent in the host")
}

/// `hearth-agent status -o json` inside the host.
pub fn status(host: &SystemdHost) -> serde_json::Value {
    let out = agent(host, &["status", "-o", "json"]);
    assert!(out.status.success(), "status failed: {out}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("status JSON: {e}\n{out}"))
}

/// `systemctl is-enabled UNIT` inside the host (its stdout, trimmed).
pub fn is_enabled(host: &SystemdHost, unit: &str) -> String {
    host.exec(&["systemctl", "is-enabled", unit])
        .unwrap()
        .stdout
        .trim()
        .to_string()
}

/// A MachineConfig manifest around a `spec` (YAML, indented by 2).
pub fn mc(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n{spec}"
    )
}

/// Installs the agent as the node runs it: `/usr/bin/hearth-agent` and the unit from `units/`,
/// with an optional drop-in (e.g. to change `ExecStart=`).
pub fn install_service(host: &SystemdHost, dropin: Option<&str>) {
    std::fs::copy(
        env!("CARGO_BIN_EXE_hearth-agent"),
        host.path("/usr/bin/hearth-agent"),
    )
    .unwrap();
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../units/hearth-agent.service"
    ))
    .unwrap();
    put(host, "/etc/systemd/system/hearth-agent.service", &unit);
    if let Some(d) = dropin {
        put(
            host,
            "/etc/systemd/system/hearth-agent.service.d/10-test.conf",
            d,
        );
    }
    host.exec_ok(&["systemctl", "daemon-reload"]).unwrap();
}

/// `hearth-agent apply --once-from PATH --no-reboot` inside the host; its exit code.
pub fn apply_no_reboot(host: &SystemdHost, path: &str) -> Option<i32> {
    let out = agent(host, &["apply", "--once-from", path, "--no-reboot"]);
    eprintln!("{out}");
    out.status.code()
}

/// A scratch image root with the user database the configs' owners resolve against.
pub fn image_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/passwd"), "root:x:0:0::/root:/bin/sh\n").unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
    (dir, root)
}
