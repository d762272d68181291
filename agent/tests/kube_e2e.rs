//! Kubernetes mode end to end: a real kube-apiserver (`hearth_vm_tests::kube`), hearth's
//! controller (`hearth-server --kubernetes`, as its service account) and **two real agents**
//! (`hearth-agent run --kubernetes`, the shipped service in booted systemd containers, each with
//! its node's identity and the shipped RBAC); `kubectl` is the admin's client.
//!
//! The admin applies a pool and a MachineConfig; the controller renders them and hands both
//! nodes the render; both agents apply it and reach `Done`, which `kubectl get mcp` counts. A
//! change rolls through them one at a time; a unit that fails leaves the node `Degraded` with the
//! reason on its Node and in the pool's condition, and the rollout halts.

use crate::common;

use common::*;
use hearth_vm_tests::kube::{fixtures, KubeCluster};
use hearth_vm_tests::SystemdHost;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ANN: &str = "machineconfiguration.openshift.io";
const NODES: [&str; 2] = ["node-a", "node-b"];
/// Containers boot and agents apply in seconds; this bounds a step on a busy machine.
const LIMIT: Duration = Duration::from_secs(90);

struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The admin's MachineConfig: a file under /etc/demo, and a oneshot unit running `exec`.
fn machine_config(file: &str, exec: &str) -> String {
    fixtures::demo_machine_config(
        "50-demo",
        Some("worker"),
        file,
        "hearth-demo.service",
        exec,
        "",
    )
}

/// Files under /etc/demo need nothing, the demo unit is restarted: no reboot, no drain.
const POLICY: &str = "apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata: {name: cluster}
spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/demo
      actions: [{type: None}]
    units:
    - name: hearth-demo.service
      actions: [{type: Restart, restart: {serviceName: hearth-demo.service}}]
";

