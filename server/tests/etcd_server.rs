//! The built `hearth-server` binary as replicas on a real three-member etcd
//! (`--etcd-endpoints`, the same prefix): every replica serves apply, enroll and the long-poll
//! of the one fleet kept in etcd (no database file); a change committed through one replica
//! wakes a long-poll waiting on another; exactly one replica holds the controller role and
//! another takes it over when it dies; a replica with another admin token refuses to start.
//! A rollout over six nodes (simulated agents: the agent protocol over HTTPS, each starting on
//! its own replica and failing over to the next) survives the death of the etcd leader and of
//! the controller replica without ever having more than `maxUnavailable` nodes disrupted, and a
//! FleetLock slot taken before stays held.

use crate::common;

use crate::test_cluster;

use common::binary::{self, api_for, Server};
use common::replicas::{controller, enroll_status, eventually, healthz, node_items, replica_dir};
use common::*;
use reqwest::StatusCode;
use serde_json::json;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use test_cluster::Cluster;

fn command(state: &Path, endpoints: &[String]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hearth-server"));
    cmd.arg("--state-dir")
        .arg(state)
        .args(["--listen", "127.0.0.1:0", "--san", "127.0.0.1"])
        .arg("--etcd-endpoints")
        .arg(endpoints.join(","))
        .env(
            "RUST_LOG",
            std::env::var("HEARTH_TEST_LOG").unwrap_or("warn".into()),
        )
        .stdout(Stdio::piped());
    cmd
}

/// Starts a replica on etcd.
fn spawn(state: &Path, endpoints: &[String]) -> Server {
    binary::spawn(command(state, endpoints))
}

