//! Issue 9, "trust under hostile input": the server against hostile or careless clients, over
//! real TLS (HTTP/1.1 and HTTP/2). See docs/security.md.

mod common;

use common::*;
use reqwest::StatusCode;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// A guard against a deadlock, not a measurement: what it bounds either answers at once or
/// never (before the fix it waited for a render that the test holds forever).
const DEADLOCK_GUARD: Duration = Duration::from_secs(60);

async fn guarded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLOCK_GUARD, f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not complete while a render was held"))
}

async fn wait_for_file(p: &Path) {
    guarded("the render", async {
        while !p.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// A FleetLock request with the node's credential as Basic password (what Zincati sends).
fn fleetlock(api: &Api, node: &Api, path: &str, id: &str) -> reqwest::RequestBuilder {
    api.client
        .post(format!("{}{path}", api.base))
        .basic_auth("node", Some(node.token.clone()))
        .header("fleet-lock-protocol", "true")
        .body(json!({"client_params": {"id": id, "group": "default"}}).to_string())
}

// ---------------------------------------------------------------------------------------------
// 1. Rendering is off the path of status reports, long-polls, enrollments and FleetLock.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_render_in_progress_holds_up_no_report_poll_enrollment_or_slot() {
    let dir = tempfile::tempdir().unwrap();
    let gate = tempfile::tempdir().unwrap();
    let s = start(
        dir.path(),
        hearth_server::app::Options {
            render_gate: Some(gate.path().to_path_buf()),
            ..options(5)
        },
    )
    .await;
    let api = Api::admin(&s);
    let r = api.apply_text("a.yaml", &worker_mc("10-a", "one")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let token = bootstrap_token(&s, "worker");
    let w0 = api.enroll(&token, "w0", json!({})).await;
    let w1 = api.enroll(&token, "w1", json!({})).await;
    let first = w0.desired_name().await.expect("a desired config");
    w0.report("Done", Some(&first), Some(&first), None).await;
    w1.report("Done", Some(&first), Some(&first), None).await;

    // An apply whose render is held until the test lets it go.
    std::fs::write(gate.path().join("hold"), b"").unwrap();
    let apply = {
        let api = api.clone();
        tokio::spawn(async move { api.apply_text("b.yaml", &worker_mc("20-b", "two")).await })
    };
    wait_for_file(&gate.path().join("rendering")).await;

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
        api.send(fleetlock(&api, &w0, "/v1/steady-state", "m0")),
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
    std::fs::remove_file(gate.path().join("hold")).unwrap();
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
    s.shutdown().await;
}

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
// 2, 3, 4. HTTP limits, Status documents for every error, refusals over HTTP/2.

/// The same server through an HTTP/1.1-only and an HTTP/2-only client.
fn both_versions(api: &Api, ca: &[u8]) -> Vec<(reqwest::Version, Api)> {
    let build = |h2: bool| {
        let b = reqwest::Client::builder()
            .tls_certs_only(reqwest::Certificate::from_pem_bundle(ca).unwrap())
            .timeout(DEADLOCK_GUARD);
        let b = if h2 {
            b.http2_prior_knowledge()
        } else {
            b.http1_only()
        };
        Api {
            client: b.build().unwrap(),
            ..api.clone()
        }
    };
    vec![
        (reqwest::Version::HTTP_11, build(false)),
        (reqwest::Version::HTTP_2, build(true)),
    ]
}

/// Sends, and checks the HTTP version and that the answer is a `Status` document.
async fn status_doc(
    api: &Api,
    version: reqwest::Version,
    r: reqwest::RequestBuilder,
    code: StatusCode,
    reason: &str,
) -> String {
    let resp = r
        .send()
        .await
        .unwrap_or_else(|e| panic!("{version:?}: no answer but {e:?}"));
    assert_eq!(resp.version(), version);
    let status = resp.status();
    let ctype = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string());
    let text = resp.text().await.unwrap();
    assert_eq!(status, code, "{version:?}: {text}");
    assert_eq!(
        ctype.as_deref(),
        Some("application/json"),
        "{version:?} {code}: {text}"
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["kind"], "Status", "{text}");
    assert_eq!(v["code"], code.as_u16(), "{text}");
    assert_eq!(v["reason"], reason, "{text}");
    let message = v["message"].as_str().unwrap().to_string();
    assert!(!message.is_empty(), "{text}");
    let _ = api;
    message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_status_documents_over_http1_and_http2() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let admin = Api::admin(&s);
    let ca = std::fs::read(dir.path().join("pki/ca.crt")).unwrap();
    let token = bootstrap_token(&s, "worker");
    let node = admin.enroll(&token, "w0", json!({})).await;
    let report = json!({"apiVersion": "hearth.io/v1", "kind": "AgentStatus", "state": "Done",
        "reason": "x".repeat(10_000)})
    .to_string();
    for (v, api) in both_versions(&admin, &ca) {
        let url = |p: &str| format!("{}{p}", api.base);
        let c = &api.client;
        // 4. Unauthenticated or unauthorized POSTs with a body: their status, not a reset.
        status_doc(
            &api,
            v,
            c.post(url("/api/v1/agent/status")).body(report.clone()),
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
        )
        .await;
        status_doc(
            &api,
            v,
            c.post(url("/api/v1/manifests"))
                .bearer_auth(&node.token)
                .body(worker_mc("10-a", "x")),
            StatusCode::FORBIDDEN,
            "Forbidden",
        )
        .await;
        status_doc(
            &api,
            v,
            c.post(url("/api/v1/manifests"))
                .bearer_auth("hearth-admin-nope")
                .body("x".repeat(200_000)),
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
        )
        .await;
        status_doc(
            &api,
            v,
            c.post(url("/api/v1/enroll")).body(r#"{"node": "w9"}"#),
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
        )
        .await;
        status_doc(
            &api,
            v,
            c.post(url("/api/v1/pools/worker/pause")).body("{}"),
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
        )
        .await;
        let r = c
            .post(url("/v1/pre-reboot"))
            .header("fleet-lock-protocol", "true")
            .body(json!({"client_params": {"id": "x", "group": "default"}}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.version(), v);
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let fl: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        assert_eq!(fl["kind"], "unauthorized");

        // 3. axum's own refusals are Status documents too.
        status_doc(
            &api,
            v,
            c.get(url("/nope")).bearer_auth(&admin.token),
            StatusCode::NOT_FOUND,
            "NotFound",
        )
        .await;
        status_doc(
            &api,
            v,
            c.get(url("/api/v1/enroll")),
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
        )
        .await;
        status_doc(
            &api,
            v,
            c.post(url("/api/v1/nodes/w0/labels"))
                .bearer_auth(&admin.token)
                .header("content-type", "text/plain")
                .body("{}"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
        )
        .await;
        let m = status_doc(
            &api,
            v,
            c.post(url("/api/v1/nodes/w0/labels"))
                .bearer_auth(&admin.token)
                .header("content-type", "application/json")
                .body("{"),
            StatusCode::BAD_REQUEST,
            "BadRequest",
        )
        .await;
        assert!(m.to_lowercase().contains("json"), "{m}");
        status_doc(
            &api,
            v,
            c.post(url("/api/v1/nodes/w0/labels"))
                .bearer_auth(&admin.token)
                .header("content-type", "application/json")
                .body(r#"{"set": 5}"#),
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
        )
        .await;
        status_doc(
            &api,
            v,
            c.get(url("/api/v1/events?limit=many"))
                .bearer_auth(&admin.token),
            StatusCode::BAD_REQUEST,
            "BadRequest",
        )
        .await;

        // 2. Limits: a body over its endpoint's limit, headers over the limit.
        status_doc(
            &api,
            v,
            c.post(url("/api/v1/agent/status"))
                .bearer_auth(&node.token)
                .body("x".repeat(2 << 20)),
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
        )
        .await;
        let m = status_doc(
            &api,
            v,
            c.get(url("/api/v1/pools"))
                .bearer_auth(&admin.token)
                .header("x-big", "y".repeat(100 * 1024)),
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "RequestHeaderFieldsTooLarge",
        )
        .await;
        assert!(m.contains("65536"), "{m}");
        status_doc(
            &api,
            v,
            c.get(url("/api/v1/pools"))
                .bearer_auth(&admin.token)
                .header("x-big", "y".repeat(500 * 1024)),
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "RequestHeaderFieldsTooLarge",
        )
        .await;
        // Above what hyper buffers: still 431 (hyper's own, no body) or, over HTTP/2, a
        // refused stream; never a wait.
        match c
            .get(url("/api/v1/pools"))
            .bearer_auth(&admin.token)
            .header("x-big", "y".repeat(2 << 20))
            .send()
            .await
        {
            Ok(r) => assert_eq!(r.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE),
            Err(e) => assert!(v == reqwest::Version::HTTP_2 && !e.is_timeout(), "{e:?}"),
        }
        // The same connection settings serve normal requests.
        assert_eq!(
            c.get(url("/api/v1/pools"))
                .bearer_auth(&admin.token)
                .send()
                .await
                .unwrap()
                .status(),
            StatusCode::OK
        );
    }
    s.shutdown().await;
}

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
    let r = api.send(fleetlock(&api, &w0, "/v1/pre-reboot", "m0")).await;
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
        .send(fleetlock(&api, &w0, "/v1/steady-state", "m0"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = w1.post("/api/v1/agent/reboot-slot", &acquire).await;
    assert_eq!(r.json["granted"], true, "{}", r.text);

    // The other way round: w1's agent holds the slot; Zincati's steady-state at boot (which it
    // sends on every start) does not give it back, the agent's Done report does.
    let r = api
        .send(fleetlock(&api, &w1, "/v1/steady-state", "m1"))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api.send(fleetlock(&api, &w0, "/v1/pre-reboot", "m0")).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    w1.report("Done", Some(&cfg), Some(&cfg), None).await;
    let r = api.send(fleetlock(&api, &w0, "/v1/pre-reboot", "m0")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    s.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// 7. Every file the server creates is private, whatever the umask.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_keeps_its_state_private_under_umask_022() {
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let mut child = std::process::Command::new("sh")
        .args(["-c", "umask 022; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_hearth-server"))
        .arg("--state-dir")
        .arg(&state)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--san",
            "localhost",
            "--san",
            "127.0.0.1",
        ])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let child = Kill(child);
    let first = lines.next().unwrap().unwrap();
    std::thread::spawn(move || for _ in lines {});
    let port: u16 = first
        .split_whitespace()
        .nth(3)
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let api = Api {
        base: format!("https://127.0.0.1:{port}"),
        client: client(&std::fs::read(state.join("pki/ca.crt")).unwrap()),
        token: std::fs::read_to_string(state.join("admin.token"))
            .unwrap()
            .trim()
            .to_string(),
    };
    // Files written later too: a commit, a rotated token (and a token file for a new pool).
    assert_eq!(
        api.apply_text("a.yaml", &worker_mc("10-a", "one"))
            .await
            .status,
        StatusCode::OK
    );
    let r = api
        .post("/api/v1/pools/worker/bootstrap-token", &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    drop(child);

    let mut seen = Vec::new();
    let mut stack = vec![state.clone()];
    while let Some(dir) = stack.pop() {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is {mode:o}", dir.display());
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else {
                let mode = m.permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{} is {mode:o}", p.display());
                seen.push(
                    p.strip_prefix(&state)
                        .unwrap()
                        .to_string_lossy()
                        .to_string(),
                );
            }
        }
    }
    seen.sort();
    for f in [
        "hearth.redb",
        "admin.token",
        "metrics.token",
        "tokens/worker.token",
        "pki/ca.key",
    ] {
        assert!(seen.iter().any(|s| s == f), "{f} not among {seen:?}");
    }
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
    let r = api.send(fleetlock(&api, &w1, "/v1/pre-reboot", "w0")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(api.get("/api/v1/nodes/w0").await.json["status"]["rebootSlot"].is_null());
    assert!(api.get("/api/v1/nodes/w1").await.json["status"]["rebootSlot"].is_string());
    api.send(fleetlock(&api, &w1, "/v1/steady-state", "w1"))
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

// ---------------------------------------------------------------------------------------------
// 2. Slow clients: a body or headers that never finish are cut off, not waited for forever.

/// A raw TLS connection to the server (HTTP/1.1 written by hand).
async fn raw_tls(
    port: u16,
    ca_pem: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(ca_pem).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect("127.0.0.1".try_into().unwrap(), tcp)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_get_408_and_slow_headers_are_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let ca = std::fs::read(dir.path().join("pki/ca.crt")).unwrap();
    let port = s.addr.port();
    // Both started together; each is cut off after its 30 s, whatever the client does.
    let body = async {
        let mut c = raw_tls(port, &ca).await;
        c.write_all(
            b"POST /api/v1/agent/status HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{",
        )
        .await
        .unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).to_string()
    };
    let headers = async {
        let mut c = raw_tls(port, &ca).await;
        c.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: ")
            .await
            .unwrap();
        let mut out = Vec::new();
        // Ends (hyper closes the connection) rather than waiting for the rest.
        let _ = c.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).to_string()
    };
    let guard = Duration::from_secs(120);
    let (body, headers) = tokio::time::timeout(guard, async { tokio::join!(body, headers) })
        .await
        .expect("the server cut off slow clients");
    assert!(body.starts_with("HTTP/1.1 408"), "{body}");
    assert!(body.contains("\"reason\":\"RequestTimeout\""), "{body}");
    assert!(!headers.contains("200 OK"), "{headers}");
    s.shutdown().await;
}

/// The value of a metric without labels.
async fn metric(api: &Api, name: &str) -> u64 {
    let text = api.get("/metrics").await.text;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .trim()
        .parse()
        .unwrap()
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
