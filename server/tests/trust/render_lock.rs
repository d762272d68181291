//! Rendering is off the path of status reports, long-polls, enrollments, reboot slots and
//! FleetLock: they are answered while a render is held.

use super::*;

// ---------------------------------------------------------------------------------------------
// 1. Rendering is off the path of status reports, long-polls, enrollments and FleetLock.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_render_in_progress_holds_up_no_report_poll_enrollment_or_slot() {
    let g = Gated::start().await;
    let api = g.api.clone();
    let token = bootstrap_token(&g.server, "worker");
    let w0 = api.enroll(&token, "w0", json!({})).await;
    let w1 = api.enroll(&token, "w1", json!({})).await;
    let first = w0.desired_name().await.expect("a desired config");
    w0.report("Done", Some(&first), Some(&first), None).await;
    w1.report("Done", Some(&first), Some(&first), None).await;

    // An apply whose render is held until the test lets it go.
    g.hold();
    let apply = {
        let api = api.clone();
        tokio::spawn(async move { api.apply_text("b.yaml", &worker_mc("20-b", "two")).await })
    };
    g.rendering().await;

    // While it renders: a status report, a long-poll, an enrollment, a reboot slot, FleetLock.
    guarded(
        "a status report",
        w1.report("Working", Some(&first), Some(&first), None),
    )
    .await;
    let poll = guarded(
        "a long-poll",
        w0.get(&format!("/api/v1/agent/desired?known={first}&wait=1")),
    )
    .await;
    assert_eq!(poll.status, StatusCode::NOT_MODIFIED, "{}", poll.text);
    let w2 = guarded("an enrollment", api.enroll(&token, "w2", json!({}))).await;
    let slot = guarded(
        "a reboot slot",
        w1.post("/api/v1/agent/reboot-slot", &json!({"action": "acquire"})),
    )
    .await;
    assert_eq!(slot.status, StatusCode::OK, "{}", slot.text);
    let fl = guarded(
        "FleetLock",
        api.send(api.fleetlock(&w0, "/v1/steady-state", "m0", "default")),
    )
    .await;
    assert_eq!(fl.status, StatusCode::OK, "{}", fl.text);
    // The render was in progress all along.
    assert!(
        !apply.is_finished(),
        "the apply finished while its render was held"
    );
    let nodes = api.get("/api/v1/nodes").await;
    assert_eq!(nodes.json["items"].as_array().unwrap().len(), 3);
    assert_eq!(
        api.get("/api/v1/nodes/w1").await.json["status"]["state"],
        "Working"
    );

    // Let it go: the apply lands, with the node enrolled meanwhile in the fleet it rendered.
    g.release();
    let r = guarded("the apply", apply).await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let target = pool(&api, "worker").await["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(target, first);
    let node = api.get("/api/v1/nodes/w2").await;
    assert_eq!(node.json["status"]["target"], target.as_str());
    drop(w2);
    g.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reboot_plans_for_a_closed_window_are_made_outside_the_writer_lock() {
    // 2026-01-03 was a Saturday; 00:00 UTC: the window (Sat 02:00-06:00) is closed.
    const SAT: u64 = 1_767_398_400;
    let dir = tempfile::tempdir().unwrap();
    let opts = options(5);
    opts.settings.window_clock.set_now(SAT);
    let s = start(dir.path(), opts).await;
    let api = Api::admin(&s);
    let pool_yaml = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\n  annotations:\n    hearth.io/maintenance-windows: \"Sat 02:00-06:00 UTC\"\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n  maxUnavailable: 1\n";
    let r = api
        .apply(&[
            ("pool.yaml".into(), pool_yaml.into()),
            ("mc.yaml".into(), worker_mc("10-a", "one")),
        ])
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let token = bootstrap_token(&s, "worker");
    let mut nodes = Vec::new();
    for i in 0..3 {
        let n = api.enroll(&token, &format!("w{i}"), json!({})).await;
        let d = n.desired_name().await.unwrap();
        n.report("Done", Some(&d), Some(&d), None).await;
        nodes.push((n, d));
    }
    // A change that needs a reboot: outside the window, every reconcile asks whether each
    // node's update needs one — the apply, then every report and tick.
    let r = api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    for _ in 0..3 {
        for (n, d) in &nodes {
            n.report("Done", Some(d), Some(d), None).await;
        }
    }
    // The question was asked (the nodes wait for the window) ...
    let node = api.get("/api/v1/nodes/w0").await.json;
    assert!(
        node["status"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("waiting for the maintenance window"),
        "{node:#}"
    );
    // ... and answered outside the writer lock, by the apply that rendered.
    assert_eq!(
        metric(&api, "hearth_server_reboot_plans_under_lock_total").await,
        0
    );
    s.shutdown().await;
}
