//! `POST /api/v1/pools/{name}/rollback`: a pool back to its previous rendered config, rolled out
//! under `maxUnavailable` like any change, held while its configs render to the one rolled back
//! from, ended by the next change; each step an event.

use crate::common::*;
use crate::rollout::{two_workers, TwoWorkers};
use reqwest::StatusCode;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_rolls_out_and_the_next_change_ends_it() {
    let TwoWorkers {
        dir: _dir,
        s,
        api,
        w0,
        w1,
        first,
    } = two_workers(1).await;
    // Nothing older to go back to.
    let r = api.post("/api/v1/pools/worker/rollback", &json!({})).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert!(r.text.contains("no rendered config older"), "{}", r.text);
    let r = api.post("/api/v1/pools/nope/rollback", &json!({})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = w0.post("/api/v1/pools/worker/rollback", &json!({})).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);

    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let second = w0.desired_name().await.unwrap();
    assert_ne!(first, second);
    w0.report("Done", Some(&second), Some(&second), None).await;
    assert_eq!(w1.desired_name().await, Some(second.clone()));
    w1.report("Done", Some(&second), Some(&second), None).await;

    let r = api.post("/api/v1/pools/worker/rollback", &json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["to"], first.as_str());
    assert_eq!(r.json["from"], second.as_str());
    let p = pool(&api, "worker").await;
    assert_eq!(p["spec"]["configuration"]["name"], first.as_str());
    assert_eq!(p["status"]["rollback"]["to"], first.as_str());
    assert_eq!(p["status"]["rollback"]["by"], "the admin token");
    // Rolled out like any change: one node at a time.
    assert_eq!(w0.desired_name().await, Some(first.clone()));
    assert_eq!(
        w1.desired_name().await,
        Some(second.clone()),
        "maxUnavailable 1"
    );
    w0.report("Done", Some(&first), Some(&first), None).await;
    assert_eq!(w1.desired_name().await, Some(first.clone()));
    w1.report("Done", Some(&first), Some(&first), None).await;
    let ev = api.events("MachineConfigPool/worker").await;
    assert!(
        ev.iter().any(|(r, m)| r == "RolledBack"
            && m.contains(&first)
            && m.contains(&second)
            && m.contains("the admin token")),
        "{ev:?}"
    );

    // Applying the same configs again renders the same `from`: the rollback holds.
    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    assert_eq!(w0.desired_name().await, Some(first.clone()));
    // A change ends it: the new render rolls out.
    api.apply_text("mc.yaml", &worker_mc("10-a", "three")).await;
    let third = w0.desired_name().await.unwrap();
    assert!(third != first && third != second, "{third}");
    let p = pool(&api, "worker").await;
    assert_eq!(p["status"]["rollback"], Value::Null);
    assert_eq!(p["spec"]["configuration"]["name"], third.as_str());
    let ev = api.events("MachineConfigPool/worker").await;
    assert!(ev.iter().any(|(r, _)| r == "RollbackEnded"), "{ev:?}");
    s.shutdown().await;
}
