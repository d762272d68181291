//! Maintenance windows over the API: invalid ones refused, reboots held until a window opens.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A worker pool with maintenance windows (the annotation), maxUnavailable 1.
fn windowed_pool(windows: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\n  annotations:\n    hearth.io/maintenance-windows: \"{windows}\"\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n  maxUnavailable: 1\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_maintenance_windows_are_refused_naming_pool_field_and_cause() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    for (windows, cause) in [
        (
            "Sat 02:00-06:00 Mars/Olympus_Mons",
            "is not a time zone of this system's zoneinfo",
        ),
        ("Sat 02:00-06:00; Sun 3:00-99:00", "window 2"),
        ("Caturday 02:00-06:00", "\\\"Caturday\\\" is not a day"),
        ("Sat 02:00-02:00", "starts and ends at the same time"),
    ] {
        let r = api
            .apply_text("pools/worker.yaml", &windowed_pool(windows))
            .await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
        for want in [
            "pools/worker.yaml",
            "metadata.annotations[hearth.io/maintenance-windows]",
            "MachineConfigPool \\\"worker\\\"",
            cause,
        ] {
            assert!(r.text.contains(want), "{windows}: {want} not in {}", r.text);
        }
    }
    // Nothing was stored.
    let p = pool(&api, "worker").await;
    assert_eq!(p["status"]["maintenance"], Value::Null, "{p:#}");
    // A named zone from the system's zoneinfo is taken, as the database spells it.
    let r = api
        .apply_text(
            "pools/worker.yaml",
            &windowed_pool("Sat 02:00-06:00 europe/berlin"),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let p = pool(&api, "worker").await;
    let message = p["status"]["maintenance"]["message"].as_str().unwrap_or("");
    assert!(message.contains("Sat 02:00-06:00 Europe/Berlin"), "{p:#}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_windows_hold_reboots_until_they_open() {
    // 2026-01-03 was a Saturday; 00:00 UTC.
    const SAT: u64 = 1_767_398_400;
    const H: u64 = 3600;
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(5);
    opts.tick = Duration::from_millis(200);
    let clock = opts.settings.window_clock.clone();
    // Saturday 01:00:30: the window opens in an hour.
    clock.set_now(SAT + H - 30);
    let s = start(dir.path(), opts).await;
    let api = Api::admin(&s);
    let policy = "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/hearth-test-20-no-reboot\n      actions: [{type: None}]\n";
    let r = api
        .apply(&[
            (
                "pool.yaml".into(),
                windowed_pool("Sat 02:00-06:00 UTC; Sun 02:00-04:00 UTC"),
            ),
            ("policy.yaml".into(), policy.into()),
            ("mc.yaml".into(), worker_mc("10-a", "one")),
        ])
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let token = bootstrap_token(&s, "worker");
    // New nodes get their config at once, window or not.
    let mut nodes = Vec::new();
    for i in 0..2 {
        nodes.push(api.enroll_done(&token, &format!("w{i}")).await);
    }
    let p = pool(&api, "worker").await;
    assert_eq!(p["status"]["maintenance"]["state"], "Closed", "{p:#}");
    assert_eq!(
        p["status"]["maintenance"]["message"],
        "waiting for the maintenance window Sat 02:00-06:00 UTC, opens in 1h0m"
    );
    assert_eq!(p["status"]["maintenance"]["waiting"], Value::Null);

    // A change that needs no reboot rolls out outside the window.
    api.apply_text("mc2.yaml", &worker_mc("20-no-reboot", "x"))
        .await;
    for n in &nodes {
        let d = n.desired_name().await.unwrap();
        n.report("Done", Some(&d), Some(&d), None).await;
    }
    let one = nodes[0].desired_name().await.unwrap();
    assert_eq!(nodes[1].desired_name().await.unwrap(), one);
    assert_eq!(
        pool(&api, "worker").await["status"]["updatedMachineCount"],
        2
    );

    // One that needs a reboot waits: no node is handed it, and both say why.
    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let target = pool(&api, "worker").await["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(target, one);
    let waiting = "waiting for the maintenance window Sat 02:00-06:00 UTC, opens in 1h0m";
    for (i, n) in nodes.iter().enumerate() {
        assert_eq!(n.desired_name().await.unwrap(), one);
        let node = api.get(&format!("/api/v1/nodes/w{i}")).await.json;
        assert_eq!(node["status"]["state"], "Done");
        assert_eq!(node["status"]["reason"], waiting, "{node:#}");
    }
    let p = pool(&api, "worker").await;
    assert_eq!(p["status"]["maintenance"]["waiting"], waiting, "{p:#}");
    let updating = p["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Updating")
        .unwrap()
        .clone();
    assert_eq!(updating["reason"], "MaintenanceWindow", "{updating}");
    assert_eq!(updating["message"], waiting);
    // And no reboot slot, through the agent API or FleetLock.
    let acquire = json!({"action": "acquire"});
    let r = nodes[0].post("/api/v1/agent/reboot-slot", &acquire).await;
    assert_eq!(r.json["granted"], false, "{}", r.text);
    assert_eq!(r.json["reason"], waiting);
    assert_eq!(r.json["retryAfterSeconds"], 300);
    let r = api
        .send(api.fleetlock(&nodes[1], "/v1/pre-reboot", "m1", "worker"))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert!(r.text.contains(waiting), "{}", r.text);

    // The window opens (the clock moves; the controller's tick notices, no other event).
    clock.set_now(SAT + 2 * H + 60);
    let deadline = Instant::now() + Duration::from_secs(10);
    while nodes[0].desired_name().await.unwrap() != target {
        assert!(Instant::now() < deadline, "w0 never got {target}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // One at a time (maxUnavailable 1); the wait is over for both.
    assert_eq!(nodes[1].desired_name().await.unwrap(), one);
    for i in 0..2 {
        let node = api.get(&format!("/api/v1/nodes/w{i}")).await.json;
        assert_eq!(node["status"]["waiting"], Value::Null, "{node:#}");
    }
    let p = pool(&api, "worker").await;
    assert_eq!(p["status"]["maintenance"]["state"], "Open");
    assert_eq!(p["status"]["maintenance"]["waiting"], Value::Null);
    let r = nodes[0].post("/api/v1/agent/reboot-slot", &acquire).await;
    assert_eq!(r.json["granted"], true, "{}", r.text);
    nodes[0]
        .report("Done", Some(&target), Some(&target), None)
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while nodes[1].desired_name().await.unwrap() != target {
        assert!(Instant::now() < deadline, "w1 never got {target}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The window closes before w1 reboots: its reboot waits for the next one (Sunday 02:00).
    clock.set_now(SAT + 6 * H + 30);
    nodes[1]
        .report("Rebooting", Some(&one), Some(&target), None)
        .await;
    let r = nodes[1].post("/api/v1/agent/reboot-slot", &acquire).await;
    assert_eq!(r.json["granted"], false, "{}", r.text);
    let next = "waiting for the maintenance window Sun 02:00-04:00 UTC, opens in 19h59m";
    assert_eq!(r.json["reason"], next);
    let node = api.get("/api/v1/nodes/w1").await.json;
    assert_eq!(node["status"]["state"], "Rebooting");
    assert_eq!(node["status"]["reason"], next, "{node:#}");
    let events = api.get("/api/v1/events?object=Node/w1").await.json;
    assert!(
        events.to_string().contains("WaitingForMaintenanceWindow"),
        "{events:#}"
    );
    clock.set_now(SAT + 26 * H + 1);
    let r = nodes[1].post("/api/v1/agent/reboot-slot", &acquire).await;
    assert_eq!(r.json["granted"], true, "{}", r.text);
    s.shutdown().await;
}
