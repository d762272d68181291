//! The agent on a real host: a booted Debian systemd in a container, with the real
//! `hearth-agent` binary running inside it (as a one-shot `apply` and as the systemd service).

use crate::common;

use common::*;
use std::time::{Duration, Instant};

#[test]
fn a_worker_script_applies_through_a_real_reboot_with_the_agent_as_a_service() {
    let mut host = host_with_agent();
    // Install the agent the way a node runs it: the unit from units/ and /usr/bin/hearth-agent.
    install_service(&host, None);
    // The worker script MachineConfig (Ignition 2.2, mode 0755), as exported by `oc get -o yaml`.
    put(
        &host,
        "/etc/hearth/desired/worker.yaml",
        &hearth_testdata::manifest("10-worker-bootstrap-script.yaml"),
    );
    host.exec_ok(&[
        "systemctl",
        "enable",
        "--now",
        "--no-block",
        "hearth-agent.service",
    ])
    .unwrap();

    // The plan needs a reboot (a file with no disruption policy): the agent asks logind.
    let boot = host
        .wait_for_reboot(Duration::from_secs(90))
        .expect("the agent rebooted the host");
    assert_eq!(boot.boot_count, 2);

    // After the boot the service resumes, verifies and reports Done.
    let deadline = Instant::now() + Duration::from_secs(60);
    let st = loop {
        let st = status(&host);
        if st["state"] == "Done" || Instant::now() > deadline {
            break st;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(st["state"], "Done", "{st:#}");
    assert_eq!(st["current"], "10-worker-bootstrap-script");
    let path = "/usr/local/bin/site-bootstrap";
    let script = get(&host, path).expect("the script exists");
    assert!(script.starts_with("#!/usr/bin/bash\n"), "{script}");
    assert!(script.contains("rpm-ostree install policycoreutils-python-utils"));
    let mode = host.exec_ok(&["stat", "-c", "%a %U", path]).unwrap();
    assert_eq!(mode.trim(), "755 root");
    // sd_notify status line and the history of the transitions.
    let text = host
        .exec_ok(&[
            "systemctl",
            "show",
            "-p",
            "StatusText",
            "hearth-agent.service",
        ])
        .unwrap();
    assert!(text.contains("Done"), "{text}");
    let states: Vec<&str> = st["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["Working", "Rebooting", "Done"]);
}

#[test]
fn units_are_written_enabled_disabled_and_masked_and_systemctl_agrees() {
    let host = host_with_agent();
    // The fixture expects a host with docker; give the container a stand-in unit file.
    put(&host, "/usr/lib/systemd/system/docker.service", "[Unit]\nDescription=stand-in\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n");
    // The fixture also moves the OS image and adds kernel arguments, which a plain systemd host
    // refuses (the OS layer has its own tests): apply its files and units.
    let fixture: String = hearth_testdata::manifest("units-and-dropins.yaml")
        .lines()
        .filter(|l| {
            !l.starts_with("  osImageURL:")
                && !l.starts_with("  kernelArguments:")
                && *l != "    - foo=bar"
                && *l != "    - nosmt"
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!fixture.contains("osImageURL") && !fixture.contains("nosmt"));
    put(&host, "/etc/hearth/test-config.yaml", &fixture);
    let out = agent(
        &host,
        &[
            "apply",
            "--once-from",
            "/etc/hearth/test-config.yaml",
            "--no-reboot",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "applied with a reboot pending: {out}"
    );
    assert_eq!(is_enabled(&host, "kubelet.service"), "enabled");
    assert_eq!(is_enabled(&host, "etcd-member.service"), "enabled");
    assert_eq!(is_enabled(&host, "docker.service"), "enabled");
    assert_eq!(is_enabled(&host, "locksmith.service"), "masked");
    let dropin = get(
        &host,
        "/etc/systemd/system/docker.service.d/10-dockeropts.conf",
    )
    .expect("drop-in");
    assert!(dropin.contains("DOCKER_OPTS=--log-opt max-size=50m"));
    // systemd loads the drop-in: its path and its variable.
    let paths = host
        .exec_ok(&["systemctl", "show", "-p", "DropInPaths", "docker.service"])
        .unwrap();
    assert!(
        paths.contains("/etc/systemd/system/docker.service.d/10-dockeropts.conf"),
        "{paths}"
    );
    let env = host
        .exec_ok(&["systemctl", "show", "-p", "Environment", "docker.service"])
        .unwrap();
    assert!(
        env.contains("DOCKER_OPTS=--log-opt max-size=50m --log-opt max-file=3"),
        "{env}"
    );
    assert_eq!(
        get(&host, "/etc/coreos/update.conf").unwrap(),
        "GROUP=stable\nSERVER=http://localhost:32003/v1/update\n"
    );

    // disable-chrony: the unit is written and disabled (it was enabled by its own [Install]).
    put(
        &host,
        "/etc/hearth/chrony.yaml",
        &hearth_testdata::manifest("disable-chrony.yaml"),
    );
    host.exec_ok(&["mkdir", "-p", "/etc/systemd/system/multi-user.target.wants"])
        .unwrap();
    assert_eq!(apply_no_reboot(&host, "/etc/hearth/chrony.yaml"), Some(3));
    assert_eq!(is_enabled(&host, "chronyd.service"), "disabled");
    assert!(get(&host, "/etc/systemd/system/chronyd.service")
        .unwrap()
        .contains("Description=NTP client/server"));
    // The units test-config enabled left the config: back to their presets, masks removed.
    assert_ne!(is_enabled(&host, "locksmith.service"), "masked");
    assert!(
        get(&host, "/etc/coreos/update.conf").is_none(),
        "a file hearth created and dropped is removed"
    );
    let st = status(&host);
    assert_eq!(st["state"], "Rebooting");
    assert_eq!(st["pendingReboot"], true);
}

#[test]
fn a_file_dropped_from_the_config_gets_its_original_back() {
    let host = host_with_agent();
    put(&host, "/etc/hearth-demo.conf", "original\n");
    let with = mc(
        "with-file",
        "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/hearth-demo.conf\n        mode: 0600\n        contents:\n          source: data:,managed%0A\n",
    );
    let without = mc(
        "without-file",
        "  config:\n    ignition:\n      version: 3.2.0\n",
    );
    put(&host, "/etc/hearth/with.yaml", &with);
    put(&host, "/etc/hearth/without.yaml", &without);
    assert_eq!(apply_no_reboot(&host, "/etc/hearth/with.yaml"), Some(3));
    assert_eq!(get(&host, "/etc/hearth-demo.conf").unwrap(), "managed\n");
    assert_eq!(
        host.exec_ok(&["stat", "-c", "%a", "/etc/hearth-demo.conf"])
            .unwrap()
            .trim(),
        "600"
    );
    // Re-applying the same config is a no-op that keeps the pending reboot.
    assert_eq!(apply_no_reboot(&host, "/etc/hearth/with.yaml"), Some(3));
    assert_eq!(apply_no_reboot(&host, "/etc/hearth/without.yaml"), Some(3));
    assert_eq!(get(&host, "/etc/hearth-demo.conf").unwrap(), "original\n");
    assert_eq!(
        host.exec_ok(&["stat", "-c", "%a", "/etc/hearth-demo.conf"])
            .unwrap()
            .trim(),
        "644"
    );
}

#[test]
fn a_unit_that_fails_to_start_degrades_the_node_and_every_file_is_restored() {
    let host = host_with_agent();
    put(&host, "/etc/hearth-app.conf", "version=1\n");
    let config = mc(
        "app-v2",
        r#"  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/hearth-app.conf
        contents:
          source: data:,version%3D2%0A
      - path: /etc/hearth-app.d/extra.conf
        contents:
          source: data:,new%0A
    systemd:
      units:
      - name: hearth-app.service
        enabled: true
        contents: |
          [Unit]
          Description=an app that cannot start
          [Service]
          Type=oneshot
          ExecStart=/bin/sh -c 'echo hearth-app-marker-7731; exit 3'
          [Install]
          WantedBy=multi-user.target
"#,
    );
    // Changes to the app restart it instead of rebooting the node.
    let policy = r#"apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/hearth-app.conf
      actions: [{type: Restart, restart: {serviceName: hearth-app.service}}]
    - path: /etc/hearth-app.d
      actions: [{type: None}]
    units:
    - name: hearth-app.service
      actions: [{type: Restart, restart: {serviceName: hearth-app.service}}]
"#;
    put(&host, "/etc/hearth/app.yaml", &config);
    put(&host, "/etc/hearth/policy.yaml", policy);
    let out = agent(
        &host,
        &[
            "apply",
            "--once-from",
            "/etc/hearth/app.yaml",
            "--policy",
            "/etc/hearth/policy.yaml",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out}");
    let st = status(&host);
    assert_eq!(st["state"], "Degraded", "{st:#}");
    let reason = st["reason"].as_str().unwrap();
    assert!(
        reason.contains("restart hearth-app.service"),
        "the reason names the step: {reason}"
    );
    assert!(
        reason.contains("hearth-app-marker-7731"),
        "the reason carries the unit's log: {reason}"
    );
    assert!(reason.contains("every change was undone"), "{reason}");
    // Every file is as before.
    assert_eq!(get(&host, "/etc/hearth-app.conf").unwrap(), "version=1\n");
    assert!(get(&host, "/etc/hearth-app.d/extra.conf").is_none());
    assert!(get(&host, "/etc/systemd/system/hearth-app.service").is_none());
    assert_ne!(is_enabled(&host, "hearth-app.service"), "enabled");
    assert!(st["current"].is_null(), "no config was ever applied");
}

#[test]
fn unreconcilable_and_os_changes_are_refused_before_anything_changes() {
    let host = host_with_agent();
    let user = mc(
        "admin-user",
        "  config:\n    ignition:\n      version: 3.2.0\n    passwd:\n      users:\n      - name: admin\n        sshAuthorizedKeys: [ssh-ed25519 AAAA admin]\n    storage:\n      files:\n      - path: /etc/should-not-appear\n        contents:\n          source: data:,x\n",
    );
    put(&host, "/etc/hearth/user.yaml", &user);
    let out = agent(&host, &["apply", "--once-from", "/etc/hearth/user.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    let st = status(&host);
    assert_eq!(st["state"], "Unreconcilable");
    assert!(
        st["reason"]
            .as_str()
            .unwrap()
            .contains("spec.config.passwd.users[0]"),
        "{st:#}"
    );
    assert!(get(&host, "/etc/should-not-appear").is_none());

    // Kernel arguments on a host without an OS backend: Degraded, nothing written.
    let kargs = mc(
        "kargs",
        "  kernelArguments: [selinux=0]\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/should-not-appear\n        contents:\n          source: data:,x\n",
    );
    put(&host, "/etc/hearth/kargs.yaml", &kargs);
    let out = agent(&host, &["apply", "--once-from", "/etc/hearth/kargs.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    let st = status(&host);
    assert_eq!(st["state"], "Degraded");
    let reason = st["reason"].as_str().unwrap();
    assert!(
        reason.contains("kernel arguments") && reason.contains("nothing was changed"),
        "{reason}"
    );
    assert!(get(&host, "/etc/should-not-appear").is_none());
}

#[test]
fn a_symlink_planted_out_of_an_offline_root_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("etc/app")).unwrap();
    let config = root.path().join("config.yaml");
    std::fs::write(
        &config,
        mc(
            "escape",
            "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/app/settings.conf\n        contents:\n          source: data:,pwned\n",
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["apply", "--once-from"])
        .arg(&config)
        .arg("--root")
        .arg(root.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("/etc/app/settings.conf") && stderr.contains("leads outside the root"),
        "{stderr}"
    );
    assert!(
        std::fs::read_dir(outside.path()).unwrap().next().is_none(),
        "nothing written outside"
    );
}

#[test]
fn an_offline_image_root_gets_files_units_and_keys_and_systemctl_agrees() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("etc")).unwrap();
    std::fs::create_dir_all(r.join("home/core")).unwrap();
    std::fs::create_dir_all(r.join("usr/lib/systemd/system")).unwrap();
    std::fs::write(
        r.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\ncore:x:1000:1000:CoreOS Admin:/home/core:/bin/bash\n",
    )
    .unwrap();
    std::fs::write(r.join("etc/group"), "root:x:0:\ncore:x:1000:\n").unwrap();
    std::os::unix::fs::chown(r.join("home/core"), Some(1000), Some(1000)).unwrap();
    std::fs::write(
        r.join("usr/lib/systemd/system/bluetooth.service"),
        "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
    )
    .unwrap();
    let config = r.join("config.yaml");
    std::fs::write(
        &config,
        mc(
            "image",
            r#"  config:
    ignition:
      version: 3.2.0
    passwd:
      users:
      - name: core
        sshAuthorizedKeys: [ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIImageKey admin@example]
    storage:
      files:
      - path: /etc/motd
        mode: 0640
        contents:
          source: data:,built%20offline%0A
    systemd:
      units:
      - name: exporter.service
        enabled: true
        contents: |
          [Service]
          ExecStart=/usr/bin/exporter
          [Install]
          WantedBy=multi-user.target
      - name: bluetooth.service
        mask: true
"#,
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["apply", "--once-from"])
        .arg(&config)
        .arg("--root")
        .arg(r)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(r.join("etc/motd")).unwrap(),
        "built offline\n"
    );
    let systemctl = |unit: &str| {
        let o = std::process::Command::new("systemctl")
            .arg(format!("--root={}", r.display()))
            .args(["is-enabled", unit])
            .output()
            .expect("systemctl is installed (package systemd)");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(systemctl("exporter.service"), "enabled");
    assert_eq!(systemctl("bluetooth.service"), "masked");
    let keys = r.join("home/core/.ssh/authorized_keys");
    let meta = std::fs::metadata(&keys)
        .expect("keys written (no ssh-key-dir in this image: ~/.ssh/authorized_keys)");
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    assert_eq!(
        (meta.uid(), meta.permissions().mode() & 0o777),
        (1000, 0o600)
    );
    assert!(std::fs::read_to_string(&keys)
        .unwrap()
        .contains("admin@example"));
    // The status of an offline root is read the same way.
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["status", "-o", "json", "--root"])
        .arg(r)
        .output()
        .unwrap();
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(st["state"], "Done");
    assert_eq!(st["current"], "image");
}

#[test]
fn the_force_file_rewrites_everything_and_an_infra_file_appears() {
    let host = host_with_agent();
    // The infra MachineConfig (Ignition 2.2, `data:,test`, mode 0644).
    put(
        &host,
        "/etc/hearth/infra.yaml",
        &hearth_testdata::manifest("50-infra-file.yaml"),
    );
    assert_eq!(apply_no_reboot(&host, "/etc/hearth/infra.yaml"), Some(3));
    assert_eq!(get(&host, "/etc/testinfra").unwrap(), "test");
    assert_eq!(
        host.exec_ok(&["stat", "-c", "%a", "/etc/testinfra"])
            .unwrap()
            .trim(),
        "644"
    );

    // A hand edit survives a plain re-apply (the host already has the config: only verified,
    // and reported as drift) but not the force file.
    host.exec_ok(&["sh", "-c", "echo edited > /etc/testinfra"])
        .unwrap();
    assert_eq!(apply_no_reboot(&host, "/etc/hearth/infra.yaml"), Some(3));
    host.exec_ok(&["touch", "/run/hearth-force"]).unwrap();
    let out = agent(
        &host,
        &[
            "apply",
            "--once-from",
            "/etc/hearth/infra.yaml",
            "--no-reboot",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{out}");
    assert_eq!(
        get(&host, "/etc/testinfra").unwrap(),
        "test",
        "the force file rewrote it"
    );
}
