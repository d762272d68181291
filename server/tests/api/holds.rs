//! An admin's holds on a node: a pin keeps it on one rendered config while its pool moves on,
//! an exclusion takes it out of the rollout (no new desired config, no capacity, no halt); each
//! is an event naming the admin.

use crate::common::*;
use crate::rollout::{two_workers, worker_pool, TwoWorkers};
use reqwest::StatusCode;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_node_stays_on_its_config_until_unpinned() {
    let TwoWorkers {
        dir: _dir,
        s,
        api,
        w0,
        w1,
        first,
    } = two_workers(2).await;

    // Refusals name what is wrong: an unknown config, an unknown node, a node's own credential.
    let r = api
        .post(
            "/api/v1/nodes/w0/pin",
            &json!({"config": "rendered-worker-nope"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    assert!(r.text.contains("rendered-worker-nope"), "{}", r.text);
    let r = api
        .post("/api/v1/nodes/nobody/pin", &json!({"config": first}))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = w0
        .post("/api/v1/nodes/w0/pin", &json!({"config": first}))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);

    let r = api
        .post("/api/v1/nodes/w0/pin", &json!({"config": first}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["action"], "pinned");
    assert_eq!(r.json["pinned"], first.as_str());
    // Pinning again changes nothing.
    let r = api
        .post("/api/v1/nodes/w0/pin", &json!({"config": first}))
        .await;
    assert_eq!(r.json["action"], "unchanged", "{}", r.text);

    // The pool moves on; the pinned node stays (both fit in maxUnavailable 2).
    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let second = w1.desired_name().await.unwrap();
    assert_ne!(first, second);
    assert_eq!(w0.desired_name().await, Some(first.clone()));
    let node = api.get("/api/v1/nodes/w0").await.json;
    assert_eq!(node["status"]["target"], first.as_str());
    assert_eq!(node["status"]["pinned"]["config"], first.as_str());
    assert_eq!(node["status"]["pinned"]["by"], "the admin token");
    let ev = api.events("Node/w0").await;
    assert!(
        ev.iter()
            .any(|(r, m)| r == "Pinned" && m.contains(&first) && m.contains("the admin token")),
        "{ev:?}"
    );

    // Unpinned, it follows its pool again.
    let r = api.delete("/api/v1/nodes/w0/pin").await;
    assert_eq!(r.json["action"], "unpinned", "{}", r.text);
    assert_eq!(r.json["pinned"], Value::Null);
    assert_eq!(w0.desired_name().await, Some(second.clone()));
    assert_eq!(
        api.get("/api/v1/nodes/w0").await.json["status"]["pinned"],
        Value::Null
    );
    let ev = api.events("Node/w0").await;
    assert!(ev.iter().any(|(r, _)| r == "Unpinned"), "{ev:?}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_excluded_node_neither_gets_configs_nor_holds_up_the_rollout() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("pool.yaml", &worker_pool(1, None)).await;
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let mut nodes = Vec::new();
    for i in 0..3 {
        nodes.push(api.enroll_done(&token, &format!("w{i}")).await);
    }
    let first = nodes[0].desired_name().await.unwrap();
    // w0's hardware fails: Degraded. Without the exclusion it would halt the rollout (and take
    // the one unavailable slot).
    nodes[0]
        .report("Degraded", Some(&first), Some(&first), Some("disk gone"))
        .await;
    let r = nodes[1].post("/api/v1/nodes/w0/exclude", &json!({})).await;
    assert_eq!(
        r.status,
        StatusCode::FORBIDDEN,
        "a node cannot exclude: {}",
        r.text
    );
    let r = api.post("/api/v1/nodes/w0/exclude", &json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["action"], "excluded");
    assert_eq!(r.json["excluded"], true);

    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let second = nodes[1].desired_name().await.unwrap();
    assert_ne!(
        first, second,
        "the rollout goes on past the excluded, degraded w0"
    );
    assert_eq!(
        nodes[2].desired_name().await,
        Some(first.clone()),
        "maxUnavailable 1"
    );
    nodes[1]
        .report("Done", Some(&second), Some(&second), None)
        .await;
    assert_eq!(nodes[2].desired_name().await, Some(second.clone()));
    nodes[2]
        .report("Done", Some(&second), Some(&second), None)
        .await;
    // The excluded node got nothing new.
    assert_eq!(nodes[0].desired_name().await, Some(first.clone()));
    let node = api.get("/api/v1/nodes/w0").await.json;
    assert_eq!(node["status"]["excluded"]["by"], "the admin token");

    // Included again, the degraded node gets the fix at once (it is unavailable already).
    let r = api.delete("/api/v1/nodes/w0/exclude").await;
    assert_eq!(r.json["action"], "included", "{}", r.text);
    assert_eq!(nodes[0].desired_name().await, Some(second.clone()));
    let ev = api.events("Node/w0").await;
    for reason in ["Excluded", "Included"] {
        assert!(
            ev.iter()
                .any(|(r, m)| r == reason && m.contains("the admin token")),
            "{reason}: {ev:?}"
        );
    }
    s.shutdown().await;
}
