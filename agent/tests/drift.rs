//! Drift on a real host: the agent runs as the systemd service; a managed file edited by hand is
//! reported with its path within seconds, and with the `revert` policy it is put back.

use crate::common;

use common::*;
use hearth_vm_tests::wait_for;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

#[test]
fn hand_edits_are_reported_or_reverted_and_counted() {
    let host = host_with_agent();
    install_service(
        &host,
        Some("[Service]\nExecStart=\nExecStart=/usr/bin/hearth-agent run --watch /etc/hearth/desired --interval 1 --policy /etc/hearth/policy.yaml --drift /etc/drift/revert.conf=revert --metrics unix:/run/hearth/metrics.sock\n"),
    );
    put(
        &host,
        "/etc/hearth/policy.yaml",
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/drift\n      actions: [{type: None}]\n",
    );
    put(
        &host,
        "/etc/hearth/desired/config.yaml",
        &mc(
            "drift-demo",
            "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/drift/report.conf\n        contents:\n          source: data:,report%0A\n      - path: /etc/drift/revert.conf\n        mode: 0640\n        contents:\n          source: data:,revert%0A\n",
        ),
    );
    host.exec_ok(&["systemctl", "start", "hearth-agent.service"])
        .unwrap();
    // Done *with a current config*: a journal that has applied nothing yet also says Done.
    wait_for("Done", Duration::from_secs(30), || {
        let st = status(&host);
        st["state"] == "Done" && !st["current"].is_null()
    });
    assert_eq!(get(&host, "/etc/drift/report.conf").unwrap(), "report\n");

    // Hand edits, made inside the host as an admin would.
    host.exec_ok(&["sh", "-c", "echo edited >> /etc/drift/report.conf"])
        .unwrap();
    host.exec_ok(&["sh", "-c", "echo tampered > /etc/drift/revert.conf"])
        .unwrap();
    let started = Instant::now();
    wait_for("drift in the status", Duration::from_secs(10), || {
        let d = status(&host)["drift"].to_string();
        d.contains("/etc/drift/report.conf") && d.contains("/etc/drift/revert.conf")
    });
    let elapsed = started.elapsed();
    let st = status(&host);
    let drift: Vec<String> = st["drift"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let report = drift
        .iter()
        .find(|d| d.starts_with("/etc/drift/report.conf"))
        .unwrap();
    assert!(report.contains("content changed"), "{report}");
    let revert = drift
        .iter()
        .find(|d| d.starts_with("/etc/drift/revert.conf"))
        .unwrap();
    assert!(revert.contains("reverted"), "{revert}");
    // The reported file keeps the hand edit; the reverted one is back, with its mode.
    assert_eq!(
        get(&host, "/etc/drift/report.conf").unwrap(),
        "report\nedited\n"
    );
    assert_eq!(get(&host, "/etc/drift/revert.conf").unwrap(), "revert\n");
    assert_eq!(
        host.exec_ok(&["stat", "-c", "%a", "/etc/drift/revert.conf"])
            .unwrap()
            .trim(),
        "640"
    );
    eprintln!("drift reported after {:.2} s", elapsed.as_secs_f64());

    // Metrics, over the unix socket.
    let mut s = std::os::unix::net::UnixStream::connect(host.live_path("/run/hearth/metrics.sock"))
        .expect("metrics socket");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(
        text.contains("hearth_agent_applies_total{result=\"done\"} 1"),
        "{text}"
    );
    assert!(text.contains("hearth_agent_drift_events_total 2"), "{text}");
    assert!(
        text.contains("hearth_agent_drift_reverted_total 1"),
        "{text}"
    );
    assert!(
        text.contains("hearth_agent_state{state=\"Done\"} 1"),
        "{text}"
    );
    // The journal has the drift as a structured, findable event.
    let logs = host
        .exec_ok(&[
            "journalctl",
            "-u",
            "hearth-agent",
            "MESSAGE_ID=5a0f1c0e7a9d4c7e9b6d2f1a3c4e5d64",
            "-o",
            "cat",
            "--no-pager",
        ])
        .unwrap();
    assert!(logs.contains("/etc/drift/report.conf"), "{logs}");
}