/// The Node's MCO annotations in one read: (desiredConfig, currentConfig, state, reason).
fn node_status(cluster: &KubeCluster, name: &str) -> (String, String, String, String) {
    let a: serde_json::Value = cluster
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
    let get = |k: &str| {
        a[format!("{ANN}/{k}")]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    (
        get("desiredConfig"),
        get("currentConfig"),
        get("state"),
        get("reason"),
    )
}

fn pool_condition(cluster: &KubeCluster, kind: &str, field: &str) -> String {
    cluster
        .kubectl(&[
            "get",
            "mcp",
            "worker",
            "-o",
            &format!("jsonpath={{.status.conditions[?(@.type==\"{kind}\")].{field}}}"),
        ])
        .unwrap_or_default()
}

fn wait(
    what: &str,
    controller: &mut Controller,
    log: &std::path::Path,
    mut f: impl FnMut() -> bool,
) {
    let start = Instant::now();
    while !f() {
        if let Some(status) = controller.0.try_wait().unwrap() {
            panic!(
                "the controller exited ({status}): {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(
            start.elapsed() < LIMIT,
            "{what}: not within {LIMIT:?}; controller log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A booted container running the shipped agent service as node `name`.
fn agent_node(cluster: &KubeCluster, name: &str) -> SystemdHost {
    let host = host_with_agent();
    let (kubeconfig, _) = cluster.connect_host(&host, name).unwrap();
    install_service(
        &host,
        Some(&format!(
            "[Service]\nExecStart=\nExecStart=/usr/bin/hearth-agent run --kubernetes --kubeconfig {kubeconfig} --node-name {name}\n"
        )),
    );
    host.exec_ok(&[
        "systemctl",
        "enable",
        "--now",
        "--no-block",
        "hearth-agent.service",
    ])
    .unwrap();
    host
}

#[test]
fn the_controller_and_two_real_agents_roll_a_pool_out_and_halt_on_a_failing_unit() {
    let cluster = KubeCluster::start().expect("the test cluster starts");
    cluster.install_crds().unwrap();
    cluster.install_rbac().unwrap();
    for n in NODES {
        cluster.grant_node(n).unwrap();
        cluster.apply(&fixtures::node(n, "worker")).unwrap();
    }
    cluster.apply(POLICY).unwrap();
    cluster.apply(&fixtures::pool("worker", 1)).unwrap();
    cluster
        .apply(&machine_config("one%0A", "/bin/true"))
        .unwrap();

    // The controller, as its service account.
    let kubeconfig = cluster.controller_kubeconfig().unwrap();
    let server = hearth_vm_tests::qemu::workspace_binary("hearth-server", "hearth-server").unwrap();
    let log = cluster.dir().join("hearth-controller.log");
    let mut controller = Controller(
        Command::new(server)
            .args(["--kubernetes", "--kubeconfig"])
            .arg(&kubeconfig)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let hosts: Vec<SystemdHost> = NODES.iter().map(|n| agent_node(&cluster, n)).collect();

    // Both nodes run the render: the file on disk, the unit active, Done in the MCO's
    // annotations, and `kubectl get mcp` counts them.
    wait(
        "both nodes Done in the render",
        &mut controller,
        &log,
        || {
            NODES.iter().all(|n| {
                let (d, c, s, _) = node_status(&cluster, n);
                d.starts_with("rendered-worker-") && c == d && s == "Done"
            })
        },
    );
    let first = node_status(&cluster, NODES[0]).0;
    for h in &hosts {
        assert_eq!(get(h, "/etc/demo/hello").as_deref(), Some("one\n"));
        assert_eq!(
            h.exec(&["systemctl", "is-active", "hearth-demo.service"])
                .unwrap()
                .stdout_trimmed(),
            "active"
        );
    }
    wait("the pool counts them", &mut controller, &log, || {
        pool_condition(&cluster, "Updated", "status") == "True"
    });
    let table = cluster.kubectl(&["get", "mcp", "worker"]).unwrap();
    let row = fixtures::first_row(&table);
    let col = |name: &str| row.get(name).map(String::as_str).unwrap_or_default();
    assert_eq!(col("CONFIG"), first, "{table}");
    assert_eq!(col("MACHINECOUNT"), "2", "{table}");
    assert_eq!(col("UPDATEDMACHINECOUNT"), "2", "{table}");
    assert_eq!(col("READYMACHINECOUNT"), "2", "{table}");
    assert_eq!(col("DEGRADEDMACHINECOUNT"), "0", "{table}");
    // Each node's MachineConfigNode: made by the controller, its status by the agent.
    for n in NODES {
        let m = cluster
            .kubectl(&[
                "get",
                "machineconfignode",
                n,
                "-o",
                "jsonpath={.spec.configVersion.desired}/{.status.configVersion.current}",
            ])
            .unwrap();
        assert_eq!(m, format!("{first}/{first}"));
    }

    // A change: both nodes get it, one at a time (never both handed it while one works).
    cluster
        .apply(&machine_config("two%0A", "/bin/true"))
        .unwrap();
    let mut both_updating = false;
    wait(
        "both nodes Done in the change",
        &mut controller,
        &log,
        || {
            let s: Vec<_> = NODES.iter().map(|n| node_status(&cluster, n)).collect();
            both_updating |= s.iter().all(|(d, c, _, _)| d != &first && c != d);
            s.iter()
                .all(|(d, c, st, _)| d != &first && c == d && st == "Done")
        },
    );
    assert!(!both_updating, "two nodes were updating at once");
    let second = node_status(&cluster, NODES[0]).0;
    for h in &hosts {
        assert_eq!(get(h, "/etc/demo/hello").as_deref(), Some("two\n"));
    }

    // A unit that fails: the first node is Degraded with the reason naming the unit, on its Node
    // and in the pool's condition; the rollout halts before the second node.
    cluster
        .apply(&machine_config("three%0A", "/bin/false"))
        .unwrap();
    wait("node-a Degraded", &mut controller, &log, || {
        node_status(&cluster, NODES[0]).2 == "Degraded"
    });
    let (_, current, _, reason) = node_status(&cluster, NODES[0]);
    assert_eq!(current, second, "the failed change is undone");
    assert!(reason.contains("hearth-demo.service"), "{reason}");
    wait("the pool is degraded", &mut controller, &log, || {
        pool_condition(&cluster, "NodeDegraded", "status") == "True"
    });
    assert!(pool_condition(&cluster, "Updating", "message").contains(NODES[0]));
    let (desired_b, current_b, state_b, _) = node_status(&cluster, NODES[1]);
    assert_eq!(
        (desired_b, current_b, state_b.as_str()),
        (second.clone(), second, "Done")
    );
    assert_eq!(
        get(&hosts[1], "/etc/demo/hello").as_deref(),
        Some("two\n"),
        "the halted rollout left node-b alone"
    );
}
