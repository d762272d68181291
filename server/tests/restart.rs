//! The built binary, killed with SIGKILL and started again: everything it acknowledged is still
//! there, no node is lost or counted twice, credentials and tokens keep working.

mod common;

use common::binary::{self, api_for, Server};
use common::*;
use reqwest::StatusCode;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Starts the binary on 127.0.0.1:0.
fn spawn(state: &Path) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hearth-server"));
    cmd.arg("--state-dir")
        .arg(state)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--san",
            "localhost",
            "--san",
            "127.0.0.1",
        ])
        .env("RUST_LOG", "warn");
    binary::spawn(cmd)
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
