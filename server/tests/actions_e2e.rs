//! Run-once actions end to end on a real host: hearth-server, the hearth-agent service and the
//! hearth CLI in a booted Debian systemd container. An action of the rendered config runs once
//! after its files, not again when the agent restarts or the config is offered again; its run
//! shows in `hearth describe node`; a failing action under `failure: Degrade` degrades the node
//! with the action's name, status and output, and its files are rolled back.

use crate::common;

use common::hosts::{boot_with_server, first_node, hearth, put, start_agent, wait_for};
use hearth_vm_tests::SystemdHost;
use std::time::Duration;

/// A worker MachineConfig writing `/etc/demo/app.conf` with `content`, with one action.
fn with_action(content: &str, action: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 50-app\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/demo/app.conf\n        contents:\n          source: data:,{content}%0A\n  actions:\n{action}"
    )
}

fn runs(host: &SystemdHost) -> usize {
    std::fs::read_to_string(host.path("/var/lib/action-runs"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn an_action_runs_once_through_the_real_agent_and_a_failing_one_degrades_the_node() {
    let host = boot_with_server("");
    put(
        &host,
        "/root/fleet/policy.yaml",
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/demo\n      actions: [{type: None}]\n",
    );
    // The action reads the file it runs after (AfterFiles): proof of the order too.
    put(
        &host,
        "/root/fleet/app.yaml",
        &with_action(
            "v1",
            "  - name: register\n    when: AfterFiles\n    script: |\n      cat /etc/demo/app.conf >> /var/lib/action-runs\n",
        ),
    );
    let out = hearth(&host, &["apply", "-f", "/root/fleet"]);
    assert!(out.status.success(), "hearth apply: {out}");
    start_agent(&host, "node-a");
    wait_for(
        "node-a Done with its action run",
        Duration::from_secs(60),
        || {
            let n = first_node(&host);
            n["status"]["state"] == "Done"
                && n["status"]["current"] == n["status"]["desired"]
                && n["status"]["actions"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|r| r["outcome"] == "Succeeded"))
        },
    );
    assert_eq!(
        std::fs::read_to_string(host.path("/var/lib/action-runs")).unwrap(),
        "v1\n",
        "ran once, after its file"
    );
    let d = hearth(&host, &["describe", "node", "node-a"]);
    assert!(d.status.success(), "{d}");
    assert!(
        d.stdout.contains("Actions:")
            && d.stdout.contains("register")
            && d.stdout.contains("Succeeded"),
        "{}",
        d.stdout
    );

    // The agent restarts (it re-reads the desired config): the action does not run again.
    host.exec_ok(&["systemctl", "restart", "hearth-agent.service"])
        .unwrap();
    wait_for("node-a reporting again", Duration::from_secs(60), || {
        host.exec(&["/usr/bin/hearth-agent", "status", "-o", "json"])
            .is_ok_and(|o| o.stdout.contains("\"state\": \"Done\""))
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(runs(&host), 1, "run again after a restart");

    // A new config whose action fails under Degrade: Degraded, the action named with its exit
    // status and output, the file back to v1.
    put(
        &host,
        "/root/fleet/app.yaml",
        &with_action(
            "v2",
            "  - name: check-disk\n    when: AfterFiles\n    failure: Degrade\n    script: |\n      echo 'no disk /dev/sdz' >&2\n      exit 3\n",
        ),
    );
    let out = hearth(&host, &["apply", "-f", "/root/fleet"]);
    assert!(out.status.success(), "hearth apply: {out}");
    wait_for(
        "node-a Degraded by its action",
        Duration::from_secs(60),
        || {
            let n = first_node(&host);
            n["status"]["state"] == "Degraded"
                && n["status"]["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("action check-disk") && r.contains("exit status 3"))
        },
    );
    assert_eq!(
        std::fs::read_to_string(host.path("/etc/demo/app.conf")).unwrap(),
        "v1\n",
        "the failed apply's file was rolled back"
    );
    let d = hearth(&host, &["describe", "node", "node-a"]);
    assert!(d.stdout.contains("no disk /dev/sdz"), "{}", d.stdout);
}
