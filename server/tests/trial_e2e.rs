//! Changes on trial ("commit confirmed"), end to end on a real host: hearth-server, the
//! hearth-agent service and the hearth CLI in a booted Debian systemd container with a network
//! namespace of its own. The agent reaches its server over the loopback link; a config whose
//! unit takes that link down cuts the node off for real, and the agent must bring the previous
//! config back by itself once its trial's deadline passes, then report why. A harmless network
//! change is kept once the server has answered.

use crate::common;

use common::hosts::{boot_with_server, first_node, hearth, put, start_agent, wait_for};
use hearth_vm_tests::SystemdHost;
use serde_json::Value;
use std::time::Duration;

/// The trial's deadline the test pool sets (`hearth.io/trial-seconds`).
const TRIAL_SECONDS: u64 = 20;

/// The states of the agent's own history, oldest first.
fn agent_history(host: &SystemdHost) -> Vec<String> {
    let st = host
        .exec_ok(&["/usr/bin/hearth-agent", "status", "-o", "json"])
        .unwrap();
    let v: Value = serde_json::from_str(&st).unwrap();
    v["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["state"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The agent service's main process.
fn main_pid(host: &SystemdHost) -> String {
    host.exec_ok(&[
        "systemctl",
        "show",
        "-p",
        "MainPID",
        "--value",
        "hearth-agent.service",
    ])
    .unwrap()
    .trim()
    .to_string()
}

/// Whether the loopback link is up in the host.
fn lo_up(host: &SystemdHost) -> bool {
    host.exec_ok(&["/usr/sbin/ip", "-o", "link", "show", "lo"])
        .is_ok_and(|out| out.contains(",UP") || out.contains("<UP"))
}

/// The node's unit that brings the loopback link up (`up`) or takes it down (`down`); a
/// restart of it applies a change (the disruption policy below).
fn lo_unit(direction: &str) -> String {
    format!(
        "    systemd:\n      units:\n      - name: net-lo.service\n        enabled: true\n        contents: |\n          [Unit]\n          Description=the loopback link: the node's way to its server in this test\n          [Service]\n          Type=oneshot\n          RemainAfterExit=yes\n          ExecStart=/usr/sbin/ip link set lo {direction}\n          [Install]\n          WantedBy=multi-user.target\n"
    )
}

fn machine_config(name: &str, body: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n{body}"
    )
}

/// A booted host with hearth-server, and hearth-agent enrolled as node-a and Done in the base
/// config (the loopback unit, `up`); the pool's trial deadline is [`TRIAL_SECONDS`].
fn fleet() -> SystemdHost {
    let host = boot_with_server("");
    put(
        &host,
        "/root/fleet/policy.yaml",
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/systemd/network\n      actions: [{type: None}]\n    - path: /etc/NetworkManager\n      actions: [{type: None}]\n    units:\n    - name: net-lo.service\n      actions: [{type: Restart, restart: {serviceName: net-lo.service}}]\n",
    );
    put(
        &host,
        "/root/fleet/pool.yaml",
        &format!("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\n  annotations:\n    hearth.io/trial-seconds: \"{TRIAL_SECONDS}\"\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n  maxUnavailable: 1\n"),
    );
    put(
        &host,
        "/root/fleet/50-net.yaml",
        &machine_config("50-net", &lo_unit("up")),
    );
    let out = hearth(&host, &["apply", "-f", "/root/fleet"]);
    assert!(out.status.success(), "hearth apply: {out}");
    start_agent(&host, "node-a");
    wait_for("node-a Done in its config", Duration::from_secs(90), || {
        let n = first_node(&host);
        n["status"]["state"] == "Done"
            && n["status"]["current"].is_string()
            && n["status"]["current"] == n["status"]["desired"]
    });
    assert!(lo_up(&host));
    host
}

#[test]
fn a_change_that_cuts_the_node_off_is_undone_by_the_agent_and_reported() {
    let host = fleet();
    let base = first_node(&host)["status"]["current"].clone();
    // The new config: a file under /etc/systemd/network (on trial by default) and the
    // loopback unit changed to take the link down, which cuts the agent off its server.
    put(
        &host,
        "/root/fleet/70-cut.yaml",
        &machine_config(
            "70-cut",
            &format!(
                "    storage:\n      files:\n      - path: /etc/systemd/network/05-cut.network\n        contents:\n          source: data:,%5BMatch%5D%0AName%3Dhearth-none0%0A\n{}",
                lo_unit("down")
            ),
        ),
    );
    let out = hearth(&host, &["apply", "-f", "/root/fleet"]);
    assert!(out.status.success(), "hearth apply: {out}");

    // Cut off: the agent applies, verifies, and its trial cannot reach the server.
    wait_for("the node cut off", Duration::from_secs(90), || {
        !lo_up(&host)
    });
    // A crash during the trial keeps its deadline (the journal has it): once the agent's own
    // status says Trial (the server cannot hear it), kill -9 it; systemd starts it again
    // (Restart=on-failure) and the restarted agent ends the trial.
    wait_for("the agent on trial", Duration::from_secs(60), || {
        host.exec(&["/usr/bin/hearth-agent", "status", "-o", "json"])
            .is_ok_and(|o| o.stdout.contains("\"state\": \"Trial\""))
    });
    let pid = main_pid(&host);
    host.exec_ok(&[
        "systemctl",
        "kill",
        "--signal=SIGKILL",
        "hearth-agent.service",
    ])
    .unwrap();
    // Then, by itself, back in the previous config: link up, file gone, Degraded with why.
    wait_for(
        "node-a Degraded with the trial's reason",
        Duration::from_secs(TRIAL_SECONDS + 120),
        || {
            let n = first_node(&host);
            n["status"]["state"] == "Degraded"
                && n["status"]["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("trial of rendered-"))
        },
    );
    assert!(lo_up(&host), "the network is back");
    assert_ne!(
        main_pid(&host),
        pid,
        "the agent was killed and started again"
    );
    assert!(
        !host.path("/etc/systemd/network/05-cut.network").exists(),
        "the trial's file is gone"
    );
    let n = first_node(&host);
    let reason = n["status"]["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "failed: no answer from the server within {TRIAL_SECONDS} s after applying; rolled back"
        )) && reason.contains("every change was undone"),
        "{reason}"
    );
    assert_eq!(n["status"]["current"], base, "{n}");
    assert_ne!(n["status"]["desired"], base, "{n}");
    let unit = std::fs::read_to_string(host.path("/etc/systemd/system/net-lo.service")).unwrap();
    assert!(unit.contains("ip link set lo up"), "{unit}");
    // The agent's own history: applied, on trial, undone.
    let history = agent_history(&host);
    let tail: Vec<&str> = history
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(tail, ["Working", "Trial", "Degraded"], "{history:?}");

    // Not applied again (no loop): an agent restart reports the same outcome and the history
    // gains no apply.
    let applies = history.iter().filter(|s| *s == "Working").count();
    host.exec_ok(&["systemctl", "restart", "hearth-agent.service"])
        .unwrap();
    wait_for("the agent running again", Duration::from_secs(60), || {
        host.exec_ok(&["systemctl", "is-active", "hearth-agent.service"])
            .is_ok_and(|s| s.trim() == "active")
    });
    let out = hearth(&host, &["describe", "node", "node-a"]);
    assert!(out.status.success(), "{out}");
    assert!(out.stdout.contains("Degraded"), "{}", out.stdout);
    assert!(out.stdout.contains("Trial"), "{}", out.stdout);
    let after = agent_history(&host);
    assert_eq!(
        after.iter().filter(|s| *s == "Working").count(),
        applies,
        "{after:?}"
    );
    assert_eq!(after.last().map(String::as_str), Some("Degraded"));
    assert!(lo_up(&host));
}

