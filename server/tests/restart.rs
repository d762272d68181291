//! The built binary, killed with SIGKILL and started again: everything it acknowledged is still
//! there, no node is lost or counted twice, credentials and tokens keep working. And what the
//! binary logs of a change larger than its event lists.

use crate::common;

use common::binary::{self, api_for, Server};
use common::*;
use reqwest::StatusCode;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// Starts the binary on 127.0.0.1:0.
fn spawn(state: &Path) -> Server {
    binary::spawn(binary::command(state))
}

/// A flood of routine node events (an enrollment and an apply of more nodes than the event
/// lists and the log's burst take): the API lists the last ones, the log takes a bounded number
/// one by one and says how many it left out, and a fleet event and a node's warning after the
/// flood are logged all the same (journald would drop them with a flood: `RateLimitBurst=`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_routine_events_is_logged_within_bounds_and_warnings_still_are() {
    use hearth_server::fleet::events::KEPT_PER_CLASS;
    use hearth_server::telemetry::logging::{NODE_EVENTS_BURST, NODE_EVENTS_PER_SECOND};
    const NODES: usize = KEPT_PER_CLASS + 20;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let log = dir.path().join("server.log");
    let mut cmd = binary::command(&state);
    cmd.env("RUST_LOG", "info")
        .stderr(std::fs::File::create(&log).unwrap());
    let started = std::time::Instant::now();
    let server = binary::spawn(cmd);
    let api = api_for(&state, server.port);
    let pool_yaml = format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n  maxUnavailable: {NODES}\n"
    );
    api.apply_text("pool.yaml", &pool_yaml).await;
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = std::fs::read_to_string(state.join("tokens/worker.token")).unwrap();
    let token = token.trim();
    let mut nodes = Vec::new();
    for i in 0..NODES {
        nodes.push(api.enroll(token, &format!("w{i:04}"), json!({})).await);
    }
    let a = api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let target = pool(&api, "worker").await["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let listed = api.get("/api/v1/events?limit=100000").await.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["reason"] == "DesiredChanged" && e["message"].as_str().unwrap().contains(&target)
        })
        .count();
    assert_eq!(listed, KEPT_PER_CLASS, "the API lists the last ones");

    // After the flood (and a second, so the count is due): a fleet event and a warning.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = api.post("/api/v1/pools/worker/pause", &json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    nodes[7]
        .report(
            "Degraded",
            None,
            Some(&target),
            Some("unit flood-test.service failed"),
        )
        .await;
    let elapsed = started.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&log).unwrap();
    let tail = &text[text.len().saturating_sub(3000)..];
    assert!(
        text.lines().any(|l| l.contains("WARN")
            && l.contains("Node/w0007")
            && l.contains("flood-test.service")),
        "the warning is logged: {tail}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("REASON=Paused") && l.contains("MachineConfigPool/worker")),
        "the fleet event is logged: {tail}"
    );
    let routine = text
        .lines()
        .filter(|l| l.contains(" INFO ") && l.contains("OBJECT=Node/"))
        .count();
    let bound = NODE_EVENTS_BURST + NODE_EVENTS_PER_SECOND * (elapsed + 1.0);
    assert!(
        routine > 0 && (routine as f64) <= bound,
        "{routine} routine lines, at most {bound}"
    );
    let left_out: u64 = text
        .lines()
        .filter(|l| l.contains("node events not logged one by one"))
        .filter_map(|l| l.split("NORMAL=").nth(1))
        .filter_map(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    // Each node enrolled (and was handed its first config), then was handed the apply's.
    assert!(
        routine as u64 + left_out >= 2 * NODES as u64,
        "{routine} logged and {left_out} counted: {tail}"
    );
    // The metric counts them too (also those not said yet).
    let counted = metric(
        &api,
        r#"hearth_server_node_events_not_logged_total{event_type="Normal"}"#,
    )
    .await;
    assert!(counted >= left_out, "{counted} < {left_out}");
    // The apply alone made more routine events than a change keeps aside for the log.
    assert!(
        counted >= (NODES - hearth_server::fleet::events::KEPT_ASIDE) as u64,
        "{counted} counted"
    );
    assert_eq!(
        metric(
            &api,
            r#"hearth_server_node_events_not_logged_total{event_type="Warning"}"#
        )
        .await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_and_restart_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut server = spawn(&state);
    let api = api_for(&state, server.port);
    assert_eq!(
        api.with_token("").get("/healthz").await.status,
        StatusCode::OK
    );
    let a = api.apply(&example_files()).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let token = std::fs::read_to_string(state.join("tokens/worker.token"))
        .unwrap()
        .trim()
        .to_string();
    let mut nodes = Vec::new();
    for name in ["worker-0", "worker-1", "new-0"] {
        nodes.push((name, api.enroll(&token, name, json!({})).await));
    }
    for (_, n) in &nodes[..2] {
        let d = n.desired_name().await.unwrap();
        n.report("Done", Some(&d), Some(&d), None).await;
    }
    let before_nodes = api.get("/api/v1/nodes").await.json;
    let before_pools = api.get("/api/v1/pools").await.json;
    assert_eq!(counts(&api, "worker").await, (3, 2, 2, 0));

    // SIGKILL, right after a write was acknowledged.
    api.apply_text("x.yaml", &worker_mc("99-late", "late"))
        .await;
    let before_counts = counts(&api, "worker").await;
    assert_eq!(before_counts, (3, 0, 0, 0));
    let late_target = pool(&api, "worker").await["spec"]["configuration"]["name"].clone();
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop(server);
    tokio::time::sleep(Duration::from_millis(100)).await;

    let server = spawn(&state);
    let api = api_for(&state, server.port);
    let after_nodes = api.get("/api/v1/nodes").await.json;
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&after_nodes), names(&before_nodes));
    assert_eq!(counts(&api, "worker").await, before_counts);
    assert_eq!(
        api.get("/api/v1/pools").await.json["items"]
            .as_array()
            .unwrap()
            .len(),
        before_pools["items"].as_array().unwrap().len()
    );
    assert_eq!(
        pool(&api, "worker").await["spec"]["configuration"]["name"],
        late_target
    );
    assert_eq!(
        api.get("/api/v1/machineconfigs/99-late").await.status,
        StatusCode::OK
    );
    // Node credentials survive (only their hashes are stored).
    for (name, n) in &nodes {
        let n = Api {
            base: api.base.clone(),
            ..n.clone()
        };
        assert!(n.desired_name().await.is_some(), "{name}");
    }
    // A node enrolling again (with its credential) is the same node, not a second one.
    let w0 = &nodes.iter().find(|(n, _)| *n == "worker-0").unwrap().1;
    let a = api
        .with_token(&w0.token)
        .post(
            "/api/v1/enroll",
            &json!({"node": "worker-0", "bootstrapToken": token}),
        )
        .await;
    assert_eq!(a.status, reqwest::StatusCode::OK, "{}", a.text);
    assert_eq!(
        names(&api.get("/api/v1/nodes").await.json),
        names(&before_nodes)
    );
    assert_eq!(counts(&api, "worker").await.0, 3);
}
