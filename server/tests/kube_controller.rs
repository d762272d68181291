//! Kubernetes mode's controller (`hearth-server --kubernetes`) against a real kube-apiserver
//! (`hearth_vm_tests::kube`), with the shipped CRDs and RBAC, as the controller's service
//! account, and `kubectl` as the admin's client.
//!
//! The agents are **simulated**: the test writes the annotations the agent (and the MCO's
//! daemon) writes (`currentConfig`, `state`, `reason`) with `kubectl annotate`; the real agent
//! against the same control plane is `agent/tests/kube_agent.rs`.

use crate::common;

use hearth_vm_tests::kube::{fixtures, KubeCluster};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The shipped CRDs and RBAC (config/kubernetes/), as an operator installs them.
fn install(cluster: &KubeCluster) {
    cluster.install_crds().unwrap();
    cluster.install_rbac().unwrap();
}

const WAIT: Duration = Duration::from_secs(60);

/// The controller process, killed on drop (its log kept in the cluster's directory).
struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_controller(cluster: &KubeCluster, tag: &str) -> (Controller, std::path::PathBuf) {
    let kubeconfig = cluster.controller_kubeconfig().unwrap();
    let log = cluster.dir().join(format!("hearth-controller-{tag}.log"));
    let child = Command::new(env!("CARGO_BIN_EXE_hearth-server"))
        .arg("--kubernetes")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    (Controller(child), log)
}

fn pool(max_unavailable: u32) -> String {
    fixtures::pool("worker", max_unavailable)
}

fn machine_config(contents: &str) -> String {
    format!(
        r#"apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-motd
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
        - path: /etc/motd
          mode: 420
          overwrite: true
          contents:
            source: data:,{contents}
"#
    )
}

fn node(name: &str) -> String {
    fixtures::node(name, "worker")
}

fn annotation(cluster: &KubeCluster, node: &str, key: &str) -> String {
    let key = key.replace('.', "\\.");
    cluster
        .kubectl(&[
            "get",
            "node",
            node,
            "-o",
            &format!("jsonpath={{.metadata.annotations.{key}}}"),
        ])
        .unwrap()
}

fn desired(cluster: &KubeCluster, node: &str) -> String {
    annotation(
        cluster,
        node,
        "machineconfiguration.openshift.io/desiredConfig",
    )
}

/// What the agent writes: its current config and state (and reason).
fn report(cluster: &KubeCluster, node: &str, current: &str, state: &str, reason: &str) {
    cluster
        .kubectl(&[
            "annotate",
            "--overwrite",
            "node",
            node,
            &format!("machineconfiguration.openshift.io/currentConfig={current}"),
            &format!("machineconfiguration.openshift.io/state={state}"),
            &format!("machineconfiguration.openshift.io/reason={reason}"),
        ])
        .unwrap();
}

fn pool_field(cluster: &KubeCluster, path: &str) -> String {
    cluster
        .kubectl(&["get", "mcp", "worker", "-o", &format!("jsonpath={path}")])
        .unwrap()
}

fn condition(cluster: &KubeCluster, kind: &str) -> String {
    pool_field(
        cluster,
        &format!("{{.status.conditions[?(@.type==\"{kind}\")].status}}"),
    )
}

/// The messages of the Events in `default` that `selector` (a field selector) picks.
fn event_messages(c: &KubeCluster, selector: &str) -> anyhow::Result<String> {
    c.kubectl(&[
        "get",
        "events",
        "-n",
        "default",
        "--field-selector",
        selector,
        "-o",
        "jsonpath={.items[*].message}",
    ])
}

/// MachineConfig `one` and node `w0` under a controller started now: the first render handed
/// to `w0` and reported `Done` in. The controller, its log and the render's name.
fn one_node_done(cluster: &mut KubeCluster) -> (Controller, std::path::PathBuf, String) {
    cluster.apply(&machine_config("one")).unwrap();
    cluster.apply(&node("w0")).unwrap();
    let (mut controller, log) = start_controller(cluster, "c1");
    until(cluster, &mut controller, &log, "first render", |c| {
        desired(c, "w0").starts_with("rendered-worker-")
    });
    let first = desired(cluster, "w0");
    report(cluster, "w0", &first, "Done", "");
    (controller, log, first)
}

