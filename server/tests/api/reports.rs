//! A node's whole report in its view. The server keeps a report's history, drift, progress
//! and actions only until the store has them, then reads them back from the store to show a
//! node: one node, a list of many (one read of every report), and after a restart.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// More than the server reads one by one (`GETS_AT_MOST`): the list reads them all at once.
const NODES: usize = 20;

fn status(i: usize, config: &str) -> Value {
    json!({
        "apiVersion": "hearth.io/v1", "kind": "AgentStatus",
        "state": "Done", "current": config, "desired": config,
        "lastTransition": "2026-11-25T09:00:00Z", "pendingReboot": false,
        "progress": {"phase": "files", "step": i, "total": 7},
        "drift": [format!("/etc/drift-{i}: content differs")],
        "history": [
            {"time": "2026-11-25T08:00:00Z", "state": "Working", "desired": config, "reason": format!("node {i} step")},
            {"time": "2026-11-25T09:00:00Z", "state": "Done", "desired": config},
        ],
    })
}

/// What a view shows of node `i`'s report.
fn assert_shows(view: &Value, i: usize, config: &str) {
    let s = &view["status"];
    assert_eq!(s["state"], "Done", "{view}");
    assert_eq!(s["current"], config, "{view}");
    assert_eq!(
        s["drift"],
        json!([format!("/etc/drift-{i}: content differs")]),
        "{view}"
    );
    assert_eq!(s["progress"]["step"], i, "{view}");
    let history = s["history"].as_array().unwrap();
    assert_eq!(history.len(), 2, "{view}");
    assert_eq!(history[0]["reason"], format!("node {i} step"), "{view}");
    assert_eq!(history[1]["state"], "Done", "{view}");
    assert!(s["lastReport"].is_string(), "{view}");
}

fn by_name(list: &Value) -> std::collections::HashMap<String, Value> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap().to_string(),
                n.clone(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_whole_report_is_shown_from_the_store_alone_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply(&example_files()).await;
    let token = bootstrap_token(&s, "worker");
    let mut config = String::new();
    for i in 0..NODES {
        let n = api.enroll(&token, &format!("w{i}"), json!({})).await;
        config = n.desired_name().await.unwrap();
        let r = n.post("/api/v1/agent/status", &status(i, &config)).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    }
    // Stored, so not kept in memory: what follows is read back from the store.
    let f = s.app.snapshot();
    for i in 0..NODES {
        let report = f.nodes[&format!("w{i}")].value.report.clone().unwrap();
        assert_eq!(report.json(), None, "w{i}'s report is still in memory");
    }
    drop(f);

    let one = api.get("/api/v1/nodes/w3").await;
    assert_eq!(one.status, StatusCode::OK, "{}", one.text);
    assert_shows(&one.json, 3, &config);
    let all = by_name(&api.get("/api/v1/nodes").await.json);
    let pool = by_name(&api.get("/api/v1/nodes?pool=worker").await.json);
    for i in 0..NODES {
        assert_shows(&all[&format!("w{i}")], i, &config);
        assert_shows(&pool[&format!("w{i}")], i, &config);
    }
    // A node that has not reported shows no report, whichever way it is listed.
    api.enroll(&token, "quiet", json!({})).await;
    let quiet = api.get("/api/v1/nodes/quiet").await.json;
    assert!(quiet["status"]["state"].is_null(), "{quiet}");
    assert_eq!(quiet["status"]["history"], json!([]), "{quiet}");
    assert!(by_name(&api.get("/api/v1/nodes").await.json)["quiet"]["status"]["state"].is_null());

    // A restart reads the reports back (summaries only in memory) and shows them whole.
    let version = one.json["metadata"]["resourceVersion"].clone();
    s.shutdown().await;
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let one = api.get("/api/v1/nodes/w3").await.json;
    assert_shows(&one, 3, &config);
    assert_eq!(one["metadata"]["resourceVersion"], version);
    let all = by_name(&api.get("/api/v1/nodes").await.json);
    for i in 0..NODES {
        assert_shows(&all[&format!("w{i}")], i, &config);
    }
    s.shutdown().await;
}
