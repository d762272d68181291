//! A FleetLock slot is held by its holder until steady state, whatever the agent reports.

use super::*;

// ---------------------------------------------------------------------------------------------
// 6. A reboot slot is held until its holder gives it back.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleetlock_slot_is_held_until_steady_state_whatever_the_agent_reports() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("a.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let w0 = api.enroll(&token, "w0", json!({})).await;
    let w1 = api.enroll(&token, "w1", json!({})).await;
    let cfg = w0.desired_name().await.unwrap();
    w0.report("Done", Some(&cfg), Some(&cfg), None).await;
    w1.report("Done", Some(&cfg), Some(&cfg), None).await;
    let acquire = json!({"action": "acquire"});

    // Zincati on w0 takes the pool's one slot (maxUnavailable 1).
    let r = api
        .send(api.fleetlock(&w0, "/v1/pre-reboot", "m0", "default"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // w0's agent reports Done in its desired config, as it does routinely: the slot stays taken.
    w0.report("Done", Some(&cfg), Some(&cfg), None).await;
    let node = api.get("/api/v1/nodes/w0").await;
    assert!(
        node.json["status"]["rebootSlot"].is_string(),
        "{}",
        node.text
    );
    assert_eq!(
        node.json["status"]["rebootSlotHolders"],
        json!(["fleetLock"])
    );
    let r = w1.post("/api/v1/agent/reboot-slot", &acquire).await;
    assert_eq!(r.json["granted"], false, "{}", r.text);
    // Nor does the agent's own release give back Zincati's hold.
    let r = w0
        .post("/api/v1/agent/reboot-slot", &json!({"action": "release"}))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = w1.post("/api/v1/agent/reboot-slot", &acquire).await;
    assert_eq!(r.json["granted"], false, "{}", r.text);
    // steady-state does.
    let r = api
        .send(api.fleetlock(&w0, "/v1/steady-state", "m0", "default"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = w1.post("/api/v1/agent/reboot-slot", &acquire).await;
    assert_eq!(r.json["granted"], true, "{}", r.text);

    // The other way round: w1's agent holds the slot; Zincati's steady-state at boot (which it
    // sends on every start) does not give it back, the agent's Done report does.
    let r = api
        .send(api.fleetlock(&w1, "/v1/steady-state", "m1", "default"))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api
        .send(api.fleetlock(&w0, "/v1/pre-reboot", "m0", "default"))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    w1.report("Done", Some(&cfg), Some(&cfg), None).await;
    let r = api
        .send(api.fleetlock(&w0, "/v1/pre-reboot", "m0", "default"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    s.shutdown().await;
}
