//! Status reports and pool counts, label moves, rollouts under `maxUnavailable`, halting on
//! Degraded, reboot slots and FleetLock, silent nodes, and rendered configs kept while in use.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_drive_nodes_and_pool_counts() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let mut nodes = Vec::new();
    for i in 0..3 {
        nodes.push(api.enroll(&token, &format!("w{i}"), json!({})).await);
    }
    assert_eq!(counts(&api, "worker").await, (3, 0, 0, 0));
    let first = nodes[0].desired_name().await.unwrap();
    for n in &nodes {
        n.report("Done", Some(&first), Some(&first), None).await;
    }
    assert_eq!(counts(&api, "worker").await, (3, 3, 3, 0));
    let p = pool(&api, "worker").await;
    assert_eq!(p["status"]["configuration"]["name"], first.as_str());
    let cond = |p: &Value, t: &str| {
        p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == t)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(cond(&p, "Updated"), "True");
    assert_eq!(cond(&p, "Updating"), "False");

    // A change rolls out one node at a time (maxUnavailable 1).
    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let second = pool(&api, "worker").await["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let desired: Vec<Option<String>> = {
        let mut v = Vec::new();
        for n in &nodes {
            v.push(n.desired_name().await);
        }
        v
    };
    assert_eq!(
        desired,
        vec![
            Some(second.clone()),
            Some(first.clone()),
            Some(first.clone())
        ]
    );
    let p = pool(&api, "worker").await;
    assert_eq!(cond(&p, "Updating"), "True");
    assert_eq!(cond(&p, "Updated"), "False");

    // w0 fails: Degraded, with the failing step and object.
    nodes[0]
        .report(
            "Degraded",
            Some(&first),
            Some(&second),
            Some("step 2 of 5 (write file /etc/hearth-test-10-a): permission denied"),
        )
        .await;
    // As in the MCO, updated (and ready) count nodes in the pool's target config: none yet.
    assert_eq!(counts(&api, "worker").await, (3, 0, 0, 1));
    let n = api.get("/api/v1/nodes/w0").await.json;
    assert_eq!(n["status"]["state"], "Degraded");
    assert!(n["status"]["reason"]
        .as_str()
        .unwrap()
        .contains("/etc/hearth-test-10-a"));
    let p = pool(&api, "worker").await;
    assert_eq!(cond(&p, "Degraded"), "True");
    assert_eq!(cond(&p, "NodeDegraded"), "True");
    // Nobody else moves while w0 is unavailable.
    assert_eq!(nodes[1].desired_name().await, Some(first.clone()));
    let ev = api.get("/api/v1/events?object=Node/w0").await.json;
    assert!(
        ev["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "Degraded"),
        "{ev}"
    );

    // w0 recovers; w1 goes next, then w2.
    nodes[0]
        .report("Done", Some(&second), Some(&second), None)
        .await;
    assert_eq!(nodes[1].desired_name().await, Some(second.clone()));
    assert_eq!(nodes[2].desired_name().await, Some(first.clone()));
    nodes[1]
        .report("Done", Some(&second), Some(&second), None)
        .await;
    nodes[2]
        .report("Done", Some(&second), Some(&second), None)
        .await;
    assert_eq!(nodes[2].desired_name().await, Some(second.clone()));
    nodes[2]
        .report("Done", Some(&second), Some(&second), None)
        .await;
    assert_eq!(counts(&api, "worker").await, (3, 3, 3, 0));
    assert_eq!(
        pool(&api, "worker").await["status"]["configuration"]["name"],
        second.as_str()
    );

    // Pause: nothing moves; resume: it goes on.
    assert_eq!(
        api.post("/api/v1/pools/worker/pause", &json!({}))
            .await
            .status,
        StatusCode::OK
    );
    api.apply_text("mc.yaml", &worker_mc("10-a", "three")).await;
    assert_eq!(nodes[0].desired_name().await, Some(second.clone()));
    let p = pool(&api, "worker").await;
    assert_eq!(p["spec"]["paused"], true);
    assert_eq!(cond(&p, "Updating"), "False");
    api.post("/api/v1/pools/worker/resume", &json!({})).await;
    assert_ne!(nodes[0].desired_name().await, Some(second.clone()));
    s.shutdown().await;
}

