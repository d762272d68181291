//! A node acts only as itself, and what it says is bounded.

use super::*;

// ---------------------------------------------------------------------------------------------
// 9. A node is not trusted: it acts only as itself, and what it says is bounded.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_acts_only_as_itself_and_its_words_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("a.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let w0 = api.enroll(&token, "w0", json!({})).await;
    let w1 = api.enroll(&token, "w1", json!({})).await;
    let cfg = w0.desired_name().await.unwrap();

    // w1 names w0 wherever a name can be put: it stays w1.
    let r = w1.get("/api/v1/agent/desired?node=w0").await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    let r = w1
        .post(
            "/api/v1/agent/status",
            &json!({"node": "w0", "state": "Degraded", "reason": "from w1"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    assert_eq!(
        api.get("/api/v1/nodes/w1").await.json["status"]["state"],
        "Degraded"
    );
    assert!(api.get("/api/v1/nodes/w0").await.json["status"]["state"].is_null());
    let r = api
        .send(api.fleetlock(&w1, "/v1/pre-reboot", "w0", "default"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(api.get("/api/v1/nodes/w0").await.json["status"]["rebootSlot"].is_null());
    assert!(api.get("/api/v1/nodes/w1").await.json["status"]["rebootSlot"].is_string());
    api.send(api.fleetlock(&w1, "/v1/steady-state", "w1", "default"))
        .await;

    // A huge report is stored bounded: reason, drift, history, progress.
    let r = w0
        .post(
            "/api/v1/agent/status",
            &json!({
                "state": "Degraded", "current": cfg, "desired": cfg,
                "reason": "\u{1b}[31m".to_string() + &"journal line\n".repeat(30_000),
                "drift": (0..10_000).map(|i| format!("/etc/f{i}: changed")).collect::<Vec<_>>(),
                "history": (0..3_000).map(|i| json!({"time": format!("t{i}"), "state": "Working", "reason": "r"})).collect::<Vec<_>>(),
                "progress": {"steps": "p".repeat(100_000)},
            }),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let n = api.get("/api/v1/nodes/w0").await.json;
    let reason = n["status"]["reason"].as_str().unwrap();
    assert!(
        reason.len() <= hearth_server::bounds::MAX_REASON + 100,
        "{}",
        reason.len()
    );
    assert!(
        reason.contains("cut by hearth-server"),
        "{}",
        &reason[reason.len() - 80..]
    );
    let drift = n["status"]["drift"].as_array().unwrap();
    assert_eq!(drift.len(), hearth_server::bounds::MAX_DRIFT_LINES + 1);
    assert!(drift
        .last()
        .unwrap()
        .as_str()
        .unwrap()
        .contains("9900 more"));
    let history = n["status"]["history"].as_array().unwrap();
    assert_eq!(history.len(), hearth_server::bounds::MAX_HISTORY);
    assert_eq!(history.last().unwrap()["time"], "t2999");
    assert!(n["status"]["progress"].to_string().len() < 1024);
    // The event that records the degradation is bounded too.
    let ev = api.get("/api/v1/events?object=Node/w0").await;
    assert!(ev.text.len() < 64 * 1024, "{}", ev.text.len());
    // A config name that is not one is refused, not cut.
    let r = w0
        .post(
            "/api/v1/agent/status",
            &json!({"state": "Done", "current": "x".repeat(300)}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(
        r.json["message"].as_str().unwrap().contains("current"),
        "{}",
        r.text
    );

    // Labels a new node enrolls with are bounded in number and size.
    let many: serde_json::Map<String, serde_json::Value> =
        (0..1000).map(|i| (format!("k{i}"), json!("v"))).collect();
    for labels in [
        json!(many),
        json!({"node-role.kubernetes.io/worker": "v".repeat(10_000)}),
    ] {
        let r = api
            .with_token("")
            .post(
                "/api/v1/enroll",
                &json!({"node": "w9", "labels": labels, "bootstrapToken": token}),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
        assert!(
            r.json["message"].as_str().unwrap().starts_with("labels"),
            "{}",
            r.text
        );
    }
    // And FleetLock's id.
    let r = api
        .send(
            api.client
                .post(format!("{}/v1/pre-reboot", api.base))
                .bearer_auth(&w0.token)
                .header("fleet-lock-protocol", "true")
                .body(
                    json!({"client_params": {"id": "i".repeat(10_000), "group": "default"}})
                        .to_string(),
                ),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    s.shutdown().await;
}
