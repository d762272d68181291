//! `hearth-agent apply --once-from` while `hearth-agent run` (the service) keeps the host in its
//! own desired config: refused, naming the daemon and what to do; the daemon's config stays.
//! In a booted systemd container with the real binary as the service.

use crate::common;

use common::*;
use std::time::{Duration, Instant};

fn config(name: &str, content: &str) -> String {
    mc(
        name,
        &format!("  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/demo/which.conf\n        contents:\n          source: data:,{content}%0A\n"),
    )
}

#[test]
fn apply_once_is_refused_while_the_daemon_runs() {
    let host = host_with_agent();
    put(
        &host,
        "/etc/hearth/policy.yaml",
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/demo\n      actions: [{type: None}]\n",
    );
    install_service(
        &host,
        Some("[Service]\nExecStart=\nExecStart=/usr/bin/hearth-agent run --watch /etc/hearth/desired --interval 1 --policy /etc/hearth/policy.yaml\n"),
    );
    put(
        &host,
        "/etc/hearth/desired/config.yaml",
        &config("daemons", "daemon"),
    );
    host.exec_ok(&["systemctl", "start", "hearth-agent.service"])
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(status(&host)["state"] == "Done" && status(&host)["current"] == "daemons") {
        assert!(
            Instant::now() < deadline,
            "the daemon never applied its config"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    put(&host, "/root/other.yaml", &config("someone-elses", "other"));
    let out = agent(
        &host,
        &[
            "apply",
            "--once-from",
            "/root/other.yaml",
            "--policy",
            "/etc/hearth/policy.yaml",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(
        out.stderr.contains("hearth-agent run (pid ")
            && out.stderr.contains("watching /etc/hearth/desired")
            && out.stderr.contains("systemctl stop hearth-agent.service"),
        "{out}"
    );
    let st = status(&host);
    assert_eq!(st["desired"], "daemons", "{st:#}");
    assert_eq!(get(&host, "/etc/demo/which.conf").unwrap(), "daemon\n");

    // With the daemon stopped, the same apply goes through.
    host.exec_ok(&["systemctl", "stop", "hearth-agent.service"])
        .unwrap();
    let out = agent(
        &host,
        &[
            "apply",
            "--once-from",
            "/root/other.yaml",
            "--policy",
            "/etc/hearth/policy.yaml",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out}");
    assert_eq!(get(&host, "/etc/demo/which.conf").unwrap(), "other\n");
}