#[test]
fn a_harmless_network_change_is_kept_once_the_server_answers() {
    let host = fleet();
    put(
        &host,
        "/root/fleet/70-nm.yaml",
        &machine_config(
            "70-nm",
            "    storage:\n      files:\n      - path: /etc/NetworkManager/conf.d/90-hearth.conf\n        contents:\n          source: data:,%5Bmain%5D%0A\n",
        ),
    );
    let out = hearth(&host, &["apply", "-f", "/root/fleet"]);
    assert!(out.status.success(), "hearth apply: {out}");
    wait_for(
        "node-a Done in the new config",
        Duration::from_secs(90),
        || {
            let n = first_node(&host);
            n["status"]["state"] == "Done"
                && n["status"]["current"] == n["status"]["desired"]
                && host
                    .path("/etc/NetworkManager/conf.d/90-hearth.conf")
                    .exists()
        },
    );
    // It went through the trial: applied, on trial, kept.
    let history = agent_history(&host);
    let tail: Vec<&str> = history
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(tail, ["Working", "Trial", "Done"], "{history:?}");
    // The server saw the trial (its event), and the file stays.
    let out = hearth(&host, &["describe", "node", "node-a"]);
    assert!(out.status.success(), "{out}");
    assert!(out.stdout.contains("Trial"), "{}", out.stdout);
    assert_eq!(
        std::fs::read_to_string(host.path("/etc/NetworkManager/conf.d/90-hearth.conf")).unwrap(),
        "[main]\n"
    );
}

#[test]
fn a_network_change_that_needs_a_reboot_starts_its_trial_after_the_boot() {
    let mut host = fleet();
    // No disruption policy covers /etc/netplan: the change needs a reboot.
    put(
        &host,
        "/root/fleet/70-netplan.yaml",
        &machine_config(
            "70-netplan",
            "    storage:\n      files:\n      - path: /etc/netplan/01-hearth.yaml\n        contents:\n          source: data:,network%3A%0A  version%3A 2%0A\n",
        ),
    );
    let out = hearth(&host, &["apply", "-f", "/root/fleet"]);
    assert!(out.status.success(), "hearth apply: {out}");
    let boot = host
        .wait_for_reboot(Duration::from_secs(120))
        .expect("the agent rebooted the host");
    assert_eq!(boot.boot_count, 2);
    wait_for(
        "node-a Done in the new config after the boot",
        Duration::from_secs(90),
        || {
            let n = first_node(&host);
            n["status"]["state"] == "Done"
                && n["status"]["current"] == n["status"]["desired"]
                && n["status"]["current"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("rendered-worker-"))
                && host.path("/etc/netplan/01-hearth.yaml").exists()
        },
    );
    // Applied, rebooted, on trial after the boot (Trial is entered from Rebooting only once
    // the boot is verified), kept.
    let history = agent_history(&host);
    let tail: Vec<&str> = history
        .iter()
        .rev()
        .take(4)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        ["Working", "Rebooting", "Trial", "Done"],
        "{history:?}"
    );
}
