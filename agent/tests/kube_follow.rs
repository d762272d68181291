//! `hearth-agent run --kubernetes` against a real kube-apiserver (1.20, built from Debian's
//! source: `hearth_vm_tests::kube`), with Debian's kubectl as the admin's client. The agent runs
//! as a service in a booted systemd container, with a node identity (`system:node:node-a`, a
//! client certificate) under the Node authorizer and NodeRestriction; the container's private
//! loopback reaches the API server through a relay the test runs.
//!
//! It follows `desiredConfig` set with `kubectl annotate`: a MachineConfig with a file and a
//! unit is applied (`currentConfig`, `state=Done` as `kubectl get node -o jsonpath` shows them),
//! a config with a unit that fails leaves the node `Degraded` with the reason naming the unit,
//! also in its MachineConfigNode's status; its identity cannot annotate another node.

use crate::common;

use common::*;
use hearth_vm_tests::kube::{fixtures, KubeCluster};
use hearth_vm_tests::relay_into;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const NODE: &str = "node-a";
const OTHER: &str = "node-b";
const ANN: &str = "machineconfiguration.openshift.io";

/// The repository's Kubernetes manifests (the tests apply the shipped files).
fn manifests(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../config/kubernetes")
        .join(dir)
}

fn node(name: &str) -> String {
    format!(r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{name}"}}}}"#)
}

/// A rendered MachineConfig with one file under /etc/demo, one oneshot unit, and `more` files.
fn machine_config(name: &str, file: &str, unit: &str, exec: &str, more: &str) -> String {
    fixtures::demo_machine_config(name, None, file, unit, exec, more)
}

/// The cluster's node-disruption policy: files under /etc/demo need nothing; the units are
/// restarted when they change; anything else reboots (the MCO's default).
const POLICY: &str = "apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata: {name: cluster}
spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/demo
      actions: [{type: None}]
    units:
    - name: hearth-hello.service
      actions: [{type: Restart, restart: {serviceName: hearth-hello.service}}]
    - name: hearth-bad.service
      actions: [{type: Restart, restart: {serviceName: hearth-bad.service}}]
";

/// Polls `f` until it gives `Some`, at most `limit`; the last value seen in the panic.
fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> (Option<T>, String)) -> T {
    let start = Instant::now();
    loop {
        let (got, last) = f();
        if let Some(v) = got {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "{what}: not within {limit:?}; last: {last}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The Node's annotations `currentConfig`, `state`, `reason`, as one `kubectl get` gives them
/// (one read: the agent writes the three in one patch).
fn node_status(cluster: &KubeCluster, name: &str) -> (String, String, String) {
    let annotations: serde_json::Value = cluster
        .kubectl(&[
            "get",
            "node",
            name,
            "-o",
            "jsonpath={.metadata.annotations}",
        ])
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    let get = |key: &str| {
        annotations[format!("{ANN}/{key}")]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    (get("currentConfig"), get("state"), get("reason"))
}

fn mcn(cluster: &KubeCluster) -> serde_json::Value {
    cluster
        .kubectl(&["get", "machineconfignode", NODE, "-o", "json"])
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default()
}

fn condition<'a>(mcn: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    mcn["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .unwrap_or(&serde_json::Value::Null)
}

fn annotate_desired(cluster: &KubeCluster, name: &str) {
    cluster
        .kubectl(&[
            "annotate",
            "--overwrite",
            "node",
            NODE,
            &format!("{ANN}/desiredConfig={name}"),
        ])
        .unwrap();
}

/// Waits until the Node's `state` is `state`; its (currentConfig, state, reason).
fn wait_for_state(cluster: &KubeCluster, state: &str, limit: Duration) -> (String, String, String) {
    wait_for(state, limit, || {
        let s = node_status(cluster, NODE);
        ((s.1 == state).then(|| s.clone()), format!("{s:?}"))
    })
}

#[test]
fn the_agent_follows_its_node_through_an_apply_a_failed_unit_a_reboot_and_drift() {
    let cluster = KubeCluster::start().expect("the test cluster starts");
    // The shipped CRDs and RBAC, the node's own right to its MachineConfigNode, which the
    // administrator creates (docs/kubernetes.md), and the cluster's node-disruption policy.
    let crds = manifests("crds");
    cluster
        .kubectl(&["apply", "-f", crds.to_str().unwrap()])
        .unwrap();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            crds.to_str().unwrap(),
        ])
        .unwrap();
    cluster
        .kubectl(&["apply", "-f", manifests("rbac").to_str().unwrap()])
        .unwrap();
    let per_node =
        std::fs::read_to_string(manifests("rbac").join("per-node/agent-node.yaml")).unwrap();
    cluster.apply(&per_node.replace("NODE_NAME", NODE)).unwrap();
    cluster.apply(&node(NODE)).unwrap();
    cluster.apply(&node(OTHER)).unwrap();
    cluster
        .apply(&format!(
            r#"{{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfigNode",
                "metadata":{{"name":"{NODE}"}},
                "spec":{{"node":{{"name":"{NODE}"}},"pool":{{"name":"worker"}},
                         "configVersion":{{"desired":"rendered-worker-1"}}}}}}"#
        ))
        .unwrap();
    cluster.apply(POLICY).unwrap();

    // The agent as the node runs it (the shipped unit and agent.env), following the API
    // server with the node's identity.
    let mut host = host_with_agent();
    let (kubeconfig, port) = cluster.connect_host(&host, NODE).unwrap();
    // The shipped unit as it is, told by /etc/hearth/agent.env.
    put(
        &host,
        "/etc/hearth/agent.env",
        &format!(
            "HEARTH_KUBERNETES=true\nHEARTH_KUBECONFIG={kubeconfig}\nHEARTH_NODE_NAME={NODE}\n"
        ),
    );
    install_service(&host, None);
    host.exec_ok(&[
        "systemctl",
        "enable",
        "--now",
        "--no-block",
        "hearth-agent.service",
    ])
    .unwrap();

    // 1. A config with a file and a unit: applied, Done, currentConfig = desiredConfig.
    cluster
        .apply(&machine_config(
            "rendered-worker-1",
            "one%0A",
            "hearth-hello.service",
            "/bin/true",
            "",
        ))
        .unwrap();
    annotate_desired(&cluster, "rendered-worker-1");
    wait_for("the file on disk", Duration::from_secs(90), || {
        let got = get(&host, "/etc/demo/hello");
        (got.clone().filter(|s| s == "one\n"), format!("{got:?}"))
    });
    let (current, _, reason) = wait_for_state(&cluster, "Done", Duration::from_secs(60));
    assert_eq!(current, "rendered-worker-1");
    assert_eq!(reason, "");
    assert_eq!(
        host.exec(&["systemctl", "is-active", "hearth-hello.service"])
            .unwrap()
            .stdout
            .trim(),
        "active"
    );
    let m = wait_for(
        "the MachineConfigNode Updated",
        Duration::from_secs(30),
        || {
            let m = mcn(&cluster);
            (
                (condition(&m, "Updated")["status"] == "True").then(|| m.clone()),
                m.to_string(),
            )
        },
    );
    assert_eq!(m["status"]["configVersion"]["current"], "rendered-worker-1");
    assert_eq!(condition(&m, "NodeDegraded")["status"], "False");

    // 2. A config whose unit fails: Degraded, the reason names the unit; the change is undone
    // and currentConfig stays; the MachineConfigNode has the whole reason.
    cluster
        .apply(&machine_config(
            "rendered-worker-2",
            "two%0A",
            "hearth-bad.service",
            "/bin/sh -c 'echo hearth-bad-marker-4242; exit 3'",
            "",
        ))
        .unwrap();
    annotate_desired(&cluster, "rendered-worker-2");
    let (current, _, reason) = wait_for_state(&cluster, "Degraded", Duration::from_secs(90));
    assert_eq!(current, "rendered-worker-1");
    assert!(reason.contains("hearth-bad.service"), "{reason}");
    assert!(reason.len() <= 1024, "{}", reason.len());
    assert_eq!(get(&host, "/etc/demo/hello").as_deref(), Some("one\n"));
    let m = wait_for(
        "the MachineConfigNode degraded",
        Duration::from_secs(30),
        || {
            let m = mcn(&cluster);
            (
                (condition(&m, "NodeDegraded")["status"] == "True").then(|| m.clone()),
                m.to_string(),
            )
        },
    );
    let message = condition(&m, "NodeDegraded")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("hearth-bad.service"), "{message}");
    assert!(message.contains("hearth-bad-marker-4242"), "{message}");
    assert_eq!(condition(&m, "Updated")["status"], "False");
    assert_eq!(m["spec"]["configVersion"]["desired"], "rendered-worker-2");

    // 3. The node's identity cannot annotate another node (the Node authorizer and
    // NodeRestriction: what docs/kubernetes.md says the agent can do).
    let own = cluster.node_kubeconfig(NODE).unwrap();
    let err = cluster
        .kubectl_as(
            &own,
            &["annotate", "node", OTHER, &format!("{ANN}/state=Done")],
        )
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.to_lowercase().contains("forbidden"), "{msg}");
    assert_eq!(node_status(&cluster, OTHER).1, "");

    // 4. A config that needs a reboot (a file no policy covers): Working, the agent reboots
    // the host; after the boot it verifies and writes Done and currentConfig.
    cluster
        .apply(&machine_config(
            "rendered-worker-3",
            "one%0A",
            "hearth-hello.service",
            "/bin/true",
            "      - path: /etc/hearth-reboot-flag\n        mode: 420\n        contents:\n          source: data:,3%0A\n",
        ))
        .unwrap();
    annotate_desired(&cluster, "rendered-worker-3");
    let boot = host
        .wait_for_reboot(Duration::from_secs(120))
        .expect("the agent rebooted the host");
    assert_eq!(boot.boot_count, 2);
    // Written before the apply started; the reboot came before anything else.
    let (current, state, _) = node_status(&cluster, NODE);
    assert_eq!(
        (current.as_str(), state.as_str()),
        ("rendered-worker-1", "Working")
    );
    // The new boot has a new network namespace, which cannot reach the API server until the
    // relay is there again: the agent says so and tries again with back-off ...
    wait_for(
        "the agent finding the API server unreachable",
        Duration::from_secs(60),
        || {
            let log = host
                .exec(&[
                    "journalctl",
                    "-b",
                    "-u",
                    "hearth-agent",
                    "--no-pager",
                    "-o",
                    "cat",
                ])
                .map(|o| o.stdout)
                .unwrap_or_default();
            (log.contains("cannot follow the Node").then_some(()), log)
        },
    );
    // ... and catches up once it can (the relay again, on the same port).
    relay_into(&host, cluster.server_addr().unwrap(), port).unwrap();
    let (current, _, reason) = wait_for_state(&cluster, "Done", Duration::from_secs(120));
    assert_eq!(current, "rendered-worker-3");
    assert_eq!(reason, "");
    assert_eq!(
        get(&host, "/etc/hearth-reboot-flag").as_deref(),
        Some("3\n")
    );
    let st = status(&host);
    let states: Vec<&str> = st["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["state"].as_str().unwrap())
        .collect();
    assert!(
        states.ends_with(&["Working", "Rebooting", "Done"]),
        "{states:?}"
    );

    // 5. A managed file changed by hand: Degraded as the MCO reports a content mismatch.
    put(&host, "/etc/demo/hello", "by hand\n");
    let (current, _, reason) = wait_for_state(&cluster, "Degraded", Duration::from_secs(60));
    assert_eq!(current, "rendered-worker-3");
    assert!(
        reason.starts_with("unexpected on-disk state validating against rendered-worker-3: /etc/demo/hello: content changed"),
        "{reason}"
    );
}
