//! The agent on a plain Debian host with nothing else installed: no libostree, no GLib (the
//! test hosts' root filesystem, vm-tests/scripts/build-rootfs.sh, has neither). The agent links
//! libc only (libostree runs in hearth-ostree-helper, which is not installed here): it applies
//! files, units and SSH keys, and refuses OS changes with the reason, changing nothing.

use crate::common;

use common::*;

#[test]
fn the_agent_works_on_a_host_without_libostree_and_refuses_os_changes_with_the_reason() {
    let host = host_with_agent();
    // Neither libostree nor GLib is on this host.
    for lib in ["libostree", "libglib-2.0"] {
        let out = host
            .exec(&["sh", "-c", &format!("ldconfig -p | grep -c {lib}")])
            .unwrap();
        assert_eq!(out.stdout.trim(), "0", "{lib} is installed: {out}");
    }

    // Files, units and SSH keys.
    let config = mc(
        "plain",
        r#"  config:
    ignition:
      version: 3.2.0
    passwd:
      users:
      - name: core
        sshAuthorizedKeys: [ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlainKey admin@example]
    storage:
      files:
      - path: /etc/plain-host.conf
        mode: 0640
        contents:
          source: data:,no%20libostree%0A
    systemd:
      units:
      - name: exporter.service
        enabled: true
        contents: |
          [Service]
          ExecStart=/bin/true
          [Install]
          WantedBy=multi-user.target
"#,
    );
    put(&host, "/etc/hearth/plain.yaml", &config);
    // Exit 3: applied, a reboot pending (a new file without a disruption policy).
    assert_eq!(apply_no_reboot(&host, "/etc/hearth/plain.yaml"), Some(3));
    assert_eq!(
        get(&host, "/etc/plain-host.conf").as_deref(),
        Some("no libostree\n")
    );
    assert_eq!(is_enabled(&host, "exporter.service"), "enabled");
    let keys = host
        .exec_ok(&["cat", "/home/core/.ssh/authorized_keys"])
        .unwrap();
    assert!(keys.contains("AAAAIPlainKey admin@example"), "{keys}");

    // Kernel arguments: refused with the reason, nothing written.
    let kargs = mc(
        "plain-kargs",
        "  kernelArguments: [hugepages=32]\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/should-not-appear\n        contents:\n          source: data:,x\n",
    );
    put(&host, "/etc/hearth/kargs.yaml", &kargs);
    let out = agent(&host, &["apply", "--once-from", "/etc/hearth/kargs.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    let st = status(&host);
    assert_eq!(st["state"], "Degraded", "{st:#}");
    let reason = st["reason"].as_str().unwrap();
    for want in [
        "kernel arguments",
        "not an ostree host",
        "nothing was changed",
    ] {
        assert!(reason.contains(want), "{want:?} missing in: {reason}");
    }
    assert!(get(&host, "/etc/should-not-appear").is_none());
    // The first config's file is still there.
    assert!(get(&host, "/etc/plain-host.conf").is_some());
}
