//! Events at scale: a node's routine events, however many, do not push out the pools' events or
//! a node's warnings (`hearth get events`, `hearth describe`), also after a restart.

use crate::common::*;
use crate::rollout::{two_workers, TwoWorkers};
use hearth_server::fleet::events::KEPT_PER_CLASS;
use reqwest::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pools_event_and_a_nodes_warning_outlive_a_thousand_routine_node_events() {
    let TwoWorkers {
        dir,
        s,
        api,
        w0,
        w1,
        first: config,
    } = two_workers(1).await;
    let r = api
        .post("/api/v1/pools/worker/pause", &serde_json::json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    w1.report(
        "Degraded",
        Some(&config),
        Some(&config),
        Some("unit x failed"),
    )
    .await;
    // More routine events of another node than any one list keeps: each report a change of
    // state, so each an event.
    working_then_done(&w0, &config, KEPT_PER_CLASS / 2 + 1).await;

    let check = |api: Api| async move {
        let pool = api.events("MachineConfigPool/worker").await;
        assert!(
            pool.iter().any(|(reason, _)| reason == "Paused"),
            "the pool's event is still listed: {pool:?}"
        );
        let w1 = api.events("Node/w1").await;
        assert!(
            w1.iter()
                .any(|(reason, message)| reason == "Degraded" && message.contains("unit x failed")),
            "the node's warning is still listed: {w1:?}"
        );
        // The routine list keeps the last ones: w0's enrollment is gone, its last report is
        // there, and the whole list is one timeline, newest last.
        let w0 = api.events("Node/w0").await;
        assert!(!w0.iter().any(|(reason, _)| reason == "Enrolled"), "{w0:?}");
        assert_eq!(w0.last().map(|(r, _)| r.as_str()), Some("Done"), "{w0:?}");
        let all = api.get("/api/v1/events?limit=100000").await;
        let items = all.json["items"].as_array().unwrap();
        assert!(
            items.len() <= 3 * KEPT_PER_CLASS && items.len() > KEPT_PER_CLASS,
            "{} events",
            items.len()
        );
        // By type: the warning alone (`hearth get events --type warning`); anything else 400.
        let warnings = api.get("/api/v1/events?type=Warning").await;
        let warnings = warnings.json["items"].as_array().unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(warnings[0]["object"], "Node/w1");
        let bad = api.get("/api/v1/events?type=warning").await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
        assert!(bad.text.contains("Normal or Warning"), "{}", bad.text);
        let times: Vec<&str> = items.iter().map(|e| e["time"].as_str().unwrap()).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "oldest first");
        let last = &items[items.len() - 1];
        assert_eq!(
            (last["object"].as_str(), last["reason"].as_str()),
            (Some("Node/w0"), Some("Done"))
        );
    };
    check(Api::admin(&s)).await;
    // The same after a restart (read back from the store).
    s.shutdown().await;
    let s = start(dir.path(), options(5)).await;
    check(Api::admin(&s)).await;
    s.shutdown().await;
}

/// The log's budget for nodes' events, without the clock: with a burst of 5 and no refill, all
/// but 5 of a node's routine events are left out of the log, and counted, whatever the time the
/// test takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_takes_a_burst_of_node_events_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(
        dir.path(),
        hearth_server::app::Options {
            node_events_budget: (5.0, 0.0),
            ..options(5)
        },
    )
    .await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let w0 = api.enroll_done(&token, "w0").await;
    let config = w0.desired_name().await.unwrap();
    working_then_done(&w0, &config, 10).await;
    let routine = api.events("Node/w0").await.len() as u64;
    assert!(routine > 20, "{routine}");
    let not_logged = |t: &'static str| {
        let api = api.clone();
        async move {
            metric(
                &api,
                &format!(r#"hearth_server_node_events_not_logged_total{{event_type="{t}"}}"#),
            )
            .await
        }
    };
    assert_eq!(not_logged("Normal").await, routine - 5);
    assert_eq!(not_logged("Warning").await, 0);
    s.shutdown().await;
}

/// `rounds` reports of `Working` (a new reason each time) then `Done` in `config`: two events each.
async fn working_then_done(node: &Api, config: &str, rounds: usize) {
    for i in 0..rounds {
        let step = format!("step {i}");
        node.report("Working", Some(config), Some(config), Some(&step))
            .await;
        node.report("Done", Some(config), Some(config), None).await;
    }
}
