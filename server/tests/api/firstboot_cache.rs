//! The first-boot answer is encoded once per (rendered config, Ignition version, token, node,
//! URL) and kept (server/src/firstboot_cache.rs): a kept answer must never outlive what it was
//! made from. A new bootstrap token, a new rendered config, another Ignition version and
//! another server name each get their own answer, and a replaced token is refused before any
//! kept answer is looked at.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// The decoded `/etc/hearth/agent.env` of a served config.
fn agent_env(config: &Value) -> String {
    let f = config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "/etc/hearth/agent.env")
        .expect("agent.env is served");
    let url = f["contents"]["source"].as_str().unwrap();
    String::from_utf8(hearth_config::dataurl::decode(url, None).unwrap()).unwrap()
}

fn has_file(config: &Value, path: &str) -> bool {
    config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["path"] == path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_first_boot_answers_follow_the_token_the_config_the_version_and_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let a = api.apply(&example_files()).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let old_token = bootstrap_token(&s, "worker");
    let boot = api.with_token(&old_token);

    // The same request twice: the same bytes.
    let first = boot.get("/config/worker").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(boot.get("/config/worker").await.text, first.text);
    assert!(agent_env(&first.json).contains(&format!("HEARTH_BOOTSTRAP_TOKEN={old_token}\n")));

    // Another Ignition version: its own answer.
    let v32 = boot
        .get_with(
            "/config/worker",
            &[(
                "accept",
                "application/vnd.coreos.ignition+json;version=3.2.0",
            )],
        )
        .await;
    assert_eq!(v32.json["ignition"]["version"], "3.2.0");
    assert_eq!(boot.get("/config/worker").await.text, first.text);

    // Another name for the server (Host): the URL embedded follows it.
    let other_host = boot
        .get_with(
            "/config/worker",
            &[("host", &format!("localhost:{}", s.addr.port()))],
        )
        .await;
    assert_eq!(other_host.status, StatusCode::OK, "{}", other_host.text);
    assert!(agent_env(&other_host.json).contains(&format!("https://localhost:{}", s.addr.port())));
    assert!(agent_env(&first.json).contains(&format!("https://127.0.0.1:{}", s.addr.port())));
    assert_ne!(other_host.text, first.text);

    // A new worker MachineConfig: a new rendered config, served at once.
    let a = api
        .apply(&[("new.yaml".into(), worker_mc("60-cache-test", "new"))])
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let mut after = boot.get("/config/worker").await;
    for _ in 0..100 {
        if has_file(&after.json, "/etc/hearth-test-60-cache-test") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        after = boot.get("/config/worker").await;
    }
    assert!(
        has_file(&after.json, "/etc/hearth-test-60-cache-test"),
        "the pool's new rendered config is served: {}",
        after.text
    );

    // A new bootstrap token: the old one is refused although its answer was kept; the new one
    // gets an answer carrying the new token.
    let t = api
        .post("/api/v1/pools/worker/bootstrap-token", &json!({}))
        .await;
    assert_eq!(t.status, StatusCode::OK, "{}", t.text);
    let new_token = t.json["token"].as_str().unwrap().to_string();
    assert_ne!(new_token, old_token);
    assert_eq!(
        boot.get("/config/worker").await.status,
        StatusCode::UNAUTHORIZED
    );
    let fresh = api.with_token(&new_token).get("/config/worker").await;
    assert_eq!(fresh.status, StatusCode::OK, "{}", fresh.text);
    let env = agent_env(&fresh.json);
    assert!(
        env.contains(&format!("HEARTH_BOOTSTRAP_TOKEN={new_token}\n")),
        "{env}"
    );
    assert!(!fresh.text.contains(&old_token));
}