fn names(v: &serde_json::Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_serve_one_fleet_and_the_controller_role_moves() {
    let cluster = Cluster::start(3);
    cluster.wait_leader().await;
    let endpoints = cluster.endpoints();
    let dir = tempfile::tempdir().unwrap();
    let (state_a, state_b, state_c) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
    );
    let a = spawn(&state_a, &endpoints);
    replica_dir(&state_a, &state_b);
    let b = spawn(&state_b, &endpoints);
    let (api_a, api_b) = (api_for(&state_a, a.port), api_for(&state_b, b.port));

    // Applied through A, enrolled and served through B.
    let r = api_a.apply(&example_files()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let token = std::fs::read_to_string(state_a.join("tokens/worker.token"))
        .unwrap()
        .trim()
        .to_string();
    let node = api_b.enroll(&token, "worker-0", json!({})).await;
    let first = node.desired_name().await.expect("a desired config");
    node.report("Done", Some(&first), Some(&first), None).await;
    eventually(
        "A sees the node B enrolled, with its report",
        60,
        || async {
            let got = api_a.get("/api/v1/nodes/worker-0").await;
            got.status == StatusCode::OK && got.json["status"]["state"] == "Done"
        },
    )
    .await;
    // After a change of the node (a label) through A, B still has its report (stored apart).
    let r = api_a
        .post(
            "/api/v1/nodes/worker-0/labels",
            &json!({"set": {"rack": "r1"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    eventually("B sees the label and keeps the report", 60, || async {
        let got = api_b.get("/api/v1/nodes/worker-0").await;
        got.status == StatusCode::OK
            && got.json["metadata"]["labels"]["rack"] == "r1"
            && got.json["status"]["state"] == "Done"
    })
    .await;

    // A token made through A works on B at once; rotated through A, the old one stops there.
    let made = api_a
        .post("/api/v1/pools/worker/bootstrap-token", &json!({}))
        .await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.text);
    let fresh = made.json["token"].as_str().unwrap().to_string();
    // (B applies A's commit within the watch's latency: asked until then.)
    eventually("B takes the token made through A", 60, || async {
        enroll_status(&api_b, "worker-1", &fresh).await == StatusCode::OK
    })
    .await;
    let again = api_a
        .post("/api/v1/pools/worker/bootstrap-token", &json!({}))
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    eventually("B refuses the rotated token", 60, || async {
        enroll_status(&api_b, "worker-2", &fresh).await == StatusCode::UNAUTHORIZED
    })
    .await;

    // A long-poll waiting on B wakes when a change is committed through A.
    let waiting = {
        let node = node.clone();
        let known = first.clone();
        tokio::spawn(async move {
            node.get(&format!("/api/v1/agent/desired?wait=60&known={known}"))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = api_a
        .apply_text("late.yaml", &worker_mc("99-late", "late"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let woke = waiting.await.unwrap();
    assert_eq!(woke.status, StatusCode::OK, "{}", woke.text);
    let second = woke.json["name"].as_str().unwrap().to_string();
    assert_ne!(second, first);

    // Everything is in etcd; no replica keeps a database.
    let mut etcd = etcd_client::Client::connect(&endpoints, None)
        .await
        .unwrap();
    assert_eq!(
        etcd.get("/hearth/nodes/worker-0", None)
            .await
            .unwrap()
            .kvs()
            .len(),
        1
    );
    for state in [&state_a, &state_b] {
        let db: Vec<_> = std::fs::read_dir(state)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("redb") || n.ends_with(".db"))
            .collect();
        assert!(db.is_empty(), "{db:?}");
    }

    // One controller; the other replica names it.
    let held = controller(&[&api_a, &api_b]).await;
    let (mut dead, live, live_api) = if held == 0 {
        (a, b, &api_b)
    } else {
        (b, a, &api_a)
    };
    let (_, text) = healthz(live_api).await.unwrap();
    assert!(
        text.contains(&format!(
            "controller: hearth-server pid {}",
            dead.child.id()
        )),
        "{text}"
    );

    // A replica with an admin token of its own refuses to start and says what to do.
    std::fs::create_dir_all(state_c.join("pki")).unwrap();
    for f in ["pki/ca.crt", "pki/ca.key"] {
        std::fs::copy(state_a.join(f), state_c.join(f)).unwrap();
    }
    let mut c = command(&state_c, &endpoints)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = {
        let mut s = None;
        for _ in 0..600 {
            if let Some(x) = c.try_wait().unwrap() {
                s = Some(x);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        s.unwrap_or_else(|| {
            let _ = c.kill();
            panic!("a replica with another admin token started")
        })
    };
    let mut stderr = String::new();
    c.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("copy admin.token"), "{stderr}");
    assert!(names(&live_api.get("/api/v1/nodes").await.json).contains(&"worker-0".to_string()));

    // The controller dies (SIGKILL: no goodbye); the other takes the role within the lease's
    // time and serves changes.
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    assert_eq!(controller(&[live_api]).await, 0);
    let r = live_api
        .apply_text("later.yaml", &worker_mc("99-later", "later"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let node = Api {
        base: live_api.base.clone(),
        ..node
    };
    let third = node.desired_name().await.expect("the newest config");
    assert_ne!(third, second);
    drop(live);
}

/// A simulated agent: the agent protocol over HTTPS, starting on one replica and moving to the
/// next on a transport error or a 5xx, as the real agent does.
struct SimAgent {
    name: String,
    bases: Vec<String>,
    at: usize,
    client: reqwest::Client,
    token: String,
    failovers: usize,
}

impl SimAgent {
    async fn send(&mut self, req: impl Fn(&str) -> reqwest::RequestBuilder) -> reqwest::Response {
        for _ in 0..200 {
            let base = self.bases[self.at].clone();
            match req(&base).bearer_auth(&self.token).send().await {
                Ok(r) if !r.status().is_server_error() => return r,
                _ => {
                    self.at = (self.at + 1) % self.bases.len();
                    self.failovers += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        panic!("{}: no replica answered", self.name);
    }

    async fn report(&mut self, state: &str, current: &str, desired: &str) {
        let body = json!({
            "apiVersion": "hearth.io/v1", "kind": "AgentStatus",
            "state": state, "current": current, "desired": desired, "reason": null,
            "lastTransition": "2026-01-01T00:00:00Z", "pendingReboot": false,
            "progress": null, "drift": [], "history": [],
        });
        let client = self.client.clone();
        let r = self
            .send(|base| {
                client
                    .post(format!("{base}/api/v1/agent/status"))
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .timeout(Duration::from_secs(15))
            })
            .await;
        assert_eq!(r.status(), StatusCode::NO_CONTENT, "{}: report", self.name);
    }

    /// Follows until it runs `goal`: long-polls, and on a new config reports Working, then Done.
    async fn follow(mut self, mut current: String, goal: Arc<Mutex<Option<String>>>) -> Self {
        loop {
            if goal.lock().unwrap().as_deref() == Some(current.as_str()) {
                return self;
            }
            let client = self.client.clone();
            let known = current.clone();
            let r = self
                .send(|base| {
                    client
                        .get(format!("{base}/api/v1/agent/desired?wait=2&known={known}"))
                        .timeout(Duration::from_secs(15))
                })
                .await;
            if r.status() != StatusCode::OK {
                continue;
            }
            let body: serde_json::Value =
                serde_json::from_str(&r.text().await.unwrap_or_default()).unwrap_or_default();
            if body["name"].is_null() {
                continue;
            }
            let next = body["name"].as_str().unwrap().to_string();
            if next == current {
                continue;
            }
            self.report("Working", &current, &next).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            self.report("Done", &next, &next).await;
            current = next;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_across_replicas_survives_the_etcd_leader_and_the_controller_dying() {
    let mut cluster = Cluster::start(3);
    cluster.wait_leader().await;
    let endpoints = cluster.endpoints();
    let dir = tempfile::tempdir().unwrap();
    let states: Vec<_> = ["a", "b", "c"].iter().map(|s| dir.path().join(s)).collect();
    let mut servers = vec![Some(spawn(&states[0], &endpoints))];
    // Replica A is up (and elected) before the others start.
    for s in &states[1..] {
        replica_dir(&states[0], s);
        servers.push(Some(spawn(s, &endpoints)));
    }
    let apis: Vec<Api> = servers
        .iter()
        .zip(&states)
        .map(|(s, st)| api_for(st, s.as_ref().unwrap().port))
        .collect();
    // A fleet of its own (the example's declared nodes would hold the pool's one slot).
    let base = worker_mc("00-base", "base");
    let master = base
        .replace("role: worker", "role: master")
        .replace("00-base", "00-master");
    let r = apis[0]
        .apply(&[
            ("base.yaml".to_string(), base),
            ("master.yaml".to_string(), master),
        ])
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let pool_yaml = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n  maxUnavailable: 1\n";
    let r = apis[1].apply_text("pool.yaml", pool_yaml).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let token = |pool: &str| {
        std::fs::read_to_string(states[0].join(format!("tokens/{pool}.token")))
            .unwrap()
            .trim()
            .to_string()
    };

    // Six workers, two per replica, Done in the first config; the last two (the rollout goes
    // by name) start on the controller replica, which dies before their turn.
    let held = controller(&apis.iter().collect::<Vec<_>>()).await;
    let homes: Vec<usize> = {
        let others: Vec<usize> = (0..3).filter(|i| *i != held).collect();
        vec![others[0], others[0], others[1], others[1], held, held]
    };
    let bases: Vec<String> = apis.iter().map(|a| a.base.clone()).collect();
    let mut agents = Vec::new();
    let mut first = String::new();
    for (i, &home) in homes.iter().enumerate() {
        let node = apis[home]
            .enroll_done(&token("worker"), &format!("w{i}"))
            .await;
        first = node.desired_name().await.unwrap();
        agents.push(SimAgent {
            name: format!("w{i}"),
            bases: bases[home..]
                .iter()
                .chain(&bases[..home])
                .cloned()
                .collect(),
            at: 0,
            client: node.client.clone(),
            token: node.token.clone(),
            failovers: 0,
        });
    }
    // A master node holds a FleetLock slot (master: maxUnavailable 1).
    let m0 = apis[2].enroll_done(&token("master"), "m0").await;
    let m1 = apis[0].enroll_done(&token("master"), "m1").await;
    let got = apis[2]
        .send(apis[2].fleetlock(&m0, "/v1/pre-reboot", "m0", "master"))
        .await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.text);

    // Watch the fleet all along, through whichever replica answers.
    let stop = Arc::new(AtomicUsize::new(0));
    let most_disrupted = Arc::new(AtomicUsize::new(0));
    let watcher = {
        let (apis, stop, most) = (apis.clone(), stop.clone(), most_disrupted.clone());
        tokio::spawn(async move {
            let mut samples = 0usize;
            while stop.load(Ordering::SeqCst) == 0 {
                if let Some(items) = node_items(&apis).await {
                    let v = json!({ "items": items });
                    let mut seen = names(&v);
                    seen.sort();
                    let before = seen.len();
                    seen.dedup();
                    assert_eq!(before, seen.len(), "a node listed twice: {v}");
                    assert_eq!(seen.len(), 8, "{seen:?}");
                    let disrupted = v["items"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|n| n["status"]["pool"] == "worker")
                        .filter(|n| {
                            n["status"]["desired"] != n["status"]["current"]
                                || n["status"]["state"] != "Done"
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

    // The change; the agents follow it.
    let r = apis[0]
        .apply_text("change.yaml", &worker_mc("50-change", "changed"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let goal = pool(&apis[0], "worker").await["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(goal, first);
    let goal_cell = Arc::new(Mutex::new(Some(goal.clone())));
    let tasks: Vec<_> = agents
        .into_iter()
        .map(|a| tokio::spawn(a.follow(first.clone(), goal_cell.clone())))
        .collect();
    let done = |api: &Api| {
        let api = api.clone();
        let goal = goal.clone();
        async move {
            node_items(std::slice::from_ref(&api))
                .await
                .map_or(0, |items| {
                    items
                        .iter()
                        .filter(|n| n["status"]["current"] == goal.as_str())
                        .count()
                })
        }
    };

    // Two nodes through: the etcd leader dies.
    let leader = cluster.wait_leader().await;
    eventually("two nodes updated", 60, || async {
        for a in &apis {
            if done(a).await >= 2 {
                return true;
            }
        }
        false
    })
    .await;
    cluster.kill(leader);
    // Two more: the controller replica dies (its agents move on).
    assert_eq!(controller(&apis.iter().collect::<Vec<_>>()).await, held);
    let live: Vec<Api> = apis
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != held)
        .map(|(_, a)| a.clone())
        .collect();
    eventually("four nodes updated", 60, || async {
        done(&live[0]).await >= 4
    })
    .await;
    servers[held].take();
    let _ = controller(&live.iter().collect::<Vec<_>>()).await;

    // The rollout completes; nothing acknowledged was lost.
    let mut failovers = 0;
    for (t, &home) in tasks.into_iter().zip(&homes) {
        let a = tokio::time::timeout(Duration::from_secs(180), t)
            .await
            .expect("every agent reaches the new config")
            .unwrap();
        if home == held {
            failovers += a.failovers;
        }
    }
    stop.store(1, Ordering::SeqCst);
    let samples = watcher.await.unwrap();
    assert!(samples > 10, "the fleet was watched ({samples} samples)");
    assert!(failovers > 0, "the dead replica's agents moved on");
    assert_eq!(
        most_disrupted.load(Ordering::SeqCst),
        1,
        "at most maxUnavailable (1) workers disrupted at any moment"
    );
    for api in &live {
        assert_eq!(
            done(api).await,
            6,
            "every replica sees every worker updated"
        );
    }
    let pool = pool(&live[0], "worker").await;
    assert_eq!(pool["status"]["machineCount"], 6, "{pool}");
    assert_eq!(pool["status"]["updatedMachineCount"], 6, "{pool}");
    // The FleetLock slot taken before both deaths is still m0's: m1 is refused one.
    let m0_now = live[0].get("/api/v1/nodes/m0").await.json;
    assert!(
        m0_now["status"]["rebootSlot"].is_string(),
        "m0 keeps its slot: {m0_now}"
    );
    let other = live[0]
        .send(live[0].fleetlock(&m1, "/v1/pre-reboot", "m1", "master"))
        .await;
    assert_ne!(other.status, StatusCode::OK, "{}", other.text);
}

/// A replica cut off from etcd (here: etcd gone; a partition of one replica in a network
/// namespace: `etcd_partition.rs`) stops serving what needs the store, says why (503 naming the
/// cut and since when, `/healthz` too, so that agents and load balancers move on), and serves
/// again once etcd is back, with a new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_off_from_etcd_says_why_and_recovers() {
    let mut cluster = Cluster::start(1);
    cluster.wait_leader().await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("a");
    let server = spawn(&state, &cluster.endpoints());
    let api = api_for(&state, server.port);
    let r = api.apply(&example_files()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let token = std::fs::read_to_string(state.join("tokens/worker.token"))
        .unwrap()
        .trim()
        .to_string();
    let node = api.enroll(&token, "worker-0", json!({})).await;

    cluster.kill(0);
    eventually("the replica says it is cut off", 60, || async {
        matches!(healthz(&api).await, Some((StatusCode::SERVICE_UNAVAILABLE, t)) if t.contains("cut off from etcd") || t.contains("lost its etcd session"))
    })
    .await;
    let refused = api
        .apply_text("late.yaml", &worker_mc("99-late", "late"))
        .await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.text
    );
    assert!(refused.text.contains("etcd"), "{}", refused.text);
    let poll = node.get("/api/v1/agent/desired?wait=0").await;
    assert_eq!(
        poll.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        poll.text
    );

    cluster.restart(0);
    eventually("the replica serves again", 60, || async {
        matches!(healthz(&api).await, Some((StatusCode::OK, _)))
    })
    .await;
    let mut applied = None;
    for _ in 0..100 {
        let r = api
            .apply_text("late.yaml", &worker_mc("99-late", "late"))
            .await;
        if r.status == StatusCode::OK {
            applied = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(applied.is_some(), "changes are taken again");
    assert!(node.desired_name().await.is_some());
}
