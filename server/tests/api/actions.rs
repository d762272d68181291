//! Run-once actions on the wire: a MachineConfig's `spec.actions` reach the node in its desired
//! config; what the node reports of their runs (outcome, exit status, when, how long, the end
//! of the output) reaches the node view, bounded as every other part of a report.

use crate::common::*;
use serde_json::{json, Value};

const MC: &str = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-kubeinit
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
  actions:
  - name: kubeinit-extra
    script: |
      systemctl restart kubelet
    timeoutSeconds: 120
";

fn run(i: usize, config: &str, tail: &str) -> Value {
    json!({
        "name": format!("a{i}"), "config": config, "scriptDigest": "ab12",
        "when": "AfterFiles", "failure": "Degrade", "startedAt": "2026-11-24T16:00:00Z",
        "outcome": "Failed", "exitStatus": 3, "durationMs": 1500, "outputTail": tail,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn action_runs_reach_the_node_view_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", MC).await;
    let token = bootstrap_token(&s, "worker");
    let w0 = api.enroll_done(&token, "w0").await;
    let current = w0.desired_name().await.unwrap();
    // The node is handed the action with its config.
    let desired = w0.get("/api/v1/agent/desired?wait=0").await.json;
    assert_eq!(
        desired["spec"]["actions"][0]["name"], "kubeinit-extra",
        "{desired}"
    );
    assert_eq!(desired["spec"]["actions"][0]["timeoutSeconds"], 120);

    // 70 records, the last one with 10 KiB of output ending in an escape sequence.
    let mut runs: Vec<Value> = (0..69).map(|i| run(i, &current, "ok\n")).collect();
    let long = format!("{}\u{1b}[31mthe end\n", "x".repeat(10 * 1024));
    runs.push(run(69, &current, &long));
    w0.post_status(
        &json!({"state": "Done", "current": current, "desired": current, "actions": runs}),
    )
    .await;
    let view = api.get("/api/v1/nodes/w0").await.json;
    let actions = view["status"]["actions"].as_array().unwrap();
    // The newest 64 are kept.
    assert_eq!(actions.len(), 64);
    assert_eq!(actions[0]["name"], "a6");
    let last = &actions[63];
    assert_eq!(last["name"], "a69");
    assert_eq!(last["config"], current.as_str());
    assert_eq!(last["outcome"], "Failed");
    assert_eq!(last["exitStatus"], 3);
    assert_eq!(last["durationMs"], 1500);
    assert_eq!(last["startedAt"], "2026-11-24T16:00:00Z");
    assert_eq!(last["when"], "AfterFiles");
    // The end of the output is kept (at most 4 KiB of it), saying how much was cut.
    let tail = last["outputTail"].as_str().unwrap();
    assert!(tail.ends_with("\u{1b}[31mthe end\n"), "{tail:?}");
    assert!(
        tail.starts_with("[") && tail.contains("bytes cut by hearth-server"),
        "{tail:?}"
    );
    assert!(tail.len() < 4 * 1024 + 64, "{}", tail.len());
}
