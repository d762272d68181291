//! The escape hatches `hearth node restore-file` and `hearth node force`, end to end on a real
//! host: hearth-server, the hearth-agent service and the hearth CLI in a booted Debian systemd
//! container. Files changed by hand are put back by the real agent on the admin's request,
//! each request acted on once (also after the agent restarts), reported back and shown by the
//! CLI; a path the config does not manage is refused, naming it.

use crate::common;

use common::hosts::{boot_with_server, first_node, hearth, mc, put, start_agent, wait_for};
use hearth_vm_tests::SystemdHost;
use serde_json::Value;
use std::time::Duration;

/// The state of request `id` in node-a's view.
fn request_state(host: &SystemdHost, id: u64) -> Option<String> {
    first_node(host)["status"]["requests"]
        .as_array()?
        .iter()
        .find(|r| r["id"].as_u64() == Some(id))
        .and_then(|r| r["state"].as_str().map(str::to_string))
}

/// How many times the agent's journal went to Working (each apply once).
fn applies(host: &SystemdHost) -> usize {
    let st = host
        .exec_ok(&["/usr/bin/hearth-agent", "status", "-o", "json"])
        .unwrap();
    let v: Value = serde_json::from_str(&st).unwrap();
    v["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["state"] == "Working")
        .count()
}

fn read(host: &SystemdHost, path: &str) -> Option<String> {
    std::fs::read_to_string(host.path(path)).ok()
}

#[test]
fn restore_file_and_force_put_drifted_files_back_once_through_the_real_agent() {
    let host = boot_with_server("");
    put(
        &host,
        "/root/fleet/policy.yaml",
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/demo\n      actions: [{type: None}]\n",
    );
    put(
        &host,
        "/root/fleet/demo.yaml",
        &mc(
            "50-demo",
            "      - path: /etc/demo/motd\n        contents:\n          source: data:,hello%0A\n      - path: /etc/demo/other\n        mode: 0600\n        contents:\n          source: data:,other%0A\n",
        ),
    );
    let out = hearth(&host, &["apply", "-f", "/root/fleet"]);
    assert!(out.status.success(), "hearth apply: {out}");
    start_agent(&host, "node-a");
    wait_for("node-a Done in its config", Duration::from_secs(60), || {
        let n = first_node(&host);
        n["status"]["state"] == "Done"
            && n["status"]["current"].is_string()
            && n["status"]["current"] == n["status"]["desired"]
    });
    assert_eq!(read(&host, "/etc/demo/motd").as_deref(), Some("hello\n"));

    // A path the config does not manage is refused, naming it; nothing is requested.
    let out = hearth(&host, &["node", "restore-file", "node-a", "/etc/hostname"]);
    assert!(!out.status.success(), "{out}");
    assert!(
        out.stderr.contains("/etc/hostname") && out.stderr.contains("not managed"),
        "{out}"
    );
    assert!(
        first_node(&host)["status"]["requests"].is_null(),
        "{}",
        first_node(&host)
    );

    // A hand edit: reported as drift (the default policy), then put back on request.
    put(&host, "/etc/demo/motd", "edited by hand\n");
    wait_for("the drift reported", Duration::from_secs(60), || {
        first_node(&host)["status"]["drift"]
            .to_string()
            .contains("/etc/demo/motd")
    });
    let before = applies(&host);
    let out = hearth(&host, &["node", "restore-file", "node-a", "/etc/demo/motd"]);
    assert!(out.status.success(), "{out}");
    assert!(out.stdout.contains("(request 1)"), "{out}");
    wait_for("request 1 Done", Duration::from_secs(60), || {
        request_state(&host, 1).as_deref() == Some("Done")
    });
    assert_eq!(read(&host, "/etc/demo/motd").as_deref(), Some("hello\n"));
    wait_for("the drift gone", Duration::from_secs(60), || {
        first_node(&host)["status"]["drift"] == Value::Array(vec![])
    });
    // One file written back, no apply.
    assert_eq!(applies(&host), before);

    // Two files off: force re-applies the whole config, once, through the journal's apply.
    put(&host, "/etc/demo/motd", "edited again\n");
    std::fs::remove_file(host.path("/etc/demo/other")).unwrap();
    let out = hearth(&host, &["node", "force", "node-a"]);
    assert!(out.status.success(), "{out}");
    assert!(out.stdout.contains("(request 2)"), "{out}");
    wait_for("request 2 Done", Duration::from_secs(90), || {
        request_state(&host, 2).as_deref() == Some("Done")
    });
    assert_eq!(read(&host, "/etc/demo/motd").as_deref(), Some("hello\n"));
    assert_eq!(read(&host, "/etc/demo/other").as_deref(), Some("other\n"));
    assert_eq!(applies(&host), before + 1);

    // Acted on once: an agent restart (the requests are still in its journal as done) does not
    // act again, and a later hand edit stays (reported, not reverted).
    host.exec_ok(&["systemctl", "restart", "hearth-agent.service"])
        .unwrap();
    put(&host, "/etc/demo/motd", "edited after the force\n");
    wait_for("the new drift reported", Duration::from_secs(60), || {
        first_node(&host)["status"]["drift"]
            .to_string()
            .contains("/etc/demo/motd")
    });
    assert_eq!(
        read(&host, "/etc/demo/motd").as_deref(),
        Some("edited after the force\n")
    );
    assert_eq!(applies(&host), before + 1);

    // Shown by the CLI, audited with the admin's identity.
    let out = hearth(&host, &["describe", "node", "node-a"]);
    assert!(out.status.success(), "{out}");
    assert!(out.stdout.contains("Requests:"), "{}", out.stdout);
    assert!(
        out.stdout.contains("restoreFile /etc/demo/motd"),
        "{}",
        out.stdout
    );
    for reason in [
        "RestoreFileRequested",
        "FileRestored",
        "ForceRequested",
        "ForceDone",
    ] {
        assert!(out.stdout.contains(reason), "{reason}: {}", out.stdout);
    }
    assert!(
        out.stdout.contains("requested by the admin token"),
        "{}",
        out.stdout
    );
}
