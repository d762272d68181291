//! Changes on trial over the API: the desired answer carries the node's pool trial policy from
//! its annotations (the default without them, the new one at once after the annotations
//! change, though the rendered config's name does not); bad annotations are refused naming
//! the file, pool and field.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

fn pool(annotations: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\n  annotations:\n{annotations}spec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n  maxUnavailable: 1\n"
    )
}

async fn trial(n: &Api) -> Value {
    let a = n.get("/api/v1/agent/desired?wait=0").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    a.json["trial"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_desired_config_carries_the_pools_trial_policy() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let r = api
        .apply_text("pools/worker.yaml", &pool("    hearth.io/other: x\n"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let n = api.enroll(&token, "n0", json!({})).await;
    let name = n.desired_name().await.unwrap();
    assert_eq!(trial(&n).await, json!({"mode": "network", "seconds": 120}));

    let r = api
        .apply_text(
            "pools/worker.yaml",
            &pool("    hearth.io/trial: always\n    hearth.io/trial-seconds: \"300\"\n"),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(n.desired_name().await.as_deref(), Some(name.as_str()));
    assert_eq!(trial(&n).await, json!({"mode": "always", "seconds": 300}));

    for (annotations, field) in [
        (
            "    hearth.io/trial-seconds: \"5\"\n",
            "metadata.annotations[hearth.io/trial-seconds]",
        ),
        (
            "    hearth.io/trial: sometimes\n",
            "metadata.annotations[hearth.io/trial]",
        ),
    ] {
        let r = api
            .apply_text("pools/worker.yaml", &pool(annotations))
            .await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
        for want in [
            "pools/worker.yaml",
            field,
            "MachineConfigPool \\\"worker\\\"",
        ] {
            assert!(r.text.contains(want), "{want} not in {}", r.text);
        }
    }
    // Nothing was stored: the policy is still the last one applied.
    assert_eq!(trial(&n).await, json!({"mode": "always", "seconds": 300}));
    s.shutdown().await;
}
