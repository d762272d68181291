//! Helpers for the tests of replicas on etcd (`etcd_server.rs`, `etcd_partition.rs`,
//! `fleet_replicas.rs`): another replica's state directory, `/healthz`, who holds the controller
//! role, polling until something holds, and `ip` for the network namespaces.

use super::Api;
use reqwest::StatusCode;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Prepares the state directory of another replica as docs/operations.md says: the fleet CA and
/// the admin token of the first.
pub fn replica_dir(first: &Path, new: &Path) {
    std::fs::create_dir_all(new.join("pki")).unwrap();
    for f in ["pki/ca.crt", "pki/ca.key", "admin.token"] {
        std::fs::copy(first.join(f), new.join(f)).unwrap();
    }
}

/// `/healthz` of a replica: status and text (`None`: no answer).
pub async fn healthz(api: &Api) -> Option<(StatusCode, String)> {
    let r = api
        .client
        .get(format!("{}/healthz", api.base))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    Some((r.status(), r.text().await.unwrap_or_default()))
}

/// Which of `apis` holds the controller role, once exactly one does (never two at a time;
/// bounded: a minute).
pub async fn controller(apis: &[&Api]) -> usize {
    for _ in 0..600 {
        let mut holders = Vec::new();
        for (i, a) in apis.iter().enumerate() {
            if let Some((StatusCode::OK, text)) = healthz(a).await {
                if text.contains("replica: controller") {
                    holders.push(i);
                }
            }
        }
        assert!(holders.len() <= 1, "two controllers at once: {holders:?}");
        if let [one] = holders[..] {
            return one;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no replica took the controller role within a minute");
}

/// Polls `f` every 100 ms until it holds; fails the test after `secs` seconds (a broken replica
/// fails the test, it does not hang it).
pub async fn eventually<F, Fut>(what: &str, secs: u64, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..secs * 10 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not within {secs} s");
}

/// `GET /api/v1/nodes` of the first of `apis` that answers: its items as listed (a node listed
/// twice shows twice). `None`: no replica answered.
pub async fn node_items(apis: &[Api]) -> Option<Vec<serde_json::Value>> {
    for api in apis {
        let Ok(r) = api
            .client
            .get(format!("{}/api/v1/nodes", api.base))
            .bearer_auth(&api.token)
            .timeout(Duration::from_secs(5))
            .send()
            .await
        else {
            continue;
        };
        if r.status() != StatusCode::OK {
            continue;
        }
        let text = r.text().await.unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        return v["items"].as_array().cloned();
    }
    None
}

/// The status of `POST /api/v1/enroll` of `node` with a bootstrap `token` through `api`.
pub async fn enroll_status(api: &Api, node: &str, token: &str) -> StatusCode {
    api.with_token("")
        .post(
            "/api/v1/enroll",
            &serde_json::json!({"node": node, "bootstrapToken": token}),
        )
        .await
        .status
}

/// Runs `ip ARGS` (iproute2), failing the test on an error.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}
