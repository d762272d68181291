//! Real agents on real replicas: three hearth-server replicas (the built binary) on a real
//! three-member etcd on the test machine, and three hearth-agent services in three booted
//! systemd containers that share a network namespace, linked to the test machine by a veth pair.
//! Each agent is given all three replicas' URLs, its own first, so each follows a different
//! replica. A change (a file whose policy restarts a unit that runs for 3 s, so that each
//! node's update takes a while) rolls out under `maxUnavailable: 1`; after the first node is through, the
//! etcd leader is killed; after the second, the replica holding the controller role, which is
//! the one the third node follows. The rollout completes on the files of every container, the
//! third agent having moved to another replica; never more than one node disrupted, no node
//! counted twice or enrolled again.

use crate::common;

use crate::test_cluster;

use common::binary::{self, api_for, Server};
use common::hosts::{agent_unit, binary, install, mc, put};
use common::replicas::{controller, eventually, ip, node_items, replica_dir};
use common::*;
use hearth_vm_tests::{HostOptions, SharedNetwork, SystemdHost};
use reqwest::StatusCode;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use test_cluster::Cluster;

const NODES: [&str; 3] = ["node-0", "node-1", "node-2"];

/// Links `net` to the test machine: returns the test machine's address on the link.
fn link(net: &SharedNetwork) -> String {
    let id = std::process::id() % 100_000;
    let (outer, inner) = (format!("hrh{id}"), format!("hrn{id}"));
    let prefix = format!("10.232.{}", 20 + std::process::id() % 200);
    ip(&[
        "link", "add", &outer, "type", "veth", "peer", "name", &inner,
    ]);
    ip(&["link", "set", &inner, "netns", net.name()]);
    ip(&["addr", "add", &format!("{prefix}.1/24"), "dev", &outer]);
    ip(&["link", "set", &outer, "up"]);
    ip(&[
        "-n",
        net.name(),
        "addr",
        "add",
        &format!("{prefix}.2/24"),
        "dev",
        &inner,
    ]);
    ip(&["-n", net.name(), "link", "set", &inner, "up"]);
    format!("{prefix}.1")
}

fn replica(state: &Path, address: &str, endpoints: &[String]) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hearth-server"));
    cmd.arg("--state-dir")
        .arg(state)
        .args(["--listen", &format!("{address}:0"), "--san", address])
        .args(["--max-wait", "30"])
        .arg("--etcd-endpoints")
        .arg(endpoints.join(","))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped());
    binary::spawn(cmd)
}

/// The nodes as the first replica of `apis` that answers sees them, by name.
async fn nodes(apis: &[Api]) -> Option<BTreeMap<String, serde_json::Value>> {
    let items = node_items(apis).await?;
    Some(
        items
            .into_iter()
            .map(|n| (n["metadata"]["name"].as_str().unwrap().to_string(), n))
            .collect(),
    )
}

