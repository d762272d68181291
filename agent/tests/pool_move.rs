//! A node moved into a pool whose rendered config has the same content as its current one (seed
//! 001: label a worker `node-role.kubernetes.io/infra=` while the infra pool adds nothing yet).
//! The real hearth-server, hearth-agent service and hearth CLI run in one booted systemd
//! container. The agent must take the new config name as current (nothing to change on disk),
//! the infra pool must count it updated, and the agent must go back to long-polling: its
//! requests to the server over a window stay a handful (they were thousands: a spin).

use crate::common;

use common::*;
use hearth_vm_tests::{wait_for, SystemdHost};
use std::path::PathBuf;
use std::time::Duration;

const SERVER: &str = "https://127.0.0.1:22623";

/// A binary of the workspace, built (it is usually up to date) next to this test's agent.
fn workspace_binary(package: &str, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_BIN_EXE_hearth-agent"))
        .parent()
        .unwrap()
        .to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["build", "-q", "-p", package, "--bin", name])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "building {name} failed");
    dir.join(name)
}

fn install(host: &SystemdHost, from: &std::path::Path, to: &str) {
    let dest = host.path(to);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(from, &dest).unwrap();
}

fn admin_token(host: &SystemdHost) -> String {
    std::fs::read_to_string(host.path("/var/lib/hearth-server/admin.token"))
        .unwrap()
        .trim()
        .to_string()
}

/// The hearth CLI inside the host, as the admin.
fn hearth(host: &SystemdHost, args: &[&str]) -> hearth_vm_tests::ExecOutput {
    let mut argv = vec![
        "env".to_string(),
        format!("HEARTH_SERVER={SERVER}"),
        "HEARTH_CA=/var/lib/hearth-server/pki/ca.crt".to_string(),
        format!("HEARTH_TOKEN={}", admin_token(host)),
        "/usr/local/bin/hearth".to_string(),
    ];
    argv.extend(args.iter().map(|s| s.to_string()));
    host.exec(&argv).unwrap()
}

fn pool(host: &SystemdHost, name: &str) -> serde_json::Value {
    let out = hearth(host, &["get", "mcp", name, "-o", "json"]);
    if !out.status.success() {
        return serde_json::Value::Null;
    }
    serde_json::from_str(&out.stdout).unwrap_or_default()
}

/// The server's `/metrics`, fetched from a thread that joined the container's network namespace
/// (the server listens on the container's loopback; the container has no HTTP client).
fn server_metrics(host: &SystemdHost) -> String {
    let netns = format!("/proc/{}/ns/net", host.leader_pid());
    let ca = std::fs::read(host.path("/var/lib/hearth-server/pki/ca.crt")).unwrap();
    let token = admin_token(host);
    std::thread::spawn(move || {
        let ns = std::fs::File::open(&netns).unwrap();
        nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("join the netns");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let client = hearth_agent::remote::client(&ca).unwrap();
            client
                .get(format!("{SERVER}/metrics"))
                .bearer_auth(token)
                .send()
                .await
                .and_then(|r| r.error_for_status())
                .expect("GET /metrics")
                .text()
                .await
                .unwrap()
        })
    })
    .join()
    .unwrap()
}

