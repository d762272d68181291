//! Helpers for the tests that run the real binaries in booted systemd containers
//! (`agent_e2e.rs`, `fleet.rs`).

use hearth_vm_tests::SystemdHost;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A sibling binary of this test's package build (hearth-agent, hearth), built if missing.
pub fn binary(package: &str, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_BIN_EXE_hearth-server"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = dir.join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-q", "-p", package, "--bin", name])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building {name} failed");
    }
    assert!(
        path.exists(),
        "{} not found after the build",
        path.display()
    );
    path
}

/// Copies a file of the test machine into the host.
pub fn install(host: &SystemdHost, from: &Path, to: &str) {
    let dest = host.path(to);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(from, &dest).unwrap();
}

/// Writes a file into the host.
pub fn put(host: &SystemdHost, path: &str, content: &str) {
    let p = host.path(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

/// Polls `f` every 200 ms until it is true; fails the test after `timeout`.
pub use hearth_vm_tests::wait_for;

/// The text of a worker MachineConfig (Ignition 3.2.0) with the given `storage.files` items
/// (YAML, indented by 6).
pub fn mc(name: &str, files: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n{files}"
    )
}

/// The shipped `units/hearth-agent.service`.
pub fn agent_unit() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../units/hearth-agent.service"
    ))
    .unwrap()
}

/// Boots a test host with hearth-server running in it as `hearth-test-server.service`
/// (127.0.0.1:22623, state in `/var/lib/hearth-server`; `service` adds `[Service]` lines), the
/// agent at `/usr/bin/hearth-agent` (not started) and the CLI at `/usr/local/bin/hearth`;
/// returns once the server's first start wrote its CA and tokens.
pub fn boot_with_server(service: &str) -> SystemdHost {
    let host = SystemdHost::boot().expect("boot a test host (root, systemd-nspawn)");
    install(
        &host,
        Path::new(env!("CARGO_BIN_EXE_hearth-server")),
        "/usr/local/bin/hearth-server",
    );
    install(
        &host,
        &binary("hearth-agent", "hearth-agent"),
        "/usr/bin/hearth-agent",
    );
    install(
        &host,
        &binary("hearth-cli", "hearth"),
        "/usr/local/bin/hearth",
    );
    put(
        &host,
        "/etc/systemd/system/hearth-test-server.service",
        &format!(
            "[Unit]\nDescription=hearth-server for the test\n[Service]\n{service}ExecStart=/usr/local/bin/hearth-server --state-dir /var/lib/hearth-server --listen 127.0.0.1:22623\n[Install]\nWantedBy=multi-user.target\n"
        ),
    );
    host.exec_ok(&["systemctl", "daemon-reload"]).unwrap();
    host.exec_ok(&["systemctl", "enable", "--now", "hearth-test-server.service"])
        .unwrap();
    wait_for("the server's first start", Duration::from_secs(30), || {
        host.path("/var/lib/hearth-server/tokens/worker.token")
            .exists()
            && host.path("/var/lib/hearth-server/pki/ca.crt").exists()
    });
    host
}

/// Runs the hearth CLI inside a [`boot_with_server`] host, as the admin.
pub fn hearth(host: &SystemdHost, args: &[&str]) -> hearth_vm_tests::ExecOutput {
    let token = std::fs::read_to_string(host.path("/var/lib/hearth-server/admin.token")).unwrap();
    let mut argv = vec![
        "env".to_string(),
        "HEARTH_SERVER=https://127.0.0.1:22623".to_string(),
        "HEARTH_CA=/var/lib/hearth-server/pki/ca.crt".to_string(),
        format!("HEARTH_TOKEN={}", token.trim()),
        "/usr/local/bin/hearth".to_string(),
    ];
    argv.extend(args.iter().map(|s| s.to_string()));
    host.exec(&argv).unwrap()
}

/// Starts hearth-agent as the service in a [`boot_with_server`] host, as node `name`, with the
/// worker pool's bootstrap token in `/etc/hearth/agent.env` (as a first-boot config writes it).
pub fn start_agent(host: &SystemdHost, name: &str) {
    let token =
        std::fs::read_to_string(host.path("/var/lib/hearth-server/tokens/worker.token")).unwrap();
    put(
        host,
        "/etc/hearth/agent.env",
        &format!(
            "HEARTH_SERVER=https://127.0.0.1:22623\nHEARTH_CA=/var/lib/hearth-server/pki/ca.crt\nHEARTH_BOOTSTRAP_TOKEN={}\nHEARTH_NODE_NAME={name}\n",
            token.trim()
        ),
    );
    put(
        host,
        "/etc/systemd/system/hearth-agent.service",
        &agent_unit(),
    );
    host.exec_ok(&["systemctl", "daemon-reload"]).unwrap();
    host.exec_ok(&["systemctl", "enable", "--now", "hearth-agent.service"])
        .unwrap();
}

/// The first node of `hearth get nodes -o json` in a [`boot_with_server`] host (`null` when the
/// CLI fails).
pub fn first_node(host: &SystemdHost) -> serde_json::Value {
    let out = hearth(host, &["get", "nodes", "-o", "json"]);
    if !out.status.success() {
        return serde_json::Value::Null;
    }
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
    let items = v.get("items").cloned().unwrap_or(v);
    items
        .as_array()
        .and_then(|a| a.first().cloned())
        .unwrap_or_default()
}
