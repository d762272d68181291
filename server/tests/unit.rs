//! `units/hearth-server.service` as shipped, in a booted systemd container: `Type=notify`
//! startup, the dynamic user and its private state directory, the hardening (the server must
//! still run under it), a restart that reuses the state, and a clean stop.

use hearth_vm_tests::{wait_for, SystemdHost};
use std::time::Duration;

#[test]
fn the_shipped_unit_runs_the_server_hardened() {
    let host = SystemdHost::boot().expect("boot a test host (root, systemd-nspawn)");
    let bin = host.path("/usr/bin/hearth-server");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_hearth-server"), &bin).unwrap();
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../units/hearth-server.service"
    ))
    .unwrap();
    std::fs::write(host.path("/etc/systemd/system/hearth-server.service"), unit).unwrap();
    host.exec_ok(&["systemctl", "daemon-reload"]).unwrap();
    // Type=notify: `start` returns once the server said READY=1.
    host.exec_ok(&["systemctl", "start", "hearth-server.service"])
        .unwrap_or_else(|e| {
            let log = host
                .exec(&[
                    "journalctl",
                    "-u",
                    "hearth-server",
                    "--no-pager",
                    "-n",
                    "50",
                ])
                .map(|o| o.stdout)
                .unwrap_or_default();
            panic!("{e}\n{log}")
        });
    let show = host
        .exec_ok(&[
            "systemctl",
            "show",
            "hearth-server.service",
            "-p",
            "ActiveState",
            "-p",
            "Type",
            "-p",
            "StatusText",
        ])
        .unwrap();
    assert!(show.contains("ActiveState=active"), "{show}");
    assert!(show.contains("Type=notify"), "{show}");
    assert!(show.contains("StatusText=serving on"), "{show}");
    // A dynamic, unprivileged user owns the private state directory.
    let pid = host
        .exec_ok(&[
            "systemctl",
            "show",
            "-p",
            "MainPID",
            "--value",
            "hearth-server",
        ])
        .unwrap();
    let status = host
        .exec_ok(&["cat", &format!("/proc/{}/status", pid.trim())])
        .unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        !uid_line.split_whitespace().nth(1).unwrap().eq("0"),
        "{uid_line}"
    );
    let cap_line = status.lines().find(|l| l.starts_with("CapEff:")).unwrap();
    assert!(cap_line.ends_with("0000000000000000"), "{cap_line}");
    let files = host
        .exec_ok(&[
            "stat",
            "-c",
            "%a %n",
            "/var/lib/private/hearth-server",
            "/var/lib/hearth-server/admin.token",
            "/var/lib/hearth-server/pki/ca.key",
            "/var/lib/hearth-server/tokens/worker.token",
        ])
        .unwrap();
    let modes: Vec<&str> = files
        .lines()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(modes, ["700", "600", "600", "600"], "{files}");
    let journal = || {
        host.exec(&[
            "journalctl",
            "-u",
            "hearth-server",
            "-o",
            "cat",
            "--no-pager",
        ])
        .map(|o| o.stdout)
        .unwrap_or_default()
    };
    wait_for(
        "the first-start instructions",
        Duration::from_secs(10),
        || journal().contains("hearth login --server"),
    );
    assert!(journal().contains("First start: created a CA"));
    let listening = host
        .exec_ok(&["ss", "-Hltn", "sport = :22623"])
        .unwrap_or_default();
    assert!(listening.contains("22623"), "{listening}");

    // A restart reuses everything; a stop is clean.
    let ca = std::fs::read(host.path("/var/lib/private/hearth-server/pki/ca.crt")).unwrap();
    host.exec_ok(&["systemctl", "restart", "hearth-server.service"])
        .unwrap();
    assert_eq!(
        std::fs::read(host.path("/var/lib/private/hearth-server/pki/ca.crt")).unwrap(),
        ca
    );
    assert_eq!(journal().matches("First start").count(), 1, "{}", journal());
    host.exec_ok(&["systemctl", "stop", "hearth-server.service"])
        .unwrap();
    let result = host
        .exec_ok(&[
            "systemctl",
            "show",
            "-p",
            "Result",
            "--value",
            "hearth-server",
        ])
        .unwrap();
    assert_eq!(result.trim(), "success");
}
