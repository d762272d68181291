//! `hearth_hostops::verify` against a real Debian systemd in systemd-nspawn: unit-file states
//! come from systemd over D-Bus, changes are made inside the container with its own tools, and
//! the offline reading of links agrees with systemd. Needs root and systemd-nspawn
//! (`vm-tests/scripts/install-deps.sh`); fails, never skips, without them.

use hearth_config::ignition::Config;
use hearth_hostops::fs::Root;
use hearth_hostops::users::{self, SshKeyLayout};
use hearth_hostops::verify::{self, sha256_hex, OfflineUnitStates, UnitStates};
use hearth_vm_tests::SystemdHost;
use serde_json::json;

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC c";
const UNIT_A: &str = "[Unit]\nDescription=hearth a\n[Service]\nType=oneshot\nRemainAfterExit=yes\n\
                      ExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";
const UNIT_C: &str = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";

fn boot() -> SystemdHost {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test boots systemd in systemd-nspawn and must run as root"
    );
    SystemdHost::boot().unwrap_or_else(|e| {
        panic!("could not boot a test host (needs root and systemd-nspawn): {e:#}")
    })
}

fn config() -> Config {
    serde_json::from_value(json!({
        "ignition": {"version": "3.5.0"},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [KEY]}]},
        "storage": {"files": [
            {"path": "/etc/hearth/owned.conf", "mode": 416,
             "user": {"name": "core"}, "group": {"name": "systemd-journal"},
             "contents": {"source": "data:,owned%20by%20core%0A"}}
        ]},
        "systemd": {"units": [
            {"name": "hearth-a.service", "enabled": true, "contents": UNIT_A,
             "dropins": [{"name": "10-env.conf", "contents": "[Service]\nEnvironment=A=1\n"}]},
            {"name": "hearth-b.service", "mask": true},
            {"name": "hearth-c.service", "enabled": false, "contents": UNIT_C}
        ]}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_real_host_matches_then_drifts_and_says_how() {
    let host = boot();
    let root = Root::open(host.root()).unwrap();
    let cfg = config();

    // Apply as the agent does: files through the root, unit state through systemd.
    root.write_atomic(
        "/etc/hearth/owned.conf",
        b"owned by core\n",
        0o640,
        Some((1000, 999)),
    )
    .unwrap();
    root.write_atomic(
        "/etc/systemd/system/hearth-a.service",
        UNIT_A.as_bytes(),
        0o644,
        None,
    )
    .unwrap();
    root.write_atomic(
        "/etc/systemd/system/hearth-a.service.d/10-env.conf",
        b"[Service]\nEnvironment=A=1\n",
        0o644,
        None,
    )
    .unwrap();
    root.write_atomic(
        "/etc/systemd/system/hearth-c.service",
        UNIT_C.as_bytes(),
        0o644,
        None,
    )
    .unwrap();
    users::write_ssh_keys(&root, "core", &[KEY.to_string()], SshKeyLayout::Fragment).unwrap();
    host.exec_ok(&["systemctl", "daemon-reload"]).unwrap();
    host.exec_ok(&["systemctl", "enable", "hearth-a.service"])
        .unwrap();
    host.exec_ok(&["systemctl", "mask", "hearth-b.service"])
        .unwrap();

    let conn = hearth_vm_tests::bus::connect(&host.bus_address())
        .await
        .unwrap();
    let mut names = verify::units_to_query(&cfg);
    names.push("hearth-nonexistent.service".into());
    let states = verify::unit_file_states(&conn, &names).await.unwrap();
    assert_eq!(states["hearth-a.service"], "enabled");
    assert_eq!(states["hearth-b.service"], "masked");
    assert_eq!(states["hearth-c.service"], "disabled");
    assert!(
        !states.contains_key("hearth-nonexistent.service"),
        "{states:?}"
    );
    // The offline reading of the links agrees with systemd.
    let offline = OfflineUnitStates::new(&root);
    for name in &names {
        assert_eq!(
            offline.unit_file_state(name),
            states.get(name).cloned(),
            "{name}"
        );
    }

    let report = verify::verify_with(&root, &states, &cfg, &Default::default());
    assert_eq!(report.mismatches, []);
    assert_eq!(report.notes, []);

    // Someone changes things by hand, inside the container.
    host.exec_ok(&["systemctl", "disable", "hearth-a.service"])
        .unwrap();
    host.exec_ok(&["systemctl", "unmask", "hearth-b.service"])
        .unwrap();
    host.exec_ok(&["systemctl", "enable", "hearth-c.service"])
        .unwrap();
    host.exec_ok(&[
        "sh",
        "-c",
        "echo edited >> /etc/hearth/owned.conf && chmod 644 /etc/hearth/owned.conf \
         && chown root:root /etc/hearth/owned.conf \
         && rm /etc/systemd/system/hearth-a.service.d/10-env.conf \
         && echo ssh-rsa AAAA intruder >> /home/core/.ssh/authorized_keys.d/ignition",
    ])
    .unwrap();

    let states = verify::unit_file_states(&conn, &names).await.unwrap();
    let got: Vec<String> = verify::verify(&root, &states, &cfg)
        .into_iter()
        .map(|m| m.message)
        .collect();
    assert_eq!(
        got,
        [
            format!(
                "content mismatch for file \"/etc/hearth/owned.conf\": expected sha256 {}, found {}",
                sha256_hex(b"owned by core\n"),
                sha256_hex(b"owned by core\nedited\n")
            ),
            "mode mismatch for file \"/etc/hearth/owned.conf\": expected 0640, found 0644".into(),
            "owner mismatch for file \"/etc/hearth/owned.conf\": expected 1000:999, found 0:0"
                .into(),
            "unit \"hearth-a.service\" should be enabled, is disabled".into(),
            "drop-in \"/etc/systemd/system/hearth-a.service.d/10-env.conf\" is missing".into(),
            "unit \"hearth-b.service\" should be masked, is not found \
             (/etc/systemd/system/hearth-b.service does not exist)"
                .into(),
            "unit \"hearth-c.service\" should be disabled, is enabled".into(),
            "SSH keys of user core differ: expected 1 key, found 2 keys in \
             \"/home/core/.ssh/authorized_keys.d/ignition\""
                .into(),
        ]
    );
}