/// Waits until `f` holds, checking the cluster and the controller are still up.
fn until(
    cluster: &mut KubeCluster,
    controller: &mut Controller,
    log: &Path,
    what: &str,
    f: impl Fn(&KubeCluster) -> bool,
) {
    let started = Instant::now();
    loop {
        cluster.check_running().unwrap();
        if let Some(status) = controller.0.try_wait().unwrap() {
            panic!(
                "the controller exited ({status}): {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        if f(cluster) {
            return;
        }
        assert!(
            started.elapsed() < WAIT,
            "{what}: not within {WAIT:?}; controller log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_controller_renders_rolls_out_under_max_unavailable_and_halts_on_degraded_with_simulated_agents(
) {
    let mut cluster = KubeCluster::start().expect("the test cluster starts");
    install(&cluster);
    cluster.apply(&pool(1)).unwrap();
    cluster.apply(&machine_config("one")).unwrap();
    for n in ["w0", "w1"] {
        cluster.apply(&node(n)).unwrap();
    }
    let (mut controller, log) = start_controller(&cluster, "c1");

    // Rendered, owned by the pool; both nodes (never reported) handed it at once.
    until(&mut cluster, &mut controller, &log, "first render", |c| {
        desired(c, "w0").starts_with("rendered-worker-") && desired(c, "w1") == desired(c, "w0")
    });
    let first = desired(&cluster, "w0");
    let owner = cluster
        .kubectl(&[
            "get",
            "mc",
            &first,
            "-o",
            "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}",
        ])
        .unwrap();
    assert_eq!(owner, "MachineConfigPool/worker");
    assert_eq!(pool_field(&cluster, "{.spec.configuration.name}"), first);
    assert_eq!(
        pool_field(&cluster, "{.spec.configuration.source[0].name}"),
        "50-motd"
    );
    // What the controller did, as Events of the pool and the nodes.
    until(
        &mut cluster,
        &mut controller,
        &log,
        "a Rendered event",
        |c| {
            event_messages(
                c,
                "involvedObject.kind=MachineConfigPool,involvedObject.name=worker,reason=Rendered",
            )
            .is_ok_and(|m| m.contains(&first))
        },
    );
    // Each node has its MachineConfigNode (its status is the agent's).
    until(
        &mut cluster,
        &mut controller,
        &log,
        "MachineConfigNodes",
        |c| {
            ["w0", "w1"].iter().all(|n| {
                c.kubectl(&[
                    "get",
                    "machineconfignode",
                    n,
                    "-o",
                    "jsonpath={.spec.pool.name}/{.spec.configVersion.desired}",
                ])
                .is_ok_and(|o| o == format!("worker/{}", desired(c, n)))
            })
        },
    );
    // `kubectl get mc` shows who generated it, as `oc get mc` does.
    let mcs = cluster.kubectl(&["get", "mc"]).unwrap();
    let line = mcs.lines().find(|l| l.starts_with(&first)).unwrap();
    assert!(line.contains("hearth-server"), "{mcs}");

    // The agents reach it: the pool is updated, with the MCO's counts and columns.
    for n in ["w0", "w1"] {
        report(&cluster, n, &first, "Done", "");
    }
    until(&mut cluster, &mut controller, &log, "pool updated", |c| {
        condition(c, "Updated") == "True"
    });
    assert_eq!(pool_field(&cluster, "{.status.configuration.name}"), first);
    assert_eq!(pool_field(&cluster, "{.status.machineCount}"), "2");
    assert_eq!(pool_field(&cluster, "{.status.updatedMachineCount}"), "2");
    let table = cluster.kubectl(&["get", "mcp", "worker"]).unwrap();
    let row = fixtures::first_row(&table);
    let col = |name: &str| row.get(name).map(String::as_str).unwrap_or_default();
    assert_eq!(col("CONFIG"), first, "{table}");
    assert_eq!(col("UPDATED"), "True", "{table}");
    assert_eq!(col("UPDATING"), "False", "{table}");
    assert_eq!(col("DEGRADED"), "False", "{table}");
    assert_eq!(col("MACHINECOUNT"), "2", "{table}");
    assert_eq!(col("UPDATEDMACHINECOUNT"), "2", "{table}");

    // A change rolls out one node at a time (maxUnavailable: 1), in name order.
    cluster.apply(&machine_config("two")).unwrap();
    until(
        &mut cluster,
        &mut controller,
        &log,
        "w0 handed the change",
        |c| desired(c, "w0") != first,
    );
    let second = desired(&cluster, "w0");
    assert!(second.starts_with("rendered-worker-"));
    until(
        &mut cluster,
        &mut controller,
        &log,
        "w0's MachineConfigNode follows",
        |c| {
            c.kubectl(&[
                "get",
                "machineconfignode",
                "w0",
                "-o",
                "jsonpath={.spec.configVersion.desired}",
            ])
            .is_ok_and(|o| o == second)
        },
    );
    // w0 works on it, and w1 waits: sampled while the controller has every reason to decide.
    report(&cluster, "w0", &first, "Working", "");
    let sampled = Instant::now();
    while sampled.elapsed() < Duration::from_secs(2) {
        assert_eq!(desired(&cluster, "w1"), first, "two nodes updating at once");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(condition(&cluster, "Updating"), "True");
    report(&cluster, "w0", &second, "Done", "");
    until(
        &mut cluster,
        &mut controller,
        &log,
        "w1 handed the change",
        |c| desired(c, "w1") == second,
    );
    report(&cluster, "w1", &second, "Done", "");
    until(
        &mut cluster,
        &mut controller,
        &log,
        "pool on the second render",
        |c| {
            pool_field(c, "{.status.configuration.name}") == second
                && condition(c, "Updated") == "True"
        },
    );
    // The first render stays while the retention keeps it (5 per pool).
    cluster.kubectl(&["get", "mc", &first]).unwrap();

    // A node fails its update: the pool is degraded (node object and pool condition) and the
    // rollout halts: the other node is not handed the change.
    cluster.apply(&machine_config("three")).unwrap();
    until(
        &mut cluster,
        &mut controller,
        &log,
        "w0 handed the third",
        |c| desired(c, "w0") != second,
    );
    let third = desired(&cluster, "w0");
    report(
        &cluster,
        "w0",
        &second,
        "Degraded",
        "step 2 of 3 (restart unit motd.service): exited with status 1",
    );
    until(&mut cluster, &mut controller, &log, "pool degraded", |c| {
        condition(c, "NodeDegraded") == "True" && condition(c, "Degraded") == "True"
    });
    assert_eq!(pool_field(&cluster, "{.status.degradedMachineCount}"), "1");
    // The node and its reason where a kubectl user reads them (there is no hearth CLI here).
    let degraded = pool_field(
        &cluster,
        "{.status.conditions[?(@.type==\"NodeDegraded\")].message}",
    );
    assert_eq!(
        degraded,
        "1 node(s) degraded: node w0 is reporting: step 2 of 3 (restart unit motd.service): exited with status 1"
    );
    let table = cluster
        .kubectl(&["get", "mcp", "worker", "--no-headers"])
        .unwrap();
    assert!(table.contains("True"), "{table}");
    let message = pool_field(
        &cluster,
        "{.status.conditions[?(@.type==\"Updating\")].message}",
    );
    assert!(message.contains("w0"), "{message}");
    assert_eq!(desired(&cluster, "w1"), second);

    // Fixed on the node (it reaches the render): the rollout goes on to w1.
    report(&cluster, "w0", &third, "Done", "");
    until(
        &mut cluster,
        &mut controller,
        &log,
        "w1 handed the third",
        |c| desired(c, "w1") == third,
    );
    drop(controller);
}

#[test]
fn a_machine_config_the_controller_refuses_holds_its_pool_with_the_reason() {
    let mut cluster = KubeCluster::start().expect("the test cluster starts");
    install(&cluster);
    cluster.apply(&pool(1)).unwrap();
    let (mut controller, log, first) = one_node_done(&mut cluster);
    // A file at a relative path: the API server's schema lets it through, hearth's reader
    // does not.
    cluster
        .apply(
            &machine_config("two")
                .replace("50-motd", "60-bad")
                .replace("/etc/motd", "etc/motd"),
        )
        .unwrap();
    until(
        &mut cluster,
        &mut controller,
        &log,
        "render degraded",
        |c| condition(c, "RenderDegraded") == "True",
    );
    let message = pool_field(
        &cluster,
        "{.status.conditions[?(@.type==\"RenderDegraded\")].message}",
    );
    assert!(message.contains("60-bad"), "{message}");
    assert_eq!(pool_field(&cluster, "{.spec.configuration.name}"), first);
    assert_eq!(desired(&cluster, "w0"), first);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("MachineConfig/60-bad"), "{logged}");
    // Deleted: the pool renders again (without it) and is no longer degraded.
    cluster.kubectl(&["delete", "mc", "60-bad"]).unwrap();
    until(
        &mut cluster,
        &mut controller,
        &log,
        "render recovered",
        |c| condition(c, "RenderDegraded") == "False",
    );
    drop(controller);
}

fn lease_holder(cluster: &KubeCluster) -> String {
    cluster
        .kubectl(&[
            "get",
            "lease",
            "-n",
            "hearth-system",
            "hearth-controller",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
        .unwrap_or_default()
}

/// Issue 31: a controller stopped with SIGTERM kept its Lease, so the next one waited for it to
/// run out (15 s). Now it gives the Lease up as it stops: right after it exited, nobody holds it.
#[test]
fn a_controller_stopped_with_sigterm_gives_the_lease_up() {
    let mut cluster = KubeCluster::start().expect("the test cluster starts");
    install(&cluster);
    let (mut first, log) = start_controller(&cluster, "c1");
    let pid = first.0.id();
    until(&mut cluster, &mut first, &log, "the lease held", |c| {
        lease_holder(c).ends_with(&format!("_{pid}"))
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = first.0.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "{status}: {text}");
    assert_eq!(lease_holder(&cluster), "", "{text}");
    assert!(text.contains("released the controller lease"), "{text}");
}

#[test]
fn one_controller_at_a_time_and_the_second_takes_over_when_the_first_dies() {
    let mut cluster = KubeCluster::start().expect("the test cluster starts");
    install(&cluster);
    cluster.apply(&pool(1)).unwrap();
    cluster.apply(&machine_config("one")).unwrap();
    for n in ["w0", "w1"] {
        cluster.apply(&node(n)).unwrap();
    }
    let (mut first, log1) = start_controller(&cluster, "c1");
    until(&mut cluster, &mut first, &log1, "first render", |c| {
        desired(c, "w0").starts_with("rendered-worker-")
    });
    let pid1 = first.0.id();
    assert!(lease_holder(&cluster).ends_with(&format!("_{pid1}")));
    let (mut second, log2) = start_controller(&cluster, "c2");
    until(&mut cluster, &mut second, &log2, "the second waits", |_| {
        std::fs::read_to_string(&log2)
            .unwrap_or_default()
            .contains("another controller holds the lease")
    });
    let rendered = desired(&cluster, "w0");
    for n in ["w0", "w1"] {
        report(&cluster, n, &rendered, "Done", "");
    }
    cluster.apply(&machine_config("two")).unwrap();
    until(
        &mut cluster,
        &mut first,
        &log1,
        "w0 handed the change",
        |c| desired(c, "w0") != rendered,
    );
    let next = desired(&cluster, "w0");
    // The first controller dies (SIGKILL: no goodbye); the second takes the Lease once it
    // runs out and carries the rollout on.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    report(&cluster, "w0", &next, "Done", "");
    until(
        &mut cluster,
        &mut second,
        &log2,
        "w1 handed the change by the second",
        |c| desired(c, "w1") == next,
    );
    let pid2 = second.0.id();
    assert!(lease_holder(&cluster).ends_with(&format!("_{pid2}")));
    let transitions = cluster
        .kubectl(&[
            "get",
            "lease",
            "-n",
            "hearth-system",
            "hearth-controller",
            "-o",
            "jsonpath={.spec.leaseTransitions}",
        ])
        .unwrap();
    assert_eq!(transitions, "1");
}

/// What the kubelet would write: the pod runs and is ready (through the status subresource).
fn running(cluster: &KubeCluster, namespace: &str, pod: &str) {
    cluster
        .replace_status_as(
            cluster.kubeconfig(),
            &format!("/api/v1/namespaces/{namespace}/pods/{pod}"),
            serde_json::json!({"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}
            ]}),
        )
        .unwrap();
}

fn node_field(cluster: &KubeCluster, node: &str, path: &str) -> String {
    cluster
        .kubectl(&["get", "node", node, "-o", &format!("jsonpath={path}")])
        .unwrap()
}

#[test]
fn a_disruption_budget_blocks_the_drain_naming_pod_and_budget_and_lifting_it_completes_the_rollout()
{
    let mut cluster = KubeCluster::start().expect("the test cluster starts");
    install(&cluster);
    cluster.apply(&pool(1)).unwrap();
    cluster.apply(&machine_config("one")).unwrap();
    for n in ["w0", "w1"] {
        cluster.apply(&node(n)).unwrap();
    }
    let (mut controller, log) = start_controller(&cluster, "c1");
    until(&mut cluster, &mut controller, &log, "first render", |c| {
        desired(c, "w0").starts_with("rendered-worker-") && desired(c, "w1") == desired(c, "w0")
    });
    let first = desired(&cluster, "w0");
    for n in ["w0", "w1"] {
        report(&cluster, n, &first, "Done", "");
    }
    // A workload on w0 whose budget allows no disruption.
    guarded_pod(&mut cluster, "web", "w0");

    // A change that needs a reboot (a file outside the MCO's no-reboot list): w0 is cordoned
    // and its pod's eviction is refused; the node and the pool say which pod and budget.
    cluster.apply(&machine_config("two")).unwrap();
    until(&mut cluster, &mut controller, &log, "drain blocked", |c| {
        annotation(c, "w0", "hearth.io/drain-blocked").contains("PodDisruptionBudget default/web")
    });
    let blocked = annotation(&cluster, "w0", "hearth.io/drain-blocked");
    assert!(blocked.contains("pod default/web-0"), "{blocked}");
    assert!(blocked.contains("minAvailable 1"), "{blocked}");
    assert_eq!(node_field(&cluster, "w0", "{.spec.unschedulable}"), "true");
    assert_eq!(
        desired(&cluster, "w0"),
        first,
        "handed its config before the drain"
    );
    assert_eq!(desired(&cluster, "w1"), first);
    // And as an Event of the node (`kubectl describe node w0` shows it).
    until(
        &mut cluster,
        &mut controller,
        &log,
        "a DrainBlocked event",
        |c| {
            event_messages(c, "involvedObject.name=w0,reason=DrainBlocked")
                .is_ok_and(|m| m.contains("PodDisruptionBudget default/web"))
        },
    );
    until(&mut cluster, &mut controller, &log, "pool says why", |c| {
        pool_field(c, "{.status.conditions[?(@.type==\"Updating\")].message}")
            .contains("PodDisruptionBudget default/web")
    });

    // The budget is lifted: the pod is evicted (the test stands in for the kubelet, which
    // would stop it: no container runs here), the node gets its config.
    cluster
        .kubectl(&["delete", "pdb", "web", "-n", "default"])
        .unwrap();
    kubelet_removes_evicted(&mut cluster, &mut controller, &log, "web-0");
    until(
        &mut cluster,
        &mut controller,
        &log,
        "w0 handed the change",
        |c| desired(c, "w0") != first,
    );
    let second = desired(&cluster, "w0");
    assert_eq!(annotation(&cluster, "w0", "hearth.io/drain-blocked"), "");
    assert_eq!(desired(&cluster, "w1"), first);
    // Done after its reboot: uncordoned, and w1's turn (no pods: drained at once).
    report(&cluster, "w0", &second, "Done", "");
    until(&mut cluster, &mut controller, &log, "w0 uncordoned", |c| {
        node_field(c, "w0", "{.spec.unschedulable}").is_empty()
            && annotation(c, "w0", "hearth.io/cordoned").is_empty()
    });
    until(
        &mut cluster,
        &mut controller,
        &log,
        "w1 handed the change",
        |c| desired(c, "w1") == second,
    );
    assert_eq!(node_field(&cluster, "w1", "{.spec.unschedulable}"), "true");
    report(&cluster, "w1", &second, "Done", "");
    until(&mut cluster, &mut controller, &log, "w1 uncordoned", |c| {
        node_field(c, "w1", "{.spec.unschedulable}").is_empty()
    });
}

/// The files hearth reads without error (the others are refused by `hearth apply`).
fn readable(files: Vec<(String, String)>) -> Vec<(String, String)> {
    files
        .into_iter()
        .filter(|(name, text)| {
            let (_, diags) = hearth_config::manifest::read_str(name, text);
            !diags.iter().any(|d| d.is_error())
        })
        .collect()
}

#[test]
fn the_fixtures_render_to_the_same_configs_as_on_hearth_server() {
    let good = readable(hearth_testdata::manifest_files());
    assert!(good.len() >= 9, "{}", good.len());
    renders_as_on_hearth_server(&good);
}

#[test]
#[ignore = "needs the MCO e2e corpus: HEARTH_SHARED=DIR or ../shared beside the clone (.ci/run runs it)"]
fn mco_corpus_renders_to_the_same_configs_as_on_hearth_server() {
    let good = readable(hearth_testdata::mco_corpus_files());
    assert!(good.len() >= 15, "{}", good.len());
    renders_as_on_hearth_server(&good);
}

/// Every pool of the files renders in Kubernetes mode to the name hearth-server gives it.
fn renders_as_on_hearth_server(good: &[(String, String)]) {
    // hearth-server (embedded store, in this process): each pool's target.
    let dir = tempfile::tempdir().unwrap();
    let embedded: std::collections::BTreeMap<String, Option<String>> =
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            let s = common::start(dir.path(), common::options(5)).await;
            let api = common::Api::admin(&s);
            let a = api.apply(good).await;
            assert!(a.status.is_success(), "{}", a.text);
            let pools = api.get("/api/v1/pools").await.json;
            let out = pools["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    (
                        p["metadata"]["name"].as_str().unwrap().to_string(),
                        p["spec"]["configuration"]["name"]
                            .as_str()
                            .map(str::to_string),
                    )
                })
                .collect();
            s.shutdown().await;
            out
        });
    assert!(
        embedded.get("worker").is_some_and(Option::is_some),
        "{embedded:?}"
    );

    // The same files through kubectl (created: some are over client-side apply's limit).
    let mut cluster = KubeCluster::start().expect("the test cluster starts");
    install(&cluster);
    let mut kube_pools = Vec::new();
    for (name, text) in good {
        let path = cluster.dir().join(name);
        std::fs::write(&path, text).unwrap();
        let created = cluster
            .kubectl(&["create", "-f", &path.to_string_lossy(), "-o", "name"])
            .unwrap();
        kube_pools.extend(
            created
                .lines()
                .filter_map(|l| {
                    l.strip_prefix("machineconfigpool.machineconfiguration.openshift.io/")
                })
                .map(str::to_string),
        );
    }
    assert!(kube_pools.contains(&"worker".to_string()), "{kube_pools:?}");
    let (mut controller, log) = start_controller(&cluster, "c1");
    // Every pool of the files renders to the name hearth-server gives it (content-addressed
    // renders of the same configs by the same code), or fails there too.
    for pool in &kube_pools {
        let want = embedded.get(pool).cloned().flatten();
        until(&mut cluster, &mut controller, &log, pool, |c| {
            let path = |p: &str| {
                c.kubectl(&["get", "mcp", pool, "-o", &format!("jsonpath={p}")])
                    .unwrap_or_default()
            };
            match &want {
                Some(t) => path("{.spec.configuration.name}") == *t,
                None => {
                    path("{.status.conditions[?(@.type==\"RenderDegraded\")].status}") == "True"
                }
            }
        });
    }
}

#[test]
fn a_drain_past_its_timeout_is_skipped_or_fails_as_the_pool_says() {
    let mut cluster = KubeCluster::start().expect("the test cluster starts");
    install(&cluster);
    cluster.apply(&pool(1)).unwrap();
    cluster
        .kubectl(&[
            "annotate",
            "mcp",
            "worker",
            "hearth.io/drain-timeout=2s",
            "hearth.io/on-drain-timeout=skip",
        ])
        .unwrap();
    let (mut controller, log, first) = one_node_done(&mut cluster);
    // A pod its budget will not let go.
    guarded_pod(&mut cluster, "db", "w0");

    // `skip`: past its 2 s the drain gives up and the node gets the change anyway.
    cluster.apply(&machine_config("two")).unwrap();
    until(&mut cluster, &mut controller, &log, "skipped", |c| {
        desired(c, "w0") != first
    });
    let second = desired(&cluster, "w0");
    until(
        &mut cluster,
        &mut controller,
        &log,
        "a DrainSkipped event",
        |c| {
            event_messages(c, "involvedObject.name=w0,reason=DrainSkipped")
                .is_ok_and(|m| !m.trim().is_empty())
        },
    );
    report(&cluster, "w0", &second, "Done", "");
    until(&mut cluster, &mut controller, &log, "uncordoned", |c| {
        node_field(c, "w0", "{.spec.unschedulable}").is_empty()
    });

    // `fail`: past its timeout the node is marked, counts as Degraded, keeps its config and
    // stays cordoned; nothing retries until an admin clears the mark.
    cluster
        .kubectl(&[
            "annotate",
            "--overwrite",
            "mcp",
            "worker",
            "hearth.io/on-drain-timeout=fail",
        ])
        .unwrap();
    cluster.apply(&machine_config("three")).unwrap();
    until(&mut cluster, &mut controller, &log, "drain failed", |c| {
        annotation(c, "w0", "hearth.io/drain-failed").contains("PodDisruptionBudget default/db")
    });
    until(
        &mut cluster,
        &mut controller,
        &log,
        "the pool is degraded",
        |c| condition(c, "NodeDegraded") == "True",
    );
    assert_eq!(desired(&cluster, "w0"), second);
    assert_eq!(node_field(&cluster, "w0", "{.spec.unschedulable}"), "true");
    let sampled = Instant::now();
    while sampled.elapsed() < Duration::from_secs(7) {
        assert_eq!(
            annotation(&cluster, "w0", "hearth.io/drain-for"),
            "",
            "a failed drain started again"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Cleared (the budget lifted first): drained again, the pod evicted, the change handed.
    cluster
        .kubectl(&["delete", "pdb", "db", "-n", "default"])
        .unwrap();
    cluster
        .kubectl(&["annotate", "node", "w0", "hearth.io/drain-failed-"])
        .unwrap();
    kubelet_removes_evicted(&mut cluster, &mut controller, &log, "db-0");
    until(
        &mut cluster,
        &mut controller,
        &log,
        "the third handed",
        |c| desired(c, "w0") != second,
    );
}

/// A pod `<app>-0` bound to `node` with a PodDisruptionBudget `<app>` of `minAvailable: 1`
/// that lets none of it go: the test plays the kubelet's part (none runs here) and marks the
/// pod running and ready, so the budget counts it (a pending pod's eviction ignores budgets);
/// returns once the disruption controller has computed the budget (1 healthy, 0 allowed).
fn guarded_pod(cluster: &mut KubeCluster, app: &str, node: &str) {
    let _ = cluster.kubectl(&["create", "serviceaccount", "default", "-n", "default"]);
    let pod = format!("{app}-0");
    cluster
        .apply(
            &serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": "default", "labels": {"app": app}},
                "spec": {"nodeName": node, "automountServiceAccountToken": false,
                         "containers": [{"name": app, "image": format!("registry.invalid/{app}:1")}]}
            })
            .to_string(),
        )
        .unwrap();
    running(cluster, "default", &pod);
    cluster
        .apply(
            &serde_json::json!({
                "apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
                "metadata": {"name": app, "namespace": "default"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}}
            })
            .to_string(),
        )
        .unwrap();
    cluster
        .kubectl_until(
            &[
                "get",
                "pdb",
                app,
                "-n",
                "default",
                "-o",
                "jsonpath={.status.currentHealthy}/{.status.disruptionsAllowed}",
            ],
            WAIT,
            |o| o == "1/0",
        )
        .unwrap();
}

/// Waits until the controller has evicted `pod` (it is terminating), then removes it as the
/// kubelet would once its containers stopped (none run here).
fn kubelet_removes_evicted(
    cluster: &mut KubeCluster,
    controller: &mut Controller,
    log: &Path,
    pod: &str,
) {
    until(cluster, controller, log, "pod evicted", |c| {
        c.kubectl(&[
            "get",
            "pod",
            pod,
            "-n",
            "default",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .map(|t| !t.is_empty())
        .unwrap_or(true)
    });
    let _ = cluster.kubectl(&[
        "delete",
        "pod",
        pod,
        "-n",
        "default",
        "--grace-period=0",
        "--force",
    ]);
}