async fn updated(apis: &[Api], target: &str) -> usize {
    nodes(apis).await.map_or(0, |n| {
        n.values()
            .filter(|n| n["status"]["state"] == "Done" && n["status"]["current"] == target)
            .count()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The guard serializes whole tests, each on a runtime of its own: nothing in this runtime waits
// for it.
#[allow(clippy::await_holding_lock)]
async fn real_agents_on_three_replicas_finish_a_rollout_through_etcd_and_replica_deaths() {
    let _one = common::one_fleet_at_a_time();
    let net = SharedNetwork::create().expect("a shared network namespace (root, iproute2)");
    let address = link(&net);
    let mut cluster = Cluster::start(3);
    cluster.wait_leader().await;
    let endpoints = cluster.endpoints();
    let dir = tempfile::tempdir().unwrap();
    let states: Vec<_> = ["a", "b", "c"].iter().map(|s| dir.path().join(s)).collect();
    let mut servers = vec![Some(replica(&states[0], &address, &endpoints))];
    for s in &states[1..] {
        replica_dir(&states[0], s);
        servers.push(Some(replica(s, &address, &endpoints)));
    }
    let apis: Vec<Api> = servers
        .iter()
        .zip(&states)
        .map(|(s, st)| {
            let port = s.as_ref().unwrap().port;
            Api {
                base: format!("https://{address}:{port}"),
                ..api_for(st, port)
            }
        })
        .collect();
    let urls: Vec<String> = apis.iter().map(|a| a.base.clone()).collect();

    // A pool of one slot, a first config and a policy that needs no reboot for its files.
    let pool = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n  maxUnavailable: 1\n";
    // Each node's update takes a few seconds (a restart of a unit that runs 3 s), so that the
    // deaths below come in the middle of the rollout.
    let policy = "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/hearth-fleet/base\n      actions:\n      - type: Restart\n        restart:\n          serviceName: slow.service\n    units:\n    - name: slow.service\n      actions: [{type: DaemonReload}]\n";
    let base = format!(
        "{}    systemd:\n      units:\n      - name: slow.service\n        contents: \"[Service]\\nType=oneshot\\nExecStart=/bin/sleep 3\\n\"\n",
        mc(
            "20-base",
            "      - path: /etc/hearth-fleet/base/motd\n        contents:\n          source: data:,base%0A\n",
        )
    );
    let r = apis[1]
        .apply(&[
            ("pool.yaml".into(), pool.into()),
            ("policy.yaml".into(), policy.into()),
            ("base.yaml".into(), base),
        ])
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    // node-2 follows the controller replica; node-0 and node-1 the others.
    let held = controller(&apis.iter().collect::<Vec<_>>()).await;
    let others: Vec<usize> = (0..3).filter(|i| *i != held).collect();
    let homes = [others[0], others[1], held];
    let token = std::fs::read_to_string(states[0].join("tokens/worker.token")).unwrap();
    let agent = binary("hearth-agent", "hearth-agent");
    let opts = || HostOptions {
        network: net.host_network(),
        ..HostOptions::default()
    };
    let hosts: Vec<SystemdHost> = std::thread::scope(|s| {
        let handles: Vec<_> = NODES
            .iter()
            .map(|_| s.spawn(|| SystemdHost::boot_with(opts()).expect("boot a node")))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ((host, name), home) in hosts.iter().zip(NODES).zip(homes) {
        let mine: Vec<String> = urls[home..].iter().chain(&urls[..home]).cloned().collect();
        install(host, &agent, "/usr/bin/hearth-agent");
        install(host, &states[0].join("pki/ca.crt"), "/etc/hearth/ca.crt");
        put(
            host,
            "/etc/hearth/agent.env",
            &format!(
                "HEARTH_SERVER={}\nHEARTH_CA=/etc/hearth/ca.crt\nHEARTH_BOOTSTRAP_TOKEN={}\nHEARTH_NODE_NAME={name}\n",
                mine.join(","),
                token.trim()
            ),
        );
        put(
            host,
            "/etc/systemd/system/hearth-agent.service",
            &agent_unit(),
        );
        host.exec_ok(&["systemctl", "daemon-reload"]).unwrap();
        host.exec_ok(&["systemctl", "enable", "--now", "hearth-agent.service"])
            .unwrap();
    }
    let first = pool_target(&apis[0]).await;
    for _ in 0..900 {
        if updated(&apis, &first).await == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let states: Vec<String> = nodes(&apis)
        .await
        .unwrap_or_default()
        .values()
        .map(|n| {
            format!(
                "{}: {} {}",
                n["metadata"]["name"], n["status"]["state"], n["status"]["reason"]
            )
        })
        .collect();
    assert_eq!(
        updated(&apis, &first).await,
        3,
        "three nodes Done in the first config: {states:?}"
    );
    let enrolled: BTreeMap<String, serde_json::Value> = nodes(&apis)
        .await
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v["status"]["enrolledAt"].clone()))
        .collect();

    // Watch the fleet all along.
    let stop = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (apis, stop, most) = (apis.clone(), stop.clone(), most.clone());
        tokio::spawn(async move {
            let mut samples = 0;
            while !stop.load(Ordering::SeqCst) {
                if let Some(items) = node_items(&apis).await {
                    let n: BTreeMap<String, serde_json::Value> = items
                        .iter()
                        .map(|n| {
                            (
                                n["metadata"]["name"].as_str().unwrap().to_string(),
                                n.clone(),
                            )
                        })
                        .collect();
                    assert_eq!(
                        items.len(),
                        3,
                        "a node missing or listed twice: {:?}",
                        n.keys()
                    );
                    assert_eq!(n.len(), 3, "{:?}", n.keys());
                    let disrupted = n
                        .values()
                        .filter(|n| {
                            let st = &n["status"];
                            st["state"] != "Done" || st["current"] != st["desired"]
                        })
                        .count();
                    most.fetch_max(disrupted, Ordering::SeqCst);
                    samples += 1;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            samples
        })
    };

    let change = mc(
        "30-change",
        "      - path: /etc/hearth-fleet/base/changed\n        contents:\n          source: data:,changed%0A\n",
    );
    let r = apis[others[0]].apply_text("change.yaml", &change).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let second = pool_target(&apis[others[0]]).await;
    assert_ne!(second, first);
    eventually("one node through", 120, || async {
        updated(&apis, &second).await >= 1
    })
    .await;
    let leader = cluster.wait_leader().await;
    cluster.kill(leader);
    eventually("two nodes through", 120, || async {
        updated(&apis, &second).await >= 2
    })
    .await;
    assert_eq!(controller(&apis.iter().collect::<Vec<_>>()).await, held);
    servers[held].take();
    let live: Vec<Api> = others.iter().map(|&i| apis[i].clone()).collect();
    eventually("the third node through another replica", 180, || async {
        updated(&live, &second).await == 3
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    let samples = sampler.await.unwrap();

    assert!(samples > 10, "{samples} samples");
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "never more than maxUnavailable (1) nodes disrupted"
    );
    for host in &hosts {
        assert_eq!(
            std::fs::read_to_string(host.path("/etc/hearth-fleet/base/changed")).unwrap(),
            "changed\n"
        );
    }
    let after: BTreeMap<String, serde_json::Value> = nodes(&live)
        .await
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v["status"]["enrolledAt"].clone()))
        .collect();
    assert_eq!(after, enrolled, "no node enrolled again");
    // node-2's agent moved on, as its log says.
    let log = hosts[2]
        .exec_ok(&[
            "journalctl",
            "-u",
            "hearth-agent",
            "--no-pager",
            "-o",
            "verbose",
        ])
        .unwrap();
    assert!(
        log.contains("moving to the next hearth-server")
            && log.contains(&format!("FROM={}", urls[held])),
        "the agent's log names the replica it left: {}",
        log
    );
}

async fn pool_target(api: &Api) -> String {
    pool(api, "worker").await["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string()
}
