//! Enrollment, long-polls, authentication and authorization, first-boot Ignition in every
//! version a node asks for.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enrollment_and_long_polls() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    assert_eq!(
        api.apply_text("mc.yaml", &worker_mc("10-a", "one"))
            .await
            .status,
        StatusCode::OK
    );
    let node = api
        .enroll(&bootstrap_token(&s, "worker"), "w0", json!({}))
        .await;
    let n = api.get("/api/v1/nodes/w0").await.json;
    assert_eq!(n["status"]["pool"], "worker");
    assert_eq!(
        n["metadata"]["labels"]["node-role.kubernetes.io/worker"],
        ""
    );

    // Behind: the answer comes at once.
    let t = Instant::now();
    let a = node.get("/api/v1/agent/desired?wait=30").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert!(t.elapsed() < Duration::from_secs(2));
    let first = a.json["name"].as_str().unwrap().to_string();
    assert!(first.starts_with("rendered-worker-"));
    assert!(a.json["spec"]["config"]["storage"]["files"].is_array());
    assert!(a.json["policies"].is_object());

    // Unchanged: 304 after `wait`, less up to a tenth of it (the spread).
    let t = Instant::now();
    let a = node
        .get(&format!("/api/v1/agent/desired?known={first}&wait=1"))
        .await;
    assert_eq!(a.status, StatusCode::NOT_MODIFIED);
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(850) && waited < Duration::from_secs(3),
        "{waited:?}"
    );

    // Waiting, woken by an apply that changes the node's config.
    let poll = {
        let node = node.clone();
        let first = first.clone();
        tokio::spawn(async move {
            let a = node
                .get(&format!("/api/v1/agent/desired?known={first}&wait=60"))
                .await;
            (a, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let applied = Instant::now();
    assert_eq!(
        api.apply_text("mc.yaml", &worker_mc("10-a", "two"))
            .await
            .status,
        StatusCode::OK
    );
    let (a, answered) = poll.await.unwrap();
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let latency = answered.duration_since(applied);
    eprintln!("long-poll woke {latency:?} after the apply was sent");
    assert!(latency < Duration::from_secs(2), "{latency:?}");
    assert_ne!(a.json["name"], first.as_str());

    // The metrics show the long-polls.
    let m = api.get("/metrics").await;
    assert!(
        m.text.contains("hearth_server_long_polls_total"),
        "{}",
        m.text
    );
    assert!(
        m.text
            .contains("hearth_server_nodes{pool=\"worker\",state=\"Unknown\"} 1"),
        "{}",
        m.text
    );
    // How long answers took, per route: the enrollment is counted once; the long-polls, which
    // wait on purpose, are not in the histogram.
    assert!(
        m.text.contains(
            "hearth_server_http_request_duration_seconds_count{method=\"POST\",route=\"/api/v1/enroll\"} 1\n"
        ),
        "{}",
        m.text
    );
    assert!(
        !m.text
            .contains("hearth_server_http_request_duration_seconds_count{method=\"GET\",route=\"/api/v1/agent/desired\"}"),
        "{}",
        m.text
    );
    s.shutdown().await;
}

/// A second machine with an enrolled node's name (issue 35): refused (409), and the refusal is
/// an event on the node saying from where, with which pool's token and how often (one event a
/// minute, counting the rest); resetting the credential while such claims arrive warns that the
/// name goes to whichever machine enrolls first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_machine_claiming_a_name_is_an_event_and_a_reset_warns() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let a = api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let token = bootstrap_token(&s, "worker");
    let node = api.enroll(&token, "w0", json!({})).await;
    let d = node.desired_name().await.unwrap();
    node.report("Done", Some(&d), Some(&d), None).await;
    for _ in 0..3 {
        let a = api
            .with_token("")
            .post(
                "/api/v1/enroll",
                &json!({"node": "w0", "bootstrapToken": token}),
            )
            .await;
        assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
        assert!(
            a.text.contains("hearth node reset-credential w0"),
            "{}",
            a.text
        );
    }
    let refused: Vec<String> = api
        .events("Node/w0")
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "EnrollRefused")
        .map(|(_, m)| m)
        .collect();
    assert_eq!(
        refused.len(),
        1,
        "one event for three refusals within a minute: {refused:?}"
    );
    assert!(
        refused[0].contains("at 127.0.0.1") && refused[0].contains("pool worker"),
        "{refused:?}"
    );
    // The node's own credential still works: it reports (a second later: times are in
    // seconds), and stays Done.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    node.report("Done", Some(&d), Some(&d), None).await;
    let a = api
        .post("/api/v1/nodes/w0/reset-credential", &json!({}))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(a.json["credentialRevoked"], true);
    let warning = a.json["warning"].as_str().expect("a warning");
    assert!(
        warning.contains("3 refused claim(s) of this node's name")
            && warning.contains("from 127.0.0.1")
            && warning.contains("the node itself was heard from")
            && warning.contains("whichever enrolls first"),
        "{warning}"
    );
    // A reinstalled node: silent since the claims of its name began (they are its own), so
    // its reset warns of nothing.
    let _w1 = api.enroll(&token, "w1", json!({})).await;
    let a = api
        .with_token("")
        .post(
            "/api/v1/enroll",
            &json!({"node": "w1", "bootstrapToken": token}),
        )
        .await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    let a = api
        .post("/api/v1/nodes/w1/reset-credential", &json!({}))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert!(a.json.get("warning").is_none(), "{}", a.text);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_and_authorization() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply(&example_files()).await;
    let worker_token = bootstrap_token(&s, "worker");
    let w0 = api.enroll(&worker_token, "worker-0", json!({})).await;

    // Nothing without credentials but /healthz.
    let anon = api.with_token("");
    assert_eq!(anon.get("/healthz").await.status, StatusCode::OK);
    for path in [
        "/api/v1/pools",
        "/api/v1/nodes",
        "/metrics",
        "/api/v1/agent/desired",
        "/config/worker",
    ] {
        let a = anon.get(path).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(a.headers.contains_key("www-authenticate"));
    }
    let wrong = api.with_token("hearth-admin-0000");
    assert_eq!(
        wrong.get("/api/v1/pools").await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        wrong.get("/config/worker").await.status,
        StatusCode::UNAUTHORIZED
    );

    // A node reads only its own config.
    assert_eq!(
        w0.get("/api/v1/agent/desired?node=worker-1").await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        w0.get("/api/v1/nodes/worker-1").await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        w0.get("/api/v1/renderedconfigs").await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(w0.get("/config/worker").await.status, StatusCode::FORBIDDEN);
    assert_eq!(w0.get("/config/infra").await.status, StatusCode::FORBIDDEN);
    let mine = w0.desired_name().await.unwrap();
    assert!(mine.starts_with("rendered-worker-") && !mine.contains("worker-1"));

    // A bootstrap token serves its own pool only, and cannot enroll into another.
    let boot = api.with_token(&worker_token);
    assert_eq!(boot.get("/config/worker").await.status, StatusCode::OK);
    assert_eq!(
        boot.get("/config/master").await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        boot.get("/api/v1/pools").await.status,
        StatusCode::FORBIDDEN
    );
    let a = anon
        .post("/api/v1/enroll", &json!({"node": "m0", "labels": {"node-role.kubernetes.io/master": ""}, "bootstrapToken": worker_token}))
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text);
    assert!(a.text.contains("belongs to pool master"), "{}", a.text);
    // Node credentials cannot enroll or administer.
    let a = w0.post("/api/v1/enroll", &json!({"node": "x"})).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);

    // An expired bootstrap token.
    let t = api
        .post(
            "/api/v1/pools/infra/bootstrap-token",
            &json!({"ttlSeconds": 1}),
        )
        .await;
    assert_eq!(t.status, StatusCode::OK, "{}", t.text);
    let infra_token = t.json["token"].as_str().unwrap().to_string();
    assert!(t.json["expiresAt"].is_string());
    let ok = anon
        .post(
            "/api/v1/enroll",
            &json!({"node": "infra-0", "bootstrapToken": infra_token}),
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let a = anon
        .post("/api/v1/enroll", &json!({"node": "infra-9", "labels": {"node-role.kubernetes.io/infra": ""}, "bootstrapToken": infra_token}))
        .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(a.text.contains("expired"), "{}", a.text);

    // A deleted node's credential stops working.
    assert_eq!(
        api.delete("/api/v1/nodes/worker-0").await.status,
        StatusCode::OK
    );
    assert_eq!(
        w0.get("/api/v1/agent/desired").await.status,
        StatusCode::UNAUTHORIZED
    );

    // Re-enrollment (with the node's current credential) replaces the credential.
    let again = api.enroll(&worker_token, "worker-9", json!({})).await;
    let a = again
        .post(
            "/api/v1/enroll",
            &json!({"node": "worker-9", "bootstrapToken": worker_token}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let again2 = api.with_token(a.json["credential"].as_str().unwrap());
    assert_eq!(
        again.get("/api/v1/agent/desired").await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        again2.get("/api/v1/agent/desired").await.status,
        StatusCode::OK
    );

    // A client that does not trust the server's CA fails the TLS handshake.
    let other = tempfile::tempdir().unwrap();
    hearth_server::pki::init(
        &hearth_server::pki::Layout {
            dir: other.path().to_path_buf(),
        },
        &["localhost".to_string()],
    )
    .unwrap();
    let stranger = client(&std::fs::read(other.path().join("pki/ca.crt")).unwrap());
    let e = stranger
        .get(format!("{}/healthz", api.base))
        .send()
        .await
        .unwrap_err();
    let mut chain = format!("{e}");
    let mut src = std::error::Error::source(&e);
    while let Some(x) = src {
        chain.push_str(&format!(": {x}"));
        src = x.source();
    }
    assert!(
        e.is_connect() || chain.to_lowercase().contains("certificate"),
        "{chain}"
    );
    assert!(
        chain.to_lowercase().contains("certificate") || chain.contains("UnknownIssuer"),
        "{chain}"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_boot_ignition_in_every_asked_version() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply(&example_files()).await;
    let token = bootstrap_token(&s, "worker");
    let boot = api.with_token(&token);
    for v in ["2.2.0", "3.2.0", "3.4.0", "3.5.0"] {
        let accept = format!("application/vnd.coreos.ignition+json;version={v}, */*;q=0.1");
        let a = boot
            .get_with("/config/worker", &[("accept", &accept)])
            .await;
        assert_eq!(a.status, StatusCode::OK, "{v}: {}", a.text);
        assert_eq!(a.json["ignition"]["version"], v);
        let ct = a.headers["content-type"].to_str().unwrap();
        assert!(ct.contains(v), "{ct}");
        // Parseable as Ignition of that version by hearth's own reader.
        let files = a.json["storage"]["files"].as_array().unwrap();
        let env = files
            .iter()
            .find(|f| f["path"] == "/etc/hearth/agent.env")
            .unwrap();
        assert_eq!(env["mode"], 0o600);
        if v == "2.2.0" {
            assert_eq!(env["filesystem"], "root");
        }
        let src = env["contents"]["source"].as_str().unwrap();
        let text = String::from_utf8(hearth_config::dataurl::decode(src, None).unwrap()).unwrap();
        assert!(
            text.contains(&format!("HEARTH_BOOTSTRAP_TOKEN={token}")),
            "{text}"
        );
        assert!(text.contains("HEARTH_SERVER=https://127.0.0.1:"), "{text}");
        assert!(files.iter().any(|f| f["path"] == "/etc/hearth/ca.crt"));
        let wrapped = json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "served"},
            "spec": {"config": a.json},
        });
        // Valid as hearth reads configs, but for the agent's own files and unit that the server
        // itself adds for the first boot, which a MachineConfig may not write
        // (`hearth_config::own`).
        let (m, d) = hearth_config::manifest::read_str("served", &wrapped.to_string());
        let units = a.json["systemd"]["units"].as_array().unwrap();
        let refused: Vec<String> = d
            .iter()
            .filter(|d| d.is_error())
            .map(|d| {
                let index = |prefix: &str, suffix: &str| -> Option<usize> {
                    d.path
                        .strip_prefix(prefix)?
                        .strip_suffix(suffix)?
                        .parse()
                        .ok()
                };
                if let Some(i) = index("spec.config.storage.files[", "].path") {
                    format!("file {}", files[i]["path"].as_str().unwrap())
                } else if let Some(i) = index("spec.config.systemd.units[", "].enabled") {
                    format!("enabled {}", units[i]["name"].as_str().unwrap())
                } else {
                    format!("{}: {}", d.path, d.message)
                }
            })
            .collect();
        assert_eq!(
            refused,
            [
                "file /etc/hearth/ca.crt",
                "file /etc/hearth/agent.env",
                "file /etc/hearth/firstboot-config",
                "enabled hearth-agent.service"
            ],
            "{v}: {d:?}"
        );
        assert_eq!(m.machine_configs.len(), 0, "refused as a MachineConfig");
    }
    // The token as a query parameter (Ignition cannot send headers to a config URL).
    let q = api
        .with_token("")
        .get(&format!("/config/worker?token={token}"))
        .await;
    assert_eq!(q.status, StatusCode::OK);
    assert_eq!(q.json["ignition"]["version"], "3.5.0");
    // Unknown versions: 406 with the supported list.
    let a = boot
        .get_with(
            "/config/worker",
            &[(
                "accept",
                "application/vnd.coreos.ignition+json;version=3.9.0",
            )],
        )
        .await;
    assert_eq!(a.status, StatusCode::NOT_ACCEPTABLE);
    assert!(
        a.text.contains("3.9.0") && a.text.contains("2.2.0, 2.3.0"),
        "{}",
        a.text
    );
    s.shutdown().await;
}
