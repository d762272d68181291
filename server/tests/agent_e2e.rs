//! End to end on a real host: hearth-server, the hearth-agent service and the hearth CLI run in a
//! booted Debian systemd container (its network is private, so all three run inside). The agent
//! enrolls with the pool's bootstrap token, receives a config by long-poll, says it is Working
//! on it, applies it, reports Done; a config that needs a reboot is applied, the agent takes a reboot slot, the host
//! reboots, and after the boot the agent verifies, reports Done and gives the slot back.

use crate::common;

use common::hosts::{boot_with_server, first_node, hearth, mc, put, start_agent, wait_for};
use std::time::Duration;

#[test]
fn an_agent_follows_the_server_through_an_apply_and_a_slotted_reboot() {
    let mut host = boot_with_server("Type=notify\nWatchdogSec=30s\n");
    // Changes under /etc/demo need no reboot.
    put(
        &host,
        "/root/fleet/policy.yaml",
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/demo\n      actions: [{type: None}]\n",
    );
    put(
        &host,
        "/root/fleet/demo.yaml",
        &mc("50-demo", "      - path: /etc/demo/motd\n        contents:\n          source: data:,hello%20from%20the%20server%0A\n"),
    );
    let out = hearth(&host, &["apply", "-f", "/root/fleet"]);
    assert!(out.status.success(), "hearth apply: {out}");

    // The agent, as the node runs it: first-boot style environment file.
    start_agent(&host, "node-a");

    wait_for("the file from the server", Duration::from_secs(60), || {
        std::fs::read_to_string(host.path("/etc/demo/motd"))
            .is_ok_and(|s| s == "hello from the server\n")
    });
    wait_for("node-a Done in get nodes", Duration::from_secs(60), || {
        first_node(&host).to_string().contains("Done")
    });
    let pools = hearth(&host, &["get", "mcp"]);
    assert!(pools.status.success(), "{pools}");
    let worker = pools
        .stdout
        .lines()
        .find(|l| l.starts_with("worker"))
        .unwrap_or_default()
        .to_string();
    assert!(worker.contains("rendered-worker-"), "{}", pools.stdout);

    // The server logs every event it commits to the journal, with a MESSAGE_ID and fields.
    let logged = |reason: &str| {
        host.exec_ok(&[
            "journalctl",
            "-u",
            "hearth-test-server.service",
            &format!(
                "MESSAGE_ID={}",
                hearth_server::telemetry::logging::MSG_EVENT
            ),
            &format!("REASON={reason}"),
            "-o",
            "cat",
            "--no-pager",
        ])
        .unwrap()
    };
    let enrolled = logged("Enrolled");
    assert!(
        enrolled.contains("Node/node-a: enrolled into pool worker"),
        "{enrolled}"
    );
    // Before applying, the agent said it was working on the config (the server hands out only
    // so many answers unacknowledged: `server/src/pace.rs`).
    let working = logged("Working");
    assert!(
        working.contains("Node/node-a: rendered-worker-")
            && working.contains(hearth_agent::status::ACK_REASON),
        "{working}"
    );
    // It feeds systemd's watchdog from its periodic reconcile (every 10 s): the timestamp
    // systemd keeps of the last ping moves on (it is first set when the service is ready).
    let last_ping = || {
        host.exec(&[
            "systemctl",
            "show",
            "hearth-test-server.service",
            "-p",
            "WatchdogTimestampMonotonic",
            "--value",
        ])
        .ok()
        .and_then(|o| o.stdout.trim().parse::<u64>().ok())
        .unwrap_or(0)
    };
    let first = last_ping();
    wait_for("a watchdog ping", Duration::from_secs(30), || {
        last_ping() > first
    });

    // A change with no disruption policy: the node reboots, through a reboot slot.
    put(
        &host,
        "/root/fleet/reboot.yaml",
        &mc("60-reboot", "      - path: /etc/needs-reboot.conf\n        contents:\n          source: data:,x%0A\n"),
    );
    let out = hearth(&host, &["apply", "-f", "/root/fleet/reboot.yaml"]);
    assert!(out.status.success(), "hearth apply: {out}");
    let boot = host
        .wait_for_reboot(Duration::from_secs(120))
        .expect("the agent rebooted the host");
    assert_eq!(boot.boot_count, 2);
    wait_for("Done after the reboot", Duration::from_secs(90), || {
        let st = host
            .exec(&["/usr/bin/hearth-agent", "status", "-o", "json"])
            .unwrap();
        st.stdout.contains("\"state\": \"Done\"") && st.stdout.contains("rendered-worker-")
    });
    assert_eq!(
        std::fs::read_to_string(host.path("/etc/needs-reboot.conf")).unwrap(),
        "x\n"
    );
    // The slot was given back once the node verified its config.
    wait_for("the slot given back", Duration::from_secs(60), || {
        std::fs::read_to_string(host.path("/var/lib/hearth/server.json"))
            .is_ok_and(|s| s.contains("\"slotHeld\": false"))
    });
    let history = host
        .exec_ok(&["/usr/bin/hearth-agent", "status", "-o", "json"])
        .unwrap();
    assert!(history.contains("Rebooting"), "{history}");
    wait_for("the server sees Done", Duration::from_secs(60), || {
        first_node(&host).to_string().contains("Done")
    });
}