/// Requests the server answered on the agent's routes (`/api/v1/agent/...`).
fn agent_requests(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("hearth_server_http_requests_total{") && l.contains("/api/v1/agent/")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

const INFRA_POOL: &str = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: infra
spec:
  machineConfigSelector:
    matchExpressions:
      - {key: machineconfiguration.openshift.io/role, operator: In, values: [worker,infra]}
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/infra: \"\"
  paused: false
";

#[test]
fn a_node_moved_into_a_pool_with_the_same_content_settles_on_the_new_name() {
    let host = host_with_agent();
    install(
        &host,
        &workspace_binary("hearth-server", "hearth-server"),
        "/usr/local/bin/hearth-server",
    );
    install(
        &host,
        &workspace_binary("hearth-cli", "hearth"),
        "/usr/local/bin/hearth",
    );
    put(
        &host,
        "/etc/systemd/system/hearth-test-server.service",
        "[Unit]\nDescription=hearth-server for the test\n[Service]\nExecStart=/usr/local/bin/hearth-server --state-dir /var/lib/hearth-server --listen 127.0.0.1:22623\n",
    );
    host.exec_ok(&["systemctl", "daemon-reload"]).unwrap();
    host.exec_ok(&["systemctl", "start", "hearth-test-server.service"])
        .unwrap();
    wait_for("the server's first start", Duration::from_secs(30), || {
        host.path("/var/lib/hearth-server/tokens/worker.token")
            .exists()
            && host.path("/var/lib/hearth-server/pki/ca.crt").exists()
    });
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
            "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/demo/motd\n        contents:\n          source: data:,hello%0A\n",
        ),
    );
    put(&host, "/root/fleet/infra-pool.yaml", INFRA_POOL);
    let out = hearth(&host, &["apply", "-f", "/root/fleet"]);
    assert!(out.status.success(), "hearth apply: {out}");

    let token =
        std::fs::read_to_string(host.path("/var/lib/hearth-server/tokens/worker.token")).unwrap();
    put(
        &host,
        "/etc/hearth/agent.env",
        &format!(
            "HEARTH_SERVER={SERVER}\nHEARTH_CA=/var/lib/hearth-server/pki/ca.crt\nHEARTH_BOOTSTRAP_TOKEN={}\nHEARTH_NODE_NAME=node-a\n",
            token.trim()
        ),
    );
    install_service(&host, None);
    host.exec_ok(&["systemctl", "start", "hearth-agent.service"])
        .unwrap();
    wait_for(
        "node-a Done in a worker config",
        Duration::from_secs(60),
        || {
            let st = status(&host);
            st["state"] == "Done"
                && st["current"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("rendered-worker-"))
        },
    );
    let worker_config = status(&host)["current"].as_str().unwrap().to_string();

    // Seed 001: the node becomes an infra node; the infra pool renders the same content under
    // its own name.
    let out = hearth(
        &host,
        &["label", "node", "node-a", "node-role.kubernetes.io/infra="],
    );
    assert!(out.status.success(), "hearth label: {out}");
    wait_for("the infra pool's config", Duration::from_secs(30), || {
        pool(&host, "infra")["spec"]["configuration"]["name"]
            .as_str()
            .is_some_and(|c| c.starts_with("rendered-infra-"))
    });
    let infra_config = pool(&host, "infra")["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(infra_config, worker_config);

    wait_for(
        "the agent to report the infra config as current",
        Duration::from_secs(60),
        || {
            let st = status(&host);
            st["state"] == "Done" && st["current"] == infra_config.as_str()
        },
    );
    wait_for(
        "the infra pool to count the node updated",
        Duration::from_secs(60),
        || pool(&host, "infra")["status"]["updatedMachineCount"] == 1,
    );
    let st = status(&host);
    assert_eq!(st["desired"], infra_config.as_str(), "{st:#}");
    assert_eq!(get(&host, "/etc/demo/motd").as_deref(), Some("hello\n"));

    // Settled: over a window of a few seconds the agent sends a handful of requests (a long-poll
    // waits 30 s; a status report after each), not the hundreds per second of a spin.
    let before = agent_requests(&server_metrics(&host));
    std::thread::sleep(Duration::from_secs(5));
    let after = agent_requests(&server_metrics(&host));
    eprintln!(
        "agent requests: {before} before the window, {} in it",
        after - before
    );
    // The counter does count the agent's requests (enrollment, long-polls, reports so far).
    assert!(before >= 3, "{before}");
    assert!(
        after - before <= 10,
        "the agent sent {} requests to the server in 5 s after settling",
        after - before
    );
    assert!(
        host.exec_ok(&["systemctl", "is-active", "hearth-agent.service"])
            .unwrap()
            .trim()
            == "active"
    );
}

/// The same move while the node waits for the reboot its config needs (as it does while it waits
/// for a reboot slot): the pending config takes the new name too.
#[test]
fn the_same_config_under_a_new_name_while_waiting_for_its_reboot_takes_the_name() {
    let host = host_with_agent();
    let spec = "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/needs-reboot.conf\n        contents:\n          source: data:,x%0A\n";
    put(&host, "/root/worker.yaml", &mc("rendered-worker-1", spec));
    put(&host, "/root/infra.yaml", &mc("rendered-infra-1", spec));
    assert_eq!(apply_no_reboot(&host, "/root/worker.yaml"), Some(3));
    assert_eq!(status(&host)["desired"], "rendered-worker-1");
    assert_eq!(apply_no_reboot(&host, "/root/infra.yaml"), Some(3));
    let st = status(&host);
    assert_eq!(st["desired"], "rendered-infra-1", "{st:#}");
    assert_eq!(st["state"], "Rebooting", "{st:#}");
}
