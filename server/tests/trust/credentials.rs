//! Bootstrap tokens (expiry, rotation, never for an enrolled name) and the read-only metrics
//! token.

use super::*;

// ---------------------------------------------------------------------------------------------
// 5. Enrollment identity: a bootstrap token cannot take over an enrolled node's name; tokens
//    expire and rotate.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_token_cannot_take_over_an_enrolled_node() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("a.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let w0 = api.enroll(&token, "w0", json!({})).await;
    let first = w0.desired_name().await.unwrap();
    w0.report("Done", Some(&first), Some(&first), None).await;

    // Anyone with the pool's bootstrap token (every node has it) tries to become w0.
    let thief = api
        .with_token("")
        .post(
            "/api/v1/enroll",
            &json!({"node": "w0", "bootstrapToken": token}),
        )
        .await;
    assert_eq!(thief.status, StatusCode::CONFLICT, "{}", thief.text);
    assert_eq!(thief.json["kind"], "Status");
    let msg = thief.json["message"].as_str().unwrap();
    assert!(msg.contains("already enrolled"), "{msg}");
    assert!(msg.contains("reset-credential"), "{msg}");
    // The same with the bootstrap token as the bearer token, and with another node's credential.
    let w1 = api.enroll(&token, "w1", json!({})).await;
    let r = api
        .with_token(&token)
        .post("/api/v1/enroll", &json!({"node": "w0"}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    let r = w1
        .post(
            "/api/v1/enroll",
            &json!({"node": "w0", "bootstrapToken": token}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    // w0 still works: its credential, its desired config, its reports.
    assert_eq!(w0.desired_name().await.as_deref(), Some(first.as_str()));
    w0.report("Done", Some(&first), Some(&first), None).await;
    let node = api.get("/api/v1/nodes/w0").await;
    assert_eq!(node.json["status"]["state"], "Done");

    // An admin revokes the credential of a node that lost it; then the bootstrap token enrolls it.
    // A long-poll of the node that is waiting ends with 401.
    let poll = {
        let w0 = w0.clone();
        let first = first.clone();
        tokio::spawn(async move {
            w0.get(&format!("/api/v1/agent/desired?known={first}&wait=3600"))
                .await
        })
    };
    // The poll is waiting once the server counts it.
    guarded("the long-poll", async {
        while !api
            .get("/metrics")
            .await
            .text
            .contains("hearth_server_long_polls_waiting 1")
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let r = api
        .post("/api/v1/nodes/w0/reset-credential", &json!({}))
        .await;
    let p = guarded("the long-poll's end", poll).await.unwrap();
    assert_eq!(p.status, StatusCode::UNAUTHORIZED, "{}", p.text);
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["credentialRevoked"], true);
    assert_eq!(
        w0.get("/api/v1/agent/desired").await.status,
        StatusCode::UNAUTHORIZED
    );
    // Only an admin may reset.
    let r = w1
        .post("/api/v1/nodes/w0/reset-credential", &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    let w0b = api.enroll(&token, "w0", json!({})).await;
    assert_eq!(w0b.desired_name().await.as_deref(), Some(first.as_str()));
    let events = api.get("/api/v1/events?object=Node/w0").await;
    assert!(events.text.contains("CredentialReset"), "{}", events.text);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_tokens_expire_by_default_and_rotate() {
    // The built-in pools' tokens made at first start carry the server's default lifetime.
    let dir = tempfile::tempdir().unwrap();
    let s = start(
        dir.path(),
        hearth_server::app::Options {
            bootstrap_ttl: Some(Duration::from_secs(1)),
            ..options(5)
        },
    )
    .await;
    let api = Api::admin(&s);
    let token = bootstrap_token(&s, "worker");
    // Past its lifetime (the server's clock has second resolution).
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let r = api
        .with_token("")
        .post(
            "/api/v1/enroll",
            &json!({"node": "w0", "bootstrapToken": token}),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    assert!(
        r.json["message"].as_str().unwrap().contains("expired"),
        "{}",
        r.text
    );
    let r = api
        .with_token("")
        .get_with(&format!("/config/worker?token={token}"), &[])
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);

    // Rotation: a new token (with the default lifetime unless told), written to the pool's
    // token file; the old one stays refused.
    let r = api
        .post(
            "/api/v1/pools/worker/bootstrap-token",
            &json!({"ttlSeconds": 3600}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let new = r.json["token"].as_str().unwrap().to_string();
    assert!(r.json["expiresAt"].is_string());
    assert_eq!(bootstrap_token(&s, "worker"), new);
    api.enroll(&new, "w0", json!({})).await;
    let r = api
        .with_token("")
        .post(
            "/api/v1/enroll",
            &json!({"node": "w1", "bootstrapToken": token}),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    // Without ttlSeconds: the server's default lifetime; 0: none.
    let r = api
        .post("/api/v1/pools/worker/bootstrap-token", &json!({}))
        .await;
    assert!(r.json["expiresAt"].is_string(), "{}", r.text);
    let r = api
        .post(
            "/api/v1/pools/worker/bootstrap-token",
            &json!({"ttlSeconds": 0}),
        )
        .await;
    assert!(r.json["expiresAt"].is_null(), "{}", r.text);
    // A custom pool's token file lives as long as the pool.
    let pool_yaml = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: infra\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: infra\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/infra: \"\"\n";
    let r = api.apply_text("infra.yaml", pool_yaml).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = api
        .post("/api/v1/pools/infra/bootstrap-token", &json!({}))
        .await;
    assert_eq!(
        bootstrap_token(&s, "infra"),
        r.json["token"].as_str().unwrap()
    );
    assert_eq!(
        api.delete("/api/v1/pools/infra").await.status,
        StatusCode::OK
    );
    assert!(!s.layout.bootstrap_token("infra").exists());
    s.shutdown().await;

    // The binary's default: 24 hours.
    assert_eq!(
        hearth_server::app::Options::default().bootstrap_ttl,
        Some(Duration::from_secs(24 * 3600))
    );
}

// ---------------------------------------------------------------------------------------------
// 8. A read-only scrape credential for /metrics.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_token_reads_metrics_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let admin = Api::admin(&s);
    let metrics_token = std::fs::read_to_string(dir.path().join("metrics.token")).unwrap();
    let prom = admin.with_token(metrics_token.trim());
    let r = prom.get("/metrics").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(
        r.text.contains("hearth_server_store_revision"),
        "{}",
        r.text
    );
    // The admin still reads it.
    assert_eq!(admin.get("/metrics").await.status, StatusCode::OK);
    // Nothing else: reads, writes, agent and first-boot endpoints.
    for (method, path) in [
        ("GET", "/api/v1/pools"),
        ("GET", "/api/v1/nodes"),
        ("POST", "/api/v1/pools/worker/pause"),
        ("POST", "/api/v1/pools/worker/bootstrap-token"),
        ("GET", "/api/v1/agent/desired"),
        ("POST", "/api/v1/enroll"),
        ("GET", "/config/worker"),
    ] {
        let r = if method == "GET" {
            prom.get(path).await
        } else {
            prom.post(path, &json!({"node": "w0"})).await
        };
        assert!(
            r.status == StatusCode::FORBIDDEN || r.status == StatusCode::UNAUTHORIZED,
            "{method} {path}: {} {}",
            r.status,
            r.text
        );
        assert_eq!(r.json["kind"], "Status", "{}", r.text);
    }
    assert!(!pool(&admin, "worker").await["spec"]["paused"]
        .as_bool()
        .unwrap());
    // Without a token, nothing.
    assert_eq!(
        admin.with_token("").get("/metrics").await.status,
        StatusCode::UNAUTHORIZED
    );
    s.shutdown().await;
}