/// The GitOps habit: `hearth pause`, then `hearth apply` of a directory that holds the pool's
/// manifest (without `paused`) and a changed MachineConfig. The pause stays (as `kubectl
/// apply` keeps a field set by `kubectl patch`) and the change is held; a manifest that says
/// `paused: false` resumes the pool, and the apply's answer and an event say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applying_a_pool_manifest_keeps_a_pause_it_does_not_name() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let pool_yaml = |paused: &str| {
        format!(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\nspec:\n{paused}  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n"
        )
    };
    let apply = |mc: &str, paused: &str| {
        vec![
            ("pool.yaml".to_string(), pool_yaml(paused)),
            ("mc.yaml".to_string(), worker_mc("10-a", mc)),
        ]
    };
    api.apply(&apply("one", "")).await;
    let token = bootstrap_token(&s, "worker");
    let node = api.enroll(&token, "w0", json!({})).await;
    let first = node.desired_name().await.unwrap();
    node.report("Done", Some(&first), Some(&first), None).await;
    let a = api.post("/api/v1/pools/worker/pause", &json!({})).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);

    // The directory again, with a changed MachineConfig: still paused, nothing rolls out.
    let a = api.apply(&apply("two", "")).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let results = a.json["results"].as_array().unwrap().clone();
    assert!(
        results.iter().all(|r| r.get("note").is_none()),
        "{results:?}"
    );
    assert_eq!(pool(&api, "worker").await["spec"]["paused"], true);
    assert_eq!(node.desired_name().await, Some(first.clone()));
    let events = api.events("MachineConfigPool/worker").await;
    assert!(
        !events.iter().any(|(reason, _)| reason == "Resumed"),
        "{events:?}"
    );

    // `paused: false` in the manifest resumes it, and says so.
    let a = api.apply(&apply("two", "  paused: false\n")).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let pool_result = a.json["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "MachineConfigPool")
        .unwrap()
        .clone();
    assert_eq!(pool_result["action"], "configured");
    assert!(
        pool_result["note"]
            .as_str()
            .unwrap()
            .starts_with("resumed: the manifest says paused: false"),
        "{pool_result}"
    );
    assert_eq!(pool(&api, "worker").await["spec"]["paused"], false);
    let events = api.events("MachineConfigPool/worker").await;
    assert!(
        events
            .iter()
            .any(|(reason, msg)| reason == "Resumed" && msg.contains("apply")),
        "{events:?}"
    );
    assert_ne!(node.desired_name().await, Some(first));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_move_nodes_between_pools() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply(&example_files()).await;
    let a = api
        .post(
            "/api/v1/nodes/worker-0/labels",
            &json!({"set": {"node-role.kubernetes.io/infra": ""}}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let n = api.get("/api/v1/nodes/worker-0").await.json;
    assert_eq!(n["status"]["pool"], "infra");
    assert!(n["status"]["desired"]
        .as_str()
        .unwrap()
        .starts_with("rendered-infra-"));
    // Changing a label's value needs overwrite.
    let a = api
        .post(
            "/api/v1/nodes/worker-0/labels",
            &json!({"set": {"node-role.kubernetes.io/infra": "x"}}),
        )
        .await;
    assert_eq!(a.status, StatusCode::CONFLICT);
    let a = api
        .post(
            "/api/v1/nodes/worker-0/labels",
            &json!({"remove": ["node-role.kubernetes.io/infra"]}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        api.get("/api/v1/nodes/worker-0").await.json["status"]["pool"],
        "worker"
    );
    assert_eq!(
        api.post("/api/v1/nodes/nope/labels", &json!({}))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reboot_slots_follow_max_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let a = api.enroll(&token, "w0", json!({})).await;
    let b = api.enroll(&token, "w1", json!({})).await;
    let acquire = json!({"action": "acquire"});
    let r = a.post("/api/v1/agent/reboot-slot", &acquire).await;
    assert_eq!(
        r.json,
        json!({"granted": true, "retryAfterSeconds": 0}),
        "{}",
        r.text
    );
    // Asking again while holding it is granted (idempotent).
    assert_eq!(
        a.post("/api/v1/agent/reboot-slot", &acquire).await.json["granted"],
        true
    );
    let r = b.post("/api/v1/agent/reboot-slot", &acquire).await;
    assert_eq!(r.json["granted"], false);
    assert!(r.json["retryAfterSeconds"].as_u64().unwrap() > 0);
    let r = a
        .post("/api/v1/agent/reboot-slot", &json!({"action": "release"}))
        .await;
    assert_eq!(r.json["granted"], false);
    assert_eq!(
        b.post("/api/v1/agent/reboot-slot", &acquire).await.json["granted"],
        true
    );
    // Reaching the desired config in Done gives the slot back.
    let d = b.desired_name().await.unwrap();
    b.report("Done", Some(&d), Some(&d), None).await;
    assert_eq!(
        a.post("/api/v1/agent/reboot-slot", &acquire).await.json["granted"],
        true
    );
    assert_eq!(
        api.get("/api/v1/nodes/w1").await.json["status"]["rebootSlot"],
        Value::Null
    );
    assert_eq!(
        a.post("/api/v1/agent/reboot-slot", &json!({"action": "reboot"}))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_configs_in_use_are_never_collected() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(1)).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &worker_mc("10-a", "v0")).await;
    let token = bootstrap_token(&s, "worker");
    let stuck = api.enroll(&token, "stuck", json!({})).await;
    let first = stuck.desired_name().await.unwrap();
    // The node says it is in the first config, and never gets anywhere else.
    stuck.report("Done", Some(&first), Some(&first), None).await;
    let mut names = vec![first.clone()];
    for i in 1..5 {
        api.apply_text("mc.yaml", &worker_mc("10-a", &format!("v{i}")))
            .await;
        let t = pool(&api, "worker").await["spec"]["configuration"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        names.push(t);
        stuck
            .report(
                "Working",
                Some(&first),
                stuck.desired_name().await.as_deref(),
                None,
            )
            .await;
    }
    let rendered = api.get("/api/v1/renderedconfigs").await.json;
    let kept: Vec<&str> = rendered["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap())
        .collect();
    // The first (the node's current), the newest (target and desired) and nothing else.
    assert!(kept.contains(&first.as_str()), "{kept:?}");
    assert!(kept.contains(&names[4].as_str()), "{kept:?}");
    assert!(!kept.contains(&names[2].as_str()), "{kept:?}");
    assert_eq!(
        api.get(&format!("/api/v1/renderedconfigs/{first}"))
            .await
            .status,
        StatusCode::OK
    );
    // Rendered configs cannot be deleted by hand.
    assert_eq!(
        api.delete(&format!("/api/v1/machineconfigs/{first}"))
            .await
            .status,
        StatusCode::CONFLICT
    );
    let ev = api.get("/api/v1/events?object=RenderedConfigs").await.json;
    assert!(!ev["items"].as_array().unwrap().is_empty());
    s.shutdown().await;
}

/// A server with the worker pool (`maxUnavailable` as given), the MachineConfig `10-a` and two
/// nodes `w0`, `w1` enrolled and `Done` in its first render.
pub(crate) struct TwoWorkers {
    pub dir: tempfile::TempDir,
    pub s: hearth_server::serve::Running,
    pub api: Api,
    pub w0: Api,
    pub w1: Api,
    /// The rendered config both are `Done` in.
    pub first: String,
}

pub(crate) async fn two_workers(max_unavailable: u32) -> TwoWorkers {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("pool.yaml", &worker_pool(max_unavailable, None))
        .await;
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let w0 = api.enroll_done(&token, "w0").await;
    let w1 = api.enroll_done(&token, "w1").await;
    let first = w0.desired_name().await.unwrap();
    TwoWorkers {
        dir,
        s,
        api,
        w0,
        w1,
        first,
    }
}

pub(crate) fn worker_pool(max_unavailable: u32, on_degraded: Option<&str>) -> String {
    let annotations = on_degraded
        .map(|v| format!("  annotations:\n    hearth.io/on-degraded: {v}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\n{annotations}spec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n  maxUnavailable: {max_unavailable}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_node_halts_the_rollout() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("pool.yaml", &worker_pool(2, None)).await;
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let mut nodes = Vec::new();
    for i in 0..3 {
        nodes.push(api.enroll_done(&token, &format!("w{i}")).await);
    }
    let first = nodes[0].desired_name().await.unwrap();
    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let second = nodes[0].desired_name().await.unwrap();
    assert_ne!(first, second);
    assert_eq!(
        nodes[1].desired_name().await,
        Some(second.clone()),
        "maxUnavailable 2"
    );
    assert_eq!(nodes[2].desired_name().await, Some(first.clone()));
    // w0 fails, w1 succeeds: one unavailable of 2 allowed, but the rollout halts.
    nodes[0]
        .report(
            "Degraded",
            Some(&first),
            Some(&second),
            Some("step 1 of 1 (write file /etc/x): EIO"),
        )
        .await;
    nodes[1]
        .report("Done", Some(&second), Some(&second), None)
        .await;
    assert_eq!(nodes[2].desired_name().await, Some(first.clone()));
    let p = pool(&api, "worker").await;
    assert_eq!(p["status"]["rolloutHaltedBy"], "w0");
    let updating = p["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Updating")
        .unwrap()
        .clone();
    assert_eq!(updating["reason"], "Halted", "{updating}");
    // A Warning on the pool says so, names the node and what to do (issue 35).
    let pool_events = || async {
        api.get("/api/v1/events?object=MachineConfigPool/worker")
            .await
            .json["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let events = pool_events().await;
    let halted = events
        .iter()
        .find(|e| e["reason"] == "RolloutHalted")
        .unwrap_or_else(|| panic!("no RolloutHalted event: {events:?}"));
    assert_eq!(halted["type"], "Warning");
    let msg = halted["message"].as_str().unwrap();
    assert!(
        msg.contains("node w0 is Degraded: step 1 of 1") && msg.contains("hearth node exclude w0"),
        "{msg}"
    );
    // Told to continue, it goes on.
    api.apply_text("pool.yaml", &worker_pool(2, Some("continue")))
        .await;
    assert_eq!(nodes[2].desired_name().await, Some(second.clone()));
    assert_eq!(
        pool(&api, "worker").await["status"]["rolloutHaltedBy"],
        Value::Null
    );
    assert!(
        pool_events()
            .await
            .iter()
            .any(|e| e["reason"] == "RolloutResumed" && e["type"] == "Normal"),
        "a Normal event says the rollout goes on"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waiting_agents_all_wake_on_one_apply() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("pool.yaml", &worker_pool(100, None)).await;
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let mut nodes = Vec::new();
    for i in 0..60 {
        let n = api.enroll(&token, &format!("n{i:02}"), json!({})).await;
        let d = n.desired_name().await.unwrap();
        n.report("Done", Some(&d), Some(&d), None).await;
        nodes.push((n, d));
    }
    let mut waiters = Vec::new();
    for (n, d) in &nodes {
        let n = n.clone();
        let d = d.clone();
        waiters.push(tokio::spawn(async move {
            let a = n
                .get(&format!("/api/v1/agent/desired?known={d}&wait=60"))
                .await;
            (
                a.status,
                a.json["name"].as_str().map(str::to_string),
                Instant::now(),
            )
        }));
    }
    // Everyone is waiting.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = api.get("/metrics").await.text;
        if m.contains("hearth_server_long_polls_waiting 60") {
            break;
        }
        assert!(Instant::now() < deadline, "{m}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sent = Instant::now();
    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let mut slowest = Duration::ZERO;
    for w in waiters {
        let (status, name, when) = w.await.unwrap();
        assert_eq!(status, StatusCode::OK);
        assert_ne!(name.as_deref(), Some(nodes[0].1.as_str()));
        slowest = slowest.max(when.duration_since(sent));
    }
    eprintln!("60 waiting agents all answered within {slowest:?} of the apply");
    assert!(slowest < Duration::from_secs(2), "{slowest:?}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleetlock_clients_share_the_reboot_slots() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let a = api.enroll(&token, "w0", json!({})).await;
    let b = api.enroll(&token, "w1", json!({})).await;
    let body =
        |id: &str, group: &str| json!({"client_params": {"id": id, "group": group}}).to_string();
    // Zincati puts the credential into the URL: Basic auth (`Api::fleetlock`).
    let r = api
        .send(api.fleetlock(&a, "/v1/pre-reboot", "m0", "default"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // Taken: FleetLock's error document.
    let r = api
        .send(api.fleetlock(&b, "/v1/pre-reboot", "m1", "worker"))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert_eq!(r.json["kind"], "failed_lock");
    // The same slots as the agent API.
    let r = b
        .post("/api/v1/agent/reboot-slot", &json!({"action": "acquire"}))
        .await;
    assert_eq!(r.json["granted"], false);
    let r = api
        .send(api.fleetlock(&a, "/v1/steady-state", "m0", "default"))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api
        .send(api.fleetlock(&b, "/v1/pre-reboot", "m1", "worker"))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    // The protocol header, credentials and the group are checked.
    let r = api
        .send(
            api.client
                .post(format!("{}/v1/pre-reboot", api.base))
                .bearer_auth(&a.token)
                .body(body("m0", "default")),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json["kind"], "missing_header");
    let r = api
        .send(
            api.client
                .post(format!("{}/v1/pre-reboot", api.base))
                .header("fleet-lock-protocol", "true")
                .body(body("m0", "default")),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = api
        .send(api.fleetlock(&api, "/v1/pre-reboot", "m0", "default"))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = api
        .send(api.fleetlock(&a, "/v1/pre-reboot", "m0", "infra"))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.json["kind"], "wrong_group");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_counts_as_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(5);
    o.stale_after = Duration::from_secs(1);
    o.tick = Duration::from_millis(200);
    let s = start(dir.path(), o).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let w0 = api.enroll(&token, "w0", json!({})).await;
    let w1 = api.enroll(&token, "w1", json!({})).await;
    let first = w0.desired_name().await.unwrap();
    for n in [&w0, &w1] {
        n.report("Done", Some(&first), Some(&first), None).await;
    }
    assert_eq!(counts(&api, "worker").await, (2, 2, 2, 0));
    // w1 goes quiet; w0 keeps talking. The server counts in whole seconds, so silence shows
    // between 1 and 2 s after w1's last word (plus a tick): wait for it, up to 10 s.
    let mut p = pool(&api, "worker").await;
    for _ in 0..33 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        w0.report("Done", Some(&first), Some(&first), None).await;
        p = pool(&api, "worker").await;
        if p["status"]["unavailableMachineCount"] == 1 {
            break;
        }
    }
    assert_eq!(p["status"]["unavailableMachineCount"], 1, "{p}");
    assert_eq!(p["status"]["readyMachineCount"], 1, "{p}");
    assert_eq!(
        api.get("/api/v1/nodes/w1").await.json["status"]["ready"],
        false
    );
    // A change: the silent node takes the only slot (and gets the config for when it is back);
    // w0 waits.
    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let second = pool(&api, "worker").await["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(w0.desired_name().await, Some(first.clone()));
    // w1 is back and updates; then w0 goes.
    assert_eq!(w1.desired_name().await, Some(second.clone()));
    w1.report("Done", Some(&second), Some(&second), None).await;
    assert_eq!(w0.desired_name().await, Some(second.clone()));
    s.shutdown().await;
}
