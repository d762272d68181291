//! systemd's watchdog and a long step: the agent service with a short `WatchdogSec=` applies a
//! config whose disruption policy restarts a unit that takes several watchdog intervals to
//! start. The agent waits for that job without being killed by the watchdog (it is fed from
//! its own thread while a long operation is under way), and reports Done. In a booted systemd
//! container with the real binary as the service.

use crate::common;

use common::*;
use std::time::{Duration, Instant};

/// The service's property `name`.
fn show(host: &hearth_vm_tests::SystemdHost, name: &str) -> String {
    host.exec_ok(&[
        "systemctl",
        "show",
        "-p",
        name,
        "--value",
        "hearth-agent.service",
    ])
    .unwrap()
    .trim()
    .to_string()
}

#[test]
fn a_unit_job_longer_than_the_watchdog_does_not_get_the_agent_killed() {
    let host = host_with_agent();
    // The slow stand-in step: a oneshot unit whose start takes 10 s (more than three watchdog
    // intervals of 3 s).
    put(
        &host,
        "/etc/systemd/system/slow.service",
        "[Unit]\nDescription=a slow start\n[Service]\nType=oneshot\nExecStart=/bin/sh -c 'sleep 10; echo done >> /var/lib/slow-ran'\n",
    );
    put(
        &host,
        "/etc/hearth/policy.yaml",
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/demo\n      actions: [{type: Restart, restart: {serviceName: slow.service}}]\n",
    );
    install_service(
        &host,
        Some("[Service]\nWatchdogSec=3s\nExecStart=\nExecStart=/usr/bin/hearth-agent run --watch /etc/hearth/desired --interval 1 --policy /etc/hearth/policy.yaml\n"),
    );
    host.exec_ok(&["systemctl", "start", "hearth-agent.service"])
        .unwrap();
    let pid = show(&host, "MainPID");
    assert_ne!(pid, "0");

    put(
        &host,
        "/etc/hearth/desired/config.yaml",
        &mc(
            "slow-restart",
            "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/demo/x.conf\n        contents:\n          source: data:,x%0A\n",
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let st = status(&host);
        if st["state"] == "Done" && st["current"] == "slow-restart" {
            break;
        }
        assert!(Instant::now() < deadline, "never Done: {st:#}");
        std::thread::sleep(Duration::from_millis(500));
    }
    // The restart did run (the step was long), and the agent was never killed: same process,
    // no restart, no watchdog timeout in its journal.
    assert_eq!(get(&host, "/var/lib/slow-ran").as_deref(), Some("done\n"));
    assert_eq!(show(&host, "NRestarts"), "0");
    assert_eq!(show(&host, "MainPID"), pid);
    let log = host
        .exec_ok(&[
            "journalctl",
            "-u",
            "hearth-agent.service",
            "--no-pager",
            "-o",
            "cat",
        ])
        .unwrap();
    assert!(!log.to_lowercase().contains("watchdog timeout"), "{log}");
}
