//! An admin's one-off requests to a node (`hearth node force`, `restore-file`) on the wire: each
//! gets an id and an event naming the admin, rides in the node's desired answer (waking its
//! long-poll) until the node reports it done, then ends with the node's outcome as an event;
//! refusals name the path and the config; a node has at most MAX_PENDING_REQUESTS pending.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// A worker MachineConfig writing `/etc/r0` ... `/etc/r{n-1}`.
fn files_mc(n: usize) -> String {
    let mut files = String::new();
    for i in 0..n {
        files.push_str(&format!(
            "      - path: /etc/r{i}\n        contents:\n          source: \"data:,{i}\"\n"
        ));
    }
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 10-files\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      files:\n{files}"
    )
}

fn requests(desired: &Value) -> Vec<(u64, String, String)> {
    desired["requests"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            (
                r["id"].as_u64().unwrap(),
                r["action"].as_str().unwrap().to_string(),
                r["path"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_ride_the_desired_answer_until_the_node_reports_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &files_mc(10)).await;
    let token = bootstrap_token(&s, "worker");
    let w0 = api.enroll_done(&token, "w0").await;
    let current = w0.desired_name().await.unwrap();

    // Refusals name what is wrong.
    let r = api
        .post(
            "/api/v1/nodes/w0/restore-file",
            &json!({"path": "/etc/passwd"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(
        r.text.contains("/etc/passwd") && r.text.contains(&current),
        "{}",
        r.text
    );
    let r = api
        .post("/api/v1/nodes/w0/restore-file", &json!({"path": "etc/r0"}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    let r = api.post("/api/v1/nodes/nobody/force", &json!({})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = w0.post("/api/v1/nodes/w0/force", &json!({})).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);

    // A waiting long-poll (known config, nothing new) is woken by the request.
    let poll = {
        let w0 = w0.clone();
        let current = current.clone();
        tokio::spawn(async move {
            w0.get(&format!(
                "/api/v1/agent/desired?known={current}&done=0&wait=60"
            ))
            .await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let r = api.post("/api/v1/nodes/w0/force", &json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        (r.json["id"].as_u64(), r.json["outcome"].as_str()),
        (Some(1), Some("requested"))
    );
    let woken = poll.await.unwrap();
    assert_eq!(woken.status, StatusCode::OK, "{}", woken.text);
    assert_eq!(requests(&woken.json), [(1, "force".into(), String::new())]);
    // Asked again while pending: the same request.
    let r = api.post("/api/v1/nodes/w0/force", &json!({})).await;
    assert_eq!(
        (r.json["id"].as_u64(), r.json["outcome"].as_str()),
        (Some(1), Some("unchanged"))
    );
    let ev = api.events("Node/w0").await;
    assert_eq!(
        ev.iter().filter(|(r, _)| r == "ForceRequested").count(),
        1,
        "{ev:?}"
    );
    assert!(
        ev.iter()
            .any(|(r, m)| r == "ForceRequested" && m.contains("the admin token")),
        "{ev:?}"
    );

    // Restore requests up to the bound, then a refusal naming it.
    for i in 0..7 {
        let r = api
            .post(
                "/api/v1/nodes/w0/restore-file",
                &json!({"path": format!("/etc/r{i}")}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert_eq!(r.json["id"].as_u64(), Some(i + 2));
    }
    let r = api
        .post("/api/v1/nodes/w0/restore-file", &json!({"path": "/etc/r9"}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert!(r.text.contains("8 requests pending"), "{}", r.text);

    // An agent that does not say what it did (an older one) never gets them: no busy loop.
    let r = w0
        .get(&format!("/api/v1/agent/desired?known={current}&wait=0"))
        .await;
    assert_eq!(r.status, StatusCode::NOT_MODIFIED, "{}", r.text);
    // Those above `done` only.
    let r = w0
        .get(&format!(
            "/api/v1/agent/desired?known={current}&done=7&wait=0"
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        requests(&r.json),
        [(8, "restoreFile".into(), "/etc/r6".into())]
    );

    // The node reports the first two: one done, one failed; the rest stay pending.
    let r = w0
        .post(
            "/api/v1/agent/status",
            &json!({
                "state": "Done", "current": current, "desired": current,
                "requestsDone": 2,
                "requestResults": [
                    {"id": 1, "action": "force", "ok": true, "message": "re-applied in full; verified"},
                    {"id": 2, "action": "restoreFile", "path": "/etc/r0", "ok": false,
                     "message": "not restored: \u{1b}[31mbusy"},
                ],
            }),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let view = api.get("/api/v1/nodes/w0").await.json;
    let states: Vec<(u64, String)> = view["status"]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_u64().unwrap(),
                r["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(states[0], (1, "Done".into()));
    assert_eq!(states[1], (2, "Failed".into()));
    assert!(
        states[2..].iter().all(|(_, s)| s == "Pending"),
        "{states:?}"
    );
    let ev = api.events("Node/w0").await;
    assert!(
        ev.iter()
            .any(|(r, m)| r == "ForceDone" && m.contains("verified")),
        "{ev:?}"
    );
    assert!(
        ev.iter()
            .any(|(r, m)| r == "RestoreFileFailed" && m.contains("/etc/r0")),
        "{ev:?}"
    );
    let r = w0
        .get(&format!(
            "/api/v1/agent/desired?known={current}&done=2&wait=0"
        ))
        .await;
    assert_eq!(requests(&r.json).first().map(|r| r.0), Some(3));
    // Room again: a new request gets the next id.
    let r = api
        .post("/api/v1/nodes/w0/restore-file", &json!({"path": "/etc/r9"}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["id"].as_u64(), Some(9));
    s.shutdown().await;
}

/// A node deleted and enrolled again keeps its agent's journal: its next request's id is above
/// what it reported acting on, or the agent would take it for one it already did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_stay_above_what_the_node_reported() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &files_mc(1)).await;
    let token = bootstrap_token(&s, "worker");
    let w0 = api.enroll(&token, "w0", json!({})).await;
    let current = w0.desired_name().await.unwrap();
    let r = w0
        .post(
            "/api/v1/agent/status",
            &json!({"state": "Done", "current": current, "desired": current, "requestsDone": 5}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let r = api.post("/api/v1/nodes/w0/force", &json!({})).await;
    assert_eq!(r.json["id"].as_u64(), Some(6), "{}", r.text);
    let r = w0
        .get(&format!(
            "/api/v1/agent/desired?known={current}&done=5&wait=0"
        ))
        .await;
    assert_eq!(requests(&r.json), [(6, "force".into(), String::new())]);
    s.shutdown().await;
}

/// What `restore-file` accepts is what the agent can put back (`hearth_config::paths`, the same
/// list the drift monitor compares): a unit file and the drop-in of a unit, not the drop-in of a
/// masked unit (systemd ignores it; the agent keeps no expected contents for it), nor a mask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_file_takes_what_the_agent_can_put_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let mc = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 10-units\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    systemd:\n      units:\n      - name: a.service\n        contents: \"[Service]\\nExecStart=/bin/true\\n\"\n        dropins:\n        - name: 10-a.conf\n          contents: \"[Service]\\nNice=1\\n\"\n      - name: m.service\n        mask: true\n        dropins:\n        - name: 10-m.conf\n          contents: \"[Service]\\nNice=1\\n\"\n";
    let r = api.apply_text("mc.yaml", mc).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let token = bootstrap_token(&s, "worker");
    api.enroll_done(&token, "w0").await;
    let restore = |path: &'static str| {
        let api = api.clone();
        async move {
            api.post("/api/v1/nodes/w0/restore-file", &json!({"path": path}))
                .await
                .status
        }
    };
    assert_eq!(
        restore("/etc/systemd/system/a.service").await,
        StatusCode::OK
    );
    assert_eq!(
        restore("/etc/systemd/system/a.service.d/10-a.conf").await,
        StatusCode::OK
    );
    assert_eq!(
        restore("/etc/systemd/system/m.service").await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        restore("/etc/systemd/system/m.service.d/10-m.conf").await,
        StatusCode::BAD_REQUEST
    );
}
